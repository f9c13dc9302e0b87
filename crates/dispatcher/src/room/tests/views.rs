use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::builders::{GPU, job, node, pod};
use crate::room::{Effect, PodShape, PodView, Resources, ShapeError, pods_at_once};

fn container(name: &str, cpu: &str) -> serde_json::Value {
    json!({"name": name, "resources": {"requests": {"cpu": cpu}}})
}

fn sidecar(name: &str, cpu: &str) -> serde_json::Value {
    json!({"name": name, "restartPolicy": "Always", "resources": {"requests": {"cpu": cpu}}})
}

/// component-helpers resource.PodRequests, case by case (cpu in millicores).
#[test]
fn requests_as_the_scheduler_counts_them() {
    let cases: Vec<(&str, serde_json::Value, u64)> = vec![
        (
            "containers summed",
            json!({"containers": [container("a", "1"), container("b", "500m")]}),
            1500,
        ),
        (
            "init containers by their maximum",
            json!({"containers": [container("a", "1")],
                   "initContainers": [container("i1", "4"), container("i2", "2")]}),
            4000,
        ),
        (
            "a sidecar adds to the sum",
            json!({"containers": [container("a", "2")], "initContainers": [sidecar("s", "1")]}),
            3000,
        ),
        (
            "a sidecar counts toward later init containers",
            json!({"containers": [container("a", "2")],
                   "initContainers": [sidecar("s", "1"), container("i", "3")]}),
            4000,
        ),
        (
            "but not toward earlier ones",
            json!({"containers": [container("a", "2")],
                   "initContainers": [container("i", "3"), sidecar("s", "1")]}),
            3000,
        ),
        (
            "sidecars accumulate",
            json!({"containers": [container("a", "1")],
                   "initContainers": [sidecar("s1", "1"), sidecar("s2", "1"), container("i", "5")]}),
            7000,
        ),
        (
            "pod overhead added",
            json!({"containers": [container("a", "1")], "overhead": {"cpu": "250m"}}),
            1250,
        ),
        (
            "pod-level resources replace the containers' cpu",
            json!({"containers": [container("a", "1"), container("b", "1")],
                   "resources": {"requests": {"cpu": "5"}}, "overhead": {"cpu": "100m"}}),
            5100,
        ),
        (
            "pod-level limits default pod-level requests",
            json!({"containers": [container("a", "1")], "resources": {"limits": {"cpu": "3"}}}),
            3000,
        ),
        (
            "an explicit pod-level 0 replaces the containers' too",
            json!({"containers": [container("a", "1")], "resources": {"requests": {"cpu": "0", "memory": "1Gi"}}}),
            0,
        ),
        (
            "a container's limits default its requests",
            json!({"containers": [{"name": "a", "resources": {"limits": {"cpu": "2"}}}]}),
            2000,
        ),
        (
            "nothing requested",
            json!({"containers": [{"name": "a"}]}),
            0,
        ),
    ];
    for (what, spec, cpu) in cases {
        let j = json!({"spec": {"template": {"spec": spec.clone()}}});
        let shape = PodShape::of_job(&j).unwrap();
        assert_eq!(shape.requests.cpu_millis, cpu, "{what}");
        assert_eq!(shape.requests.pods, 1, "{what}: one pod slot");
        // A stored pod of the same spec counts the same.
        let p: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(json!({"metadata": {}, "spec": spec})).unwrap();
        assert_eq!(
            PodView::from_pod(&p).unwrap().requests,
            shape.requests,
            "{what}"
        );
    }
}

#[test]
fn pod_level_resources_keep_the_containers_other_resources() {
    let j = job().requests("memory", "1Gi").gpu(1).requests("cpu", "1");
    let mut spec = j.json().clone();
    spec["spec"]["template"]["spec"]["resources"] = json!({"requests": {"cpu": "8"}});
    let s = PodShape::of_job(&spec).unwrap().requests;
    assert_eq!((s.cpu_millis, s.memory, s.get(GPU)), (8000, 1 << 30, 1));
    // Hugepages are a pod-level resource too; extended resources never are.
    spec["spec"]["template"]["spec"]["resources"] =
        json!({"requests": {"hugepages-2Mi": "4Mi", "nvidia.com/gpu": "4"}});
    let s = PodShape::of_job(&spec).unwrap().requests;
    assert_eq!(
        (s.get("hugepages-2Mi"), s.get(GPU), s.cpu_millis),
        (4 << 20, 1, 1000)
    );
}

