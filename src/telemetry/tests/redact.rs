use crate::telemetry::redact::{error_chain, url_for_display};

#[test]
fn userinfo_is_redacted_and_the_rest_kept() {
    for (url, shown) in [
        (
            "https://admin:s3cret@prom.example:9090/prometheus",
            "https://REDACTED@prom.example:9090/prometheus",
        ),
        ("http://token@prom:9090", "http://REDACTED@prom:9090"),
        // A password holding `@`: everything up to the last `@` of the authority goes.
        ("http://u:p@ss@prom/x?q=a@b", "http://REDACTED@prom/x?q=a@b"),
        (
            "http://prom:9090/api?who=a@b",
            "http://prom:9090/api?who=a@b",
        ),
        ("http://prom:9090", "http://prom:9090"),
        ("not a url@all", "REDACTED@all"),
    ] {
        assert_eq!(url_for_display(url), shown, "{url}");
    }
}

#[test]
fn a_chain_names_each_cause_once() {
    let inner = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "sending")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    assert_eq!(error_chain(&Outer(inner)), "sending: refused");
}
