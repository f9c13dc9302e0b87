//! The policy file followed by a running `serve` (issue 49), on a real kube-apiserver: the
//! built binary under the ServiceAccount and RBAC `deploy/` installs, its `--config` a file
//! laid out as the kubelet mounts a ConfigMap and changed as the kubelet changes it (the new
//! text in a new directory, a `..data_tmp` symlink renamed over `..data`). A valid new policy
//! changes the next review's verdict; one with an unknown field is refused with a log line
//! naming the field, `jobwarden_policy_reloads_total{result="refused"}` one up, a
//! `PolicyRefused` Warning on the replica's Pod, and reviews still answered under the running
//! policy; the same process throughout.
//!
//! Runs on the test binary's own control plane (`jobwarden-envtest`); skipped with one line
//! when the binaries are absent, and with `JOBWARDEN_E2E_KUBECONFIG`.

use crate::support;

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::installed::InstalledNamespace;
use support::served::Served;

/// A ConfigMap volume as the kubelet lays it out, holding `policy.yaml`.
struct Mounted {
    dir: PathBuf,
    version: u32,
}

impl Mounted {
    fn new(dir: &Path, text: &str) -> Mounted {
        std::fs::create_dir_all(dir).expect("the volume's folder");
        let mut mounted = Mounted {
            dir: dir.to_owned(),
            version: 0,
        };
        mounted.swap(text);
        std::os::unix::fs::symlink("..data/policy.yaml", mounted.file()).expect("the file's link");
        mounted
    }

    fn file(&self) -> PathBuf {
        self.dir.join("policy.yaml")
    }

    /// The kubelet's atomic update: a new directory, then one rename of a symlink.
    fn swap(&mut self, text: &str) {
        self.version += 1;
        let version = format!("..2026_11_28_20_00_{:02}.{}", self.version, self.version);
        std::fs::create_dir(self.dir.join(&version)).expect("the new version's folder");
        std::fs::write(self.dir.join(&version).join("policy.yaml"), text).expect("the new text");
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &tmp).expect("..data_tmp");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("..data swapped");
    }
}

/// A create of a valid Job (examples/reviews/create-allowed.json) whose `spec.managedBy` is
/// `managed_by`: the policy's allowedManagedBy alone decides it.
fn create_review(managed_by: &str) -> String {
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/reviews/create-allowed.json");
    let mut review: Value =
        serde_json::from_str(&std::fs::read_to_string(example).expect("the example review"))
            .expect("JSON");
    review["request"]["object"]["spec"]["managedBy"] = json!(managed_by);
    review.to_string()
}

/// Whether `serve` allows the review, from its whole HTTP response; a denial must be the
/// policy's (403), not the rules'.
fn allowed(served: &Served, review: &str) -> Result<bool, String> {
    let response = jobwarden_envtest::https_post(served.port, "/validate", &served.ca_pem, review)
        .ok_or("nothing answered")?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .ok_or_else(|| format!("no body: {response}"))?;
    let answer: Value = serde_json::from_str(body).map_err(|e| format!("{e}: {body}"))?;
    match answer["response"]["allowed"].as_bool() {
        Some(true) => Ok(true),
        Some(false) if answer["response"]["status"]["code"] == 403 => Ok(false),
        _ => Err(format!("not the policy's verdict: {answer}")),
    }
}

