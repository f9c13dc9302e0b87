//! Resource amounts as kube-scheduler compares them: integers per resource name (cpu in
//! millicores as `Quantity.MilliValue()`, everything else as `Quantity.Value()`, both rounded
//! up), parsed from Kubernetes quantity strings without a panic on any input.
//!
//! No crate is used for the parsing: the ones on crates.io go through a decimal type with 28
//! digits (or floats), pull in a second `k8s-openapi`, and none rounds as `MilliValue` does.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// The largest amount kept (2^50: a PiB of memory, a million million cores in millicores).
/// Larger quantities are clamped to it, so that the sums of a worker's pods stay far from
/// `u64::MAX` and a pod's requests subtract exactly what they added.
pub const MAX_AMOUNT: u64 = 1 << 50;

/// Why a quantity could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantity {0:?} is not a number with an optional suffix")]
    Malformed(Box<str>),
    #[error("quantity {0:?} is negative")]
    Negative(Box<str>),
}

/// A quantity of one resource that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource {resource}")]
pub struct ResourceError {
    pub resource: Box<str>,
    #[source]
    pub source: QuantityError,
}

/// Amounts per resource, compact: the four every pod has in fields, the others (extended
/// resources, hugepages) in a sorted boxed slice that costs nothing when empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    pub cpu_millis: u64,
    pub memory: u64,
    pub ephemeral_storage: u64,
    pub pods: u64,
    /// Sorted by name, no zero amounts.
    scalar: Box<[(Box<str>, u64)]>,
}

impl Resources {
    /// One pod slot and nothing else.
    pub fn one_pod() -> Resources {
        Resources {
            pods: 1,
            ..Resources::default()
        }
    }

    pub fn get(&self, name: &str) -> u64 {
        match name {
            CPU => self.cpu_millis,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.pods,
            _ => self
                .scalar
                .binary_search_by(|(n, _)| (**n).cmp(name))
                .ok()
                .and_then(|i| self.scalar.get(i))
                .map_or(0, |(_, v)| *v),
        }
    }

    /// The amount of `name` as people read it: cpu in cores (it is kept in millicores), memory
    /// in bytes, the rest in their own units.
    pub fn in_units(&self, name: &str) -> f64 {
        // Amounts are far below 2^53: exact as f64.
        #[allow(clippy::cast_precision_loss)]
        let amount = self.get(name) as f64;
        if name == CPU { amount / 1000.0 } else { amount }
    }

    pub fn set(&mut self, name: &str, amount: u64) {
        match name {
            CPU => self.cpu_millis = amount,
            MEMORY => self.memory = amount,
            EPHEMERAL_STORAGE => self.ephemeral_storage = amount,
            PODS => self.pods = amount,
            _ => {
                let mut scalar: Vec<(Box<str>, u64)> = std::mem::take(&mut self.scalar).into();
                match scalar.binary_search_by(|(n, _)| (**n).cmp(name)) {
                    Ok(i) if amount == 0 => {
                        scalar.remove(i);
                    }
                    Ok(i) => {
                        if let Some(slot) = scalar.get_mut(i) {
                            slot.1 = amount;
                        }
                    }
                    Err(_) if amount == 0 => {}
                    Err(i) => scalar.insert(i, (name.into(), amount)),
                }
                self.scalar = scalar.into_boxed_slice();
            }
        }
    }

    /// The resources beyond the four standard ones (extended resources, hugepages), by name.
    pub fn others(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.scalar.iter().map(|(n, v)| (&**n, *v))
    }

