//! What a process serves on `/metrics` (Prometheus' text exposition), read as a benchmark or
//! a test reads it: the sum of a metric's series, one series, a histogram's quantiles.

/// One scrape's text.
#[derive(Debug, Clone, Default)]
pub struct Exposition(pub String);

impl Exposition {
    /// `/metrics` over plain HTTP on a loopback port (`--metrics-secure=false`); `None` when
    /// nothing answers.
    pub fn scrape(port: u16) -> Option<Exposition> {
        let response = crate::http_get(port, "/metrics")?;
        let body = response
            .split_once("\r\n\r\n")
            .map_or(response.as_str(), |(_, body)| body);
        Some(Exposition(body.to_owned()))
    }

    /// Each sample of `name` (any labels): its labels (`{...}`, or empty) and value.
    fn samples<'a>(&'a self, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
        self.0.lines().filter_map(move |line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(rest) => {
                    let (labels, value) = rest.split_once("} ")?;
                    (labels, value)
                }
                None => ("", rest.strip_prefix(' ')?),
            };
            Some((labels, value.trim().parse().ok()?))
        })
    }

    /// The sum of every series of `name`; 0 when there is none.
    pub fn sum(&self, name: &str) -> f64 {
        self.samples(name).map(|(_, v)| v).sum()
    }

    /// The value of the series of `name` with exactly these labels (`worker="east"`, or ""
    /// for none).
    pub fn series(&self, name: &str, labels: &str) -> Option<f64> {
        self.samples(name)
            .find(|(l, _)| *l == labels)
            .map(|(_, v)| v)
    }

    /// The `q` quantile of the histogram `name` (its `_bucket` series), as Prometheus'
    /// `histogram_quantile` estimates it: linear within the bucket it falls in; `None` when it
    /// counted nothing. A quantile in the `+Inf` bucket is the highest finite bound.
    pub fn quantile(&self, name: &str, q: f64) -> Option<f64> {
        let bucket = format!("{name}_bucket");
        let mut buckets: Vec<(f64, f64)> = self
            .samples(&bucket)
            .filter_map(|(labels, count)| {
                let le = labels
                    .split(',')
                    .find_map(|l| l.trim().strip_prefix("le=\""))?
                    .trim_end_matches('"');
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((bound, count))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total = buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let (mut lower, mut below) = (0.0, 0.0);
        for (bound, count) in &buckets {
            if *count >= rank {
                if bound.is_infinite() {
                    return Some(lower);
                }
                let within = count - below;
                let share = if within > 0.0 {
                    (rank - below) / within
                } else {
                    1.0
                };
                return Some(lower + (bound - lower) * share);
            }
            (lower, below) = (*bound, *count);
        }
        Some(lower)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP x_total A counter.
x_total{worker=\"east\"} 3
x_total{worker=\"west\"} 4
x_total_other 100
leader 1
lag_seconds_bucket{le=\"0.1\"} 0
lag_seconds_bucket{le=\"0.2\"} 50
lag_seconds_bucket{le=\"0.4\"} 90
lag_seconds_bucket{le=\"0.8\"} 100
lag_seconds_bucket{le=\"+Inf\"} 100
lag_seconds_sum 30
lag_seconds_count 100
";

    #[test]
    fn sums_a_metric_s_series_and_reads_one() {
        let e = Exposition(TEXT.to_owned());
        assert_eq!(e.sum("x_total"), 7.0);
        assert_eq!(e.sum("leader"), 1.0);
        assert_eq!(e.sum("absent"), 0.0);
        assert_eq!(e.series("x_total", "worker=\"west\""), Some(4.0));
        assert_eq!(e.series("leader", ""), Some(1.0));
    }

    #[test]
    fn estimates_quantiles_within_their_bucket() {
        let e = Exposition(TEXT.to_owned());
        let about = |got: Option<f64>, want: f64| got.is_some_and(|g| (g - want).abs() < 1e-9);
        assert!(
            about(e.quantile("lag_seconds", 0.5), 0.2),
            "{:?}",
            e.quantile("lag_seconds", 0.5)
        );
        assert!(about(e.quantile("lag_seconds", 0.7), 0.3));
        assert!(about(e.quantile("lag_seconds", 0.99), 0.76));
        assert_eq!(e.quantile("absent", 0.5), None);
    }
}
