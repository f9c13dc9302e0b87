//! How kube-apiserver is started: its flags, and the audit policies its audit log is written
//! with (every request for the scale benchmark; else the ServiceAccounts' requests, where the
//! installed identity's refusals are read).

use std::path::Path;

use crate::pki;

/// kube-apiserver as kube-envtest's start.sh runs it, less the aggregation layer's front
/// proxy, which no jobwarden test uses.
pub(crate) fn apiserver_args(pki: &pki::Pki, etcd_port: u16, api_port: u16) -> Vec<String> {
    let path = |p: &Path| p.display().to_string();
    vec![
        format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
        "--bind-address=127.0.0.1".to_owned(),
        "--advertise-address=127.0.0.1".to_owned(),
        format!("--secure-port={api_port}"),
        format!("--tls-cert-file={}", path(&pki.apiserver_cert)),
        format!("--tls-private-key-file={}", path(&pki.apiserver_key)),
        format!("--client-ca-file={}", path(&pki.ca_cert)),
        "--authorization-mode=Node,RBAC".to_owned(),
        "--service-cluster-ip-range=10.96.0.0/16".to_owned(),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
        format!(
            "--service-account-key-file={}",
            path(&pki.service_account_public_key)
        ),
        format!(
            "--service-account-signing-key-file={}",
            path(&pki.service_account_key)
        ),
        "--allow-privileged=true".to_owned(),
        // A loopback address cannot be the endpoint of the `kubernetes` Service.
        "--endpoint-reconciler-type=none".to_owned(),
        "--v=2".to_owned(),
    ]
}

/// kube-apiserver's audit log, under the control plane's folder.
pub(crate) const AUDIT_LOG: &str = "logs/audit.log";

/// The requests of ServiceAccounts (the installed identity's among them) and nothing else: a
/// refusal is a 403 in the response, so only the completed stage is kept.
pub(crate) const SERVICE_ACCOUNTS_AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [\"RequestReceived\"]
rules:
- level: Metadata
  userGroups: [\"system:serviceaccounts\"]
- level: None
";

pub(crate) const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  resources:
  - group: coordination.k8s.io
    resources: [\"leases\"]
- level: None
  nonResourceURLs: [\"/healthz*\", \"/readyz*\", \"/livez*\"]
- level: Metadata
";
