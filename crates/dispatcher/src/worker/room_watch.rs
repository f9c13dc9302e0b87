//! The watches that fill a worker's view (`worker_view`): its Nodes, and its pods that have
//! not finished (a field selector on the phase), each kept only as the little placement needs
//! (`room::NodeView`, `room::PodView`), never as the objects. A list the worker's role refuses
//! puts the worker on counting, and is asked again now and then: a worker's API server just
//! restarted refuses every list for a moment, until its RBAC cache is filled. A change that may free room wakes the Jobs waiting for room,
//! at most once a [`ROOM_WAKE_EVERY`] per worker; a pod of one of the dispatcher's copies
//! found unschedulable wakes that Job, whose move rule reads it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::Notify;

use crate::room::{NodeView, PodView};
use crate::worker::link::{Changed, Link, LinkContext, quick_backoff};
use crate::worker::view::Listed;

/// How often, at most, a worker's room changes wake the Jobs waiting for room: a burst of pod
/// changes (a Job of 100 pods ending) is one look, not a hundred.
pub const ROOM_WAKE_EVERY: Duration = Duration::from_secs(1);

/// How long after a refused list it is asked again, first and at most (doubled in between): a
/// restarted API server refuses for a few seconds (its 403 says the role is "not found"), and
/// a role that truly may not list is asked only once a minute.
pub const REFUSED_RETRY_FIRST: Duration = Duration::from_secs(5);
pub const REFUSED_RETRY_MOST: Duration = Duration::from_secs(60);

/// Field selector of the pods that hold room: those not finished.
pub const UNFINISHED_PODS: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Watches `link`'s Nodes (unless it is `capacity: Unbounded`) and unfinished pods through
/// `client`, until aborted. The view starts afresh.
pub async fn run(link: Arc<Link>, ctx: Arc<LinkContext>, client: Client) {
    link.view.reset();
    let freed = Arc::new(Notify::new());
    let mut tasks = tokio::task::JoinSet::new();
    if link.view.is_unbounded() {
        // Only the move rule reads an unbounded worker's pods: nodes say nothing of its room.
        link.view.listed(Listed::Nodes);
    } else {
        let (link, client, freed) = (link.clone(), client.clone(), freed.clone());
        tasks.spawn(async move {
            asking_again(&link, Listed::Nodes, || nodes(&link, &client, &freed)).await;
        });
    }
    {
        let (link, ctx, freed) = (link.clone(), ctx.clone(), freed.clone());
        tasks.spawn(async move {
            asking_again(&link, Listed::Pods, || pods(&link, &ctx, &client, &freed)).await;
        });
    }
    tasks.spawn(wake_on_room(link, ctx, freed));
    while tasks.join_next().await.is_some() {}
}

/// At most once a [`ROOM_WAKE_EVERY`], the Jobs waiting for room are woken after a change.
async fn wake_on_room(link: Arc<Link>, ctx: Arc<LinkContext>, freed: Arc<Notify>) {
    loop {
        freed.notified().await;
        let _ = ctx.changes.send(Changed::Room(link.name().to_owned()));
        tokio::time::sleep(ROOM_WAKE_EVERY).await;
    }
}

/// Whether the worker's role refused the request: asked again only after a pause
/// ([`asking_again`]), not at the watch's quick back-off.
fn refused(error: &watcher::Error) -> Option<&kube::core::Status> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s))
            if s.code == 403 =>
        {
            Some(s)
        }
        _ => None,
    }
}

/// How a watch of the room ended: its list or watch refused (and whether it had listed
/// before), or its stream done.
enum Ended {
    Refused { message: String, had_listed: bool },
    Done,
}

