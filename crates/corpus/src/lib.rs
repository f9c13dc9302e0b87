//! The conformance corpus, `tests/conformance/cases/*.json`: AdmissionReviews with the verdicts
//! and messages kube-apiserver v1.36.2 gave them (see the folder's README). Every test,
//! benchmark and example that replays it reads it here, so all of them see the same cases in
//! the same order. Only a dev-dependency: nothing that ships reads the corpus.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One case: its file and its JSON (`name`, `webhook`, `review`, `expect`, `source`).
pub struct Case {
    /// The file name, `027-….json`.
    pub file: String,
    pub value: Value,
}

impl Case {
    /// The file name without `.json`.
    pub fn stem(&self) -> &str {
        self.file.strip_suffix(".json").unwrap_or(&self.file)
    }

    /// The AdmissionReview, as kube-apiserver sent it.
    pub fn review(&self) -> &Value {
        &self.value["review"]
    }

    /// Its `request`.
    pub fn request(&self) -> &Value {
        &self.review()["request"]
    }

    /// `validate` or `mutate`: the webhook the verdict was recorded for.
    pub fn webhook(&self) -> &str {
        self.value["webhook"].as_str().unwrap_or("")
    }

    /// A write to `jobs/status`.
    pub fn is_status(&self) -> bool {
        self.request()["subResource"] == "status"
    }
}

/// The corpus folder, in the repository whatever the crate that asks.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/cases")
}

/// Every case, in file-name order. The corpus is part of the repository, so a folder or a
/// case that cannot be read panics with its path rather than quietly shrinking the corpus.
pub fn cases() -> Vec<Case> {
    files().into_iter().map(read).collect()
}

/// The first case, in file-name order, whose file name starts with `prefix` (`027-`).
pub fn case(prefix: &str) -> Option<Case> {
    files()
        .into_iter()
        .find(|p| file_name(p).starts_with(prefix))
        .map(read)
}

fn files() -> Vec<PathBuf> {
    let dir = dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "the corpus {} is part of the repository: {e}",
                dir.display()
            )
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("?")
}

fn read(path: PathBuf) -> Case {
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value = serde_json::from_slice(&text)
        .unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()));
    Case {
        file: file_name(&path).to_owned(),
        value,
    }
}
