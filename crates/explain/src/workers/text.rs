//! The fleet as text, pure: one aligned line per worker (state, nodes, free cpu, memory and
//! GPUs of what is allocatable, Jobs placed, and why a worker is not read), then the Jobs
//! waiting for a worker by reason, then the teams of the fair order (`dispatch.shares`).

use std::fmt::Write as _;

use super::room_of::RoomLine;
use super::teams::TeamView;
use super::view::{RoomView, WorkerView, WorkersView};

const HEADER: [&str; 7] = [
    "WORKER",
    "STATE",
    "NODES",
    "FREE CPU",
    "FREE MEMORY",
    "FREE GPU",
    "PLACED",
];

/// The table, then the waiting line, then the teams where the policy names some.
pub fn render(view: &WorkersView) -> String {
    let mut rows: Vec<(Vec<String>, Option<String>)> =
        vec![(HEADER.map(str::to_owned).to_vec(), None)];
    for w in &view.workers {
        rows.push(row(w));
    }
    let mut out = table(&rows);
    out.push_str(&waiting_line(view));
    if !view.teams.is_empty() {
        out.push('\n');
        out.push_str(&teams_table(&view.teams));
    }
    out
}

/// Rows aligned in columns, each with its note after the last column.
fn table(rows: &[(Vec<String>, Option<String>)]) -> String {
    let columns = rows.first().map_or(0, |(r, _)| r.len());
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|(r, _)| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (cells, note) in rows {
        let mut line = String::new();
        for (cell, width) in cells.iter().zip(&widths) {
            let _ = write!(line, "{cell:<width$}  ");
        }
        if let Some(note) = note {
            line.push_str(note);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

const TEAM_HEADER: [&str; 9] = [
    "TEAM",
    "WEIGHT",
    "FAIR SHARE",
    "DOMINANT",
    "CPU",
    "MEMORY",
    "GPU",
    "PLACED",
    "WAITING",
];

/// One line per team: its weight and fair share, its dominant share (of which resource), what
/// it uses, its Jobs placed and waiting; the room held for its Jobs after.
fn teams_table(teams: &[TeamView]) -> String {
    let mut rows: Vec<(Vec<String>, Option<String>)> =
        vec![(TEAM_HEADER.map(str::to_owned).to_vec(), None)];
    for t in teams {
        let used =
            |r: &str, say: fn(f64) -> String| t.usage.get(r).map_or("0".to_owned(), |v| say(*v));
        let gpu: f64 = t
            .usage
            .iter()
            .filter(|(n, _)| n.ends_with("/gpu"))
            .map(|(_, v)| v)
            .sum();
        let dominant = match &t.dominant_resource {
            Some(r) => format!("{} {r}", percent(t.dominant_share)),
            None => "0%".to_owned(),
        };
        let held: Vec<String> = t
            .held
            .iter()
            .map(|h| format!("room held on {} for {}", h.worker, h.job))
            .collect();
        rows.push((
            vec![
                t.name.clone(),
                number(t.weight),
                percent(t.fair_share),
                dominant,
                used("cpu", cores),
                used("memory", bytes),
                number(gpu),
                t.placed.to_string(),
                t.waiting.to_string(),
            ],
            (!held.is_empty()).then(|| held.join("; ")),
        ));
    }
    table(&rows)
}

/// A fraction as a whole percent: `0.375` is `38%`.
pub(crate) fn percent(v: f64) -> String {
    format!("{}%", number((v * 100.0).round()))
}

fn row(w: &WorkerView) -> (Vec<String>, Option<String>) {
    let dash = || "-".to_owned();
    let (nodes, cpu, memory, gpu, note) = match &w.room {
        RoomView::Nodes(room) => (
            format!("{}/{}", room.nodes_schedulable, room.nodes_total),
            of(room, "cpu", cores),
            of(room, "memory", bytes),
            gpus(room),
            None,
        ),
        RoomView::Unbounded => (
            "unbounded".to_owned(),
            dash(),
            dash(),
            dash(),
            Some("capacity: Unbounded: placed by count".to_owned()),
        ),
        RoomView::Counting { why } => (
            "counting".to_owned(),
            dash(),
            dash(),
            dash(),
            Some(format!("placement counts Jobs here: {why}")),
        ),
        RoomView::Unread => (dash(), dash(), dash(), dash(), None),
    };
    let note = match (&w.why, note) {
        (Some(why), _) => Some(why.clone()),
        (None, note) => note,
    };
    (
        vec![
            w.name.clone(),
            w.state.label().to_owned(),
            nodes,
            cpu,
            memory,
            gpu,
            w.placed.to_string(),
        ],
        note,
    )
}

/// `free/allocatable` of one resource, `-` when the worker has none of it.
fn of(room: &RoomLine, resource: &str, say: fn(f64) -> String) -> String {
    match room.allocatable.get(resource) {
        Some(all) => format!(
            "{}/{}",
            say(room.free.get(resource).copied().unwrap_or(0.0)),
            say(*all)
        ),
        None => "-".to_owned(),
    }
}

/// Every extended resource whose name ends in `/gpu` (`nvidia.com/gpu`, `amd.com/gpu`), summed.
fn gpus(room: &RoomLine) -> String {
    let is_gpu = |name: &&String| name.ends_with("/gpu");
    let all: f64 = room
        .allocatable
        .iter()
        .filter(|(n, _)| is_gpu(n))
        .map(|(_, v)| v)
        .sum();
    if !room.allocatable.keys().any(|n| is_gpu(&n)) {
        return "-".to_owned();
    }
    let free: f64 = room
        .free
        .iter()
        .filter(|(n, _)| is_gpu(n))
        .map(|(_, v)| v)
        .sum();
    format!("{}/{}", number(free), number(all))
}

/// Cores, as kubectl's `top` would not round them away: `0.5`, `12`, `7.25`.
fn cores(v: f64) -> String {
    number((v * 100.0).round() / 100.0)
}

/// Bytes in the largest binary unit that keeps a whole number before the point: `512Mi`,
/// `47.5Gi`, `1Ti`.
fn bytes(v: f64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Ki", 1024.0),
    ];
    for (unit, size) in UNITS {
        if v.abs() >= size {
            return format!("{}{unit}", number((v / size * 10.0).round() / 10.0));
        }
    }
    number(v)
}

/// A number without a trailing `.0`.
pub(crate) fn number(v: f64) -> String {
    let text = format!("{v}");
    text.strip_suffix(".0").map_or(text.clone(), str::to_owned)
}

fn waiting_line(view: &WorkersView) -> String {
    let w = &view.waiting;
    if w.total == 0 {
        return "No Job waits for a worker.\n".to_owned();
    }
    let reasons: Vec<String> = w
        .by_reason
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect();
    format!(
        "Waiting for a worker: {} Job{} ({}).\n",
        w.total,
        if w.total == 1 { "" } else { "s" },
        reasons.join(", ")
    )
}
