//! The docs cannot rot: every `jobwarden` command a page shows in a `console` block is run with
//! the built binary from the repository's root, and its output compared with what the page
//! shows (a `…` stands for any text); `$ echo $?` checks the exit status of the command before
//! it. Commands that need a cluster or run until stopped (`serve`, `audit`, `explain`,
//! `doctor`) are not run, but every flag a page gives them must be one the binary has, the
//! configuration reference must list exactly `serve`'s flags, and the troubleshooting page
//! exactly `doctor`'s checks.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn pages() -> Vec<PathBuf> {
    let mut pages = vec![Path::new(ROOT).join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .expect("docs/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The fenced blocks of a page: (language, first line number, lines).
fn blocks(text: &str) -> Vec<(String, usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, Vec<String>)> = None;
    for (n, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(lang)) => open = Some((lang.trim().to_owned(), n + 2, Vec::new())),
            (Some(_), Some(_)) => out.extend(open.take()),
            (Some((_, _, lines)), None) => lines.push(line.to_owned()),
            (None, None) => {}
        }
    }
    out
}

/// Splits a command line as a shell would for the simple words the docs use: whitespace,
/// single and double quotes, and a trailing `# comment`.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// `dir/*.ext` as the shell expands it (sorted); anything else as it is.
fn expand(word: &str) -> Vec<String> {
    let Some((dir, pattern)) = word.rsplit_once('/') else {
        return vec![word.to_owned()];
    };
    let Some(suffix) = pattern.strip_prefix('*') else {
        return vec![word.to_owned()];
    };
    let mut found: Vec<String> = std::fs::read_dir(Path::new(ROOT).join(dir))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(suffix))
                .map(|name| format!("{dir}/{name}"))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Whether `actual` is what the docs show as `expected`, where `…` stands for any text.
fn matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.split('…').collect();
    if parts.len() == 1 {
        return expected == actual;
    }
    let (first, rest) = (parts[0], &parts[1..]);
    let Some(mut left) = actual.strip_prefix(first) else {
        return false;
    };
    for (i, part) in rest.iter().enumerate() {
        if i == rest.len() - 1 {
            return left.ends_with(part);
        }
        match left.find(part) {
            Some(at) => left = &left[at + part.len()..],
            None => return false,
        }
    }
    true
}

struct Shown {
    place: String,
    args: Vec<String>,
    output: Vec<String>,
    status: Option<i32>,
}

/// The `jobwarden` commands of the `console` blocks, with the output and status shown.
fn shown_commands() -> Vec<Shown> {
    let mut out = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("readable");
        let name = page
            .strip_prefix(ROOT)
            .unwrap_or(&page)
            .display()
            .to_string();
        for (lang, start, lines) in blocks(&text) {
            if lang != "console" {
                continue;
            }
            let mut current: Option<Shown> = None;
            let mut expect_status = false;
            for (i, line) in lines.iter().enumerate() {
                if let Some(command) = line.strip_prefix("$ ") {
                    expect_status = command.trim() == "echo $?";
                    if expect_status {
                        continue;
                    }
                    out.extend(current.take());
                    let w = words(command);
                    if w.first().map(String::as_str) == Some("jobwarden") {
                        current = Some(Shown {
                            place: format!("{name}:{}", start + i),
                            args: w[1..].iter().flat_map(|a| expand(a)).collect(),
                            output: Vec::new(),
                            status: None,
                        });
                    }
                } else if let Some(c) = current.as_mut() {
                    if expect_status {
                        c.status = line.trim().parse().ok();
                    } else {
                        c.output.push(line.clone());
                    }
                }
            }
            out.extend(current);
        }
    }
    out
}

fn jobwarden(args: &[String]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_jobwarden"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("jobwarden runs")
}

/// Commands that need a cluster or run until stopped: their flags are checked, not run.
fn not_run(args: &[String]) -> bool {
    matches!(
        args.first().map(String::as_str),
        Some("serve" | "audit" | "explain" | "doctor" | "workers")
    )
}

