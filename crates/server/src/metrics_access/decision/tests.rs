use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};
use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;

use super::*;

fn user(name: &str) -> UserInfo {
    UserInfo {
        username: Some(name.to_owned()),
        groups: Some(vec!["system:serviceaccounts".to_owned()]),
        uid: Some("uid-1".to_owned()),
        extra: Some(BTreeMap::from([(
            "authentication.kubernetes.io/pod-name".to_owned(),
            vec!["prometheus-0".to_owned()],
        )])),
    }
}

#[test]
fn the_bearer_token_is_read_as_kube_apiserver_reads_it() {
    let cases: &[(Option<&[u8]>, Credential<'_>)] = &[
        (None, Credential::Missing),
        (Some(b"Bearer abc"), Credential::Bearer("abc")),
        (Some(b"bearer abc"), Credential::Bearer("abc")),
        (Some(b"BEARER abc"), Credential::Bearer("abc")),
        // The second word is the token; a third is ignored, as upstream's SplitN(…, 3) does.
        (Some(b"Bearer abc def"), Credential::Bearer("abc")),
        (Some(b"Bearer"), Credential::Missing),
        (Some(b"Bearer "), Credential::Missing),
        (Some(b"Bearer  abc"), Credential::Empty),
        (Some(b"Basic dXNlcjpwYXNz"), Credential::Missing),
        (Some(b"abc"), Credential::Missing),
        (Some(b""), Credential::Missing),
        (Some(b"Bearer \xff\xfe"), Credential::Empty),
    ];
    for (header, want) in cases {
        assert_eq!(credential(*header), *want, "{header:?}");
    }
}

#[test]
fn the_token_review_carries_the_token_and_no_audience() {
    let review = token_review("abc");
    assert_eq!(review.spec.token, "abc");
    assert_eq!(review.spec.audiences, None);
}

#[test]
fn only_an_authenticated_named_user_passes_the_token_review() {
    let status = |authenticated: Option<bool>, user: Option<UserInfo>, error: Option<&str>| {
        TokenReviewStatus {
            authenticated,
            user,
            error: error.map(str::to_owned),
            audiences: None,
        }
    };
    let nameless = UserInfo::default();
    let cases: Vec<(Option<TokenReviewStatus>, Result<&str, &str>)> = vec![
        (
            Some(status(
                Some(true),
                Some(user("system:serviceaccount:mon:prom")),
                None,
            )),
            Ok("system:serviceaccount:mon:prom"),
        ),
        (
            Some(status(Some(false), None, Some("token has expired"))),
            Err("token has expired"),
        ),
        (
            Some(status(None, None, None)),
            Err("the token is not authenticated"),
        ),
        (
            Some(status(Some(false), None, Some(""))),
            Err("the token is not authenticated"),
        ),
        (
            Some(status(Some(true), Some(nameless), None)),
            Err("the token is not authenticated"),
        ),
        (
            Some(status(Some(true), None, None)),
            Err("the token is not authenticated"),
        ),
        (None, Err("the TokenReview came back without a status")),
    ];
    for (status, want) in cases {
        let got = authenticated_user(status.as_ref());
        match (got, want) {
            (Ok(user), Ok(name)) => assert_eq!(user.username.as_deref(), Some(name)),
            (Err(reason), Err(want)) => assert_eq!(reason, want),
            (got, want) => panic!("{status:?}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn the_access_review_asks_for_get_on_the_metrics_path_as_the_whole_user() {
    let who = user("system:serviceaccount:mon:prom");
    let review = access_review(&who);
    let spec = review.spec;
    assert_eq!(spec.user, who.username);
    assert_eq!(spec.groups, who.groups);
    assert_eq!(spec.uid, who.uid);
    assert_eq!(spec.extra, who.extra);
    assert_eq!(spec.resource_attributes, None);
    let attributes = spec
        .non_resource_attributes
        .expect("non-resource attributes");
    assert_eq!(attributes.path.as_deref(), Some("/metrics"));
    assert_eq!(attributes.verb.as_deref(), Some("get"));
}

#[test]
fn the_access_review_decides_and_a_refusal_reads_like_kube_apiserver() {
    let who = user("system:serviceaccount:mon:prom");
    let status = |allowed: bool, denied: Option<bool>, reason: &str, error: &str| {
        SubjectAccessReviewStatus {
            allowed,
            denied,
            reason: Some(reason.to_owned()),
            evaluation_error: Some(error.to_owned()),
        }
    };
    let forbidden = |reason: &str| Access::Forbidden {
        user: "system:serviceaccount:mon:prom".to_owned(),
        reason: reason.to_owned(),
    };
    let cases = [
        (
            Some(status(
                true,
                None,
                "RBAC: allowed by ClusterRoleBinding",
                "",
            )),
            Access::Allowed {
                user: "system:serviceaccount:mon:prom".to_owned(),
            },
            "",
        ),
        (
            Some(status(false, None, "", "")),
            forbidden(""),
            "forbidden: User \"system:serviceaccount:mon:prom\" cannot get path \"/metrics\"\n",
        ),
        // An explicit deny wins over an allow (a webhook authorizer can say both).
        (
            Some(status(true, Some(true), "denied by policy", "")),
            forbidden("denied by policy"),
            "forbidden: User \"system:serviceaccount:mon:prom\" cannot get path \"/metrics\": denied by policy\n",
        ),
        (
            Some(status(false, Some(false), "no rule", "role not found")),
            forbidden("no rule; role not found"),
            "forbidden: User \"system:serviceaccount:mon:prom\" cannot get path \"/metrics\": no rule; role not found\n",
        ),
        (
            None,
            forbidden("the SubjectAccessReview came back without a status"),
            "forbidden: User \"system:serviceaccount:mon:prom\" cannot get path \"/metrics\": the SubjectAccessReview came back without a status\n",
        ),
    ];
    for (status, want, message) in cases {
        let got = Access::from_review(&who, status.as_ref());
        assert_eq!(got, want, "{status:?}");
        assert_eq!(got.message(), message, "{status:?}");
    }
    let unauthenticated = Access::Unauthenticated {
        reason: "token has expired".to_owned(),
    };
    assert_eq!(unauthenticated.message(), "Unauthorized\n");
}