fn counter(metrics: &str, result: &str) -> Option<u64> {
    let line = format!("jobwarden_policy_reloads_total{{result=\"{result}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&line)?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swapped_policy_is_applied_and_an_invalid_one_refused_by_the_running_process() {
    let Some(InstalledNamespace {
        plane,
        admin,
        ns,
        identity,
        dir,
    }) = InstalledNamespace::new("jobwarden-reload").await
    else {
        return;
    };
    let mut mounted = Mounted::new(
        &dir.join("policy"),
        "allowedManagedBy: [example.com/first]\n",
    );
    let file = mounted.file().display().to_string();
    let pod = "jobwarden-reload-e2e";
    let served = tokio::task::block_in_place(|| {
        Served::start_with(
            &dir,
            &identity.kubeconfig(&ns),
            &["--config", &file, "--no-controller"],
            &[
                ("JOBWARDEN_POD_NAME", pod),
                ("JOBWARDEN_POD_NAMESPACE", ns.as_str()),
            ],
        )
    });
    let reader = plane.metrics_reader_token(&ns, "prometheus").await;
    let metrics = || {
        tokio::task::block_in_place(|| {
            support::eventually_blocking("the metrics", || {
                let answer = served.get("/metrics", Some(&reader));
                answer
                    .starts_with("HTTP/1.1 200")
                    .then_some(answer.clone())
                    .ok_or(answer)
            })
        })
    };
    let second = create_review("example.com/second");
    let review = |r: &str| {
        tokio::task::block_in_place(|| allowed(&served, r)).unwrap_or_else(|e| panic!("{e}"))
    };
    assert!(
        !review(&second),
        "only example.com/first is allowed at first"
    );
    let before = metrics();
    assert_eq!(counter(&before, "applied"), Some(0), "{before}");
    assert_eq!(counter(&before, "refused"), Some(0), "{before}");

    // A valid policy: the next reviews are answered under it.
    mounted.swap("allowedManagedBy: [example.com/second]\n");
    tokio::task::block_in_place(|| {
        support::eventually_blocking(
            "the new policy to allow example.com/second",
            || match allowed(&served, &second) {
                Ok(true) => Ok(()),
                other => Err(format!("{other:?}")),
            },
        )
    });
    assert_eq!(counter(&metrics(), "applied"), Some(1));

    // An unknown field: refused whole, said in serve's words, the running policy kept.
    mounted.swap("allowedManagedBy: [example.com/third]\nresumee: {}\n");
    let refusal = tokio::task::block_in_place(|| {
        support::eventually_blocking("the refusal's log line", || {
            served
                .log_lines()
                .into_iter()
                .find(|l| l["message"] == "new policy refused; the running policy stays")
                .ok_or_else(|| "not yet".to_owned())
        })
    });
    let error = refusal["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("unknown field `resumee`") && error.contains("is not valid"),
        "{refusal}"
    );
    assert_eq!(refusal["level"], "ERROR", "{refusal}");
    let after = metrics();
    assert_eq!(counter(&after, "refused"), Some(1), "{after}");
    assert_eq!(counter(&after, "applied"), Some(1), "{after}");
    assert!(
        review(&second),
        "the running policy still allows example.com/second"
    );
    assert!(
        !review(&create_review("example.com/third")),
        "nothing of the refused policy applies"
    );

    // The Warning on the replica's Pod says why, in the same words.
    let events: Api<Event> = Api::namespaced(admin, &ns);
    let handle = tokio::runtime::Handle::current();
    let refused = tokio::task::block_in_place(|| {
        support::eventually_blocking("the PolicyRefused Event", || {
            let on_pod = ListParams::default().fields(&format!("involvedObject.name={pod}"));
            let listed = handle
                .block_on(events.list(&on_pod))
                .map_err(|e| e.to_string())?;
            listed
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("PolicyRefused"))
                .ok_or_else(|| "not yet".to_owned())
        })
    });
    assert_eq!(refused.type_.as_deref(), Some("Warning"));
    assert!(
        refused
            .message
            .as_deref()
            .is_some_and(|m| m.contains("unknown field `resumee`")),
        "{refused:?}"
    );
    // The same process throughout: it started serving once, and serves still.
    let starts = served
        .log_lines()
        .iter()
        .filter(|l| l["message"] == "jobwarden webhook serving")
        .count();
    assert_eq!(starts, 1, "one process, started once");
    assert!(served.get("/readyz", None).starts_with("HTTP/1.1 200"));
    identity.assert_nothing_refused();
}
