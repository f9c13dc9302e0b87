//! The policy file, followed while jobwarden runs. The kubelet updates a mounted ConfigMap by
//! swapping a symlink (`..data`), never by writing the file in place, so the file is read
//! again every two seconds through its path and its text compared by hash: a new text is
//! parsed and checked exactly as `serve` does at start (the same function, the same words),
//! then put to the consumers' vetoes; only then does it replace the running policy, whole.
//! A refusal keeps the running policy and is said once per text: an error log line, a
//! `PolicyRefused` Warning Event on jobwarden's own Pod, `jobwarden_policy_reloads_total`.
//!
//! Every replica follows the file (a standby that takes over runs the newest valid policy);
//! consumers read the running policy from a [`PolicyFeed`], never from the file.

mod judge;
mod metrics;
pub mod pod_event;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jobwarden_admission::Policy;
use jobwarden_admission::policy::{PolicyVeto, PolicyVetoes, VetoRegistration, content_hash};
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::{PolicyError, ServeArgs, parse_policy_bytes};
use judge::{Followed, Judgement, judge};
use metrics::PolicyMetrics;
use pod_event::OwnPod;

/// How often the file is read again: about the kubelet's own pace of noticing a changed
/// ConfigMap is a minute, so two seconds adds nothing a person would wait for, and reading a
/// small file that often costs nothing.
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// The running policy, and the vetoes a new one must pass: what `serve` hands each consumer.
/// Cloning shares both.
#[derive(Debug, Clone)]
pub struct PolicyFeed {
    current: watch::Receiver<Arc<Policy>>,
    vetoes: PolicyVetoes,
    /// A fixed policy's sender, kept so that `changed()` waits instead of ending at once.
    _fixed: Option<Arc<watch::Sender<Arc<Policy>>>>,
}

impl PolicyFeed {
    /// A policy that never changes (no `--config`; tests).
    pub fn fixed(policy: Policy) -> PolicyFeed {
        let (sender, current) = watch::channel(Arc::new(policy));
        PolicyFeed {
            current,
            vetoes: PolicyVetoes::default(),
            _fixed: Some(Arc::new(sender)),
        }
    }

    /// The running policy now.
    pub fn current(&self) -> Arc<Policy> {
        self.current.borrow().clone()
    }

    /// The running policy, and each one that replaces it (`changed()`, then `borrow_and_update()`).
    pub fn subscribe(&self) -> watch::Receiver<Arc<Policy>> {
        self.current.clone()
    }

    /// Asks `veto` before every new policy is applied, until the registration is dropped; a
    /// refusal refuses the policy whole, as an invalid file is refused. `by` names the
    /// consumer in the refusal ("refused by the dispatcher: ...").
    pub fn register_veto(&self, by: &str, veto: impl PolicyVeto + 'static) -> VetoRegistration {
        self.vetoes.register(by, veto)
    }

    /// The vetoes registered now.
    pub fn vetoes(&self) -> &PolicyVetoes {
        &self.vetoes
    }
}

/// `serve`'s reading of the policy file's bytes: the file, then the flags added.
type Parse = Box<dyn Fn(&[u8]) -> Result<Policy, PolicyError> + Send + Sync>;

/// What the follower does with a new text: `serve`'s parse, where refusals go, and how often
/// it looks.
pub(crate) struct PolicyFollower {
    path: PathBuf,
    parse: Parse,
    poll_interval: Duration,
    sender: watch::Sender<Arc<Policy>>,
    vetoes: PolicyVetoes,
    followed: Followed,
    metrics: PolicyMetrics,
    events: Option<(kube::Client, OwnPod)>,
}

