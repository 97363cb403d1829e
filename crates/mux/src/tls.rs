//! TLS for a session's connections (rustls, TLS 1.3 only).
//!
//! The pre-shared key's handshake ([`crate::hello`]) keeps strangers out of a session but leaves
//! its frames readable and alterable on the path. With TLS, every connection first completes a
//! TLS handshake in which the client checks the server's certificate; the keyed hello, then
//! every frame, travel inside it. Both checks stay: the certificate says the client reached the
//! right server, the key says the client may join the session.
//!
//! After the handshake and the hello, rustls's traffic keys are taken out of it and the
//! records are sealed and opened by the mux itself ([`crate::record`], RFC 8446 §5) in the
//! connection's own buffers, with the socket I/O done as for plain connections (`conn.rs`),
//! on a task of the connection's own (`offload.rs`): the driver hands it the frames it chose
//! and takes the frames it opened. So that
//! rustls hands over no record half read, it reads the socket a record at a time until then
//! ([`WholeRecords`]): what it read whole it has decrypted, and that plaintext is handed over
//! too. Only TLS 1.3 is spoken.

use std::io::Read;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::record::{self, Direction, Opener, Sealer};

/// A connection during its TLS handshake and hello.
pub(crate) type TlsStream = tokio_rustls::TlsStream<WholeRecords>;

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

/// rustls's crypto: aws-lc-rs's with the mux's `aws-lc` feature, as the records' is
/// ([`record::CRYPTO`]), else ring's. TLS 1.3's suites only, AES-128-GCM first: a client
/// offers them in this order and a rustls server takes the client's order, so two mux ends
/// agree on it, where rustls's own order puts AES-256-GCM first. AES-128-GCM is the cheapest
/// here: both ends' sealing and opening of 16 KiB records cost 120–123 ns of CPU per KB with
/// aws-lc-rs and 157–165 with ring, against 151 and 204 for AES-256-GCM and 840–869 for
/// ChaCha20-Poly1305 (a Xeon with VAES and AVX-512, `examples/aead_cost.rs`).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    #[cfg(feature = "aws-lc")]
    use rustls::crypto::aws_lc_rs::{cipher_suite, default_provider};
    #[cfg(not(feature = "aws-lc"))]
    use rustls::crypto::ring::{cipher_suite, default_provider};
    let cipher_suites = vec![
        cipher_suite::TLS13_AES_128_GCM_SHA256,
        cipher_suite::TLS13_AES_256_GCM_SHA384,
        cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    Arc::new(rustls::crypto::CryptoProvider { cipher_suites, ..default_provider() })
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
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(store)
            .with_no_client_auth();
        // The keys go to the mux's own record layer after the handshake (`crate::record`).
        config.enable_secret_extraction = true;
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
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.enable_secret_extraction = true;
        Ok(Self::Server(Arc::new(config)))
    }

    /// Runs the TLS handshake on `stream` in this end's role.
    pub(crate) async fn handshake(&self, stream: TcpStream) -> std::io::Result<TlsStream> {
        let stream = WholeRecords::new(stream);
        let done = match self {
            Self::Client { config, name } => tokio_rustls::TlsConnector::from(letting_keys_out(config))
                .connect(name.clone(), stream)
                .await
                .map(Into::into),
            Self::Server(config) => {
                tokio_rustls::TlsAcceptor::from(letting_keys_out(config)).accept(stream).await.map(Into::into)
            }
        };
        done.map_err(|e| plain_peer(self, e))
    }
}

/// A connection's records after the handshake: the keys each way, and the plaintext rustls had
/// already decrypted (frames the peer sent right after the hello).
pub(crate) struct Records {
    pub(crate) sealer: Sealer,
    pub(crate) opener: Opener,
    pub(crate) early: Vec<u8>,
}

/// Takes the keys out of rustls once the handshake and hello are done: the socket, and its
/// records from here on.
pub(crate) async fn records(mut stream: TlsStream) -> std::io::Result<(TcpStream, Records)> {
    use std::io::{Error, ErrorKind};
    // rustls hands out its keys only with nothing left to send.
    stream.flush().await?;
    let (io, mut conn) = match stream {
        tokio_rustls::TlsStream::Client(s) => {
            let (io, c) = s.into_inner();
            (io, rustls::Connection::Client(c))
        }
        tokio_rustls::TlsStream::Server(s) => {
            let (io, c) = s.into_inner();
            (io, rustls::Connection::Server(c))
        }
    };
    let invalid = |e: rustls::Error| Error::new(ErrorKind::InvalidData, e);
    // Whole records only ([`WholeRecords`]): all of them decrypted now, their plaintext kept.
    conn.process_new_packets().map_err(invalid)?;
    let mut early = Vec::new();
    match conn.reader().read_to_end(&mut early) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    if conn.protocol_version() != Some(rustls::ProtocolVersion::TLSv1_3) {
        return Err(Error::new(
            ErrorKind::InvalidData,
            "the TLS handshake agreed on a version before 1.3; the mux's record layer speaks TLS 1.3 only \
             (give the settings rustls::version::TLS13)",
        ));
    }
    let secrets = conn.dangerous_extract_secrets().map_err(invalid)?;
    let key = |e: record::RecordError| Error::new(ErrorKind::InvalidData, e);
    let sealer = Sealer(Direction::new(secrets.tx.0, secrets.tx.1).map_err(key)?);
    let opener = Opener::new(Direction::new(secrets.rx.0, secrets.rx.1).map_err(key)?);
    Ok((io.inner, Records { sealer, opener, early }))
}

