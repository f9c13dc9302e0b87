//! The picture around the lanes: the title and how the Job ended, the notes, a legend of what
//! the picture holds, the Job's moments as lines across every lane with their labels above,
//! the time axis with its breaks, and the `<title>` and `<desc>` a screen reader announces.
//! Deterministic: the same timeline is the same bytes.

use std::collections::BTreeMap;

use jobwarden_rules::seconds;

use crate::axis::{Axis, Segment};
use crate::lanes::{self, Geometry, Label};
use crate::model::{LaneKind, Moment, Outcome, Timeline};
use crate::style::{self, FONT, fit, text_width};
use crate::xml::{Value, Writer};

const WIDTH: f64 = 1000.0;
const MARGIN: f64 = 16.0;
/// The lanes of a small Job, and the room a large one's share.
const LANE_HEIGHT: f64 = 24.0;
const LANES_ROOM: f64 = 900.0;
const MIN_LANE_HEIGHT: f64 = 3.0;
/// Lane labels are at least this far apart.
const LABEL_SPACING: f64 = 12.0;
const SMALL: f64 = 11.0;
/// Lanes beyond which the axis is drawn below them too.
const AXIS_BELOW_FROM: usize = 20;

/// The timeline as one SVG document.
pub fn svg(t: &Timeline) -> String {
    let header = match t.lane_kind {
        LaneKind::Index => "index",
        LaneKind::Slot => "pod",
    };
    let (x0, x1) = plot_span(t, header);
    let axis = time_axis(t, x0, x1);
    let height = lane_height(t.lanes.len());
    let mut geometry = Geometry {
        label_x: MARGIN,
        x0,
        x1,
        height,
        label_every: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
            .into_iter()
            .find(|k| *k as f64 * height >= LABEL_SPACING)
            .unwrap_or(1000),
        told_x: axis.x(t.told),
        tops: Vec::new(),
    };
    // Lanes at full height have room to grow: a rule label with none beside its mark is
    // raised above the lane's bars. The lanes of a large Job share a fixed room instead.
    let labels = lanes::place_labels(&t.lanes, &axis, &geometry, height >= LANE_HEIGHT);
    let frame = Frame::new(t, &axis, &mut geometry, &labels);

    let mut w = Writer::new();
    open_document(&mut w, t, frame.total);
    heading(&mut w, t, &frame);
    // Bands, then the grid, then what happened, then the breaks' veils over it.
    let (top, bottom) = (geometry.top(), geometry.bottom());
    lanes::bands(&mut w, &t.lanes, &geometry);
    draw_grid(&mut w, &axis, top, bottom);
    lanes::draw(&mut w, &t.lanes, t.lane_kind, &axis, &geometry, &labels);
    text_anchored(
        &mut w,
        MARGIN,
        frame.axis_y - 6.0,
        SMALL,
        "start",
        "#333333",
        header,
    );
    draw_axis(&mut w, &axis, frame.axis_y, top, bottom, frame.axis_below);
    draw_moments(
        &mut w,
        &t.moments,
        &frame.moment_rows,
        frame.moments_y,
        bottom,
    );
    if frame.left_out {
        let note = format!(
            "Not drawn: {} more lanes and {} more pods (the picture's limits: {} lanes, {} pods).",
            t.lanes_left_out,
            t.bars_left_out,
            crate::model::MAX_LANES,
            crate::model::MAX_BARS
        );
        let y = frame.total - MARGIN - 4.0;
        text(&mut w, MARGIN, y, 12.0, "normal", &note);
    }
    w.close("svg");
    w.finish()
}

/// One lane's height: [`LANE_HEIGHT`], or a share of [`LANES_ROOM`] when there are many.
fn lane_height(lanes: usize) -> f64 {
    let lane_count = lanes.max(1);
    if lane_count <= (LANES_ROOM / LANE_HEIGHT) as usize {
        LANE_HEIGHT
    } else {
        (LANES_ROOM / lane_count as f64)
            .floor()
            .max(MIN_LANE_HEIGHT)
    }
}

/// Where the plot starts and ends: right of the lane labels' column (`header` its heading),
/// left of the margin.
fn plot_span(t: &Timeline, header: &str) -> (f64, f64) {
    let label_column = t
        .lanes
        .iter()
        .map(|l| text_width(&l.label, SMALL))
        .fold(text_width(header, SMALL), f64::max)
        .min(120.0);
    (MARGIN + label_column + 16.0, WIDTH - MARGIN - 8.0)
}

