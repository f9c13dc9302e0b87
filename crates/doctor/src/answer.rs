//! The API server's answer to one request, as doctor keeps it: status code, the `Warning`
//! headers, and the body as JSON. The decisions take these, so a test feeds them answers
//! recorded from a real kube-apiserver (the JSON fixtures are this type, serialized).

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The HTTP status code.
    pub code: u16,
    /// The `Warning` headers' texts (Pod Security's `warn` level, deprecations).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The object created (a dry run's), or the `Status` of a refusal.
    pub body: Value,
}

impl Answer {
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// A refusal's `Status.message` (empty for a success).
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }
}

/// An answer, or why there was none (the connection failed, the body was unreadable).
pub type Reply = Result<Answer, String>;

/// What a refused request says, for a check's message: `forbidden: <message>`, or the code
/// and message.
pub fn refusal(answer: &Answer) -> String {
    let message = answer.message();
    match (answer.code, message.is_empty()) {
        (_, true) => format!("the API server answered {}", answer.code),
        (403, false) => message.to_owned(),
        (code, false) => format!("{code}: {message}"),
    }
}
