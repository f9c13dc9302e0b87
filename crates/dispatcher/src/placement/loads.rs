//! How many of the dispatcher's unfinished Jobs each worker holds, for placement and the
//! `jobs{worker}` gauge. Kept from the Job watch, and from the dispatcher's own choices before
//! the watch shows them: in a burst, syncs run faster than the watch brings back the records
//! they wrote, and a count read from the watch alone would send the whole burst to the worker
//! that was least loaded when it began.

use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Placed {
    /// The worker recorded on the Job, as the watch shows it.
    recorded: Option<String>,
    /// The worker this replica chose, until the watch shows it recorded.
    chosen: Option<String>,
    finished: bool,
}

impl Placed {
    /// The worker it counts for, if it counts.
    fn counts_for(&self) -> Option<&str> {
        if self.finished {
            return None;
        }
        self.chosen.as_deref().or(self.recorded.as_deref())
    }
}

#[derive(Debug, Default)]
pub struct Loads {
    jobs: HashMap<String, Placed>,
    counts: BTreeMap<String, usize>,
    unplaced: usize,
}

impl Loads {
    fn update(&mut self, uid: &str, change: impl FnOnce(&mut Placed)) {
        let known = self.jobs.remove(uid);
        let was_unplaced = known
            .as_ref()
            .is_some_and(|p| p.counts_for().is_none() && !p.finished);
        let before = known
            .as_ref()
            .and_then(Placed::counts_for)
            .map(str::to_owned);
        let mut placed = known.unwrap_or(Placed {
            recorded: None,
            chosen: None,
            finished: false,
        });
        change(&mut placed);
        if placed.chosen.is_some() && placed.chosen == placed.recorded {
            placed.chosen = None;
        }
        if let Some(w) = &before
            && let Some(n) = self.counts.get_mut(w)
        {
            *n = n.saturating_sub(1);
        }
        if was_unplaced {
            self.unplaced = self.unplaced.saturating_sub(1);
        }
        match placed.counts_for() {
            Some(w) => *self.counts.entry(w.to_owned()).or_default() += 1,
            None if !placed.finished => self.unplaced += 1,
            None => {}
        }
        self.jobs.insert(uid.to_owned(), placed);
    }

    /// The Job as the watch shows it.
    pub fn observe(&mut self, uid: &str, recorded: Option<&str>, finished: bool) {
        self.update(uid, |p| {
            p.recorded = recorded.map(str::to_owned);
            p.finished = finished;
        });
    }

    /// This replica recorded (or is about to record) `worker` on the Job.
    pub fn chose(&mut self, uid: &str, worker: &str) {
        self.update(uid, |p| p.chosen = Some(worker.to_owned()));
    }

    /// A record that failed to be written: the watch's word stands.
    pub fn unchose(&mut self, uid: &str) {
        if self.jobs.contains_key(uid) {
            self.update(uid, |p| p.chosen = None);
        }
    }

    pub fn forget(&mut self, uid: &str) {
        if self.jobs.contains_key(uid) {
            self.update(uid, |p| p.finished = true);
            self.jobs.remove(uid);
        }
    }

    /// Keeps only the Jobs in `present` (after a relist: Jobs deleted while the watch was down
    /// sent no Delete).
    pub fn retain(&mut self, present: &dyn Fn(&str) -> bool) {
        let gone: Vec<String> = self
            .jobs
            .keys()
            .filter(|uid| !present(uid))
            .cloned()
            .collect();
        for uid in gone {
            self.forget(&uid);
        }
    }

    pub fn load(&self, worker: &str) -> usize {
        self.counts.get(worker).copied().unwrap_or(0)
    }

    /// Unfinished Jobs not placed anywhere yet.
    pub fn unplaced(&self) -> usize {
        self.unplaced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_counts_before_the_watch_shows_it_and_once_after() {
        let mut loads = Loads::default();
        loads.observe("a", None, false);
        loads.observe("b", None, false);
        assert_eq!(loads.unplaced(), 2);
        loads.chose("a", "east");
        loads.chose("b", "east");
        assert_eq!((loads.load("east"), loads.unplaced()), (2, 0));
        loads.observe("a", Some("east"), false);
        assert_eq!(loads.load("east"), 2, "counted once");
        loads.observe("a", Some("east"), true);
        assert_eq!(loads.load("east"), 1, "a finished Job no longer counts");
        loads.unchose("b");
        assert_eq!((loads.load("east"), loads.unplaced()), (0, 1));
    }

    #[test]
    fn a_move_counts_for_the_new_worker_only() {
        let mut loads = Loads::default();
        loads.observe("a", Some("east"), false);
        loads.chose("a", "west");
        assert_eq!((loads.load("east"), loads.load("west")), (0, 1));
        loads.observe("a", Some("west"), false);
        assert_eq!((loads.load("east"), loads.load("west")), (0, 1));
    }

    #[test]
    fn deleted_jobs_stop_counting() {
        let mut loads = Loads::default();
        loads.observe("a", Some("east"), false);
        loads.observe("b", Some("east"), false);
        loads.forget("a");
        assert_eq!(loads.load("east"), 1);
        loads.retain(&|uid| uid != "b");
        assert_eq!(loads.load("east"), 0);
        loads.forget("never-seen");
        assert_eq!(loads.unplaced(), 0);
    }
}