/// A socket that rustls reads a record at a time during the handshake and hello: at a record's
/// start it gets the record's header, then at most the rest of the record. rustls's keys can be
/// taken out ([`records`]) but not a record it has read in part, which would be lost.
pub(crate) struct WholeRecords {
    inner: TcpStream,
    /// The header of the next record, as far as it has come.
    head: [u8; record::HEADER],
    have: usize,
    /// Bytes of the current record's body not yet read.
    left: usize,
}

impl WholeRecords {
    fn new(inner: TcpStream) -> Self {
        Self { inner, head: [0; record::HEADER], have: 0, left: 0 }
    }

    #[cfg(test)]
    pub(crate) fn into_inner(self) -> TcpStream {
        self.inner
    }
}

impl AsyncRead for WholeRecords {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        // Through a copy: only the handshake's few kilobytes come this way.
        let mut scratch = [0u8; 4096];
        let want = if this.left == 0 { record::HEADER - this.have } else { this.left.min(scratch.len()) };
        let mut part = ReadBuf::new(&mut scratch[..want.min(buf.remaining())]);
        ready!(Pin::new(&mut this.inner).poll_read(cx, &mut part))?;
        let got = part.filled();
        buf.put_slice(got);
        if this.left == 0 {
            this.head[this.have..this.have + got.len()].copy_from_slice(got);
            this.have += got.len();
            if this.have == record::HEADER {
                this.left = usize::from(u16::from_be_bytes([this.head[3], this.head[4]]));
                this.have = 0;
            }
        } else {
            this.left -= got.len();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for WholeRecords {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
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

/// A rustls configuration whose handshake may let the traffic keys out to our record layer.
trait KeysOut: Clone {
    fn lets_keys_out(&self) -> bool;
    fn keys_out(&mut self) -> &mut bool;
}

impl KeysOut for rustls::ClientConfig {
    fn lets_keys_out(&self) -> bool {
        self.enable_secret_extraction
    }
    fn keys_out(&mut self) -> &mut bool {
        &mut self.enable_secret_extraction
    }
}

impl KeysOut for rustls::ServerConfig {
    fn lets_keys_out(&self) -> bool {
        self.enable_secret_extraction
    }
    fn keys_out(&mut self) -> &mut bool {
        &mut self.enable_secret_extraction
    }
}

/// `config` as it is if it lets the keys out, else a copy that does: settings made elsewhere
/// than here may not.
fn letting_keys_out<C: KeysOut>(config: &Arc<C>) -> Arc<C> {
    if config.lets_keys_out() {
        return Arc::clone(config);
    }
    let mut copy = (**config).clone();
    *copy.keys_out() = true;
    Arc::new(copy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Opened;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The hand-over from rustls to the mux's records when the peer's records follow its last
    /// hello bytes at once, already in the socket: the reader's keys start at the right record,
    /// and every byte after the hello arrives (what rustls had read, decrypted; the rest opened
    /// here). rustls reads the socket in large pieces: without reading a record at a time, it
    /// held the start of the next record, which its keys' hand-over dropped.
    #[tokio::test]
    async fn records_right_behind_the_hello_are_handed_over_whole() {
        let names = vec!["localhost".to_owned()];
        let (server, client) = SelfSigned::generate(&names).unwrap().pair("localhost").unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connecting = TcpStream::connect(listener.local_addr().unwrap());
        let (connected, accepted) = tokio::join!(connecting, listener.accept());
        let (theirs, ours) = tokio::join!(server.handshake(accepted.unwrap().0), client.handshake(connected.unwrap()));
        let (mut theirs, mut ours) = (theirs.unwrap(), ours.unwrap());
        // The hello's answer, then records of several sizes, all sent before the client reads.
        let after: Vec<u8> = (0..40_000).map(|i| (i * 13 % 251) as u8).collect();
        theirs.write_all(b"hello").await.unwrap();
        theirs.flush().await.unwrap();
        for piece in [&after[..3], &after[3..20_000], &after[20_000..]] {
            theirs.write_all(piece).await.unwrap();
        }
        theirs.flush().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let mut hello = [0u8; 5];
        ours.read_exact(&mut hello).await.unwrap();
        assert_eq!(&hello, b"hello");
        let (mut socket, Records { mut opener, early, .. }) = records(ours).await.unwrap();
        let mut buf = early;
        let (mut plain, mut raw) = (buf.len(), buf.len());
        while plain < after.len() {
            let mut more = vec![0u8; 1 << 16];
            let n = tokio::time::timeout(std::time::Duration::from_secs(30), socket.read(&mut more))
                .await
                .expect("the rest came")
                .unwrap();
            assert!(n > 0, "the end after {plain} bytes of {}", after.len());
            buf.extend_from_slice(&more[..n]);
            loop {
                match opener.open(&mut buf, plain, raw).unwrap() {
                    Opened::Data { len, used } => {
                        plain += len;
                        raw += used;
                    }
                    Opened::Nothing { used } => raw += used,
                    Opened::Closed { .. } => panic!("closed"),
                    Opened::Partial { .. } => break,
                }
            }
        }
        assert!(buf[..plain] == after[..], "the bytes after the hello differ");
        drop(theirs);
    }
}
