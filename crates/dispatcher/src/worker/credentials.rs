//! A worker's kubeconfig, judged before it is used. Credentials are data, not code: a kubeconfig
//! that would run a program (an exec plugin, an auth provider), read a file of jobwarden's
//! container (a token file, a CA or client certificate or key file), send a password, or trust
//! any server (`insecure-skip-tls-verify`) is refused, as MultiKueue refuses them, and its
//! worker is never used. What is accepted is reduced to its current context, so that the client
//! is built from exactly what was judged. Pure.

use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

/// Why a kubeconfig is refused; `label()` is the metric's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// There is no kubeconfig to read (no Secret, no key, no file).
    Missing,
    Unreadable,
    NoContext,
    NoServer,
    NotHttps,
    ExecPlugin,
    AuthProvider,
    TokenFile,
    CertificateAuthorityFile,
    ClientCertificateFile,
    ClientKeyFile,
    BasicAuth,
    InsecureSkipTlsVerify,
    NoCredentials,
}

impl RefusalReason {
    pub const ALL: [RefusalReason; 14] = [
        RefusalReason::Missing,
        RefusalReason::Unreadable,
        RefusalReason::NoContext,
        RefusalReason::NoServer,
        RefusalReason::NotHttps,
        RefusalReason::ExecPlugin,
        RefusalReason::AuthProvider,
        RefusalReason::TokenFile,
        RefusalReason::CertificateAuthorityFile,
        RefusalReason::ClientCertificateFile,
        RefusalReason::ClientKeyFile,
        RefusalReason::BasicAuth,
        RefusalReason::InsecureSkipTlsVerify,
        RefusalReason::NoCredentials,
    ];

    pub fn label(self) -> &'static str {
        match self {
            RefusalReason::Missing => "missing",
            RefusalReason::Unreadable => "unreadable",
            RefusalReason::NoContext => "no_context",
            RefusalReason::NoServer => "no_server",
            RefusalReason::NotHttps => "not_https",
            RefusalReason::ExecPlugin => "exec_plugin",
            RefusalReason::AuthProvider => "auth_provider",
            RefusalReason::TokenFile => "token_file",
            RefusalReason::CertificateAuthorityFile => "certificate_authority_file",
            RefusalReason::ClientCertificateFile => "client_certificate_file",
            RefusalReason::ClientKeyFile => "client_key_file",
            RefusalReason::BasicAuth => "basic_auth",
            RefusalReason::InsecureSkipTlsVerify => "insecure_skip_tls_verify",
            RefusalReason::NoCredentials => "no_credentials",
        }
    }
}

/// A refused kubeconfig: the reason, and a sentence for the log, the Event and `doctor`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub reason: RefusalReason,
    pub message: String,
}

fn refuse(reason: RefusalReason, message: impl Into<String>) -> Refusal {
    Refusal {
        reason,
        message: message.into(),
    }
}

/// The kubeconfig in `text`, reduced to its current context, or why it may not be used.
pub fn check(text: &str) -> Result<Kubeconfig, Refusal> {
    let config = Kubeconfig::from_yaml(text)
        .map_err(|e| refuse(RefusalReason::Unreadable, format!("not a kubeconfig: {e}")))?;
    let (context_name, context) = current_context(&config)?;
    let cluster = checked_cluster(&config, &context)?;
    let user_name = context.user.clone().unwrap_or_default();
    let user = checked_user(&config, &user_name)?;
    Ok(reduced(context_name, context, cluster, user_name, user))
}

/// The context the kubeconfig uses: its current-context, or its only context.
fn current_context(config: &Kubeconfig) -> Result<(String, Context), Refusal> {
    let context_name = config
        .current_context
        .clone()
        .or_else(|| match config.contexts.as_slice() {
            [only] => Some(only.name.clone()),
            _ => None,
        })
        .ok_or_else(|| {
            refuse(
                RefusalReason::NoContext,
                "it names no current-context (and has more or fewer than one context)",
            )
        })?;
    let context = config
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| {
            refuse(
                RefusalReason::NoContext,
                format!("its current-context {context_name:?} is not among its contexts"),
            )
        })?;
    Ok((context_name, context))
}

