//! Leading, with everything said and counted: one Lease, its `LeaderElection` Events, the
//! leadership metrics, and in each term the task the caller gives, which may join the tasks of
//! several controllers. What leads knows nothing of the election, and the election nothing of
//! what leads.

use std::future::Future;

use kube::Client;

use crate::client::Answers;
use crate::leader::events::LeaderEvents;
use crate::leader::metrics::LeaderMetrics;
use crate::leader::{self, Leadership, LeaseSettings, SettingsError, Term};

/// What leading takes.
pub struct Election {
    /// The Lease's own client (`ControllerClients::leader_election`).
    pub client: Client,
    pub lease: LeaseSettings,
    /// Who reports the `LeaderElection` Events: the controller's name.
    pub component: String,
    /// When the API server last answered the work's requests, so that a Lease lost while it
    /// answers is counted as jobwarden's own fault (`ControllerClients::answers`).
    pub answers: Answers,
    pub metrics: LeaderMetrics,
}

impl Election {
    /// Runs `task` in each term of leadership, until `shutdown` has resolved, the last term's
    /// task has stopped and the Lease is released (as [`leader::lead`]).
    pub async fn run<T, F>(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
        task: T,
    ) -> Result<(), SettingsError>
    where
        T: FnMut(Term) -> F,
        F: Future<Output = ()>,
    {
        let Election {
            client,
            lease,
            component,
            answers,
            metrics,
        } = self;
        let said = LeaderEvents::new(client.clone(), &lease, &component);
        leader::lead_in_cluster(
            client,
            lease,
            shutdown,
            |change| {
                metrics.observe(&answers, change);
                match change {
                    Leadership::Started => said.say("became leader"),
                    Leadership::Renewed { .. } => {}
                    Leadership::Stopped { .. } => said.say("stopped leading"),
                }
            },
            task,
        )
        .await
    }
}
