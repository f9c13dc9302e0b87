//! What the command-line tests share: a fake kube-apiserver serving Jobs, stored Jobs to plant
//! in it, a namespace with the installed identity and `serve` run under it, `serve --dev` and its requests, webhook
//! configurations registered by URL, and scratch files.
#![allow(dead_code)]

pub mod dev_server;
pub mod fake_apiserver;
pub mod installed;
pub mod run;
pub mod served;
pub mod stored;
pub mod svg;
pub mod webhook_registration;

use std::path::{Path, PathBuf};

/// A fresh directory for one test's files (kubeconfig, policy) under the system's temp dir,
/// removed when dropped.
pub struct ScratchDir(PathBuf);

pub fn scratch_dir(test: &str) -> ScratchDir {
    let dir = std::env::temp_dir().join(format!("jobwarden-test-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    ScratchDir(dir)
}

impl std::ops::Deref for ScratchDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Asks `look` every 200 ms until it answers `Ok`, for at most 90 s; then fails with `what` and
/// the last answer. For tests that run blocking calls.
pub fn eventually_blocking<T>(what: &str, mut look: impl FnMut() -> Result<T, String>) -> T {
    let started = std::time::Instant::now();
    loop {
        match look() {
            Ok(found) => return found,
            Err(last) => assert!(
                started.elapsed() < std::time::Duration::from_secs(90),
                "timed out waiting for {what}: {last}"
            ),
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The scale runs' size: `JOBWARDEN_E2E_SCALE=full` runs them as their issues stated them (a
/// burst of 1,000 Jobs, Indexed Jobs of 1,000 and 5,000 pods: several minutes each, as the
/// benchmarks in bench/ run them); otherwise `small` of it, enough for every assertion to
/// mean what it says (two workers share a burst, a Lease renews under a Job's load) in a
/// suite that stays fast.
pub fn scale<T>(full: T, small: T) -> T {
    match std::env::var("JOBWARDEN_E2E_SCALE").as_deref() {
        Ok("full") => full,
        _ => small,
    }
}
