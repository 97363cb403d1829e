//! TLS to clients: a certificate chain and its key from PEM files, TLS 1.3 and 1.2, ALPN `h2`
//! then `http/1.1`, and the files read again on demand (SIGHUP in the CLI) without touching the
//! connections already made.
//!
//! A reload builds a whole new acceptor and swaps it in only if the new files make one: a
//! connection holds the acceptor it was accepted with, so one under way never sees the change,
//! and a bad new file leaves the old acceptor serving (the error says which file and why).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The ALPN names offered, best first: HTTP/2, then HTTP/1.1 (RFC 7301; RFC 9113 §3.2).
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Why a certificate or key could not be used; each names the file.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs)] // The fields are what the messages say.
pub enum TlsError {
    /// The certificate file cannot be read, or holds no certificate.
    #[error("TLS certificate {} (--tls-cert): {reason}", path.display())]
    Cert { path: PathBuf, reason: String },
    /// The key file cannot be read, or holds no key.
    #[error("TLS key {} (--tls-key): {reason}", path.display())]
    Key { path: PathBuf, reason: String },
    /// Both read, but the key is not the certificate's (or rustls cannot use it).
    #[error("TLS certificate {} and key {} do not go together: {reason}", cert.display(), key.display())]
    Pair { cert: PathBuf, key: PathBuf, reason: String },
}

/// The certificate chain and key files, and the acceptor they currently make.
pub struct TlsFiles {
    current: RwLock<Current>,
}

/// The files, and the acceptor they made when last read.
struct Current {
    cert: PathBuf,
    key: PathBuf,
    acceptor: TlsAcceptor,
}

impl TlsFiles {
    /// Reads both files; an error names the file and what is wrong with it.
    pub fn load(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Arc<Self>, TlsError> {
        let (cert, key) = (cert.into(), key.into());
        let acceptor = acceptor(&cert, &key)?;
        Ok(Arc::new(Self { current: RwLock::new(Current { cert, key, acceptor }) }))
    }

    /// Reads the files again: new connections get the new certificate; those already made keep
    /// theirs. On an error the acceptor in use stays as it was.
    pub fn reload(&self) -> Result<(), TlsError> {
        let (cert, key) = {
            let c = self.read();
            (c.cert.clone(), c.key.clone())
        };
        let fresh = acceptor(&cert, &key)?;
        self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner).acceptor = fresh;
        Ok(())
    }

    /// Takes `other`'s files and the acceptor they made (a reloaded configuration's, which may
    /// name other files): new connections get them; those already made keep theirs.
    pub fn adopt(&self, other: &Self) {
        let fresh = other.read();
        let fresh = Current { cert: fresh.cert.clone(), key: fresh.key.clone(), acceptor: fresh.acceptor.clone() };
        *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Current> {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The acceptor for a connection accepted now.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.read().acceptor.clone()
    }

    /// The certificate file's path (for messages).
    pub fn cert_path(&self) -> PathBuf {
        self.read().cert.clone()
    }
}

fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let cert_error = |reason: String| TlsError::Cert { path: cert.to_owned(), reason };
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| cert_error(pem_reason(&e, NO_CERT)))?;
    if chain.is_empty() {
        return Err(cert_error(NO_CERT.into()));
    }
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| TlsError::Key { path: key.to_owned(), reason: pem_reason(&e, NO_KEY) })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| cert_error(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| TlsError::Pair { cert: cert.to_owned(), key: key.to_owned(), reason: e.to_string() })?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

const NO_CERT: &str = "no certificate in it (a PEM block `-----BEGIN CERTIFICATE-----`, the server's first)";
const NO_KEY: &str =
    "no private key in it (a PEM block `-----BEGIN PRIVATE KEY-----`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`)";

/// A PEM reading error in words a user can act on; `none` says what was looked for.
fn pem_reason(e: &rustls::pki_types::pem::Error, none: &str) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(io) => format!("cannot be read: {io}"),
        Error::NoItemsFound => none.to_string(),
        other => format!("is not valid PEM: {other}"),
    }
}
