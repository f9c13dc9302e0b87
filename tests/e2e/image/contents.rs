//! What is in the image, and what describes it: its configuration and labels (the commit, its
//! time, the binary's digest), its files, its binary (static, carrying cargo-auditable's
//! dependency list), the SBOM inside it, and the Dockerfile's defaults. Everything is read
//! from the image, never from the checkout's target/: an image built elsewhere is judged by
//! what it carries.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::image::engine::{
    Engine, IMAGE, OUR_REVISION, REVISION_LABEL, Running, container_name, text,
};

/// The budget for the whole image.
const MAX_IMAGE_BYTES: u64 = 30 * 1024 * 1024;

/// Where the image carries its SBOM (the Dockerfile; the `io.jobwarden.sbom` label says so).
const SBOM_IN_IMAGE: &str = "/usr/share/doc/jobwarden/sbom.cdx.json";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A folder of the test's own under target/, removed first.
fn scratch(what: &str) -> PathBuf {
    let dir = root()
        .join("target/image-e2e")
        .join(format!("{}-{what}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

#[test]
fn the_image_runs_as_65532_with_an_exec_entrypoint_its_labels_and_within_its_budget() {
    let Some(engine) = Engine::shared() else {
        return;
    };
    let image = engine.inspect();
    let config = &image["Config"];
    assert_eq!(config["User"], "65532:65532", "a numeric non-root user");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/jobwarden"])
    );
    let labels = &config["Labels"];
    for (label, want) in [
        ("version", env!("CARGO_PKG_VERSION")),
        ("licenses", env!("CARGO_PKG_LICENSE")),
        ("source", env!("CARGO_PKG_REPOSITORY")),
    ] {
        assert_eq!(
            labels[format!("org.opencontainers.image.{label}")],
            want,
            "{label}: {labels}"
        );
    }
    // Engine::shared skips an image of another commit; this one names ours.
    assert_eq!(labels[REVISION_LABEL], OUR_REVISION, "{labels}");
    assert_eq!(labels["io.jobwarden.sbom"], SBOM_IN_IMAGE, "{labels}");
    // Created when the commit was made, so that the same commit gives the same label.
    let committed = Command::new("git")
        .args([
            "log",
            "-1",
            "--format=%cd",
            "--date=format-local:%Y-%m-%dT%H:%M:%SZ",
        ])
        .arg(OUR_REVISION)
        .env("TZ", "UTC")
        .current_dir(root())
        .output()
        .expect("git runs");
    assert!(committed.status.success(), "{}", text(&committed.stderr));
    assert_eq!(
        labels["org.opencontainers.image.created"],
        text(&committed.stdout).trim(),
        "{labels}"
    );
    let size = image["Size"].as_u64().expect("a size");
    eprintln!("{IMAGE}: {size} bytes");
    assert!(
        size <= MAX_IMAGE_BYTES,
        "{size} bytes, over {MAX_IMAGE_BYTES}"
    );
}

#[test]
fn the_image_holds_the_binary_and_nsswitch_conf_and_nothing_writable() {
    let Some(engine) = Engine::shared() else {
        return;
    };
    let dir = scratch("export");
    let archive = dir.join("image.tar");
    engine.export(&archive);
    let listing = Command::new("tar")
        .args(["--numeric-owner", "-tvf"])
        .arg(&archive)
        .output()
        .expect("tar runs");
    assert!(listing.status.success(), "{}", text(&listing.stderr));
    let mut paths = BTreeSet::new();
    for line in text(&listing.stdout).lines() {
        // -rwxr-xr-x 0/0 25968816 2026-11-27 07:36 usr/local/bin/jobwarden
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (mode, owner, path) = (fields[0], fields[1], fields[fields.len() - 1]);
        assert_eq!(owner, "0/0", "{path} belongs to root");
        assert!(
            !mode[4..].contains('w'),
            "{path} is writable by its group or others: {mode}"
        );
        paths.insert(path.trim_end_matches('/').to_owned());
    }
    let expected: BTreeSet<String> = [
        "etc",
        "etc/nsswitch.conf",
        "usr",
        "usr/local",
        "usr/local/bin",
        "usr/local/bin/jobwarden",
        "usr/share",
        "usr/share/doc",
        "usr/share/doc/jobwarden",
        "usr/share/doc/jobwarden/sbom.cdx.json",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(paths, expected);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn there_is_no_shell() {
    let Some(engine) = Engine::shared() else {
        return;
    };
    let name = container_name("shell");
    let _container = Running::new(engine, name.clone());
    let out = engine
        .run(&name)
        .args([
            "--network=none",
            "--entrypoint",
            "/bin/sh",
            IMAGE,
            "-c",
            "true",
        ])
        .output()
        .expect("the engine runs");
    let said = text(&out.stderr);
    assert!(!out.status.success(), "/bin/sh ran: {}", text(&out.stdout));
    // Refused for want of the file, not for anything else.
    assert!(
        said.contains("/bin/sh") && said.to_lowercase().contains("no such file"),
        "{said}"
    );
}

#[test]
fn the_binary_is_static_and_carries_its_dependency_list_which_the_sbom_covers() {
    let Some(engine) = Engine::shared() else {
        return;
    };
    let dir = scratch("binary");
    let binary = engine.copy_out("/usr/local/bin/jobwarden", &dir);
    let readelf = |flag: &str| {
        let out = Command::new("readelf")
            .args([flag, "-W"])
            .arg(&binary)
            .output()
            .expect("readelf (binutils) runs");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let segments = readelf("--segments");
    assert!(
        !segments.contains("INTERP"),
        "the binary names an interpreter:\n{segments}"
    );
    let dynamic = readelf("--dynamic");
    assert!(
        !dynamic.contains("(NEEDED)"),
        "the binary needs shared libraries:\n{dynamic}"
    );

    let embedded = embedded_packages(&binary, &dir);
    assert!(
        embedded.iter().any(|(n, _)| n == "kube-client") && embedded.len() > 100,
        "cargo-auditable's list names the binary's crates: {embedded:?}"
    );
    let sbom = sbom(&engine.copy_out(SBOM_IN_IMAGE, &dir));
    let missing: Vec<_> = embedded.difference(&sbom).collect();
    assert!(
        missing.is_empty(),
        "the image's {SBOM_IN_IMAGE} lacks packages the binary carries: {missing:?}"
    );

    // The label names this very binary.
    let sum = Command::new("sha256sum")
        .arg(&binary)
        .output()
        .expect("sha256sum (coreutils) runs");
    assert!(sum.status.success(), "{}", text(&sum.stderr));
    let digest = format!(
        "sha256:{}",
        text(&sum.stdout)
            .split_whitespace()
            .next()
            .unwrap_or_default()
    );
    let labels = &engine.inspect()["Config"]["Labels"];
    assert_eq!(labels["io.jobwarden.binary.digest"], digest.as_str());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The packages cargo-auditable embedded in `binary` (its `.dep-v0` section, zlib-compressed
/// JSON) that are linked in: name and version, build dependencies and proc macros left out.
fn embedded_packages(binary: &Path, dir: &Path) -> BTreeSet<(String, String)> {
    let section = dir.join("dep-v0");
    let out = Command::new("objcopy")
        .arg(format!("--dump-section=.dep-v0={}", section.display()))
        .arg(binary)
        .arg(dir.join("objcopy-output"))
        .output()
        .expect("objcopy (binutils) runs");
    assert!(
        out.status.success(),
        "no .dep-v0 section (is the binary built by cargo auditable?): {}",
        text(&out.stderr)
    );
    let compressed = std::fs::read(&section).expect("the section");
    let json = miniz_oxide::inflate::decompress_to_vec_zlib(&compressed)
        .unwrap_or_else(|e| panic!("the section is zlib: {e:?}"));
    let list: Value = serde_json::from_slice(&json).expect("the section is JSON");
    list["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p.get("kind").is_none_or(|k| k == "runtime"))
        .map(name_version)
        .collect()
}

/// The components of `file`, the SBOM copied out of the image, and the binary it describes.
fn sbom(file: &Path) -> BTreeSet<(String, String)> {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e} (copied out of the image)", file.display()));
    let bom: Value = serde_json::from_str(&text).expect("the SBOM is JSON");
    assert_eq!(bom["bomFormat"], "CycloneDX");
    let component = &bom["metadata"]["component"];
    assert_eq!(
        name_version(component),
        ("jobwarden".to_owned(), env!("CARGO_PKG_VERSION").to_owned())
    );
    let mut all: BTreeSet<_> = bom["components"]
        .as_array()
        .expect("components")
        .iter()
        .map(name_version)
        .collect();
    all.insert(name_version(component));
    all
}

fn name_version(v: &Value) -> (String, String) {
    let field = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    (field("name"), field("version"))
}

/// The Dockerfile's own defaults, used by a plain `docker build .`, name what Cargo.toml does.
#[test]
fn the_dockerfile_s_labels_default_to_cargo_toml_s_version_source_and_license() {
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).expect("Dockerfile");
    for want in [
        format!("ARG VERSION={}", env!("CARGO_PKG_VERSION")),
        format!("ARG SOURCE={}", env!("CARGO_PKG_REPOSITORY")),
        format!(
            "org.opencontainers.image.licenses=\"{}\"",
            env!("CARGO_PKG_LICENSE")
        ),
    ] {
        assert!(
            dockerfile.lines().any(|l| l.trim().starts_with(&want)),
            "the Dockerfile says {want}"
        );
    }
}
