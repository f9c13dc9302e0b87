//! An error with its causes on one line, for logs and for what `simulate` prints: the
//! controller's errors keep their cause as `source` and never repeat it in their message, so
//! printing only the outer one would drop it.

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
    use crate::cluster_api::ApiError;
    use crate::executor::ApplyError;
    use crate::job_controller::SyncError;

    #[test]
    fn each_cause_is_printed_once() {
        let error = SyncError::from(ApplyError::Api {
            step: "writing status",
            source: ApiError::Conflict,
        });
        assert_eq!(
            error_chain(&error),
            "writing status: conflict: the object changed since it was read"
        );
        let encode = serde_json::from_str::<u8>("x").unwrap_err();
        let text = format!("cannot encode the status patch: {encode}");
        assert_eq!(error_chain(&ApplyError::Encode(encode)), text);
    }
}
