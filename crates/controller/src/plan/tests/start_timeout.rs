//! Tables over `plan` for `jobwarden.io/pod-start-timeout`: which pending pods count as not
//! started, from when the timeout counts, the next look at the deadline, and what the failure
//! then leads to (the back-off limit, the pod failure policy, a replacement after the
//! back-off). The runner is `testing::plan_table`.

use jobwarden_rules::condition::*;
use jobwarden_rules::pod_timing::{START_TIMEOUT_ANNOTATION, START_TIMEOUT_CONDITION};
use jobwarden_rules::well_known::*;
use serde_json::json;

use crate::plan::DeleteReason::*;
use crate::plan::{InFlight, PlanConfig};
use crate::testing::plan_table::{row, table};
use crate::testing::*;

/// One pod at a time, 30 s to start.
fn job() -> JobBuilder {
    JobBuilder::non_indexed(2, 1)
        .annotation(START_TIMEOUT_ANNOTATION, "30s")
        .started(0)
        .active(1)
        .ready(0)
        .terminating(0)
}

fn pulling(reason: &str) -> PodBuilder {
    pod("a").waiting(reason, false, Some(10))
}

#[test]
fn which_pods_count_as_not_started_and_when() {
    table([
        row(
            "waiting with ImagePullBackOff 15 s of 30: look again at the deadline",
            job(),
            [pulling("ImagePullBackOff")],
            25,
        )
        .fails(&[])
        .deletes(&[])
        .requeue_after(15)
        .no_status_write(),
        row(
            "30 s after it was scheduled: failed and deleted, nothing else this sync",
            job(),
            [pulling("ImagePullBackOff")],
            40,
        )
        .fails(&[("a", "ImagePullBackOff")])
        .deletes(&[("a", StartTimedOut)])
        .creates(&[])
        .events(&["PodStartTimeout"]),
        row(
            "every reason of the set counts: InvalidImageName",
            job(),
            [pulling("InvalidImageName")],
            40,
        )
        .fails(&[("a", "InvalidImageName")]),
        row(
            "an init container that cannot be created counts",
            job(),
            [pod("a").waiting("CreateContainerConfigError", true, Some(10))],
            40,
        )
        .fails(&[("a", "CreateContainerConfigError")]),
        row(
            "ContainerCreating is progress: no timeout, no polling",
            job(),
            [pulling("ContainerCreating")],
            4000,
        )
        .fails(&[])
        .no_requeue(),
        row(
            "no PodScheduled condition: counted from the pod's creation",
            job(),
            [pod("a").waiting("ErrImagePull", false, None)],
            30,
        )
        .fails(&[("a", "ErrImagePull")]),
        row(
            "without the annotation a pod waits for ever, as upstream",
            JobBuilder::non_indexed(2, 1).started(0).active(1),
            [pulling("ImagePullBackOff")],
            100_000,
        )
        .fails(&[])
        .no_requeue(),
        row(
            "suspended: the pods go anyway, none is failed",
            job().suspend(true),
            [pulling("ImagePullBackOff")],
            40,
        )
        .fails(&[])
        .deletes(&[("a", Suspended)]),
        row(
            "a deletion already under way is not asked for twice",
            job(),
            [pulling("ImagePullBackOff")],
            40,
        )
        .remembering(InFlight {
            deleting: ["uid-a".to_owned()].into(),
            ..InFlight::default()
        })
        .fails(&[])
        .deletes(&[]),
    ]);
}

#[test]
fn upstream_mode_ignores_the_annotation() {
    let off = PlanConfig {
        jobwarden_extensions: false,
        ..PlanConfig::default()
    };
    table([row(
        "simulating upstream",
        job(),
        [pulling("ImagePullBackOff")],
        40,
    )
    .config(off)
    .fails(&[])
    .no_requeue()]);
}

#[test]
fn a_timed_out_pod_is_a_failure_like_any_other() {
    let timed_out = || pulling("ImagePullBackOff").start_timed_out("ImagePullBackOff", 40);
    table([
        row(
            "failed but not deleted (the controller stopped between): deleted now, counted",
            job().backoff_limit(1),
            [timed_out()],
            41,
        )
        .fails(&[])
        .deletes(&[("a", StartTimedOut)])
        .uncounted_failed(&["a"])
        .active(0),
        row(
            "counted: replaced after the back-off, counted from the timeout",
            job().backoff_limit(1).failed(1).active(0),
            [timed_out().deleting_at(40).no_finalizer()],
            45,
        )
        .creates(&[])
        .requeue_after(5),
        row(
            "the second timeout exceeds backoffLimit 1",
            job().backoff_limit(1).failed(1),
            [timed_out().deleting_at(40)],
            41,
        )
        .conditions(&[(FAILURE_TARGET, "True", REASON_BACKOFF_LIMIT_EXCEEDED)]),
        row(
            "a FailJob rule on the condition fails the Job at once, under the rule's name",
            job()
                .backoff_limit(6)
                .pod_failure_policy(json!([{"action": "FailJob",
                    "onPodConditions": [{"type": START_TIMEOUT_CONDITION, "status": "True"}]}]))
                .rule_names(&[Some("ImageNeverStarted")]),
            [timed_out().deleting_at(40)],
            41,
        )
        .conditions(&[(FAILURE_TARGET, "True", "PodFailurePolicy_ImageNeverStarted")]),
    ]);
}
