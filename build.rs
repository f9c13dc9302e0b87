//! Embeds the commit jobwarden is built from as `JOBWARDEN_REVISION`: `--version` prints it, the
//! leader writes it on its Lease for `doctor`, and the image tests compare it with the image's
//! `org.opencontainers.image.revision` label (image/build.sh writes both from the same value).
//!
//! The revision is the full commit hash, without a dirty mark: a mark compiled in here would
//! go stale at the first edit, since this script reruns only when HEAD moves, so it would
//! claim a clean tree half the time. `JOBWARDEN_REVISION` in the environment wins (the
//! Dockerfile's build stage has no .git in its context); without either, "unknown".

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=JOBWARDEN_REVISION");
    let given = std::env::var("JOBWARDEN_REVISION")
        .ok()
        .filter(|r| !r.trim().is_empty());
    let revision = given.unwrap_or_else(|| {
        let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
        watch_head(&dir);
        git(&dir, &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_owned())
    });
    println!("cargo:rustc-env=JOBWARDEN_REVISION={}", revision.trim());
}

/// Reruns this script when HEAD moves: a commit, a checkout, a reset. In a worktree `.git` is
/// a file, so the paths come from git itself. Without git, nothing to watch: the script then
/// reruns only when the environment variable changes.
fn watch_head(dir: &Path) {
    let Some(dirs) = git(
        dir,
        &[
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
        ],
    ) else {
        return;
    };
    let mut lines = dirs.lines();
    let (Some(git_dir), Some(common)) = (lines.next(), lines.next()) else {
        return;
    };
    let mut watched = vec![format!("{git_dir}/HEAD"), format!("{common}/packed-refs")];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        let loose = format!("{common}/{}", branch.trim());
        // A packed branch gets its loose file at the next commit: watch where it will appear.
        match Path::new(&loose).parent() {
            Some(parent) if !Path::new(&loose).exists() => {
                watched.push(parent.display().to_string());
            }
            _ => watched.push(loose),
        }
    }
    // Only files that exist: cargo takes a missing one as changed, and would rerun this
    // script, and rebuild the crate, on every build.
    for file in watched.iter().filter(|f| Path::new(f).exists()) {
        println!("cargo:rerun-if-changed={file}");
    }
}

/// `git ARGS` in `dir`: its output when it succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout)
        .ok()
        .filter(|s| !s.trim().is_empty())
}
