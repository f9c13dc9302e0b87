//! The clusters of a dispatcher's end-to-end tests: a management control plane (with
//! upstream's Job and TTL-after-finished controllers) and worker planes (with upstream's Job
//! controller, which runs the copies), started at once. Each plane is a [`ControlPlane`] of its
//! own: its API servers can be stopped and started again, and
//! [`ControlPlane::dispatcher_kubeconfig`] gives the worker identity a user would give the
//! dispatcher. [`Fleet::start_scheduled`]'s workers also run kube-scheduler over the Nodes a
//! test lays out.

use std::sync::OnceLock;

use crate::{ControlPlane, Options, bin_dir, binaries_present, say_skipped, skip_message};

/// A management cluster and its workers.
pub struct Fleet {
    pub management: ControlPlane,
    pub workers: Vec<ControlPlane>,
}

impl Fleet {
    /// How many workers [`Fleet::shared`] starts: two, as the dispatcher's scenarios need (a
    /// Job goes elsewhere, a worker is lost and another takes its Jobs).
    pub const SHARED_WORKERS: usize = 2;

    /// A fleet of one's own, `workers` workers beside the management plane, all started at
    /// once; stopped when dropped. Without the binaries, the error is the line a skipped test
    /// prints (`skipped: ...`).
    pub fn start(workers: usize) -> Result<Fleet, String> {
        Fleet::start_with(workers, Options::worker(), false)
    }

    /// [`start`](Self::start), each kube-apiserver keeping an audit log of every request
    /// ([`Options::audit_log`]): the scale benchmark counts each client's requests from them.
    pub fn start_audited(workers: usize) -> Result<Fleet, String> {
        Fleet::start_with(workers, Options::worker(), true)
    }

    /// [`start`](Self::start), each worker also running kube-scheduler
    /// ([`Options::scheduled_worker`]): its pods are bound to the Nodes a test lays out
    /// ([`crate::Nodes`]), or stay `Pending` as `Unschedulable`; play the kubelet there with
    /// [`crate::kubelet_of_bound_pods`]. Without kube-scheduler among the binaries, the error
    /// is the `skipped:` line.
    pub fn start_scheduled(workers: usize) -> Result<Fleet, String> {
        Fleet::start_with(workers, Options::scheduled_worker(), false)
    }

    fn start_with(workers: usize, worker: Options, audit_log: bool) -> Result<Fleet, String> {
        let present = |name: &str| bin_dir().join(name).is_file();
        if !binaries_present()
            || !present("kube-controller-manager")
            || (worker.scheduler && !present("kube-scheduler"))
        {
            // The one line a skipped test prints, as it is.
            return Err(skip_message());
        }
        let audited = |o: Options| Options { audit_log, ..o };
        let mut options = vec![audited(Options::management())];
        options.extend(std::iter::repeat_n(audited(worker), workers));
        let mut planes = ControlPlane::start_all(&options)?.into_iter();
        let management = planes
            .next()
            .ok_or("start_all started no management plane")?;
        Ok(Fleet {
            management,
            workers: planes.collect(),
        })
    }

    /// This test binary's fleet: a management plane and [`SHARED_WORKERS`](Self::SHARED_WORKERS)
    /// workers, started on first use and stopped when the binary exits. `None` (after one line
    /// on stderr) without the binaries, or with `JOBWARDEN_E2E_KUBECONFIG`, which names one
    /// cluster where a fleet needs three of its own. Panics, with the component's log, when the
    /// binaries are there but do not start. Its planes are shared by the binary's tests: a
    /// test that stops an API server must not run beside tests that use it.
    pub fn shared() -> Option<&'static Fleet> {
        static SHARED: OnceLock<Result<Option<Fleet>, String>> = OnceLock::new();
        Fleet::shared_in(&SHARED, Options::worker())
    }

    /// [`shared`](Self::shared), its workers also running kube-scheduler
    /// ([`start_scheduled`](Self::start_scheduled)): the placement tests' fleet.
    pub fn shared_scheduled() -> Option<&'static Fleet> {
        static SHARED: OnceLock<Result<Option<Fleet>, String>> = OnceLock::new();
        Fleet::shared_in(&SHARED, Options::scheduled_worker())
    }

    /// The fleet `shared` holds (or why it did not start: every test that asks is told).
    fn shared_in(
        shared: &'static OnceLock<Result<Option<Fleet>, String>>,
        worker: Options,
    ) -> Option<&'static Fleet> {
        shared
            .get_or_init(|| {
                if std::env::var_os("JOBWARDEN_E2E_KUBECONFIG").is_some() {
                    say_once(
                        "skipped: a dispatcher's fleet needs control planes of its own, and \
                         JOBWARDEN_E2E_KUBECONFIG names one cluster",
                    );
                    return Ok(None);
                }
                match Fleet::start_with(Fleet::SHARED_WORKERS, worker, false) {
                    Err(e) if e == skip_message() => {
                        say_skipped();
                        Ok(None)
                    }
                    started => started.map(Some),
                }
            })
            .as_ref()
            .unwrap_or_else(|e| panic!("the envtest fleet did not start: {e}"))
            .as_ref()
    }

    /// Every plane, the management one first.
    pub fn planes(&self) -> impl Iterator<Item = &ControlPlane> {
        std::iter::once(&self.management).chain(&self.workers)
    }
}

/// One line straight to stderr, once per test binary (see `say_skipped`).
fn say_once(line: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "{line}");
    });
}
