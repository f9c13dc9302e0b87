//! The container engine the tests run the image with, as `image/engine.sh` finds it (the build
//! script's own choice: podman or docker, and the flags this machine needs to run anything),
//! and containers that are removed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// The image the tests run: what `image/build.sh` builds.
pub const IMAGE: &str = "jobwarden:dev";

/// The label naming the commit the image was built from (image/build.sh; the Dockerfile).
pub const REVISION_LABEL: &str = "org.opencontainers.image.revision";

/// The commit these tests were built from (build.rs), which the image's label must name.
pub const OUR_REVISION: &str = env!("JOBWARDEN_REVISION");

pub struct Engine {
    /// The engine and its global flags (`podman --runtime=runc`).
    command: Vec<String>,
    /// What `run` needs on this machine (`--ulimit=...`).
    run_flags: Vec<String>,
}

static SHARED: OnceLock<Option<Engine>> = OnceLock::new();

impl Engine {
    /// This machine's engine, once the image is there; `None` (after one `skipped:` line) when
    /// there is no engine or no image. An image there that cannot run is a failure.
    pub fn shared() -> Option<&'static Engine> {
        SHARED.get_or_init(find).as_ref()
    }

    pub fn program(&self) -> &str {
        &self.command[0]
    }

    /// The engine with its global flags, ready for a subcommand.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.command[0]);
        command.args(&self.command[1..]);
        command
    }

    /// `ENGINE run --name NAME` with what this machine needs; the caller adds the rest. The
    /// container stays after it exits, for its logs, until a [`Running`] guard removes it.
    pub fn run(&self, name: &str) -> Command {
        let mut command = self.command();
        command.args(["run", "--name", name]).args(&self.run_flags);
        command
    }

    /// Runs `ENGINE args...` to the end.
    pub fn output(&self, args: &[&str]) -> Output {
        self.command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{} {args:?}: {e}", self.program()))
    }

    /// `ENGINE image inspect IMAGE`: the image's configuration, labels and size.
    pub fn inspect(&self) -> Value {
        let out = self.output(&["image", "inspect", IMAGE]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let all: Value = serde_json::from_slice(&out.stdout).expect("inspect prints JSON");
        all[0].clone()
    }

    /// Copies `path` out of the image into `dir` (through a container that never starts).
    pub fn copy_out(&self, path: &str, dir: &Path) -> PathBuf {
        let created = Created::new(self);
        let to = dir.join(Path::new(path).file_name().expect("a file name"));
        let out = self.output(&[
            "cp",
            &format!("{}:{path}", created.name),
            to.to_str().expect("UTF-8"),
        ]);
        assert!(out.status.success(), "cp {path}: {}", text(&out.stderr));
        to
    }

    /// The image's files as a tar archive, written to `file`.
    pub fn export(&self, file: &Path) {
        let created = Created::new(self);
        let out = self.output(&[
            "export",
            "--output",
            file.to_str().expect("UTF-8"),
            &created.name,
        ]);
        assert!(out.status.success(), "export: {}", text(&out.stderr));
    }
}

fn find() -> Option<Engine> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("image/engine.sh");
    let detected = Command::new(&script)
        .output()
        .expect("image/engine.sh runs");
    if !detected.status.success() {
        skip(text(&detected.stderr).trim());
        return None;
    }
    let command = words(&text(&detected.stdout), "engine");
    let present = Command::new(&command[0])
        .args(&command[1..])
        .args(["image", "inspect", IMAGE])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        skip(&format!(
            "no image {IMAGE} in {}'s store: build it with image/build.sh",
            command[0]
        ));
        return None;
    }
    let labelled = Command::new(&command[0])
        .args(&command[1..])
        .args([
            "image",
            "inspect",
            "--format",
            &format!("{{{{index .Labels \"{REVISION_LABEL}\"}}}}"),
            IMAGE,
        ])
        .output()
        .expect("the engine runs");
    let image_revision = text(&labelled.stdout).trim().to_owned();
    if let Some(why) = stale(&image_revision, OUR_REVISION) {
        skip(&why);
        return None;
    }
    let probed = Command::new(&script)
        .arg(IMAGE)
        .output()
        .expect("image/engine.sh runs");
    let out = text(&probed.stdout);
    assert!(
        probed.status.success(),
        "{IMAGE} is there but does not run: {}",
        text(&probed.stderr)
    );
    Some(Engine {
        command: words(&out, "engine"),
        run_flags: words(&out, "run"),
    })
}

