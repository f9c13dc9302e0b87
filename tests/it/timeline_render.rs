//! The worked examples' pictures (`examples/simulate/*.svg`, which `simulate_examples.rs` keeps
//! equal to what `simulate -o svg` prints) as people see them: rasterised by resvg with the
//! system's fonts (the picture is not blank, and no label runs outside its lane, measured on
//! the laid-out text), and opened in headless Chromium (no XML error, a screenshot that is not
//! blank). Chromium is Debian's `chromium` package, which `.ci/run` installs; without it that
//! test prints one `skipped:` line and passes. The PNGs are left in the target directory for a
//! person to look at.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg::{Node, Options, Rect, Tree};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/simulate");

fn pictures() -> Vec<PathBuf> {
    let mut svgs: Vec<PathBuf> = std::fs::read_dir(EXAMPLES)
        .expect("examples/simulate exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .collect();
    svgs.sort();
    assert!(svgs.len() >= 5, "{svgs:?}");
    svgs
}

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("timeline");
    std::fs::create_dir_all(&dir).expect("the output folder");
    dir
}

/// Most pixels white, yet more than a twentieth inked and in several colours.
fn assert_not_blank(what: &str, pixmap: &Pixmap) {
    let pixels = pixmap.pixels();
    let inked = pixels
        .iter()
        .filter(|p| p.red() < 200 || p.green() < 200 || p.blue() < 200)
        .count();
    assert!(
        inked * 20 > pixels.len() && inked < pixels.len(),
        "{what}: {inked} of {} pixels inked",
        pixels.len()
    );
    let mut colours: Vec<(u8, u8, u8)> = pixels
        .iter()
        .map(|p| (p.red() / 32, p.green() / 32, p.blue() / 32))
        .collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(colours.len() >= 6, "{what}: {} colours", colours.len());
}

fn bounds(tree: &Tree, id: &str) -> Option<Rect> {
    tree.node_by_id(id).map(Node::abs_bounding_box)
}

#[test]
fn every_example_renders_and_no_label_leaves_its_lane() {
    let mut options = Options::default();
    options.fontdb_mut().load_system_fonts();
    let fonts = !options.fontdb.is_empty();
    let mut labels_checked = 0;
    for path in pictures() {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        let svg = std::fs::read_to_string(&path).expect("the picture reads");
        let tree = Tree::from_str(&svg, &options)
            .unwrap_or_else(|e| panic!("{name}: resvg cannot read it: {e}"));
        let size = tree.size().to_int_size();
        let mut pixmap = Pixmap::new(size.width(), size.height()).expect("a pixmap");
        resvg::render(&tree, Transform::default(), &mut pixmap.as_mut());
        assert_not_blank(&name, &pixmap);
        let _ = pixmap.save_png(out_dir().join(name.replace(".svg", ".resvg.png")));
        if !fonts {
            continue;
        }
        for lane in 0.. {
            let Some(band) = bounds(&tree, &format!("jwt-lane-{lane}")) else {
                break;
            };
            let mut ids = vec![format!("jwt-lane-label-{lane}")];
            ids.extend((0..64).map(|b| format!("jwt-rule-{lane}-{b}")));
            for id in ids {
                let Some(label) = bounds(&tree, &id) else {
                    continue;
                };
                labels_checked += 1;
                assert!(
                    label.top() >= band.top()
                        && label.bottom() <= band.bottom()
                        && label.left() >= band.left()
                        && label.right() <= band.right(),
                    "{name}: {id} at {label:?} runs out of its lane {band:?}"
                );
            }
        }
    }
    if fonts {
        assert!(labels_checked > 50, "only {labels_checked} labels measured");
    } else {
        println!("skipped: the labels' bounds (no system fonts for resvg to lay the text out)");
    }
}

/// Chromium from `JOBWARDEN_CHROMIUM`, else `chromium` on the PATH (Debian's package).
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("JOBWARDEN_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .flat_map(|dir| [dir.join("chromium"), dir.join("chromium-browser")])
            .find(|p| p.is_file())
    })
}

/// Runs headless Chromium on `file` with `args`; its standard output.
fn headless(chromium: &Path, profile: &Path, args: &[String], file: &Path) -> String {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", file.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    // Not a timing assertion: a browser that hangs must not hang the suite.
    let started = Instant::now();
    while child.try_wait().expect("chromium runs").is_none() {
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            panic!("chromium did not finish with {args:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("chromium's output");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn chromium_opens_a_picture_without_error_and_shows_it() {
    let Some(chromium) = chromium() else {
        println!(
            "skipped: no chromium on the PATH (Debian's chromium package; JOBWARDEN_CHROMIUM)"
        );
        return;
    };
    let dir = out_dir();
    let profile = dir.join("chromium-profile");
    let _ = std::fs::remove_dir_all(&profile);
    let picture = Path::new(EXAMPLES).join("per-index-named-rules.svg");

    // First, that an error would be seen: a broken file shows Chromium's parser error.
    let broken = dir.join("broken.svg");
    std::fs::write(
        &broken,
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>a & b</text></svg>",
    )
    .expect("written");
    let dom = headless(&chromium, &profile, &["--dump-dom".to_owned()], &broken);
    assert!(dom.contains("parsererror"), "{dom}");

    let dom = headless(&chromium, &profile, &["--dump-dom".to_owned()], &picture);
    assert!(
        dom.trim_start().starts_with("<svg"),
        "{}",
        &dom[..dom.len().min(500)]
    );
    assert!(!dom.contains("parsererror"), "{dom}");
    assert!(
        dom.contains("Job default/shards: Failed after 1m35s"),
        "{dom}"
    );

    let svg = std::fs::read_to_string(&picture).expect("the picture reads");
    let height = roxmltree::Document::parse(&svg)
        .ok()
        .and_then(|d| d.root_element().attribute("height").map(str::to_owned))
        .and_then(|h| h.parse::<f64>().ok())
        .unwrap_or(800.0);
    let shot = dir.join("per-index-named-rules.chromium.png");
    let _ = std::fs::remove_file(&shot);
    headless(
        &chromium,
        &profile,
        &[
            format!("--screenshot={}", shot.display()),
            format!("--window-size=1000,{}", height.ceil()),
        ],
        &picture,
    );
    let pixmap = Pixmap::load_png(&shot).expect("chromium took a screenshot");
    assert_eq!(pixmap.width(), 1000);
    assert_not_blank("chromium's screenshot", &pixmap);
    let _ = std::fs::remove_dir_all(&profile);
}
