//! TLS for a session's connections (rustls, TLS 1.3 only).
//!
//! The pre-shared key's handshake ([`crate::hello`]) keeps strangers out of a session but leaves
//! its frames readable and alterable on the path. With TLS, every connection first completes a
//! TLS handshake in which the client checks the server's certificate; the keyed hello, then
//! every frame, travel inside it. Both checks stay: the certificate says the client reached the
//! right server, the key says the client may join the session.
//!
//! After the handshake the session's driver keeps rustls's state and does the socket I/O itself
//! (`conn.rs`), as it does for plain connections.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;

/// One end's TLS settings.
#[derive(Clone)]
pub enum Tls {
    /// A client: trusts the certificates in its root store and expects the server to present
    /// one for `name`.
    Client {
        /// rustls's client settings.
        config: Arc<rustls::ClientConfig>,
        /// The name the server's certificate must carry (a DNS name or an IP address).
        name: ServerName<'static>,
    },
    /// A server: presents its certificate chain.
    Server(Arc<rustls::ServerConfig>),
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Client { name, .. } => f.debug_struct("Tls::Client").field("name", name).finish_non_exhaustive(),
            Self::Server(_) => f.debug_struct("Tls::Server").finish_non_exhaustive(),
        }
    }
}

/// Why TLS settings could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("{path}: {source}")]
    Pem {
        /// The file.
        path: String,
        /// What went wrong.
        source: rustls::pki_types::pem::Error,
    },
    /// A certificate file held no certificate.
    #[error("{0}: no certificate found (expected a PEM file with \"-----BEGIN CERTIFICATE-----\")")]
    NoCertificate(String),
    /// The name to check the server's certificate against is not a DNS name or an IP address.
    #[error("{0:?} is not a DNS name or an IP address to check the server's certificate against")]
    Name(String),
    /// rustls refused the certificates or the key.
    #[error("TLS settings: {0}")]
    Rustls(#[from] rustls::Error),
    /// A certificate could not be made for these names.
    #[error("making a certificate for {names}: {source}")]
    Generate {
        /// The names asked for.
        names: String,
        /// What rcgen said.
        source: rcgen::Error,
    },
}

/// A fresh self-signed certificate and its key: for `tunnel cert`, and for tests and benchmarks
/// that need TLS between two ends on one host.
pub struct SelfSigned {
    /// The certificate.
    pub cert: CertificateDer<'static>,
    /// The certificate, PEM-encoded.
    pub cert_pem: String,
    /// Its private key, PEM-encoded (PKCS #8).
    pub key_pem: String,
    key_der: Vec<u8>,
}

impl SelfSigned {
    /// A certificate naming each of `names` (DNS names or IP addresses).
    pub fn generate(names: &[String]) -> Result<Self, TlsError> {
        let certified = rcgen::generate_simple_self_signed(names.to_vec())
            .map_err(|source| TlsError::Generate { names: names.join(", "), source })?;
        Ok(Self {
            cert: certified.cert.der().clone(),
            cert_pem: certified.cert.pem(),
            key_pem: certified.signing_key.serialize_pem(),
            key_der: certified.signing_key.serialize_der(),
        })
    }

    /// The private key.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }

    /// A server presenting this certificate, and a client that trusts it and expects `name`.
    pub fn pair(&self, name: &str) -> Result<(Tls, Tls), TlsError> {
        Ok((
            Tls::server_with(vec![self.cert.clone()], self.key())?,
            Tls::client_trusting(vec![self.cert.clone()], name)?,
        ))
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let shown = path.display().to_string();
    let pem = |source| TlsError::Pem { path: shown.clone(), source };
    let certs = CertificateDer::pem_file_iter(path).map_err(pem)?.collect::<Result<Vec<_>, _>>().map_err(pem)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(shown));
    }
    Ok(certs)
}

impl Tls {
    /// A client that trusts the certificates in the PEM file `roots` (a CA's, or the server's
    /// own self-signed one) and expects the server's certificate to name `name`.
    pub fn client_from_pem(roots: &Path, name: &str) -> Result<Self, TlsError> {
        Self::client_trusting(certificates(roots)?, name)
    }

    /// A client that trusts `roots` and expects the server's certificate to name `name`.
    pub fn client_trusting(roots: Vec<CertificateDer<'static>>, name: &str) -> Result<Self, TlsError> {
        let mut store = rustls::RootCertStore::empty();
        for cert in roots {
            store.add(cert)?;
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(store)
            .with_no_client_auth();
        let name = ServerName::try_from(name.to_owned()).map_err(|_| TlsError::Name(name.to_owned()))?;
        Ok(Self::Client { config: Arc::new(config), name })
    }

    /// A server presenting the certificate chain in the PEM file `chain` (its own certificate
    /// first) with the private key in the PEM file `key`.
    pub fn server_from_pem(chain: &Path, key: &Path) -> Result<Self, TlsError> {
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|source| TlsError::Pem { path: key.display().to_string(), source })?;
        Self::server_with(certificates(chain)?, key)
    }

    /// A server presenting `chain` with `key`.
    pub fn server_with(chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> Result<Self, TlsError> {
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        Ok(Self::Server(Arc::new(config)))
    }

    /// Runs the TLS handshake on `stream` in this end's role.
    pub(crate) async fn handshake(&self, stream: TcpStream) -> std::io::Result<tokio_rustls::TlsStream<TcpStream>> {
        let done = match self {
            Self::Client { config, name } => {
                tokio_rustls::TlsConnector::from(Arc::clone(config)).connect(name.clone(), stream).await.map(Into::into)
            }
            Self::Server(config) => {
                tokio_rustls::TlsAcceptor::from(Arc::clone(config)).accept(stream).await.map(Into::into)
            }
        };
        done.map_err(|e| plain_peer(self, e))
    }
}

/// Says what a TLS handshake's failure most likely means when the peer does not speak TLS:
/// rustls's own words ("early eof", "received corrupt message of type InvalidContentType")
/// name the symptom, not the fix.
fn plain_peer(tls: &Tls, e: std::io::Error) -> std::io::Error {
    let text = e.to_string();
    let plain = e.kind() == std::io::ErrorKind::UnexpectedEof
        || text.contains("InvalidContentType")
        || text.contains("corrupt message");
    if !plain {
        return e;
    }
    let fix = match tls {
        Tls::Client { .. } => {
            "the far end does not speak TLS: drop --tls-ca here, or give the far end --tls-cert and --tls-key"
        }
        Tls::Server(_) => "the client does not speak TLS: give it --tls-ca, or drop --tls-cert and --tls-key here",
    };
    std::io::Error::new(e.kind(), format!("{fix} ({text})"))
}
