//! KEP-4368 `spec.managedBy`: a domain-prefixed path of at most 63 bytes, immutable on update.
//! Mirrors upstream's `validateJobSpec` managedBy block, including which part of the value each
//! message prints.

use super::ErrorList;
use super::field::{BadValue, FieldError, FieldPath};
use super::names::{self, DomainPathError};

pub const MAX_LENGTH: usize = 63;

pub fn validate(managed_by: Option<&str>, path: &FieldPath) -> ErrorList {
    let Some(value) = managed_by else {
        return ErrorList::new();
    };
    let mut errs: ErrorList = names::domain_prefixed_path(value)
        .into_iter()
        .map(|e| match e {
            DomainPathError::Empty => FieldError::required(path, ""),
            DomainPathError::NotDomainPrefixed => FieldError::invalid(
                path,
                BadValue::Str(value.to_owned()),
                "must be a domain-prefixed path (such as \"acme.io/foo\")",
            ),
            DomainPathError::Host(host, msg) => {
                FieldError::invalid(path, BadValue::Str(host.to_owned()), msg)
            }
            DomainPathError::Path(part, msg) => {
                FieldError::invalid(path, BadValue::Str(part.to_owned()), msg)
            }
        })
        .collect();
    if value.len() > MAX_LENGTH {
        errs.push(FieldError::too_long(path, MAX_LENGTH));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(v: &str) -> Vec<String> {
        validate(Some(v), &FieldPath::new("spec").child("managedBy"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn table() {
        let empty: Vec<String> = Vec::new();
        assert_eq!(check("example.com/foo"), empty);
        assert_eq!(check("kubernetes.io/job-controller"), empty);
        let at_63 = format!("example.com/{}", "x".repeat(51));
        assert_eq!(at_63.len(), 63);
        assert_eq!(check(&at_63), empty);
        assert_eq!(
            check(&format!("{at_63}x")),
            ["spec.managedBy: Too long: may not be more than 63 bytes"]
        );
        assert_eq!(check(""), ["spec.managedBy: Required value"]);
        assert_eq!(
            check("invalid custom controller name"),
            [
                "spec.managedBy: Invalid value: \"invalid custom controller name\": must be a domain-prefixed path (such as \"acme.io/foo\")"
            ]
        );
        assert!(check("Example.com/foo")[0].starts_with(
            "spec.managedBy: Invalid value: \"Example.com\": a lowercase RFC 1123 subdomain"
        ));
        assert!(
            check("a.io/b c")[0]
                .starts_with("spec.managedBy: Invalid value: \"b c\": Invalid path")
        );
        assert_eq!(validate(None, &FieldPath::new("spec")), vec![]);
    }
}
