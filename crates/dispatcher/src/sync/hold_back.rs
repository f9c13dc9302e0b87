//! A copy's passing state held back a moment for the next one. A one-pod Job's copy shows three
//! states or so (its pod made, running, ended) about a second apart, and each would be a status
//! write on the user's Job: a write the management cluster's budget pays for every Job, for a
//! state the user would see for a second. So a state that shows no end waits up to
//! [`MIRROR_HOLD`] from its arrival for the next one, which is written in its place: the pod
//! made and running are one write, and a copy that changes without pause is written once a
//! second at most. An end is never held, nor a plan that does more than mirror. Pure.

use std::time::Duration;

use crate::plan::Step;

/// How long a copy's passing state may wait for the next one: the batch window. Under 2 s, the
/// mirror's lag at the 99th percentile: a state held is shown by the write of the next one, or
/// by its own when none came.
pub const MIRROR_HOLD: Duration = Duration::from_secs(1);

/// How long to wait before mirroring, if the plan's mirror is to be held back: `steps` is the
/// plan; `copy_ended`, the copy shows how it ended; `arrived`, how long ago the copy's change
/// that is not yet mirrored arrived (`None`: not known, not held).
pub fn held_back(steps: &[Step], copy_ended: bool, arrived: Option<Duration>) -> Option<Duration> {
    if copy_ended || !matches!(steps, [Step::Mirror { .. }]) {
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
    fn only_a_passing_state_alone_is_held_for_what_is_left_of_its_window() {
        let ms = Duration::from_millis;
        let delete = Step::DeleteCopy {
            worker: "east".to_owned(),
            uid: "c".to_owned(),
            reason: DeleteReason::Finished,
        };
        for (steps, ended, arrived, want) in [
            // Held for what is left of the second.
            (vec![mirror()], false, Some(ms(300)), Some(ms(700))),
            (vec![mirror()], false, Some(ms(0)), Some(MIRROR_HOLD)),
            // Its second is over: written.
            (vec![mirror()], false, Some(ms(1000)), None),
            (vec![mirror()], false, Some(ms(2500)), None),
            // An end, or a plan that does more: never held.
            (vec![mirror()], true, Some(ms(300)), None),
            (vec![mirror(), delete], false, Some(ms(300)), None),
            (Vec::new(), false, Some(ms(300)), None),
            // When its change arrived is not known.
            (vec![mirror()], false, None, None),
        ] {
            assert_eq!(
                held_back(&steps, ended, arrived),
                want,
                "{steps:?} ended {ended}, arrived {arrived:?} ago"
            );
        }
    }
}
