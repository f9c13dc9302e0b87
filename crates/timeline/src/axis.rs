//! The time axis: seconds to x, with long idle stretches compressed. Every time the picture
//! shows (a pod created or ended, a back-off's end, a Job moment) is a stop; a gap between two
//! stops far longer than the usual gap (a 10-minute back-off between 5-second pods) is drawn
//! narrow, as a marked break, so that short bars stay visible. Ticks fall on round durations.

use jobwarden_rules::seconds;

/// A gap is compressed when it is longer than this many times the median gap...
const COMPRESS_FACTOR: u64 = 8;
/// ...and longer than this: a minute of nothing is worth its width.
const COMPRESS_AT_LEAST: u64 = 60;
/// The least distance between two ticks, in pixels.
const TICK_SPACING: f64 = 72.0;
/// Round tick steps, in seconds.
const STEPS: [u64; 17] = [
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 43_200, 86_400,
];

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Segment {
    pub from: u64,
    pub to: u64,
    pub x_from: f64,
    pub x_to: f64,
    /// Drawn narrow: nothing starts or ends in it.
    pub compressed: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Axis {
    pub segments: Vec<Segment>,
    /// Pixels per second outside the breaks.
    pub scale: f64,
    pub tick_step: u64,
}

impl Axis {
    /// An axis from 0 to the last stop over `x0..x1`; `break_width` gives a break's width in
    /// pixels for the seconds it skips (its label must fit).
    pub fn new(mut stops: Vec<u64>, x0: f64, x1: f64, break_width: impl Fn(u64) -> f64) -> Axis {
        stops.push(0);
        stops.sort_unstable();
        stops.dedup();
        let gaps: Vec<u64> = stops.windows(2).map(|w| w[1] - w[0]).collect();
        let mut sorted = gaps.clone();
        sorted.sort_unstable();
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
        let threshold = median
            .saturating_mul(COMPRESS_FACTOR)
            .max(COMPRESS_AT_LEAST);
        let compressed: Vec<bool> = gaps.iter().map(|g| *g > threshold).collect();
        let breaks: f64 = gaps
            .iter()
            .zip(&compressed)
            .filter(|(_, c)| **c)
            .map(|(g, _)| break_width(*g))
            .sum();
        let linear: u64 = gaps
            .iter()
            .zip(&compressed)
            .filter(|(_, c)| !**c)
            .map(|(g, _)| *g)
            .sum();
        let width = (x1 - x0 - breaks).max(1.0);
        // A story where everything happened within one second still gets a second's width.
        let scale = width / (linear.max(1) as f64);
        let mut segments = Vec::with_capacity(gaps.len());
        let mut x = x0;
        for (w, c) in stops.windows(2).zip(&compressed) {
            let dx = if *c {
                break_width(w[1] - w[0])
            } else {
                (w[1] - w[0]) as f64 * scale
            };
            segments.push(Segment {
                from: w[0],
                to: w[1],
                x_from: x,
                x_to: x + dx,
                compressed: *c,
            });
            x += dx;
        }
        if segments.is_empty() {
            segments.push(Segment {
                from: 0,
                to: 1,
                x_from: x0,
                x_to: x0 + scale,
                compressed: false,
            });
        }
        let tick_step = STEPS
            .iter()
            .copied()
            .find(|s| *s as f64 * scale >= TICK_SPACING)
            .unwrap_or(STEPS[STEPS.len() - 1]);
        Axis {
            segments,
            scale,
            tick_step,
        }
    }

    /// Where second `t` is drawn.
    pub fn x(&self, t: u64) -> f64 {
        let i = self.segments.partition_point(|s| s.to < t);
        let Some(s) = self.segments.get(i) else {
            return self.segments.last().map_or(0.0, |s| s.x_to);
        };
        if t <= s.from {
            return s.x_from;
        }
        let span = (s.to - s.from) as f64;
        s.x_from + (s.x_to - s.x_from) * ((t - s.from) as f64 / span)
    }

    /// The ticks: (x, label), on multiples of the tick step outside the breaks.
    pub fn ticks(&self) -> Vec<(f64, String)> {
        let mut ticks = Vec::new();
        for s in self.segments.iter().filter(|s| !s.compressed) {
            let mut t = s.from.div_ceil(self.tick_step) * self.tick_step;
            while t <= s.to {
                if ticks.last().is_none_or(|(_, last)| *last < t) {
                    ticks.push((self.x(t), t));
                }
                t += self.tick_step;
            }
        }
        ticks
            .into_iter()
            .map(|(x, t)| (x, seconds::format(t)))
            .collect()
    }

    pub fn breaks(&self) -> impl Iterator<Item = &Segment> {
        self.segments.iter().filter(|s| s.compressed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(stops: &[u64]) -> Axis {
        Axis::new(stops.to_vec(), 100.0, 1100.0, |_| 40.0)
    }

    #[test]
    fn a_ten_minute_back_off_between_five_second_pods_is_compressed() {
        let a = axis(&[0, 5, 605, 610]);
        let breaks: Vec<(u64, u64)> = a.breaks().map(|s| (s.from, s.to)).collect();
        assert_eq!(breaks, [(5, 605)]);
        // The two 5-second pods share the width left by the break.
        assert_eq!(a.x(5) - a.x(0), 480.0);
        assert_eq!(a.x(605) - a.x(5), 40.0);
        assert_eq!(a.x(610), 1100.0);
    }

    #[test]
    fn evenly_spread_stops_are_drawn_to_scale() {
        let a = axis(&[0, 10, 15, 20, 25, 30]);
        assert_eq!(a.breaks().count(), 0);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(near(a.x(15), 600.0));
        assert!(near(a.x(30), 1100.0));
        // A time between two stops is placed proportionally.
        assert!(near(a.x(12), 100.0 + 12.0 * 1000.0 / 30.0));
    }

    #[test]
    fn a_short_wait_is_never_compressed() {
        // A 40-second wait among 1-second pods: under a minute, drawn to scale.
        let a = axis(&[0, 1, 2, 42, 43]);
        assert_eq!(a.breaks().count(), 0);
    }

    #[test]
    fn ticks_fall_on_round_durations_and_skip_breaks() {
        let a = axis(&[0, 5, 605, 610]);
        let labels: Vec<String> = a.ticks().into_iter().map(|(_, l)| l).collect();
        assert_eq!(
            labels,
            [
                "0s", "1s", "2s", "3s", "4s", "5s", "10m5s", "10m6s", "10m7s", "10m8s", "10m9s",
                "10m10s"
            ]
        );
        let a = axis(&[0, 3600]);
        let labels: Vec<String> = a.ticks().into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels.first().map(String::as_str), Some("0s"));
        assert_eq!(labels.last().map(String::as_str), Some("1h0m0s"));
        assert!(labels.len() >= 5 && labels.len() <= 14, "{labels:?}");
    }

    #[test]
    fn a_story_within_one_second_still_has_width() {
        let a = axis(&[0]);
        assert!(a.x(1) > a.x(0));
        assert!(a.x(1) <= 1100.0);
        assert_eq!(a.ticks()[0].1, "0s");
    }
}
