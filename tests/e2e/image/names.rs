//! Names resolve in the image as in a pod: /etc/hosts (the kubelet's, with the pod's
//! hostAliases) first, then DNS, by the static glibc's own resolver, which loads no NSS module.
//! In a cluster jobwarden resolves nothing (it reaches the API server by the IP in
//! `KUBERNETES_SERVICE_HOST`); a kubeconfig naming a host does (`audit` or `explain` run from
//! the image, `serve` outside a cluster), so `audit` is run from the image with kubeconfigs
//! naming the API server three ways.
//!
//! The DNS server is the test's own, on 127.53.0.1:53 (an address of this machine's loopback
//! that nothing else uses): it knows one name, and says NXDOMAIN to every other, so that a
//! name in /etc/hosts resolves only if /etc/hosts is read first.

use std::net::UdpSocket;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::config::Kubeconfig;

use crate::image::engine::{IMAGE, Running, container_name, text};
use crate::image::in_cluster::engine_and_local_plane;

const DNS_SERVER: &str = "127.53.0.1";
const DNS_NAME: &str = "apiserver-in-dns.image-e2e.test";
const HOSTS_NAME: &str = "apiserver-in-hosts.image-e2e.test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_resolve_from_etc_hosts_before_dns_and_from_dns() {
    let Some((engine, plane)) = engine_and_local_plane("the image's name lookups") else {
        return;
    };
    let identity = plane.installed_identity().await;
    let dir = plane
        .dir()
        .expect("a local control plane")
        .join("image-names");
    std::fs::create_dir_all(&dir).expect("a folder");
    let kubeconfig = Kubeconfig::read_from(identity.kubeconfig("default")).expect("a kubeconfig");

    let dns = DnsServer::start();
    if dns.is_none() {
        eprintln!(
            "skipped: the DNS half of the name test ({DNS_SERVER}:53 cannot be bound here: \
             root is needed); /etc/hosts is still tested"
        );
    }
    let mut names = vec![HOSTS_NAME];
    if dns.is_some() {
        names.push(DNS_NAME);
    }
    for name in names {
        let file = dir.join(format!("{name}.kubeconfig"));
        write_kubeconfig(&kubeconfig, name, &file);
        let container = container_name(&format!("names-{}", &name[..name.find('.').unwrap_or(0)]));
        let _guard = Running::new(engine, container.clone());
        let mut command = engine.run(&container);
        command
            .args(["--network=host", "--read-only", "--user=65532:65532"])
            .arg(format!("--add-host={HOSTS_NAME}:127.0.0.1"))
            .arg(format!("--volume={}:/config:ro", dir.display()));
        if dns.is_some() {
            command.arg(format!("--dns={DNS_SERVER}"));
        }
        let out = command
            .args([IMAGE, "audit", "--kubeconfig"])
            .arg(format!("/config/{name}.kubeconfig"))
            .stdin(Stdio::null())
            .output()
            .expect("the engine runs");
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        // 0: nothing to report, 1: violations found; either way the Jobs were read.
        assert!(
            matches!(out.status.code(), Some(0 | 1)) && !stderr.contains("cannot"),
            "audit through {name}: {:?}\n{stdout}{stderr}",
            out.status
        );
    }
}

/// The identity's kubeconfig with the API server named `name` (its certificate is checked
/// against `localhost`, one of its names).
fn write_kubeconfig(base: &Kubeconfig, name: &str, to: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let mut config = base.clone();
    for cluster in config
        .clusters
        .iter_mut()
        .filter_map(|c| c.cluster.as_mut())
    {
        let server = cluster.server.clone().expect("a server");
        let port = server
            .rsplit(':')
            .next()
            .expect("a port")
            .trim_end_matches('/');
        cluster.server = Some(format!("https://{name}:{port}"));
        cluster.tls_server_name = Some("localhost".to_owned());
    }
    let text = serde_json::to_string(&config).expect("the kubeconfig as JSON");
    std::fs::write(to, text).expect("the kubeconfig is written");
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o644)).expect("chmod");
}

/// A DNS server on [`DNS_SERVER`]:53 answering `A` for [`DNS_NAME`] with 127.0.0.1, no
/// records (NOERROR) for its other types, and NXDOMAIN for every other name; stopped when
/// dropped.
struct DnsServer {
    stop: Arc<AtomicBool>,
}

impl DnsServer {
    fn start() -> Option<DnsServer> {
        let socket = UdpSocket::bind((DNS_SERVER, 53)).ok()?;
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("a timeout");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !stopped.load(Ordering::Relaxed) {
                if let Ok((n, from)) = socket.recv_from(&mut buf)
                    && let Some(answer) = answer(&buf[..n])
                {
                    let _ = socket.send_to(&answer, from);
                }
            }
        });
        Some(DnsServer { stop })
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The answer to one query (RFC 1035 §4.1): its header and question echoed, an `A` record
/// for [`DNS_NAME`], NXDOMAIN for other names.
fn answer(query: &[u8]) -> Option<Vec<u8>> {
    // The question: labels up to the root, then type and class.
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*query.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_lowercase());
        at += len;
    }
    let question = query.get(12..at + 4)?;
    let qtype = u16::from_be_bytes([query[at], query[at + 1]]);
    let known = labels.join(".") == DNS_NAME;
    let with_record = known && qtype == 1;
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(query.get(0..2)?); // id
    out.extend_from_slice(&[0x81, if known { 0x80 } else { 0x83 }]); // response, RD, RA; rcode
    out.extend_from_slice(&[0, 1, 0, u8::from(with_record), 0, 0, 0, 0]);
    out.extend_from_slice(question);
    if with_record {
        // The name by pointer to the question, A, IN, TTL 5 s, 4 bytes: 127.0.0.1.
        out.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 127, 0, 0, 1]);
    }
    Some(out)
}
