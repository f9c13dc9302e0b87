//! `kubectl jobwarden`: the binary on the PATH as `kubectl-jobwarden` is a kubectl plugin, and
//! its usage says so. The plugin is made the way the README shows (a symlink); kubectl itself
//! runs it where kubectl is installed.

use std::path::PathBuf;
use std::process::{Command, Output};

/// A folder holding `kubectl-jobwarden`, a symlink to the built binary, removed on drop.
struct PluginDir(PathBuf);

impl PluginDir {
    /// `test` names the folder: the tests of this binary run at once, each with its own.
    fn new(test: &str) -> PluginDir {
        let dir = std::env::temp_dir().join(format!(
            "jobwarden-kubectl-plugin-{}-{test}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let link = dir.join("kubectl-jobwarden");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_jobwarden"), &link).expect("symlink");
        PluginDir(dir)
    }

    /// PATH with this folder first.
    fn path(&self) -> std::ffi::OsString {
        let mut paths = vec![self.0.clone()];
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        std::env::join_paths(paths).expect("a PATH")
    }
}

impl Drop for PluginDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn called_as_kubectl_jobwarden_its_usage_names_kubectl() {
    let plugin = PluginDir::new("usage");
    let help = Command::new(plugin.0.join("kubectl-jobwarden"))
        .arg("--help")
        .output()
        .expect("the plugin runs");
    assert!(help.status.success(), "{}", text(&help));
    assert!(
        text(&help).contains("Usage: kubectl jobwarden <COMMAND>"),
        "{}",
        text(&help)
    );
    let wrong = Command::new(plugin.0.join("kubectl-jobwarden"))
        .args(["check", "--no-such-flag"])
        .output()
        .expect("the plugin runs");
    assert_eq!(wrong.status.code(), Some(2));
    assert!(
        text(&wrong).contains("Usage: kubectl jobwarden check"),
        "{}",
        text(&wrong)
    );
    // Called by its own name, it is jobwarden; both say how to use it as a plugin.
    let own = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .arg("--help")
        .output()
        .expect("jobwarden runs");
    assert!(text(&own).contains("Usage: jobwarden <COMMAND>"));
    for t in [text(&help), text(&own)] {
        assert!(t.contains("As a kubectl plugin: put the binary on the PATH as kubectl-jobwarden"));
    }
}

#[test]
fn kubectl_runs_it_as_its_plugin() {
    let kubectl_runs = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !kubectl_runs {
        eprintln!("skipped: kubectl not found; the plugin was checked by its own name only");
        return;
    }
    let plugin = PluginDir::new("through-kubectl");
    let kubectl = |args: &[&str]| {
        Command::new("kubectl")
            .args(args)
            .env("PATH", plugin.path())
            .env_remove("KUBECONFIG")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("kubectl runs")
    };
    let listed = kubectl(&["plugin", "list", "--name-only"]);
    assert!(
        text(&listed).contains("kubectl-jobwarden"),
        "{}",
        text(&listed)
    );

    let help = kubectl(&["jobwarden", "--help"]);
    assert!(help.status.success(), "{}", text(&help));
    assert!(
        text(&help).contains("Usage: kubectl jobwarden <COMMAND>"),
        "{}",
        text(&help)
    );
    for sub in ["check", "audit", "simulate", "explain", "doctor", "workers"] {
        let h = kubectl(&["jobwarden", sub, "--help"]);
        assert!(h.status.success(), "{}", text(&h));
        assert!(
            text(&h).contains(&format!("Usage: kubectl jobwarden {sub}")),
            "{}",
            text(&h)
        );
    }

    // The exit status comes through kubectl: 0 valid, 1 invalid.
    let valid = kubectl(&["jobwarden", "check", "examples/success-policy-leader.yaml"]);
    assert_eq!(valid.status.code(), Some(0), "{}", text(&valid));
    let review = kubectl(&[
        "jobwarden",
        "review",
        "examples/reviews/create-denied-duplicate-rule-name.json",
    ]);
    assert_eq!(review.status.code(), Some(1), "{}", text(&review));
    assert!(
        text(&review).contains("\"allowed\":false"),
        "{}",
        text(&review)
    );
    // And 2 when doctor finds no API server: a kubeconfig naming a port nobody listens on.
    let kubeconfig = plugin.0.join("nowhere.kubeconfig");
    std::fs::write(&kubeconfig, NOWHERE).expect("a kubeconfig");
    let doctor = kubectl(&[
        "jobwarden",
        "doctor",
        "--kubeconfig",
        &kubeconfig.display().to_string(),
    ]);
    assert_eq!(doctor.status.code(), Some(2), "{}", text(&doctor));
    assert!(
        text(&doctor).contains("× API server reachable: https://127.0.0.1:1 does not answer"),
        "{}",
        text(&doctor)
    );
}

/// A kubeconfig for an API server on a port nobody listens on.
const NOWHERE: &str = "\
apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]
users: [{name: nobody, user: {token: t}}]
contexts: [{name: nowhere, context: {cluster: nowhere, user: nobody}}]
current-context: nowhere
";
