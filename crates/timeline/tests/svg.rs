//! The SVG as others read it, parsed by a real XML parser (roxmltree): a timeline of each kind
//! of thing the picture holds, one of hostile names, and one of a thousand indexes. The
//! worked examples are rasterised, and opened in a browser, by `tests/it/timeline_render.rs` at
//! the top of the repository.

use jobwarden_timeline::{Bar, Builder, Moment, MomentKind, Outcome, RuleMark, Timeline, svg};

// How the repository's tests read the SVG, shared with them.
#[path = "../../../tests/support/svg.rs"]
mod read;
use read::{parse, title_of, with_class};

fn bar(pod: &str, index: i32, attempt: u32, start: u64, end: Option<u64>, outcome: Outcome) -> Bar {
    Bar {
        pod: pod.to_owned(),
        index: Some(index),
        attempt: Some(attempt),
        number: None,
        start,
        end,
        outcome,
        rule: None,
        story: vec![format!("{start}s  created pod {pod}")],
    }
}

/// Four indexes: a success; a counted failure, its back-off and a retry that succeeds; an
/// ignored disruption and a retry still running; a failure that fails the Job after a long
/// back-off.
fn sample() -> Timeline {
    let mut b = Builder::indexed(4);
    b.bar(bar("job-0-a", 0, 1, 0, Some(5), Outcome::Succeeded));
    let mut failed = bar("job-1-a", 1, 1, 0, Some(5), Outcome::Failed);
    failed.rule = Some(RuleMark::new(0, Some("ExitCode3"), "Count"));
    b.bar(failed);
    b.backoff("job-1-a", 5, 15, "back-off: 10s".into());
    b.bar(bar("job-1-b", 1, 2, 15, Some(20), Outcome::Succeeded));
    let mut disrupted = bar("job-2-a", 2, 1, 0, Some(3), Outcome::Disrupted);
    disrupted.rule = Some(RuleMark::new(1, None, "Ignore"));
    b.bar(disrupted);
    b.backoff("job-2-a", 3, 13, "back-off: 10s".into());
    b.bar(bar("job-2-b", 2, 2, 13, None, Outcome::Running));
    let mut fatal = bar("job-3-a", 3, 1, 0, Some(4), Outcome::Failed);
    fatal.rule = Some(RuleMark::new(2, Some("Fatal"), "FailJob"));
    b.bar(fatal);
    b.backoff("job-3-a", 4, 604, "back-off: 10m0s".into());
    b.bar(bar("job-3-b", 3, 2, 604, Some(609), Outcome::Deleted));
    b.moment(Moment {
        at: 609,
        kind: MomentKind::FailureTarget,
        label: "FailureTarget: PodFailurePolicy_Fatal".into(),
        story: "condition FailureTarget=True".into(),
    });
    b.moment(Moment {
        at: 609,
        kind: MomentKind::Failed,
        label: "Failed: PodFailurePolicy_Fatal".into(),
        story: "condition Failed=True".into(),
    });
    b.build(
        "Job default/sample".into(),
        "Failed after 10m9s, reason PodFailurePolicy_Fatal.".into(),
        vec!["Times are since the Job was created.".into()],
        609,
    )
}

