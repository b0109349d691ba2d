//! TLS between nodes, from PEM files. TLS is mutual: every node presents `cert`/`key` on both
//! ends of a connection and checks the other end's certificate against `ca`, so a peer without
//! a certificate from that authority is refused in the TLS handshake, before it can try the
//! cookie.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::error::ClusterError;

/// Where a node's TLS material is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// This node's certificate chain (PEM).
    pub cert: PathBuf,
    /// This node's private key (PEM).
    pub key: PathBuf,
    /// The certificate authority (PEM) that signed the other nodes' certificates; a
    /// self-signed node certificate is its own authority. Checked on both ends: a node accepts
    /// only peers that present a certificate it signed.
    pub ca: PathBuf,
    /// The name the peers' certificates are issued for (checked on connect).
    pub server_name: String,
}

impl TlsConfig {
    /// The acceptor for incoming connections: it requires a client certificate from `ca`.
    pub(crate) fn acceptor(&self) -> Result<TlsAcceptor, ClusterError> {
        let (certs, key) = (self.certs()?, self.key()?);
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(self.roots()?), provider())
                .build()
                .map_err(|e| tls_error(&self.ca, &e.to_string()))?;
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| ClusterError::Tls(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .map_err(|e| ClusterError::Tls(format!("{}: {e}", self.cert.display())))?;
        Ok(TlsAcceptor::from(Arc::new(config)))
    }

    /// The connector for outgoing connections (presenting this node's certificate), and the
    /// name to check the peer's certificate for.
    pub(crate) fn connector(&self) -> Result<(TlsConnector, ServerName<'static>), ClusterError> {
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| ClusterError::Tls(e.to_string()))?
            .with_root_certificates(self.roots()?)
            .with_client_auth_cert(self.certs()?, self.key()?)
            .map_err(|e| ClusterError::Tls(format!("{}: {e}", self.cert.display())))?;
        let name = ServerName::try_from(self.server_name.clone())
            .map_err(|e| ClusterError::Tls(format!("server name `{}`: {e}", self.server_name)))?;
        Ok((TlsConnector::from(Arc::new(config)), name))
    }

    /// The authorities in `ca`.
    fn roots(&self) -> Result<rustls::RootCertStore, ClusterError> {
        let mut roots = rustls::RootCertStore::empty();
        let cas = CertificateDer::pem_file_iter(&self.ca)
            .map_err(|e| tls_error(&self.ca, &e.to_string()))?;
        for ca in cas {
            let ca = ca.map_err(|e| tls_error(&self.ca, &e.to_string()))?;
            roots
                .add(ca)
                .map_err(|e| tls_error(&self.ca, &e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(tls_error(&self.ca, "no certificate in the file"));
        }
        Ok(roots)
    }

    fn key(&self) -> Result<PrivateKeyDer<'static>, ClusterError> {
        PrivateKeyDer::from_pem_file(&self.key).map_err(|e| tls_error(&self.key, &e.to_string()))
    }

    fn certs(&self) -> Result<Vec<CertificateDer<'static>>, ClusterError> {
        let certs = CertificateDer::pem_file_iter(&self.cert)
            .map_err(|e| tls_error(&self.cert, &e.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_error(&self.cert, &e.to_string()))?;
        if certs.is_empty() {
            return Err(tls_error(&self.cert, "no certificate in the file"));
        }
        Ok(certs)
    }
}

/// The one crypto provider troupe uses (aws-lc-rs), named explicitly rather than taken from
/// the process default, which an embedding application may have set to something else.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn tls_error(path: &std::path::Path, reason: &str) -> ClusterError {
    ClusterError::Tls(format!("{}: {reason}", path.display()))
}
