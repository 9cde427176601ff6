//! The rustls configuration of a provider with TLS settings: its CA file instead of the
//! system's roots, the name the certificate must carry instead of the URL's host, or no
//! verification at all (`insecureSkipVerify`: still encrypted, and handshake signatures are
//! still checked, but anyone can pose as the server).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::endpoint::rustls_name;
use super::provider::Tls;

/// Largest CA file read (a bundle of a few hundred certificates).
const MAX_CA_BYTES: u64 = 4 * 1024 * 1024;

pub fn tls_config(tls: &Tls) -> Result<rustls::ClientConfig, String> {
    let crypto = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let verifier: Arc<dyn ServerCertVerifier> = match tls.insecure_skip_verify {
        true => Arc::new(AnyCertificate(crypto.clone())),
        false => {
            let roots = roots(tls)?;
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), crypto.clone())
                    .build()
                    .map_err(|e| format!("TLS verifier: {e}"))?;
            match tls.server_name.as_deref() {
                Some(name) => Arc::new(Renamed {
                    inner: webpki,
                    name: rustls_name(name)
                        .ok_or_else(|| format!("tls.serverName {name:?} is not a DNS name"))?,
                }),
                None => webpki,
            }
        }
    };
    Ok(rustls::ClientConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS versions: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

fn roots(tls: &Tls) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match &tls.ca_file {
        Some(path) => {
            let fail = |m: String| format!("reading tls.caFile {}: {m}", path.display());
            let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
            if meta.len() > MAX_CA_BYTES {
                return Err(fail(format!("larger than {MAX_CA_BYTES} bytes")));
            }
            let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| fail(e.to_string()))?;
                roots.add(cert).map_err(|e| fail(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(fail("no PEM certificate in it".into()));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // One unusable system certificate must not cost the others.
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err(
                    "no CA certificates were loaded from the system: install a CA bundle in the \
                     operator image, point SSL_CERT_FILE at one, or set tls.caFile"
                        .into(),
                );
            }
        }
    }
    Ok(roots)
}

/// Verifies the certificate against a fixed name instead of the URL's host (Prometheus'
/// `tls_config.server_name`); the connection still sends the URL's host as SNI.
#[derive(Debug)]
struct Renamed {
    inner: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for Renamed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `insecureSkipVerify`: any certificate, but a handshake signed by its key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
