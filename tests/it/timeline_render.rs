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

/// A box: left, top, right, bottom.
type Area = (f64, f64, f64, f64);

fn number(node: roxmltree::Node, name: &str) -> f64 {
    node.attribute(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn rect_area(node: roxmltree::Node) -> Area {
    let (x, y) = (number(node, "x"), number(node, "y"));
    (x, y, x + number(node, "width"), y + number(node, "height"))
}

fn overlap(a: Area, b: Area) -> bool {
    a.0 < b.2 - 0.01 && b.0 < a.2 - 0.01 && a.1 < b.3 - 0.01 && b.1 < a.3 - 0.01
}

fn has_class(node: roxmltree::Node, class: &str) -> bool {
    node.attribute("class")
        .is_some_and(|c| c.split(' ').any(|w| w == class))
}

/// What is drawn over the lanes, each with its place in the document: the bars, with the mark
/// at the end of a failure a rule matched and the arrow of a pod still running; the label
/// boxes; the veils of the axis's breaks.
fn covers(doc: &roxmltree::Document) -> Vec<(usize, Area)> {
    let mut covers = Vec::new();
    for (at, node) in doc.descendants().enumerate() {
        if has_class(node, "bar") {
            let (l, t, r, b) = rect_area(node);
            let reach = if has_class(node, "running") { 6.0 } else { 0.0 };
            covers.push((at, (l, t, r + reach, b)));
            if node.attribute("data-rule").is_some() {
                let (mid, half) = ((t + b) / 2.0, ((b - t) / 2.0).clamp(1.5, 5.5));
                covers.push((at, (r - half, mid - half, r + half, mid + half)));
            }
        } else if has_class(node, "label-box")
            || (node.has_tag_name("rect") && node.parent().is_some_and(|p| has_class(p, "break")))
        {
            covers.push((at, rect_area(node)));
        }
    }
    covers
}

/// Every rule label of every example, laid out by resvg (or, without system fonts, measured as
/// the picture measures it, 0.62 em a character): whole, or shortened with an ellipsis and its
/// whole text as its `<title>`; inside its box; and under nothing drawn after it (a later bar,
/// mark, label or break veil), so no label is cut to "Evicted: Igno" by the next attempt's bar.
#[test]
fn every_rule_label_is_whole_and_nothing_drawn_after_covers_it() {
    let mut options = Options::default();
    options.fontdb_mut().load_system_fonts();
    let fonts = !options.fontdb.is_empty();
    let mut checked = 0;
    for path in pictures() {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        let svg = std::fs::read_to_string(&path).expect("the picture reads");
        let doc = roxmltree::Document::parse(&svg).expect("the picture parses");
        let tree = Tree::from_str(&svg, &options).expect("resvg reads it");
        let covers = covers(&doc);
        for (at, label) in doc.descendants().enumerate() {
            if !has_class(label, "rule-label") {
                continue;
            }
            let id = label.attribute("id").unwrap_or("");
            let shown: String = label
                .children()
                .filter(|c| c.is_text())
                .filter_map(|c| c.text())
                .collect();
            let title = label
                .children()
                .find(|c| c.has_tag_name("title"))
                .and_then(|t| t.text());
            // The bar it names: the `b`th of its lane, `jwt-rule-{lane}-{b}`.
            let b: usize = id
                .rsplit('-')
                .next()
                .and_then(|b| b.parse().ok())
                .unwrap_or(0);
            let lane = label.parent().expect("a label is in its lane");
            let rule = lane
                .children()
                .filter(|n| has_class(*n, "bar"))
                .nth(b)
                .and_then(|bar| bar.attribute("data-rule"))
                .unwrap_or_else(|| panic!("{name}: {id} names no bar's rule"));
            match title {
                None => assert_eq!(shown, rule, "{name}: {id} is not the rule's whole label"),
                Some(whole) => {
                    assert_eq!(whole, rule, "{name}: {id}'s title");
                    let kept = shown.strip_suffix('…').unwrap_or_else(|| {
                        panic!("{name}: {id} {shown:?} is shortened without an ellipsis")
                    });
                    assert!(rule.starts_with(kept), "{name}: {id} {shown:?}");
                }
            }
            let size = number(label, "font-size");
            let area = match bounds(&tree, id).filter(|_| fonts) {
                Some(r) => (
                    r.left() as f64,
                    r.top() as f64,
                    r.right() as f64,
                    r.bottom() as f64,
                ),
                None => {
                    let (x, y) = (number(label, "x"), number(label, "y"));
                    let width = shown.chars().count() as f64 * size * 0.62;
                    (x, y - size * 0.8, x + width, y + size * 0.2)
                }
            };
            let own = label
                .prev_sibling_element()
                .filter(|n| has_class(*n, "label-box"))
                .map(rect_area)
                .unwrap_or_else(|| panic!("{name}: {id} has no box"));
            assert!(
                own.0 <= area.0 && area.2 <= own.2 && own.1 <= area.1 && area.3 <= own.3,
                "{name}: {id} {shown:?} at {area:?} runs out of its box {own:?}"
            );
            for (_, cover) in covers.iter().filter(|(c, _)| *c > at) {
                assert!(
                    !overlap(area, *cover),
                    "{name}: {id} {shown:?} at {area:?} is under {cover:?}, drawn after it"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} rule labels checked");
}
