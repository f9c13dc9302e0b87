//! Name syntaxes from apimachinery's `util/validation`: DNS-1123 labels and subdomains,
//! qualified names, domain-prefixed paths, and metav1 condition reasons. Each returns upstream's
//! messages (grammar, double spaces and all) so callers can wrap them in field errors.

pub const DNS1123_LABEL_MAX: usize = 63;
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
pub const QUALIFIED_NAME_MAX: usize = 63;
pub const CONDITION_REASON_MAX: usize = 128;

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const PATH_MSG: &str =
    "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')";
const REASON_MSG: &str = "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')";

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            lower_alnum(f) && lower_alnum(l) && b.iter().all(|&c| lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        errs.push(format!(
            "must be no more than {DNS1123_LABEL_MAX} characters"
        ));
    }
    if !is_label_shape(s) {
        errs.push(DNS1123_LABEL_MSG.to_owned());
    }
    errs
}

pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= DNS1123_LABEL_MAX && is_label_shape(s)
}

pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
        ));
    }
    if !s.split('.').all(is_label_shape) {
        errs.push(DNS1123_SUBDOMAIN_MSG.to_owned());
    }
    errs
}

const LABEL_VALUE_MAX: usize = 63;
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Upstream's `IsValidLabelValue`.
pub fn label_value(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > LABEL_VALUE_MAX {
        errs.push(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    let b = v.as_bytes();
    let ok = match (b.first(), b.last()) {
        (None, _) | (_, None) => true,
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
    };
    if !ok {
        errs.push(LABEL_VALUE_MSG.to_owned());
    }
    errs
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Upstream's `IsQualifiedName` (label keys, condition types).
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX} bytes"
        ));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errs
}

/// What is wrong with a domain-prefixed path (`IsDomainPrefixedPath`), and which part of the
/// value upstream prints with the message.
#[derive(Debug, PartialEq, Eq)]
pub enum DomainPathError<'a> {
    Empty,
    NotDomainPrefixed,
    Host(&'a str, String),
    Path(&'a str, String),
}

pub fn domain_prefixed_path(s: &str) -> Vec<DomainPathError<'_>> {
    if s.is_empty() {
        return vec![DomainPathError::Empty];
    }
    let Some((host, path)) = s.split_once('/') else {
        return vec![DomainPathError::NotDomainPrefixed];
    };
    if host.is_empty() || path.is_empty() {
        return vec![DomainPathError::NotDomainPrefixed];
    }
    let mut errs: Vec<DomainPathError<'_>> = dns1123_subdomain(host)
        .into_iter()
        .map(|m| DomainPathError::Host(host, m))
        .collect();
    let path_ok = path
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&c));
    if !path_ok {
        errs.push(DomainPathError::Path(path, PATH_MSG.to_owned()));
    }
    errs
}

/// metav1 `Condition.reason`: `[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?`, here capped at the
/// 128 characters KEP-4443 allows for a failure reason.
pub fn condition_reason(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > CONDITION_REASON_MAX {
        errs.push(format!(
            "must be no more than {CONDITION_REASON_MAX} characters"
        ));
    }
    let b = s.as_bytes();
    let ok = match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphabetic()
                && (b.len() == 1 || l.is_ascii_alphanumeric() || *l == b'_')
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':'))
        }
        _ => false,
    };
    if !ok {
        errs.push(REASON_MSG.to_owned());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        assert!(is_dns1123_label("a-9"));
        assert!(!is_dns1123_label("a.9"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_label(&"a".repeat(63)));
        assert!(dns1123_subdomain("example.com").is_empty());
        assert_eq!(
            dns1123_subdomain("Example.com"),
            vec![DNS1123_SUBDOMAIN_MSG]
        );
        assert_eq!(dns1123_subdomain("a..b").len(), 1);
        assert_eq!(dns1123_label("-a").len(), 1);
    }

    #[test]
    fn qualified_names() {
        assert!(qualified_name("example.com/Ready").is_empty());
        assert!(qualified_name("DisruptionTarget").is_empty());
        assert_eq!(
            qualified_name(""),
            vec![
                "name part must be non-empty".to_owned(),
                format!("name part {QUALIFIED_NAME_MSG}")
            ]
        );
        assert_eq!(
            qualified_name(&"x".repeat(64)),
            vec!["name part must be no more than 63 bytes"]
        );
        assert_eq!(qualified_name("/a"), vec!["prefix part must be non-empty"]);
        assert_eq!(qualified_name("a/b/c").len(), 1);
    }

    #[test]
    fn domain_prefixed_paths() {
        assert!(domain_prefixed_path("example.com/foo").is_empty());
        assert!(domain_prefixed_path("example.com/a/b~%!$&'()*+,;=:").is_empty());
        assert_eq!(domain_prefixed_path(""), vec![DomainPathError::Empty]);
        assert_eq!(
            domain_prefixed_path("no slash"),
            vec![DomainPathError::NotDomainPrefixed]
        );
        assert_eq!(
            domain_prefixed_path("a.io/"),
            vec![DomainPathError::NotDomainPrefixed]
        );
        assert!(matches!(
            domain_prefixed_path("Example.com/foo").as_slice(),
            [DomainPathError::Host("Example.com", _)]
        ));
        assert!(matches!(
            domain_prefixed_path("a.io/b c").as_slice(),
            [DomainPathError::Path("b c", _)]
        ));
    }

    #[test]
    fn condition_reasons() {
        for ok in [
            "A",
            "PodFailurePolicy_ExitCode2",
            "PodFailurePolicy_",
            "a:b,c_1",
        ] {
            assert!(condition_reason(ok).is_empty(), "{ok}");
        }
        for bad in ["", "1abc", "PodFailurePolicy_exit-code", "a,", "a b"] {
            assert!(!condition_reason(bad).is_empty(), "{bad}");
        }
        assert!(condition_reason(&"A".repeat(128)).is_empty());
        assert_eq!(condition_reason(&"A".repeat(129)).len(), 1);
    }
}
