use proptest::prelude::*;

use crate::room::{MAX_AMOUNT, QuantityError, Resources, parse_amount};

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

fn res(pairs: &[(&str, u64)]) -> Resources {
    let mut r = Resources::default();
    for (n, v) in pairs {
        r.set(n, *v);
    }
    r
}

#[test]
fn resources_arithmetic() {
    let gpu = "nvidia.com/gpu";
    let mut a = res(&[("cpu", 2000), (gpu, 2), ("example.com/a", 1)]);
    a.add(&res(&[("cpu", 500), ("example.com/b", 3), (gpu, 1)]));
    assert_eq!(
        a,
        res(&[
            ("cpu", 2500),
            (gpu, 3),
            ("example.com/a", 1),
            ("example.com/b", 3)
        ])
    );
    a.sub(&res(&[(gpu, 5), ("example.com/a", 1), ("memory", 1)]));
    assert_eq!(
        a,
        res(&[("cpu", 2500), ("example.com/b", 3)]),
        "stops at 0, drops zeros"
    );
    assert_eq!(a.get(gpu), 0);
    a.max_with(&res(&[("cpu", 100), ("example.com/b", 7)]));
    assert_eq!(a, res(&[("cpu", 2500), ("example.com/b", 7)]));
    let names: Vec<&str> = a.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["cpu", "example.com/b"]);
    let mut big = res(&[("cpu", u64::MAX - 1), (gpu, u64::MAX)]);
    big.add(&res(&[("cpu", 5), (gpu, 5)]));
    assert_eq!(
        (big.cpu_millis, big.get(gpu)),
        (u64::MAX, u64::MAX),
        "saturating"
    );
    assert_eq!(res(&[(gpu, 2)]).times(u64::MAX).get(gpu), u64::MAX);
    assert!(res(&[(gpu, 1)]).fits_in(&res(&[(gpu, 1)])));
    assert!(!res(&[(gpu, 1)]).fits_in(&res(&[("cpu", 1)])));
    assert!(Resources::default().fits_in(&Resources::default()));
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
