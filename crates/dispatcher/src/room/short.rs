//! Why a Job does not fit on a worker, as the Event, `explain` and the metric say it.

use std::fmt;

use super::resources::Amount;
use super::shape::Exclusion;

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