/// Runs `watch` again after each refusal, the worker on counting meanwhile, at a pace from
/// [`REFUSED_RETRY_FIRST`] to [`REFUSED_RETRY_MOST`]; the pace starts again after a list
/// taken.
async fn asking_again<F, Fut>(link: &Link, what: Listed, mut watch: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Ended>,
{
    let mut pause = REFUSED_RETRY_FIRST;
    while let Ended::Refused {
        message,
        had_listed,
    } = watch().await
    {
        if had_listed {
            pause = REFUSED_RETRY_FIRST;
        }
        to_counting(link, what, &message);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(REFUSED_RETRY_MOST);
    }
}

fn to_counting(link: &Link, what: Listed, message: &str) {
    let why = format!(
        "its role may not list {} cluster-wide ({message}); Jobs are placed there by count",
        what.plural(),
    );
    if link.view.counting(what, why.clone()) {
        tracing::warn!(worker = link.name(), "{why}");
    } else {
        tracing::debug!(worker = link.name(), "{why}");
    }
}

/// Marks a list of `what` taken; says so when it was refused before.
fn listed(link: &Link, what: Listed) {
    if link.view.listed(what) {
        tracing::info!(
            worker = link.name(),
            "its role lists {} again; Jobs are placed there by room",
            what.plural()
        );
    }
}

async fn nodes(link: &Link, client: &Client, freed: &Notify) -> Ended {
    let mut had_listed = false;
    let events = watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
        .backoff(quick_backoff());
    let mut events = std::pin::pin!(events);
    let mut relisted: Option<Vec<NodeView>> = None;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => relisted = Some(Vec::new()),
            Ok(watcher::Event::InitApply(node)) => {
                if let Some(list) = relisted.as_mut() {
                    list.push(NodeView::from_node(&node));
                }
            }
            Ok(watcher::Event::InitDone) => {
                let list = relisted.take().unwrap_or_default();
                link.view.update(|room| {
                    let names: HashSet<&str> = list.iter().map(|n| &*n.name).collect();
                    let gone: Vec<Box<str>> = room
                        .nodes()
                        .filter(|n| !names.contains(&*n.name))
                        .map(|n| n.name.clone())
                        .collect();
                    for name in gone {
                        room.delete_node(&name);
                    }
                    for node in list {
                        room.apply_node(node);
                    }
                });
                listed(link, Listed::Nodes);
                had_listed = true;
                freed.notify_one();
            }
            Ok(watcher::Event::Apply(node)) => {
                link.view
                    .update(|room| room.apply_node(NodeView::from_node(&node)));
                freed.notify_one();
            }
            Ok(watcher::Event::Delete(node)) => {
                if let Some(name) = node.metadata.name.as_deref() {
                    link.view.update(|room| room.delete_node(name));
                }
            }
            Err(error) => {
                if let Some(status) = refused(&error) {
                    let message = status.message.clone();
                    return Ended::Refused {
                        message,
                        had_listed,
                    };
                }
                tracing::debug!(worker = link.name(), %error, "watching nodes");
            }
        }
    }
    Ended::Done
}

async fn pods(link: &Link, ctx: &LinkContext, client: &Client, freed: &Notify) -> Ended {
    let mut had_listed = false;
    let config = watcher::Config::default().fields(UNFINISHED_PODS);
    let events = watcher(Api::<Pod>::all(client.clone()), config).backoff(quick_backoff());
    let mut events = std::pin::pin!(events);
    let mut relisted: Option<Vec<(String, PodView)>> = None;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => relisted = Some(Vec::new()),
            Ok(watcher::Event::InitApply(pod)) => {
                if let (Some(list), Some(uid), Some(view)) = (
                    relisted.as_mut(),
                    pod.metadata.uid.clone(),
                    PodView::from_pod(&pod),
                ) {
                    list.push((uid, view));
                }
            }
            Ok(watcher::Event::InitDone) => {
                let list = relisted.take().unwrap_or_default();
                link.view.update(|room| {
                    let uids: HashSet<&str> = list.iter().map(|(u, _)| u.as_str()).collect();
                    let gone: Vec<String> = room
                        .pod_uids()
                        .filter(|u| !uids.contains(u))
                        .map(str::to_owned)
                        .collect();
                    for uid in gone {
                        room.delete_pod(&uid);
                    }
                    for (uid, view) in list {
                        room.apply_pod(&uid, view);
                    }
                });
                listed(link, Listed::Pods);
                had_listed = true;
                freed.notify_one();
            }
            Ok(watcher::Event::Apply(pod)) => {
                let Some(uid) = pod.metadata.uid.as_deref() else {
                    continue;
                };
                match PodView::from_pod(&pod) {
                    Some(view) => {
                        let unschedulable = view.unschedulable.is_some();
                        link.view.update(|room| room.apply_pod(uid, view));
                        if unschedulable {
                            wake_copy(link, ctx, &pod);
                        }
                    }
                    None => link.view.update(|room| room.delete_pod(uid)),
                }
                freed.notify_one();
            }
            Ok(watcher::Event::Delete(pod)) => {
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    link.view.update(|room| room.delete_pod(uid));
                }
                freed.notify_one();
            }
            Err(error) => {
                if let Some(status) = refused(&error) {
                    let message = status.message.clone();
                    return Ended::Refused {
                        message,
                        had_listed,
                    };
                }
                tracing::debug!(worker = link.name(), %error, "watching pods");
            }
        }
    }
    Ended::Done
}

/// A pod of one of the dispatcher's copies changed in a way its move rule reads: its Job is
/// synced (batched, as a change of the copy is).
fn wake_copy(link: &Link, ctx: &LinkContext, pod: &Pod) {
    if link.is_local() {
        return;
    }
    let (Some(ns), Some(owner)) = (
        pod.metadata.namespace.as_deref(),
        pod.metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "Job"),
    ) else {
        return;
    };
    // The link's copy cache holds only the dispatcher's copies (selected by their labels).
    if link
        .cached(ns, &owner.name)
        .is_some_and(|copy| copy.uid() == owner.uid)
    {
        let _ = ctx.changes.send(Changed::Copy {
            namespace: ns.to_owned(),
            name: owner.name.clone(),
        });
    }
}