    /// Every resource with a non-zero amount, the four standard ones first.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        [
            (CPU, self.cpu_millis),
            (MEMORY, self.memory),
            (EPHEMERAL_STORAGE, self.ephemeral_storage),
            (PODS, self.pods),
        ]
        .into_iter()
        .chain(self.scalar.iter().map(|(n, v)| (&**n, *v)))
        .filter(|(_, v)| *v > 0)
    }

    /// Each amount `op(self, other)`, where `op(x, 0) == x` (add, subtract, max): the names
    /// only in `self` are left as they are, and the two sorted lists are merged in one pass.
    fn combine(&mut self, other: &Resources, op: impl Fn(u64, u64) -> u64) {
        self.cpu_millis = op(self.cpu_millis, other.cpu_millis);
        self.memory = op(self.memory, other.memory);
        self.ephemeral_storage = op(self.ephemeral_storage, other.ephemeral_storage);
        self.pods = op(self.pods, other.pods);
        if other.scalar.is_empty() {
            return;
        }
        let same_names = self.scalar.len() == other.scalar.len()
            && self
                .scalar
                .iter()
                .zip(&other.scalar)
                .all(|(a, b)| a.0 == b.0);
        if same_names {
            // The common case of a node's free room less a pod's requests: no allocation.
            for (a, b) in self.scalar.iter_mut().zip(&other.scalar) {
                a.1 = op(a.1, b.1);
            }
        } else {
            let mut merged = Vec::with_capacity(self.scalar.len() + other.scalar.len());
            let (mut mine, mut theirs) = (self.scalar.iter().peekable(), other.scalar.iter());
            for (name, v) in theirs.by_ref() {
                while let Some((n, x)) = mine.next_if(|(n, _)| n < name) {
                    merged.push((n.clone(), *x));
                }
                let x = mine.next_if(|(n, _)| n == name).map_or(0, |(_, x)| *x);
                merged.push((name.clone(), op(x, *v)));
            }
            merged.extend(mine.cloned());
            self.scalar = merged.into_boxed_slice();
        }
        if self.scalar.iter().any(|(_, v)| *v == 0) {
            self.scalar = self
                .scalar
                .iter()
                .filter(|(_, v)| *v > 0)
                .cloned()
                .collect();
        }
    }

    /// `self += other`, saturating.
    pub fn add(&mut self, other: &Resources) {
        self.combine(other, u64::saturating_add);
    }

    /// `self -= other`, each amount stopping at 0.
    pub fn sub(&mut self, other: &Resources) {
        self.combine(other, u64::saturating_sub);
    }

    /// Each amount the larger of the two (init containers, upstream's `maxResourceList`).
    pub fn max_with(&mut self, other: &Resources) {
        self.combine(other, u64::max);
    }

    /// `self × n`, saturating.
    pub fn times(&self, n: u64) -> Resources {
        let mut out = Resources::default();
        for (name, v) in self.iter() {
            out.set(name, v.saturating_mul(n));
        }
        out
    }

    /// Every amount requested here is available in `free` (a resource missing there is 0),
    /// as noderesources' `fitsRequest` checks: a zero request never fails.
    pub fn fits_in(&self, free: &Resources) -> bool {
        self.iter().all(|(name, v)| v <= free.get(name))
    }

    /// The resources requested here that `free` cannot give.
    pub fn short_in<'a>(&'a self, free: &'a Resources) -> impl Iterator<Item = &'a str> + 'a {
        self.iter()
            .filter(move |(name, v)| *v > free.get(name))
            .map(|(name, _)| name)
    }

    /// A resource list read strictly: the first quantity that cannot be read is an error.
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Result<Resources, ResourceError> {
        let mut out = Resources::default();
        for (name, q) in list {
            let amount = parse_amount(name, &q.0).map_err(|source| ResourceError {
                resource: name.as_str().into(),
                source,
            })?;
            out.set(name, amount);
        }
        Ok(out)
    }

    /// A resource list from a stored object, which the API server has validated already; a
    /// quantity this parser still cannot read counts as `unreadable` (the caller's choice of
    /// the cautious side: everything for a pod's request, nothing for a node's allocatable).
    pub fn from_list_lenient(list: &BTreeMap<String, Quantity>, unreadable: u64) -> Resources {
        let mut out = Resources::default();
        for (name, q) in list {
            out.set(name, parse_amount(name, &q.0).unwrap_or(unreadable));
        }
        out
    }
}

