//! The kube client a jobwarden component talks to the API server with: it names itself in
//! `User-Agent` as every kube component does (`jobwarden/0.1.0 (linux/amd64) <component>`, so
//! its requests can be told apart in the audit log and the API server's metrics), and, when
//! asked, keeps to a client-side request rate like kube-controller-manager's `--kube-api-qps`
//! and `--kube-api-burst`.

use std::time::Duration;

use http::HeaderValue;
use http::header::USER_AGENT;
use kube::Client;
use kube::client::ClientBuilder;

/// A client-side request limit: at most `burst` requests at once, and `qps` per second on
/// average.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub qps: f64,
    pub burst: u32,
}

/// Why there is no client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("the component name is not a valid header value")]
    Component(#[source] http::header::InvalidHeaderValue),
    #[error("building the kube client")]
    Build(#[source] kube::Error),
}

/// `jobwarden/<version> (<os>/<arch>) <component>`, with Go's names for the platform, as
/// client-go's default User-Agent has them.
pub fn user_agent(component: &str) -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!(
        "jobwarden/{} ({}/{arch}) {component}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS
    )
}

/// A client for `config` that names `component` and keeps to `limit` (none when `None`).
pub fn client(
    mut config: kube::Config,
    component: &str,
    limit: Option<RateLimit>,
) -> Result<Client, ClientError> {
    let agent = HeaderValue::from_str(&user_agent(component)).map_err(ClientError::Component)?;
    config.headers.push((USER_AGENT, agent));
    let builder = ClientBuilder::try_from(config).map_err(ClientError::Build)?;
    let Some(limit) = limit.filter(|l| l.qps > 0.0 && l.burst > 0) else {
        return Ok(builder.build());
    };
    // tower's limit lets `burst` requests through per window of `burst / qps` seconds: the
    // same average rate as a token bucket, and the same largest burst.
    let window = Duration::from_secs_f64(f64::from(limit.burst) / limit.qps);
    let limited = builder.with_layer(&tower::limit::RateLimitLayer::new(
        u64::from(limit.burst),
        window,
    ));
    Ok(limited.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_agent_names_version_platform_and_component() {
        let ua = user_agent("jobwarden.io/job-controller");
        assert!(
            ua.starts_with(&format!("jobwarden/{} (", env!("CARGO_PKG_VERSION"))),
            "{ua}"
        );
        assert!(ua.ends_with(") jobwarden.io/job-controller"), "{ua}");
        assert!(!ua.contains("x86_64"), "Go's arch names: {ua}");
    }
}
