//! The index-interval strings of the Job API (`"1,3-5,7"`): `succeededIndexes`,
//! `completedIndexes`, `failedIndexes`. Parsing follows upstream's `validateIndexesFormat` and
//! `parseIndexInterval` to the letter (Go `strconv.Atoi`, strict ascending order). Work is linear
//! in the input and nothing is allocated per index: a set is a list of intervals.

use std::fmt;

use super::field::go_quote;

/// Why an index string is malformed; `Display` gives upstream's exact text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexError {
    TooManyParts { fragment: String },
    NotAnInteger { part: String },
    TooLarge { part: String },
    NonIncreasing { previous: i64, current: i64 },
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted = |s: &str| {
            let mut q = String::new();
            go_quote(s, &mut q);
            q
        };
        match self {
            IndexError::TooManyParts { fragment } => write!(
                f,
                "the fragment {} violates the requirement that an index interval can have at most two parts separated by '-'",
                quoted(fragment)
            ),
            IndexError::NotAnInteger { part } => {
                write!(
                    f,
                    "cannot convert string to integer for index: {}",
                    quoted(part)
                )
            }
            IndexError::TooLarge { part } => write!(f, "too large index: {}", quoted(part)),
            IndexError::NonIncreasing { previous, current } => {
                write!(
                    f,
                    "non-increasing order, previous: {previous}, current: {current}"
                )
            }
        }
    }
}

impl std::error::Error for IndexError {}

/// An inclusive interval of indexes, `first <= last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    pub first: i32,
    pub last: i32,
}

impl Interval {
    fn len(self) -> u64 {
        (i64::from(self.last) - i64::from(self.first) + 1) as u64
    }
}

/// Go's `strconv.Atoi` on a 64-bit platform: an optional sign, then one or more ASCII digits,
/// within `i64`. Leading zeros and a leading `+` are accepted; spaces are not.
fn go_atoi(s: &str) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n: i64 = 0;
    for b in digits.bytes() {
        if !b.is_ascii_digit() {
            return None;
        }
        let d = i64::from(b - b'0');
        n = n.checked_mul(10)?;
        n = if negative {
            n.checked_sub(d)?
        } else {
            n.checked_add(d)?
        };
    }
    Some(n)
}

/// Splits a fragment into its one or two parts (`"5"`, `"3-7"`).
fn split_fragment(fragment: &str) -> Result<(&str, Option<&str>), IndexError> {
    let mut parts = fragment.split('-');
    let first = parts.next().unwrap_or("");
    let second = parts.next();
    if parts.next().is_some() {
        return Err(IndexError::TooManyParts {
            fragment: fragment.to_owned(),
        });
    }
    Ok((first, second))
}

/// One end of an interval: an integer below `completions`. A negative value cannot get here
/// (the split on '-' leaves an empty part), so the result fits `i32`.
fn bounded_index(part: &str, completions: i32) -> Result<i32, IndexError> {
    let x = go_atoi(part).ok_or_else(|| IndexError::NotAnInteger {
        part: part.to_owned(),
    })?;
    if x >= i64::from(completions) {
        return Err(IndexError::TooLarge {
            part: part.to_owned(),
        });
    }
    i32::try_from(x).map_err(|_| IndexError::NotAnInteger {
        part: part.to_owned(),
    })
}

fn range_end(first: i32, second: Option<&str>, completions: i32) -> Result<i32, IndexError> {
    let Some(part) = second else {
        return Ok(first);
    };
    let last = bounded_index(part, completions)?;
    if first >= last {
        return Err(IndexError::NonIncreasing {
            previous: i64::from(first),
            current: i64::from(last),
        });
    }
    Ok(last)
}

/// One fragment on its own, as upstream's `parseIndexInterval`.
fn parse_fragment(fragment: &str, completions: i32) -> Result<Interval, IndexError> {
    let (first, second) = split_fragment(fragment)?;
    let first = bounded_index(first, completions)?;
    let last = range_end(first, second, completions)?;
    Ok(Interval { first, last })
}

