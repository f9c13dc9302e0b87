//! The lanes: a band per lane with its label, the back-offs, a bar per pod attempt with its
//! hover text, and at the end of each failure that matched a rule, the rule's mark and, where
//! the lane has room, its name and action. A label never leaves its lane and nothing drawn
//! after it covers it: it goes beside the mark, or raised into a row above the lane's bars
//! (the lane grows), or shortened with its whole text as its hover text, or not at all (the
//! mark's hover text still names the rule).

use jobwarden_rules::seconds;

use crate::axis::Axis;
use crate::model::{Bar, Lane, LaneKind, Outcome};
use crate::style::{self, fit, text_width};
use crate::xml::{Value, Writer};

/// The lane geometry the frame decided.
pub(crate) struct Geometry {
    /// Where the lane column starts and the plot spans.
    pub label_x: f64,
    pub x0: f64,
    pub x1: f64,
    /// One lane's height, without the room raised labels take above its bars.
    pub height: f64,
    /// Every how many lanes one is labelled.
    pub label_every: usize,
    /// Where the bars of pods still running end: when the story was told.
    pub told_x: f64,
    /// Each lane's top and the room above its bars (0, or a row of raised labels), then the
    /// bottom of the last ([`Geometry::stack`]).
    pub tops: Vec<(f64, f64)>,
}

impl Geometry {
    fn bar_height(&self) -> f64 {
        if self.height >= 16.0 {
            self.height - 8.0
        } else if self.height >= 6.0 {
            self.height - 2.0
        } else {
            self.height
        }
    }

    /// The font of the rule labels; `None`: lanes too thin for words.
    fn label_size(&self) -> Option<f64> {
        (self.height >= 14.0).then(|| (self.height - 4.0).min(11.0))
    }

    /// The lanes stacked from `top`, a lane of raised labels as much taller as they need.
    pub fn stack(&mut self, top: f64, labels: &[Vec<Label>]) {
        let rise = self.label_size().map_or(0.0, raised_row);
        let mut above = 0.0;
        self.tops = labels
            .iter()
            .enumerate()
            .map(|(i, lane)| {
                let room = if lane.iter().any(|l| l.raised) {
                    rise
                } else {
                    0.0
                };
                let lane_top = top + i as f64 * self.height + above;
                above += room;
                (lane_top, room)
            })
            .collect();
        self.tops
            .push((top + self.height * labels.len() as f64 + above, 0.0));
    }

    /// Where the lanes begin.
    pub fn top(&self) -> f64 {
        self.tops.first().map_or(0.0, |t| t.0)
    }

    /// Where the lanes end.
    pub fn bottom(&self) -> f64 {
        self.tops.last().map_or(0.0, |t| t.0)
    }

    /// Lane `i`'s band: its top and height, the raised labels' row included.
    fn band(&self, i: usize) -> (f64, f64) {
        let (top, room) = self.tops.get(i).copied().unwrap_or_default();
        (top, self.height + room)
    }

    /// The top of lane `i`'s bars (a lane [`Geometry::height`] tall under its raised
    /// labels' row).
    fn bars_top(&self, i: usize) -> f64 {
        let (top, room) = self.tops.get(i).copied().unwrap_or_default();
        top + room
    }
}

/// The height of a lane's row of raised labels at `size`: a label box and a gap.
fn raised_row(size: f64) -> f64 {
    size + 6.0
}

/// The longest hover text line kept, and the most lines: a story's condition message can be
/// long, and a thousand bars must stay a few MiB.
const MAX_LINE: usize = 300;
const MAX_LINES: usize = 12;

/// The lanes' bands and labels, under everything else.
pub(crate) fn bands(w: &mut Writer, lanes: &[Lane], g: &Geometry) {
    w.open("g", &[("class", "bands".into())]);
    for (i, lane) in lanes.iter().enumerate() {
        let (top, height) = g.band(i);
        // Every other lane shaded, so a row reads across; the band is also what the tests
        // measure labels against, so even the white ones are drawn.
        w.empty(
            "rect",
            &[
                ("id", format!("jwt-lane-{i}").as_str().into()),
                ("class", "band".into()),
                ("x", g.label_x.into()),
                ("y", top.into()),
                ("width", (g.x1 - g.label_x).into()),
                ("height", height.into()),
                (
                    "fill",
                    if i % 2 == 1 { "#F2F2F2" } else { "#FFFFFF" }.into(),
                ),
            ],
        );
        if i % g.label_every == 0 {
            let size = (g.height - 2.0).clamp(8.0, 11.0);
            w.text(
                "text",
                &[
                    ("id", format!("jwt-lane-label-{i}").as_str().into()),
                    ("class", "lane-label".into()),
                    ("x", (g.x0 - 8.0).into()),
                    ("y", (g.bars_top(i) + g.height / 2.0 + size * 0.35).into()),
                    ("font-size", size.into()),
                    ("text-anchor", "end".into()),
                    ("fill", "#333333".into()),
                ],
                &lane.label,
            );
        }
    }
    w.close("g");
}

