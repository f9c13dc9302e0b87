//! A policy that changes while jobwarden runs: what a new policy must pass before it replaces
//! the running one (the [`PolicyVetoes`] its consumers register), what of it only takes effect
//! at the next restart ([`needs_restart`]), and the hash that names a policy file's text in
//! metrics and in `doctor` ([`content_hash`]). Pure: the server's file follower asks these and
//! does the I/O; nothing here reads a file or a clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::Policy;

/// A consumer's objection to a new policy: `Err(reason)` refuses it whole, exactly as an
/// invalid file is refused (the running policy stays; the reason is logged and put in an
/// Event). The dispatcher registers one that refuses removing a worker that still has Jobs.
pub trait PolicyVeto: Send + Sync {
    /// `running` is the policy in force, `new` the one that would replace it.
    fn check(&self, running: &Policy, new: &Policy) -> Result<(), String>;
}

impl<F> PolicyVeto for F
where
    F: Fn(&Policy, &Policy) -> Result<(), String> + Send + Sync,
{
    fn check(&self, running: &Policy, new: &Policy) -> Result<(), String> {
        self(running, new)
    }
}

/// The vetoes registered now. Cloning shares the list: the follower asks it, consumers add to
/// it (and leave it by dropping their [`VetoRegistration`]), so a veto that only holds while
/// its owner runs (the dispatcher's, while this replica leads) ends with it.
#[derive(Clone, Default)]
pub struct PolicyVetoes {
    list: Arc<Mutex<Vec<Registered>>>,
    next: Arc<AtomicU64>,
}

impl std::fmt::Debug for PolicyVetoes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// A registered veto: its registration's number, who registered it, the veto.
type Registered = (u64, String, Arc<dyn PolicyVeto>);

/// Keeps a veto registered; dropping it takes the veto out.
#[must_use = "the veto is taken out when this is dropped"]
pub struct VetoRegistration {
    id: u64,
    vetoes: PolicyVetoes,
}

impl Drop for VetoRegistration {
    fn drop(&mut self) {
        // The veto is dropped after the lock is released: it may hold registrations of its
        // own, whose drop takes the same lock.
        let _removed = {
            let mut list = self
                .vetoes
                .list
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let at = list.iter().position(|(id, _, _)| *id == self.id);
            at.map(|at| list.remove(at))
        };
    }
}

/// Why a new policy was refused by a veto: who refused it and what it said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused by the {by}: {reason}")]
pub struct Vetoed {
    pub by: String,
    pub reason: String,
}

impl PolicyVetoes {
    /// Registers `veto` under `by`, the consumer's name as a refusal names it ("dispatcher").
    pub fn register(&self, by: &str, veto: impl PolicyVeto + 'static) -> VetoRegistration {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, by.to_owned(), Arc::new(veto)));
        VetoRegistration {
            id,
            vetoes: self.clone(),
        }
    }

    /// The first objection to replacing `running` with `new`, in the order the vetoes were
    /// registered. The vetoes are called outside the lock, so one may register another.
    pub fn check(&self, running: &Policy, new: &Policy) -> Result<(), Vetoed> {
        let vetoes: Vec<(String, Arc<dyn PolicyVeto>)> = self
            .list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, by, veto)| (by.clone(), veto.clone()))
            .collect();
        for (by, veto) in vetoes {
            veto.check(running, new)
                .map_err(|reason| Vetoed { by, reason })?;
        }
        Ok(())
    }

    /// Who has a veto registered, in order.
    pub fn names(&self) -> Vec<String> {
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, by, _)| by.clone())
            .collect()
    }
}

/// The parts of the policy that a running jobwarden takes up only when it starts, changed
/// between `running` and `new`, each as its path in the policy file with what waits for the
/// restart. Everything else (`allowedManagedBy`, `resume`, `suspendOnCreate`, `delegate`)
/// the webhook applies to the next review.
pub fn needs_restart(running: &Policy, new: &Policy) -> Vec<&'static str> {
    let mut out = Vec::new();
    // The reconcile loop answers to its name, holds its Lease under it and names its Events
    // with it: changing it under a running loop would make two controllers of one.
    if running.controller_name != new.controller_name {
        out.push("controllerName (the Job controller's name)");
    }
    // The dispatcher takes a changed `dispatch:` section up in place (its workers added,
    // drained, changed, removed), but it is started with the process only when the policy
    // names workers; and jobwarden's Job controller learns at start which worker is local (it
    // runs that worker's Jobs) and the dispatcher's name.
    let (was, is) = (&running.dispatch, &new.dispatch);
    if !was.is_enabled() && is.is_enabled() {
        out.push("dispatch.workers, the first (the dispatcher starts with the process)");
    }
    if was.is_enabled() && is.is_enabled() && was.controller_name != is.controller_name {
        out.push("dispatch.controllerName (jobwarden's Job controller learns it at start)");
    }
    if was.is_enabled() && is.is_enabled() && was.local_worker() != is.local_worker() {
        out.push("the local worker (jobwarden's Job controller learns it at start)");
    }
    // The namespace watch starts with the server, only when a selector needs labels: a first
    // selector matches namespaces by name alone until the restart.
    if new.needs_namespace_labels() && !running.needs_namespace_labels() {
        out.push("a first namespace selector (namespace labels are watched from the next start)");
    }
    out
}

