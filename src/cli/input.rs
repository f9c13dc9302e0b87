//! Reading what the user hands the CLI: a file or stdin, and the documents in it (YAML or JSON,
//! several per file, `kind: List` unpacked).

use std::io::Read;

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::Value;

/// Reads a file, or stdin for `-`.
pub fn read(path: &str) -> Result<Vec<u8>> {
    if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .context("cannot read stdin")?;
        return Ok(buf);
    }
    std::fs::read(path).with_context(|| format!("cannot read {path}"))
}

/// Every object in the input: JSON (one value) or YAML (any number of documents); empty
/// documents are skipped and `List` objects contribute their items.
pub fn documents(bytes: &[u8]) -> Result<Vec<Value>> {
    let text = std::str::from_utf8(bytes).context("input is not UTF-8")?;
    let mut docs = Vec::new();
    if text.trim_start().starts_with('{') {
        docs.push(serde_json::from_str(text).context("invalid JSON")?);
    } else {
        for doc in serde_yaml_ng::Deserializer::from_str(text) {
            let value = Value::deserialize(doc).context("invalid YAML")?;
            if !value.is_null() {
                docs.push(value);
            }
        }
    }
    let mut out = Vec::with_capacity(docs.len());
    for doc in docs {
        match (doc.get("kind").and_then(Value::as_str), doc.get("items")) {
            (Some("List"), Some(Value::Array(items))) => out.extend(items.iter().cloned()),
            _ => out.push(doc),
        }
    }
    Ok(out)
}

pub fn is_job(doc: &Value) -> bool {
    doc.get("kind").and_then(Value::as_str) == Some("Job")
        && doc.get("apiVersion").and_then(Value::as_str) == Some("batch/v1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_yaml_streams_json_and_lists() {
        let yaml = b"---\nkind: Job\napiVersion: batch/v1\n---\n---\nkind: List\nitems: [{kind: Job}, {kind: ConfigMap}]\n";
        let docs = documents(yaml).unwrap_or_default();
        assert_eq!(docs.len(), 3);
        assert!(is_job(&docs[0]) && !is_job(&docs[1]));
        assert_eq!(
            documents(b" {\"kind\": \"Job\"}").map(|d| d.len()).ok(),
            Some(1)
        );
        assert!(documents(b"a: [").is_err());
        assert!(documents(b"\xff").is_err());
    }
}
