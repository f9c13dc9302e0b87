//! What docs/operations.md says, read back for the checks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::deploy::{OPERATIONS_DOC, root};

#[derive(Debug, PartialEq, Eq)]
pub struct DocumentedWebhook {
    pub resources: Vec<String>,
    pub operations: Vec<String>,
    pub failure_policy: String,
}

/// The rows of the table under "What the webhook configurations decide, and why":
/// | `name` | `resource` OPERATION, OPERATION | `Policy` | Why |
pub fn documented_webhooks() -> BTreeMap<String, DocumentedWebhook> {
    let doc = std::fs::read_to_string(root().join(OPERATIONS_DOC)).expect("docs/operations.md");
    let section = doc
        .split("### What the webhook configurations decide, and why")
        .nth(1)
        .expect("the section on the webhook configurations");
    let mut out = BTreeMap::new();
    for line in section.lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Some(hook) = cells
            .get(1)
            .and_then(|c| c.strip_prefix('`'))
            .and_then(|c| c.strip_suffix('`'))
        else {
            continue;
        };
        let (resource, operations) = cells[2].split_once(' ').expect("`resource` OPERATIONS");
        out.insert(
            hook.to_owned(),
            DocumentedWebhook {
                resources: vec![resource.trim_matches('`').to_owned()],
                operations: operations.split(',').map(|o| o.trim().to_owned()).collect(),
                failure_policy: cells[3].trim_matches('`').to_owned(),
            },
        );
    }
    assert!(!out.is_empty(), "no table rows found");
    out
}

/// GitHub's anchors for the headings of a markdown file.
pub fn markdown_anchors(doc: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut out = BTreeSet::new();
    for line in doc.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        out.insert(
            title
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect(),
        );
    }
    out
}

/// The targets of `[text](target)` links outside code blocks.
pub fn markdown_link_targets(doc: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in doc.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        for (i, _) in line.match_indices("](") {
            let rest = &line[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_owned());
            }
        }
    }
    out
}

/// The files under `dir`, hidden ones left out: register.sh builds in a hidden directory beside
/// deploy/webhooks/, which the test of register.sh may be creating or removing meanwhile.
pub fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable directory") {
        let entry = entry.expect("an entry");
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// The port in `[default: ADDRESS:PORT]` on the line of `flag` in `serve -h`.
pub fn default_port(help: &str, flag: &str) -> u16 {
    let at = help
        .find(flag)
        .unwrap_or_else(|| panic!("serve -h has no {flag}"));
    let rest = &help[at..];
    let default = rest
        .find("[default: ")
        .map(|i| &rest[i + "[default: ".len()..])
        .and_then(|d| d.split(']').next())
        .unwrap_or_else(|| {
            panic!("serve -h shows no default for {flag}: deploy/ relies on it for its ports")
        });
    default
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in the default {default:?} of {flag}"))
}
