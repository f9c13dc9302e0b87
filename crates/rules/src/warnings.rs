//! Upstream's Job warnings (`pkg/api/job/warnings.go`): advice kube-apiserver returns with a
//! successful write, never a denial. The webhook does not repeat them (kube-apiserver already
//! sends them); `jobwarden check` prints them, as kubectl would.

use super::{JobObject, names};

pub fn job_warnings(job: &JobObject<'_>, is_create: bool) -> Vec<String> {
    let mut warnings = Vec::new();
    let name = job.name();
    if is_create && !name.is_empty() {
        let problems = names::dns1123_label(name);
        if !problems.is_empty() {
            warnings.push(format!(
                "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [{}]",
                problems.join(" ")
            ));
        }
    }
    if job.is_indexed()
        && job.spec.completions.is_some_and(|c| c > 100_000)
        && job.spec.parallelism.is_some_and(|p| p > 10_000)
    {
        warnings.push("spec: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail".to_owned());
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::JobBuilder;
    use serde_json::json;

    #[test]
    fn upstream_warnings() {
        let warn = |b: JobBuilder, create| {
            let raw = b.build();
            job_warnings(&JobObject::parse(&raw).expect("parses"), create)
        };
        assert!(warn(JobBuilder::new(), true).is_empty());
        let dotted = warn(JobBuilder::new().set("/metadata/name", json!("a.b")), true);
        assert_eq!(dotted.len(), 1);
        assert!(dotted[0].starts_with("metadata.name: this is used in Pod names and hostnames"));
        assert!(warn(JobBuilder::new().set("/metadata/name", json!("a.b")), false).is_empty());
        let big = JobBuilder::new()
            .indexed(100_001)
            .spec("parallelism", json!(10_001));
        assert_eq!(warn(big, false).len(), 1);
        let at_limit = JobBuilder::new()
            .indexed(100_000)
            .spec("parallelism", json!(10_001));
        assert!(warn(at_limit, false).is_empty());
    }
}
