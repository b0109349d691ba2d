//! TLS between nodes, from PEM files: every node presents `cert`/`key` when it accepts a
//! connection and checks the peer's certificate against `ca` when it opens one.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
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
    /// self-signed node certificate is its own authority.
    pub ca: PathBuf,
    /// The name the peers' certificates are issued for (checked on connect).
    pub server_name: String,
}

impl TlsConfig {
    /// The acceptor for incoming connections.
    pub(crate) fn acceptor(&self) -> Result<ractor_cluster::IncomingEncryptionMode, ClusterError> {
        let certs = self.certs()?;
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .map_err(|e| tls_error(&self.key, &e.to_string()))?;
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| ClusterError::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| ClusterError::Tls(format!("{}: {e}", self.cert.display())))?;
        Ok(ractor_cluster::IncomingEncryptionMode::Tls(
            TlsAcceptor::from(Arc::new(config)),
        ))
    }

    /// The connector for outgoing connections, and the name to check the peer's certificate for.
    pub(crate) fn connector(&self) -> Result<(TlsConnector, ServerName<'static>), ClusterError> {
        let mut roots = rustls::RootCertStore::empty();
        let cas = CertificateDer::pem_file_iter(&self.ca)
            .map_err(|e| tls_error(&self.ca, &e.to_string()))?;
        for ca in cas {
            let ca = ca.map_err(|e| tls_error(&self.ca, &e.to_string()))?;
            roots
                .add(ca)
                .map_err(|e| tls_error(&self.ca, &e.to_string()))?;
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| ClusterError::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from(self.server_name.clone())
            .map_err(|e| ClusterError::Tls(format!("server name `{}`: {e}", self.server_name)))?;
        Ok((TlsConnector::from(Arc::new(config)), name))
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

/// The one crypto provider troupe uses, named explicitly: the process may link more than one.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_error(path: &std::path::Path, reason: &str) -> ClusterError {
    ClusterError::Tls(format!("{}: {reason}", path.display()))
}
