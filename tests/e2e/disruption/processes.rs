//! The processes a run disrupts: `jobwarden serve --no-webhook` replicas, and the TCP proxy
//! that cuts one off from the API server.

use tokio::sync::watch;

use super::*;
use crate::disruption::env::Env;

/// One `jobwarden serve --no-webhook` process; SIGKILLed when dropped.
pub(crate) struct Replica {
    pub(crate) child: Child,
    pub(crate) identity: String,
    pub(crate) metrics_port: u16,
    /// What /metrics is read with: the serving CA, and a token bound to the reader role.
    pub(crate) ca_pem: String,
    pub(crate) reader_token: String,
    pub(crate) log: PathBuf,
}

impl Replica {
    pub(crate) fn start(env: &Env, identity: &str, kubeconfig: &Path) -> Replica {
        let metrics_port = jobwarden_envtest::free_port().expect("a free port");
        let stamp = Instant::now().duration_since(env.started).as_millis();
        let log = env.dir.join(format!("{identity}-{stamp}.log"));
        let file = std::fs::File::create(&log).expect("the log file");
        let child = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
            .args(["serve", "--no-webhook", "--audit-interval-seconds", "0"])
            .arg("--metrics-listen")
            .arg(format!("127.0.0.1:{metrics_port}"))
            .arg("--tls-cert")
            .arg(&env.certificate.cert)
            .arg("--tls-key")
            .arg(&env.certificate.key)
            .arg("--controller-name")
            .arg(&env.controller)
            .env("KUBECONFIG", kubeconfig)
            .env("HOSTNAME", identity)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("jobwarden starts");
        Replica {
            child,
            identity: identity.to_owned(),
            metrics_port,
            ca_pem: env.certificate.ca_pem.clone(),
            reader_token: env.reader_token.clone(),
            log,
        }
    }

    /// `jobwarden_controller_leader`, `None` while /metrics cannot be read.
    pub(crate) async fn leader_gauge(&self) -> Option<i64> {
        let (port, ca, token) = (
            self.metrics_port,
            self.ca_pem.clone(),
            self.reader_token.clone(),
        );
        let text = tokio::task::spawn_blocking(move || {
            jobwarden_envtest::https_get(port, "/metrics", &ca, Some(&token))
        })
        .await
        .ok()??;
        text.lines()
            .find_map(|l| l.strip_prefix("jobwarden_controller_leader "))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Waits until the gauge reads `leading`; returns when it was first seen so.
    pub(crate) async fn wait_gauge(&self, leading: i64, within: Duration) -> Instant {
        let deadline = Instant::now() + within;
        loop {
            if self.leader_gauge().await == Some(leading) {
                return Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "{}: the leader gauge never read {leading} within {within:?}; its log:\n{}",
                self.identity,
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "signal {signal} sent to {}", self.identity);
    }

    /// Waits for the process to exit, and says whether it exited 0.
    pub(crate) async fn exited(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("the child's status") {
                return status.success();
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {within:?}",
                self.identity
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP proxy between a replica and the API server that can be cut (open connections are
/// dropped, new ones are accepted and hang: requests get no answer, as on a dead network) and
/// restored (the hanging connections are dropped, new ones go through).
pub(crate) struct Proxy {
    pub(crate) port: u16,
    pub(crate) cut: Arc<AtomicBool>,
    /// Bumped on every cut and restore: connections opened before it are dropped.
    pub(crate) epoch: watch::Sender<u64>,
    pub(crate) accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub(crate) async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a proxy port");
        let port = listener.local_addr().expect("bound").port();
        let cut = Arc::new(AtomicBool::new(false));
        let epoch = watch::Sender::new(0u64);
        let accept = tokio::spawn({
            let (cut, epoch) = (cut.clone(), epoch.clone());
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    let mut changed = epoch.subscribe();
                    let (cut, target) = (cut.clone(), target.clone());
                    tokio::spawn(async move {
                        if cut.load(Ordering::SeqCst) {
                            // Held without an answer until the next cut or restore.
                            let _ = changed.changed().await;
                            return;
                        }
                        let Ok(mut outbound) = TcpStream::connect(&target).await else {
                            return;
                        };
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                            _ = changed.changed() => {}
                        }
                    });
                }
            }
        });
        Proxy {
            port,
            cut,
            epoch,
            accept,
        }
    }

    pub(crate) fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        self.epoch.send_modify(|e| *e += 1);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.epoch.send_modify(|e| *e += 1);
    }
}