/// Each lane's back-offs, bars, marks and rule labels (as [`place_labels`] placed them), a
/// group per lane.
pub(crate) fn draw(
    w: &mut Writer,
    lanes: &[Lane],
    kind: LaneKind,
    axis: &Axis,
    g: &Geometry,
    labels: &[Vec<Label>],
) {
    for (i, lane) in lanes.iter().enumerate() {
        let top = g.bars_top(i);
        w.open(
            "g",
            &[
                ("class", "lane".into()),
                ("data-lane", (&lane.label).into()),
            ],
        );
        backoffs(w, lane, axis, g, top);
        let labels = labels.get(i).map_or(&[][..], Vec::as_slice);
        for (b, bar) in lane.bars.iter().enumerate() {
            draw_bar(w, bar, kind, axis, g, top);
            let label = labels.iter().find(|l| l.bar == b);
            if let (Some(label), Some(size)) = (label, g.label_size()) {
                draw_label(w, label, g, (i, size));
            }
        }
        w.close("g");
    }
}

fn backoffs(w: &mut Writer, lane: &Lane, axis: &Axis, g: &Geometry, top: f64) {
    let h = (g.bar_height() * 0.6).max(1.0);
    for b in &lane.backoffs {
        let x = axis.x(b.from);
        let title = format!(
            "back-off from {} to {} ({})\n{}",
            seconds::format(b.from),
            seconds::format(b.until),
            seconds::format(b.until - b.from),
            cut(&b.story)
        );
        w.titled(
            "rect",
            &[
                ("class", "backoff".into()),
                ("x", x.into()),
                ("y", (top + (g.height - h) / 2.0).into()),
                ("width", (axis.x(b.until) - x).max(1.0).into()),
                ("height", h.into()),
                ("fill", style::BACKOFF_FILL.into()),
                ("stroke", style::BACKOFF_STROKE.into()),
                ("stroke-width", 0.6.into()),
                ("stroke-dasharray", "3 2".into()),
            ],
            title.trim_end(),
        );
    }
}

/// The bar's hover text: who, when, how it ended, then what the story says of it.
fn hover(bar: &Bar, kind: LaneKind) -> String {
    let mut who = format!("pod {}", bar.pod);
    match (kind, bar.index, bar.attempt, bar.number) {
        (LaneKind::Index, Some(i), Some(a), _) => who += &format!(" (index {i}, attempt {a})"),
        (LaneKind::Index, Some(i), None, _) => who += &format!(" (index {i})"),
        (_, _, _, Some(n)) => who += &format!(" (#{n})"),
        _ => {}
    }
    let when = match bar.end {
        Some(end) => format!(
            "{}: created at {}, ended at {} ({})",
            bar.outcome.word(),
            seconds::format(bar.start),
            seconds::format(end),
            seconds::format(end.saturating_sub(bar.start))
        ),
        None => format!(
            "{}: created at {}",
            bar.outcome.word(),
            seconds::format(bar.start)
        ),
    };
    let mut lines = vec![who, when];
    if let Some(rule) = &bar.rule {
        lines.push(format!("pod failure policy: {} matched", rule.label()));
    }
    lines.extend(bar.story.iter().take(MAX_LINES).map(|l| cut(l)));
    lines.join("\n")
}

