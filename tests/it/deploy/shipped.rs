//! The install `jobwarden doctor --pre` checks when it is given none: crates/doctor's copies of
//! `kubectl kustomize deploy/` and `deploy/webhooks/`, built into the binary, held equal to
//! what kubectl renders from this checkout, object for object and in order. After a change to
//! deploy/, `JOBWARDEN_BLESS=1 cargo test --test it deploy::shipped` writes them again (review the
//! diff). kubectl is the v1.36 one beside the envtest binaries, else the PATH's; without one,
//! one line says so and the copies are compared with the replay of kustomize instead (all but
//! the ConfigMap name's hash, which only kustomize computes).

use std::path::PathBuf;
use std::process::Command;

use jobwarden_doctor::pre::shipped::RENDERED;

use crate::deploy::*;

/// Each copy: the folder it renders and its file in crates/doctor.
const COPIES: [(&str, &str); 2] = [
    (COMBINED, "crates/doctor/src/pre/shipped/deploy.yaml"),
    (WEBHOOKS, "crates/doctor/src/pre/shipped/webhooks.yaml"),
];

/// The lines a copy starts with, before kubectl's output.
fn header(dir: &str) -> String {
    format!(
        "# `kubectl kustomize {dir}/`, built into `jobwarden doctor --pre` as the install it checks when\n\
         # given no --install. Not edited by hand: tests/it/deploy/shipped.rs holds it equal to what kubectl\n\
         # renders, and `JOBWARDEN_BLESS=1 cargo test --test it deploy::shipped` writes it again.\n"
    )
}

/// `kubectl kustomize` of `dir` as text, or `None` when no kubectl runs.
fn kustomize_text(kubectl: &PathBuf, dir: &str) -> Option<String> {
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(root().join(dir))
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{} kustomize {dir}: {}",
        kubectl.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_install_doctor_checks_by_default_is_deploy_as_kubectl_renders_it() {
    assert_eq!(
        RENDERED.map(|(dir, _)| dir),
        COPIES.map(|(dir, _)| dir),
        "the binary embeds the copies this test holds"
    );
    let kubectl = jobwarden_envtest::kubectl_program();
    let bless = std::env::var_os("JOBWARDEN_BLESS").is_some();
    for ((dir, file), (_, embedded)) in COPIES.into_iter().zip(RENDERED) {
        let on_disk = std::fs::read_to_string(root().join(file)).expect("the copy");
        assert_eq!(on_disk, embedded, "{file} as the binary embeds it");
        assert!(embedded.starts_with(&header(dir)), "{file}: its header");
        let copy = yaml_docs(embedded);
        let Some(rendered) = kustomize_text(&kubectl, dir) else {
            eprintln!(
                "skipped: no kubectl ({} does not run): {file} compared with the replay of kustomize",
                kubectl.display()
            );
            assert_eq!(
                by_identity(&copy, true),
                by_identity(&kustomize::build(&root().join(dir)), true),
                "{file} and deploy/ disagree: `JOBWARDEN_BLESS=1 cargo test --test it deploy::shipped` with kubectl writes it again"
            );
            continue;
        };
        if bless {
            std::fs::write(root().join(file), format!("{}{rendered}", header(dir)))
                .expect("the copy is written");
            continue;
        }
        assert_eq!(
            copy,
            yaml_docs(&rendered),
            "{file} is not `kubectl kustomize {dir}/`: `JOBWARDEN_BLESS=1 cargo test --test it deploy::shipped` writes it again"
        );
    }
}