/// The time axis from `x0` to `x1`: every second anything starts or ends is a stop.
fn time_axis(t: &Timeline, x0: f64, x1: f64) -> Axis {
    let mut stops: Vec<u64> = vec![t.end, t.told];
    for lane in &t.lanes {
        for b in &lane.bars {
            stops.push(b.start);
            stops.extend(b.end);
        }
        for b in &lane.backoffs {
            stops.extend([b.from, b.until]);
        }
    }
    stops.extend(t.moments.iter().map(|m| m.at));
    // The axis ends at `end`: a back-off still running is drawn up to it (the axis clamps
    // what lies beyond), never seconds of empty future.
    stops.retain(|s| *s <= t.end);
    Axis::new(stops, x0, x1, |skipped| {
        text_width(&seconds::format(skipped), SMALL) + 16.0
    })
}

/// Where everything goes, top to bottom: title, ending, notes, legend, moment labels, axis,
/// lanes, axis, notes.
struct Frame {
    title_y: f64,
    ending_y: f64,
    notes_y: f64,
    legend: Vec<(Key, String)>,
    legend_rows: Vec<Vec<(usize, f64)>>,
    legend_y: f64,
    moment_rows: Vec<(f64, usize, bool)>,
    moments_y: f64,
    axis_y: f64,
    axis_below: bool,
    left_out: bool,
    total: f64,
}

impl Frame {
    /// The frame around the lanes, which it stacks in `geometry` (each lane as tall as the
    /// labels raised in it need).
    fn new(t: &Timeline, axis: &Axis, geometry: &mut Geometry, labels: &[Vec<Label>]) -> Frame {
        let mut y = MARGIN;
        let title_y = y + 14.0;
        y += 22.0;
        let ending_y = y + 12.0;
        y += 18.0;
        let notes_y = y + 11.0;
        y += 16.0 * t.notes.len() as f64 + 6.0;
        let legend = legend_items(t, axis.breaks().next().is_some());
        let legend_rows = legend_layout(&legend, WIDTH - 2.0 * MARGIN);
        let legend_y = y;
        y += 18.0 * legend_rows.len() as f64 + 8.0;
        let moment_rows = moment_rows(&t.moments, axis, geometry.x1);
        let moments_y = y;
        y += 14.0
            * moment_rows
                .iter()
                .map(|(_, row, _)| row + 1)
                .max()
                .unwrap_or(0) as f64;
        let axis_y = y + 16.0;
        geometry.stack(axis_y + 4.0, labels);
        let axis_below = t.lanes.len() > AXIS_BELOW_FROM;
        let mut total = geometry.bottom() + 8.0;
        if axis_below {
            total += 18.0;
        }
        let left_out = t.lanes_left_out > 0 || t.bars_left_out > 0;
        if left_out {
            total += 16.0;
        }
        total += MARGIN;
        Frame {
            title_y,
            ending_y,
            notes_y,
            legend,
            legend_rows,
            legend_y,
            moment_rows,
            moments_y,
            axis_y,
            axis_below,
            left_out,
            total,
        }
    }
}

/// `<svg>` opened, its title and description for a screen reader, the patterns, the white
/// ground.
fn open_document(w: &mut Writer, t: &Timeline, total: f64) {
    let title = format!("{}: {}", t.title, t.ending);
    w.open(
        "svg",
        &[
            ("xmlns", "http://www.w3.org/2000/svg".into()),
            ("version", "1.1".into()),
            ("width", WIDTH.into()),
            ("height", total.into()),
            ("viewBox", format!("0 0 {WIDTH} {total:.1}").as_str().into()),
            ("role", "img".into()),
            ("aria-labelledby", "jwt-title jwt-desc".into()),
            ("font-family", FONT.into()),
        ],
    );
    w.text("title", &[("id", "jwt-title".into())], &title);
    w.text("desc", &[("id", "jwt-desc".into())], &description(t));
    style::defs(w);
    w.empty(
        "rect",
        &[
            ("width", WIDTH.into()),
            ("height", total.into()),
            ("fill", "#FFFFFF".into()),
        ],
    );
}

/// The title, how the Job ended, the notes and the legend.
fn heading(w: &mut Writer, t: &Timeline, frame: &Frame) {
    let wide = WIDTH - 2.0 * MARGIN;
    text(
        w,
        MARGIN,
        frame.title_y,
        16.0,
        "bold",
        &fit(&t.title, wide, 16.0),
    );
    text(
        w,
        MARGIN,
        frame.ending_y,
        13.0,
        "normal",
        &fit(&t.ending, wide, 13.0),
    );
    for (i, note) in t.notes.iter().enumerate() {
        let line = fit(note, wide, 12.0);
        text(
            w,
            MARGIN,
            frame.notes_y + 16.0 * i as f64,
            12.0,
            "normal",
            &line,
        );
    }
    draw_legend(w, &frame.legend, &frame.legend_rows, frame.legend_y);
}