/// The context's cluster: an https:// server, verified with a CA given inline.
fn checked_cluster(config: &Kubeconfig, context: &Context) -> Result<Cluster, Refusal> {
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| {
            refuse(
                RefusalReason::NoServer,
                format!(
                    "its context names the cluster {:?}, which it does not hold",
                    context.cluster
                ),
            )
        })?;
    let server = cluster.server.as_deref().unwrap_or("");
    if server.is_empty() {
        return Err(refuse(
            RefusalReason::NoServer,
            "its cluster names no server",
        ));
    }
    if !server.starts_with("https://") {
        return Err(refuse(
            RefusalReason::NotHttps,
            format!("its server {server:?} is not https://"),
        ));
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        return Err(refuse(
            RefusalReason::InsecureSkipTlsVerify,
            "it sets insecure-skip-tls-verify: the worker's server would not be verified",
        ));
    }
    if cluster.certificate_authority.is_some() {
        return Err(refuse(
            RefusalReason::CertificateAuthorityFile,
            "it names a certificate-authority file; give certificate-authority-data instead",
        ));
    }
    Ok(cluster)
}

/// The context's user: credentials given inline, none that would run a program or read a
/// file of jobwarden's container.
fn checked_user(config: &Kubeconfig, user_name: &str) -> Result<AuthInfo, Refusal> {
    let user = config
        .auth_infos
        .iter()
        .find(|u| u.name == user_name)
        .and_then(|u| u.auth_info.clone())
        .ok_or_else(|| {
            refuse(
                RefusalReason::NoCredentials,
                format!("its context names the user {user_name:?}, which it does not hold"),
            )
        })?;
    let checks = [
        (
            user.exec.is_some(),
            RefusalReason::ExecPlugin,
            "it runs an exec credential plugin",
        ),
        (
            user.auth_provider.is_some(),
            RefusalReason::AuthProvider,
            "it uses an auth provider",
        ),
        (
            user.token_file.is_some(),
            RefusalReason::TokenFile,
            "it names a token file; give the token inline",
        ),
        (
            user.client_certificate.is_some(),
            RefusalReason::ClientCertificateFile,
            "it names a client-certificate file; give client-certificate-data instead",
        ),
        (
            user.client_key.is_some(),
            RefusalReason::ClientKeyFile,
            "it names a client-key file; give client-key-data instead",
        ),
        (
            user.username.is_some() || user.password.is_some(),
            RefusalReason::BasicAuth,
            "it uses basic authentication (username and password)",
        ),
    ];
    if let Some((_, reason, message)) = checks.into_iter().find(|(bad, _, _)| *bad) {
        return Err(refuse(reason, message));
    }
    let certificate = user.client_certificate_data.is_some() && user.client_key_data.is_some();
    if user.token.is_none() && !certificate {
        return Err(refuse(
            RefusalReason::NoCredentials,
            "it holds no token and no client certificate with its key",
        ));
    }
    Ok(user)
}