/// The words after `key` on its line of image/engine.sh's answer.
fn words(answer: &str, key: &str) -> Vec<String> {
    answer
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|rest| rest.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Why an image labelled `image` (its revision label, `""` or `<no value>` when it has none)
/// is not the one tests built from `ours` are about; `None` when it is.
///
/// Stale means another commit, or a commit either side cannot name ("unknown": built without
/// git). The same commit with a dirty tree counts as the same: neither side records a dirty
/// mark (build.rs says why), and what the tests compare within the image (its binary with its
/// own SBOM and labels) does not depend on the edits since.
pub fn stale(image: &str, ours: &str) -> Option<String> {
    let rebuild = "rebuild it with image/build.sh";
    let image = image.trim();
    if image.is_empty() || image == "<no value>" {
        return Some(format!(
            "{IMAGE} has no {REVISION_LABEL} label (built by an older image/build.sh), these tests are from revision {}: {rebuild}",
            short(ours)
        ));
    }
    if image == "unknown" || ours == "unknown" {
        return Some(format!(
            "cannot tell whether {IMAGE} (revision {}) is this checkout (revision {}): built without git; {rebuild} from a git checkout",
            short(image),
            short(ours)
        ));
    }
    (image != ours).then(|| {
        format!(
            "{IMAGE} was built from revision {}, these tests from revision {}: {rebuild}",
            short(image),
            short(ours)
        )
    })
}

/// A commit as `git log --oneline` abbreviates it, enough to tell two apart in one line.
fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

/// CI sets `CI` (`.ci/run` runs with `CI=true`) and builds the image before the tests: there,
/// every image test must run, so a reason to skip is a failure.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Says once per test binary why its tests skip, straight to stderr (libtest keeps what a
/// passing test prints); in CI, fails instead, in every test that needs the image.
fn skip(why: &str) {
    use std::io::Write as _;
    assert!(
        !in_ci(),
        "the image tests would skip, and CI (CI is set) runs every one of them: {why}"
    );
    let _ = writeln!(std::io::stderr(), "skipped: the image tests: {why}");
}

/// A container of the image, created (never started) and removed when dropped.
struct Created<'a> {
    engine: &'a Engine,
    name: String,
}

impl<'a> Created<'a> {
    fn new(engine: &'a Engine) -> Created<'a> {
        let out = engine.output(&["create", IMAGE]);
        assert!(out.status.success(), "create: {}", text(&out.stderr));
        Created {
            engine,
            name: text(&out.stdout).trim().to_owned(),
        }
    }
}

impl Drop for Created<'_> {
    fn drop(&mut self) {
        let _ = self.engine.output(&["rm", "--force", &self.name]);
    }
}

/// A container the test started (`--name NAME`): killed and removed when dropped, whatever
/// the test's outcome.
pub struct Running {
    engine: &'static Engine,
    pub name: String,
}

impl Running {
    pub fn new(engine: &'static Engine, name: String) -> Running {
        Running { engine, name }
    }

    /// What the container has written to stdout and stderr so far.
    pub fn logs(&self) -> String {
        let out = self.engine.output(&["logs", &self.name]);
        format!("{}{}", text(&out.stdout), text(&out.stderr))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // SIGKILL first: `rm --force` would give it its SIGTERM grace (up to 25 s) first.
        let _ = self.engine.output(&["kill", &self.name]);
        let _ = self.engine.output(&["rm", "--force", &self.name]);
    }
}

/// A container name unique to this test binary and `what`.
pub fn container_name(what: &str) -> String {
    format!("jobwarden-image-e2e-{}-{what}", std::process::id())
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// When the image is the one these tests are about, by table.
#[test]
fn an_image_from_another_commit_or_none_named_is_stale() {
    let a = "0123456789abcdef0123456789abcdef01234567";
    let b = "fedcba9876543210fedcba9876543210fedcba98";
    for (image, ours, want) in [
        (a, a, None),
        (
            b,
            a,
            Some("built from revision fedcba987654, these tests from revision 0123456789ab"),
        ),
        (
            "",
            a,
            Some("has no org.opencontainers.image.revision label"),
        ),
        ("<no value>", a, Some("has no")),
        ("unknown", a, Some("cannot tell")),
        ("unknown", "unknown", Some("cannot tell")),
        (a, "unknown", Some("cannot tell")),
    ] {
        let got = stale(image, ours);
        match want {
            None => assert_eq!(got, None, "{image} vs {ours}"),
            Some(want) => {
                let got = got.unwrap_or_else(|| panic!("{image} vs {ours}: not stale"));
                assert!(got.contains(want), "{image} vs {ours}: {got}");
                assert!(got.contains("image/build.sh"), "names the rebuild: {got}");
            }
        }
    }
}
