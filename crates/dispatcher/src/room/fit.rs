//! Whether all the pods a Job runs at once fit on a worker now, and if not, what is short.
//!
//! How room is charged (deterministic, and never promising a node more than it holds):
//! 1. Each node starts with its allocatable less what its bound pods request.
//! 2. Unbound pods the scheduler has not found unschedulable (it is about to bind them) are
//!    placed first-fit decreasing onto the schedulable nodes: where the scheduler puts them
//!    is its choice, and their own filters are not kept, so this is an estimate of the room
//!    they take, charged before anything of ours because they are ahead of us in its queue.
//! 3. Reservations (Jobs placed there whose pods are not seen yet) are placed in the order
//!    given, oldest first, pod by pod, first-fit over the nodes their own shape accepts, in
//!    node-name order. That is the order and the rule by which each of them was judged, so
//!    while the room is unchanged every reservation lands where it was judged to fit, and a
//!    later Job is judged on what is left. (First-fit *decreasing* would re-sort them on each
//!    call and could move an older reservation off the room it was promised.)
//! 4. The Job's pods are placed the same way after them; a node may take several.
//! 5. What fits on no node in 2 and 3 (the room shrank under it) is owed by the worker as a
//!    whole: it must fit in the total left on the schedulable nodes after 4, and each Job pod
//!    that has to go for it to fit is a pod that does not fit.

use std::collections::BTreeMap;
use std::fmt;

use super::resources::{Amount, Resources};
use super::shape::{Exclusion, PodShape};
use super::views::NodeView;
use super::worker_room::Room;

/// Pods of a Job placed on the worker and not yet seen there as pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub shape: PodShape,
    pub pods: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    Fits,
    Short(Short),
}

/// A resource the Job's pods lack, and how much of it is free for them on the nodes that
/// pass its filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lack {
    pub resource: Box<str>,
    pub free: u64,
}

/// A resource one pod asks more of than any node that passes its filters has at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub resource: Box<str>,
    pub needs: u64,
    pub largest: u64,
}

/// Why a Job does not fit on a worker. `excluded` lists the nodes its filters rule out,
/// by reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Short {
    NoNodes,
    /// Every node is ruled out by the filters.
    Excluded(Vec<(Exclusion, u32)>),
    /// Not even an empty node that passes the filters could hold one pod (`need` is `None`
    /// when each resource alone fits somewhere but no node has them all).
    NeverFits {
        need: Option<Need>,
        excluded: Vec<(Exclusion, u32)>,
    },
    Insufficient {
        fit: u32,
        wanted: u32,
        lacks: Vec<Lack>,
        /// Nodes that pass the filters.
        eligible: u32,
        excluded: Vec<(Exclusion, u32)>,
    },
}

impl Short {
    /// No node could ever hold one pod, however much room frees.
    pub fn never(&self) -> bool {
        matches!(self, Short::NeverFits { .. })
    }

    /// A short label for metrics.
    pub fn reason_label(&self) -> &'static str {
        match self {
            Short::NoNodes => "no_nodes",
            Short::NeverFits { .. } => "never_fits",
            Short::Insufficient { .. } => "insufficient_resources",
            Short::Excluded(list) => {
                // The reason that rules out the most nodes; ties go to the first.
                let top = list
                    .iter()
                    .fold(None, |best: Option<&(Exclusion, u32)>, e| match best {
                        Some(b) if b.1 >= e.1 => Some(b),
                        _ => Some(e),
                    });
                match top.map(|(e, _)| e) {
                    Some(Exclusion::Cordoned) => "cordoned",
                    Some(Exclusion::NodeSelector(_)) => "node_selector",
                    Some(Exclusion::Affinity) => "affinity",
                    Some(Exclusion::Taint(_)) => "taint",
                    None => "no_nodes",
                }
            }
        }
    }
}

fn nodes(n: u32) -> &'static str {
    if n == 1 { "node" } else { "nodes" }
}

/// An exclusion that holds on every node.
fn write_all(f: &mut fmt::Formatter<'_>, e: &Exclusion) -> fmt::Result {
    match e {
        Exclusion::Cordoned => f.write_str("every node is cordoned"),
        Exclusion::NodeSelector(kv) => write!(f, "no node matches nodeSelector {kv}"),
        Exclusion::Affinity => f.write_str("no node matches the required node affinity"),
        Exclusion::Taint(t) => write!(f, "taint {t} not tolerated"),
    }
}

