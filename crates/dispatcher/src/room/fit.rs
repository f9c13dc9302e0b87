//! Whether all the pods a Job runs at once fit on a worker now, and if not, what is short.
//!
//! How room is charged (deterministic, and never promising a node more than it holds):
//! 1. Each node starts with its allocatable less what its bound pods request.
//! 2. Unbound pods the scheduler has not found unschedulable (it is about to bind them) are
//!    placed first-fit decreasing onto the schedulable nodes: where the scheduler puts them
//!    is its choice, and their own filters are not kept, so this is an estimate of the room
//!    they take, charged before anything of ours because they are ahead of us in its queue.
//!    Unbound pods it found unschedulable hold nothing: it found no room for them, and were
//!    they charged, one pod that never fits would block the whole worker.
//! 3. Reservations (Jobs placed there whose pods are not seen yet) are placed in the order
//!    given, oldest first, first-fit over the nodes their own shape accepts, in node-name
//!    order, a node taking as many pods as it holds. That is the order and the rule by which each of them was judged, so
//!    while the room is unchanged every reservation lands where it was judged to fit, and a
//!    later Job is judged on what is left. (First-fit *decreasing* would re-sort them on each
//!    call and could move an older reservation off the room it was promised.)
//! 4. The Job's pods are placed the same way after them; a node may take several.
//! 5. What fits on no node in 2 and 3 (the room shrank under it) is owed by the worker as a
//!    whole: it must fit in the total left on the schedulable nodes after 4, and each Job pod
//!    that has to go for it to fit is a pod that does not fit.

use std::collections::BTreeMap;

use super::resources::Resources;
use super::shape::{Exclusion, PodShape};
use super::short::{Fit, Lack, Need, Short};
use super::views::NodeView;
use super::worker_room::Room;

/// Pods of a Job placed on the worker and not yet seen there as pods: `pods_at_once` less
/// the pods of its copy the worker's room shows (`Room::pods_of`). Once seen, a pod is
/// charged as a pod, bound or pending, and must no longer be reserved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub shape: PodShape,
    pub pods: u32,
}

/// Whether `pods` pods of `shape` fit on the worker now, after what `reserved` holds.
pub fn fits(shape: &PodShape, pods: u32, room: &Room, reserved: &[Reservation]) -> Fit {
    place(shape, pods, room, reserved).fit
}

/// A decision with the virtual placement it was made on, by node name (for `explain`, and
/// for the tests that check it never overcommits a node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement<'r> {
    pub fit: Fit,
    /// Per reservation, the nodes its pods are placed on, with how many each (fewer than its
    /// pods in all when the room shrank under it).
    pub reserved_on: Vec<Vec<(&'r str, u32)>>,
    /// The nodes of the Job's pods with how many each, when they fit; empty otherwise.
    pub job_on: Vec<(&'r str, u32)>,
}

/// The nodes in name order, with their free room worked out only when a placement first
/// looks at them: a Job that fits early touches a few nodes of thousands.
struct Nodes<'r> {
    views: Vec<&'r NodeView>,
    used: Vec<&'r Resources>,
    free: Vec<Option<Resources>>,
}

impl<'r> Nodes<'r> {
    fn of(room: &'r Room) -> Nodes<'r> {
        let (views, used): (Vec<&NodeView>, Vec<&Resources>) = room
            .nodes
            .values()
            .filter_map(|s| Some((s.view.as_ref()?, &s.used)))
            .unzip();
        let free = vec![None; views.len()];
        Nodes { views, used, free }
    }

    fn len(&self) -> usize {
        self.views.len()
    }

    fn view(&self, i: usize) -> Option<&'r NodeView> {
        self.views.get(i).copied()
    }

    fn name(&self, i: usize) -> &'r str {
        self.view(i).map_or("", |n| &n.name)
    }

    /// How much of `resource` is free: allocatable less what its bound pods request, less
    /// what was placed here so far. Worked out without a copy until something is placed.
    fn amount(&self, i: usize, resource: &str) -> u64 {
        match self.free.get(i) {
            Some(Some(f)) => f.get(resource),
            _ => match (self.views.get(i), self.used.get(i)) {
                (Some(v), Some(u)) => v.allocatable.get(resource).saturating_sub(u.get(resource)),
                _ => 0,
            },
        }
    }

    /// How many pods of `requests` it holds now.
    fn holds(&self, i: usize, requests: &Resources) -> u64 {
        requests
            .iter()
            .map(|(name, v)| self.amount(i, name) / v)
            .min()
            .unwrap_or(u64::MAX)
    }

    fn take(&mut self, i: usize, requests: &Resources, n: u32) {
        let (Some(view), Some(used)) = (self.views.get(i), self.used.get(i)) else {
            return;
        };
        if let Some(slot) = self.free.get_mut(i) {
            slot.get_or_insert_with(|| {
                let mut f = view.allocatable.clone();
                f.sub(used);
                f
            })
            .sub(&requests.times(u64::from(n)));
        }
    }

    /// Each of `resources` summed over the nodes `which` takes.
    fn total(&self, resources: &Resources, which: impl Fn(usize) -> bool) -> Resources {
        let mut total = Resources::default();
        for (r, _) in resources.iter() {
            let sum = (0..self.len())
                .filter(|&i| which(i))
                .fold(0u64, |s, i| s.saturating_add(self.amount(i, r)));
            total.set(r, sum);
        }
        total
    }
}

