//! A check as data: what doctor found about one thing, how bad it is, what to do about it and
//! where the troubleshooting page says more. Every decision in this crate returns these; the
//! text and JSON printed are renderings of them, never recomputed.

use serde::Serialize;
use serde::ser::SerializeMap as _;

/// The page every check's troubleshooting entry is on, but the dispatcher's.
pub const TROUBLESHOOTING_PAGE: &str = "docs/operations.md";

/// The page the dispatcher's checks' entries are on (its own page's Troubleshooting section).
pub const DISPATCH_TROUBLESHOOTING_PAGE: &str = "docs/dispatch.md";

/// A Markdown heading's anchor: lowercase, spaces to `-`, everything but letters, digits, `-`
/// and `_` left out (GitHub's rule, for the headings the troubleshooting page uses).
pub fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// How a check came out. Ordered by gravity: a report is as bad as its worst check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Did not apply here (nothing registered to probe, an install that does not use
    /// cert-manager), or could not run because another check failed first.
    Skipped,
    /// Could not be made: the caller may not read or try what it needs, or the API server gave
    /// no answer. Says nothing about the cluster, so it does not fail the run; but a run with
    /// one is never called healthy.
    Unknown,
    /// Worth fixing, but jobwarden works: does not fail the run.
    Warning,
    /// jobwarden cannot do its job until this is fixed: the run exits 1.
    Error,
}

impl Status {
    /// The mark a text line starts with, as `linkerd check` marks its lines.
    pub fn mark(self) -> &'static str {
        match self {
            Status::Ok => "✔",
            Status::Skipped => "-",
            Status::Unknown => "?",
            Status::Warning => "‼",
            Status::Error => "×",
        }
    }
}

/// The groups checks are printed in, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Group {
    /// The API server: reachable, who the caller is, and which Job API features it serves.
    ApiServer,
    /// `--pre`: may the caller install jobwarden here.
    PreInstall,
    /// The installed Deployments, their Lease, the ServiceAccounts' permissions.
    Jobwarden,
    /// The webhook configurations, the webhook answering through the API server, its
    /// certificate.
    Webhook,
    /// What `audit` would report today.
    StoredJobs,
    /// The dispatcher's worker clusters, from the dispatcher's point of view: its kubeconfig
    /// for each, the worker answering and taking it, its permissions there, the namespaces its
    /// Jobs need there; and the workers its Jobs find lost.
    Dispatch,
}

impl Group {
    pub fn title(self) -> &'static str {
        match self {
            Group::ApiServer => "API server",
            Group::PreInstall => "Before installing",
            Group::Jobwarden => "jobwarden",
            Group::Webhook => "Webhook",
            Group::StoredJobs => "Stored Jobs",
            Group::Dispatch => "Dispatch",
        }
    }

    /// The page its checks' troubleshooting entries are on.
    pub fn page(self) -> &'static str {
        match self {
            Group::Dispatch => DISPATCH_TROUBLESHOOTING_PAGE,
            _ => TROUBLESHOOTING_PAGE,
        }
    }
}

/// One thing doctor checks, as the troubleshooting page names it: its heading there is the
/// name, so the link's anchor is the name as GitHub turns a heading into an anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Kind {
    pub group: Group,
    pub name: &'static str,
}

impl Kind {
    /// Its heading's anchor.
    pub fn anchor(&self) -> String {
        anchor(self.name)
    }

    /// `docs/operations.md#<anchor>` (`docs/dispatch.md#<anchor>` for the dispatcher's).
    pub fn doc(&self) -> String {
        format!("{}#{}", self.group.page(), self.anchor())
    }

    pub fn ok(self, message: impl Into<String>) -> Check {
        self.with(Status::Ok, message.into(), None)
    }

    pub fn skipped(self, message: impl Into<String>) -> Check {
        self.with(Status::Skipped, message.into(), None)
    }

    /// A check that could not be made: the message says why, the hint how to make it.
    pub fn cannot_tell(self, message: impl Into<String>, hint: impl Into<String>) -> Check {
        self.with(Status::Unknown, message.into(), Some(hint.into()))
    }

    pub fn warning(self, message: impl Into<String>, hint: impl Into<String>) -> Check {
        self.with(Status::Warning, message.into(), Some(hint.into()))
    }

    pub fn error(self, message: impl Into<String>, hint: impl Into<String>) -> Check {
        self.with(Status::Error, message.into(), Some(hint.into()))
    }

    fn with(self, status: Status, message: String, hint: Option<String>) -> Check {
        Check {
            kind: self,
            status,
            message,
            hint,
        }
    }
}

/// What doctor found about one thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub kind: Kind,
    pub status: Status,
    /// One line: what is so (or what is wrong).
    pub message: String,
    /// One line: how to fix it (or, for a check that could not be made, how to make it);
    /// only for those, warnings and errors.
    pub hint: Option<String>,
}

impl Check {
    pub fn group(&self) -> Group {
        self.kind.group
    }

    pub fn name(&self) -> &'static str {
        self.kind.name
    }
}

/// `{"group", "name", "status", "message", "hint", "doc"}`: one JSON object per check
/// (`doctor -o json`), `hint` null where there is none.
impl Serialize for Check {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(6))?;
        map.serialize_entry("group", &self.kind.group)?;
        map.serialize_entry("name", self.kind.name)?;
        map.serialize_entry("status", &self.status)?;
        map.serialize_entry("message", &self.message)?;
        map.serialize_entry("hint", &self.hint)?;
        map.serialize_entry("doc", &self.kind.doc())?;
        map.end()
    }
}

/// Every check of one run, in the order they were made (grouped by the caller).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub checks: Vec<Check>,
    /// The API server did not answer at all: nothing else could be checked.
    pub unreachable: bool,
}

/// How a run ends, as its exit status says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every check passed or was skipped; warnings allowed. Exit 0.
    Healthy,
    /// No check failed, but some could not be made: not known to be healthy. Exit 0, as the
    /// caller's rights are not the cluster's fault; the summary says what is missing.
    Unchecked,
    /// A check failed. Exit 1.
    Failed,
    /// The API server could not be reached at all. Exit 2.
    Unreachable,
}

impl Report {
    pub fn verdict(&self) -> Verdict {
        if self.unreachable {
            Verdict::Unreachable
        } else if self.checks.iter().any(|c| c.status == Status::Error) {
            Verdict::Failed
        } else if self.checks.iter().any(|c| c.status == Status::Unknown) {
            Verdict::Unchecked
        } else {
            Verdict::Healthy
        }
    }

    pub fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// The checks ordered by group, each group's in the order they were made.
    pub fn grouped(&self) -> Vec<(Group, Vec<&Check>)> {
        let mut groups: Vec<(Group, Vec<&Check>)> = Vec::new();
        let mut order: Vec<Group> = self.checks.iter().map(Check::group).collect();
        order.sort();
        order.dedup();
        for group in order {
            groups.push((
                group,
                self.checks.iter().filter(|c| c.group() == group).collect(),
            ));
        }
        groups
    }
}
