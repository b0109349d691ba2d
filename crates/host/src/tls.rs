//! The process's one TLS crypto provider: aws-lc-rs.
//!
//! reqwest is built without a provider of its own (the workspace Cargo.toml says why), so
//! every HTTPS client troupe builds — the OpenAI-compatible model, the local model's download,
//! `http_get`, MCP over HTTP, the OTLP exporter — calls [`install_crypto_provider`] first:
//! the choice is made here, once, not by whichever dependency happens to enable a provider.

use std::sync::Once;

/// Install aws-lc-rs as the process's default rustls crypto provider, unless one is installed
/// already (the application's own choice wins). Cheap after the first call.
pub fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Err means a provider is already installed: that one serves.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_is_installed_and_a_second_call_keeps_it() {
        install_crypto_provider();
        let first = rustls::crypto::CryptoProvider::get_default().cloned();
        assert!(first.is_some());
        install_crypto_provider();
        let second = rustls::crypto::CryptoProvider::get_default().cloned();
        assert!(std::sync::Arc::ptr_eq(&first.unwrap(), &second.unwrap()));
    }
}
