//! The control plane's certificates, made fresh for every start: one CA that signs the API
//! server's serving certificate and the client certificates, and the service-account signing
//! key. ECDSA P-256 throughout (rcgen's default); kube-apiserver and kube-controller-manager
//! read PKCS#8 ECDSA keys as they read RSA ones.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// The files written under `dir/pki`.
pub struct Pki {
    pub ca_cert: PathBuf,
    pub apiserver_cert: PathBuf,
    pub apiserver_key: PathBuf,
    pub service_account_key: PathBuf,
    /// Its public half: kube-apiserver reads public keys from PKIX PEM, not from PKCS#8.
    pub service_account_public_key: PathBuf,
    /// The admin's, the controller manager's and the scheduler's kubeconfigs.
    pub admin_kubeconfig: PathBuf,
    pub kcm_kubeconfig: PathBuf,
    pub scheduler_kubeconfig: PathBuf,
}

/// A client identity: its certificate and key, PEM.
struct ClientCert {
    cert: String,
    key: String,
}

pub fn write(dir: &Path, server: &str) -> Result<Pki, String> {
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki).map_err(|e| format!("creating {}: {e}", pki.display()))?;
    let ca = ca().map_err(|e| format!("making the CA: {e}"))?;
    let ca_pem = ca.pem();

    let serving = serving_cert(&ca).map_err(|e| format!("making the serving cert: {e}"))?;
    let admin = client_cert(&ca, "kubernetes-admin", "system:masters")
        .map_err(|e| format!("making the admin cert: {e}"))?;
    // A user of its own, as kubeadm gives it, in system:masters as kube-envtest's start.sh
    // does, so that its requests are told apart from the tests' in the audit log; the same
    // for kube-scheduler (whose bindings a user's can be told from).
    let kcm = client_cert(&ca, "system:kube-controller-manager", "system:masters")
        .map_err(|e| format!("making the controller manager's cert: {e}"))?;
    let scheduler = client_cert(&ca, "system:kube-scheduler", "system:masters")
        .map_err(|e| format!("making the scheduler's cert: {e}"))?;
    let service_account =
        KeyPair::generate().map_err(|e| format!("making the service-account key: {e}"))?;

    let files = Pki {
        ca_cert: pki.join("ca.crt"),
        apiserver_cert: pki.join("apiserver.crt"),
        apiserver_key: pki.join("apiserver.key"),
        service_account_key: pki.join("sa.key"),
        service_account_public_key: pki.join("sa.pub"),
        admin_kubeconfig: dir.join("admin.kubeconfig"),
        kcm_kubeconfig: dir.join("kcm.kubeconfig"),
        scheduler_kubeconfig: dir.join("scheduler.kubeconfig"),
    };
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
    };
    write(&files.ca_cert, &ca_pem)?;
    write(&files.apiserver_cert, &serving.cert)?;
    write(&files.apiserver_key, &serving.key)?;
    write(&files.service_account_key, &service_account.serialize_pem())?;
    write(
        &files.service_account_public_key,
        &service_account.public_key_pem(),
    )?;
    write(
        &files.admin_kubeconfig,
        &kubeconfig(server, &ca_pem, "kubernetes-admin", &admin),
    )?;
    write(
        &files.kcm_kubeconfig,
        &kubeconfig(server, &ca_pem, "system:kube-controller-manager", &kcm),
    )?;
    write(
        &files.scheduler_kubeconfig,
        &kubeconfig(server, &ca_pem, "system:kube-scheduler", &scheduler),
    )?;
    Ok(files)
}

fn ca() -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "jobwarden-envtest-ca");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate()?)
}

fn serving_cert(ca: &CertifiedIssuer<'static, KeyPair>) -> Result<ClientCert, rcgen::Error> {
    let key = KeyPair::generate()?;
    // The names a client inside the cluster would use too, as kubeadm's certificate has.
    let mut params = CertificateParams::new(vec![
        "127.0.0.1".to_owned(),
        "localhost".to_owned(),
        "10.96.0.1".to_owned(),
        "kubernetes".to_owned(),
        "kubernetes.default".to_owned(),
        "kubernetes.default.svc".to_owned(),
    ])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, ca)?;
    Ok(ClientCert {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

fn client_cert(
    ca: &CertifiedIssuer<'static, KeyPair>,
    user: &str,
    group: &str,
) -> Result<ClientCert, rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, user);
    params
        .distinguished_name
        .push(DnType::OrganizationName, group);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, ca)?;
    Ok(ClientCert {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A kubeconfig with its credentials embedded, so the file alone is enough.
fn kubeconfig(server: &str, ca_pem: &str, user: &str, cert: &ClientCert) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    \
         client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: envtest\n  \
         context:\n    cluster: envtest\n    user: {user}\ncurrent-context: envtest\n",
        ca = b64(ca_pem),
        cert = b64(&cert.cert),
        key = b64(&cert.key),
    )
}
