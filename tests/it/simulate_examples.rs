//! `jobwarden simulate` over the examples and their scenarios in `examples/simulate/`: the
//! stories, text, JSON and SVG, are compared with the recorded ones next to the scenarios, each
//! picture is checked against its story (a lane per index, a bar per pod created, a labelled
//! mark per rule matched), and the `jobwarden simulate` commands shown in the docs are run and
//! their output compared with what the docs show, so none can rot. `JOBWARDEN_BLESS=1`
//! re-records the stories and pictures (the docs are edited by hand, from a blessed story).

use std::path::Path;
use std::process::Output;

use crate::support::run;
use crate::support::svg;
use run::{stderr, stdout};

fn jobwarden(args: &[&str]) -> Output {
    run::jobwarden(args, None)
}

/// Each scenario in `examples/simulate/` and the example Job it is written for.
const STORIES: &[(&str, &str)] = &[
    ("examples/success-policy-leader.yaml", "leader"),
    (
        "examples/success-policy-leader-or-workers.yaml",
        "leader-or-workers",
    ),
    (
        "examples/pod-failure-policy-named-rules.yaml",
        "named-rules-exit-code-2",
    ),
    (
        "examples/pod-failure-policy-named-rules.yaml",
        "named-rules-evicted-then-exit-code-3",
    ),
    (
        "examples/backoff-limit-per-index.yaml",
        "backoff-limit-per-index",
    ),
    (
        "examples/success-policy-leader-workers-reasons.yaml",
        "leader-workers-continue",
    ),
    (
        "examples/success-policy-leader-workers-reasons.yaml",
        "leader-workers-terminate",
    ),
    (
        "examples/success-policy-fluid-dynamics.yaml",
        "fluid-dynamics",
    ),
    ("examples/pod-start-timeout.yaml", "pod-start-timeout"),
    (
        "examples/per-index-named-rules.yaml",
        "per-index-named-rules",
    ),
];

fn bless() -> bool {
    std::env::var_os("JOBWARDEN_BLESS").is_some_and(|v| v == "1")
}

/// Compares `got` with the recorded file, or records it when blessing.
fn compare_with_recorded(path: &str, got: &str) {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    if bless() {
        std::fs::write(&full, got).expect("the story is recorded");
        return;
    }
    let want = std::fs::read_to_string(&full)
        .unwrap_or_else(|e| panic!("{path}: {e} (record it with JOBWARDEN_BLESS=1)"));
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| want.lines().count().min(got.lines().count()));
        panic!(
            "{path} differs from the story told now, first at line {}:\nrecorded: {:?}\ntold:     {:?}\n(re-record with JOBWARDEN_BLESS=1 if the change is meant)",
            line + 1,
            want.lines().nth(line),
            got.lines().nth(line)
        );
    }
}

#[test]
fn the_examples_tell_their_recorded_stories() {
    for (job, stem) in STORIES {
        let scenario = format!("examples/simulate/{stem}.scenario.yaml");
        let out = jobwarden(&["simulate", job, "--scenario", &scenario]);
        assert_eq!(out.status.code(), Some(0), "{stem}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{stem}");
        compare_with_recorded(
            &format!("examples/simulate/{stem}.story.txt"),
            &stdout(&out),
        );

        let out = jobwarden(&["simulate", job, "--scenario", &scenario, "-o", "json"]);
        assert_eq!(out.status.code(), Some(0), "{stem}: {}", stderr(&out));
        let story: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("-o json prints one JSON document");
        assert_eq!(story["end"]["finished"], true, "{stem}");
        compare_with_recorded(
            &format!("examples/simulate/{stem}.story.json"),
            &stdout(&out),
        );

        let out = jobwarden(&["simulate", job, "--scenario", &scenario, "-o", "svg"]);
        assert_eq!(out.status.code(), Some(0), "{stem}: {}", stderr(&out));
        picture_tells_the_story(stem, &story, &stdout(&out));
        compare_with_recorded(&format!("examples/simulate/{stem}.svg"), &stdout(&out));
    }
}

