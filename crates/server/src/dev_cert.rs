//! The `--dev` certificate: a self-signed certificate for localhost made in memory at start, so
//! the server runs with no files and no cluster. Never written to disk; what a client needs to
//! trust it (the PEM, or the public-key pin for curl) is printed instead.

use base64::Engine as _;
use rcgen::{CertificateParams, DnType, KeyPair, PublicKeyData as _};
use time::{Duration, OffsetDateTime};

/// A self-signed serving certificate and what to tell a person about it.
#[derive(Debug, Clone)]
pub struct DevCert {
    pub cert_pem: String,
    pub key_pem: String,
    /// base64 SHA-256 of the SubjectPublicKeyInfo: curl's `--pinnedpubkey sha256//…`.
    pub public_key_pin: String,
}

/// Makes a certificate for `localhost`, `127.0.0.1` and `::1`, valid for 30 days.
pub fn make() -> Result<DevCert, rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "jobwarden --dev");
    let now = OffsetDateTime::now_utc();
    // A minute of slack for a client clock that runs a little behind.
    params.not_before = now - Duration::minutes(1);
    params.not_after = now + Duration::days(30);
    let cert = params.self_signed(&key)?;
    let digest = ring::digest::digest(&ring::digest::SHA256, &key.subject_public_key_info());
    Ok(DevCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        public_key_pin: base64::engine::general_purpose::STANDARD.encode(digest.as_ref()),
    })
}

impl DevCert {
    /// What a person needs to call the server: printed to stderr at start.
    pub fn instructions(&self, port: u16) -> String {
        format!(
            "jobwarden --dev: serving a self-signed certificate for localhost, made in memory.\n\
             Call it with curl, pinning its public key:\n  \
             curl -k --pinnedpubkey 'sha256//{pin}' -H 'Content-Type: application/json' \\\n    \
             --data @review.json https://localhost:{port}/validate\n\
             or save this certificate and pass it as --cacert:\n{pem}",
            pin = self.public_key_pin,
            pem = self.cert_pem,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dev_certificate_loads_and_names_localhost() {
        let dev = make().unwrap();
        let loaded =
            crate::tls_reload::load_pem(dev.cert_pem.as_bytes(), dev.key_pem.as_bytes()).unwrap();
        assert_eq!(loaded.dns_names, ["localhost"]);
        assert!(dev.instructions(8443).contains(&dev.public_key_pin));
    }
}
