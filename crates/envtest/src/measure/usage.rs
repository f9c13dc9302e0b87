//! A process's CPU time and resident memory, from `/proc`.

/// CPU seconds (user + system) and resident memory, now and at its peak (KiB).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub cpu_seconds: f64,
    pub rss_kib: u64,
    /// `VmHWM`: the most it was ever resident.
    pub peak_kib: u64,
}

impl Usage {
    /// The process's usage now; zeros for a process that is gone.
    pub fn of(pid: u32) -> Usage {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        Usage::parse(&stat, &status)
    }

    /// From the text of `/proc/<pid>/stat` and `/proc/<pid>/status`.
    fn parse(stat: &str, status: &str) -> Usage {
        // utime and stime, fields 14 and 15 of stat, in clock ticks of 1/100 s; counted after
        // the command name, which is in parentheses and may hold spaces.
        let after_name = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
        let ticks: f64 = after_name
            .split(' ')
            .skip(11)
            .take(2)
            .filter_map(|t| t.parse::<f64>().ok())
            .sum();
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
                .unwrap_or(0)
        };
        Usage {
            cpu_seconds: ticks / 100.0,
            rss_kib: kib("VmRSS:"),
            peak_kib: kib("VmHWM:"),
        }
    }

    /// What grew from `before` to `self`: CPU seconds, resident MiB, and the peak's MiB over
    /// `before`'s resident memory.
    pub fn since(&self, before: &Usage) -> Growth {
        let mib = |kib: u64| kib as f64 / 1024.0;
        Growth {
            cpu_seconds: self.cpu_seconds - before.cpu_seconds,
            rss_mib: mib(self.rss_kib) - mib(before.rss_kib),
            peak_mib: mib(self.peak_kib) - mib(before.rss_kib),
        }
    }
}

/// What a process used over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Growth {
    pub cpu_seconds: f64,
    /// Resident memory at the end less at the start; negative when the allocator gave back.
    pub rss_mib: f64,
    /// The peak less the resident memory at the start.
    pub peak_mib: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_after_a_command_name_with_spaces_and_memory_in_kib() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 8 0";
        let status = "Name:\tx\nVmHWM:\t  20480 kB\nVmRSS:\t  10240 kB\n";
        let now = Usage::parse(stat, status);
        assert_eq!(
            now,
            Usage {
                cpu_seconds: 3.0,
                rss_kib: 10240,
                peak_kib: 20480
            }
        );
        let before = Usage {
            cpu_seconds: 1.0,
            rss_kib: 8192,
            peak_kib: 8192,
        };
        let grown = now.since(&before);
        assert_eq!(grown.cpu_seconds, 2.0);
        assert_eq!(grown.rss_mib, 2.0);
        assert_eq!(grown.peak_mib, 12.0);
    }

    #[test]
    fn a_process_that_is_gone_used_nothing() {
        assert_eq!(Usage::parse("", ""), Usage::default());
    }
}