/// A story line, cut at [`MAX_LINE`] characters.
pub(crate) fn cut(line: &str) -> String {
    if line.chars().count() <= MAX_LINE {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(MAX_LINE - 1).collect();
    cut.push('…');
    cut
}

fn draw_bar(w: &mut Writer, bar: &Bar, kind: LaneKind, axis: &Axis, g: &Geometry, top: f64) {
    let bh = g.bar_height();
    let y = top + (g.height - bh) / 2.0;
    let x = axis.x(bar.start);
    let end = bar.end.map_or(g.told_x, |e| axis.x(e));
    // A pod that lived less than a second is still seen.
    let width = (end - x).max(2.0);
    let look = style::outcome(bar.outcome);
    let fill = style::fill(bar.outcome);
    let data = bar_data(bar);
    let mut all: Vec<(&str, Value)> = data.iter().map(|(k, v)| (*k, v.into())).collect();
    all.extend([
        ("x", x.into()),
        ("y", y.into()),
        ("width", width.into()),
        ("height", bh.into()),
        ("fill", fill.as_str().into()),
    ]);
    if bh >= 6.0 {
        all.extend([("stroke", look.stroke.into()), ("stroke-width", 0.8.into())]);
    }
    w.titled("rect", &all, &hover(bar, kind));
    if bar.outcome == Outcome::Running && bh >= 6.0 {
        running_arrow(w, end, y, bh, look.stroke);
    }
    if let Some(rule) = &bar.rule {
        let r = (bh / 2.0).clamp(1.5, 5.5);
        let (d, fill) = style::mark_path(&rule.action, end, top + g.height / 2.0, r);
        let title = format!("pod {}: {} matched", bar.pod, rule.label());
        w.titled(
            "path",
            &[
                ("class", "mark".into()),
                ("data-rule", (&rule.rule).into()),
                ("data-action", (&rule.action).into()),
                ("d", d.as_str().into()),
                ("fill", fill.into()),
                ("stroke", "#000000".into()),
                ("stroke-width", 1.2.into()),
            ],
            &title,
        );
    }
}

/// A bar's class and `data-` attributes: its pod, index, attempt and rule, where it has them.
fn bar_data(bar: &Bar) -> Vec<(&'static str, String)> {
    let mut attrs = vec![
        ("class", format!("bar {}", bar.outcome.class())),
        ("data-pod", bar.pod.clone()),
    ];
    if let Some(index) = bar.index {
        attrs.push(("data-index", index.to_string()));
    }
    if let Some(attempt) = bar.attempt {
        attrs.push(("data-attempt", attempt.to_string()));
    }
    if let Some(rule) = &bar.rule {
        attrs.push(("data-rule", rule.label()));
    }
    attrs
}

/// An arrowhead past the end of the bar of a pod still running (at `y`, `bh` tall): it goes on.
fn running_arrow(w: &mut Writer, end: f64, y: f64, bh: f64, colour: &str) {
    let (tip, mid) = (end + 6.0, y + bh / 2.0);
    w.empty(
        "path",
        &[
            ("class", "running-arrow".into()),
            (
                "d",
                format!(
                    "M{:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z",
                    end,
                    y,
                    tip,
                    mid,
                    end,
                    y + bh
                )
                .as_str()
                .into(),
            ),
            ("fill", colour.into()),
        ],
    );
}

/// A rule's label as placed: its text, the whole label when that text is shortened, and its
/// box, beside the mark in the lane or raised into the row above the lane's bars.
pub(crate) struct Label {
    /// The bar whose mark it names, in its lane.
    pub bar: usize,
    pub text: String,
    /// The whole label, when `text` is shortened (drawn as the text's `<title>`).
    pub whole: Option<String>,
    pub from: f64,
    pub to: f64,
    pub raised: bool,
}

/// Space left between a label's box and what is drawn after it in its lane.
const LABEL_GAP: f64 = 2.0;
/// Between a label's box and its text.
const LABEL_PAD: f64 = 3.0;
/// A label shortened to fewer characters than this (before its ellipsis) is left out: the
/// mark's hover text names the rule.
const MIN_SHORTENED: usize = 3;

/// Every lane's rule labels, a list per lane (empty when the lanes are too thin for words).
/// `may_rise`: a label with no room beside its mark may go above the lane's bars, the lane
/// growing by a row.
pub(crate) fn place_labels(
    lanes: &[Lane],
    axis: &Axis,
    g: &Geometry,
    may_rise: bool,
) -> Vec<Vec<Label>> {
    lanes
        .iter()
        .map(|lane| match g.label_size() {
            Some(size) => lane_labels(lane, axis, g, size, may_rise),
            None => Vec::new(),
        })
        .collect()
}

/// Where a bar is drawn, from `x` to its end, and what goes past its ends: its mark, or the
/// arrow of a pod still running.
fn extent(bar: &Bar, axis: &Axis, g: &Geometry) -> (f64, f64) {
    let x = axis.x(bar.start);
    let end = bar.end.map_or(g.told_x, |e| axis.x(e));
    let mut span = (x, x + (end - x).max(2.0));
    if bar.rule.is_some() {
        let r = (g.bar_height() / 2.0).clamp(1.5, 5.5);
        span = (span.0.min(end - r), span.1.max(end + r));
    }
    if bar.outcome == Outcome::Running && g.bar_height() >= 6.0 {
        span.1 = span.1.max(end + 6.0);
    }
    span
}

/// Whether `(from, to)` keeps `gap` from every span of `taken`.
fn clear(taken: &[(f64, f64)], (from, to): (f64, f64), gap: f64) -> bool {
    taken
        .iter()
        .all(|(a, z)| to + gap <= *a || from >= *z + gap)
}

/// One lane's rule labels ([`rule_label`] for each failure that matched a rule).
fn lane_labels(lane: &Lane, axis: &Axis, g: &Geometry, size: f64, may_rise: bool) -> Vec<Label> {
    let extents: Vec<(f64, f64)> = lane.bars.iter().map(|b| extent(b, axis, g)).collect();
    let r = (g.bar_height() / 2.0).clamp(1.5, 5.5);
    let mut placed = Vec::new();
    for (b, bar) in lane.bars.iter().enumerate() {
        let Some(rule) = &bar.rule else {
            continue;
        };
        let end = bar.end.map_or(g.told_x, |e| axis.x(e));
        // Drawn after it: the later bars; and the marks before it, which a label may not hide.
        let mut others = extents[b + 1..].to_vec();
        others.extend(lane.bars[..b].iter().filter(|e| e.rule.is_some()).map(|e| {
            let x = e.end.map_or(g.told_x, |e| axis.x(e));
            (x - r, x + r)
        }));
        let spans = Spans {
            bar: b,
            start: axis.x(bar.start),
            end,
            others: &others,
        };
        if let Some(label) = rule_label(&rule.label(), &spans, &placed, g, size, may_rise) {
            placed.push(label);
        }
    }
    placed
}

/// What a label is placed among: its bar (the `bar`th of its lane), from `start` to its mark at
/// `end`, and what it may not cover in the lane: what is drawn after it, the marks drawn
/// before it.
struct Spans<'a> {
    bar: usize,
    start: f64,
    end: f64,
    others: &'a [(f64, f64)],
}

