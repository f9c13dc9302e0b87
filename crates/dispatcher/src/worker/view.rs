//! One worker's view of its room, as its watches leave it (`room_watch`): its nodes and
//! unfinished pods (`room::Room`), whether they are listed, and what placement may do with
//! them. A worker whose role cannot list its nodes and pods cluster-wide (deploy/worker/'s
//! namespaced variant), or that grows on demand (`capacity: Unbounded`), is placed on by count.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::placement::RoomFit;
use crate::placement::moving::CopyPods;
use crate::room::{self, PodShape, Reservation, Room, RoomSummary};

/// What placement may do with a worker's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewState {
    /// Nodes and pods listed, and watched since: Jobs go there only if they fit.
    Fresh,
    /// Not listed yet (or listed afresh after the worker answered again): wait.
    Listing,
    /// Its role refuses a list placement needs (why): placed by count until the list is
    /// taken again.
    Counting(String),
    /// `capacity: Unbounded`: placed by count.
    Unbounded,
}

impl ViewState {
    /// Its `jobwarden_dispatch_worker_view{state}` label.
    pub fn label(&self) -> &'static str {
        match self {
            ViewState::Fresh => "fresh",
            ViewState::Listing => "listing",
            ViewState::Counting(_) => "counting",
            ViewState::Unbounded => "unbounded",
        }
    }
}

#[derive(Debug, Default)]
struct View {
    room: Room,
    nodes_listed: bool,
    pods_listed: bool,
    /// Why the worker's role refused the list of its nodes, while it does.
    nodes_refused: Option<String>,
    /// Why the worker's role refused the list of its pods, while it does.
    pods_refused: Option<String>,
    /// When the watches last brought anything (a list or an event).
    heard: Option<Instant>,
}

impl View {
    /// Whether `what` is listed, and why its list is refused.
    fn list_of(&mut self, what: Listed) -> (&mut bool, &mut Option<String>) {
        match what {
            Listed::Nodes => (&mut self.nodes_listed, &mut self.nodes_refused),
            Listed::Pods => (&mut self.pods_listed, &mut self.pods_refused),
        }
    }

    /// Why the worker is placed on by count: the first list its role refuses.
    fn refused(&self) -> Option<&str> {
        self.nodes_refused
            .as_deref()
            .or(self.pods_refused.as_deref())
    }
}

/// A worker's view, shared by its watches (writers) and the syncs (readers).
#[derive(Debug)]
pub struct WorkerView {
    unbounded: bool,
    view: Mutex<View>,
}

impl WorkerView {
    pub fn new(unbounded: bool) -> WorkerView {
        WorkerView {
            unbounded,
            view: Mutex::default(),
        }
    }

    fn view(&self) -> MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_unbounded(&self) -> bool {
        self.unbounded
    }

    pub fn state(&self) -> ViewState {
        let v = self.view();
        if let Some(why) = v.refused() {
            return ViewState::Counting(why.to_owned());
        }
        if self.unbounded {
            return ViewState::Unbounded;
        }
        if v.nodes_listed && v.pods_listed {
            ViewState::Fresh
        } else {
            ViewState::Listing
        }
    }

    /// Seconds since the watches last brought anything; `None` before the first list.
    pub fn quiet_for(&self) -> Option<f64> {
        self.view().heard.map(|t| t.elapsed().as_secs_f64())
    }

    /// The view forgotten: the watches list afresh (a new connection, new credentials).
    pub fn reset(&self) {
        *self.view() = View::default();
    }

    /// Its role refused the list of `what`: placed by count until that list is taken
    /// ([`Self::listed`]). The room is kept: the next list replaces what it lists. Returns
    /// whether this list was taken until now (the refusal is news).
    pub fn counting(&self, what: Listed, why: String) -> bool {
        let mut v = self.view();
        let (listed, refused) = v.list_of(what);
        *listed = false;
        refused.replace(why).is_none()
    }

    /// Changes the room under the lock; `listed` marks a finished list of nodes or pods.
    pub fn update<R>(&self, change: impl FnOnce(&mut Room) -> R) -> R {
        let mut v = self.view();
        v.heard = Some(Instant::now());
        change(&mut v.room)
    }

    /// A list of `what` finished. Returns whether it was refused before (the role lists
    /// again).
    pub fn listed(&self, what: Listed) -> bool {
        let mut v = self.view();
        v.heard = Some(Instant::now());
        let (listed, refused) = v.list_of(what);
        *listed = true;
        refused.take().is_some()
    }

