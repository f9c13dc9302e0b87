//! What a timeline holds: lanes (one per completion index, or per pod slot of a NonIndexed
//! Job), a bar per pod attempt with its outcome and the rule its failure matched, back-offs,
//! and the Job's own moments. Times are whole seconds since the Job was created, as the
//! stories count them. The stories (`simulate`'s and `explain`'s) fill it from their own data
//! through [`Builder`]; nothing here decides what happened.

use jobwarden_rules::seconds;

/// How a pod attempt ended, as far as the story knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Succeeded,
    Failed,
    /// Failed by jobwarden's controller: it did not start within
    /// `jobwarden.io/pod-start-timeout`.
    StartTimeout,
    /// Failed with `DisruptionTarget=True`: evicted, preempted, its node drained.
    Disrupted,
    /// Deleted before it ended (killed), by a person or by the controller.
    Deleted,
    /// Not ended when the story was told.
    Running,
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::Succeeded,
        Outcome::Failed,
        Outcome::StartTimeout,
        Outcome::Disrupted,
        Outcome::Deleted,
        Outcome::Running,
    ];

    /// The word the legend and the hover text use.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::StartTimeout => "failed: did not start in time",
            Outcome::Disrupted => "disrupted",
            Outcome::Deleted => "deleted",
            Outcome::Running => "running",
        }
    }

    /// The class name in the SVG (`bar failed`), for tests and for people reading the file.
    pub fn class(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::StartTimeout => "start-timeout",
            Outcome::Disrupted => "disrupted",
            Outcome::Deleted => "deleted",
            Outcome::Running => "running",
        }
    }
}

/// The pod failure policy rule a failed pod matched, and what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMark {
    /// Its KEP-4443 name, or `rule N` for an unnamed rule.
    pub rule: String,
    /// `FailJob`, `FailIndex`, `Ignore` or `Count`.
    pub action: String,
}

impl RuleMark {
    /// The rule at `index` in `spec.podFailurePolicy.rules`, by its name where it has one.
    pub fn new(index: usize, name: Option<&str>, action: &str) -> RuleMark {
        RuleMark {
            rule: name.map_or_else(|| format!("rule {index}"), str::to_owned),
            action: action.to_owned(),
        }
    }

    /// `ExitCode3: FailJob`.
    pub fn label(&self) -> String {
        format!("{}: {}", self.rule, self.action)
    }
}

/// One pod attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bar {
    pub pod: String,
    /// Its completion index (Indexed Jobs).
    pub index: Option<i32>,
    /// Which pod of its index it is, from 1 (Indexed Jobs); its number in creation order, from
    /// 0, for a NonIndexed Job.
    pub attempt: Option<u32>,
    pub number: Option<u64>,
    /// Created, in seconds since the Job was created.
    pub start: u64,
    /// Ended or was deleted; `None`: still there when the story was told.
    pub end: Option<u64>,
    pub outcome: Outcome,
    pub rule: Option<RuleMark>,
    /// What the story says of this pod, a line each: the hover text under the bar's headline.
    pub story: Vec<String>,
}

/// A replacement held back: from the failure to the earliest moment the replacement may be
/// created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackOff {
    /// The failed pod whose replacement it holds.
    pub pod: String,
    pub from: u64,
    pub until: u64,
    /// What the story says of it.
    pub story: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MomentKind {
    Suspended,
    Resumed,
    SuccessCriteriaMet,
    FailureTarget,
    Complete,
    Failed,
    ActiveDeadline,
    /// When a live Job's story was told.
    Now,
}

/// Something that happened to the Job as a whole: a line across every lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moment {
    pub at: u64,
    pub kind: MomentKind,
    /// Short, above the line: `Failed: FailedIndexes`.
    pub label: String,
    /// What the story says of it (the hover text).
    pub story: String,
}

/// Whose lanes: a Job's completion indexes, or the pod slots of a NonIndexed Job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneKind {
    Index,
    Slot,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// `3` for index 3, `1` for the second pod slot.
    pub label: String,
    /// In the order they started.
    pub bars: Vec<Bar>,
    pub backoffs: Vec<BackOff>,
}

