//! `jobwarden workers` as a command, without a cluster: no API server is exit 2 with one clear
//! line on stderr and nothing on stdout, as text or JSON; a `--worker-kubeconfig` that is not
//! NAME=FILE is refused before any request.

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
fn no_api_server_is_exit_2_with_one_clear_line() {
    let dir = support::scratch_dir("workers-nowhere");
    let kubeconfig = nowhere(&dir);
    for output in ["text", "json"] {
        let out = jobwarden(
            &["workers", "-o", output, "--kubeconfig", &kubeconfig],
            None,
        );
        assert_eq!(out.status.code(), Some(2), "{output}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{output}: {}", stdout(&out));
        let said = stderr(&out);
        assert!(
            said.starts_with("jobwarden workers: the API server does not answer: ")
                && said.contains("Connection refused"),
            "{output}: {said}"
        );
        assert_eq!(said.lines().count(), 1, "{output}: {said}");
    }
}

#[test]
fn a_worker_kubeconfig_that_is_not_name_equals_file_is_refused_before_any_request() {
    let dir = support::scratch_dir("workers-input");
    let kubeconfig = nowhere(&dir);
    let out = jobwarden(
        &[
            "workers",
            "--kubeconfig",
            &kubeconfig,
            "--worker-kubeconfig",
            "east",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("expected NAME=FILE"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
}
