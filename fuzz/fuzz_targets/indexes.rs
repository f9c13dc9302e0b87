//! The index-interval parser (`"1,3-5,7"`): `succeededIndexes`, `completedIndexes`,
//! `failedIndexes`. Besides "never panics", the fast path (`count_valid`) and the general
//! parser (`IndexSet::parse`) must agree on every input, and a parsed set must be sorted,
//! disjoint and within `[0, completions)`.
#![no_main]

use jobwarden_rules::indexes::{IndexSet, count_valid, first_overlap};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Four bytes of completions (any i32, negative included), then the text; a '|' splits it
    // into the completed and failed strings for the overlap check.
    if data.len() < 4 {
        return;
    }
    let (head, rest) = data.split_at(4);
    let completions = i32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };

    let counted = count_valid(text, completions);
    let parsed = IndexSet::parse(text, completions);
    match (&counted, &parsed) {
        (Ok(count), Ok(set)) => assert_eq!(*count, set.count(), "{text:?} {completions}"),
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "{text:?} {completions}");
            let _ = a.to_string();
        }
        _ => panic!("count_valid {counted:?} vs parse {parsed:?} for {text:?} {completions}"),
    }
    if let Ok(set) = &parsed {
        check_set(set, completions);
    }
    let lenient = IndexSet::parse_lenient(text, completions);
    check_set(&lenient, completions);

    if let Some((completed, failed)) = text.split_once('|') {
        if let Some(index) = first_overlap(completed, failed, completions) {
            let a = IndexSet::parse_lenient(completed, completions);
            let b = IndexSet::parse_lenient(failed, completions);
            assert!(a.contains(index) && b.contains(index), "{text:?} {index}");
        }
    }
});

fn check_set(set: &IndexSet, completions: i32) {
    let mut previous: Option<i32> = None;
    for interval in set.intervals() {
        assert!(interval.first <= interval.last);
        assert!(interval.first >= 0 && interval.last < completions.max(0));
        if let Some(end) = previous {
            assert!(interval.first > end);
        }
        previous = Some(interval.last);
    }
}