/// Everything the picture shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    /// `Job default/per-index`.
    pub title: String,
    /// How the story ended, or where it stands.
    pub ending: String,
    /// Lines under the title: who runs the Job, the scenario, what the times count from.
    pub notes: Vec<String>,
    pub lane_kind: LaneKind,
    pub lanes: Vec<Lane>,
    /// In time order.
    pub moments: Vec<Moment>,
    /// When the story ended, or was told: where the bars of pods still running end.
    pub told: u64,
    /// The right end of the time axis: `told` (later only when a pod's own times say so, a
    /// clock skewed between a node and the reader). Never a back-off's or a deadline's end
    /// still ahead: the picture shows what happened, no more.
    pub end: u64,
    /// Lanes and bars left out beyond the limits ([`MAX_LANES`], [`MAX_BARS`]).
    pub lanes_left_out: usize,
    pub bars_left_out: usize,
}

/// The most lanes drawn; the Job's later indexes or slots are counted, not drawn.
pub const MAX_LANES: usize = 10_000;
/// The most bars drawn; later pods are counted, not drawn.
pub const MAX_BARS: usize = 20_000;

/// Assembles a timeline in the order a story tells it: bars as pods appear, back-offs after
/// the pod whose replacement they hold, moments. Lanes are laid out once everything is known.
#[derive(Debug, Clone)]
pub struct Builder {
    completions: Option<i32>,
    bars: Vec<Bar>,
    backoffs: Vec<BackOff>,
    moments: Vec<Moment>,
}

impl Builder {
    /// An Indexed Job: a lane per completion index, `0..completions`, drawn even when empty.
    pub fn indexed(completions: i32) -> Builder {
        Builder {
            completions: Some(completions.max(0)),
            bars: Vec::new(),
            backoffs: Vec::new(),
            moments: Vec::new(),
        }
    }

    /// A NonIndexed Job: a lane per pod slot, as many as ever ran at once.
    pub fn non_indexed() -> Builder {
        Builder {
            completions: None,
            ..Builder::indexed(0)
        }
    }

    pub fn bar(&mut self, bar: Bar) {
        self.bars.push(bar);
    }

    /// The bar of `pod`, to add what the story says of it later.
    pub fn bar_of(&mut self, pod: &str) -> Option<&mut Bar> {
        self.bars.iter_mut().rev().find(|b| b.pod == pod)
    }

    /// A back-off holding the replacement of `pod` until `until`, drawn from `pod`'s end (or
    /// `from`, when the pod has not ended in the story).
    pub fn backoff(&mut self, pod: &str, from: u64, until: u64, story: String) {
        let from = self
            .bars
            .iter()
            .rev()
            .find(|b| b.pod == pod)
            .and_then(|b| b.end)
            .unwrap_or(from);
        if until > from {
            self.backoffs.push(BackOff {
                pod: pod.to_owned(),
                from,
                until,
                story,
            });
        }
    }

    pub fn moment(&mut self, moment: Moment) {
        self.moments.push(moment);
    }

    /// The timeline of a story that ended, or was told, at `told`: its axis ends there. A
    /// back-off still running is drawn up to the axis's end (its hover text says when it
    /// ends); a moment still ahead (an active deadline) is a note, not a line: a Job three
    /// seconds old was once drawn out to 11 s for the back-off it was in.
    pub fn build(
        self,
        title: String,
        ending: String,
        mut notes: Vec<String>,
        told: u64,
    ) -> Timeline {
        let Builder {
            completions,
            mut bars,
            backoffs,
            moments,
        } = self;
        let mut bars_left_out = bars.len().saturating_sub(MAX_BARS);
        bars.truncate(MAX_BARS);
        let end = bars
            .iter()
            .flat_map(|b| [Some(b.start), b.end])
            .flatten()
            .fold(told, u64::max);
        let moments = moments_until(moments, end, &mut notes);
        let (lane_kind, mut lanes, lane_of, mut lanes_left_out) = match completions {
            Some(n) => {
                let (lanes, lane_of, left_out) = index_lanes(n, &bars);
                (LaneKind::Index, lanes, lane_of, left_out)
            }
            None => {
                let (lanes, lane_of) = slot_lanes(&bars, &backoffs);
                (LaneKind::Slot, lanes, lane_of, 0)
            }
        };
        place_backoffs(&mut lanes, backoffs, &bars, &lane_of);
        for (bar, lane) in bars.into_iter().zip(lane_of) {
            match lane.and_then(|l| lanes.get_mut(l)) {
                Some(lane) => lane.bars.push(bar),
                None => bars_left_out += 1,
            }
        }
        for lane in &mut lanes {
            settle(lane);
        }
        if lanes.len() > MAX_LANES {
            lanes_left_out += lanes.len() - MAX_LANES;
            bars_left_out += lanes[MAX_LANES..]
                .iter()
                .map(|l| l.bars.len())
                .sum::<usize>();
            lanes.truncate(MAX_LANES);
        }
        Timeline {
            title,
            ending,
            notes,
            lane_kind,
            lanes,
            moments,
            told,
            end,
            lanes_left_out,
            bars_left_out,
        }
    }
}

