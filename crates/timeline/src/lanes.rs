//! The lanes: a band per lane with its label, the back-offs, a bar per pod attempt with its
//! hover text, and at the end of each failure that matched a rule, the rule's mark and, where
//! the lane has room, its name and action. A label never leaves its lane: it goes after the
//! mark, or inside its own bar, or shortened, or not at all (the mark's hover text still
//! names the rule).

use jobwarden_rules::seconds;

use crate::axis::Axis;
use crate::model::{Bar, Lane, LaneKind, Outcome};
use crate::style::{self, text_width};
use crate::xml::Writer;

/// The lane geometry the frame decided.
pub(crate) struct Geometry {
    /// Where the lane column starts and the plot spans.
    pub label_x: f64,
    pub x0: f64,
    pub x1: f64,
    pub top: f64,
    /// One lane's height.
    pub height: f64,
    /// Every how many lanes one is labelled.
    pub label_every: usize,
    /// Where the bars of pods still running end: when the story was told.
    pub told_x: f64,
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
}

/// The longest hover text line kept, and the most lines: a story's condition message can be
/// long, and a thousand bars must stay a few MiB.
const MAX_LINE: usize = 300;
const MAX_LINES: usize = 12;

/// The lanes' bands and labels, under everything else.
pub(crate) fn bands(w: &mut Writer, lanes: &[Lane], g: &Geometry) {
    w.open("g", &[("class", "bands".into())]);
    for (i, lane) in lanes.iter().enumerate() {
        let top = g.top + i as f64 * g.height;
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
                ("height", g.height.into()),
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
                    ("y", (top + g.height / 2.0 + size * 0.35).into()),
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

/// Each lane's back-offs, bars, marks and rule labels, a group per lane.
pub(crate) fn draw(w: &mut Writer, lanes: &[Lane], kind: LaneKind, axis: &Axis, g: &Geometry) {
    for (i, lane) in lanes.iter().enumerate() {
        let top = g.top + i as f64 * g.height;
        w.open(
            "g",
            &[
                ("class", "lane".into()),
                ("data-lane", (&lane.label).into()),
            ],
        );
        backoffs(w, lane, axis, g, top);
        let mut placed: Vec<(f64, f64)> = Vec::new();
        for (b, bar) in lane.bars.iter().enumerate() {
            let next_start = lane.bars.get(b + 1).map(|n| axis.x(n.start));
            draw_bar(w, bar, kind, axis, g, top);
            if let Some(size) = g.label_size() {
                rule_label(w, bar, axis, g, (i, b), top, size, next_start, &mut placed);
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
    let index = bar.index.map(|i| i.to_string()).unwrap_or_default();
    let attempt = bar.attempt.map(|a| a.to_string()).unwrap_or_default();
    let rule = bar.rule.as_ref().map(|r| r.label()).unwrap_or_default();
    let fill = style::fill(bar.outcome);
    let mut attrs = vec![
        ("class", format!("bar {}", bar.outcome.class())),
        ("data-pod", bar.pod.clone()),
    ];
    if bar.index.is_some() {
        attrs.push(("data-index", index));
    }
    if bar.attempt.is_some() {
        attrs.push(("data-attempt", attempt));
    }
    if bar.rule.is_some() {
        attrs.push(("data-rule", rule));
    }
    let mut all: Vec<(&str, crate::xml::Value)> =
        attrs.iter().map(|(k, v)| (*k, v.into())).collect();
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
        // An arrowhead past the bar's end: it goes on.
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
                ("fill", look.stroke.into()),
            ],
        );
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

/// The rule's name and action (`ExitCode3: FailJob`, [`crate::RuleMark::label`]: the words
/// both pictures use, whoever drew the bar) beside its mark: after the mark up to the next
/// bar, else inside the failed bar itself, else over what follows in the lane (the label's
/// box is opaque enough to read on a bar), else before the mark. Only when other labels take
/// every one of those places is it the name alone: a pod failed soon after it started and
/// replaced at once (as a live Job's often are) was drawn as a bare mark when the first two
/// were the only places tried.
#[allow(clippy::too_many_arguments)]
fn rule_label(
    w: &mut Writer,
    bar: &Bar,
    axis: &Axis,
    g: &Geometry,
    (lane, b): (usize, usize),
    top: f64,
    size: f64,
    next_start: Option<f64>,
    placed: &mut Vec<(f64, f64)>,
) {
    let Some(rule) = &bar.rule else {
        return;
    };
    let start = axis.x(bar.start);
    let end = bar.end.map_or(g.told_x, |e| axis.x(e));
    let right_limit = next_start.unwrap_or(g.x1).min(g.x1) - 2.0;
    let pad = 3.0;
    let free = |from: f64, to: f64| placed.iter().all(|(a, z)| to <= *a || from >= *z);
    let mut spot = None;
    'texts: for text in [rule.label(), rule.rule.clone()] {
        let width = text_width(&text, size) + 2.0 * pad;
        let after = (end + 8.0, end + 8.0 + width);
        let inside = (end - 8.0 - width, end - 8.0);
        let places = [
            (after, after.1 <= right_limit),
            (inside, inside.0 >= start + 1.0),
            (after, after.1 <= g.x1),
            (inside, inside.0 >= g.x0),
        ];
        for (place, fits) in places {
            if fits && free(place.0, place.1) {
                spot = Some((text, place));
                break 'texts;
            }
        }
    }
    let Some((text, (from, to))) = spot else {
        return;
    };
    placed.push((from, to));
    let box_height = size + 4.0;
    w.empty(
        "rect",
        &[
            ("class", "label-box".into()),
            ("x", from.into()),
            ("y", (top + (g.height - box_height) / 2.0).into()),
            ("width", (to - from).into()),
            ("height", box_height.into()),
            ("rx", 2.0.into()),
            ("fill", "#FFFFFF".into()),
            ("fill-opacity", 0.9.into()),
            ("stroke", "#000000".into()),
            ("stroke-width", 0.5.into()),
        ],
    );
    w.text(
        "text",
        &[
            ("id", format!("jwt-rule-{lane}-{b}").as_str().into()),
            ("class", "rule-label".into()),
            ("x", (from + pad).into()),
            ("y", (top + g.height / 2.0 + size * 0.35).into()),
            ("font-size", size.into()),
            ("fill", "#000000".into()),
        ],
        &text,
    );
}
