//! The process's one TLS crypto provider: ring.
//!
//! reqwest is built without a provider of its own (the workspace Cargo.toml says why), and
//! rustls picks no process default when more than one provider is compiled in (a dependency,
//! `ractor_cluster`, still enables aws-lc-rs). So every HTTPS client troupe builds — the
//! OpenAI-compatible model, the local model's download, `http_get`, MCP over HTTP, the OTLP
//! exporter — calls [`install_crypto_provider`] first; without it reqwest panics.

use std::sync::Once;

/// Install ring as the process's default rustls crypto provider, unless one is installed
/// already (the application's own choice wins). Cheap after the first call.
pub fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Err means a provider is already installed: that one serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
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