/// The moments up to `end`, in time order; those still ahead become notes.
fn moments_until(moments: Vec<Moment>, end: u64, notes: &mut Vec<String>) -> Vec<Moment> {
    let (mut moments, ahead): (Vec<Moment>, Vec<Moment>) =
        moments.into_iter().partition(|m| m.at <= end);
    notes.extend(ahead.iter().map(|m| {
        format!(
            "Still ahead when the story was told: {} at {}.",
            m.label,
            seconds::format(m.at)
        )
    }));
    moments.sort_by_key(|m| (m.at, m.kind));
    moments
}

/// Each back-off into the lane of the last bar of the pod whose replacement it holds.
fn place_backoffs(
    lanes: &mut [Lane],
    backoffs: Vec<BackOff>,
    bars: &[Bar],
    lane_of: &[Option<usize>],
) {
    for backoff in backoffs {
        let lane = bars
            .iter()
            .rposition(|b| b.pod == backoff.pod)
            .and_then(|i| lane_of.get(i).copied().flatten());
        if let Some(lane) = lane.and_then(|l| lanes.get_mut(l)) {
            lane.backoffs.push(backoff);
        }
    }
}

/// A lane's bars in the order they started, and its back-offs cut where a replacement came.
fn settle(lane: &mut Lane) {
    lane.bars.sort_by_key(|b| (b.start, b.end));
    // A replacement made before the back-off's end (a controller that did not wait)
    // ends the wait there.
    for backoff in &mut lane.backoffs {
        let next = lane
            .bars
            .iter()
            .filter(|b| b.pod != backoff.pod && b.start >= backoff.from)
            .map(|b| b.start)
            .min();
        if let Some(next) = next {
            backoff.until = backoff.until.min(next);
        }
    }
    lane.backoffs.retain(|b| b.until > b.from);
}

fn lane(label: String) -> Lane {
    Lane {
        label,
        bars: Vec::new(),
        backoffs: Vec::new(),
    }
}

/// A lane per index `0..completions` (the first [`MAX_LANES`]), then one per index the pods
/// carry beyond it (a pod of a hostile or mistaken annotation), then one for pods without an
/// index. Returns each bar's lane (`None`: left out) and how many lanes were left out.
fn index_lanes(completions: i32, bars: &[Bar]) -> (Vec<Lane>, Vec<Option<usize>>, usize) {
    let total = usize::try_from(completions).unwrap_or(0);
    let drawn = total.min(MAX_LANES);
    let mut lanes: Vec<Lane> = (0..drawn).map(|i| lane(i.to_string())).collect();
    let mut extra: Vec<Option<i32>> = bars
        .iter()
        .map(|b| b.index)
        .filter(|i| i.is_none_or(|i| i < 0 || i >= completions))
        .collect();
    extra.sort_by_key(|i| (i.is_none(), *i));
    extra.dedup();
    for i in &extra {
        lanes.push(lane(i.map_or_else(|| "none".to_owned(), |i| i.to_string())));
    }
    let lane_of = bars
        .iter()
        .map(|b| match b.index {
            Some(i) if (0..completions).contains(&i) => {
                usize::try_from(i).ok().filter(|i| *i < drawn)
            }
            other => extra.iter().position(|e| *e == other).map(|p| drawn + p),
        })
        .collect();
    (lanes, lane_of, total - drawn)
}

