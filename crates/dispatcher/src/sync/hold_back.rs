//! A copy's passing state held back while the management cluster's budget is short. A one-pod
//! Job's copy shows three states or so (its pod made, running, ended) about a second apart, and
//! each is a status write on the user's Job; when status writes already wait for the budget,
//! each write adds to the wait of every Job's end. So while they wait, a state that shows no
//! end waits up to [`MIRROR_HOLD`] from its arrival for the next one, which is written in its
//! place: one write for two. An end is never held, nor a plan that does more than mirror.
//! Pure.

use std::time::Duration;

use crate::plan::Step;

/// How long a copy's passing state may wait for the next one. Under 2 s, the mirror's lag at
/// the 99th percentile: a state held is shown by the write of the next one, or by its own
/// when none came.
pub const MIRROR_HOLD: Duration = Duration::from_secs(1);

/// How long to wait before mirroring, if the plan's mirror is to be held back: `steps` is the
/// plan; `copy_ended`, the copy shows how it ended; `writes_waiting`, the management cluster's
/// status writes waiting for budget now; `arrived`, how long ago the copy's change that is not
/// yet mirrored arrived (`None`: not known, not held).
pub fn held_back(
    steps: &[Step],
    copy_ended: bool,
    writes_waiting: usize,
    arrived: Option<Duration>,
) -> Option<Duration> {
    if copy_ended || writes_waiting == 0 || !matches!(steps, [Step::Mirror { .. }]) {
        return None;
    }
    MIRROR_HOLD
        .checked_sub(arrived?)
        .filter(|left| !left.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::DeleteReason;

    fn mirror() -> Step {
        Step::Mirror {
            worker: "east".to_owned(),
            patch: serde_json::json!({"status": {"active": 1}}),
        }
    }

    #[test]
    fn only_a_passing_state_alone_is_held_while_writes_wait() {
        let ms = Duration::from_millis;
        let delete = Step::DeleteCopy {
            worker: "east".to_owned(),
            uid: "c".to_owned(),
            reason: DeleteReason::Finished,
        };
        for (steps, ended, waiting, arrived, want) in [
            // Status writes wait: held for what is left of the second.
            (vec![mirror()], false, 3, Some(ms(300)), Some(ms(700))),
            (vec![mirror()], false, 1, Some(ms(0)), Some(MIRROR_HOLD)),
            // Its second is over: written.
            (vec![mirror()], false, 3, Some(ms(1000)), None),
            (vec![mirror()], false, 3, Some(ms(2500)), None),
            // The budget is not short: written at once.
            (vec![mirror()], false, 0, Some(ms(300)), None),
            // An end, or a plan that does more: never held.
            (vec![mirror()], true, 3, Some(ms(300)), None),
            (vec![mirror(), delete], false, 3, Some(ms(300)), None),
            (Vec::new(), false, 3, Some(ms(300)), None),
            // When its change arrived is not known.
            (vec![mirror()], false, 3, None, None),
        ] {
            assert_eq!(
                held_back(&steps, ended, waiting, arrived),
                want,
                "{steps:?} ended {ended}, {waiting} waiting, arrived {arrived:?} ago"
            );
        }
    }
}