/// The hash a policy file's text is named by: FNV-1a, 64 bits, as 16 lowercase hex digits.
/// The text is hashed exactly as read (the kubelet writes the ConfigMap's value byte for
/// byte), so `doctor` hashing the mounted ConfigMap's `policy.yaml` gets the same name as the
/// replica that read the file. FNV is fully specified: the same on every build and platform,
/// which std's hasher does not promise. Not a defence against a forged file, only a name.
pub fn content_hash(text: &[u8]) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = text.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{NamespaceMatch, Worker};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn with_worker(name: &str) -> Policy {
        let mut p = Policy::default();
        p.dispatch.workers.push(Worker {
            name: name.to_owned(),
            local: true,
            ..Worker::default()
        });
        p
    }

    #[test]
    fn content_hash_is_fnv1a_64() {
        // The reference values of FNV-1a 64 (Fowler, Noll, Vo: the test vectors of the spec).
        for (text, hash) in [
            ("", "cbf29ce484222325"),
            ("a", "af63dc4c8601ec8c"),
            ("foobar", "85944171f73967e8"),
        ] {
            assert_eq!(content_hash(text.as_bytes()), hash, "{text:?}");
        }
        assert_ne!(content_hash(b"resume: {}\n"), content_hash(b"resume: {}"));
    }

    #[test]
    fn what_needs_a_restart() {
        let selector = Policy {
            suspend_on_create: NamespaceMatch {
                names: Vec::new(),
                selector: Some(LabelSelector::default()),
            },
            ..Policy::default()
        };
        let renamed = Policy {
            controller_name: "example.com/other".to_owned(),
            ..Policy::default()
        };
        let resumers = Policy {
            allowed_managed_by: vec!["example.com/x".to_owned()],
            ..Policy::default()
        };
        let empty = Policy::default();
        let worker = with_worker("here");
        let there = with_worker("there");
        let mut two_workers = with_worker("here");
        two_workers.dispatch.workers.push(Worker {
            name: "east".to_owned(),
            kubeconfig_secret: Some("jobwarden-worker-east".to_owned()),
            ..Worker::default()
        });
        let cases: Vec<(&str, &Policy, &Policy, &[&str])> = vec![
            ("nothing changed", &empty, &empty, &[]),
            ("webhook-only change", &empty, &resumers, &[]),
            (
                "controller name",
                &empty,
                &renamed,
                &["controllerName (the Job controller's name)"],
            ),
            (
                "a first worker",
                &empty,
                &worker,
                &["dispatch.workers, the first (the dispatcher starts with the process)"],
            ),
            ("a worker added", &worker, &two_workers, &[]),
            ("a worker removed", &two_workers, &worker, &[]),
            (
                "another local worker",
                &worker,
                &there,
                &["the local worker (jobwarden's Job controller learns it at start)"],
            ),
            (
                "a first selector",
                &empty,
                &selector,
                &["a first namespace selector (namespace labels are watched from the next start)"],
            ),
            ("a selector taken away", &selector, &empty, &[]),
        ];
        for (name, running, new, want) in cases {
            assert_eq!(needs_restart(running, new), want, "{name}");
        }
    }

    #[test]
    fn vetoes_refuse_in_order_and_leave_when_dropped() {
        let vetoes = PolicyVetoes::default();
        let (old, new) = (with_worker("east"), Policy::default());
        assert_eq!(vetoes.check(&old, &new), Ok(()));

        let keeps_workers =
            vetoes.register("dispatcher", |running: &Policy, new: &Policy| match running
                .dispatch
                .workers
                .iter()
                .find(|w| new.dispatch.worker(&w.name).is_none())
            {
                Some(w) => Err(format!("worker {:?} still has Jobs", w.name)),
                None => Ok(()),
            });
        let never = vetoes.register("test", |_: &Policy, _: &Policy| Err("no".to_owned()));
        assert_eq!(vetoes.names(), ["dispatcher", "test"]);
        let refused = vetoes.check(&old, &new).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "refused by the dispatcher: worker \"east\" still has Jobs"
        );
        // The dispatcher's passes; the next one speaks.
        assert_eq!(
            vetoes.check(&old, &old).unwrap_err(),
            Vetoed {
                by: "test".to_owned(),
                reason: "no".to_owned()
            }
        );
        drop(keeps_workers);
        drop(never);
        assert!(vetoes.names().is_empty());
        assert_eq!(vetoes.check(&old, &new), Ok(()));
    }

    #[test]
    fn a_veto_may_register_another_while_asked_and_own_it() {
        let vetoes = PolicyVetoes::default();
        let inner = vetoes.clone();
        let kept = Mutex::new(Vec::new());
        let _outer = vetoes.register("outer", move |_: &Policy, _: &Policy| {
            kept.lock()
                .unwrap()
                .push(inner.register("inner", |_: &Policy, _: &Policy| Ok(())));
            Ok(())
        });
        assert_eq!(vetoes.check(&Policy::default(), &Policy::default()), Ok(()));
        assert_eq!(vetoes.names(), ["outer", "inner"]);
    }
}
