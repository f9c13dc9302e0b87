//! `jobwarden serve`: the webhook server, with the reconcile loop handed to it as a hook so the
//! server crate never depends on the controller crate.

use jobwarden_server::{ControllerHook, ControllerStart, ServeArgs};

use super::Outcome;

pub fn run(args: ServeArgs) -> Outcome {
    // Held until `run` returns, so the last lines (the drain) are flushed before exit.
    let _logging = jobwarden_server::init_logging(args.log_format);
    let start_controller: ControllerHook = Box::new(|start: ControllerStart<'_>| {
        let metrics = jobwarden_controller::register_metrics(start.registry);
        let config = jobwarden_controller::ControllerConfig {
            controller_name: start.controller_name,
            // In a cluster this is the pod's own namespace, where the RBAC grants Leases.
            lease_namespace: start.client.default_namespace().to_owned(),
            ..Default::default()
        };
        Box::pin(jobwarden_controller::run(
            start.client,
            config,
            metrics,
            start.shutdown,
        ))
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("jobwarden serve: cannot start the runtime: {e}");
            return Outcome::Rejected;
        }
    };
    match runtime.block_on(jobwarden_server::run(args, Some(start_controller))) {
        Ok(()) => Outcome::Ok,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "jobwarden serve stopped");
            eprintln!("jobwarden serve: {e:#}");
            Outcome::Rejected
        }
    }
}
