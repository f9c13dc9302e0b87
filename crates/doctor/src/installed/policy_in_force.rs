//! Which policy each replica runs, from what it says on its own Pod: every replica follows its
//! policy file and writes an Event when it reads one (`PolicyLoaded` at start, `PolicyApplied`
//! for each new one, each naming the text's hash) or refuses one (`PolicyRefused`, a Warning,
//! with serve's reason). A replica whose newest such Event is a refusal runs an older policy
//! than the ConfigMap holds; one whose policy's hash is not the ConfigMap's has not taken the
//! mounted file up (yet: the kubelet updates a mounted ConfigMap within about a minute). Pure.

use k8s_openapi::jiff::Timestamp;

use crate::catalogue::POLICY_IN_FORCE;
use crate::check::Check;

/// The Events' reasons (crates/server/src/policy_reload/pod_event.rs writes them).
pub const POLICY_LOADED: &str = "PolicyLoaded";
pub const POLICY_APPLIED: &str = "PolicyApplied";
pub const POLICY_REFUSED: &str = "PolicyRefused";

/// One of those Events, on the Pod `pod`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEvent {
    pub pod: String,
    pub reason: String,
    pub message: String,
    pub at: Option<Timestamp>,
}

/// The hash an Event's message names: `(hash <16 hex digits>)`, the first one (a refusal
/// names the refused text's first, then the running one's).
pub fn hash_in(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once("(hash ")?;
    let hash = rest.get(..16)?;
    let closed = rest.get(16..).is_some_and(|after| after.starts_with(')'));
    (closed && hash.chars().all(|c| c.is_ascii_hexdigit())).then_some(hash)
}

/// `mounted`: the hash of the policy file the webhook's Deployment mounts (its ConfigMap's
/// text, hashed as jobwarden hashes it); `running`: the names of the jobwarden Pods that run
/// now; `events`: their policy Events.
pub fn policy_in_force(
    mounted: &Result<Option<String>, String>,
    running: &[String],
    events: &Result<Vec<PolicyEvent>, String>,
) -> Check {
    let events = match events {
        Ok(events) => events,
        Err(e) => {
            return POLICY_IN_FORCE.cannot_tell(
                format!("cannot read the Events of jobwarden's Pods: {e}"),
                "doctor lists Events in jobwarden's namespace: it needs list on events there",
            );
        }
    };
    let mut refused = Vec::new();
    let mut behind = Vec::new();
    let mut said = 0;
    for pod in running {
        let newest = events.iter().filter(|e| &e.pod == pod).max_by_key(|e| e.at);
        let Some(newest) = newest else { continue };
        said += 1;
        if newest.reason == POLICY_REFUSED {
            refused.push(format!("{pod}: {}", newest.message));
            continue;
        }
        if let (Ok(Some(mounted)), Some(hash)) = (mounted, hash_in(&newest.message))
            && hash != mounted
        {
            behind.push(format!("{pod} runs {hash}"));
        }
    }
    if !refused.is_empty() {
        return POLICY_IN_FORCE.error(
            format!("a replica refused the mounted policy file and runs the one before it: {}", refused.join("; ")),
            "fix the policy file (its ConfigMap) where the message says: jobwarden refuses a new policy whole, in the words `serve` would use at start, and keeps the running one",
        );
    }
    let mounted_hash = match mounted {
        Ok(Some(hash)) => hash.as_str(),
        Ok(None) => "none",
        Err(_) => "unknown",
    };
    if !behind.is_empty() {
        return POLICY_IN_FORCE.warning(
            format!(
                "not the policy the ConfigMap holds (hash {mounted_hash}): {}",
                behind.join(", ")
            ),
            "the kubelet updates a mounted ConfigMap within about a minute, and jobwarden reads it again within two seconds: look again (`--wait`); if it lasts, the replica does not follow its file (an older jobwarden): restart it",
        );
    }
    if let Err(e) = mounted {
        return POLICY_IN_FORCE.cannot_tell(
            format!("no replica refused a policy, but the mounted one could not be read: {e}"),
            "doctor reads the policy ConfigMap the webhook's Deployment mounts: it needs get on configmaps there",
        );
    }
    if said == 0 {
        return POLICY_IN_FORCE.ok(
            "no replica has said which policy it runs lately (kube-apiserver keeps Events an hour), and none refused one",
        );
    }
    POLICY_IN_FORCE.ok(format!(
        "{said} replica{} run{} the mounted policy (hash {mounted_hash})",
        if said == 1 { "" } else { "s" },
        if said == 1 { "s" } else { "" },
    ))
}