impl Spans<'_> {
    /// The label of this bar's mark: `text`, the whole label when `text` is shortened, its box.
    fn label(
        &self,
        text: String,
        whole: Option<String>,
        (from, to): (f64, f64),
        raised: bool,
    ) -> Label {
        Label {
            bar: self.bar,
            text,
            whole,
            from,
            to,
            raised,
        }
    }
}

/// Where the rule's label (`ExitCode3: FailJob`, [`crate::RuleMark::label`]: the words both
/// pictures use, whoever drew the bar) goes: never under what is drawn after it (the lane's
/// later bars and their marks), nor over a label placed before or an earlier mark. Whole,
/// beside its mark: after it up to what comes next, else inside the failed bar itself, else
/// before the mark over what came before (the label's box is opaque enough to read on a bar);
/// else raised above the lane's bars, over its mark, when `may_rise`; else shortened with an
/// ellipsis where most of it fits (its whole text then its `<title>`); else not at all (the
/// mark's hover text names the rule).
fn rule_label(
    label: &str,
    spans: &Spans,
    placed: &[Label],
    g: &Geometry,
    size: f64,
    may_rise: bool,
) -> Option<Label> {
    let (start, end) = (spans.start, spans.end);
    let boxes = |raised: bool| -> Vec<(f64, f64)> {
        placed
            .iter()
            .filter(|l| l.raised == raised)
            .map(|l| (l.from, l.to))
            .collect()
    };
    let (in_lane, raised) = (boxes(false), boxes(true));
    let free = |place| clear(spans.others, place, LABEL_GAP) && clear(&in_lane, place, 0.0);
    let width = text_width(label, size) + 2.0 * LABEL_PAD;
    let after = (end + 8.0, end + 8.0 + width);
    let inside = (end - 8.0 - width, end - 8.0);
    let beside = [
        (after, after.1 <= g.x1 - LABEL_GAP),
        (inside, inside.0 >= start + 1.0),
        (inside, inside.0 >= g.x0),
    ];
    if let Some((place, _)) = beside
        .into_iter()
        .find(|(place, fits)| *fits && free(*place))
    {
        return Some(spans.label(label.to_owned(), None, place, false));
    }
    if may_rise {
        // Over the mark: from it rightwards, else leftwards, kept in the plot.
        let right = (end - LABEL_PAD, end - LABEL_PAD + width);
        let right = if right.1 > g.x1 {
            (g.x1 - width, g.x1)
        } else {
            right
        };
        let left = (end + LABEL_PAD - width, end + LABEL_PAD);
        let fits = |p: &(f64, f64)| p.0 >= g.x0 && p.1 <= g.x1 && clear(&raised, *p, 0.0);
        if let Some(place) = [right, left].into_iter().find(fits) {
            return Some(spans.label(label.to_owned(), None, place, true));
        }
    }
    let mut taken: Vec<(f64, f64)> = spans
        .others
        .iter()
        .map(|(a, z)| (a - LABEL_GAP, z + LABEL_GAP))
        .collect();
    taken.extend(in_lane);
    shortened(label, spans, &taken, g, size)
}

