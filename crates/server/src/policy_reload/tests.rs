//! The follower on real files, swapped as the kubelet swaps a mounted ConfigMap: the new text
//! written in a new timestamped directory, a `..data_tmp` symlink to it renamed over `..data`,
//! the file itself a symlink through `..data`. Each test looks at the file itself (`look`),
//! so nothing waits on the poll's clock but the one test of the poll.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jobwarden_admission::Policy;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::config::parse_policy_bytes;

/// A ConfigMap volume as the kubelet lays it out, holding `policy.yaml`.
struct Mounted {
    dir: tempfile::TempDir,
    version: u32,
}

impl Mounted {
    fn new(text: &str) -> Mounted {
        let dir = tempfile::tempdir().unwrap();
        let mut mounted = Mounted { dir, version: 0 };
        mounted.swap(text);
        std::os::unix::fs::symlink("..data/policy.yaml", mounted.file()).unwrap();
        mounted
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("policy.yaml")
    }

    /// The kubelet's atomic update: a new directory, then one rename of a symlink.
    fn swap(&mut self, text: &str) {
        self.version += 1;
        let root = self.dir.path();
        let version = format!("..2026_11_28_19_00_{:02}.{}", self.version, self.version);
        std::fs::create_dir(root.join(&version)).unwrap();
        std::fs::write(root.join(&version).join("policy.yaml"), text).unwrap();
        let tmp = root.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &tmp).unwrap();
        std::fs::rename(&tmp, root.join("..data")).unwrap();
    }
}

struct Following {
    follower: PolicyFollower,
    feed: PolicyFeed,
    registry: Registry,
}

fn follow(file: &Path) -> Following {
    let text = std::fs::read(file).unwrap();
    let policy = parse_policy_bytes(&text, file).unwrap();
    let mut registry = Registry::default();
    let metrics = PolicyMetrics::register(&mut registry, &content_hash(&text));
    let path = file.to_owned();
    let (follower, feed) = PolicyFollower::new(
        file.to_owned(),
        Box::new(move |bytes: &[u8]| parse_policy_bytes(bytes, &path)),
        policy,
        content_hash(&text),
        Duration::from_millis(20),
        metrics,
        None,
    );
    Following {
        follower,
        feed,
        registry,
    }
}

impl Following {
    fn metrics(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).unwrap();
        out
    }

    fn reloads(&self, result: &str) -> u64 {
        let prefix = format!("jobwarden_policy_reloads_total{{result=\"{result}\"}} ");
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {}", self.metrics()))
            .parse()
            .unwrap()
    }

    fn running_hash(&self) -> String {
        let lines: Vec<String> = self
            .metrics()
            .lines()
            .filter_map(|l| l.strip_prefix("jobwarden_policy_info{hash=\""))
            .map(|rest| rest.split('"').next().unwrap().to_owned())
            .collect();
        assert_eq!(lines.len(), 1, "one running policy: {}", self.metrics());
        lines[0].clone()
    }
}

const FIRST: &str = "allowedManagedBy: [example.com/first]\n";
const SECOND: &str = "allowedManagedBy: [example.com/second]\n";

#[tokio::test]
async fn a_swapped_valid_policy_is_applied_whole() {
    let mut mounted = Mounted::new(FIRST);
    let mut f = follow(&mounted.file());
    let mut changes = f.feed.subscribe();
    assert_eq!(f.reloads("applied"), 0);
    assert_eq!(f.reloads("refused"), 0);
    assert_eq!(f.running_hash(), content_hash(FIRST.as_bytes()));

    // Nothing new: nothing happens.
    f.follower.look().await;
    assert!(!changes.has_changed().unwrap());

    mounted.swap(SECOND);
    f.follower.look().await;
    assert!(changes.has_changed().unwrap());
    assert_eq!(
        changes.borrow_and_update().allowed_managed_by,
        ["example.com/second"]
    );
    assert_eq!(f.feed.current().allowed_managed_by, ["example.com/second"]);
    assert_eq!(f.reloads("applied"), 1);
    assert_eq!(f.running_hash(), content_hash(SECOND.as_bytes()));

    // Read again, the same text is not applied twice.
    f.follower.look().await;
    assert!(!changes.has_changed().unwrap());
    assert_eq!(f.reloads("applied"), 1);
}

#[tokio::test]
async fn an_invalid_policy_is_refused_once_and_the_running_one_stays() {
    let mut mounted = Mounted::new(FIRST);
    let mut f = follow(&mounted.file());
    let changes = f.feed.subscribe();
    let invalid = "allowedManagedBy: [example.com/x]\nresumee: {}\n";
    mounted.swap(invalid);
    f.follower.look().await;
    f.follower.look().await;
    assert!(!changes.has_changed().unwrap());
    assert_eq!(f.feed.current().allowed_managed_by, ["example.com/first"]);
    assert_eq!(f.reloads("refused"), 1, "said once, not every poll");
    assert_eq!(f.reloads("applied"), 0);
    assert_eq!(f.running_hash(), content_hash(FIRST.as_bytes()));
    assert!(
        !f.metrics()
            .contains("jobwarden_policy_last_refused_timestamp_seconds 0\n"),
        "{}",
        f.metrics()
    );

    // The same bad text written again after a good one is refused again.
    mounted.swap(SECOND);
    f.follower.look().await;
    mounted.swap(invalid);
    f.follower.look().await;
    assert_eq!(f.reloads("refused"), 2);
    assert_eq!(f.feed.current().allowed_managed_by, ["example.com/second"]);
}

