//! A worker's connection, kept for as long as its link is supervised: each accepted kubeconfig
//! read into a client, the copies watched, the worker probed every few seconds, and the
//! copies there whose Job moved or is gone deleted (the fence) before it counts as ready.

use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt as _, stream::BoxStream};
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::task::JoinSet;

use jobwarden_admission::policy::WorkerSource;
use jobwarden_runtime::client::work_client;

use crate::api::{self, ApiError};
use crate::placement::Reach;
use crate::worker::credential_source::{self, Credentials};
use crate::worker::credentials::{self, RefusalReason};
use crate::worker::link::{
    Changed, Link, LinkContext, PROBE_EVERY, PROBE_TIMEOUT, State, collect, quick_backoff,
};
use crate::worker::room_watch;
use jobwarden_runtime::job_cache::CachedJob;

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probed {
    Answers,
    /// It answers, and did not at the last probe.
    AnswersAgain,
    Lost,
}

impl Link {
    /// Runs until `stop`: reads the credentials as they change and keeps a connection made
    /// from each accepted one.
    pub async fn supervise(self: Arc<Self>, ctx: Arc<LinkContext>) {
        if self.is_local() {
            // This cluster answers whenever the dispatcher runs at all; registered at 0 like
            // every worker, it would read as lost (and page) for as long as the leader runs.
            ctx.metrics.worker_reach(self.name(), true, None);
            // Judged by this cluster's own nodes, as any worker by its.
            let client = ctx.management.client().clone();
            return room_watch::run(self.clone(), ctx.clone(), client).await;
        }
        let mut credentials: BoxStream<'static, Credentials> = match self.spec.source() {
            Some(WorkerSource::Secret(secret)) => credential_source::from_secret(
                ctx.management.client().clone(),
                ctx.namespace.clone(),
                secret.to_owned(),
            )
            .boxed(),
            Some(WorkerSource::File(path)) => {
                credential_source::from_file(path.into(), credential_source::FILE_POLL).boxed()
            }
            // The policy's problems refuse these before the dispatcher starts.
            Some(WorkerSource::Local) | None => return,
        };
        // A set, not a bare handle: when this task is aborted (the term ends, or the policy's
        // workers change) the connection goes with it, rather than probing a worker nobody
        // holds any more (and bringing its metrics back).
        let mut connection: JoinSet<()> = JoinSet::new();
        while let Some(next) = credentials.next().await {
            connection.abort_all();
            {
                let mut s = self.state();
                *s = State::default();
            }
            match self.accept(&ctx, next).await {
                Ok(api) => {
                    self.set_reach(&ctx, Reach::Connecting, None);
                    connection.spawn(self.clone().connected(ctx.clone(), api));
                }
                Err((reason, message)) => {
                    tracing::warn!(
                        worker = self.name(),
                        reason = reason.label(),
                        "{message}; the worker is not used"
                    );
                    self.set_reach(&ctx, Reach::Refused(message), Some(reason));
                }
            }
        }
        connection.abort_all();
    }

    /// A client from the credentials, or why not.
    async fn accept(
        &self,
        ctx: &LinkContext,
        credentials: Credentials,
    ) -> Result<api::Worker, (RefusalReason, String)> {
        let text = match credentials {
            Credentials::Kubeconfig(text) => text,
            Credentials::Missing(why) => return Err((RefusalReason::Missing, why)),
        };
        let kubeconfig: Kubeconfig = credentials::check(&text).map_err(|r| {
            (
                r.reason,
                format!("its kubeconfig is refused: {}", r.message),
            )
        })?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| {
                    (
                        RefusalReason::Unreadable,
                        format!("its kubeconfig cannot be used: {e}"),
                    )
                })?;
        let component = format!("{}/{}", ctx.component, self.name());
        let work = work_client(config, &component, ctx.worker_limit).map_err(|e| {
            (
                RefusalReason::Unreadable,
                format!("no client can be made from its kubeconfig: {e}"),
            )
        })?;
        self.state().answers = Some(work.answers.clone());
        Ok(api::Worker::new(work.client, ctx.leading.clone()))
    }

    /// The copy watches and the prober, until aborted (the credentials changed) or the term
    /// ends.
    async fn connected(self: Arc<Self>, ctx: Arc<LinkContext>, api: api::Worker) {
        self.state().api = Some(api.clone());
        let mut watches = self.watch_copies(&ctx, &api);
        watches.spawn(room_watch::run(
            self.clone(),
            ctx.clone(),
            api.client().clone(),
        ));
        let mut ticks = tokio::time::interval(PROBE_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = self.listed_now.notified() => {}
            }
            if self.probe(&ctx, &api).await == Probed::AnswersAgain {
                // A watch that lost its API server resumes from where it was, at its own
                // back-off's pace and with nothing to say that it did: list afresh instead,
                // and be ready only once that list is in.
                watches.abort_all();
                watches = self.watch_copies(&ctx, &api);
                watches.spawn(room_watch::run(
                    self.clone(),
                    ctx.clone(),
                    api.client().clone(),
                ));
            }
        }
    }

    /// The copy watches, one per scope, each with a store of its own, listed afresh.
    fn watch_copies(self: &Arc<Self>, ctx: &Arc<LinkContext>, api: &api::Worker) -> JoinSet<()> {
        let scopes = self.scopes();
        {
            let mut s = self.state();
            s.ready = false;
            s.listed = vec![false; scopes.len()];
            s.copies.clear();
        }
        let mut watches = JoinSet::new();
        for (i, scope) in scopes.iter().enumerate() {
            let jobs: Api<CachedJob> = match scope {
                Some(ns) => Api::namespaced(api.client().clone(), ns),
                None => Api::all(api.client().clone()),
            };
            let (store, writer) = reflector::store::<CachedJob>();
            self.state().copies.push((scope.clone(), store));
            let config = watcher::Config::default()
                .labels(&crate::copy::copies_selector(&ctx.origin, self.name()));
            let events =
                reflector::reflector(writer, watcher(jobs, config).backoff(quick_backoff()));
            let (link, ctx) = (self.clone(), ctx.clone());
            watches.spawn(async move {
                let mut events = std::pin::pin!(events);
                while let Some(event) = events.next().await {
                    link.copy_event(&ctx, i, event);
                }
            });
        }
        watches
    }

    fn copy_event(
        &self,
        ctx: &LinkContext,
        scope: usize,
        event: Result<watcher::Event<CachedJob>, watcher::Error>,
    ) {
        match event {
            Ok(watcher::Event::Apply(copy) | watcher::Event::Delete(copy)) => {
                let key = format!("{}/{}", copy.namespace(), copy.name());
                ctx.pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(key)
                    .or_insert_with(Instant::now);
                let _ = ctx.changes.send(Changed::Copy {
                    namespace: copy.namespace().to_owned(),
                    name: copy.name().to_owned(),
                });
            }
            Ok(watcher::Event::InitDone) => {
                let mut s = self.state();
                if let Some(listed) = s.listed.get_mut(scope) {
                    *listed = true;
                }
                if !s.ready && s.all_listed() {
                    // `notify_one` keeps the word for a prober busy probing.
                    self.listed_now.notify_one();
                }
            }
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Err(error) => {
                tracing::debug!(worker = self.name(), %error, "watching copies");
            }
        }
    }

    /// One probe: does the worker answer with our credentials?
    async fn probe(&self, ctx: &LinkContext, api: &api::Worker) -> Probed {
        let asked = tokio::time::Instant::now();
        let answered =
            match tokio::time::timeout(PROBE_TIMEOUT, api.client().apiserver_version()).await {
                Ok(Ok(_)) => true,
                // Every request would be refused alike: as good as no answer.
                Ok(Err(kube::Error::Api(status))) => status.code != 401,
                // A probe stuck behind a busy worker's queue while its other requests are answered
                // is a busy worker, not a lost one.
                Ok(Err(_)) | Err(_) => {
                    let answers = self.state().answers.clone();
                    answers.is_some_and(|a| a.since(asked))
                }
            };
        let since = {
            let mut s = self.state();
            if answered {
                s.last_answer = Some(Instant::now());
            }
            s.last_answer.map(|t| t.elapsed().as_secs_f64())
        };
        ctx.metrics.last_answer(self.name(), since.unwrap_or(0.0));
        if !answered {
            if self.reach() != Reach::Lost {
                tracing::warn!(worker = self.name(), "the worker does not answer");
            }
            self.set_reach(ctx, Reach::Lost, None);
            return Probed::Lost;
        }
        if self.reach() == Reach::Lost {
            tracing::info!(
                worker = self.name(),
                "the worker answers again; listing and fencing its copies"
            );
            self.set_reach(ctx, Reach::Answers, None);
            return Probed::AnswersAgain;
        }
        self.set_reach(ctx, Reach::Answers, None);
        let (ready, listed) = {
            let s = self.state();
            (s.ready, s.all_listed())
        };
        if ready || !listed {
            return Probed::Answers;
        }
        match self.fence(ctx, api).await {
            Ok(()) => {
                self.state().ready = true;
                let _ = ctx.changes.send(Changed::Worker(self.name().to_owned()));
            }
            Err(error) => {
                tracing::warn!(worker = self.name(), %error, "fencing the worker's copies; trying again");
            }
        }
        Probed::Answers
    }

    /// Deletes the copies there whose Job moved elsewhere or is gone, from a fresh list.
    async fn fence(&self, ctx: &LinkContext, api: &api::Worker) -> Result<(), ApiError> {
        for scope in self.scopes() {
            let selector = crate::copy::copies_selector(&ctx.origin, self.name());
            for copy in api.list_copies(scope.as_deref(), &selector).await? {
                collect(ctx, self.name(), api, &copy).await?;
            }
        }
        Ok(())
    }
}
