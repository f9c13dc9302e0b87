//! A whole review as the server runs it: request bytes in, response bytes out, with the
//! jobwarden binary's allocator (mimalloc). `cargo bench -p jobwarden-admission --bench review`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use jobwarden_admission::{Context, Reviewer, Webhook};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn request(prefix: &str) -> Option<(Webhook, Vec<u8>)> {
    let case = jobwarden_corpus::case(prefix)?;
    let webhook = if case.webhook() == "mutate" {
        Webhook::Mutate
    } else {
        Webhook::Validate
    };
    Some((webhook, serde_json::to_vec(case.review()).ok()?))
}

fn review(c: &mut Criterion) {
    let reviewer = Reviewer::default();
    let ctx = Context::default();
    for (label, prefix) in [
        ("validate_typical_create", "027-"),
        ("validate_denied_create", "043-"),
        ("validate_status_update", "157-"),
        ("mutate_create", "168-"),
        ("validate_64KiB_succeeded_indexes", "031-"),
    ] {
        if let Some((webhook, body)) = request(prefix) {
            c.bench_function(label, |b| {
                b.iter(|| reviewer.review(webhook, black_box(&body), &ctx))
            });
        }
    }
}

criterion_group!(benches, review);
criterion_main!(benches);