#[test]
fn pod_views() {
    assert_eq!(PodView::from_pod(&pod().phase("Succeeded").k8s()), None);
    assert_eq!(PodView::from_pod(&pod().phase("Failed").k8s()), None);
    let v = pod().on("a").owner("job-1").requests("cpu", "1").view();
    assert_eq!(v.node.as_deref(), Some("a"));
    assert_eq!(v.owner.as_deref(), Some("job-1"));
    assert_eq!(v.requests.cpu_millis, 1000);
    assert_eq!(&*v.namespace, "ns");
    let v = pod()
        .unschedulable("2026-11-28T10:00:00Z", "0/3 nodes are available")
        .view();
    let u = v.unschedulable.unwrap();
    assert_eq!(
        u.since,
        "2026-11-28T10:00:00Z".parse::<Timestamp>().unwrap()
    );
    assert_eq!(&*u.message, "0/3 nodes are available");
    // An owner that is not the controller is no owner.
    let v = pod()
        .set(
            "/metadata/ownerReferences",
            json!([{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u"}]),
        )
        .view();
    assert_eq!(v.owner, None);
    // Stored quantities this parser cannot read count as the most, never as room.
    let v = pod().requests("cpu", "lots").view();
    assert_eq!(v.requests.cpu_millis, crate::room::MAX_AMOUNT);
}

#[test]
fn node_views() {
    let v = node("a")
        .gpu(2)
        .label("zone", "x")
        .taint("dedicated=gpu:NoSchedule")
        .taint("soft:PreferNoSchedule")
        .taint("gone:NoExecute")
        .alloc("memory", "garbage")
        .cordoned()
        .view();
    assert_eq!(&*v.name, "a");
    assert_eq!(v.label("zone"), Some("x"));
    assert_eq!(v.allocatable.get(GPU), 2);
    assert_eq!(v.allocatable.pods, 110);
    assert_eq!(
        v.allocatable.memory, 0,
        "unreadable allocatable gives nothing"
    );
    assert!(v.unschedulable);
    let taints: Vec<String> = v.taints.iter().map(ToString::to_string).collect();
    assert_eq!(taints, ["dedicated=gpu:NoSchedule", "gone:NoExecute"]);
    assert_eq!(v.taints[1].effect, Effect::NoExecute);
}

#[test]
fn pods_at_once_with_the_job_api_defaults() {
    let cases = [
        (job(), 1),
        (job().pods(4), 4),
        (job().pods(4).completions(10), 4),
        (job().pods(4).completions(10).succeeded(8), 2),
        (job().pods(4).completions(10).succeeded(12), 0),
        (job().pods(0).completions(10), 0),
        (job().pods(-3), 0),
        (job().indexed(3), 3),
        (job().pods(5).completions(2), 2),
        (job().pods(1 << 40), u32::MAX),
    ];
    for (j, want) in cases {
        assert_eq!(j.at_once(), want, "{}", j.json());
    }
    let mut j = job().pods(2).json().clone();
    j["spec"]["suspend"] = json!(true);
    assert_eq!(pods_at_once(&j), 2, "a suspended Job still counts its pods");
    j["spec"].as_object_mut().unwrap().remove("parallelism");
    assert_eq!(pods_at_once(&j), 1);
    assert_eq!(pods_at_once(&json!("garbage")), 1);
}

#[test]
fn shapes_that_cannot_be_read() {
    assert!(matches!(
        PodShape::of_job(&json!({})),
        Err(ShapeError::NoTemplate)
    ));
    assert!(matches!(
        PodShape::of_job(&json!({"spec": {"template": {"spec": {"containers": "x"}}}})),
        Err(ShapeError::Template(_))
    ));
    for q in ["-1", "lots", "1e99999"] {
        let err = PodShape::of_job(job().requests("cpu", q).json()).unwrap_err();
        assert!(matches!(err, ShapeError::Requests(_)), "{q}");
        assert!(std::error::Error::source(&err).is_some());
    }
    let huge = job().requests("memory", "9999999999Ei").shape();
    assert_eq!(huge.requests.memory, crate::room::MAX_AMOUNT);
    assert_eq!(Resources::one_pod().pods, 1);
}