#[tokio::test]
async fn refusals_are_in_the_words_serve_uses_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.yaml");
    std::fs::write(&file, FIRST).unwrap();
    let f = follow(&file);
    let followed = f.follower.followed.clone();
    let running = f.feed.current();
    let cases: &[(&[u8], &str)] = &[
        (b"resumee: {}\n", "unknown field `resumee`"),
        (
            b"resume:\n  serviceAccounts: [just-a-name]\n",
            "must be written namespace/name",
        ),
        (b"\xff\xfe", "cannot read the policy file"),
    ];
    for (text, words) in cases {
        std::fs::write(&file, text).unwrap();
        let at_start = crate::error_chain::error_chain(&load_policy(&file).unwrap_err());
        assert!(at_start.contains(words), "{at_start}");
        let judged = judge(
            &followed,
            &running,
            Ok(text),
            |bytes| parse_policy_bytes(bytes, &file),
            &PolicyVetoes::default(),
        );
        match judged {
            Judgement::Refused { reason, .. } => assert_eq!(reason, at_start),
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

fn load_policy(file: &Path) -> Result<Policy, PolicyError> {
    crate::config::load_policy_file(file)
}

#[tokio::test]
async fn a_veto_refuses_like_an_invalid_file() {
    let mut mounted = Mounted::new("dispatch:\n  workers: [{name: east, local: true}]\n");
    let mut f = follow(&mounted.file());
    let registration = f
        .feed
        .register_veto("dispatcher", |running: &Policy, new: &Policy| {
            let gone: Vec<&str> = running
                .dispatch
                .workers
                .iter()
                .filter(|w| new.dispatch.worker(&w.name).is_none())
                .map(|w| w.name.as_str())
                .collect();
            match gone.as_slice() {
                [] => Ok(()),
                gone => Err(format!("worker {gone:?} still has Jobs")),
            }
        });
    mounted.swap("{}\n");
    f.follower.look().await;
    assert_eq!(f.reloads("refused"), 1);
    assert_eq!(f.feed.current().dispatch.workers.len(), 1);
    match judge(
        &f.follower.followed.clone(),
        &f.feed.current(),
        Ok(b"{}\n  "),
        |bytes| parse_policy_bytes(bytes, Path::new("p")),
        f.feed.vetoes(),
    ) {
        Judgement::Refused { reason, .. } => assert_eq!(
            reason,
            "refused by the dispatcher: worker [\"east\"] still has Jobs"
        ),
        other => panic!("{other:?}"),
    }

    // Its owner gone, the veto goes with it; the same text, written again, now applies.
    drop(registration);
    mounted.swap("dispatch: {}\n");
    f.follower.look().await;
    assert_eq!(f.reloads("applied"), 1);
    assert!(f.feed.current().dispatch.workers.is_empty());
}

#[tokio::test]
async fn a_vetoed_text_is_put_to_the_vetoes_again_and_applied_once_they_pass() {
    let mut mounted = Mounted::new("dispatch:\n  workers: [{name: east, local: true}]\n");
    let mut f = follow(&mounted.file());
    let jobs_left = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let left = jobs_left.clone();
    let _registration =
        f.feed
            .register_veto("dispatcher", move |_: &Policy, _: &Policy| {
                match left.load(std::sync::atomic::Ordering::SeqCst) {
                    0 => Ok(()),
                    n => Err(format!("worker east still has {n} Job")),
                }
            });
    mounted.swap("{}\n");
    f.follower.look().await;
    f.follower.look().await;
    // Refused once, said once, while its Job runs.
    assert_eq!(f.reloads("refused"), 1);
    assert_eq!(f.feed.current().dispatch.workers.len(), 1);
    // What holds it changed (a replica's view caught up, a Job of two ended): said again, once.
    jobs_left.store(2, std::sync::atomic::Ordering::SeqCst);
    f.follower.look().await;
    f.follower.look().await;
    assert_eq!(f.reloads("refused"), 2);
    jobs_left.store(0, std::sync::atomic::Ordering::SeqCst);
    f.follower.look().await;
    assert_eq!(f.reloads("applied"), 1);
    assert!(f.feed.current().dispatch.workers.is_empty());
}

#[tokio::test]
async fn a_file_that_disappears_keeps_the_running_policy() {
    let mounted = Mounted::new(FIRST);
    let mut f = follow(&mounted.file());
    std::fs::remove_file(mounted.dir.path().join("..data")).unwrap();
    f.follower.look().await;
    f.follower.look().await;
    assert_eq!(f.reloads("refused"), 1);
    assert_eq!(f.feed.current().allowed_managed_by, ["example.com/first"]);
}

#[tokio::test]
async fn the_poll_takes_a_swap_up_by_itself() {
    let mut mounted = Mounted::new(FIRST);
    let f = follow(&mounted.file());
    let mut changes = f.feed.subscribe();
    let stop = CancellationToken::new();
    let running = tokio::spawn(f.follower.run(stop.clone()));
    mounted.swap(SECOND);
    // The poll runs every 20 ms; this waits for the change itself, the bound only ends a hang.
    tokio::time::timeout(Duration::from_secs(30), changes.changed())
        .await
        .expect("the swap is taken up")
        .unwrap();
    assert_eq!(
        changes.borrow_and_update().allowed_managed_by,
        ["example.com/second"]
    );
    stop.cancel();
    running.await.unwrap();
}

#[test]
fn a_fixed_feed_never_changes_and_never_ends() {
    let feed = PolicyFeed::fixed(Policy::default());
    let changes = feed.subscribe();
    assert!(!changes.has_changed().unwrap(), "its sender is kept");
    assert_eq!(*feed.current(), Policy::default());
    let _ = Arc::clone(&feed.current());
}
