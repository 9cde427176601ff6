//! The process-wide rustls crypto provider.
//!
//! kube enables rustls' `ring` provider and reqwest (the Prometheus and webhook clients) enables
//! `aws-lc-rs`; with both compiled in, rustls cannot choose and panics when the first TLS
//! client is built. Installing one explicitly, before any client exists, settles it.

/// Installs `ring` as the default provider. Idempotent: a provider already installed (by an
/// earlier call or by anyone else) is kept.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: some provider is then in place.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
