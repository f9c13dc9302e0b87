//! Leader election against a Lease kept in memory, on tokio's paused clock: each replica
//! reaches the Lease through its own connection, which a test can cut (requests then hang, as
//! they do on a dead TCP connection) and restore.

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use super::*;

#[derive(Default)]
struct Shared {
    /// The Lease and its resourceVersion.
    lease: Mutex<Option<(LeaseSpec, u64)>>,
}

/// One replica's connection to the Lease.
#[derive(Clone)]
struct Connection {
    shared: Arc<Shared>,
    cut: Arc<AtomicBool>,
}

impl Connection {
    async fn reach(&self) {
        if self.cut.load(Ordering::SeqCst) {
            futures::future::pending::<()>().await;
        }
    }

    fn lease(&self) -> std::sync::MutexGuard<'_, Option<(LeaseSpec, u64)>> {
        self.shared.lease.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl LeaseStore for Connection {
    async fn get(&self) -> Result<Option<(LeaseSpec, String)>, LeaseError> {
        self.reach().await;
        Ok(self.lease().clone().map(|(s, v)| (s, v.to_string())))
    }

    async fn create(&self, spec: &LeaseSpec) -> Result<(), LeaseError> {
        self.reach().await;
        let mut lease = self.lease();
        if lease.is_some() {
            return Err(LeaseError::Conflict);
        }
        *lease = Some((spec.clone(), 1));
        Ok(())
    }

    async fn update(&self, spec: &LeaseSpec, version: &str) -> Result<(), LeaseError> {
        self.reach().await;
        let mut lease = self.lease();
        match lease.as_mut() {
            Some((current, v)) if v.to_string() == version => {
                *current = spec.clone();
                *v += 1;
                Ok(())
            }
            _ => Err(LeaseError::Conflict),
        }
    }
}

fn settings(identity: &str) -> LeaseSettings {
    LeaseSettings {
        namespace: "ns".to_owned(),
        name: "lease".to_owned(),
        identity: identity.to_owned(),
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
        annotations: Default::default(),
        published: None,
    }
}

/// Who led when: `(replica, at, leading)`, in order; why each stopped; and the replicas
/// acting right now.
#[derive(Default)]
struct Record {
    changes: Mutex<Vec<(&'static str, Instant, bool)>>,
    stops: Mutex<Vec<(&'static str, StopReason)>>,
    renewals: Mutex<Vec<(&'static str, Duration)>>,
    acting: Mutex<Vec<&'static str>>,
    /// Replicas found acting beside another.
    overlaps: Mutex<Vec<String>>,
}

impl Record {
    fn changes(&self) -> Vec<(&'static str, Instant, bool)> {
        self.changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn stops(&self) -> Vec<(&'static str, StopReason)> {
        self.stops.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn last(&self, who: &str, leading: bool) -> Option<Instant> {
        self.changes()
            .iter()
            .rev()
            .find(|(w, _, l)| *w == who && *l == leading)
            .map(|(_, at, _)| *at)
    }

    fn assert_never_two(&self) {
        let overlaps = self.overlaps.lock().unwrap_or_else(|e| e.into_inner());
        assert!(overlaps.is_empty(), "{overlaps:?}");
    }

    fn leading(&self, who: &str) -> bool {
        self.changes()
            .iter()
            .rev()
            .find(|(w, _, _)| *w == who)
            .is_some_and(|(_, _, l)| *l)
    }
}

struct Replica {
    cut: Arc<AtomicBool>,
    shutdown: Option<oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<Result<(), SettingsError>>,
}

/// A replica whose task marks it acting until its term's stop resolves, and checks on every
/// step that it acts only while its `leading` flag is up and no other replica acts.
fn replica(name: &'static str, shared: &Arc<Shared>, record: &Arc<Record>) -> Replica {
    let cut = Arc::new(AtomicBool::new(false));
    let store = Connection {
        shared: shared.clone(),
        cut: cut.clone(),
    };
    let (shutdown, stopped) = oneshot::channel::<()>();
    let (r1, r2) = (record.clone(), record.clone());
    let handle = tokio::spawn(lead(
        store,
        settings(name),
        async move {
            let _ = stopped.await;
        },
        move |change: Leadership| {
            let leading = match change {
                Leadership::Started => true,
                Leadership::Stopped { reason, .. } => {
                    r1.stops
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((name, reason));
                    false
                }
                Leadership::Renewed { took } => {
                    r1.renewals
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((name, took));
                    return;
                }
            };
            r1.changes.lock().unwrap_or_else(|e| e.into_inner()).push((
                name,
                Instant::now(),
                leading,
            ));
        },
        move |term: Term| {
            let record = r2.clone();
            async move {
                {
                    let mut acting = record.acting.lock().unwrap_or_else(|e| e.into_inner());
                    if !acting.is_empty() {
                        record
                            .overlaps
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(format!("{name} acts beside {acting:?}"));
                    }
                    acting.push(name);
                }
                let mut stop = term.stop;
                loop {
                    tokio::select! {
                        () = &mut stop => break,
                        () = tokio::time::sleep(Duration::from_millis(100)) => {
                            if !term.leading.load(Ordering::SeqCst) {
                                // Fenced: it would refuse to write from here on.
                                continue;
                            }
                        }
                    }
                }
                record
                    .acting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|a| *a != name);
            }
        },
    ));
    Replica {
        cut,
        shutdown: Some(shutdown),
        handle,
    }
}

/// Advances the paused clock in small steps until `done` holds; panics after `limit`.
async fn until(limit: Duration, mut done: impl FnMut() -> bool) -> Instant {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Instant::now()
}

/// A Lease, and replica "a" leading it.
async fn a_leading() -> (Arc<Shared>, Arc<Record>, Replica) {
    let shared = Arc::new(Shared::default());
    let record = Arc::new(Record::default());
    let a = replica("a", &shared, &record);
    until(Duration::from_secs(5), || record.leading("a")).await;
    (shared, record, a)
}

#[tokio::test(start_paused = true)]
async fn a_standby_takes_a_released_lease_within_a_retry_period() {
    let (shared, record, mut a) = a_leading().await;
    let b = replica("b", &shared, &record);
    // The standby waits as long as the leader renews.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!record.leading("b"));

    let released = Instant::now();
    let _ = a.shutdown.take().map(|s| s.send(()));
    let took = until(Duration::from_secs(5), || record.leading("b")).await - released;
    assert!(
        took <= Duration::from_secs(2) + Duration::from_millis(100),
        "{took:?}"
    );
    assert!(a.handle.await.expect("joined").is_ok());
    let lease = shared.lease.lock().expect("lock").clone().expect("a Lease");
    assert_eq!(lease.0.holder_identity.as_deref(), Some("b"));
    assert_eq!(lease.0.lease_transitions, Some(1));
    assert_eq!(lease.0.lease_duration_seconds, Some(15));
    assert_eq!(record.stops(), [("a", StopReason::Released)]);
    record.assert_never_two();
    b.handle.abort();
}

#[tokio::test(start_paused = true)]
async fn a_lease_left_by_a_killed_leader_is_taken_once_it_expires() {
    let (shared, record, a) = a_leading().await;
    let b = replica("b", &shared, &record);
    tokio::time::sleep(Duration::from_secs(7)).await;
    // SIGKILL: no release; the standby waits out the Lease from the last renewal it saw.
    a.handle.abort();
    record.acting.lock().expect("lock").clear();
    let killed = Instant::now();
    let taken = until(Duration::from_secs(30), || record.leading("b")).await;
    // The standby saw the last renewal at most a retry period after it was made, and tries
    // at most a retry period after the Lease has expired in its eyes: 15 s, give or take 2.
    let took = taken - killed;
    assert!(
        took >= Duration::from_secs(13)
            && took <= Duration::from_secs(19) + Duration::from_millis(100),
        "{took:?}"
    );
    record.assert_never_two();
    b.handle.abort();
}

#[tokio::test(start_paused = true)]
async fn a_leader_cut_off_steps_down_before_its_lease_expires_and_leads_again_when_back() {
    let (_shared, record, a) = a_leading().await;
    // Outage after outage: each time it steps down within the renew deadline (10 s after its
    // last renewal, at most 2 s before which the cut came), and leads again within a retry
    // period of the API server's return, however many outages it has lived through.
    for outage in 0..5 {
        tokio::time::sleep(Duration::from_secs(7)).await;
        a.cut.store(true, Ordering::SeqCst);
        let cut = Instant::now();
        let stepped_down = until(Duration::from_secs(15), || !record.leading("a")).await;
        let after = stepped_down - cut;
        assert!(
            after <= Duration::from_secs(10) + Duration::from_millis(100)
                && after >= Duration::from_secs(8) - Duration::from_millis(100),
            "outage {outage}: stepped down {after:?} after the cut"
        );
        tokio::time::sleep(Duration::from_secs(64) - after).await;
        a.cut.store(false, Ordering::SeqCst);
        let back = Instant::now();
        let leads = until(Duration::from_secs(15), || record.leading("a")).await - back;
        assert!(
            leads <= Duration::from_secs(2) + Duration::from_millis(100),
            "outage {outage}: leads again {leads:?} after the return"
        );
    }
    assert_eq!(record.stops(), [("a", StopReason::RenewDeadline); 5]);
    record.assert_never_two();
    a.handle.abort();
}

#[tokio::test(start_paused = true)]
async fn a_standby_takes_over_from_a_cut_off_leader_only_after_it_stopped() {
    let (shared, record, a) = a_leading().await;
    let b = replica("b", &shared, &record);
    tokio::time::sleep(Duration::from_secs(5)).await;
    a.cut.store(true, Ordering::SeqCst);
    until(Duration::from_secs(30), || record.leading("b")).await;
    let stopped = record.last("a", false).expect("a stepped down");
    let took_over = record.last("b", true).expect("b leads");
    // The Lease is 15 s, the renew deadline 10 s: a stopped at least 3 s before b began.
    assert!(
        took_over - stopped >= Duration::from_secs(3),
        "{:?}",
        record.changes()
    );
    // Back, a sees b's Lease and stands by.
    a.cut.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!record.leading("a") && record.leading("b"));
    record.assert_never_two();
    a.handle.abort();
    b.handle.abort();
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_lease_another_took_stops_at_its_next_renewal() {
    let (shared, record, a) = a_leading().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Someone else's name in the Lease (an edit, or a replica that judged it expired): client-go
    // would act on beside the new holder until its renew deadline; jobwarden stops at once.
    {
        let mut lease = shared.lease.lock().expect("lock");
        let (spec, version) = lease.as_mut().expect("a Lease");
        spec.holder_identity = Some("c".to_owned());
        *version += 1;
    }
    let taken = Instant::now();
    let stopped = until(Duration::from_secs(10), || !record.leading("a")).await - taken;
    assert!(
        stopped <= Duration::from_secs(2) + Duration::from_millis(100),
        "{stopped:?}"
    );
    assert_eq!(record.stops(), [("a", StopReason::Conflict)]);
    // And it stands by, leaving the holder's Lease alone.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!record.leading("a"));
    let holder = shared
        .lease
        .lock()
        .expect("lock")
        .clone()
        .expect("a Lease")
        .0;
    assert_eq!(holder.holder_identity.as_deref(), Some("c"));
    a.handle.abort();
}

#[tokio::test(start_paused = true)]
async fn every_renewal_is_reported() {
    let (_shared, record, a) = a_leading().await;
    tokio::time::sleep(Duration::from_secs(21)).await;
    let renewals = record.renewals.lock().expect("lock").clone();
    // The acquisition is not a renewal; one every retry period (less its jitter) after it.
    assert!((10..=12).contains(&renewals.len()), "{renewals:?}");
    assert!(renewals.iter().all(|(who, _)| *who == "a"));
    a.handle.abort();
}

#[test]
fn settings_follow_client_go_s_rules() {
    assert!(settings("a").check().is_ok());
    let mut s = settings("a");
    s.renew_deadline = Duration::from_secs(15);
    assert!(
        s.check().is_err(),
        "the holder must stop before its Lease expires"
    );
    let mut s = settings("a");
    s.retry_period = Duration::from_secs(9);
    assert!(s.check().is_err());
    let mut s = settings("a");
    s.retry_period = Duration::ZERO;
    assert!(s.check().is_err());
}
