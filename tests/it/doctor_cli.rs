//! `jobwarden doctor` as a command, without a cluster: no API server is exit 2 (with the one
//! check that says so, as text or JSON), and unreadable input is refused before any request.

use crate::support;
use crate::support::run;

use run::{jobwarden, stderr, stdout};

/// A kubeconfig for an API server on a port nobody listens on.
fn nowhere(dir: &std::path::Path) -> String {
    let path = dir.join("nowhere.kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\n\
         clusters: [{name: nowhere, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n\
         users: [{name: nobody, user: {token: t}}]\n\
         contexts: [{name: nowhere, context: {cluster: nowhere, user: nobody}}]\n\
         current-context: nowhere\n",
    )
    .expect("a kubeconfig");
    path.display().to_string()
}

#[test]
fn no_api_server_is_exit_2_with_the_check_that_says_so() {
    let dir = support::scratch_dir("doctor-nowhere");
    let kubeconfig = nowhere(&dir);
    let text = jobwarden(&["doctor", "--kubeconfig", &kubeconfig], None);
    assert_eq!(text.status.code(), Some(2), "{}", stderr(&text));
    assert!(
        stdout(&text).starts_with(
            "API server\n----------\n× API server reachable: https://127.0.0.1:1 does not answer"
        ),
        "{}",
        stdout(&text)
    );
    assert!(stdout(&text).contains("    see docs/operations.md#api-server-reachable\n"));
    assert!(
        stdout(&text).ends_with("× cannot reach the API server\n"),
        "{}",
        stdout(&text)
    );

    let json = jobwarden(
        &["doctor", "--pre", "-o", "json", "--kubeconfig", &kubeconfig],
        None,
    );
    assert_eq!(json.status.code(), Some(2));
    let lines: Vec<serde_json::Value> = stdout(&json)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["name"], "API server reachable");
    assert_eq!(lines[0]["status"], "error");
    assert_eq!(lines[0]["doc"], "docs/operations.md#api-server-reachable");
}

#[test]
fn unreadable_input_is_refused_before_any_request() {
    let dir = support::scratch_dir("doctor-input");
    let kubeconfig = nowhere(&dir);
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "a: [").expect("written");
    let bad = bad.display().to_string();
    for (args, says) in [
        (
            vec!["--pre", "--install", bad.as_str()],
            "not the YAML or JSON of rendered manifests",
        ),
        (vec!["--install", "-"], "--install is for --pre"),
        (vec!["--config", bad.as_str()], "is not valid"),
        (vec!["--wait", "soon"], "invalid value 'soon'"),
    ] {
        let out = jobwarden(
            &[&["doctor", "--kubeconfig", &kubeconfig], args.as_slice()].concat(),
            Some(b"{}"),
        );
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}: {}", stdout(&out));
    }
}
