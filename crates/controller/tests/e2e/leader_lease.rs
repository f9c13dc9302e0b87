//! The Lease calls of leader election on a real API server: the resourceVersion read is a
//! precondition of every write (a stale one is a conflict, never a lost write), a Lease that
//! exists cannot be created again, and a write leaves the Lease's labels alone.

use jobwarden_runtime::leader::{KubeLeaseStore, LeaseError, LeaseStore};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::support::*;

fn held_by(who: &str) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(who.to_owned()),
        lease_duration_seconds: Some(15),
        ..LeaseSpec::default()
    }
}

#[tokio::test]
async fn lease_writes_are_preconditioned_on_the_version_read() {
    let Some(env) = setup_without_controller("lease").await else {
        return;
    };
    let store = KubeLeaseStore::new(env.client.clone(), &env.ns, "election");
    assert!(matches!(store.get().await, Ok(None)), "no Lease yet");
    store.create(&held_by("a")).await.expect("created");
    let created = store.create(&held_by("b")).await;
    assert!(matches!(created, Err(LeaseError::Conflict)), "{created:?}");
    let (spec, version) = store.get().await.expect("read").expect("there");
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));

    // Someone labels the Lease meanwhile: the version read is stale now.
    Api::<Lease>::namespaced(env.client.clone(), &env.ns)
        .patch(
            "election",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "batch"}}})),
        )
        .await
        .expect("labelled");
    let updated = store.update(&held_by("b"), &version).await;
    assert!(matches!(updated, Err(LeaseError::Conflict)), "{updated:?}");
    let (spec, version) = store.get().await.expect("read").expect("there");
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some("a"),
        "nothing written"
    );
    store
        .update(&held_by("b"), &version)
        .await
        .expect("written");
    let lease = Api::<Lease>::namespaced(env.client.clone(), &env.ns)
        .get("election")
        .await
        .expect("the Lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("b")
    );
    assert_eq!(
        lease
            .metadata
            .labels
            .and_then(|l| l.get("team").cloned())
            .as_deref(),
        Some("batch")
    );
    env.teardown().await;
}