fn text(w: &mut Writer, x: f64, y: f64, size: f64, weight: &str, s: &str) {
    w.text(
        "text",
        &[
            ("x", x.into()),
            ("y", y.into()),
            ("font-size", size.into()),
            ("font-weight", weight.into()),
            ("fill", "#000000".into()),
        ],
        s,
    );
}

fn text_anchored(w: &mut Writer, x: f64, y: f64, size: f64, anchor: &str, fill: &str, s: &str) {
    w.text(
        "text",
        &[
            ("x", x.into()),
            ("y", y.into()),
            ("font-size", size.into()),
            ("text-anchor", anchor.into()),
            ("fill", fill.into()),
        ],
        s,
    );
}

/// What the screen reader says after the title: the Job's lanes and pods, how they ended, the
/// rules their failures matched, the moments, the notes.
fn description(t: &Timeline) -> String {
    let bars: Vec<&crate::model::Bar> = t.lanes.iter().flat_map(|l| &l.bars).collect();
    let mut outcomes: BTreeMap<Outcome, usize> = BTreeMap::new();
    let mut rules: BTreeMap<String, usize> = BTreeMap::new();
    for b in &bars {
        *outcomes.entry(b.outcome).or_default() += 1;
        if let Some(r) = &b.rule {
            *rules.entry(r.label()).or_default() += 1;
        }
    }
    let lanes = match t.lane_kind {
        LaneKind::Index => format!("{} indexes", t.lanes.len() + t.lanes_left_out),
        LaneKind::Slot => format!("{} pod slots", t.lanes.len()),
    };
    let counted: Vec<String> = outcomes
        .iter()
        .map(|(o, n)| format!("{n} {}", o.word()))
        .collect();
    let mut d = format!(
        "Timeline of {}, a lane per {}: {lanes}, {} pods ({}).",
        t.title,
        match t.lane_kind {
            LaneKind::Index => "completion index",
            LaneKind::Slot => "pod slot",
        },
        bars.len() + t.bars_left_out,
        counted.join(", ")
    );
    if !rules.is_empty() {
        let matched: Vec<String> = rules.iter().map(|(r, n)| format!("{r} ×{n}")).collect();
        d += &format!(" Pod failure policy rules matched: {}.", matched.join(", "));
    }
    let backoffs: usize = t.lanes.iter().map(|l| l.backoffs.len()).sum();
    if backoffs > 0 {
        d += &format!(" {backoffs} back-offs.");
    }
    for m in &t.moments {
        d += &format!(" At {}: {}.", seconds::format(m.at), m.label);
    }
    d += &format!(" {}", t.ending);
    for note in &t.notes {
        d += &format!(" {note}");
    }
    d
}

/// A legend entry: what it shows, and the word for it.
enum Key {
    Bar(Outcome),
    BackOff,
    Mark(String),
    Break,
}

fn legend_items(t: &Timeline, breaks: bool) -> Vec<(Key, String)> {
    let mut items = Vec::new();
    let bars = || t.lanes.iter().flat_map(|l| &l.bars);
    for o in Outcome::ALL {
        if bars().any(|b| b.outcome == o) {
            items.push((Key::Bar(o), o.word().to_owned()));
        }
    }
    if t.lanes.iter().any(|l| !l.backoffs.is_empty()) {
        items.push((Key::BackOff, "back-off".to_owned()));
    }
    for action in ["FailJob", "FailIndex", "Ignore", "Count"] {
        if bars().any(|b| b.rule.as_ref().is_some_and(|r| r.action == action)) {
            items.push((
                Key::Mark(action.to_owned()),
                format!("rule matched: {action}"),
            ));
        }
    }
    if breaks {
        items.push((Key::Break, "idle time, drawn narrow".to_owned()));
    }
    items
}

/// The legend's rows: the x of each item, items wrapping at `width`.
fn legend_layout(items: &[(Key, String)], width: f64) -> Vec<Vec<(usize, f64)>> {
    let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new()];
    let mut x = MARGIN;
    for (i, (_, word)) in items.iter().enumerate() {
        let w = 24.0 + text_width(word, 12.0) + 18.0;
        if x + w > MARGIN + width && x > MARGIN {
            rows.push(Vec::new());
            x = MARGIN;
        }
        if let Some(row) = rows.last_mut() {
            row.push((i, x));
        }
        x += w;
    }
    rows
}

