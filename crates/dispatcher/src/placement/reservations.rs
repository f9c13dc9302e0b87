//! The room each placed Job holds on its worker until its pods are seen there: a burst of
//! placements, faster than the workers' Job controllers make pods and their watches bring
//! them back, must never overcommit a worker. Kept from the Job watch (what is recorded where,
//! how many pods run at once), and from this replica's own choices before the watch shows them
//! (as `loads` is). A Job's reservation is its pods at once less its copy's pods seen in the
//! worker's view (`worker_view`), so it shrinks as they come, and is gone once all are there.

use std::collections::HashMap;

use serde_json::Value;

use crate::room::{PodShape, Reservation, pods_at_once};

#[derive(Debug, Clone)]
struct Held {
    /// When it was first held, in placements: `room::fits` charges reservations in this
    /// order, so each lands where it was judged to fit.
    order: u64,
    worker: String,
    namespace: String,
    name: String,
    shape: PodShape,
    pods: u32,
}

#[derive(Debug, Default)]
pub struct Reservations {
    jobs: HashMap<String, Held>,
    next: u64,
}

/// What a Job holds, if anything: none once it ended, while suspended (no pod runs), or when
/// its template cannot be read (then it is judged by its pods as they come).
fn held(job: &Value, worker: &str) -> Option<Held> {
    let suspended = job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let pods = pods_at_once(job);
    if suspended || pods == 0 {
        return None;
    }
    let shape = PodShape::of_job(job).ok()?;
    let text = |p: &str| job.pointer(p).and_then(Value::as_str).unwrap_or_default();
    Some(Held {
        order: 0,
        worker: worker.to_owned(),
        namespace: text("/metadata/namespace").to_owned(),
        name: text("/metadata/name").to_owned(),
        shape,
        pods,
    })
}

impl Reservations {
    /// The Job as the watch (or a sync) shows it: recorded on `worker`, or not placed, or
    /// `finished`. Returns the worker on which it gave up room, if it did (the Jobs waiting
    /// for room there may fit now).
    pub fn observe(
        &mut self,
        uid: &str,
        job: &Value,
        worker: Option<&str>,
        finished: bool,
    ) -> Option<String> {
        let before = self.jobs.get(uid).map(|h| (h.worker.clone(), h.pods));
        self.update(uid, job, worker, finished);
        let after = self.jobs.get(uid).map(|h| (h.worker.as_str(), h.pods));
        match (before, after) {
            (Some((w, _)), None) => Some(w),
            (Some((w, _)), Some((now, _))) if w != now => Some(w),
            (Some((w, n)), Some((_, m))) if m < n => Some(w),
            _ => None,
        }
    }

    /// Releases what the Job holds, returning the worker it held room on.
    pub fn forget(&mut self, uid: &str) -> Option<String> {
        self.jobs.remove(uid).map(|h| h.worker)
    }

    fn update(&mut self, uid: &str, job: &Value, worker: Option<&str>, finished: bool) {
        match worker.filter(|_| !finished).and_then(|w| held(job, w)) {
            Some(mut h) => {
                h.order = match self.jobs.get(uid) {
                    Some(old) if old.worker == h.worker => old.order,
                    _ => {
                        self.next += 1;
                        self.next
                    }
                };
                self.jobs.insert(uid.to_owned(), h);
            }
            None => {
                self.jobs.remove(uid);
            }
        }
    }

    /// This replica placed the Job on `worker` (before the record is written).
    pub fn chose(&mut self, uid: &str, job: &Value, worker: &str) {
        self.update(uid, job, Some(worker), false);
    }

    /// Keeps only the Jobs `present` says exist (after a relist of the Jobs).
    pub fn retain(&mut self, present: &dyn Fn(&str) -> bool) {
        self.jobs.retain(|uid, _| present(uid));
    }

    /// What the Jobs placed on `worker` hold, but `except` (the Job being placed), oldest
    /// first: each with its UID and the `ns/name` of its copy, to be reduced by the copy's
    /// pods seen there.
    pub fn on<'a>(
        &'a self,
        worker: &'a str,
        except: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a str, &'a str, Reservation)> + 'a {
        let mut held: Vec<(&String, &Held)> = self
            .jobs
            .iter()
            .filter(move |(uid, h)| h.worker == worker && uid.as_str() != except)
            .collect();
        held.sort_by_key(|(_, h)| h.order);
        held.into_iter().map(|(uid, h)| {
            (
                uid.as_str(),
                h.namespace.as_str(),
                h.name.as_str(),
                Reservation {
                    shape: h.shape.clone(),
                    pods: h.pods,
                },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(parallelism: i64, suspend: bool) -> Value {
        json!({"metadata": {"namespace": "ml", "name": "train", "uid": "u"},
               "spec": {"parallelism": parallelism, "completions": 4, "suspend": suspend,
                        "template": {"spec": {"containers": [{"name": "c",
                            "resources": {"requests": {"cpu": "1"}}}]}}},
               "status": {"succeeded": 1}})
    }

    fn held_on<'a>(r: &'a Reservations, worker: &'a str) -> Vec<(&'a str, u32)> {
        r.on(worker, "")
            .map(|(_, _, name, h)| (name, h.pods))
            .collect()
    }

    #[test]
    fn a_placed_job_holds_its_pods_at_once_until_it_ends() {
        let mut r = Reservations::default();
        r.chose("u", &job(2, false), "alpha");
        assert_eq!(held_on(&r, "alpha"), [("train", 2)]);
        assert!(held_on(&r, "beta").is_empty());
        // Not for the Job being placed itself.
        assert_eq!(r.on("alpha", "u").count(), 0);
        // Three completions left, parallelism 5: three pods.
        r.observe("u", &job(5, false), Some("alpha"), false);
        assert_eq!(held_on(&r, "alpha"), [("train", 3)]);
        assert_eq!(
            r.observe("u", &job(5, false), Some("alpha"), true),
            Some("alpha".to_owned()),
            "the room it held is given up"
        );
        assert!(held_on(&r, "alpha").is_empty());
    }

    #[test]
    fn a_suspended_or_unplaced_job_holds_nothing() {
        let mut r = Reservations::default();
        r.observe("u", &job(2, true), Some("alpha"), false);
        assert!(held_on(&r, "alpha").is_empty());
        r.observe("u", &job(2, false), None, false);
        assert!(held_on(&r, "alpha").is_empty());
        r.chose("u", &job(2, false), "alpha");
        r.forget("u");
        assert!(held_on(&r, "alpha").is_empty());
    }
}