/// Exclusions that hold on some nodes: `taint x=y:NoSchedule not tolerated (2 nodes)`.
/// `lead`: a part of the message comes before them.
fn write_some(f: &mut fmt::Formatter<'_>, list: &[(Exclusion, u32)], lead: bool) -> fmt::Result {
    for (k, (e, n)) in list.iter().enumerate() {
        if lead || k > 0 {
            f.write_str("; ")?;
        }
        match e {
            Exclusion::Cordoned => f.write_str("cordoned")?,
            Exclusion::NodeSelector(kv) => write!(f, "nodeSelector {kv} not matched")?,
            Exclusion::Affinity => f.write_str("required node affinity not matched")?,
            Exclusion::Taint(t) => write!(f, "taint {t} not tolerated")?,
        }
        write!(f, " ({n} {})", nodes(*n))?;
    }
    Ok(())
}

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Short::NoNodes => f.write_str("no nodes"),
            Short::Excluded(list) => match list.as_slice() {
                [(e, _)] => write_all(f, e),
                _ => write_some(f, list, false),
            },
            Short::NeverFits { need, excluded } => {
                f.write_str("does not fit on any node today: ")?;
                match need {
                    Some(n) => write!(
                        f,
                        "needs {} {}, the largest node has {}",
                        Amount(&n.resource, n.needs),
                        n.resource,
                        Amount(&n.resource, n.largest)
                    )?,
                    None => f.write_str("no node has all it requests at once")?,
                }
                write_some(f, excluded, true)
            }
            Short::Insufficient {
                fit,
                wanted,
                lacks,
                eligible,
                excluded,
            } => {
                write!(f, "{fit} of {wanted} pods fit: insufficient ")?;
                if lacks.is_empty() {
                    f.write_str("room")?;
                }
                for (i, l) in lacks.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(
                        f,
                        "{} ({} free on {eligible} {})",
                        l.resource,
                        Amount(&l.resource, l.free),
                        nodes(*eligible)
                    )?;
                }
                write_some(f, excluded, true)
            }
        }
    }
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

/// The nodes a filter set accepts, computed once per distinct set.
struct Eligible<'s> {
    groups: Vec<(&'s PodShape, Vec<usize>)>,
}

impl<'s> Eligible<'s> {
    fn of(&mut self, shape: &'s PodShape, nodes: &[&NodeView]) -> &[usize] {
        let at = match self.groups.iter().position(|(s, _)| s.same_filters(shape)) {
            Some(at) => at,
            None => {
                let list = (0..nodes.len())
                    .filter(|&i| nodes.get(i).is_some_and(|n| shape.excludes(n).is_none()))
                    .collect();
                self.groups.push((shape, list));
                self.groups.len() - 1
            }
        };
        self.groups.get(at).map_or(&[], |(_, l)| l.as_slice())
    }
}

/// First-fit of `count` pods of `requests` over `eligible`, in order: each node takes as
/// many as it holds before the next is tried (a node left behind never takes a later pod of
/// the same requests, as free room only shrinks). Returns the nodes taken with their pods;
/// the work is one step per node, whatever `count`.
fn first_fit(
    requests: &Resources,
    count: u32,
    eligible: &[usize],
    free: &mut [Resources],
) -> Vec<(usize, u32)> {
    let mut taken = Vec::new();
    let mut left = count;
    for &i in eligible {
        if left == 0 {
            break;
        }
        let Some(f) = free.get_mut(i) else { continue };
        let holds = requests
            .iter()
            .map(|(name, v)| f.get(name) / v)
            .min()
            .unwrap_or(u64::MAX);
        let n = u32::try_from(holds.min(u64::from(left))).unwrap_or(left);
        if n > 0 {
            f.sub(&requests.times(u64::from(n)));
            taken.push((i, n));
            left -= n;
        }
    }
    taken
}

fn placed(on: &[(usize, u32)]) -> u64 {
    on.iter().map(|(_, n)| u64::from(*n)).sum()
}

/// The order of first-fit decreasing: cpu, memory, ephemeral storage, then the others.
fn size(r: &Resources) -> (u64, u64, u64, Vec<(&str, u64)>) {
    (
        r.cpu_millis,
        r.memory,
        r.ephemeral_storage,
        r.others().collect(),
    )
}

