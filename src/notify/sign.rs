//! The generic webhook's signatures, both HMAC-SHA256 with the signing key, hex:
//!
//! - `X-Concurrency-Signature: sha256=<hex of HMAC(key, body)>`, the form GitHub's
//!   `X-Hub-Signature-256` made familiar, so existing verifiers fit. It cannot tell a replay.
//! - `X-Concurrency-Timestamp: <unix seconds>` and `X-Concurrency-Signature-V1: v1=<hex of
//!   HMAC(key, "<timestamp>.<body>")>`, as Stripe and Slack sign: a receiver that checks the
//!   timestamp is recent (5 minutes) refuses a captured request sent again later. Each attempt
//!   of a delivery is signed at its own time.
//!
//! `ring` computes them: it is already in the tree (rustls), so no second crypto crate is added.

use ring::hmac;

pub const SIGNATURE_HEADER: &str = "X-Concurrency-Signature";
pub const TIMESTAMP_HEADER: &str = "X-Concurrency-Timestamp";
pub const TIMESTAMPED_SIGNATURE_HEADER: &str = "X-Concurrency-Signature-V1";

fn hmac_hex(key: &[u8], parts: &[&[u8]]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&key);
    for p in parts {
        ctx.update(p);
    }
    ctx.sign()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `sha256=<lowercase hex of HMAC-SHA256(key, body)>`.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(key, &[body]))
}

/// `v1=<lowercase hex of HMAC-SHA256(key, "<timestamp>.<body>")>`, `timestamp` in Unix seconds
/// as sent in `X-Concurrency-Timestamp`.
pub fn timestamped_signature(key: &[u8], timestamp: i64, body: &[u8]) -> String {
    let ts = timestamp.to_string();
    format!("v1={}", hmac_hex(key, &[ts.as_bytes(), b".", body]))
}
