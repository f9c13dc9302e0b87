//! `jobwarden serve` as the built binary, run as a cluster runs it: under the ServiceAccount
//! and RBAC `deploy/` installs (a kubeconfig holding only its token), with a serving
//! certificate from a CA made for the test, JSON logs, and readiness read over HTTPS as the
//! kubelet probes it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jobwarden_envtest::{Installed, ServingCertificate};
use serde_json::Value;

const READY_WITHIN: Duration = Duration::from_secs(90);

/// A running `serve`, killed when dropped.
pub struct Served {
    child: Child,
    pub port: u16,
    pub metrics_port: u16,
    pub ca_pem: String,
    /// The certificate it serves (PEM), signed by `ca_pem`'s CA, for 127.0.0.1.
    pub cert_pem: String,
    pub log: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// Starts `serve` as `identity`, its context namespace (and Lease's) `namespace`, with
    /// `args` after the listeners, certificate and log format, and waits for `/readyz`.
    pub fn start(dir: &Path, identity: &Installed, namespace: &str, args: &[&str]) -> Served {
        Served::start_with(dir, &identity.kubeconfig(namespace), args, &[])
    }

    /// [`start`](Self::start) with a kubeconfig of the caller's (its context's namespace is
    /// the Lease's) and `env` set for the process (`HOSTNAME`, its identity in the Lease).
    pub fn start_with(
        dir: &Path,
        kubeconfig: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Served {
        let ServingCertificate { cert, key, ca_pem } = jobwarden_envtest::serving_certificate(dir);
        let cert_pem = std::fs::read_to_string(&cert).expect("the serving certificate");
        let free_port = || jobwarden_envtest::free_port().expect("a free port");
        let (port, metrics_port) = (free_port(), free_port());
        let log = dir.join(format!("serve-{port}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_jobwarden"))
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .args(["--log-format", "json"])
            .args(args)
            .envs(env.iter().copied())
            .env("KUBECONFIG", kubeconfig)
            .env_remove("JOBWARDEN_E2E_KUBECONFIG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a log file"))
            .spawn()
            .expect("jobwarden serve starts");
        let mut served = Served {
            child,
            port,
            metrics_port,
            ca_pem,
            cert_pem,
            log,
        };
        let started = Instant::now();
        while !served.get("/readyz", None).starts_with("HTTP/1.1 200") {
            assert!(
                served.child.try_wait().ok().flatten().is_none(),
                "serve exited: {}",
                std::fs::read_to_string(&served.log).unwrap_or_default()
            );
            assert!(
                started.elapsed() < READY_WITHIN,
                "serve never became ready: {}",
                std::fs::read_to_string(&served.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        served
    }

    /// GET `path` on the metrics listener over HTTPS, with `token` as a bearer token when
    /// given; the whole response, or an empty string when nothing answered.
    pub fn get(&self, path: &str, token: Option<&str>) -> String {
        jobwarden_envtest::https_get(self.metrics_port, path, &self.ca_pem, token)
            .unwrap_or_default()
    }

    /// The JSON log lines written so far.
    pub fn log_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}
