//! The rules on real objects: every conformance case, a typical create, a status update, and the
//! worst-case 64 KiB `succeededIndexes`. `cargo bench -p jobwarden-rules`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use jobwarden_rules::{
    JobObject, indexes, validate_create, validate_status_update, validate_update,
};
use serde_json::Value;

struct Case {
    object: Value,
    old: Option<Value>,
    status: bool,
}

/// The cases the validating webhook answers, by file stem.
fn load_cases() -> Vec<(String, Case)> {
    jobwarden_corpus::cases()
        .into_iter()
        .filter(|case| case.webhook() == "validate")
        .map(|case| {
            let request = case.request();
            let rules_case = Case {
                object: request["object"].clone(),
                old: request.get("oldObject").filter(|o| !o.is_null()).cloned(),
                status: case.is_status(),
            };
            (case.stem().to_owned(), rules_case)
        })
        .collect()
}

fn run(case: &Case) -> usize {
    let Ok(new) = JobObject::parse(&case.object) else {
        return 0;
    };
    match &case.old {
        None => validate_create(&new).len(),
        Some(old) => {
            let Ok(old) = JobObject::parse(old) else {
                return 0;
            };
            if case.status {
                validate_status_update(&new, &old).len()
            } else {
                validate_update(&new, &old).len()
            }
        }
    }
}

fn by_name<'a>(cases: &'a [(String, Case)], prefix: &str) -> Option<&'a Case> {
    cases
        .iter()
        .find(|(n, _)| n.starts_with(prefix))
        .map(|(_, c)| c)
}

fn rules(c: &mut Criterion) {
    let cases = load_cases();
    let mut group = c.benchmark_group("rules");
    group.throughput(Throughput::Elements(cases.len() as u64));
    group.bench_function("all_conformance_cases", |b| {
        b.iter(|| {
            cases
                .iter()
                .map(|(_, case)| run(black_box(case)))
                .sum::<usize>()
        })
    });
    group.finish();
    if let Some(case) = by_name(&cases, "027-") {
        // How much of a typical create is decoding the typed view rather than the rules.
        c.bench_function("typical_parse_only", |b| {
            b.iter(|| JobObject::parse(black_box(&case.object)).is_ok())
        });
    }
    for (label, prefix) in [
        ("typical_create", "027-"),
        ("pod_failure_policy_create", "057-"),
        ("spec_update", "091-"),
        ("status_update", "157-"),
    ] {
        if let Some(case) = by_name(&cases, prefix) {
            c.bench_function(label, |b| b.iter(|| run(black_box(case))));
        }
    }
}

fn worst_case_indexes(c: &mut Criterion) {
    // The largest succeededIndexes upstream accepts, in its two worst shapes.
    let mut singles = String::new();
    let mut i = 0u32;
    while singles.len() + 8 < 65_536 {
        if !singles.is_empty() {
            singles.push(',');
        }
        singles.push_str(&i.to_string());
        i += 2;
    }
    let mut ranges = String::new();
    let mut j = 0u32;
    while ranges.len() + 24 < 65_536 {
        if !ranges.is_empty() {
            ranges.push(',');
        }
        ranges.push_str(&format!("{}-{}", j, j + 99_999));
        j += 100_001;
    }
    let completions = i32::MAX;
    let mut group = c.benchmark_group("succeeded_indexes_64KiB");
    group.throughput(Throughput::Bytes(singles.len() as u64));
    group.bench_function("singles", |b| {
        b.iter(|| indexes::count_valid(black_box(&singles), completions))
    });
    group.throughput(Throughput::Bytes(ranges.len() as u64));
    group.bench_function("ranges", |b| {
        b.iter(|| indexes::count_valid(black_box(&ranges), completions))
    });
    group.finish();
    // Through the whole create validation, as a webhook would see it.
    if let Some(case) = by_name(&load_cases(), "031-") {
        c.bench_function("create_with_64KiB_succeeded_indexes", |b| {
            b.iter(|| run(black_box(case)))
        });
    }
}

criterion_group!(benches, rules, worst_case_indexes);
criterion_main!(benches);
