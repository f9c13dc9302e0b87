//! How kube-apiserver is started: its flags, and the audit policies its audit log is written
//! with (every request for the scale benchmark; else the ServiceAccounts' requests, where the
//! installed identity's refusals are read); and how it is stopped and started again, on the
//! same port, flags and etcd, for the tests of an API server that goes away while Jobs run.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::{ControlPlane, pki, process};

/// How long kube-apiserver may take to drain its requests after SIGTERM and stop listening.
const STOP_GRACE: Duration = Duration::from_secs(60);

/// Each restart of a kube-apiserver: its audit log, and from when until when its refusals are
/// its caches' and not a grant missing. A restarted kube-apiserver says it is ready before its
/// authorizer's caches of roles and bindings have filled (its 403s then list the built-in roles
/// themselves as "not found"): a restart ends once RBAC allows what a built-in binding grants.
static RESTARTS: Mutex<Vec<(PathBuf, SystemTime, SystemTime)>> = Mutex::new(Vec::new());

/// Whether a request received at `at` by the API server writing `audit_log` came while it was
/// starting again.
pub(crate) fn while_restarting(audit_log: &Path, at: SystemTime) -> bool {
    RESTARTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|(log, from, until)| log == audit_log && *from <= at && at <= *until)
}

/// kube-apiserver as it was started: the same program, flags, port and log each time.
pub(crate) struct ApiServer {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) port: u16,
    pub(crate) log: PathBuf,
}

impl ApiServer {
    /// Starts it (on the keeper thread, as every process is started).
    pub(crate) fn spawn(&self) -> Result<u32, String> {
        let (program, args, log) = (self.program.clone(), self.args.clone(), self.log.clone());
        process::on_keeper(move || process::spawn(&program, &args, &log))
    }

    /// Waits until `/readyz` says ok, with the end of its log when it does not.
    pub(crate) fn wait_until_ready(&self, kubeconfig: &Path, pid: u32) -> Result<(), String> {
        crate::wait_for_readyz(kubeconfig, pid).map_err(|e| {
            format!(
                "kube-apiserver: {e}; the end of {}:\n{}",
                self.log.display(),
                process::tail(&self.log, 40)
            )
        })
    }
}

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

/// The last kube-apiserver process started, and whether it was stopped since.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ApiServerProcess {
    pub(crate) pid: u32,
    pub(crate) stopped: bool,
}

impl ControlPlane {
    /// Stops kube-apiserver and returns once it has exited: SIGTERM, and once it has drained
    /// its requests and stopped listening, what is left of it (the open watches, which its
    /// own shutdown would keep for up to `--request-timeout`, a minute) is killed, so its
    /// clients lose it at once, as they lose an API server that goes away. etcd and
    /// kube-controller-manager run on, and nothing answers on the API server's port until
    /// [`start_apiserver`](Self::start_apiserver). For a plane this test binary started; on a
    /// shared one, every test using it loses its API server too.
    pub fn stop_apiserver(&self) -> Result<(), String> {
        let (owned, apiserver) = self.started_apiserver()?;
        let mut process = owned
            .apiserver_process
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let Some(current) = process.as_mut().filter(|p| !p.stopped) else {
            return Err("kube-apiserver is not running".to_owned());
        };
        let port = apiserver.port;
        let stopped_listening = || std::net::TcpStream::connect(("127.0.0.1", port)).is_err();
        process::terminate(current.pid, STOP_GRACE, stopped_listening)?;
        current.stopped = true;
        Ok(())
    }

    /// Starts kube-apiserver again after [`stop_apiserver`](Self::stop_apiserver): the same
    /// port, flags and etcd (every object kept), returning once `/readyz` says ok. It blocks
    /// the calling thread meanwhile: in a tokio test, use the multi-threaded runtime so that
    /// the test's other tasks (its kubelet) go on.
    pub fn start_apiserver(&self) -> Result<(), String> {
        let (owned, apiserver) = self.started_apiserver()?;
        let mut process = owned
            .apiserver_process
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let Some(current) = process.as_mut().filter(|p| p.stopped) else {
            return Err("kube-apiserver is running; stop it first".to_owned());
        };
        let from = SystemTime::now();
        let pid = apiserver.spawn()?;
        // The new process takes the old one's place among the pids (etcd, kube-apiserver,
        // kube-controller-manager).
        for p in owned
            .pids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
        {
            if *p == current.pid {
                *p = pid;
            }
        }
        *current = ApiServerProcess {
            pid,
            stopped: false,
        };
        drop(process);
        let ready = apiserver
            .wait_until_ready(self.kubeconfig(), pid)
            .and_then(|()| crate::wait_for_rbac(self.kubeconfig(), pid));
        RESTARTS.lock().unwrap_or_else(|e| e.into_inner()).push((
            owned.dir.join(AUDIT_LOG),
            from,
            SystemTime::now(),
        ));
        ready
    }

    fn started_apiserver(&self) -> Result<(&crate::Owned, &ApiServer), String> {
        let owned = self
            .owned
            .as_ref()
            .ok_or("the cluster of JOBWARDEN_E2E_KUBECONFIG is not this test binary's to stop")?;
        let apiserver = owned
            .apiserver
            .as_ref()
            .ok_or("no kube-apiserver was started")?;
        Ok((owned, apiserver))
    }
}
