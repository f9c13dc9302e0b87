//! One conformance case reviewed many times, for an instruction-count profile that does not
//! drift with the machine's load (criterion's wall clock does):
//!
//! ```sh
//! cargo build --release -p jobwarden-admission --example profile_review
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/profile_review 027- 1000
//! callgrind_annotate --inclusive=yes /tmp/cg.out | head -40
//! ```
//!
//! Arguments: the case's file-name prefix, the number of reviews (default 1000), and
//! `--mutate` or `--validate` to override the case's own webhook.

use std::hint::black_box;

use jobwarden_admission::{Context, Reviewer, Webhook};

// The allocator of the jobwarden binary, so the profile is of the review as the server runs it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let prefix = args
        .first()
        .ok_or("usage: profile_review PREFIX [COUNT] [--mutate|--validate]")?;
    let count: usize = match args.get(1) {
        Some(n) => n.parse().map_err(|e| format!("count {n:?}: {e}"))?,
        None => 1000,
    };
    let case =
        jobwarden_corpus::case(prefix).ok_or_else(|| format!("no case starts with {prefix:?}"))?;
    let body = serde_json::to_vec(case.review()).map_err(|e| e.to_string())?;
    let webhook = match (
        args.iter().any(|a| a == "--mutate"),
        args.iter().any(|a| a == "--validate"),
    ) {
        (true, _) => Webhook::Mutate,
        (_, true) => Webhook::Validate,
        _ if case.webhook() == "mutate" => Webhook::Mutate,
        _ => Webhook::Validate,
    };
    let reviewer = Reviewer::default();
    let ctx = Context::default();
    let mut bytes = 0;
    for _ in 0..count {
        if let Ok(reviewed) = reviewer.review(webhook, black_box(&body), &ctx) {
            bytes += black_box(reviewed.body).len();
        }
    }
    println!(
        "{}: {count} reviews ({webhook}), {bytes} bytes answered",
        case.file
    );
    Ok(())
}
