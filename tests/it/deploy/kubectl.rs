//! The same checks on kubectl's own rendering, when kubectl is installed.

use std::process::Command;

use serde_json::Value;

use crate::deploy::*;

#[test]
fn kubectl_kustomize_renders_what_the_replay_checks() {
    if !kubectl_available() {
        eprintln!("kubectl not found: deploy/ checked as files only (the replay of kustomize)");
        return;
    }
    let rendered = Renders {
        combined: kubectl_kustomize(COMBINED),
        split: kubectl_kustomize(SPLIT),
        dispatch: kubectl_kustomize(DISPATCH),
        dispatch_secrets: DISPATCH_SECRETS.map(str::to_owned).to_vec(),
        webhooks: kubectl_kustomize(WEBHOOKS),
    };
    check_installs_hold_no_webhook_configuration(&rendered);
    check_mutating_webhook_is_create_only(&rendered);
    check_webhooks_as_documented(&rendered);
    check_namespace_selectors_exclude_kube_system_and_our_namespace(&rendered);
    check_unrewritten_names_agree(&rendered);
    check_service_selects_only_webhook_pods(&rendered);
    check_rbac_is_least_privilege(&rendered);
    check_one_image_and_one_policy(&rendered);
    check_the_lease_has_the_leader_election_priority_level(&rendered);

    let worker = worker::WorkerRenders {
        cluster_wide: kubectl_kustomize(worker::WORKER),
        namespaced: kubectl_kustomize(worker::WORKER_NAMESPACED),
    };
    worker::check_worker_renders(&worker);

    // The replay and kustomize agree on every object, but for the ConfigMap name's hash.
    let replay = replayed();
    let replayed_worker = worker::replayed_worker();
    for (what, ours, theirs) in [
        (COMBINED, &replay.combined, &rendered.combined),
        (SPLIT, &replay.split, &rendered.split),
        (WEBHOOKS, &replay.webhooks, &rendered.webhooks),
        (
            worker::WORKER,
            &replayed_worker.cluster_wide,
            &worker.cluster_wide,
        ),
        (
            worker::WORKER_NAMESPACED,
            &replayed_worker.namespaced,
            &worker.namespaced,
        ),
    ] {
        assert_eq!(
            by_identity(ours, true),
            by_identity(theirs, true),
            "{what}: the replay in tests/it/deploy/kustomize.rs and kubectl kustomize disagree"
        );
    }
}

/// register.sh renders what `kubectl apply -k deploy/webhooks/` would, plus the CA in every
/// webhook's caBundle.
#[test]
fn register_sh_creates_the_webhooks_with_the_ca_in_place() {
    if !kubectl_available() {
        eprintln!("kubectl not found: skipping the register.sh rendering check");
        return;
    }
    let ca = std::env::temp_dir().join(format!(
        "jobwarden-deploy-test-ca-{}.pem",
        std::process::id()
    ));
    let pem = "-----BEGIN CERTIFICATE-----\nnot a certificate, only bytes to carry\n-----END CERTIFICATE-----\n";
    std::fs::write(&ca, pem).expect("write the CA file");
    let out = Command::new("bash")
        .arg(root().join(WEBHOOKS).join("register.sh"))
        .args(["--print", "--ca-file"])
        .arg(&ca)
        .output()
        .expect("register.sh runs");
    let _ = std::fs::remove_file(&ca);
    assert!(
        out.status.success(),
        "register.sh --print: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = yaml_docs(&String::from_utf8_lossy(&out.stdout));
    let plain = kubectl_kustomize(WEBHOOKS);
    assert_eq!(printed.len(), plain.len());
    let want = base64_encode(pem.as_bytes());
    let mut hooks = 0;
    for (mut p, q) in by_identity(&printed, false)
        .into_values()
        .zip(by_identity(&plain, false).into_values())
    {
        for hook in p["webhooks"].as_array_mut().expect("webhooks") {
            let bundle = hook["clientConfig"]
                .as_object_mut()
                .expect("clientConfig")
                .remove("caBundle");
            assert_eq!(bundle, Some(Value::from(want.clone())), "{hook}");
            hooks += 1;
        }
        assert_eq!(p, q, "register.sh must change nothing but caBundle");
    }
    assert_eq!(hooks, 3);
}
