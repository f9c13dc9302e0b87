use proptest::prelude::*;

use crate::room::{MAX_AMOUNT, QuantityError, parse_amount};

#[test]
fn quantities_as_milli_value_and_value() {
    let table: &[(&str, &str, u64)] = &[
        ("cpu", "1", 1000),
        ("cpu", "2", 2000),
        ("cpu", "0.5", 500),
        ("cpu", ".5", 500),
        ("cpu", "100m", 100),
        ("cpu", "1.0001", 1001),
        ("cpu", "1n", 1),
        ("cpu", "1u", 1),
        ("cpu", "1e3", 1_000_000),
        ("cpu", "1E-3", 1),
        ("cpu", "+1", 1000),
        ("cpu", "5.", 5000),
        ("cpu", "0", 0),
        ("cpu", "-0", 0),
        ("cpu", "0.0", 0),
        ("memory", "1", 1),
        ("memory", "0.5", 1),
        ("memory", "1Ki", 1024),
        ("memory", "1.5Gi", 3 << 29),
        ("memory", "123Mi", 123 << 20),
        ("memory", "128974848", 128_974_848),
        ("memory", "129e6", 129_000_000),
        ("memory", "129M", 129_000_000),
        ("memory", "1k", 1000),
        ("memory", "1G", 1_000_000_000),
        ("memory", "1T", 1_000_000_000_000),
        ("memory", "1P", 1_000_000_000_000_000),
        ("memory", "1Ti", 1 << 40),
        ("memory", "1Pi", 1 << 50),
        ("memory", "1m", 1),
        ("memory", "1500m", 2),
        ("memory", "0.1Ki", 103),
        ("memory", "007", 7),
        ("ephemeral-storage", "10Gi", 10 << 30),
        ("nvidia.com/gpu", "2", 2),
        ("pods", "110", 110),
        // Beyond what any node holds: clamped, never wrapped.
        ("memory", "2Pi", MAX_AMOUNT),
        ("memory", "1E", MAX_AMOUNT),
        ("memory", "8Ei", MAX_AMOUNT),
        ("cpu", "1e9999", MAX_AMOUNT),
        (
            "memory",
            "99999999999999999999999999999999999999999999999",
            MAX_AMOUNT,
        ),
        // Many digits still round up exactly.
        ("memory", "1.0000000000000000000000000001", 2),
        (
            "memory",
            "0.00000000000000000000000000000000000000000001",
            1,
        ),
        ("cpu", "1e-9999", 1),
    ];
    for &(resource, q, want) in table {
        assert_eq!(parse_amount(resource, q), Ok(want), "{resource} {q}");
    }
}

#[test]
fn unreadable_quantities_are_errors() {
    for q in [
        "", "abc", "1.2.3", "1Kb", "1KiB", "1 ", " 1", "1e", "e3", "1ee3", "1e99999", "--1", "+-1",
        "1i", "K", "Ki", ".", "1..", "1,5", "١", "1e+", "0x10",
    ] {
        assert!(
            matches!(parse_amount("memory", q), Err(QuantityError::Malformed(_))),
            "{q:?}"
        );
    }
    for q in ["-1", "-0.5m", "-1Ki"] {
        assert!(
            matches!(parse_amount("cpu", q), Err(QuantityError::Negative(_))),
            "{q:?}"
        );
    }
}

proptest! {
    #[test]
    fn no_quantity_string_panics(q in "\\PC{0,40}", r in prop::sample::select(vec!["cpu", "memory", "x/y"])) {
        let _ = parse_amount(r, &q);
    }

    #[test]
    fn number_like_strings_never_panic(q in "[-+]?[0-9.]{0,30}([eE][-+]?[0-9]{0,6}|[numkMGTPE]i?)?") {
        if let Ok(v) = parse_amount("cpu", &q) {
            prop_assert!(v <= MAX_AMOUNT);
        }
    }

    #[test]
    fn integers_are_exact(n in 0u64..(1 << 40)) {
        prop_assert_eq!(parse_amount("memory", &n.to_string()), Ok(n));
        prop_assert_eq!(parse_amount("cpu", &format!("{n}m")), Ok(n));
    }
}
