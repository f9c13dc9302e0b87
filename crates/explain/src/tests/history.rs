//! Each pod's history (its attempt, the back-off its failure held its replacement for), the
//! Job's conditions, and the picture drawn from them.

use super::*;
use crate::timeline;

const FAILURES: &str = "batch.kubernetes.io/job-index-failure-count";

/// An Indexed Job of three with `backoffLimitPerIndex: 2` and a rule named `Transient` that
/// counts exit code 75: index 0 succeeded; index 1 failed twice (75, then 1) and runs a third
/// pod; index 2 failed once. Told at 45 s.
fn retried() -> Explanation {
    let j = job(Some("example.com/e2e"))
        .indexed(3)
        .set("/spec/backoffLimitPerIndex", json!(2))
        .set("/metadata/annotations", json!({NAMES: r#"["Transient"]"#}))
        .set(
            "/spec/podFailurePolicy",
            json!({"rules": [{"action": "Count", "onExitCodes": {"operator": "In", "values": [75]}}]}),
        )
        .set("/status", json!({"startTime": T0, "completedIndexes": "0", "succeeded": 1}));
    let pods = vec![
        pod("j-0-a").index(0).ended("Succeeded", 0, 10),
        pod("j-1-a").index(1).ended("Failed", 75, 5),
        pod("j-1-b")
            .index(1)
            .annotate(FAILURES, "1")
            .created(15)
            .ended("Failed", 1, 20),
        pod("j-1-c").index(1).annotate(FAILURES, "2").created(40),
        pod("j-2-a").index(2).ended("Failed", 1, 25),
    ];
    tell(j, pods, 45)
}

#[test]
fn each_pod_is_an_attempt_of_its_index_and_each_failure_holds_its_replacement_back() {
    let e = retried();
    let finished: Vec<(&str, Option<u32>, Option<Timestamp>)> = e
        .finished_pods
        .iter()
        .map(|p| (p.name.as_str(), p.attempt, p.backoff_until))
        .collect();
    assert_eq!(
        finished,
        [
            // Each index backs off on its own: 10 s after its first failure, 20 s after its
            // second.
            ("j-1-a", Some(1), Some(t(15))),
            ("j-0-a", Some(1), None),
            ("j-1-b", Some(2), Some(t(40))),
            ("j-2-a", Some(1), Some(t(35))),
        ]
    );
    assert_eq!(e.active_pods[0].attempt, Some(3));
    assert_eq!(e.active_pods[0].created, Some(t(40)));
    let text = render(&e);
    assert!(
        text.contains("pod j-1-b (index 1, attempt 2) failed 25s ago: main exited 1; no pod failure policy rule matched: it counts as a failure; its replacement backs off 20s"),
        "{text}"
    );
    assert!(
        text.contains("pod j-1-c (index 1, attempt 3) running"),
        "{text}"
    );
}

#[test]
fn without_a_per_index_limit_the_job_s_back_off_grows_with_each_failure_since_a_success() {
    let pods = vec![
        pod("a").ended("Failed", 1, 5),
        pod("b").ended("Failed", 1, 7),
        pod("c").ended("Succeeded", 0, 30),
        pod("d").ended("Failed", 1, 40),
    ];
    let e = tell(job(None).set("/spec/completions", json!(3)), pods, 45);
    let until: Vec<(&str, Option<Timestamp>)> = e
        .finished_pods
        .iter()
        .map(|p| (p.name.as_str(), p.backoff_until))
        .collect();
    assert_eq!(
        until,
        [
            ("a", Some(t(15))),
            ("b", Some(t(27))),
            ("c", None),
            ("d", Some(t(50)))
        ]
    );
    // Once the Job has failed, a back-off it cut short is not told.
    let failed = job(None).set(
        "/status",
        json!({"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                               "lastTransitionTime": at(8)}]}),
    );
    let e = tell(
        failed,
        vec![
            pod("a").ended("Failed", 1, 5),
            pod("b").ended("Failed", 1, 7),
        ],
        45,
    );
    assert!(e.finished_pods.iter().all(|p| p.backoff_until.is_none()));
    assert_eq!(e.conditions.len(), 1);
    assert_eq!(e.conditions[0].at, Some(t(8)));
}

#[test]
fn the_picture_has_a_lane_per_index_a_bar_per_pod_and_the_rule_each_failure_matched() {
    let e = retried();
    let t = timeline::timeline(&e);
    let lanes: Vec<Vec<(&str, Option<u64>)>> = t
        .lanes
        .iter()
        .map(|l| l.bars.iter().map(|b| (b.pod.as_str(), b.end)).collect())
        .collect();
    assert_eq!(
        lanes,
        [
            vec![("j-0-a", Some(10))],
            vec![("j-1-a", Some(5)), ("j-1-b", Some(20)), ("j-1-c", None)],
            vec![("j-2-a", Some(25))],
        ]
    );
    let rule = t.lanes[1].bars[0].rule.as_ref().map(|r| r.label());
    assert_eq!(rule.as_deref(), Some("Transient: Count"));
    let backoffs: Vec<Vec<(u64, u64)>> = t
        .lanes
        .iter()
        .map(|l| l.backoffs.iter().map(|b| (b.from, b.until)).collect())
        .collect();
    assert_eq!(backoffs, [vec![], vec![(5, 15), (20, 40)], vec![(25, 35)]]);
    // Not finished: the moment it was told is drawn.
    assert_eq!(t.moments.len(), 1);
    assert_eq!((t.moments[0].at, t.moments[0].label.as_str()), (45, "now"));
    assert_eq!(t.end, 45);
    let svg = timeline::svg(&e);
    assert!(svg.contains("<title id=\"jwt-title\">Job ns/j: Not finished when the story was told, 45s after its creation.</title>"), "{svg}");
    assert!(svg.contains("data-rule=\"Transient\" data-action=\"Count\""));
}

/// The seconds the axis's ticks name, read from the SVG's axis groups (a break's label,
/// italic, left out).
fn ticks(svg: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for axis in svg.split("<g class=\"axis\">").skip(1) {
        let axis = axis.split("<g class=\"lane").next().unwrap_or("");
        for text in axis.split("<text").skip(1) {
            if text.split('>').next().unwrap_or("").contains("italic") {
                continue;
            }
            let label = text
                .split_once('>')
                .and_then(|(_, rest)| rest.split_once("</text>"))
                .map(|(label, _)| label)
                .unwrap_or("");
            if let Ok(d) = jobwarden_rules::seconds::parse(label) {
                out.push(d.as_secs());
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A Job with a counted rule named `Transient` (exit code 75).
fn transient() -> JobB {
    job(Some("example.com/e2e"))
        .set("/metadata/annotations", json!({NAMES: r#"["Transient"]"#}))
        .set(
            "/spec/podFailurePolicy",
            json!({"rules": [{"action": "Count", "onExitCodes": {"operator": "In", "values": [75]}}]}),
        )
        .set("/spec/activeDeadlineSeconds", json!(36_000))
        .set("/status", json!({"startTime": T0}))
}

/// The picture shows what happened, no more: a Job three seconds old whose pod failed at 1 s
/// (its replacement held back until 11 s) ends at 3 s, with no tick past 5 s; one a few hours
/// old ends at its age. A deadline still ahead is a note, not a line.
#[test]
fn the_picture_s_axis_ends_now_for_a_young_job_and_an_old_one() {
    // Told at, the pods; the axis's end.
    let cases: [(i64, Vec<PodB>, u64); 2] = [
        (3, vec![pod("j-a").ended("Failed", 75, 1)], 3),
        (
            3 * 3600 + 7,
            vec![
                pod("j-a").ended("Failed", 75, 60),
                pod("j-b")
                    .created(3 * 3600)
                    .ended("Failed", 75, 3 * 3600 + 4),
            ],
            3 * 3600 + 7,
        ),
    ];
    for (now, pods, end) in cases {
        let e = tell(transient(), pods, now);
        let t = timeline::timeline(&e);
        assert_eq!(t.end, end, "told at {now}");
        let svg = timeline::svg(&e);
        let ticks = ticks(&svg);
        let last = ticks.last().copied().unwrap_or(0);
        assert!(!ticks.is_empty() && last <= end, "told at {now}: {ticks:?}");
        if now == 3 {
            assert!(last <= 5, "a Job 3 s old: no tick past 5 s: {ticks:?}");
        }
        assert!(
            t.notes
                .iter()
                .any(|n| n
                    == "Still ahead when the story was told: activeDeadlineSeconds at 10h0m0s."),
            "{:?}",
            t.notes
        );
        // Each failure's rule, labelled by name and action, as simulate labels it.
        assert!(
            svg.contains(">Transient: Count</text>"),
            "told at {now}: the rule's label"
        );
    }
}