/// [`fits`], with the placement it judged on.
pub fn place<'r>(
    shape: &PodShape,
    pods: u32,
    room: &'r Room,
    reserved: &[Reservation],
) -> Placement<'r> {
    let nodes: Vec<&NodeView> = room.nodes().collect();
    let mut free: Vec<Resources> = room
        .nodes
        .values()
        .filter_map(|s| {
            let v = s.view.as_ref()?;
            let mut f = v.allocatable.clone();
            f.sub(&s.used);
            Some(f)
        })
        .collect();
    let name = |i: usize| nodes.get(i).map_or("", |n| &*n.name);
    let mut eligible = Eligible { groups: Vec::new() };
    let mut owed = Resources::default();
    // 2: pending unbound pods, largest first (cpu, then memory, then the rest), ties by uid.
    let mut pending: Vec<&Resources> = room
        .pending
        .iter()
        .filter_map(|uid| room.pods.get(uid))
        .map(|p| &p.requests)
        .collect();
    pending.sort_by(|a, b| size(b).cmp(&size(a)));
    let schedulable: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes.get(i).is_some_and(|n| !n.unschedulable))
        .collect();
    for run in pending.chunk_by(|a, b| a == b) {
        if let Some(req) = run.first() {
            let count = u32::try_from(run.len()).unwrap_or(u32::MAX);
            let on = first_fit(req, count, &schedulable, &mut free);
            owed.add(&req.times(u64::from(count).saturating_sub(placed(&on))));
        }
    }
    let mut reserved_on = Vec::with_capacity(reserved.len());
    for r in reserved {
        let on = first_fit(
            &r.shape.requests,
            r.pods,
            eligible.of(&r.shape, &nodes),
            &mut free,
        );
        let missing = u64::from(r.pods).saturating_sub(placed(&on));
        owed.add(&r.shape.requests.times(missing));
        reserved_on.push(on.into_iter().map(|(i, n)| (name(i), n)).collect());
    }
    let mut out = Placement {
        fit: Fit::Fits,
        reserved_on,
        job_on: Vec::new(),
    };
    if pods == 0 {
        return out;
    }
    if nodes.is_empty() {
        out.fit = Fit::Short(Short::NoNodes);
        return out;
    }
    let mut excluded: BTreeMap<Exclusion, u32> = BTreeMap::new();
    for n in &nodes {
        if let Some(e) = shape.excludes(n) {
            *excluded.entry(e).or_default() += 1;
        }
    }
    let excluded: Vec<(Exclusion, u32)> = excluded.into_iter().collect();
    let ok: Vec<usize> = eligible.of(shape, &nodes).to_vec();
    let req = &shape.requests;
    if ok.is_empty() {
        out.fit = Fit::Short(Short::Excluded(excluded));
        return out;
    }
    let alloc = |i: usize| nodes.get(i).map(|n| &n.allocatable);
    if !ok.iter().any(|&i| alloc(i).is_some_and(|a| req.fits_in(a))) {
        let need = req.iter().find_map(|(r, v)| {
            let largest = ok
                .iter()
                .filter_map(|&i| alloc(i))
                .map(|a| a.get(r))
                .max()
                .unwrap_or(0);
            (v > largest).then(|| Need {
                resource: r.into(),
                needs: v,
                largest,
            })
        });
        out.fit = Fit::Short(Short::NeverFits { need, excluded });
        return out;
    }
    // Free for this Job before its own pods, for the message.
    let mut before = Resources::default();
    for &i in &ok {
        if let Some(f) = free.get(i) {
            before.add(f);
        }
    }
    let job_on = first_fit(req, pods, &ok, &mut free);
    let mut total = Resources::default();
    for (i, node) in nodes.iter().enumerate() {
        if let (false, Some(f)) = (node.unschedulable, free.get(i)) {
            total.add(f);
        }
    }
    let mut drop = 0u64;
    let mut lacking: BTreeMap<&str, u32> = BTreeMap::new();
    for (r, owe) in owed.iter() {
        let (have, each) = (total.get(r), req.get(r));
        if owe > have && each > 0 {
            drop = drop.max((owe - have).div_ceil(each));
            *lacking.entry(r).or_default() += 1;
        }
    }
    let fit = placed(&job_on).saturating_sub(drop);
    out.job_on = job_on.into_iter().map(|(i, n)| (name(i), n)).collect();
    if fit >= u64::from(pods) {
        return out;
    }
    out.job_on.clear();
    // What stopped the next pod, on how many of the nodes it could use.
    for &i in &ok {
        if let Some(f) = free.get(i) {
            for r in req.short_in(f) {
                *lacking.entry(r).or_default() += 1;
            }
        }
    }
    let mut lacking: Vec<(&str, u32)> = lacking.into_iter().collect();
    lacking.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    before.sub(&owed);
    out.fit = Fit::Short(Short::Insufficient {
        fit: u32::try_from(fit).unwrap_or(u32::MAX),
        wanted: pods,
        lacks: lacking
            .into_iter()
            .map(|(r, _)| Lack {
                resource: r.into(),
                free: before.get(r),
            })
            .collect(),
        eligible: u32::try_from(ok.len()).unwrap_or(u32::MAX),
        excluded,
    });
    out
}