fn draw_legend(w: &mut Writer, items: &[(Key, String)], rows: &[Vec<(usize, f64)>], top: f64) {
    w.open("g", &[("class", "legend".into())]);
    for (r, row) in rows.iter().enumerate() {
        let y = top + 18.0 * r as f64;
        for &(i, x) in row {
            let Some((key, word)) = items.get(i) else {
                continue;
            };
            match key {
                Key::Bar(o) => {
                    let fill = style::fill(*o);
                    swatch(w, x, y, &fill, style::outcome(*o).stroke);
                }
                Key::BackOff => swatch(w, x, y, style::BACKOFF_FILL, style::BACKOFF_STROKE),
                Key::Mark(action) => {
                    let (d, fill) = style::mark_path(action, x + 9.0, y + 6.5, 5.0);
                    w.empty(
                        "path",
                        &[
                            ("d", d.as_str().into()),
                            ("fill", fill.into()),
                            ("stroke", "#000000".into()),
                            ("stroke-width", 1.2.into()),
                        ],
                    );
                }
                Key::Break => zigzag(w, x + 9.0, y, y + 13.0),
            }
            text_anchored(w, x + 24.0, y + 11.0, 12.0, "start", "#000000", word);
        }
    }
    w.close("g");
}

fn swatch(w: &mut Writer, x: f64, y: f64, fill: &str, stroke: &str) {
    w.empty(
        "rect",
        &[
            ("x", x.into()),
            ("y", (y + 1.0).into()),
            ("width", 18.0.into()),
            ("height", 11.0.into()),
            ("fill", fill.into()),
            ("stroke", stroke.into()),
            ("stroke-width", 0.8.into()),
        ],
    );
}

/// The break sign: a zigzag from `y0` to `y1` at `x`.
fn zigzag(w: &mut Writer, x: f64, y0: f64, y1: f64) {
    let mut d = format!("M{:.1},{:.1}", x, y0);
    let mut y = y0;
    let mut left = true;
    while y < y1 {
        y = (y + 4.0).min(y1);
        let dx = if left { -3.0 } else { 3.0 };
        d += &format!(" L{:.1},{:.1}", x + dx, y);
        left = !left;
    }
    w.empty(
        "path",
        &[
            ("class", "break-sign".into()),
            ("d", d.as_str().into()),
            ("fill", "none".into()),
            ("stroke", "#666666".into()),
            ("stroke-width", 1.2.into()),
        ],
    );
}

/// Each moment's label: (x of its line, row, whether the label runs left of the line), in the
/// first row where it overlaps no other label.
fn moment_rows(moments: &[Moment], axis: &Axis, x1: f64) -> Vec<(f64, usize, bool)> {
    let mut taken: Vec<Vec<(f64, f64)>> = Vec::new();
    moments
        .iter()
        .map(|m| {
            let x = axis.x(m.at);
            let w = text_width(&m.label, SMALL);
            let left = x + 4.0 + w > x1 + MARGIN;
            let span = if left {
                (x - 4.0 - w, x)
            } else {
                (x, x + 4.0 + w)
            };
            let row = taken
                .iter()
                .position(|r| {
                    r.iter()
                        .all(|(a, z)| span.1 + 6.0 <= *a || span.0 >= *z + 6.0)
                })
                .unwrap_or(taken.len());
            if row == taken.len() {
                taken.push(Vec::new());
            }
            taken[row].push(span);
            (x, row, left)
        })
        .collect()
}

fn draw_moments(
    w: &mut Writer,
    moments: &[Moment],
    rows: &[(f64, usize, bool)],
    top: f64,
    bottom: f64,
) {
    for (m, &(x, row, left)) in moments.iter().zip(rows) {
        let look = style::moment(m.kind);
        let label_y = top + 14.0 * row as f64 + 11.0;
        w.open("g", &[("class", "moment".into())]);
        w.text(
            "title",
            &[],
            &format!("{}: {}", seconds::format(m.at), lanes::cut(&m.story)),
        );
        let mut line: Vec<(&str, Value)> = vec![
            ("x1", x.into()),
            ("y1", (label_y - 10.0).into()),
            ("x2", x.into()),
            ("y2", bottom.into()),
            ("stroke", look.colour.into()),
            ("stroke-width", look.width.into()),
        ];
        if let Some(d) = look.dashes {
            line.push(("stroke-dasharray", d.into()));
        }
        w.empty("line", &line);
        let (lx, anchor) = if left {
            (x - 4.0, "end")
        } else {
            (x + 4.0, "start")
        };
        text_anchored(w, lx, label_y, SMALL, anchor, look.colour, &m.label);
        w.close("g");
    }
}