/// One amount in the units the scheduler compares: `cpu` as `MilliValue()`, anything else
/// as `Value()`; both round up (`1n` of cpu is 1 millicore, `0.5` of memory is 1 byte).
pub fn parse_amount(resource: &str, quantity: &str) -> Result<u64, QuantityError> {
    parse_scaled(quantity, if resource == CPU { 3 } else { 0 })
}

/// Significant decimal digits kept; the rest only round up, which leaves the ceiling exact
/// for every amount below `MAX_AMOUNT`.
const DIGITS: u32 = 18;

/// `ceil(quantity × 10^scale)`, clamped to `MAX_AMOUNT`. The grammar is resource.Quantity's:
/// a signed decimal number, then one suffix of `n u m "" k M G T P E`, `Ki … Ei`, or a
/// decimal exponent `e3`/`E-2`.
fn parse_scaled(quantity: &str, scale: i32) -> Result<u64, QuantityError> {
    let malformed = || QuantityError::Malformed(quantity.into());
    let (negative, rest) = match quantity.as_bytes().first() {
        Some(b'-') => (true, quantity.get(1..).unwrap_or("")),
        Some(b'+') => (false, quantity.get(1..).unwrap_or("")),
        _ => (false, quantity),
    };
    let split = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(split);
    let (mut exp10, pow2) = suffix_scale(suffix).ok_or_else(malformed)?;
    if number.matches('.').count() > 1 || !number.bytes().any(|b| b.is_ascii_digit()) {
        return Err(malformed());
    }
    let mut mantissa: u128 = 0;
    let mut kept = 0u32;
    let mut sticky = false;
    let mut fraction = false;
    for b in number.bytes() {
        if b == b'.' {
            fraction = true;
            continue;
        }
        let d = u128::from(b - b'0');
        if kept < DIGITS && (mantissa > 0 || d > 0) {
            mantissa = mantissa * 10 + d;
            kept += 1;
            if fraction {
                exp10 -= 1;
            }
        } else if kept < DIGITS && fraction {
            exp10 -= 1; // a leading zero of the fraction
        } else if kept >= DIGITS {
            sticky |= d > 0;
            if !fraction {
                exp10 += 1;
            }
        }
    }
    if mantissa == 0 && !sticky {
        return Ok(0);
    }
    if negative {
        return Err(QuantityError::Negative(quantity.into()));
    }
    let mantissa = (mantissa + u128::from(sticky)) << pow2; // < 2^60 · 2^60
    let exp10 = exp10 + scale;
    let value = if exp10 >= 0 {
        10u128
            .checked_pow(exp10.unsigned_abs())
            .and_then(|p| mantissa.checked_mul(p))
            .unwrap_or(u128::MAX)
    } else {
        match 10u128.checked_pow(exp10.unsigned_abs()) {
            Some(p) => mantissa.div_ceil(p),
            None => 1, // a positive amount below 10^-38 of the unit rounds up to 1
        }
    };
    Ok(u64::try_from(value.min(u128::from(MAX_AMOUNT))).unwrap_or(MAX_AMOUNT))
}

/// The suffix's power of ten and power of two.
fn suffix_scale(suffix: &str) -> Option<(i32, u32)> {
    Some(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exp = suffix.strip_prefix(['e', 'E'])?;
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            // Beyond four digits every amount clamps or rounds to 1 anyway.
            if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            (exp.parse().ok()?, 0)
        }
    })
}

/// An amount as a person reads it: `2`, `500m` of cpu, `16Gi` of memory, `3` GPUs.
pub struct Amount<'a>(pub &'a str, pub u64);

impl fmt::Display for Amount<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Amount(name, v) = *self;
        if name == CPU {
            return if v % 1000 == 0 {
                write!(f, "{}", v / 1000)
            } else {
                write!(f, "{v}m")
            };
        }
        if name == MEMORY || name == EPHEMERAL_STORAGE || name.starts_with("hugepages-") {
            for (unit, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
                if v >= 1 << shift && v % (1 << shift) == 0 {
                    return write!(f, "{}{unit}", v >> shift);
                }
            }
        }
        write!(f, "{v}")
    }
}