/// Walks the fragments of a strictly ascending index string, calling `each` per interval, with
/// the checks in upstream's order (the start is compared with the previous end before the end
/// of the range is read), stopping at the first error as `validateIndexesFormat` does.
fn walk(s: &str, completions: i32, mut each: impl FnMut(Interval)) -> Result<(), IndexError> {
    if s.is_empty() {
        return Ok(());
    }
    let mut previous_end: Option<i32> = None;
    for fragment in s.split(',') {
        let (first, second) = split_fragment(fragment)?;
        let first = bounded_index(first, completions)?;
        if let Some(prev) = previous_end
            && prev >= first
        {
            return Err(IndexError::NonIncreasing {
                previous: i64::from(prev),
                current: i64::from(first),
            });
        }
        let last = range_end(first, second, completions)?;
        previous_end = Some(last);
        each(Interval { first, last });
    }
    Ok(())
}

/// Upstream's `validateIndexesFormat`: checks the string and counts the indexes it names.
pub fn count_valid(s: &str, completions: i32) -> Result<u64, IndexError> {
    if let Some(total) = count_canonical(s.as_bytes(), completions) {
        return Ok(total);
    }
    let mut total = 0u64;
    walk(s, completions, |i| total += i.len())?;
    Ok(total)
}

/// The hot path for well-formed strings (plain digits, `-`, `,`), one pass over the bytes with
/// no allocation: a 64 KiB `succeededIndexes` is checked in tens of microseconds. Anything else
/// (an error, a `+` sign, long leading zeros) returns `None` and `walk` decides, with upstream's
/// exact messages.
fn count_canonical(s: &[u8], completions: i32) -> Option<u64> {
    if s.is_empty() {
        return Some(0);
    }
    let completions = i64::from(completions);
    // A run of digits at `pos`, below `completions`. Ten digits hold any i32 and cannot overflow
    // an i64, so the bound is checked once per run rather than per digit; longer runs (leading
    // zeros) go to the slow path.
    let number = |pos: &mut usize| -> Option<i64> {
        let start = *pos;
        let mut value: i64 = 0;
        while let Some(d) = s.get(*pos).filter(|b| b.is_ascii_digit()) {
            value = value * 10 + i64::from(d - b'0');
            *pos += 1;
            if *pos - start > 10 {
                return None;
            }
        }
        (*pos > start && value < completions).then_some(value)
    };
    let mut pos = 0;
    let mut total = 0u64;
    let mut previous_end: i64 = -1;
    loop {
        let first = number(&mut pos)?;
        if first <= previous_end {
            return None;
        }
        let mut last = first;
        if s.get(pos) == Some(&b'-') {
            pos += 1;
            last = number(&mut pos)?;
            if last <= first {
                return None;
            }
        }
        total += (last - first + 1) as u64;
        previous_end = last;
        match s.get(pos) {
            None => return Some(total),
            Some(b',') => pos += 1,
            Some(_) => return None,
        }
    }
}

/// Upstream's `validateFailedIndexesNotOverlapCompleted`: the first index named by both strings,
/// skipping any fragment that does not parse (those are reported by the format check).
pub fn first_overlap(completed: &str, failed: &str, completions: i32) -> Option<i32> {
    if completed.is_empty() || failed.is_empty() {
        return None;
    }
    let mut cs = completed.split(',').map(|f| parse_fragment(f, completions));
    let mut fs = failed.split(',').map(|f| parse_fragment(f, completions));
    let mut c = cs.next()?;
    let mut f = fs.next()?;
    loop {
        match (&c, &f) {
            (Err(_), _) => c = cs.next()?,
            (_, Err(_)) => f = fs.next()?,
            (Ok(ci), Ok(fi)) if ci.first > fi.last => f = fs.next()?,
            (Ok(ci), Ok(fi)) if fi.first > ci.last => c = cs.next()?,
            (Ok(ci), Ok(fi)) => return Some(ci.first.max(fi.first)),
        }
    }
}

/// A set of indexes held as sorted, disjoint, non-adjacent intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexSet {
    intervals: Vec<Interval>,
}