/// The label shortened into the widest room beside its mark that takes [`MIN_SHORTENED`]
/// characters: after it, up to what comes next, or inside the failed bar. `taken`: what it
/// must not cover.
fn shortened(
    label: &str,
    spans: &Spans,
    taken: &[(f64, f64)],
    g: &Geometry,
    size: f64,
) -> Option<Label> {
    let from = spans.end + 8.0;
    let next = taken
        .iter()
        .filter(|(_, z)| *z > from)
        .map(|(a, _)| *a)
        .fold(g.x1 - LABEL_GAP, f64::min);
    let inside = (spans.start + 1.0, spans.end - 8.0);
    let rooms = [(from, next), inside];
    let (room_from, room_to) = rooms
        .into_iter()
        .filter(|r| r.1 > r.0 && clear(taken, *r, 0.0))
        .max_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)))?;
    let text = fit(label, room_to - room_from - 2.0 * LABEL_PAD, size);
    if text.chars().count() <= MIN_SHORTENED {
        return None;
    }
    let whole = (text != label).then(|| label.to_owned());
    let width = text_width(&text, size) + 2.0 * LABEL_PAD;
    let place = if room_from == inside.0 {
        (room_to - width, room_to)
    } else {
        (room_from, room_from + width)
    };
    Some(spans.label(text, whole, place, false))
}

/// A placed rule label: its box and its text (whose `<title>` is the whole label, when
/// shortened), beside the mark or in the lane's row above its bars.
fn draw_label(w: &mut Writer, label: &Label, g: &Geometry, (lane, size): (usize, f64)) {
    let (top, middle) = if label.raised {
        let (top, _) = g.band(lane);
        (top, raised_row(size))
    } else {
        (g.bars_top(lane), g.height)
    };
    let box_height = size + 4.0;
    w.empty(
        "rect",
        &[
            ("class", "label-box".into()),
            ("x", label.from.into()),
            ("y", (top + (middle - box_height) / 2.0).into()),
            ("width", (label.to - label.from).into()),
            ("height", box_height.into()),
            ("rx", 2.0.into()),
            ("fill", "#FFFFFF".into()),
            ("fill-opacity", 0.9.into()),
            ("stroke", "#000000".into()),
            ("stroke-width", 0.5.into()),
        ],
    );
    let id = format!("jwt-rule-{lane}-{}", label.bar);
    let attrs: [(&str, Value); 6] = [
        ("id", id.as_str().into()),
        ("class", "rule-label".into()),
        ("x", (label.from + LABEL_PAD).into()),
        ("y", (top + middle / 2.0 + size * 0.35).into()),
        ("font-size", size.into()),
        ("fill", "#000000".into()),
    ];
    match &label.whole {
        Some(whole) => w.text_titled("text", &attrs, whole, &label.text),
        None => w.text("text", &attrs, &label.text),
    }
}
