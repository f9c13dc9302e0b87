//! What the serving TLS accepts, held at the boundary on both listeners (admission, and the
//! secured operations listener): TLS 1.3, and TLS 1.2 only with ECDHE key exchange and an AEAD
//! cipher. A real rustls client offering, over TLS 1.2, only a suite outside that set (static
//! RSA or finite-field DHE key exchange, CBC encryption) is refused in the handshake; the same
//! client offering an ECDHE-GCM suite gets through, so the refusal is the suite's.
//! rustls implements no protocol older than TLS 1.2 at all, on either side.

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::crypto::{CipherSuiteCommon, CryptoProvider};
use rustls::pki_types::ServerName;
use rustls::{
    AlertDescription, CipherSuite, RootCertStore, SupportedCipherSuite, Tls12CipherSuite,
};
use support::Harness;
use support::reviews::Reviews;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A TLS 1.2 suite that announces itself as `id`, built from ring's ECDHE-ECDSA-AES128-GCM
/// (the test CA's keys are ECDSA P-256). Only the identifier matters: a server that refuses
/// the suite never gets to use the rest.
fn offering(id: u16) -> SupportedCipherSuite {
    let SupportedCipherSuite::Tls12(base) =
        rustls::crypto::ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
    else {
        unreachable!("a TLS 1.2 suite");
    };
    let suite: &'static Tls12CipherSuite = Box::leak(Box::new(Tls12CipherSuite {
        common: CipherSuiteCommon {
            suite: CipherSuite::from(id),
            ..base.common
        },
        ..*base
    }));
    SupportedCipherSuite::Tls12(suite)
}

/// A TLS 1.2 handshake offering only `suite`.
async fn handshake(
    addr: SocketAddr,
    roots: RootCertStore,
    suite: SupportedCipherSuite,
) -> std::io::Result<()> {
    let provider = CryptoProvider {
        cipher_suites: vec![suite],
        ..rustls::crypto::ring::default_provider()
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS12])
        .map_err(std::io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map(drop)
}

/// Refused with a handshake_failure alert, as a server with no suite in common answers.
fn refused_for_the_suite(result: &std::io::Result<()>) -> bool {
    let Err(error) = result else {
        return false;
    };
    let rustls = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    matches!(
        rustls,
        Some(rustls::Error::AlertReceived(
            AlertDescription::HandshakeFailure
        ))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_ecdhe_with_aead_is_accepted_over_tls_1_2_on_both_listeners() {
    let reviews = Reviews::default();
    let harness = Harness::start_with_cluster(Some(reviews.client()), |_| {}).await;
    let refused = [
        (0x009c, "TLS_RSA_WITH_AES_128_GCM_SHA256 (static RSA)"),
        (
            0x009e,
            "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256 (finite-field DHE)",
        ),
        (0xc023, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256 (CBC)"),
        (0xc009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA (CBC, SHA-1)"),
        (0x002f, "TLS_RSA_WITH_AES_128_CBC_SHA (static RSA, CBC)"),
    ];
    for (listener, addr) in [
        ("admission", harness.server.https_addr()),
        ("metrics", harness.server.metrics_addr()),
    ] {
        let accepted = handshake(
            addr,
            harness.ca.roots(),
            rustls::crypto::ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        )
        .await;
        assert!(
            accepted.is_ok(),
            "{listener}: ECDHE-ECDSA-AES128-GCM: {accepted:?}"
        );
        for (id, name) in refused {
            let result = handshake(addr, harness.ca.roots(), offering(id)).await;
            assert!(
                refused_for_the_suite(&result),
                "{listener}: {name} was not refused: {result:?}"
            );
        }
    }
}