/// The kubeconfig reduced to the context judged: kube is handed exactly what was checked.
fn reduced(
    context_name: String,
    context: Context,
    cluster: Cluster,
    user_name: String,
    user: AuthInfo,
) -> Kubeconfig {
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: context.cluster.clone(),
            cluster: Some(cluster),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: user_name,
            auth_info: Some(user),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: context_name.clone(),
            context: Some(context),
            other: Default::default(),
        }],
        current_context: Some(context_name),
        ..Kubeconfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubeconfig as `kubectl config view --raw --minify` prints one, with `user` and
    /// `cluster` as given.
    fn kubeconfig(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1
kind: Config
current-context: east
contexts:
- name: east
  context: {{cluster: east, user: dispatcher, namespace: default}}
- name: other
  context: {{cluster: other, user: other}}
clusters:
- name: east
  cluster: {cluster}
- name: other
  cluster: {{server: 'https://other:6443', insecure-skip-tls-verify: true}}
users:
- name: dispatcher
  user: {user}
- name: other
  user: {{exec: {{command: aws, apiVersion: client.authentication.k8s.io/v1}}}}
"
        )
    }

    const CLUSTER: &str = "{server: 'https://east.example:6443', certificate-authority-data: Q0E=}";
    const TOKEN: &str = "{token: abc}";

    #[test]
    fn inline_credentials_are_accepted_reduced_to_the_current_context() {
        for user in [
            TOKEN,
            "{client-certificate-data: Q0VSVA==, client-key-data: S0VZ}",
        ] {
            let checked = check(&kubeconfig(CLUSTER, user)).expect("accepted");
            assert_eq!(checked.contexts.len(), 1, "{user}");
            assert_eq!(checked.clusters.len(), 1);
            assert_eq!(checked.auth_infos.len(), 1);
            assert_eq!(checked.current_context.as_deref(), Some("east"));
        }
    }

    #[test]
    fn what_would_run_code_read_files_or_trust_anyone_is_refused() {
        let cases: &[(&str, &str, RefusalReason)] = &[
            (
                CLUSTER,
                "{exec: {command: gke-gcloud-auth-plugin, apiVersion: client.authentication.k8s.io/v1}}",
                RefusalReason::ExecPlugin,
            ),
            (
                CLUSTER,
                "{auth-provider: {name: oidc, config: {}}}",
                RefusalReason::AuthProvider,
            ),
            (
                CLUSTER,
                "{tokenFile: /var/run/token}",
                RefusalReason::TokenFile,
            ),
            (
                CLUSTER,
                "{client-certificate: /c.pem, client-key-data: S0VZ}",
                RefusalReason::ClientCertificateFile,
            ),
            (
                CLUSTER,
                "{client-certificate-data: Q0VSVA==, client-key: /k.pem}",
                RefusalReason::ClientKeyFile,
            ),
            (
                CLUSTER,
                "{username: admin, password: secret}",
                RefusalReason::BasicAuth,
            ),
            (CLUSTER, "{}", RefusalReason::NoCredentials),
            (
                CLUSTER,
                "{client-certificate-data: Q0VSVA==}",
                RefusalReason::NoCredentials,
            ),
            (
                "{server: 'https://east:6443', certificate-authority: /ca.pem}",
                TOKEN,
                RefusalReason::CertificateAuthorityFile,
            ),
            (
                "{server: 'https://east:6443', insecure-skip-tls-verify: true}",
                TOKEN,
                RefusalReason::InsecureSkipTlsVerify,
            ),
            (
                "{server: 'http://east:8080'}",
                TOKEN,
                RefusalReason::NotHttps,
            ),
            (
                "{certificate-authority-data: Q0E=}",
                TOKEN,
                RefusalReason::NoServer,
            ),
        ];
        for (cluster, user, reason) in cases {
            let refused = check(&kubeconfig(cluster, user)).expect_err("refused");
            assert_eq!(refused.reason, *reason, "{cluster} {user}: {refused}");
            assert!(!refused.message.is_empty());
        }
    }

    #[test]
    fn a_kubeconfig_without_a_usable_context_is_refused() {
        assert_eq!(
            check("not: [a kubeconfig").map_err(|r| r.reason).err(),
            Some(RefusalReason::Unreadable)
        );
        let no_current = kubeconfig(CLUSTER, TOKEN).replace("current-context: east\n", "");
        assert_eq!(
            check(&no_current).map_err(|r| r.reason).err(),
            Some(RefusalReason::NoContext)
        );
        let dangling =
            kubeconfig(CLUSTER, TOKEN).replace("current-context: east", "current-context: gone");
        assert_eq!(
            check(&dangling).map_err(|r| r.reason).err(),
            Some(RefusalReason::NoContext)
        );
    }

    #[test]
    fn labels_are_distinct() {
        let mut labels: Vec<&str> = RefusalReason::ALL.iter().map(|r| r.label()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), RefusalReason::ALL.len());
    }
}
