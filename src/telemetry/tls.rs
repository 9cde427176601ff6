//! The process-wide rustls crypto provider.
//!
//! kube enables rustls' `ring` provider and prometheus-http-query (through reqwest) enables
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_provider_is_installed_and_repeat_calls_are_harmless() {
        install_crypto_provider();
        install_crypto_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        // kube's client builder is what panicked without a provider.
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        assert!(kube::Client::try_from(config).is_ok());
    }
}
