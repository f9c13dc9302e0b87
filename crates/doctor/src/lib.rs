//! `jobwarden doctor`: is this cluster ready for jobwarden, and is jobwarden healthy in it.
//! Grouped checks like `linkerd check`'s, each with what is wrong, how to fix it and a link to
//! its troubleshooting entry; the API server's Job features found out by server-side dry runs,
//! as `cmctl check api` proves cert-manager's webhook through the API server.
//!
//! * [`check`] and [`catalogue`]: a check as data, and every check doctor makes (each one's
//!   name is its heading on the troubleshooting page).
//! * Pure decisions, answers in and checks out: [`api_server`], [`features`] (the dry-run
//!   probes and what a dropped field means), [`pre`] (`--pre`: permission to install, cert-
//!   manager, the namespace, Pod Security, webhook names; [`pre::install`] reads the rendered
//!   manifests, [`pre::shipped`] holds deploy/'s, built in), [`installed`] (Deployments, the Lease, permissions, registration, the webhook
//!   probes, the serving certificate, what `audit` would report), [`dispatch`] (each worker
//!   as the dispatcher meets it, and the workers its Jobs find lost).
//! * [`read`]: the thin shell, read-only but for server-side dry runs and access reviews, with
//!   the caller's credentials; [`run::diagnose`] runs it all once.
//! * [`text`]: the report as text (`-o json` is [`Check`]'s serialization, one per line).
//!
//! It never writes, never imports the server or the controller (the dispatcher's crate only for
//! its pure judges: a worker's kubeconfig, the Jobs' annotations): what it knows of `serve`'s
//! command line it is told through [`installed::deployment::ServeCommandLine`].

pub mod access;
pub mod answer;
pub mod api_server;
pub mod catalogue;
pub mod check;
pub mod dispatch;
pub mod features;
pub mod installed;
pub mod pre;
pub mod read;
pub mod run;
pub mod text;

pub use check::{Check, Group, Kind, Report, Status, Verdict};
pub use installed::deployment::{ServeCommandLine, ServeFlags};
pub use pre::install::Install;
pub use read::Cluster;
pub use run::{Memo, Options, diagnose};

#[cfg(test)]
mod tests;
