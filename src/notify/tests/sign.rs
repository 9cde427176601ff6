use crate::notify::{signature, timestamped_signature};

/// RFC 4231, test cases 1 and 2 (HMAC-SHA-256).
#[test]
fn the_signature_is_hmac_sha256_of_the_body_in_hex() {
    assert_eq!(
        signature(&[0x0b; 20], b"Hi There"),
        "sha256=b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
    );
    assert_eq!(
        signature(b"Jefe", b"what do ya want for nothing?"),
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn another_key_or_body_gives_another_signature() {
    let body = br#"{"kind":"Promoted"}"#;
    assert_ne!(signature(b"k1", body), signature(b"k2", body));
    assert_ne!(
        signature(b"k1", body),
        signature(b"k1", br#"{"kind":"RolledBack"}"#)
    );
}

#[test]
fn the_timestamped_signature_is_hmac_sha256_of_timestamp_dot_body() {
    // Python: hmac.new(b"s3cret", b'1764921600.{"kind":"Promoted"}', hashlib.sha256).hexdigest()
    let body = br#"{"kind":"Promoted"}"#;
    assert_eq!(
        timestamped_signature(b"s3cret", 1_764_921_600, body),
        "v1=e693e52092d2c18bb310dd38e5b0083bdf0d3a0e119c53cf40f791113f3c3382"
    );
    // A replay with a fresh timestamp cannot keep the old signature.
    assert_ne!(
        timestamped_signature(b"s3cret", 1_764_921_601, body),
        timestamped_signature(b"s3cret", 1_764_921_600, body)
    );
}