impl IndexSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Strict parse: the string must be valid for `completions`, as upstream validates it.
    pub fn parse(s: &str, completions: i32) -> Result<Self, IndexError> {
        let mut set = IndexSet::new();
        walk(s, completions, |i| set.push_back(i))?;
        Ok(set)
    }

    /// Lenient parse, as upstream's controller reads its own status (`parseIndexesFromString`):
    /// fragments that do not parse, are out of order or beyond `completions` are skipped.
    pub fn parse_lenient(s: &str, completions: i32) -> Self {
        let mut set = IndexSet::new();
        if s.is_empty() {
            return set;
        }
        for fragment in s.split(',') {
            if let Ok(interval) = parse_fragment(fragment, completions) {
                set.insert_interval(interval);
            }
        }
        set
    }

    pub fn from_indexes(indexes: impl IntoIterator<Item = i32>) -> Self {
        let mut set = IndexSet::new();
        for i in indexes {
            set.insert(i);
        }
        set
    }

    pub fn intervals(&self) -> &[Interval] {
        &self.intervals
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// How many indexes the set holds.
    pub fn count(&self) -> u64 {
        self.intervals.iter().map(|i| i.len()).sum()
    }

    pub fn contains(&self, index: i32) -> bool {
        let pos = self.intervals.partition_point(|i| i.last < index);
        self.intervals.get(pos).is_some_and(|i| i.first <= index)
    }

    /// Whether every index of `other` is in `self`.
    pub fn contains_all(&self, other: &IndexSet) -> bool {
        other.intervals.iter().all(|o| {
            let pos = self.intervals.partition_point(|i| i.last < o.first);
            self.intervals
                .get(pos)
                .is_some_and(|i| i.first <= o.first && o.last <= i.last)
        })
    }

    /// How many indexes `self` and `other` have in common.
    pub fn intersection_count(&self, other: &IndexSet) -> u64 {
        let (mut a, mut b) = (
            self.intervals.iter().peekable(),
            other.intervals.iter().peekable(),
        );
        let mut total = 0u64;
        while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
            let lo = x.first.max(y.first);
            let hi = x.last.min(y.last);
            if lo <= hi {
                total += (i64::from(hi) - i64::from(lo) + 1) as u64;
            }
            if x.last < y.last {
                a.next();
            } else {
                b.next();
            }
        }
        total
    }

    pub fn insert(&mut self, index: i32) {
        self.insert_interval(Interval {
            first: index,
            last: index,
        });
    }

    /// Every index of `other` added to `self`.
    pub fn union_with(&mut self, other: &IndexSet) {
        for &i in &other.intervals {
            self.insert_interval(i);
        }
    }

    /// Adds an interval, merging with any it overlaps or touches.
    pub fn insert_interval(&mut self, new: Interval) {
        let touches = |i: &Interval| {
            i64::from(i.last) + 1 >= i64::from(new.first)
                && i64::from(new.last) + 1 >= i64::from(i.first)
        };
        let start = self
            .intervals
            .partition_point(|i| i64::from(i.last) + 1 < i64::from(new.first));
        let mut end = start;
        let mut merged = new;
        while let Some(i) = self.intervals.get(end).filter(|i| touches(i)) {
            merged.first = merged.first.min(i.first);
            merged.last = merged.last.max(i.last);
            end += 1;
        }
        self.intervals.splice(start..end, [merged]);
    }

    fn push_back(&mut self, i: Interval) {
        match self.intervals.last_mut() {
            Some(last) if i64::from(last.last) + 1 == i64::from(i.first) => last.last = i.last,
            _ => self.intervals.push(i),
        }
    }

    /// Iterates every index in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = i32> + '_ {
        self.intervals.iter().flat_map(|i| i.first..=i.last)
    }
}

/// The canonical form upstream's controller writes (`orderedIntervals.String`): a run of three
/// or more is `a-b`, a run of two is `a,a+1`.
impl fmt::Display for IndexSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, i) in self.intervals.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            match i64::from(i.last) - i64::from(i.first) {
                0 => write!(f, "{}", i.first)?,
                1 => write!(f, "{},{}", i.first, i.last)?,
                _ => write!(f, "{}-{}", i.first, i.last)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_valid_strings() {
        for (s, completions, want) in [
            ("", 6, 0),
            ("1", 6, 1),
            ("1-3", 6, 3),
            ("0,1-3,5,7-10", 12, 9),
            ("1,2", 3, 2),
            ("1-2,3", 4, 3),
            ("+3,007", 8, 2),
            ("0-99999", 100000, 100000),
            ("000000000007,0000000000008-9", 10, 3),
        ] {
            assert_eq!(count_valid(s, completions), Ok(want), "{s:?}");
        }
    }

