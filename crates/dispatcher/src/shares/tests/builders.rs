//! A team, a Job's requests, a time, a fit, each in one line.

use jobwarden_admission::policy::{NamespaceMatch, Share};
use k8s_openapi::jiff::Timestamp;

use crate::room::{Fit, Lack, Resources, Short};
use crate::shares::{Shares, TeamId, Teams};

pub const GPU: &str = "nvidia.com/gpu";

/// `[("cpu", 2000), (GPU, 1)]`: cpu in millicores.
pub fn res(list: &[(&str, u64)]) -> Resources {
    let mut r = Resources::default();
    for (name, v) in list {
        r.set(name, *v);
    }
    r
}

pub fn gpus(n: u64) -> Resources {
    res(&[(GPU, n), ("cpu", 1000 * n), ("pods", 1)])
}

pub fn cpus(n: u64) -> Resources {
    res(&[("cpu", 1000 * n), ("pods", 1)])
}

/// Seconds after the epoch.
pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

pub fn share(name: &str, weight: f64, names: &[&str]) -> Share {
    Share {
        name: name.to_owned(),
        namespaces: NamespaceMatch {
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            selector: None,
        },
        weight,
    }
}

/// The teams of these shares, then the team of a name.
pub fn shares_of(list: &[Share]) -> Shares {
    Shares::new(Teams::from_policy(list))
}

pub fn team(s: &Shares, name: &str) -> TeamId {
    s.teams().find(name).unwrap()
}

/// A fleet of `n` GPUs and plenty of cpu.
pub fn gpu_fleet(n: u64) -> Resources {
    res(&[(GPU, n), ("cpu", 1_000_000), ("pods", 1000)])
}

pub fn insufficient(fit: u32, wanted: u32, lacks: &[&str]) -> Fit {
    Fit::Short(Short::Insufficient {
        fit,
        wanted,
        lacks: lacks
            .iter()
            .map(|r| Lack {
                resource: (*r).into(),
                free: 0,
            })
            .collect(),
        eligible: 1,
        excluded: Vec::new(),
    })
}

pub fn never() -> Fit {
    Fit::Short(Short::NeverFits {
        need: None,
        excluded: Vec::new(),
    })
}

/// The uids `next()` gives, placing each as it comes with `requests`, until none waits.
pub fn place_all(s: &mut Shares, requests: &dyn Fn(&str) -> Resources) -> Vec<String> {
    let mut placed = Vec::new();
    while let Some(key) = s.next() {
        let uid = key.uid.to_string();
        let team = s.team_of_job(&uid).unwrap();
        s.chose(&uid, team, requests(&uid));
        placed.push(uid);
    }
    placed
}
