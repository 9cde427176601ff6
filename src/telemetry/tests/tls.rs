use crate::telemetry::tls::*;

#[tokio::test]
async fn a_provider_is_installed_and_repeat_calls_are_harmless() {
    install_crypto_provider();
    install_crypto_provider();
    assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    // kube's client builder is what panicked without a provider.
    let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    assert!(kube::Client::try_from(config).is_ok());
}
