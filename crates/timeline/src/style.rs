//! How each thing looks. Colours are Okabe and Ito's palette, told apart by the common forms of
//! colour blindness; every outcome also has its own pattern and every rule action its own mark
//! shape, so that colour is never the only carrier (grey print, a reader who sees none). The
//! patterns live in the file's `<defs>`: no stylesheet, no font, nothing outside the file.

use crate::model::{MomentKind, Outcome};
use crate::xml::Writer;

/// A monospaced face, so that a label's width is known without measuring it: DejaVu Sans Mono,
/// Menlo and Consolas all advance 0.6 em.
pub(crate) const FONT: &str = "DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace";

/// A label's width at `size` px, a little wider than the fonts above draw it.
pub(crate) fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.62
}

/// `text` cut to `width` px at `size`, with an ellipsis when cut.
pub(crate) fn fit(text: &str, width: f64, size: f64) -> String {
    let max = (width / (size * 0.62)).floor().max(1.0) as usize;
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

pub(crate) struct Look {
    pub fill: &'static str,
    pub stroke: &'static str,
    /// Drawn over `fill`, when the outcome has one.
    pub pattern: Option<Pattern>,
}

/// A 6 px tile of `<defs>`: the look's colour with `drawing` in `ink` over it.
pub(crate) struct Pattern {
    pub id: &'static str,
    ink: &'static str,
    drawing: &'static str,
    stroke_width: f64,
}

const fn pattern(id: &'static str, ink: &'static str, drawing: &'static str) -> Option<Pattern> {
    Some(Pattern {
        id,
        ink,
        drawing,
        stroke_width: 1.1,
    })
}

pub(crate) fn outcome(o: Outcome) -> Look {
    match o {
        Outcome::Succeeded => Look {
            fill: "#009E73",
            stroke: "#00573F",
            pattern: None,
        },
        // Diagonal stripes.
        Outcome::Failed => Look {
            fill: "#D55E00",
            stroke: "#7A3600",
            pattern: pattern("jwt-failed", "#7A3600", "M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2"),
        },
        // Dots, drawn thicker to be seen.
        Outcome::StartTimeout => Look {
            fill: "#E69F00",
            stroke: "#7A5500",
            pattern: Some(Pattern {
                id: "jwt-start-timeout",
                ink: "#7A5500",
                drawing: "M1.5,1.5 h1 M4.5,4.5 h1",
                stroke_width: 1.6,
            }),
        },
        // Cross-hatch.
        Outcome::Disrupted => Look {
            fill: "#CC79A7",
            stroke: "#6E3A5A",
            pattern: pattern(
                "jwt-disrupted",
                "#6E3A5A",
                "M-1,1 l2,-2 M0,6 l6,-6 M5,7 l2,-2 M-1,5 l2,2 M0,0 l6,6 M5,-1 l2,2",
            ),
        },
        // Horizontal lines.
        Outcome::Deleted => Look {
            fill: "#BBBBBB",
            stroke: "#555555",
            pattern: pattern("jwt-deleted", "#555555", "M0,1.5 h6 M0,4.5 h6"),
        },
        // Vertical ticks.
        Outcome::Running => Look {
            fill: "#56B4E9",
            stroke: "#1E6A94",
            pattern: pattern("jwt-running", "#2A86BA", "M1.5,0 v6"),
        },
    }
}

/// The `fill` of a bar of this outcome.
pub(crate) fn fill(o: Outcome) -> String {
    let look = outcome(o);
    match look.pattern {
        Some(p) => format!("url(#{})", p.id),
        None => look.fill.to_owned(),
    }
}

/// A back-off: back-slashes on pale yellow.
fn backoff() -> Look {
    Look {
        fill: "#F6EFA6",
        stroke: BACKOFF_STROKE,
        pattern: pattern(
            "jwt-backoff",
            BACKOFF_STROKE,
            "M-1,5 l2,2 M0,0 l6,6 M5,-1 l2,2",
        ),
    }
}

pub(crate) const BACKOFF_FILL: &str = "url(#jwt-backoff)";
pub(crate) const BACKOFF_STROKE: &str = "#8C8500";

/// The `<defs>`: a pattern per outcome (but success, plain), and the back-off's.
pub(crate) fn defs(w: &mut Writer) {
    w.open("defs", &[]);
    let looks = Outcome::ALL.into_iter().map(outcome).chain([backoff()]);
    for (background, p) in looks.filter_map(|l| Some((l.fill, l.pattern?))) {
        w.open(
            "pattern",
            &[
                ("id", p.id.into()),
                ("patternUnits", "userSpaceOnUse".into()),
                ("width", 6.0.into()),
                ("height", 6.0.into()),
            ],
        );
        w.empty(
            "rect",
            &[
                ("width", 6.0.into()),
                ("height", 6.0.into()),
                ("fill", background.into()),
            ],
        );
        w.empty(
            "path",
            &[
                ("d", p.drawing.into()),
                ("stroke", p.ink.into()),
                ("stroke-width", p.stroke_width.into()),
                ("stroke-linecap", "round".into()),
                ("fill", "none".into()),
            ],
        );
        w.close("pattern");
    }
    w.close("defs");
}

/// The shape of a failure's mark, centred on (x, y), `r` its half size: each action its own.
pub(crate) fn mark_path(action: &str, x: f64, y: f64, r: f64) -> (String, &'static str) {
    let p = |v: f64| format!("{:.1}", v);
    match action {
        // A diamond: the Job fails.
        "FailJob" => (
            format!(
                "M{},{} L{},{} L{},{} L{},{} Z",
                p(x),
                p(y - r),
                p(x + r),
                p(y),
                p(x),
                p(y + r),
                p(x - r),
                p(y)
            ),
            "#000000",
        ),
        // A triangle pointing down: the index fails.
        "FailIndex" => (
            format!(
                "M{},{} L{},{} L{},{} Z",
                p(x - r),
                p(y - r),
                p(x + r),
                p(y - r),
                p(x),
                p(y + r)
            ),
            "#000000",
        ),
        // A ring: ignored, not counted.
        "Ignore" => (circle(x, y, r), "#FFFFFF"),
        // A disc: counted (as any failure is).
        _ => (circle(x, y, r * 0.8), "#000000"),
    }
}

fn circle(x: f64, y: f64, r: f64) -> String {
    format!(
        "M{:.1},{:.1} a{r:.1},{r:.1} 0 1,0 {:.1},0 a{r:.1},{r:.1} 0 1,0 {:.1},0 Z",
        x - r,
        y,
        2.0 * r,
        -2.0 * r
    )
}

pub(crate) struct LineLook {
    pub colour: &'static str,
    pub width: f64,
    /// `stroke-dasharray`; `None`: solid.
    pub dashes: Option<&'static str>,
}

pub(crate) fn moment(kind: MomentKind) -> LineLook {
    let (colour, width, dashes) = match kind {
        MomentKind::SuccessCriteriaMet => ("#00734F", 1.5, Some("5 3")),
        MomentKind::Complete => ("#00734F", 2.0, None),
        MomentKind::FailureTarget => ("#B03A00", 1.5, Some("5 3")),
        MomentKind::Failed => ("#B03A00", 2.0, None),
        MomentKind::Suspended => ("#1F5FA8", 1.5, Some("2 3")),
        MomentKind::Resumed => ("#1F5FA8", 1.5, None),
        MomentKind::ActiveDeadline => ("#000000", 2.0, Some("1 3")),
        MomentKind::Now => ("#444444", 1.5, Some("8 4")),
    };
    LineLook {
        colour,
        width,
        dashes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        assert_eq!(fit("abcdef", 100.0, 10.0), "abcdef");
        assert_eq!(fit("abcdefghijklmnopqrstuvwxyz", 62.0, 10.0), "abcdefghi…");
        assert_eq!(fit("ab", 1.0, 10.0), "…");
    }
}
