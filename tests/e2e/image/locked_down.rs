//! The image run as the chart runs it (deploy/'s security context: uid 65532, read-only root,
//! every capability dropped, no new privileges), with no cluster.

use std::process::Command;

use crate::image::engine::{Engine, IMAGE, OUR_REVISION, Running, container_name, text};
use crate::image::pod;
use crate::support::dev_server::{DEV_ARGS, DevServer};

#[test]
fn version_runs_locked_down_with_no_network() {
    let Some(engine) = Engine::shared() else {
        return;
    };
    let name = container_name("version");
    let _container = Running::new(engine, name.clone());
    let out = engine
        .run(&name)
        .args(pod::deployed().security_flags(engine))
        .args(["--network=none", IMAGE, "--version"])
        .output()
        .expect("the engine runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The binary names the commit its image's label names (Engine::shared: ours).
    assert_eq!(
        text(&out.stdout),
        format!(
            "jobwarden {} (revision {OUR_REVISION})\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn serve_dev_answers_healthz_and_a_review_over_https_locked_down() {
    let Some(engine) = Engine::shared() else {
        return;
    };
    let name = container_name("serve-dev");
    let _container = Running::new(engine, name.clone());
    let mut command = engine.run(&name);
    // The host's network: the test reaches the ports the server picks and logs.
    command
        .args(pod::deployed().security_flags(engine))
        .args(["--network=host", IMAGE])
        .args(&DEV_ARGS[..]);
    let server = DevServer::start_with(command);

    assert_eq!(server.get("/healthz"), (200, "ok\n".to_owned()));
    let review = "examples/reviews/create-denied-duplicate-rule-name.json";
    let (status, answer) = server.post(
        "/validate",
        &std::fs::read_to_string(review).expect("the review"),
    );
    assert_eq!(status, 200, "{answer}");
    // The same bytes the built binary's `review` prints for the same request.
    let expected = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .args(["review", review])
        .output()
        .expect("jobwarden review runs");
    assert_eq!(answer, text(&expected.stdout));
    assert!(answer.contains("\"allowed\":false"), "{answer}");
}
