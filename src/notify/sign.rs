//! The generic webhook's signature: HMAC-SHA256 of the exact body bytes, hex, in
//! `X-Concurrency-Signature: sha256=<hex>` (the form GitHub's `X-Hub-Signature-256` made
//! familiar, so existing verifiers fit). `ring` computes it: it is already in the tree (rustls),
//! so no second crypto crate is added.

use ring::hmac;

pub const SIGNATURE_HEADER: &str = "X-Concurrency-Signature";

/// `sha256=<lowercase hex of HMAC-SHA256(key, body)>`.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let tag = hmac::sign(&key, body);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}