/// Reads the policy as `serve` does at start and, with `--config`, starts following its file
/// until `stop`. The metrics are registered in `registry` either way; the Events of a refusal
/// go through `client` to this replica's Pod when both are known.
pub(crate) fn start(
    args: &ServeArgs,
    registry: &mut Registry,
    client: Option<&kube::Client>,
    stop: CancellationToken,
) -> Result<PolicyFeed, PolicyError> {
    let Some(path) = args.config.clone() else {
        let policy = args.policy_over(None)?;
        let _metrics = PolicyMetrics::register(registry, &content_hash(b""));
        return Ok(PolicyFeed::fixed(policy));
    };
    let parse = {
        let (args, path) = (args.clone(), path.clone());
        move |bytes: &[u8]| args.policy_over(Some(parse_policy_bytes(bytes, &path)?))
    };
    let text = std::fs::read(&path).map_err(|source| PolicyError::Read {
        path: path.clone(),
        source,
    })?;
    let policy = parse(&text)?;
    let hash = content_hash(&text);
    let metrics = PolicyMetrics::register(registry, &hash);
    let events = client.zip(OwnPod::from_env(|key| std::env::var(key).ok()));
    if let Some((client, pod)) = &events {
        let message = format!("running the policy file {} (hash {hash})", path.display());
        pod_event::say(client, pod, pod_event::POLICY_LOADED, message);
    }
    let (follower, feed) = PolicyFollower::new(
        path,
        Box::new(parse),
        policy,
        hash,
        POLL_INTERVAL,
        metrics,
        events.map(|(c, pod)| (c.clone(), pod)),
    );
    tokio::spawn(follower.run(stop));
    Ok(feed)
}

impl PolicyFollower {
    fn new(
        path: PathBuf,
        parse: Parse,
        policy: Policy,
        hash: String,
        poll_interval: Duration,
        metrics: PolicyMetrics,
        events: Option<(kube::Client, OwnPod)>,
    ) -> (PolicyFollower, PolicyFeed) {
        let (sender, current) = watch::channel(Arc::new(policy));
        let vetoes = PolicyVetoes::default();
        tracing::info!(file = %path.display(), hash = %hash, "following the policy file");
        let follower = PolicyFollower {
            path,
            parse,
            poll_interval,
            sender,
            vetoes: vetoes.clone(),
            followed: Followed {
                running: hash,
                refused: None,
                vetoed: false,
                reason: None,
            },
            metrics,
            events,
        };
        let feed = PolicyFeed {
            current,
            vetoes,
            _fixed: None,
        };
        (follower, feed)
    }

    async fn run(mut self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.poll_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate; the file was read a moment ago.
        tick.tick().await;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            self.look().await;
        }
    }

    /// Reads the file once and acts on what it holds.
    async fn look(&mut self) {
        let read = tokio::fs::read(&self.path).await;
        let read = read.map_err(|source| PolicyError::Read {
            path: self.path.clone(),
            source,
        });
        let running = self.sender.borrow().clone();
        let judgement = judge(
            &self.followed,
            &running,
            read.as_deref(),
            &self.parse,
            &self.vetoes,
        );
        match judgement {
            Judgement::Unchanged => {}
            // Back to the running policy's text: a refused text written again is said again.
            Judgement::Running => self.followed.refused = None,
            Judgement::Applied {
                policy,
                hash,
                at_restart,
            } => {
                tracing::info!(file = %self.path.display(), %hash, previous = %self.followed.running, "new policy applied");
                for part in at_restart {
                    tracing::warn!(
                        changed = part,
                        "policy: {part} changed; this takes effect at the next restart"
                    );
                }
                self.metrics.applied(&hash);
                if let Some((client, pod)) = &self.events {
                    let message = format!(
                        "new policy applied from {} (hash {hash})",
                        self.path.display()
                    );
                    pod_event::say(client, pod, pod_event::POLICY_APPLIED, message);
                }
                self.followed = Followed {
                    running: hash,
                    refused: None,
                    vetoed: false,
                    reason: None,
                };
                self.sender.send_replace(Arc::from(policy));
            }
            Judgement::Refused {
                hash,
                reason,
                vetoed,
            } => {
                tracing::error!(file = %self.path.display(), %hash, running = %self.followed.running, error = %reason, "new policy refused; the running policy stays");
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                self.metrics.refused(now);
                if let Some((client, pod)) = &self.events {
                    let message = format!(
                        "new policy (hash {hash}) refused; the running policy (hash {}) stays: {reason}",
                        self.followed.running
                    );
                    pod_event::say(client, pod, pod_event::POLICY_REFUSED, message);
                }
                self.followed.refused = Some(hash);
                self.followed.vetoed = vetoed;
                self.followed.reason = Some(reason);
            }
        }
    }
}

#[cfg(test)]
mod tests;
