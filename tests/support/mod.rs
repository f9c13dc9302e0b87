//! What the command-line tests share: a fake kube-apiserver serving Jobs, stored Jobs to plant
//! in it, and scratch files.
#![allow(dead_code)]

pub mod fake_apiserver;
pub mod stored;

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
