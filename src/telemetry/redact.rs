//! What the operator may print about an HTTP endpoint: its URL without credentials, and an
//! error's causes without the URL reqwest puts in them. One home for the webhook and the
//! Prometheus client, so a `user:pass@` never reaches a log line, an Event or a status reason.

/// `url` with any `user:pass@` replaced by `REDACTED@`. Textual, so it also cleans a string
/// that is not a valid URL (an error message quoting what the user wrote).
pub fn url_for_display(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    // The authority ends at the first `/`, `?` or `#`; userinfo ends at its last `@`.
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}REDACTED{}", &rest[at..]),
        None => url.to_string(),
    }
}

/// The error and its causes on one line ("error sending request: … Connection refused"),
/// a cause already quoted by its parent not repeated. Give it `reqwest::Error::without_url`.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
