//! The words of a sync's pod Events, as upstream's per-pod messages (`Created pod: NAME`) but
//! one event for all the pods of one sync, not one event per pod. The per-Job spam filter the
//! events then pass is the runtime's (`jobwarden_runtime::events::limiter`).

use std::fmt::Write as _;

/// Pod names listed in one event's message before "and N more": kube-apiserver caps an
/// events.k8s.io note at 1 KiB, and a message longer than a screen helps nobody.
const MAX_LISTED_BYTES: usize = 600;

/// Upstream's per-pod messages (`Created pod: NAME`), for all the pods of one sync at once:
/// `Created pod: a`, or `Created 3 pods: a, b, c`, listing names up to a length and then
/// `and N more`.
pub fn pods_message(verb: &str, names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => format!("{verb} pod: {one}"),
        _ => {
            let mut message = format!("{verb} {} pods: ", names.len());
            let mut listed = 0;
            for name in names {
                if listed > 0 && message.len() + name.len() > MAX_LISTED_BYTES {
                    break;
                }
                if listed > 0 {
                    message.push_str(", ");
                }
                message.push_str(name);
                listed += 1;
            }
            if listed < names.len() {
                let _ = write!(message, " and {} more", names.len() - listed);
            }
            message
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_pods() {
        let names: Vec<String> = (0..3).map(|i| format!("p-{i}")).collect();
        assert_eq!(pods_message("Created", &names[..1]), "Created pod: p-0");
        assert_eq!(
            pods_message("Deleted", &names),
            "Deleted 3 pods: p-0, p-1, p-2"
        );
        let many: Vec<String> = (0..500).map(|i| format!("job-{i}-abcde")).collect();
        let m = pods_message("Created", &many);
        assert!(m.starts_with("Created 500 pods: job-0-abcde, job-1-abcde"));
        assert!(m.len() < 700, "{}", m.len());
        let listed = m.matches("-abcde").count();
        assert!(m.ends_with(&format!(" and {} more", 500 - listed)), "{m}");
    }
}
