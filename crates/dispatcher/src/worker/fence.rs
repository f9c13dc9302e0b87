//! Which copies on a worker must go: those whose Job moved to another worker (their status must
//! never reach the Job again), and those whose Job is gone (deleted while jobwarden was down, or
//! while the worker was lost). A worker that answers again is fenced before anything else is
//! done there. Copies are the dispatcher's only by their origin labels; any other Job on a
//! worker is never judged here. Pure, in two steps: `judge` from the caches says which copies
//! may have to go, and `confirmed` decides from a fresh read of the user's Job (a cache may
//! lag the dispatcher's own last record: a copy just made on the Job's new worker would look
//! moved from the record the cache still shows).

use serde_json::Value;

use jobwarden_rules::well_known::{ORIGIN_LABEL, WORKER_ANNOTATION};

use crate::copy;

/// What becomes of one copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    /// Its Job is recorded on another worker.
    Moved,
    /// No Job of its origin UID is cached: confirm with a fresh read, then delete.
    Orphan,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Keep => "keep",
            Verdict::Moved => "moved",
            Verdict::Orphan => "orphan",
        }
    }
}

/// The verdict on `copy`, found on `worker`, given the user's Job its origin UID names (as the
/// management cache holds it, if it does).
pub fn judge(copy: &Value, worker: &str, origin: &str, user: Option<&Value>) -> Verdict {
    if copy::label(copy, ORIGIN_LABEL) != Some(origin) || copy::origin_uid(copy).is_none() {
        // Another management cluster's copy, or no copy at all.
        return Verdict::Keep;
    }
    let Some(user) = user else {
        return Verdict::Orphan;
    };
    let recorded = user
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(WORKER_ANNOTATION))
        .and_then(Value::as_str);
    match recorded {
        Some(recorded) if recorded != worker => Verdict::Moved,
        // Recorded here, or not recorded at all (the plan adopts the copy then).
        _ => Verdict::Keep,
    }
}

/// The user's Job as a fresh read from the management cluster shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveJob {
    pub uid: String,
    /// Its `jobwarden.io/worker`.
    pub worker: Option<String>,
}

/// Whether a fresh read confirms that `copy`, found on `worker`, must go: no Job of its name
/// (or another Job, another UID), or its Job recorded on another worker.
pub fn confirmed(copy: &Value, worker: &str, live: Option<&LiveJob>) -> Option<Verdict> {
    let Some(live) = live.filter(|l| copy::origin_uid(copy) == Some(l.uid.as_str())) else {
        return Some(Verdict::Orphan);
    };
    match live.worker.as_deref() {
        Some(recorded) if recorded != worker => Some(Verdict::Moved),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn copy(origin: &str, uid: &str) -> Value {
        json!({"metadata": {"name": "train", "namespace": "ml", "uid": "c-1",
                            "labels": {"jobwarden.io/origin": origin, "jobwarden.io/origin-uid": uid}}})
    }

    fn user(worker: Option<&str>) -> Value {
        let mut user = json!({"metadata": {"name": "train", "namespace": "ml", "uid": "u-1"}});
        if let Some(w) = worker {
            user["metadata"]["annotations"] = json!({"jobwarden.io/worker": w});
        }
        user
    }

    #[test]
    fn verdicts() {
        let mine = copy("mgmt", "u-1");
        let cases: &[(&Value, Option<Value>, Verdict)] = &[
            (&mine, Some(user(Some("east"))), Verdict::Keep),
            (&mine, Some(user(Some("west"))), Verdict::Moved),
            (&mine, Some(user(None)), Verdict::Keep),
            (&mine, None, Verdict::Orphan),
        ];
        for (copy, user, verdict) in cases {
            assert_eq!(
                judge(copy, "east", "mgmt", user.as_ref()),
                *verdict,
                "{user:?}"
            );
        }
    }

    #[test]
    fn another_origins_copy_and_a_plain_job_are_never_judged() {
        assert_eq!(
            judge(&copy("other", "u-1"), "east", "mgmt", None),
            Verdict::Keep
        );
        let plain =
            json!({"metadata": {"name": "train", "labels": {"jobwarden.io/origin": "mgmt"}}});
        assert_eq!(judge(&plain, "east", "mgmt", None), Verdict::Keep);
    }

    #[test]
    fn a_deletion_is_confirmed_by_a_fresh_read() {
        let c = copy("mgmt", "u-1");
        let live = |uid: &str, worker: Option<&str>| LiveJob {
            uid: uid.to_owned(),
            worker: worker.map(str::to_owned),
        };
        let cases: &[(Option<LiveJob>, Option<Verdict>)] = &[
            (None, Some(Verdict::Orphan)),
            // Deleted and made again under the same name.
            (Some(live("u-2", Some("east"))), Some(Verdict::Orphan)),
            (Some(live("u-1", Some("west"))), Some(Verdict::Moved)),
            // The cache lagged: the Job is recorded here after all.
            (Some(live("u-1", Some("east"))), None),
            // Created a moment ago, not recorded yet.
            (Some(live("u-1", None)), None),
        ];
        for (read, verdict) in cases {
            assert_eq!(confirmed(&c, "east", read.as_ref()), *verdict, "{read:?}");
        }
    }
}