/// The picture draws what the story (`-o json`) tells: a lane per completion index, a bar
/// per pod created whose hover text names it, and a labelled mark at the end of each failure
/// a rule matched, naming the rule and its action.
fn picture_tells_the_story(stem: &str, story: &serde_json::Value, picture: &str) {
    let doc = svg::parse(picture);
    let class = |c: &str| svg::with_class(&doc, c);
    let steps = story["steps"].as_array().expect("steps");
    let of_kind = |kind: &'static str| steps.iter().filter(move |s| s["kind"] == kind);
    if story["completionMode"] == "Indexed" {
        let lanes: Vec<String> = class("lane")
            .iter()
            .filter_map(|n| n.attribute("data-lane").map(str::to_owned))
            .collect();
        let completions = story["completions"].as_u64().expect("completions");
        let indexes: Vec<String> = (0..completions).map(|i| i.to_string()).collect();
        assert_eq!(lanes, indexes, "{stem}: a lane per index");
    }
    let mut created: Vec<&str> = of_kind("podCreated")
        .filter_map(|s| s["pod"]["name"].as_str())
        .collect();
    let mut drawn: Vec<&str> = class("bar")
        .iter()
        .filter_map(|n| n.attribute("data-pod"))
        .collect();
    created.sort_unstable();
    drawn.sort_unstable();
    assert_eq!(drawn, created, "{stem}: a bar per pod");
    for bar in class("bar") {
        let pod = bar.attribute("data-pod").unwrap_or("");
        let title = svg::title_of(bar);
        assert!(title.starts_with(&format!("pod {pod}")), "{stem}: {title}");
    }
    let matched: Vec<(String, String)> = of_kind("podEnded")
        .filter(|s| s["podFailurePolicy"]["result"] == "matched")
        .map(|s| {
            let m = &s["podFailurePolicy"];
            let rule = m["name"]
                .as_str()
                .map_or_else(|| format!("rule {}", m["rule"]), str::to_owned);
            (rule, m["action"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    let mut marks: Vec<(String, String)> = class("mark")
        .iter()
        .map(|m| {
            let attr = |k: &str| m.attribute(k).unwrap_or("").to_owned();
            (attr("data-rule"), attr("data-action"))
        })
        .collect();
    let mut matched_sorted = matched.clone();
    matched_sorted.sort();
    marks.sort();
    assert_eq!(marks, matched_sorted, "{stem}: a mark per rule matched");
    // Every mark is labelled with its rule, and its action where the lane has room.
    let mut labelled: Vec<String> = class("rule-label")
        .iter()
        .filter_map(|n| n.text())
        .map(|l| l.split(": ").next().unwrap_or(l).to_owned())
        .collect();
    let mut rules: Vec<String> = matched.into_iter().map(|(rule, _)| rule).collect();
    labelled.sort();
    rules.sort();
    assert_eq!(labelled, rules, "{stem}: a label per rule matched");
}

#[test]
fn every_scenario_in_the_examples_is_told() {
    let mut scenarios: Vec<String> = std::fs::read_dir("examples/simulate")
        .expect("examples/simulate exists")
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".scenario.yaml").map(str::to_owned))
        .collect();
    scenarios.sort();
    let mut told: Vec<String> = STORIES.iter().map(|(_, s)| (*s).to_owned()).collect();
    told.sort();
    assert_eq!(scenarios, told);
}

/// One `$ jobwarden simulate …` command of a doc's console block, with the output and exit
/// status the doc shows.
struct Shown {
    doc: String,
    args: Vec<String>,
    stdout: String,
    code: i32,
}

/// Reads the console blocks of a Markdown page: a `$ jobwarden simulate` line, the lines up to
/// the next `$ ` line are its output; `$ echo $?` followed by a number is its exit status.
fn shown_commands(doc: &str) -> Vec<Shown> {
    let page = std::fs::read_to_string(doc).expect("the doc reads");
    let mut shown = Vec::new();
    let mut in_console = false;
    let mut current: Option<Shown> = None;
    let mut expect_code = false;
    for line in page.lines() {
        if line.starts_with("```") {
            in_console = !in_console && line.trim() == "```console";
            if !in_console {
                shown.extend(current.take());
            }
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            expect_code = cmd.trim() == "echo $?";
            if expect_code {
                continue;
            }
            shown.extend(current.take());
            if let Some(args) = cmd.strip_prefix("jobwarden ") {
                current = Some(Shown {
                    doc: doc.to_owned(),
                    args: args.split_whitespace().map(str::to_owned).collect(),
                    stdout: String::new(),
                    code: 0,
                });
            }
            continue;
        }
        if let Some(c) = current.as_mut() {
            if expect_code {
                c.code = line.trim().parse().unwrap_or(-1);
                expect_code = false;
            } else {
                c.stdout.push_str(line);
                c.stdout.push('\n');
            }
        }
    }
    shown
        .into_iter()
        .filter(|s| s.args.first().is_some_and(|a| a == "simulate"))
        .collect()
}

#[test]
fn the_docs_show_what_simulate_prints() {
    let mut checked = 0;
    for doc in ["docs/simulate.md", "docs/cli.md"] {
        for s in shown_commands(doc) {
            let args: Vec<&str> = s.args.iter().map(String::as_str).collect();
            let out = jobwarden(&args);
            let got = stdout(&out);
            assert_eq!(
                out.status.code(),
                Some(s.code),
                "{}: jobwarden {}: {}",
                s.doc,
                args.join(" "),
                stderr(&out)
            );
            if got != s.stdout {
                let line = got
                    .lines()
                    .zip(s.stdout.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                panic!(
                    "{}: `jobwarden {}` prints something else than the doc shows, first at line {}:\ndoc:  {:?}\nnow:  {:?}",
                    s.doc,
                    args.join(" "),
                    line + 1,
                    s.stdout.lines().nth(line),
                    got.lines().nth(line)
                );
            }
            checked += 1;
        }
    }
    // docs/simulate.md's two worked examples and the example in docs/cli.md.
    assert!(checked >= 3, "only {checked} commands found in the docs");
}