    #[test]
    fn rejects_like_upstream() {
        for (s, completions, want) in [
            (
                "0,1-3, 5",
                6,
                "cannot convert string to integer for index: \" 5\"",
            ),
            ("0,1-3,5", 5, "too large index: \"5\""),
            (
                "1-3,0,5",
                6,
                "non-increasing order, previous: 3, current: 0",
            ),
            ("0,0,5", 6, "non-increasing order, previous: 0, current: 0"),
            (
                "0,1-1,5",
                6,
                "non-increasing order, previous: 1, current: 1",
            ),
            (
                "-1,0",
                6,
                "cannot convert string to integer for index: \"\"",
            ),
            (
                "0,1-",
                6,
                "cannot convert string to integer for index: \"\"",
            ),
            (
                "0,,1,3",
                6,
                "cannot convert string to integer for index: \"\"",
            ),
            (
                "0,1--3",
                6,
                "the fragment \"1--3\" violates the requirement that an index interval can have at most two parts separated by '-'",
            ),
            (
                "invalid-format",
                6,
                "cannot convert string to integer for index: \"invalid\"",
            ),
            (
                "99999999999999999999",
                6,
                "cannot convert string to integer for index: \"99999999999999999999\"",
            ),
            ("0", 0, "too large index: \"0\""),
            ("5,1-3", 6, "non-increasing order, previous: 5, current: 1"),
        ] {
            assert_eq!(
                count_valid(s, completions).map_err(|e| e.to_string()),
                Err(want.to_owned()),
                "{s:?}"
            );
        }
    }

    #[test]
    fn finds_overlaps_skipping_corrupt_fragments() {
        let c = "0,2-4,6-8,12-19";
        assert_eq!(first_overlap(c, "1,8,9-10", 20), Some(8));
        assert_eq!(first_overlap(c, "1,9-10", 20), None);
        assert_eq!(first_overlap("0,2-4,6-8,12-19,x", "1,8,9-10", 20), Some(8));
        assert_eq!(
            first_overlap("x,0,2-4,6-8,12-19", "1,8,9-10,y", 20),
            Some(8)
        );
        assert_eq!(first_overlap("2-4", "0,2", 5), Some(2));
        assert_eq!(first_overlap("", "0", 5), None);
    }

    #[test]
    fn formats_canonically() {
        let set = IndexSet::from_indexes([7, 1, 3, 4, 5, 9, 10]);
        assert_eq!(set.to_string(), "1,3-5,7,9,10");
        assert_eq!(set.count(), 7);
        assert!(set.contains(4) && !set.contains(6) && !set.contains(11));
        assert_eq!(
            IndexSet::parse("3-4", 10).map(|s| s.to_string()),
            Ok("3,4".into())
        );
        assert_eq!(
            IndexSet::parse_lenient("x,1,0,5-6,40", 10).to_string(),
            "0,1,5,6"
        );
    }

    #[test]
    fn set_algebra() {
        let a = IndexSet::parse("0-9,20", 30).unwrap_or_default();
        let b = IndexSet::parse("5,9-12,20", 30).unwrap_or_default();
        assert_eq!(a.intersection_count(&b), 3);
        assert!(a.contains_all(&IndexSet::parse("1-3,20", 30).unwrap_or_default()));
        assert!(!a.contains_all(&b));
        let mut u = a.clone();
        u.union_with(&b);
        assert_eq!(u.to_string(), "0-12,20");
    }

    proptest! {
        #[test]
        fn parse_of_format_is_identity(indexes in proptest::collection::btree_set(0i32..500, 0..80)) {
            let set = IndexSet::from_indexes(indexes.iter().copied());
            let text = set.to_string();
            prop_assert_eq!(IndexSet::parse(&text, 500), Ok(set.clone()));
            prop_assert_eq!(count_valid(&text, 500), Ok(indexes.len() as u64));
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), indexes.into_iter().collect::<Vec<_>>());
        }

        #[test]
        fn fast_path_agrees_with_upstream_walk(s in "[0-9,-]{0,30}|[0-9]{1,3}(-[0-9]{1,3})?(,[0-9]{1,3}(-[0-9]{1,3})?){0,6}", completions in 0i32..1200) {
            let mut total = 0u64;
            let walked = walk(&s, completions, |i| total += i.len()).map(|()| total);
            if let Some(fast) = count_canonical(s.as_bytes(), completions) {
                prop_assert_eq!(Ok(fast), walked.clone());
            }
            prop_assert_eq!(count_valid(&s, completions), walked);
        }

        #[test]
        fn never_panics_on_arbitrary_text(s in "[0-9,+ -]{0,40}", completions in -2i32..50) {
            let strict = IndexSet::parse(&s, completions);
            let counted = count_valid(&s, completions);
            prop_assert_eq!(strict.as_ref().map(|s| s.count()).ok(), counted.ok());
            let _ = IndexSet::parse_lenient(&s, completions);
            let _ = first_overlap(&s, &s, completions);
        }
    }
}
