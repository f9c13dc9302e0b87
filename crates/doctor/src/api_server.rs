//! The API server itself: does it answer, which version is it, and who does it take the caller
//! for. Pure: the answers are parameters.

use crate::catalogue::{API_SERVER_REACHABLE, API_SERVER_VERSION, CALLER};
use crate::check::Check;

/// `GET /version`, as far as doctor reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// `v1.36.2`.
    pub git_version: String,
    pub major: String,
    /// `36`, or `36+` on some distributions.
    pub minor: String,
}

impl Version {
    /// `(1, 36)`, when the server says numbers.
    fn major_minor(&self) -> Option<(u32, u32)> {
        let digits = |s: &str| -> Option<u32> {
            s.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .ok()
        };
        Some((digits(&self.major)?, digits(&self.minor)?))
    }
}

/// A SelfSubjectReview's answer: who the API server takes the caller for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub username: String,
    pub groups: Vec<String>,
}

/// The oldest minor version jobwarden supports (docs/operations.md, "Requirements"), and the
/// one its verdicts were recorded from.
pub const OLDEST_SUPPORTED: (u32, u32) = (1, 32);
pub const RECORDED_FROM: (u32, u32) = (1, 36);

/// Whether the API server answered at all. `server` is the URL the client called.
pub fn reachable(server: &str, version: &Result<Version, String>) -> Check {
    match version {
        Ok(v) => API_SERVER_REACHABLE.ok(format!("{server} answers ({})", v.git_version)),
        Err(e) => API_SERVER_REACHABLE.error(
            format!("{server} does not answer: {e}"),
            "check the kubeconfig's server address and credentials (`kubectl cluster-info` uses the same), and that this machine can reach it",
        ),
    }
}

/// The version against what jobwarden supports and was recorded from.
pub fn version(version: &Version) -> Check {
    let supported = format!("v{}.{}", OLDEST_SUPPORTED.0, OLDEST_SUPPORTED.1);
    match version.major_minor() {
        None => API_SERVER_VERSION.cannot_tell(
            format!(
                "{}: cannot tell the minor version from {:?}.{:?}",
                version.git_version, version.major, version.minor
            ),
            format!("jobwarden supports Kubernetes {supported} and later; the feature checks below say what this server serves"),
        ),
        Some(v) if v < OLDEST_SUPPORTED => API_SERVER_VERSION.error(
            format!(
                "Kubernetes {} is older than {supported}, the oldest jobwarden supports",
                version.git_version
            ),
            format!("upgrade the cluster to {supported} or later"),
        ),
        Some(v) if v > RECORDED_FROM => API_SERVER_VERSION.ok(format!(
            "Kubernetes {}, newer than v{}.{} (jobwarden's verdicts were recorded from v{}.{})",
            version.git_version, RECORDED_FROM.0, RECORDED_FROM.1, RECORDED_FROM.0, RECORDED_FROM.1
        )),
        Some(_) => API_SERVER_VERSION.ok(format!("Kubernetes {}", version.git_version)),
    }
}

/// Who the caller is, for reading every other check's permissions in the right light.
pub fn caller(caller: &Result<Caller, String>) -> Check {
    match caller {
        Ok(c) if c.groups.is_empty() => CALLER.ok(c.username.clone()),
        Ok(c) => CALLER.ok(format!("{} (groups {})", c.username, c.groups.join(", "))),
        Err(e) => CALLER.cannot_tell(
            format!("the API server would not say who the caller is: {e}"),
            "SelfSubjectReview is GA from v1.28; the checks below still run with the caller's credentials",
        ),
    }
}
