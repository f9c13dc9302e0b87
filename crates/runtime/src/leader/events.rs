//! Leadership said where people look: a `LeaderElection` Event on the Lease each time this
//! replica starts or stops leading, worded as client-go's leader election words them
//! (`<identity> became leader`, `<identity> stopped leading`), so `kubectl get events` in
//! jobwarden's namespace tells who led when, as it does for kube-controller-manager.
//!
//! Best effort: an Event that cannot be written is logged and forgotten; leading never waits
//! for one.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{Api, Client};

use jobwarden_events::{EventRecord, EventReporter, Seen, record_event};

use super::LeaseSettings;

/// What [`LeaderEvents::say`] needs: the Lease's client and where the Lease is.
pub struct LeaderEvents {
    client: Client,
    namespace: String,
    lease: String,
    reporter: EventReporter,
}

impl LeaderEvents {
    /// Events on the Lease of `lease`, reported by `component` (the controller's name) and
    /// the Lease's identity of this replica.
    pub fn new(client: Client, lease: &LeaseSettings, component: &str) -> LeaderEvents {
        LeaderEvents {
            client,
            namespace: lease.namespace.clone(),
            lease: lease.name.clone(),
            reporter: EventReporter {
                component: component.to_owned(),
                instance: lease.identity.clone(),
            },
        }
    }

    /// Writes `<identity> <what>` on the Lease, in a task of its own.
    pub fn say(&self, what: &str) {
        let (client, namespace, lease) = (
            self.client.clone(),
            self.namespace.clone(),
            self.lease.clone(),
        );
        let reporter = self.reporter.clone();
        let event = EventRecord {
            warning: false,
            reason: "LeaderElection".to_owned(),
            message: format!("{} {what}", reporter.instance),
        };
        tokio::spawn(async move {
            // The uid lets `kubectl describe lease` find the Event; without it (the Lease
            // unreadable right now) the Event still lists under its name.
            let uid = Api::<Lease>::namespaced(client.clone(), &namespace)
                .get_opt(&lease)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.metadata.uid);
            let regarding = ObjectReference {
                api_version: Some("coordination.k8s.io/v1".to_owned()),
                kind: Some("Lease".to_owned()),
                namespace: Some(namespace),
                name: Some(lease),
                uid,
                ..ObjectReference::default()
            };
            let now = k8s_openapi::jiff::Timestamp::now();
            if let Err(e) =
                record_event(&client, &regarding, &event, &reporter, Seen::once(now)).await
            {
                tracing::debug!(error = %e, message = %event.message, "writing the LeaderElection Event");
            }
        });
    }
}
