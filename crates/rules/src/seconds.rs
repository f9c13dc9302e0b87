//! Whole-second durations, the unit of `simulate`'s scenarios, the audit's and explain's
//! thresholds and the pod timing annotations (`pod_timing.rs`): parsed as people write them
//! (`90s`, `1m30s`, `2h`, `PT5M`, through jiff, already in the tree via k8s-openapi) and printed
//! the way Go and kubectl print them (`1m30s`). Pure; nothing here reads a clock.

use std::time::Duration;

use k8s_openapi::jiff::SignedDuration;

/// The longest duration a scenario or a limit may name: a year, far beyond any back-off or
/// deadline the controller computes, and small enough that sums of them never overflow.
pub const LONGEST: Duration = Duration::from_secs(366 * 24 * 3600);

/// A duration of whole seconds, from zero to [`LONGEST`].
pub fn parse(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let parsed: SignedDuration = trimmed
        .parse()
        .map_err(|_| format!("{trimmed:?} is not a duration (write it like 30s, 1m30s or 2h)"))?;
    if parsed.is_negative() {
        return Err(format!("{trimmed:?} is negative"));
    }
    if parsed.subsec_nanos() != 0 {
        return Err(format!(
            "{trimmed:?} is not a whole number of seconds (the controller's clock counts seconds)"
        ));
    }
    let d = Duration::from_secs(parsed.as_secs().unsigned_abs());
    if d > LONGEST {
        return Err(format!(
            "{trimmed:?} is longer than {}",
            format(LONGEST.as_secs())
        ));
    }
    Ok(d)
}

/// Go's `time.Duration.String()` for whole seconds: `0s`, `45s`, `1m30s`, `2h0m0s`.
pub fn format(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if h > 0 {
        format!("{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

/// Rounds up to a whole second: the controller plans with whole seconds, so a wait of 9.2 s
/// is over at the tenth second.
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_whole_seconds_and_refuses_the_rest() {
        let good = [
            ("0s", 0),
            ("10s", 10),
            (" 90s ", 90),
            ("1m30s", 90),
            ("2h", 7200),
            ("1h 2m 3s", 3723),
            ("PT5M", 300),
            ("8784h", 366 * 24 * 3600),
        ];
        for (text, secs) in good {
            assert_eq!(parse(text), Ok(Duration::from_secs(secs)), "{text}");
        }
        let bad = [
            ("", "is not a duration"),
            ("ten", "is not a duration"),
            ("10", "is not a duration"),
            ("-5s", "is negative"),
            ("1.5s", "whole number of seconds"),
            ("500ms", "whole number of seconds"),
            ("8785h", "is longer than 8784h0m0s"),
            ("1d", "is not a duration"),
            ("99999999999999h", "is longer than"),
            ("9999999999999999999999h", "is not a duration"),
        ];
        for (text, want) in bad {
            let err = parse(text).expect_err(text);
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn formats_like_go() {
        let table = [
            (0, "0s"),
            (59, "59s"),
            (60, "1m0s"),
            (90, "1m30s"),
            (3600, "1h0m0s"),
            (3723, "1h2m3s"),
            (90000, "25h0m0s"),
        ];
        for (secs, want) in table {
            assert_eq!(format(secs), want);
        }
        assert_eq!(ceil_secs(Duration::from_millis(9200)), 10);
        assert_eq!(ceil_secs(Duration::from_secs(9)), 9);
    }
}