/// Pod slots: each pod goes to the first slot free when it was created, a slot being busy
/// while its pod runs and while the back-off after it holds the replacement.
fn slot_lanes(bars: &[Bar], backoffs: &[BackOff]) -> (Vec<Lane>, Vec<Option<usize>>) {
    let mut order: Vec<usize> = (0..bars.len()).collect();
    order.sort_by_key(|&i| (bars[i].start, bars[i].number, i));
    let mut free_at: Vec<Option<u64>> = Vec::new();
    let mut lane_of = vec![None; bars.len()];
    for i in order {
        let bar = &bars[i];
        let slot = match free_at
            .iter()
            .position(|f| f.is_some_and(|f| f <= bar.start))
        {
            Some(slot) => slot,
            None => {
                free_at.push(None);
                free_at.len() - 1
            }
        };
        let held = backoffs
            .iter()
            .filter(|b| b.pod == bar.pod)
            .map(|b| b.until)
            .max();
        free_at[slot] = bar.end.map(|end| held.map_or(end, |h| h.max(end)));
        lane_of[i] = Some(slot);
    }
    let lanes = (0..free_at.len()).map(|i| lane(i.to_string())).collect();
    (lanes, lane_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn bar(pod: &str, index: Option<i32>, start: u64, end: Option<u64>) -> Bar {
        Bar {
            pod: pod.to_owned(),
            index,
            attempt: None,
            number: None,
            start,
            end,
            outcome: if end.is_some() {
                Outcome::Succeeded
            } else {
                Outcome::Running
            },
            rule: None,
            story: Vec::new(),
        }
    }

    fn build(b: Builder) -> Timeline {
        b.build("Job a/b".into(), String::new(), Vec::new(), 0)
    }

    #[test]
    fn an_indexed_job_has_a_lane_per_index_even_without_pods() {
        let mut b = Builder::indexed(4);
        b.bar(bar("p2", Some(2), 0, Some(5)));
        b.bar(bar("p2b", Some(2), 15, Some(20)));
        b.bar(bar("odd", Some(9), 1, Some(2)));
        b.bar(bar("none", None, 1, Some(2)));
        let t = build(b);
        let labels: Vec<&str> = t.lanes.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["0", "1", "2", "3", "9", "none"]);
        assert_eq!(t.lanes[2].bars.len(), 2);
        assert_eq!(t.lanes[4].bars[0].pod, "odd");
        assert_eq!(t.lanes[5].bars[0].pod, "none");
        assert_eq!(t.end, 20);
    }

    #[test]
    fn pod_slots_are_reused_once_a_pod_and_its_back_off_are_over() {
        let mut b = Builder::non_indexed();
        b.bar(bar("a", None, 0, Some(5)));
        b.bar(bar("b", None, 0, Some(30)));
        b.backoff("a", 5, 15, "back-off".into());
        // Created during a's back-off: a third slot, not a's.
        b.bar(bar("c", None, 10, Some(12)));
        b.bar(bar("d", None, 15, None));
        let t = build(b);
        let pods: Vec<Vec<&str>> = t
            .lanes
            .iter()
            .map(|l| l.bars.iter().map(|b| b.pod.as_str()).collect())
            .collect();
        assert_eq!(pods, [vec!["a", "d"], vec!["b"], vec!["c"]]);
        assert_eq!(t.lanes[0].backoffs.len(), 1);
        assert_eq!(t.lanes[0].backoffs[0].from, 5);
    }

    #[test]
    fn a_back_off_starts_where_its_pod_ended() {
        let mut b = Builder::indexed(1);
        b.bar(bar("a", Some(0), 0, Some(7)));
        b.backoff("a", 9, 27, String::new());
        // Over before the pod ended: nothing to draw.
        b.backoff("a", 3, 6, String::new());
        let t = build(b);
        assert_eq!(t.lanes[0].backoffs.len(), 1);
        assert_eq!(
            (t.lanes[0].backoffs[0].from, t.lanes[0].backoffs[0].until),
            (7, 27)
        );
    }

    #[test]
    fn a_back_off_ends_where_the_replacement_began() {
        let mut b = Builder::indexed(2);
        b.bar(bar("a", Some(0), 0, Some(5)));
        b.backoff("a", 5, 15, String::new());
        b.bar(bar("a2", Some(0), 9, None));
        b.bar(bar("b", Some(1), 0, Some(5)));
        b.backoff("b", 5, 15, String::new());
        b.bar(bar("b2", Some(1), 5, None));
        let t = build(b);
        assert_eq!(
            (t.lanes[0].backoffs[0].from, t.lanes[0].backoffs[0].until),
            (5, 9)
        );
        assert!(t.lanes[1].backoffs.is_empty());
    }

    #[test]
    fn lanes_and_bars_beyond_the_limits_are_counted() {
        let mut b = Builder::indexed(i32::MAX);
        b.bar(bar("far", Some(MAX_LANES as i32 + 5), 0, Some(1)));
        b.bar(bar("near", Some(3), 0, Some(1)));
        let t = build(b);
        assert_eq!(t.lanes.len(), MAX_LANES);
        assert_eq!(t.lanes_left_out, i32::MAX as usize - MAX_LANES);
        assert_eq!(t.bars_left_out, 1);
        assert_eq!(t.lanes[3].bars.len(), 1);
    }
}
