//! The names jobwarden shares with the rest of the cluster: controller names, upstream's labels,
//! annotations, condition reasons and messages, and jobwarden's own tracking finalizer. One
//! place for the webhook, the controller and the CLI. Constants only; nothing here decides.

/// jobwarden's own controller: the default `spec.managedBy` value its reconcile loop runs.
pub const JOBWARDEN_CONTROLLER_NAME: &str = "jobwarden.io/job-controller";
/// jobwarden's dispatcher: the default `spec.managedBy` value of the Jobs it sends to worker
/// clusters (the policy's `dispatch.controllerName`).
pub const DISPATCHER_NAME: &str = "jobwarden.io/dispatcher";
/// The built-in Job controller's reserved name: a Job naming it is run by the built-in one.
pub const BUILT_IN_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";
/// The `coordination.k8s.io` Lease jobwarden's replicas elect their leader with, in the
/// namespace they run in (the RBAC of every install names it).
pub const LEASE_NAME: &str = "jobwarden-job-controller";
/// On that Lease, written by its holder with every renewal: the commit its binary was built
/// from (`jobwarden --version`), which `doctor` sets beside its own. Image labels cannot be
/// read from the API, so the running replica says it.
pub const LEASE_REVISION_ANNOTATION: &str = "jobwarden.io/revision";

/// On that Lease, written by the leader with every renewal while it dispatches: how it knows
/// each worker's room, as JSON (`{"east": {"state": "fresh", "lastChange": "…"}}`; `{}` when
/// it does not dispatch), so that `doctor` reads it with the rights it already asks for.
pub const LEASE_WORKER_VIEWS_ANNOTATION: &str = "jobwarden.io/worker-views";

/// On that Lease, written by the leader with every renewal while it dispatches: how its status
/// writes wait for its request budget on the management cluster, as JSON
/// (`{"statusWritesWaiting": 3, "longestWaitSeconds": 1.2}`: the longest wait of the last minute
/// or two; `{}` when it does not dispatch), for `doctor`.
pub const LEASE_MANAGEMENT_BUDGET_ANNOTATION: &str = "jobwarden.io/management-budget";

/// jobwarden's tracking finalizer. Upstream uses `batch.kubernetes.io/job-tracking`; a separate
/// name means the built-in controller's orphan clean-up never strips ours, and ours never
/// strips theirs.
pub const TRACKING_FINALIZER: &str = "jobwarden.io/job-tracking";

/// On every pod jobwarden creates: the controller name that created it, so a jobwarden
/// controller only ever releases the orphaned pods of its own (several may share a cluster).
pub const CREATED_BY_ANNOTATION: &str = "jobwarden.io/created-by";

pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
/// Both a label and an annotation on Indexed pods, as upstream (PodIndexLabel is GA).
pub const COMPLETION_INDEX_KEY: &str = "batch.kubernetes.io/job-completion-index";
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

pub const NON_INDEXED: &str = "NonIndexed";
pub const INDEXED: &str = "Indexed";

pub const POLICY_FAILED: &str = "Failed";
pub const POLICY_TERMINATING_OR_FAILED: &str = "TerminatingOrFailed";

pub const REASON_COMPLETIONS_REACHED: &str = "CompletionsReached";
pub const MESSAGE_COMPLETIONS_REACHED: &str = "Reached expected number of succeeded pods";
pub const REASON_BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
pub const MESSAGE_BACKOFF_LIMIT_EXCEEDED: &str = "Job has reached the specified backoff limit";
pub const REASON_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
pub const MESSAGE_DEADLINE_EXCEEDED: &str = "Job was active longer than specified deadline";
pub const REASON_JOB_SUSPENDED: &str = "JobSuspended";
pub const MESSAGE_JOB_SUSPENDED: &str = "Job suspended";
pub const REASON_JOB_RESUMED: &str = "JobResumed";
pub const MESSAGE_JOB_RESUMED: &str = "Job resumed";