/// Which nodes a filter set accepts, asked once per node and distinct set of filters; and,
/// per requests placed with it, the first node that may still hold them (free room only
/// shrinks during a placement, so a node passed over stays passed over).
#[derive(Default)]
struct Accepts<'s> {
    groups: Vec<Group<'s>>,
}

struct Group<'s> {
    shape: &'s PodShape,
    seen: Vec<Option<bool>>,
    cursors: Vec<(&'s Resources, usize)>,
}

impl<'s> Accepts<'s> {
    fn of(&mut self, shape: &'s PodShape, len: usize) -> Option<&mut Group<'s>> {
        let at = match self.groups.iter().position(|g| g.shape.same_filters(shape)) {
            Some(at) => at,
            None => {
                self.groups.push(Group {
                    shape,
                    seen: vec![None; len],
                    cursors: Vec::new(),
                });
                self.groups.len() - 1
            }
        };
        self.groups.get_mut(at)
    }
}

impl<'s> Group<'s> {
    fn accepts(&mut self, i: usize, node: &NodeView) -> bool {
        match self.seen.get_mut(i) {
            Some(Some(yes)) => *yes,
            Some(slot) => *slot.insert(self.shape.excludes(node).is_none()),
            None => false,
        }
    }

    /// First-fit of `count` pods of `requests` over the nodes this group accepts.
    fn first_fit(
        &mut self,
        requests: &'s Resources,
        count: u32,
        nodes: &mut Nodes<'_>,
    ) -> Vec<(usize, u32)> {
        let at = self.cursors.iter().position(|(r, _)| *r == requests);
        let start = at.and_then(|k| self.cursors.get(k)).map_or(0, |(_, s)| *s);
        let (taken, next) = first_fit(requests, count, nodes, start, |i, n| self.accepts(i, n));
        match at.and_then(|k| self.cursors.get_mut(k)) {
            Some(c) => c.1 = next,
            None => self.cursors.push((requests, next)),
        }
        taken
    }
}

/// First-fit of `count` pods of `requests` over the nodes `accept` takes, in name order
/// from `start`: each node takes as many as it holds before the next is tried. Returns the
/// nodes taken with their pods, and where the next pods of these requests may start.
fn first_fit(
    requests: &Resources,
    count: u32,
    nodes: &mut Nodes<'_>,
    start: usize,
    mut accept: impl FnMut(usize, &NodeView) -> bool,
) -> (Vec<(usize, u32)>, usize) {
    let mut taken = Vec::new();
    let mut left = count;
    for i in start..nodes.len() {
        if !nodes.view(i).is_some_and(|n| accept(i, n)) {
            continue;
        }
        let n = u32::try_from(nodes.holds(i, requests).min(u64::from(left))).unwrap_or(left);
        if n > 0 {
            nodes.take(i, requests, n);
            taken.push((i, n));
            left -= n;
        }
        if left == 0 {
            return (taken, i); // it may hold more
        }
    }
    (taken, nodes.len())
}

fn placed(on: &[(usize, u32)]) -> u64 {
    on.iter().map(|(_, n)| u64::from(*n)).sum()
}

/// The order of first-fit decreasing: cpu, memory, ephemeral storage, then the others.
fn larger_first(a: &Resources, b: &Resources) -> std::cmp::Ordering {
    (b.cpu_millis, b.memory, b.ephemeral_storage)
        .cmp(&(a.cpu_millis, a.memory, a.ephemeral_storage))
        .then_with(|| b.others().cmp(a.others()))
}

/// [`fits`], with the placement it judged on.
pub fn place<'r>(
    shape: &PodShape,
    pods: u32,
    room: &'r Room,
    reserved: &[Reservation],
) -> Placement<'r> {
    let mut nodes = Nodes::of(room);
    let mut accepts = Accepts::default();
    let mut owed = Resources::default();
    // 2: pending unbound pods, largest first, ties by uid; onto any schedulable node.
    let mut pending: Vec<&Resources> = room
        .pending
        .iter()
        .filter_map(|uid| room.pods.get(uid))
        .map(|p| &p.requests)
        .collect();
    pending.sort_by(|a, b| larger_first(a, b));
    for run in pending.chunk_by(|a, b| a == b) {
        if let Some(req) = run.first() {
            let count = u32::try_from(run.len()).unwrap_or(u32::MAX);
            let (on, _) = first_fit(req, count, &mut nodes, 0, |_, n| !n.unschedulable);
            owed.add(&req.times(u64::from(count).saturating_sub(placed(&on))));
        }
    }
    // 3: reservations in order, each onto the nodes its shape accepts.
    let mut reserved_on = Vec::with_capacity(reserved.len());
    for r in reserved {
        let on = accepts
            .of(&r.shape, nodes.len())
            .map(|g| g.first_fit(&r.shape.requests, r.pods, &mut nodes))
            .unwrap_or_default();
        let missing = u64::from(r.pods).saturating_sub(placed(&on));
        owed.add(&r.shape.requests.times(missing));
        reserved_on.push(on.into_iter().map(|(i, n)| (nodes.name(i), n)).collect());
    }
    let mut out = Placement {
        fit: Fit::Fits,
        reserved_on,
        job_on: Vec::new(),
    };
    if pods == 0 {
        return out;
    }
    if nodes.len() == 0 {
        out.fit = Fit::Short(Short::NoNodes);
        return out;
    }
    // 4: the Job's pods.
    let req = &shape.requests;
    let job_on = accepts
        .of(shape, nodes.len())
        .map(|g| g.first_fit(req, pods, &mut nodes))
        .unwrap_or_default();
    // 5: what fits nowhere, against the total left (only worked out when something is owed).
    let mut drop = 0u64;
    let mut lacking: BTreeMap<Box<str>, u32> = BTreeMap::new();
    if owed.iter().next().is_some() {
        let total = nodes.total(&owed, |i| nodes.view(i).is_some_and(|n| !n.unschedulable));
        for (r, owe) in owed.iter() {
            let (have, each) = (total.get(r), req.get(r));
            if owe > have && each > 0 {
                drop = drop.max((owe - have).div_ceil(each));
                *lacking.entry(r.into()).or_default() += 1;
            }
        }
    }
    let fit = placed(&job_on).saturating_sub(drop);
    if fit >= u64::from(pods) {
        out.job_on = job_on
            .into_iter()
            .map(|(i, n)| (nodes.name(i), n))
            .collect();
        return out;
    }
    out.fit = Fit::Short(short(shape, pods, fit, &job_on, &nodes, owed, lacking));
    out
}

