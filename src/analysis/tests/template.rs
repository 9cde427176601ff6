use crate::analysis::template::*;
use regex::Regex;
use std::time::Duration;

fn vars() -> TemplateVars {
    TemplateVars {
        namespace: "shop".into(),
        pods: pods_regex("storefront"),
        interval: Duration::from_secs(60),
        container: "web".into(),
        window: Duration::from_secs(600),
    }
}

/// Prometheus anchors `=~` itself; the regex crate speaks the same RE2 syntax.
fn matches(regex: &str, name: &str) -> bool {
    Regex::new(regex).unwrap().is_match(name)
}

#[test]
fn renders_every_variable() {
    let q = render(
        "backlog",
        r#"max(puma_backlog{namespace="{{namespace}}",pod=~"{{ pods }}",container="{{container}}"}[{{interval}}])"#,
        &vars(),
    )
    .unwrap();
    assert_eq!(
        q,
        r#"max(puma_backlog{namespace="shop",pod=~"^storefront-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$",container="web"}[1m])"#
    );
}

#[test]
fn unknown_variable_names_the_check() {
    let e = render("backlog", "up{pod=~\"{{pod}}\"}", &vars()).unwrap_err();
    assert_eq!(
        e,
        TemplateError::UnknownVariable {
            check: "backlog".into(),
            var: "pod".into()
        }
    );
    assert!(e.to_string().contains("check backlog"), "{e}");
    assert!(e.to_string().contains("{{pod}}"), "{e}");
    let e = render("x", "up{{namespace", &vars()).unwrap_err();
    assert_eq!(e.category(), "BadTemplate");
}

#[test]
fn label_values_cannot_break_out_of_the_string() {
    // `"}` would end the string and the selector; escaped, it stays part of the value.
    assert_eq!(
        escape_label_value(r#"shop"} or vector(1) #"#).unwrap(),
        r#"shop\"} or vector(1) #"#
    );
    assert_eq!(escape_label_value(r"a\b").unwrap(), r"a\\b");
    // A trailing backslash must not escape the closing quote.
    assert_eq!(escape_label_value("a\\").unwrap(), "a\\\\");
    assert_eq!(escape_label_value("a\nb"), None);
    assert_eq!(escape_label_value("a\rb"), None);
    assert_eq!(escape_label_value("a\u{0}b"), None);

    let mut v = vars();
    v.namespace = r#"x"}) or up{job=~".*"#.into();
    let q = render("c", r#"up{namespace="{{namespace}}"}"#, &v).unwrap();
    assert_eq!(q, r#"up{namespace="x\"}) or up{job=~\".*"}"#);
    // The only unescaped quotes left are the template's own two.
    let unescaped = q
        .char_indices()
        .filter(|&(i, c)| c == '"' && !q[..i].ends_with('\\'))
        .count();
    assert_eq!(unescaped, 2);

    v.container = "web\n".into();
    let e = render("memory", r#"m{container="{{container}}"}"#, &v).unwrap_err();
    assert_eq!(e.category(), "UnsafeTemplateValue");
}

#[test]
fn regex_values_match_only_themselves() {
    let r = format!("^{}$", escape_regex(".*|x"));
    assert_eq!(r, r"^\.\*\|x$");
    assert!(matches(&r, ".*|x"));
    assert!(!matches(&r, "x"));
    assert!(!matches(&r, "anything"));
    let all = r"\.+*?()|[]{}^$";
    assert!(matches(&format!("^{}$", escape_regex(all)), all));
}

#[test]
fn pods_regex_matches_exactly_one_deployment() {
    let r = pods_regex("storefront");
    for own in [
        "storefront-7d9c5b6f4b-x2k9q",
        "storefront-5f4d8c9b7-b2c4d",
        "storefront-69d7b8c5d-zzzzz",
    ] {
        assert!(matches(&r, own), "{own}");
    }
    for other in [
        "storefront-candidate-7d9c5b6f4b-x2k9q",
        "storefront-x-7d9c5b6f4b-x2k9q",
        "storefront-x-7d9c5b6f4b",
        "storefront2-7d9c5b6f4b-x2k9q",
        "xstorefront-7d9c5b6f4b-x2k9q",
        "storefront-7d9c5b6f4b-x2k9",
        "storefront-7d9c5b6f4b-x2k9qq",
        "storefront-7d9c5b6f4b-aeiou",
        "storefront-7d9c5b6f4b-x2k9q-extra",
        "storefront",
    ] {
        assert!(!matches(&r, other), "{other}");
    }
    let c = pods_regex("storefront-candidate");
    assert!(matches(&c, "storefront-candidate-7d9c5b6f4b-x2k9q"));
    assert!(!matches(&c, "storefront-7d9c5b6f4b-x2k9q"));
}

#[test]
fn pods_regex_escapes_dots_in_names() {
    let r = pods_regex("web.v2");
    assert!(matches(&r, "web.v2-7d9c5b6f4b-x2k9q"));
    assert!(!matches(&r, "webxv2-7d9c5b6f4b-x2k9q"));
    // Through the template the regex's backslash is escaped once more for the PromQL string.
    let mut v = vars();
    v.pods = r;
    let q = render("c", r#"up{pod=~"{{pods}}"}"#, &v).unwrap();
    assert!(q.contains(r#"pod=~"^web\\.v2-["#), "{q}");
}

#[test]
fn pods_regex_follows_generate_name_truncation() {
    // 50 characters: `<name>-<10 char hash>-` is 62 > 58, so generateName cut it.
    let name = "a".repeat(50);
    let r = pods_regex(&name);
    // Hash cut to 7 characters and the dash dropped, then the 5-character suffix.
    assert!(matches(&r, &format!("{name}-7d9c5b6x2k9q")), "{r}");
    // A short hash still fits whole.
    assert!(matches(&r, &format!("{name}-7d9c5-x2k9q")), "{r}");
    assert!(!matches(&r, &format!("{name}-candid-x2k9q")), "{r}");
    assert!(!matches(&r, &format!("{name}-candidate-7d9c5b6f4b-x2k9q")));
}

#[test]
fn pods_regex_any_covers_both_variants() {
    let r = pods_regex_any(&["storefront", "storefront-candidate"]);
    assert!(matches(&r, "storefront-7d9c5b6f4b-x2k9q"));
    assert!(matches(&r, "storefront-candidate-7d9c5b6f4b-x2k9q"));
    assert!(!matches(&r, "storefront-x-7d9c5b6f4b-x2k9q"));
}

#[test]
fn check_variables_validates_without_values() {
    assert!(check_variables("ok", "sum(rate(x{pod=~\"{{pods}}\"}[{{interval}}]))").is_ok());
    assert!(check_variables("bad", "{{podz}}").is_err());
}