/// Per-index back-off (KEP-3850): the failures of an index so far, carried from a failed pod
/// to its replacement, and those a pod failure policy `Ignore` rule excused.
pub const INDEX_FAILURE_COUNT_KEY: &str = "batch.kubernetes.io/job-index-failure-count";
pub const INDEX_IGNORED_FAILURE_COUNT_KEY: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";

/// Upstream's reason for a Job a `FailJob` rule failed (jobwarden's controller names the rule:
/// `PodFailurePolicy_{name}`, KEP-4443).
pub const REASON_POD_FAILURE_POLICY: &str = "PodFailurePolicy";
pub const REASON_FAILED_INDEXES: &str = "FailedIndexes";
pub const MESSAGE_FAILED_INDEXES: &str = "Job has failed indexes";
pub const REASON_MAX_FAILED_INDEXES_EXCEEDED: &str = "MaxFailedIndexesExceeded";
pub const MESSAGE_MAX_FAILED_INDEXES_EXCEEDED: &str =
    "Job has exceeded the specified maximal number of failed indexes";
pub const REASON_SUCCESS_POLICY: &str = "SuccessPolicy";

/// The fields of the Job API's status a Job's controller writes (jobwarden's Job controller,
/// and the dispatcher mirroring a copy's).
pub const JOB_STATUS_FIELDS: [&str; 11] = [
    "active",
    "ready",
    "terminating",
    "succeeded",
    "failed",
    "completedIndexes",
    "failedIndexes",
    "uncountedTerminatedPods",
    "startTime",
    "completionTime",
    "conditions",
];

/// The dispatcher's record on the user's Job: the worker its copy runs on, written before the
/// copy is made; only that worker's copy may write the Job's status.
pub const WORKER_ANNOTATION: &str = "jobwarden.io/worker";
/// A Job's own narrowing of the workers it may run on: `east,west`.
pub const WORKERS_ANNOTATION: &str = "jobwarden.io/workers";
/// What happens to a Job whose worker is lost: `Redispatch` (the default), `Wait` or `Fail`.
pub const ON_WORKER_LOST_ANNOTATION: &str = "jobwarden.io/on-worker-lost";
/// What happens to a Job whose worker is drained (the policy's `draining: true`): `Finish`
/// (the default: it stays to its end) or `Redispatch` (it moves at once).
pub const ON_WORKER_DRAIN_ANNOTATION: &str = "jobwarden.io/on-worker-drain";
/// When the dispatcher first saw the Job's worker lost (RFC 3339), written on the Job so that
/// a new leader takes up the clock where the old one left it; removed when the worker answers.
pub const WORKER_LOST_SINCE_ANNOTATION: &str = "jobwarden.io/worker-lost-since";
/// How long a Job's copy may stay unschedulable before the Job moves (whole seconds), over the
/// policy's `dispatch.unschedulableSeconds`.
pub const UNSCHEDULABLE_SECONDS_ANNOTATION: &str = "jobwarden.io/unschedulable-seconds";
/// How many times a Job may move because its copy could not be scheduled (default
/// [`DEFAULT_MAX_MOVES`]; 0: never).
pub const MAX_MOVES_ANNOTATION: &str = "jobwarden.io/max-moves";
/// The default of [`MAX_MOVES_ANNOTATION`].
pub const DEFAULT_MAX_MOVES: u32 = 3;
/// The dispatcher's record of the workers a Job left because its copy could not be scheduled
/// there, oldest first: they are not tried again, and their count is the Job's moves.
pub const MOVED_FROM_ANNOTATION: &str = "jobwarden.io/moved-from";
/// On every copy: the UID of the user's Job it is a copy of. A Job on a worker without it,
/// or with another, is not the dispatcher's copy of that Job, and is never touched.
pub const ORIGIN_UID_LABEL: &str = "jobwarden.io/origin-uid";
/// On every copy: the worker it was made for. Two workers of the policy may be one cluster
/// (its namespaces split between them): each sees, fences and deletes only its own copies.
pub const COPY_WORKER_LABEL: &str = "jobwarden.io/worker";
/// On every copy: which management cluster made it (several may share a worker).
pub const ORIGIN_LABEL: &str = "jobwarden.io/origin";
