//! The Events on jobwarden's own Pod that say which policy it runs: the one read at start, each
//! one applied, and the Warning of one refused (`kubectl describe pod` shows them; `doctor`
//! reads them). The Pod is known from the downward API (deploy/ and the chart
//! set `JOBWARDEN_POD_NAME`, `JOBWARDEN_POD_NAMESPACE` and `JOBWARDEN_POD_UID`); outside a
//! cluster, or without them, no Event is written. Best effort: a failed write is logged and
//! forgotten, the refusal itself is already in the log and the metrics.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;

use jobwarden_events::{EventRecord, EventReporter, Seen, record_event};

/// The Events' reasons, which `doctor` reads: the policy this replica runs since it started or
/// since a new one was applied, each message naming it `(hash <16 hex digits>)`, and a new one
/// refused.
pub const POLICY_LOADED: &str = "PolicyLoaded";
pub const POLICY_APPLIED: &str = "PolicyApplied";
pub const POLICY_REFUSED: &str = "PolicyRefused";

/// This replica's Pod, where the Events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnPod {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
}

impl OwnPod {
    /// From the downward API's variables; `None` unless the name and namespace are both set.
    pub(crate) fn from_env(get: impl Fn(&str) -> Option<String>) -> Option<OwnPod> {
        let non_empty = |key: &str| get(key).filter(|v| !v.trim().is_empty());
        Some(OwnPod {
            name: non_empty("JOBWARDEN_POD_NAME")?,
            namespace: non_empty("JOBWARDEN_POD_NAMESPACE")?,
            uid: non_empty("JOBWARDEN_POD_UID"),
        })
    }

    fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            namespace: Some(self.namespace.clone()),
            name: Some(self.name.clone()),
            uid: self.uid.clone(),
            ..ObjectReference::default()
        }
    }
}

/// Writes an Event on `pod`, in a task of its own: a Warning for a refusal, else Normal.
pub(crate) fn say(client: &kube::Client, pod: &OwnPod, reason: &'static str, message: String) {
    let (client, regarding) = (client.clone(), pod.reference());
    let reporter = EventReporter {
        component: "jobwarden".to_owned(),
        instance: pod.name.clone(),
    };
    let event = EventRecord {
        warning: reason == POLICY_REFUSED,
        reason: reason.to_owned(),
        message,
    };
    tokio::spawn(async move {
        let seen = Seen::once(Timestamp::now());
        if let Err(error) = record_event(&client, &regarding, &event, &reporter, seen).await {
            tracing::warn!(%error, reason = %event.reason, "cannot write the policy's Event on jobwarden's Pod");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_comes_from_the_downward_api() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            OwnPod::from_env(env(&[
                ("JOBWARDEN_POD_NAME", "jobwarden-7d9f-abcde"),
                ("JOBWARDEN_POD_NAMESPACE", "jobwarden-system"),
                ("JOBWARDEN_POD_UID", "u-1"),
            ])),
            Some(OwnPod {
                namespace: "jobwarden-system".to_owned(),
                name: "jobwarden-7d9f-abcde".to_owned(),
                uid: Some("u-1".to_owned()),
            })
        );
        for partial in [
            &[("JOBWARDEN_POD_NAME", "p")][..],
            &[("JOBWARDEN_POD_NAMESPACE", "n")][..],
            &[
                ("JOBWARDEN_POD_NAME", " "),
                ("JOBWARDEN_POD_NAMESPACE", "n"),
            ][..],
        ] {
            assert_eq!(OwnPod::from_env(env(partial)), None, "{partial:?}");
        }
    }
}