/// A faint line across the lanes at every tick.
fn draw_grid(w: &mut Writer, axis: &Axis, top: f64, bottom: f64) {
    w.open("g", &[("class", "grid".into())]);
    for (x, _) in axis.ticks() {
        w.empty(
            "line",
            &[
                ("x1", x.into()),
                ("y1", top.into()),
                ("x2", x.into()),
                ("y2", bottom.into()),
                ("stroke", "#000000".into()),
                ("stroke-opacity", 0.1.into()),
                ("stroke-width", 1.0.into()),
            ],
        );
    }
    w.close("g");
}

fn draw_axis(w: &mut Writer, axis: &Axis, y: f64, top: f64, bottom: f64, below: bool) {
    w.open("g", &[("class", "axis".into())]);
    // Breaks first: their labels take their place before the ticks'.
    let mut taken: Vec<(f64, f64)> = axis
        .breaks()
        .map(|s| draw_break(w, s, y, top, bottom, below))
        .collect();
    for (x, label) in axis.ticks() {
        draw_tick(w, x, &label, (y, bottom, below), &mut taken);
    }
    w.empty(
        "line",
        &[
            ("x1", axis.x(0).into()),
            ("y1", (y - 1.0).into()),
            ("x2", axis.segments.last().map_or(0.0, |s| s.x_to).into()),
            ("y2", (y - 1.0).into()),
            ("stroke", "#333333".into()),
            ("stroke-width", 1.0.into()),
        ],
    );
    w.close("g");
}

/// A compressed stretch of idle time: a veil over the lanes between two zigzags, and how long
/// it is on the axis (above it at `y`, and below the lanes when `below`). Returns where its
/// label is.
fn draw_break(
    w: &mut Writer,
    s: &Segment,
    y: f64,
    top: f64,
    bottom: f64,
    below: bool,
) -> (f64, f64) {
    let label = seconds::format(s.to - s.from);
    let mid = (s.x_from + s.x_to) / 2.0;
    let half = text_width(&label, SMALL) / 2.0;
    w.open("g", &[("class", "break".into())]);
    w.text(
        "title",
        &[],
        &format!(
            "{} to {}: {} in which nothing started or ended, drawn narrow",
            seconds::format(s.from),
            seconds::format(s.to),
            label
        ),
    );
    w.empty(
        "rect",
        &[
            ("x", (s.x_from + 2.0).into()),
            ("y", (top - 2.0).into()),
            ("width", (s.x_to - s.x_from - 4.0).max(1.0).into()),
            ("height", (bottom - top + 4.0).into()),
            ("fill", "#FFFFFF".into()),
            ("fill-opacity", 0.8.into()),
        ],
    );
    zigzag(w, s.x_from + 4.0, top - 2.0, bottom + 2.0);
    zigzag(w, s.x_to - 4.0, top - 2.0, bottom + 2.0);
    for ly in axis_label_ys(y, bottom, below) {
        w.text(
            "text",
            &[
                ("x", mid.into()),
                ("y", ly.into()),
                ("font-size", SMALL.into()),
                ("font-style", "italic".into()),
                ("text-anchor", "middle".into()),
                ("fill", "#666666".into()),
            ],
            &label,
        );
    }
    w.close("g");
    (mid - half, mid + half)
}

/// A tick at `x` on the axis at `y`, and its label where no other label (`taken`) is.
fn draw_tick(
    w: &mut Writer,
    x: f64,
    label: &str,
    (y, bottom, below): (f64, f64, bool),
    taken: &mut Vec<(f64, f64)>,
) {
    let half = text_width(label, SMALL) / 2.0;
    let span = (x - half - 4.0, x + half + 4.0);
    let free = taken.iter().all(|(a, z)| span.1 <= *a || span.0 >= *z);
    w.empty(
        "line",
        &[
            ("x1", x.into()),
            ("y1", (y - 4.0).into()),
            ("x2", x.into()),
            ("y2", y.into()),
            ("stroke", "#333333".into()),
            ("stroke-width", 1.0.into()),
        ],
    );
    if !free {
        return;
    }
    taken.push(span);
    for ly in axis_label_ys(y, bottom, below) {
        text_anchored(w, x, ly, SMALL, "middle", "#333333", label);
    }
}

/// Where the axis's labels go: above the axis at `y`, and below the lanes when `below`.
fn axis_label_ys(y: f64, bottom: f64, below: bool) -> impl Iterator<Item = f64> {
    [Some(y - 6.0), below.then_some(bottom + 16.0)]
        .into_iter()
        .flatten()
}
