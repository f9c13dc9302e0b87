//! An error with its causes on one line. The server's errors keep their cause as `source` and
//! never repeat it in their message, so printing only the outer one would drop it.

/// `error: cause: cause…`, for a log line and a response body.
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}