/// What the Job lacks, once it does not fit: every node is looked at.
fn short(
    shape: &PodShape,
    pods: u32,
    fit: u64,
    job_on: &[(usize, u32)],
    nodes: &Nodes<'_>,
    owed: Resources,
    mut lacking: BTreeMap<Box<str>, u32>,
) -> Short {
    let req = &shape.requests;
    let mut excluded: BTreeMap<Exclusion, u32> = BTreeMap::new();
    let mut ok = Vec::new();
    for i in 0..nodes.len() {
        match nodes.view(i).map(|n| shape.excludes(n)) {
            Some(Some(e)) => *excluded.entry(e).or_default() += 1,
            Some(None) => ok.push(i),
            None => {}
        }
    }
    let excluded: Vec<(Exclusion, u32)> = excluded.into_iter().collect();
    if ok.is_empty() {
        return Short::Excluded(excluded);
    }
    let alloc = |i: usize| nodes.view(i).map(|n| &n.allocatable);
    if !ok.iter().any(|&i| alloc(i).is_some_and(|a| req.fits_in(a))) {
        let need = req.iter().find_map(|(r, v)| {
            let largest = ok.iter().filter_map(|&i| alloc(i)).map(|a| a.get(r)).max();
            let largest = largest.unwrap_or(0);
            (v > largest).then(|| Need {
                resource: r.into(),
                needs: v,
                largest,
            })
        });
        return Short::NeverFits { need, excluded };
    }
    // What stopped the next pod, on how many of the nodes it could use; and what was free
    // for the Job before its own pods (theirs given back), less what the worker owes.
    for &i in &ok {
        for (r, v) in req.iter() {
            if nodes.amount(i, r) < v {
                *lacking.entry(r.into()).or_default() += 1;
            }
        }
    }
    let mut before = nodes.total(req, |i| ok.binary_search(&i).is_ok());
    for (_, n) in job_on {
        before.add(&req.times(u64::from(*n)));
    }
    before.sub(&owed);
    let mut lacking: Vec<(Box<str>, u32)> = lacking.into_iter().collect();
    lacking.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Short::Insufficient {
        fit: u32::try_from(fit).unwrap_or(u32::MAX),
        wanted: pods,
        lacks: lacking
            .into_iter()
            .map(|(r, _)| Lack {
                free: before.get(&r),
                resource: r,
            })
            .collect(),
        eligible: u32::try_from(ok.len()).unwrap_or(u32::MAX),
        excluded,
    }
}
