//! The listeners' default: the port on both address families, so a single-stack IPv6 cluster
//! reaches the webhook as well as an IPv4 one. Checked by serving real requests over IPv4 and
//! IPv6 loopback; the IPv6 half is skipped, saying so, on a host without IPv6.

use crate::support;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use jobwarden_admission::Webhook;
use jobwarden_server::ListenAddr;
use support::{Client, Harness, Proto, expected, http_get, job_review};

/// Whether this host can bind IPv6 loopback at all.
fn host_has_ipv6() -> bool {
    std::net::TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_serves_ipv4_and_ipv6() {
    let harness = Harness::start_with(|s| {
        s.listen = ListenAddr::AllFamilies { port: 0 };
        s.metrics_listen = ListenAddr::AllFamilies { port: 0 };
    })
    .await;
    let (https, metrics) = (
        harness.server.https_addr().port(),
        harness.server.metrics_addr().port(),
    );
    let mut loopbacks = vec![Ipv4Addr::LOCALHOST.into()];
    if host_has_ipv6() {
        loopbacks.push(Ipv6Addr::LOCALHOST.into());
    } else {
        eprintln!("skipping the IPv6 half: this host has no IPv6");
    }
    for ip in loopbacks {
        let client = Client::new(SocketAddr::new(ip, https), harness.ca.roots());
        for proto in [Proto::Http1, Proto::Http2] {
            let mut conn = client
                .connect(proto)
                .await
                .unwrap_or_else(|e| panic!("HTTPS on {ip}: {e}"));
            let body = job_review(&format!("{ip}-{proto:?}"));
            let answer = conn.post_json("/validate", body.clone()).await.unwrap();
            assert_eq!(answer.status, 200, "{ip}: {}", answer.text());
            assert_eq!(answer.body.as_ref(), expected(Webhook::Validate, &body));
        }
        let (status, text) = http_get(SocketAddr::new(ip, metrics), "/healthz").await;
        assert_eq!((status.as_u16(), text.as_str()), (200, "ok\n"), "{ip}");
    }
    harness.server.shutdown_token().cancel();
    harness.server.wait().await.unwrap();
}

/// An explicit address is bound as given: IPv4 loopback only, so IPv6 loopback is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_address_is_used_as_given() {
    let harness = Harness::start().await;
    let https = harness.server.https_addr();
    assert_eq!(https.ip(), Ipv4Addr::LOCALHOST);
    if host_has_ipv6() {
        let client = Client::new(
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), https.port()),
            harness.ca.roots(),
        );
        assert!(client.connect(Proto::Http1).await.is_err());
    }
}