#[test]
fn every_command_shown_prints_what_the_docs_show() {
    let shown = shown_commands();
    assert!(shown.len() >= 5, "found only {} commands", shown.len());
    let mut failures = Vec::new();
    for s in shown.iter().filter(|s| !not_run(&s.args)) {
        let out = jobwarden(&s.args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let actual: Vec<&str> = stdout.lines().collect();
        let code = out.status.code();
        if code == Some(2) && s.status != Some(2) {
            failures.push(format!(
                "{}: jobwarden {} could not run: {}",
                s.place,
                s.args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        if let Some(want) = s.status
            && code != Some(want)
        {
            failures.push(format!(
                "{}: exit status {code:?}, the docs say {want}",
                s.place
            ));
        }
        // A command shown without output is only a tour of what there is.
        if s.output.is_empty() {
            continue;
        }
        let same = s.output.len() == actual.len()
            && s.output.iter().zip(&actual).all(|(e, a)| matches(e, a));
        if !same {
            failures.push(format!(
                "{}: jobwarden {}\n--- the docs show\n{}\n--- it prints\n{}",
                s.place,
                s.args.join(" "),
                s.output.join("\n"),
                actual.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The long flags `jobwarden SUBCOMMAND --help` lists.
fn flags_of(subcommand: &str) -> Vec<String> {
    let out = jobwarden(&[subcommand.to_owned(), "--help".to_owned()]);
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("--"))
        .map(|w| {
            w.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

#[test]
fn every_flag_the_docs_give_serve_audit_and_explain_exists() {
    let mut failures = Vec::new();
    for sub in ["serve", "audit", "explain", "doctor"] {
        let known = flags_of(sub);
        assert!(
            known.contains(&"help".to_owned()),
            "{sub} --help lists its flags"
        );
        for page in pages() {
            let text = std::fs::read_to_string(&page).expect("readable");
            for (_, start, lines) in blocks(&text) {
                for (i, line) in lines.iter().enumerate() {
                    let w = words(line.trim_start_matches("$ "));
                    let Some(at) = w
                        .windows(2)
                        .position(|p| p[0] == "jobwarden" && p[1] == sub)
                    else {
                        continue;
                    };
                    for flag in w[at + 2..].iter().filter_map(|a| a.strip_prefix("--")) {
                        let flag = flag.split('=').next().unwrap_or("");
                        if !known.iter().any(|k| k == flag) {
                            failures.push(format!(
                                "{}:{}: jobwarden {sub} has no --{flag}",
                                page.display(),
                                start + i
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_configuration_reference_lists_exactly_serves_flags() {
    let text =
        std::fs::read_to_string(Path::new(ROOT).join("docs/operations.md")).expect("readable");
    let section = text
        .split("## Configuration reference")
        .nth(1)
        .expect("docs/operations.md has a configuration reference");
    let documented: Vec<String> = section
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| `--"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect();
    let mut known = flags_of("serve");
    known.retain(|f| f != "help");
    known.sort();
    known.dedup();
    let mut documented_sorted = documented.clone();
    documented_sorted.sort();
    let missing: Vec<&String> = known.iter().filter(|f| !documented.contains(f)).collect();
    let unknown: Vec<&String> = documented_sorted
        .iter()
        .filter(|f| !known.contains(f))
        .collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "serve flags missing from the reference: {missing:?}; documented but not flags: {unknown:?}"
    );
}

/// The policy examples operators copy from are policies `serve` starts with: the policy file
/// section of docs/operations.md, and the commented examples in deploy/base/policy.yaml and
/// the chart's values.yaml, each with every setting (the dispatcher's among them) switched on.
#[test]
fn the_policy_examples_are_usable_policies() {
    let read = |path: &str| std::fs::read_to_string(Path::new(ROOT).join(path)).expect(path);
    let operations = read("docs/operations.md");
    let section = operations
        .split("### The policy file")
        .nth(1)
        .expect("docs/operations.md has a policy file section");
    let documented = blocks(section)
        .into_iter()
        .find(|(lang, _, _)| lang == "yaml")
        .map(|(_, _, lines)| lines.join("\n"))
        .expect("a yaml block");
    // The commented example: the lines after the one that introduces it, without the comment
    // mark and the indentation they share.
    let commented = |text: &str, after: &str, mark: &str| {
        text.lines()
            .skip_while(|l| !l.contains(after))
            .skip(1)
            .skip_while(|l| l.trim() == "#")
            .map_while(|l| l.strip_prefix(mark))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let deploy = commented(&read("deploy/base/policy.yaml"), "For example:", "# ");
    let chart = commented(&read("charts/jobwarden/values.yaml"), "policy: {}", "#  ");
    for (what, text) in [
        ("docs/operations.md", documented),
        ("deploy/base/policy.yaml", deploy),
        ("charts/jobwarden/values.yaml", chart),
    ] {
        let policy = jobwarden_server::parse_policy(&text, Path::new(what))
            .unwrap_or_else(|e| panic!("{what}: {e:?}\n{text}"));
        assert!(
            policy.dispatch.is_enabled() && !policy.delegate.dispatch_namespaces.is_empty(),
            "{what}: the example shows the dispatcher\n{text}"
        );
    }
}

/// Every check `doctor` makes links to `<its page>#<its name as an anchor>`: the
/// Troubleshooting section, the page's last, of docs/operations.md (and of docs/dispatch.md for
/// the dispatcher's checks) has one `###` entry per check, headed by its name, and no other.
#[test]
fn the_troubleshooting_page_has_an_entry_for_every_doctor_check() {
    use jobwarden_doctor::check::{DISPATCH_TROUBLESHOOTING_PAGE, TROUBLESHOOTING_PAGE};
    for page in [TROUBLESHOOTING_PAGE, DISPATCH_TROUBLESHOOTING_PAGE] {
        let text = std::fs::read_to_string(Path::new(ROOT).join(page)).expect("readable");
        let (_, section) = text
            .split_once("\n## Troubleshooting\n")
            .unwrap_or_else(|| panic!("{page} has a Troubleshooting section"));
        assert!(
            !section.lines().any(|l| l.starts_with("## ")),
            "Troubleshooting is the last section of {page}"
        );
        let entries: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix("### "))
            .collect();
        let kinds: Vec<_> = jobwarden_doctor::catalogue::ALL
            .iter()
            .filter(|k| k.group.page() == page)
            .collect();
        let checks: Vec<&str> = kinds.iter().map(|k| k.name).collect();
        assert_eq!(
            entries, checks,
            "{page}: one entry per check, in the order doctor prints them"
        );
        // Anchors are unique on the page: no other heading slugs to a check's anchor.
        let anchor =
            |heading: &str| jobwarden_doctor::check::anchor(heading.trim_start_matches('#').trim());
        for kind in kinds {
            let same: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with('#') && anchor(l) == kind.anchor())
                .collect();
            assert_eq!(same.len(), 1, "{}: headings {same:?}", kind.doc());
        }
    }
}

#[test]
fn the_matcher_reads_ellipses_and_shell_words() {
    assert!(matches("a…c", "abbbc"));
    assert!(matches(
        "{\"uid\":\"…\",\"x\":1}",
        "{\"uid\":\"abc\",\"x\":1}"
    ));
    assert!(!matches("a…c", "abd"));
    assert!(matches("same", "same"));
    assert_eq!(
        words("jobwarden check 'a b' \"c\"  # note"),
        ["jobwarden", "check", "a b", "c"]
    );
}