    /// A copy's pods (by the copy's UID), once the pods are listed.
    pub fn copy_pods(&self, copy_uid: &str) -> Option<CopyPods> {
        let v = self.view();
        if !v.pods_listed || v.refused().is_some() {
            return None;
        }
        let pods = v.room.pods_of(copy_uid);
        Some(CopyPods {
            total: pods.total,
            bound: pods.bound,
            unschedulable: pods
                .unschedulable
                .map(|u| (u.since, u.message.into_string())),
        })
    }

    /// How many of a copy's pods are seen (listed or not: a reservation counts until seen).
    pub fn pods_seen(&self, copy_uid: &str) -> u32 {
        self.view().room.pods_of(copy_uid).total
    }

    /// Whether `pods` pods of `shape` fit now, beside `reserved` (Jobs placed there whose pods
    /// are not all seen: `(copy UID, their reservation)`, reduced here by the pods seen).
    pub fn fit(
        &self,
        shape: &PodShape,
        pods: u32,
        reserved: Vec<(Option<String>, Reservation)>,
    ) -> RoomFit {
        match self.fit_of(shape, pods, reserved) {
            None => RoomFit::Listing,
            Some(room::Fit::Fits) => RoomFit::Fits,
            Some(room::Fit::Short(short)) => RoomFit::Short {
                why: short.to_string(),
                label: short.reason_label(),
                never: short.never(),
            },
        }
    }

    /// The room model's own verdict (what a Job lacks, for the room held for it): `None` while
    /// the worker's nodes and pods are listed; `Fits` where the worker is taken by count.
    pub fn fit_of(
        &self,
        shape: &PodShape,
        pods: u32,
        reserved: Vec<(Option<String>, Reservation)>,
    ) -> Option<room::Fit> {
        match self.state() {
            ViewState::Fresh => {}
            ViewState::Listing => return None,
            ViewState::Counting(_) | ViewState::Unbounded => return Some(room::Fit::Fits),
        }
        let v = self.view();
        let reserved: Vec<Reservation> = reserved
            .into_iter()
            .filter_map(|(copy, mut r)| {
                let seen = copy.map_or(0, |uid| v.room.pods_of(&uid).total);
                r.pods = r.pods.saturating_sub(seen);
                (r.pods > 0).then_some(r)
            })
            .collect();
        Some(room::fits(shape, pods, &v.room, &reserved))
    }

    /// What `jobwarden workers`, the gauges and doctor show; `None` unless fresh.
    pub fn summary(&self) -> Option<RoomSummary> {
        (self.state() == ViewState::Fresh).then(|| self.view().room.summary())
    }
}

/// Which list finished (or was refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    Nodes,
    Pods,
}

impl Listed {
    /// What is listed, as a message names it.
    pub fn plural(self) -> &'static str {
        match self {
            Listed::Nodes => "nodes",
            Listed::Pods => "pods",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lists taken (`"listed"`) and refused (`"refused"`), in order.
    type Steps = &'static [(&'static str, Listed)];

    fn state_after(steps: Steps) -> (ViewState, Vec<bool>) {
        let view = WorkerView::new(false);
        let news = steps
            .iter()
            .map(|(step, what)| match *step {
                "refused" => view.counting(*what, format!("{} refused", what.plural())),
                _ => view.listed(*what),
            })
            .collect();
        (view.state(), news)
    }

    /// A refusal puts the worker on counting until that very list is taken again (a restarted
    /// API server refuses for a moment); each says once that it is news.
    #[test]
    fn a_refused_list_counts_until_it_is_taken_again() {
        use Listed::{Nodes, Pods};
        let counting = |why: &str| ViewState::Counting(why.to_owned());
        let cases: [(Steps, ViewState, &[bool]); 6] = [
            (
                &[("listed", Nodes), ("listed", Pods)],
                ViewState::Fresh,
                &[false, false],
            ),
            (
                &[("refused", Nodes), ("listed", Pods)],
                counting("nodes refused"),
                &[true, false],
            ),
            (
                &[("refused", Nodes), ("refused", Nodes), ("listed", Pods)],
                counting("nodes refused"),
                &[true, false, false],
            ),
            (
                &[("refused", Nodes), ("listed", Pods), ("listed", Nodes)],
                ViewState::Fresh,
                &[true, false, true],
            ),
            (
                &[
                    ("listed", Nodes),
                    ("listed", Pods),
                    ("refused", Pods),
                    ("listed", Nodes),
                ],
                counting("pods refused"),
                &[false, false, true, false],
            ),
            (
                &[("refused", Pods), ("refused", Nodes), ("listed", Pods)],
                counting("nodes refused"),
                &[true, true, true],
            ),
        ];
        for (steps, state, news) in cases {
            assert_eq!(state_after(steps), (state, news.to_vec()), "{steps:?}");
        }
    }
}
