//! What a new policy file's text means for the running policy: nothing (the same text as the
//! running one, or as the one refused last, so a refusal is said once, not every poll; a text
//! a consumer vetoed is put to the vetoes again, silently, as what they object to may pass: a
//! worker's last Job ends, and the removal that was refused for it is applied; said again only
//! when the veto's words change, so that the log names what holds it now), a new
//! policy to apply (with what of it waits for the next restart), or a refusal with its reason
//! in the words `serve` uses at start. Pure: the text is handed in, the parse is `serve`'s own.

use jobwarden_admission::Policy;
use jobwarden_admission::policy::{PolicyVetoes, content_hash, needs_restart};

use crate::config::PolicyError;
use crate::error_chain::error_chain;

/// What the follower has done so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Followed {
    /// The hash of the running policy's text.
    pub running: String,
    /// The hash of the text refused last, while it is still the file's.
    pub refused: Option<String>,
    /// That text was valid, and refused by a consumer's veto.
    pub vetoed: bool,
    /// The words it was refused with.
    pub reason: Option<String>,
}

#[derive(Debug)]
pub(crate) enum Judgement {
    /// The text refused last, still there.
    Unchanged,
    /// The running policy's text.
    Running,
    Applied {
        policy: Box<Policy>,
        hash: String,
        /// Paths of the changed parts that only take effect at the next restart.
        at_restart: Vec<&'static str>,
    },
    Refused {
        hash: String,
        reason: String,
        /// By a consumer's veto (the text itself is valid).
        vetoed: bool,
    },
}

/// Judges the file's `text` against the `running` policy. `parse` is how `serve` reads the
/// policy at start (the file, then the flags added); `vetoes` are the consumers' objections.
pub(crate) fn judge(
    followed: &Followed,
    running: &Policy,
    text: Result<&[u8], &PolicyError>,
    parse: impl FnOnce(&[u8]) -> Result<Policy, PolicyError>,
    vetoes: &PolicyVetoes,
) -> Judgement {
    let text = match text {
        Ok(text) => text,
        // A file that cannot be read is named by its error, so the same failure is said once.
        Err(error) => {
            let reason = error_chain(error);
            let hash = format!("unreadable:{}", content_hash(reason.as_bytes()));
            return refuse(followed, hash, reason, false);
        }
    };
    let hash = content_hash(text);
    if hash == followed.running {
        return Judgement::Running;
    }
    if followed.refused.as_deref() == Some(hash.as_str()) && !followed.vetoed {
        return Judgement::Unchanged;
    }
    let policy = match parse(text) {
        Ok(policy) => policy,
        Err(error) => return refuse(followed, hash, error_chain(&error), false),
    };
    if let Err(vetoed) = vetoes.check(running, &policy) {
        return refuse(followed, hash, vetoed.to_string(), true);
    }
    Judgement::Applied {
        at_restart: needs_restart(running, &policy),
        policy: Box::new(policy),
        hash,
    }
}

fn refuse(followed: &Followed, hash: String, reason: String, vetoed: bool) -> Judgement {
    if followed.refused.as_deref() == Some(hash.as_str())
        && followed.reason.as_deref() == Some(reason.as_str())
    {
        return Judgement::Unchanged;
    }
    Judgement::Refused {
        hash,
        reason,
        vetoed,
    }
}
