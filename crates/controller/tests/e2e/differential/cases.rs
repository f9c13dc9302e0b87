//! The scenarios the two controllers run side by side: each a Job, the kubelet's script for
//! it, and the steps the test takes beyond the kubelet.

use super::*;

/// A scenario's steps beyond the scripted kubelet.
#[derive(Clone, Copy)]
pub(super) enum Steps {
    /// The kubelet alone.
    None,
    /// One pod succeeds, the Job is suspended and resumed, then the rest succeed.
    SuspendResume,
    /// The one pod is deleted while it runs; its replacement succeeds.
    DeleteRunningPod,
    /// A bare pod with the Job's selector labels joins its two running pods: adopted (upstream's
    /// ClaimPods), then deleted as the excess pod it is, and counted as failed.
    BarePodJoins,
    /// A bare pod carrying a `manualSelector` Job's selector label (and none of the labels a
    /// generated selector has) is there before the Job: adopted, it runs as one of the Job's
    /// two pods, and one pod fewer is made.
    BarePodBeforeManualSelector,
}

pub(super) struct Scenario {
    pub(super) name: &'static str,
    pub(super) spec: Value,
    pub(super) annotations: Value,
    pub(super) script: Option<Script>,
    pub(super) gate: usize,
    pub(super) steps: Steps,
}

pub(super) fn scenarios() -> Vec<Scenario> {
    let plain = |name, spec, script, gate| Scenario {
        name,
        spec,
        annotations: json!({}),
        script: Some(script),
        gate,
        steps: Steps::None,
    };
    let fail_job_on = |c: i32| {
        json!({"action": "FailJob",
               "onExitCodes": {"containerName": "main", "operator": "In", "values": [c]}})
    };
    let named = |name, names: Value, script| Scenario {
        name,
        spec: json!({"completions": 1, "parallelism": 1, "backoffLimit": 0,
                     "podFailurePolicy": {"rules": [fail_job_on(2), fail_job_on(3)]}}),
        annotations: json!({"jobwarden.io/pod-failure-policy-rule-names": names.to_string()}),
        script: Some(script),
        gate: 1,
        steps: Steps::None,
    };
    vec![
        plain(
            "non-indexed",
            json!({"completions": 3, "parallelism": 2}),
            |_| Fate::Succeed,
            1,
        ),
        plain(
            "indexed",
            json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
            |_| Fate::Succeed,
            3,
        ),
        plain(
            "backoff-limit-exceeded",
            json!({"completions": 2, "parallelism": 2, "backoffLimit": 0}),
            |k| match k.attempt {
                0 => Fate::Fail(1),
                _ => Fate::Hold,
            },
            2,
        ),
        plain(
            "backoff-limit-per-index",
            json!({"completions": 2, "parallelism": 2, "completionMode": "Indexed",
                   "backoffLimitPerIndex": 0}),
            |k| match k.index {
                Some(1) => Fate::Fail(1),
                _ => Fate::Succeed,
            },
            2,
        ),
        plain(
            "success-policy-leader",
            json!({"completions": 10, "parallelism": 10, "completionMode": "Indexed",
                   "successPolicy": {"rules": [{"succeededIndexes": "0"}]}}),
            |k| match k.index {
                Some(0) => Fate::Succeed,
                _ => Fate::Hold,
            },
            10,
        ),
        plain(
            "success-policy-five-workers",
            json!({"completions": 10, "parallelism": 10, "completionMode": "Indexed",
                   "successPolicy": {"rules": [
                       {"succeededIndexes": "0", "succeededCount": 1},
                       {"succeededIndexes": "1-9", "succeededCount": 5}]}}),
            |k| match k.index {
                Some(1..=5) => Fate::Succeed,
                _ => Fate::Hold,
            },
            10,
        ),
        named(
            "named-rule-exit-code-2",
            json!(["ExitCode2", "ExitCode3"]),
            |_| Fate::Fail(2),
        ),
        named("unnamed-rule", json!(["ExitCode2", null]), |_| {
            Fate::Fail(3)
        }),
        Scenario {
            name: "suspend-then-resume",
            spec: json!({"completions": 2, "parallelism": 2}),
            annotations: json!({}),
            script: None,
            gate: 0,
            steps: Steps::SuspendResume,
        },
        Scenario {
            name: "running-pod-deleted",
            spec: json!({"completions": 1, "parallelism": 1, "backoffLimit": 3}),
            annotations: json!({}),
            script: None,
            gate: 0,
            steps: Steps::DeleteRunningPod,
        },
        Scenario {
            name: "manual-selector-adopts",
            spec: json!({"completions": 2, "parallelism": 2, "manualSelector": true,
            "selector": {"matchLabels": {"app": "manual-adoption"}},
            "template": {
                "metadata": {"labels": {"app": "manual-adoption"}},
                "spec": {
                    "schedulerName": "jobwarden-e2e-nobody",
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                },
            }}),
            annotations: json!({}),
            script: None,
            gate: 0,
            steps: Steps::BarePodBeforeManualSelector,
        },
        Scenario {
            name: "bare-pod-adopted",
            spec: json!({"completions": 2, "parallelism": 2}),
            annotations: json!({}),
            script: None,
            gate: 0,
            steps: Steps::BarePodJoins,
        },
    ]
}
