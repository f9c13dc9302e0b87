//! What a scale benchmark's command line picks: the jobwarden binary it runs, shapes by name
//! (all when none is named), and how many times each runs (`RUNS`, default 1).

use std::path::PathBuf;

/// The jobwarden binary (the first argument) and the arguments after it; panics with `usage`
/// without one.
pub fn binary_and_args(usage: &str) -> (PathBuf, Vec<String>) {
    let mut args = std::env::args().skip(1);
    let binary = args.next().map(PathBuf::from).expect(usage);
    (binary, args.collect())
}

/// The shapes among `all` that `asked` names by `key` (every shape when `asked` is empty);
/// panics naming the shapes when it names none of them.
pub fn chosen<'a, T>(all: &'a [T], key: impl Fn(&T) -> &str, asked: &[String]) -> Vec<&'a T> {
    let chosen: Vec<&T> = all
        .iter()
        .filter(|s| asked.is_empty() || asked.iter().any(|a| a == key(s)))
        .collect();
    assert!(
        !chosen.is_empty(),
        "no shape named {asked:?}; the shapes are {}",
        all.iter().map(&key).collect::<Vec<_>>().join(", ")
    );
    chosen
}

/// `RUNS`, the number of times each shape runs: 1 unless set.
pub fn runs() -> usize {
    std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_shapes_named_or_all() {
        struct Shape(&'static str);
        fn key(s: &Shape) -> &str {
            s.0
        }
        let all = [Shape("burst"), Shape("indexed")];
        let names = |chosen: Vec<&Shape>| chosen.iter().map(|s| s.0).collect::<Vec<_>>();
        assert_eq!(names(chosen(&all, key, &[])), ["burst", "indexed"]);
        assert_eq!(
            names(chosen(&all, key, &["indexed".to_owned()])),
            ["indexed"]
        );
        let none = std::panic::catch_unwind(|| chosen(&all, key, &["fan-out".to_owned()]).len());
        assert!(none.is_err());
    }
}
