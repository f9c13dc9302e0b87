//! Each filter alone, with the message a Job that no node passes gets.

use super::builders::{JobB, NodeB, job, node, room};
use crate::room::{Fit, fits};

fn verdict(j: &JobB, nodes: &[NodeB]) -> String {
    match fits(&j.shape(), j.at_once(), &room(nodes), &[]) {
        Fit::Fits => "fits".into(),
        Fit::Short(s) => format!("{}: {s}", s.reason_label()),
    }
}

#[test]
fn every_filter() {
    let gpu_taint = || node("a").taint("dedicated=gpu:NoSchedule");
    let cases: Vec<(&str, JobB, Vec<NodeB>, &str)> = vec![
        ("no nodes", job(), vec![], "no_nodes: no nodes"),
        ("a plain node", job(), vec![node("a")], "fits"),
        (
            "cordoned",
            job(),
            vec![node("a").cordoned(), node("b").cordoned()],
            "cordoned: every node is cordoned",
        ),
        (
            "cordoned, tolerated as the scheduler allows",
            job().tolerate("node.kubernetes.io/unschedulable:NoSchedule"),
            vec![node("a").cordoned()],
            "fits",
        ),
        (
            "taint",
            job(),
            vec![gpu_taint()],
            "taint: taint dedicated=gpu:NoSchedule not tolerated",
        ),
        (
            "NoExecute taint",
            job(),
            vec![node("a").taint("k:NoExecute")],
            "taint: taint k:NoExecute not tolerated",
        ),
        (
            "PreferNoSchedule is a score, not a filter",
            job(),
            vec![node("a").taint("k=v:PreferNoSchedule")],
            "fits",
        ),
        (
            "tolerated by Equal",
            job().tolerate("dedicated=gpu:NoSchedule"),
            vec![gpu_taint()],
            "fits",
        ),
        (
            "tolerated by Exists on the key",
            job().tolerate("dedicated:"),
            vec![gpu_taint()],
            "fits",
        ),
        (
            "tolerated by an empty Exists",
            job().tolerate(":"),
            vec![gpu_taint()],
            "fits",
        ),
        (
            "a toleration of another value",
            job().tolerate("dedicated=cpu:NoSchedule"),
            vec![gpu_taint()],
            "taint: taint dedicated=gpu:NoSchedule not tolerated",
        ),
        (
            "a toleration of another effect",
            job().tolerate("dedicated=gpu:NoExecute"),
            vec![gpu_taint()],
            "taint: taint dedicated=gpu:NoSchedule not tolerated",
        ),
        (
            "nodeSelector",
            job().selector("gpu", "a100"),
            vec![node("a").label("gpu", "h100")],
            "node_selector: no node matches nodeSelector gpu=a100",
        ),
        (
            "nodeSelector matched",
            job().selector("gpu", "a100"),
            vec![node("a").label("gpu", "a100")],
            "fits",
        ),
        (
            "In",
            job().affinity(&[&[("zone", "In", &["x", "y"])]]),
            vec![node("a").label("zone", "y")],
            "fits",
        ),
        (
            "In, other value",
            job().affinity(&[&[("zone", "In", &["x"])]]),
            vec![node("a").label("zone", "y")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "In, no label",
            job().affinity(&[&[("zone", "In", &["x"])]]),
            vec![node("a")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "NotIn, no label",
            job().affinity(&[&[("zone", "NotIn", &["x"])]]),
            vec![node("a")],
            "fits",
        ),
        (
            "NotIn",
            job().affinity(&[&[("zone", "NotIn", &["x"])]]),
            vec![node("a").label("zone", "x")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "Exists",
            job().affinity(&[&[("gpu", "Exists", &[])]]),
            vec![node("a").label("gpu", "")],
            "fits",
        ),
        (
            "DoesNotExist",
            job().affinity(&[&[("gpu", "DoesNotExist", &[])]]),
            vec![node("a").label("gpu", "")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "Gt",
            job().affinity(&[&[("mem-gb", "Gt", &["64"])]]),
            vec![node("a").label("mem-gb", "128")],
            "fits",
        ),
        (
            "Gt, not greater",
            job().affinity(&[&[("mem-gb", "Gt", &["64"])]]),
            vec![node("a").label("mem-gb", "64")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "Lt",
            job().affinity(&[&[("mem-gb", "Lt", &["64"])]]),
            vec![node("a").label("mem-gb", "-3")],
            "fits",
        ),
        (
            "Gt on a label that is no integer",
            job().affinity(&[&[("mem-gb", "Gt", &["64"])]]),
            vec![node("a").label("mem-gb", "128Gi")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "Lt with a bound that is no integer",
            job().affinity(&[&[("mem-gb", "Lt", &["1.5"])]]),
            vec![node("a").label("mem-gb", "1")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "Gt with two bounds",
            job().affinity(&[&[("n", "Gt", &["1", "2"])]]),
            vec![node("a").label("n", "9")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "Gt beyond i64",
            job().affinity(&[&[("n", "Gt", &["1"])]]),
            vec![node("a").label("n", "99999999999999999999999")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "an unknown operator",
            job().affinity(&[&[("n", "Near", &["1"])]]),
            vec![node("a").label("n", "1")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "expressions of a term are ANDed",
            job().affinity(&[&[("zone", "In", &["x"]), ("gpu", "Exists", &[])]]),
            vec![node("a").label("zone", "x")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "terms are ORed",
            job().affinity(&[
                &[("zone", "In", &["x"]), ("gpu", "Exists", &[])],
                &[("zone", "In", &["y"])],
            ]),
            vec![node("a").label("zone", "y")],
            "fits",
        ),
        (
            "an empty term matches nothing",
            job().affinity(&[&[]]),
            vec![node("a")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "matchFields on the name",
            job().name_in(&["b"]),
            vec![node("a"), node("b")],
            "fits",
        ),
        (
            "matchFields on another name",
            job().name_in(&["c"]),
            vec![node("a")],
            "affinity: no node matches the required node affinity",
        ),
        (
            "reasons of several kinds, each with its count",
            job().selector("gpu", "a100"),
            vec![
                node("a").cordoned(),
                node("b").taint("k:NoSchedule"),
                node("c"),
                node("d"),
            ],
            "node_selector: cordoned (1 node); taint k:NoSchedule not tolerated (1 node); nodeSelector gpu=a100 not matched (2 nodes)",
        ),
    ];
    for (what, j, nodes, want) in cases {
        assert_eq!(verdict(&j, &nodes), want, "{what}");
    }
}
