//! An error with its causes on one line, for logs and for what `simulate` prints: jobwarden's
//! errors keep their cause as `source` and never repeat it in their message, so printing only
//! the outer one would drop it.

/// `error: cause: cause…`.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("conflict: the object changed since it was read")]
    struct Conflict;

    #[derive(Debug, thiserror::Error)]
    enum Step {
        #[error("{step}")]
        Api {
            step: &'static str,
            #[source]
            source: Conflict,
        },
    }

    #[test]
    fn each_cause_is_printed_once() {
        let error = Step::Api {
            step: "writing status",
            source: Conflict,
        };
        assert_eq!(
            error_chain(&error),
            "writing status: conflict: the object changed since it was read"
        );
        assert_eq!(error_chain(&Conflict), Conflict.to_string());
    }
}