#[test]
fn lanes_are_indexes_bars_are_pods_and_every_match_is_labelled() {
    let t = sample();
    let out = svg(&t);
    let doc = parse(&out);
    let root = doc.root_element();
    assert!(root.has_tag_name("svg"));
    assert_eq!(
        root.children()
            .find(|c| c.has_tag_name("title"))
            .and_then(|c| c.text()),
        Some("Job default/sample: Failed after 10m9s, reason PodFailurePolicy_Fatal.")
    );
    let desc = root
        .children()
        .find(|c| c.has_tag_name("desc"))
        .and_then(|c| c.text())
        .unwrap_or("");
    assert!(desc.contains("4 indexes, 7 pods"), "{desc}");
    assert!(desc.contains("ExitCode3: Count ×1"), "{desc}");

    let lanes: Vec<&str> = with_class(&doc, "lane")
        .iter()
        .filter_map(|n| n.attribute("data-lane"))
        .collect();
    assert_eq!(lanes, ["0", "1", "2", "3"]);
    let bars = with_class(&doc, "bar");
    assert_eq!(bars.len(), 7);
    for b in &bars {
        let pod = b.attribute("data-pod").unwrap_or("");
        let title = title_of(*b);
        assert!(title.starts_with(&format!("pod {pod} (index ")), "{title}");
        assert!(title.contains(", attempt "), "{title}");
        assert!(title.contains("created at "), "{title}");
    }
    let running = bars
        .iter()
        .find(|b| b.attribute("data-pod") == Some("job-2-b"))
        .expect("the running pod is drawn");
    assert_eq!(running.attribute("class"), Some("bar running"));

    let marks = with_class(&doc, "mark");
    let ruled: Vec<(&str, &str)> = marks
        .iter()
        .map(|m| {
            (
                m.attribute("data-rule").unwrap_or(""),
                m.attribute("data-action").unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        ruled,
        [
            ("ExitCode3", "Count"),
            ("rule 1", "Ignore"),
            ("Fatal", "FailJob")
        ]
    );
    let labels: Vec<&str> = with_class(&doc, "rule-label")
        .iter()
        .filter_map(|n| n.text())
        .collect();
    assert_eq!(
        labels,
        ["ExitCode3: Count", "rule 1: Ignore", "Fatal: FailJob"]
    );
    assert_eq!(with_class(&doc, "backoff").len(), 3);
    // The 10-minute back-off is drawn as a break, and said to be.
    assert_eq!(with_class(&doc, "break").len(), 1);
    let moments = with_class(&doc, "moment");
    assert_eq!(moments.len(), 2);
}

#[test]
fn the_file_needs_nothing_outside_itself_and_is_the_same_bytes_each_time() {
    let out = svg(&sample());
    assert_eq!(out, svg(&sample()));
    for outside in [
        "<script",
        "href=\"http",
        "xlink:href",
        "@import",
        "<style",
        "@font-face",
    ] {
        assert!(!out.contains(outside), "{outside}");
    }
    assert!(!out.contains("NaN") && !out.contains("inf"));
}

#[test]
fn hostile_names_are_escaped() {
    let mut b = Builder::indexed(1);
    let nasty = "pod\"><script>alert('x')</script>&\u{1}\u{FFFF}";
    let mut failed = bar(nasty, 0, 1, 0, Some(5), Outcome::Failed);
    failed.rule = Some(RuleMark::new(0, Some("Rule<&\"'>"), "FailJob"));
    failed.story = vec!["message: ]]> <!-- &amp; \u{0}".into()];
    b.bar(failed);
    b.moment(Moment {
        at: 5,
        kind: MomentKind::Failed,
        label: "Failed: <b>".into(),
        story: "'\"".into(),
    });
    let t = b.build(
        "Job ns/<job>".into(),
        "Failed & done".into(),
        vec!["note \"quoted\"".into()],
        5,
    );
    let out = svg(&t);
    let doc = parse(&out);
    let bars = with_class(&doc, "bar");
    let expected_pod = nasty.replace(['\u{1}', '\u{FFFF}'], "\u{FFFD}");
    assert_eq!(bars[0].attribute("data-pod"), Some(expected_pod.as_str()));
    assert!(title_of(bars[0]).contains("message: ]]> <!-- &amp; \u{FFFD}"));
    assert_eq!(
        with_class(&doc, "mark")[0].attribute("data-rule"),
        Some("Rule<&\"'>")
    );
    assert!(doc.descendants().all(|n| !n.has_tag_name("script")));
}

#[test]
fn a_thousand_indexes_still_draw_in_a_few_mib_with_labels_thinned() {
    let mut b = Builder::indexed(1000);
    for i in 0..1000 {
        let first = format!("big-{i}-a");
        let mut failed = bar(
            &first,
            i,
            1,
            0,
            Some(5 + u64::from(i as u32 % 7)),
            Outcome::Failed,
        );
        failed.rule = Some(RuleMark::new(0, Some("Retryable"), "Count"));
        b.bar(failed);
        b.backoff(&first, 0, 20, "back-off".into());
        b.bar(bar(
            &format!("big-{i}-b"),
            i,
            2,
            20,
            Some(40),
            Outcome::Succeeded,
        ));
    }
    let t = b.build("Job ns/big".into(), "Complete".into(), Vec::new(), 40);
    let out = svg(&t);
    assert!(out.len() < 4 * 1024 * 1024, "{} bytes", out.len());
    let doc = parse(&out);
    assert_eq!(with_class(&doc, "lane").len(), 1000);
    assert_eq!(with_class(&doc, "bar").len(), 2000);
    assert_eq!(with_class(&doc, "mark").len(), 1000);
    let labelled = with_class(&doc, "lane-label").len();
    assert!((50..=500).contains(&labelled), "{labelled} lane labels");
    // Lanes this thin carry no words beside the marks; the marks' hover text names the rule.
    assert_eq!(with_class(&doc, "rule-label").len(), 0);
    assert!(
        with_class(&doc, "mark")
            .iter()
            .all(|m| title_of(*m).contains("Retryable: Count"))
    );
}

/// The seconds of the axis's tick labels (break labels left out).
fn tick_seconds(out: &str) -> Vec<u64> {
    let doc = parse(out);
    let axis = with_class(&doc, "axis");
    let mut ticks: Vec<u64> = axis
        .iter()
        .flat_map(|a| a.children())
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(|l| {
            jobwarden_rules::seconds::parse(l)
                .unwrap_or_else(|e| panic!("tick {l:?}: {e}"))
                .as_secs()
        })
        .collect();
    ticks.sort_unstable();
    ticks.dedup();
    ticks
}

/// A live Job told at `told`: a pod failed at `failed` by a counted rule, its back-off running
/// ten seconds from then, its replacement not made yet; an active deadline an hour in.
fn told_at(told: u64, failed: u64) -> Timeline {
    let mut b = Builder::non_indexed();
    let mut pod = bar("job-a", 0, 1, 0, Some(failed), Outcome::Failed);
    pod.index = None;
    pod.rule = Some(RuleMark::new(0, Some("Transient"), "Count"));
    b.bar(pod);
    b.backoff("job-a", failed, failed + 10, "back-off: 10s".into());
    b.moment(Moment {
        at: 3600,
        kind: MomentKind::ActiveDeadline,
        label: "activeDeadlineSeconds".into(),
        story: "activeDeadlineSeconds falls at 1h0m0s".into(),
    });
    b.moment(Moment {
        at: told,
        kind: MomentKind::Now,
        label: "now".into(),
        story: "told".into(),
    });
    b.build("Job default/young".into(), String::new(), Vec::new(), told)
}

/// The axis ends when the story was told, never at a back-off's or a deadline's end still
/// ahead: a Job 3 s old whose pod failed at 1 s was drawn out to 11 s.
#[test]
fn the_axis_ends_when_the_story_was_told() {
    // Told at, failed at; the axis's end, its last tick no later than.
    let cases: [(u64, u64, u64, u64); 4] = [
        (3, 1, 3, 5),
        (45, 40, 45, 45),
        (3 * 3600, 3 * 3600 - 5, 3 * 3600, 3 * 3600),
        (3 * 3600 + 125, 60, 3 * 3600 + 125, 3 * 3600 + 125),
    ];
    for (told, failed, end, last_tick) in cases {
        let t = told_at(told, failed);
        assert_eq!(t.end, end, "told at {told}");
        let out = svg(&t);
        let ticks = tick_seconds(&out);
        let last = ticks.last().copied().unwrap_or(0);
        assert!(
            last <= last_tick,
            "told at {told}: a tick at {last}s: {ticks:?}"
        );
        assert!(
            last * 10 >= told * 7,
            "told at {told}: the ticks reach near the end: {ticks:?}"
        );
        // The deadline an hour in is a note when it is still ahead, a line once passed.
        let ahead = told < 3600;
        assert_eq!(
            t.notes.iter().any(|n| n
                .contains("Still ahead when the story was told: activeDeadlineSeconds at 1h0m0s")),
            ahead,
            "told at {told}: {:?}",
            t.notes
        );
        assert_eq!(
            t.moments
                .iter()
                .any(|m| m.kind == MomentKind::ActiveDeadline),
            !ahead
        );
        // The back-off is drawn, up to the axis's end at most.
        let doc = parse(&out);
        assert_eq!(with_class(&doc, "backoff").len(), 1, "told at {told}");
    }
}

/// A failure replaced at once, so that no room is left after its mark nor inside its short bar,
/// is still labelled with the rule's name and action ([`RuleMark::label`]).
#[test]
fn a_rule_is_labelled_with_its_name_and_action_wherever_the_lane_has_room() {
    // Failed at, replacement made at, told at.
    let cases: [(u64, u64, u64); 4] = [(1, 1, 3), (1, 2, 3), (5, 5, 600), (30, 30, 45)];
    for (failed, replaced, told) in cases {
        let mut b = Builder::indexed(1);
        let mut pod = bar("job-0-a", 0, 1, 0, Some(failed), Outcome::Failed);
        pod.rule = Some(RuleMark::new(0, Some("ExitCode3"), "Count"));
        b.bar(pod);
        b.bar(bar("job-0-b", 0, 2, replaced, None, Outcome::Running));
        let out = svg(&b.build("Job a/b".into(), String::new(), Vec::new(), told));
        let doc = parse(&out);
        let labels: Vec<&str> = with_class(&doc, "rule-label")
            .iter()
            .filter_map(|n| n.text())
            .collect();
        assert_eq!(
            labels,
            ["ExitCode3: Count"],
            "failed at {failed}, replaced at {replaced}, told at {told}"
        );
    }
}

/// The words of a rule's mark, one function for both pictures (`simulate` and `explain` build
/// their marks with [`RuleMark::new`]).
#[test]
fn a_rule_s_label_is_its_name_or_index_and_its_action() {
    for (index, name, action, label) in [
        (0, Some("ExitCode3"), "FailJob", "ExitCode3: FailJob"),
        (2, None, "Ignore", "rule 2: Ignore"),
        (1, Some("Transient"), "Count", "Transient: Count"),
        (4, Some("Fatal"), "FailIndex", "Fatal: FailIndex"),
    ] {
        assert_eq!(RuleMark::new(index, name, action).label(), label);
    }
}

/// A number attribute of an element.
fn number(node: roxmltree::Node, name: &str) -> f64 {
    node.attribute(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The words a label shows: its text, without its `<title>`.
fn shown(node: roxmltree::Node) -> String {
    node.children()
        .filter(|c| c.is_text())
        .filter_map(|c| c.text())
        .collect()
}

/// An evicted pod (index 2 of `examples/per-index-named-rules.yaml`'s story) replaced 10 s
/// later: its label fits neither after its mark, before the replacement, nor inside its bar.
/// Drawn over the replacement, it was cut to "Evicted: Igno" by it; now it is raised above
/// the lane's bars, whole, and the lane grows to hold it.
#[test]
fn a_label_with_no_room_beside_its_mark_is_raised_above_its_lane_whole() {
    let mut b = Builder::indexed(2);
    let mut evicted = bar("job-0-a", 0, 1, 0, Some(12), Outcome::Disrupted);
    evicted.rule = Some(RuleMark::new(2, Some("Evicted"), "Ignore"));
    b.bar(evicted);
    b.backoff("job-0-a", 12, 22, "back-off: 10s".into());
    b.bar(bar("job-0-b", 0, 2, 22, Some(52), Outcome::Succeeded));
    b.bar(bar("job-1-a", 1, 1, 0, Some(95), Outcome::Succeeded));
    let out = svg(&b.build("Job a/b".into(), String::new(), Vec::new(), 95));
    let doc = parse(&out);
    let label = with_class(&doc, "rule-label")[0];
    assert_eq!(label.text(), Some("Evicted: Ignore"));
    let bars = with_class(&doc, "bar");
    let (bar_top, replacement_x) = (number(bars[0], "y"), number(bars[1], "x"));
    let label_box = label.prev_sibling_element().expect("the label's box");
    // Above the bars, over the mark, reaching past the replacement's start: only raised does
    // it clear the replacement.
    let (box_x, box_y) = (number(label_box, "x"), number(label_box, "y"));
    let box_bottom = box_y + number(label_box, "height");
    assert!(box_bottom <= bar_top, "{box_bottom} > {bar_top}");
    assert!(box_x + number(label_box, "width") > replacement_x);
    // Within its lane's band, which is taller than the next lane's by the raised row.
    let band = |i: usize| {
        let id = format!("jwt-lane-{i}");
        let band = doc
            .descendants()
            .find(|n| n.attribute("id") == Some(id.as_str()))
            .expect("the band");
        (number(band, "y"), number(band, "height"))
    };
    let ((top, height), (next_top, next_height)) = (band(0), band(1));
    assert!(top <= box_y && box_bottom <= top + height);
    assert!(height > next_height && next_top == top + height);
}

/// Forty lanes share the picture's room and cannot grow: a label with no room beside its mark
/// is shortened with an ellipsis into what room there is, before the next bar, and carries its
/// whole text as its `<title>`.
#[test]
fn in_lanes_that_cannot_grow_a_label_with_no_room_is_shortened_its_whole_text_its_title() {
    let mut b = Builder::indexed(40);
    let mut failed = bar("job-0-a", 0, 1, 0, Some(10), Outcome::Failed);
    failed.rule = Some(RuleMark::new(0, Some("AVeryLongRuleName"), "FailIndex"));
    b.bar(failed);
    b.bar(bar("job-0-b", 0, 2, 20, Some(100), Outcome::Succeeded));
    // Something ends every few seconds, so that no stretch of the axis is idle.
    for i in 1..40 {
        let end = 5 + 95 * u64::from(i as u32) / 39;
        b.bar(bar(
            &format!("job-{i}-a"),
            i,
            1,
            0,
            Some(end),
            Outcome::Succeeded,
        ));
    }
    let out = svg(&b.build("Job a/b".into(), String::new(), Vec::new(), 100));
    let doc = parse(&out);
    let labels = with_class(&doc, "rule-label");
    assert_eq!(labels.len(), 1);
    let whole = "AVeryLongRuleName: FailIndex";
    assert_eq!(title_of(labels[0]), whole);
    let text = shown(labels[0]);
    let kept = text.strip_suffix('…').expect("shortened with an ellipsis");
    assert!(
        kept.chars().count() >= 3 && whole.starts_with(kept),
        "{text}"
    );
    let label_box = labels[0].prev_sibling_element().expect("the label's box");
    let replacement = with_class(&doc, "bar")[1];
    assert_eq!(replacement.attribute("data-pod"), Some("job-0-b"));
    assert!(
        number(label_box, "x") + number(label_box, "width") < number(replacement, "x"),
        "the label's box reaches the next bar"
    );
}
