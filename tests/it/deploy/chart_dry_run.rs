//! The chart on a real kube-apiserver: every object it renders passes a server-side dry run.
//! Helm comes from `JOBWARDEN_HELM`, else `helm` on the PATH, and the API server from the
//! envtest control plane; without either these tests print one line and pass.

use std::process::Output;

use crate::deploy::chart::{RELEASE, helm, template};

/// This test's own plane: its dry run of cluster-scoped objects (ClusterRoleBindings among
/// them) would meet, and conflict with, the ones other tests install on the binary's.
static PLANE: jobwarden_envtest::SharedPlane = jobwarden_envtest::SharedPlane::new();

/// The CRDs of the kinds the chart renders that a bare kube-apiserver does not know, reduced to
/// their names: group, version, kind, plural, scope. A server-side dry run then checks the
/// objects' apiVersion, kind and metadata against them, not their spec (cert-manager's and the
/// Prometheus Operator's schemas are theirs to check).
const FOREIGN_KINDS: [(&str, &str, &str); 4] = [
    ("cert-manager.io", "Issuer", "issuers"),
    ("cert-manager.io", "Certificate", "certificates"),
    ("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
    ("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
];

fn run_kubectl(
    plane: &jobwarden_envtest::ControlPlane,
    args: &[&str],
    stdin: Option<&str>,
) -> Output {
    use std::io::Write as _;
    let mut child = plane
        .kubectl()
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("write stdin");
    drop(input);
    child.wait_with_output().expect("kubectl finishes")
}

/// Every object the chart renders (hooks, webhook configurations and the monitoring objects
/// included, both layouts, and the worker side) passes a server-side dry run on a real kube-apiserver v1.36, in a
/// namespace that enforces (and warns about) the restricted Pod Security profile, as the docs
/// have it labelled. The API server validates each object as it would store it: field names
/// and types, the webhook configurations' CEL matchConditions, RBAC roles, and the pod
/// templates against the profile.
#[test]
fn the_rendered_chart_passes_a_server_side_dry_run() {
    let Some(helm) = helm() else { return };
    let Some(plane) = PLANE.get() else {
        return;
    };
    let namespace = format!("jobwarden-chart-dry-run-{}", std::process::id());
    let ok = |what: &str, out: &Output| {
        assert!(
            out.status.success(),
            "{what}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };

    // Only the CRDs the cluster lacks, removed again afterwards: a real cluster's stay as they are.
    let mut created_crds = Vec::new();
    for (group, kind, plural) in FOREIGN_KINDS {
        let crd = format!("{plural}.{group}");
        if !run_kubectl(plane, &["get", "crd", &crd], None)
            .status
            .success()
        {
            let yaml = serde_json::to_string(&jobwarden_envtest::stand_in_crd(group, kind, plural))
                .expect("JSON");
            ok(
                &format!("create crd {crd}"),
                &run_kubectl(plane, &["create", "-f", "-"], Some(&yaml)),
            );
            created_crds.push(crd);
        }
    }
    for crd in &created_crds {
        ok(
            "CRD established",
            &run_kubectl(
                plane,
                &[
                    "wait",
                    "--for=condition=Established",
                    &format!("crd/{crd}"),
                    "--timeout=60s",
                ],
                None,
            ),
        );
    }
    ok(
        "create namespace",
        &run_kubectl(plane, &["create", "namespace", &namespace], None),
    );
    ok(
        "label namespace",
        &run_kubectl(
            plane,
            &[
                "label",
                "namespace",
                &namespace,
                "pod-security.kubernetes.io/enforce=restricted",
                "pod-security.kubernetes.io/warn=restricted",
            ],
            None,
        ),
    );

    let monitoring = [
        "metrics.serviceMonitor.enabled=true",
        "metrics.prometheusRule.enabled=true",
        "metrics.dashboard.enabled=true",
    ];
    // The worker side, granted in this namespace by a RoleBinding.
    let worker_namespaces = format!("worker.namespaces={{{namespace}}}");
    let mut results = Vec::new();
    for (split, set) in [
        ("split=false", monitoring.to_vec()),
        ("split=true", monitoring.to_vec()),
        ("worker.enabled=true", vec![worker_namespaces.as_str()]),
    ] {
        let mut set = set;
        set.push(split);
        let objects = template(helm, RELEASE, &namespace, &set);
        let stream: String = objects
            .iter()
            .map(|o| serde_json::to_string(o).expect("JSON") + "\n")
            .collect();
        let out = run_kubectl(
            plane,
            &[
                "apply",
                "--server-side",
                "--dry-run=server",
                "--field-manager=jobwarden-chart-test",
                "-f",
                "-",
            ],
            Some(&stream),
        );
        results.push((split, objects.len(), out));
    }

    let _ = run_kubectl(
        plane,
        &["delete", "namespace", &namespace, "--wait=false"],
        None,
    );
    for crd in &created_crds {
        let _ = run_kubectl(plane, &["delete", "crd", crd, "--wait=false"], None);
    }

    for (split, count, out) in results {
        ok(&format!("server-side dry run of the chart ({split})"), &out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            stdout
                .lines()
                .filter(|l| l.contains("(server dry run)"))
                .count(),
            count,
            "{split}: every object went through the dry run:\n{stdout}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("Warning:"),
            "{split}: the API server warned (Pod Security, deprecated fields):\n{stderr}"
        );
    }
}
