//! The handshake that binds a connection (TCP, Unix socket or rings) to a session, and keeps
//! strangers out.
//!
//! The thesis leaves this out entirely: nothing tells the receiver that m sockets belong to one
//! sender (notes §2.8). Ours, before any frame, on every connection:
//!
//! 1. client → server: `MAGIC` (protocol and version);
//! 2. server → client: `MAGIC`, a fresh 16-byte nonce;
//! 3. client → server: the 16-byte session id, the connection's index (u16), a byte
//!    saying whether this connection may start the session (`NEW`) or only rejoin a session the
//!    server already has (a connection re-opened after one died), and
//!    `HMAC-SHA256(key, "client" ‖ nonce ‖ session ‖ index ‖ new)`;
//! 4. server → client: the answer ([`Answer`]: joined, no such session, not accepting) and
//!    `HMAC-SHA256(key, "server" ‖ nonce ‖ session ‖ index ‖ new ‖ answer)`; or, when the
//!    client's MAC is wrong, [`Answer::KeyMismatch`] and 32 zero bytes, so that its operator
//!    reads "key mismatch" rather than a closed connection (it tells a stranger nothing of the
//!    key: any wrong MAC gets it).
//!
//! The client speaks first (from version 3) so that a mismatch of TLS is named at both ends: a
//! TLS server reading a plain client's `MAGIC` and a plain server reading a TLS client's
//! ClientHello each see the other's first bytes, instead of both waiting for the other to
//! speak until the handshake times out.
//!
//! Each side proves it holds the pre-shared key without sending it, the server's fresh nonce
//! makes a recorded handshake useless, and the MAC covers the session id, so a stranger can
//! neither open a session nor join a connection to someone else's.
//!
//! The answer is what lets a client tell "the server has lost my session" from "the network is
//! down": before it, a connection re-opened to a server whose session had ended was taken as the
//! start of a new one, whose receiver expected frame 0 and refused the rest, and the client
//! re-opened it again and again until its idle timeout, then reported its channels as ended. (The frames that follow are
//! not encrypted or authenticated; that is what the TLS option is for: with it, this handshake
//! and every frame after it travel inside TLS, see [`crate::tls`].)

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The protocol's name and version: a peer that is not ours fails on the first bytes. Version
/// 3 added the reset frame (a channel abandoned both ways, with its reason), which a version-2
/// peer would take for a broken protocol. Version 4 counts credit in payload bytes rather than
/// frames (`Frame::Credit`'s limit; see `switchyard_core::carry::recv`), which a version-3 peer
/// would read as a limit thousands of times too large or too small, and adds open credit (the
/// open-credit frame: a peer opens channels only with leave), which a version-3 peer neither
/// sends nor waits for. A version-3 peer is refused by [`HelloError::Version`], which names
/// both versions. The version is this one byte: [`VERSION`].
const MAGIC: [u8; 8] = *b"SYMUX\0\0\x04";

/// The mux protocol's version (the last byte of the hello's magic).
pub const VERSION: u8 = MAGIC[7];

/// A session's identity, chosen by the client.
pub type SessionId = [u8; 16];

/// Why a connection did not join a session.
#[derive(Debug, thiserror::Error)]
pub enum HelloError {
    /// The socket failed or closed.
    #[error("handshake: {0}")]
    Io(#[from] std::io::Error),
    /// The peer does not speak this protocol.
    #[error("the peer is not a switchyard mux endpoint (first bytes {0:02x?})")]
    NotOurs([u8; 8]),
    /// The peer speaks another version of this protocol.
    #[error(
        "the peer speaks version {theirs} of the mux protocol and this end version {ours}: run the same release of switchyard at both ends"
    )]
    Version {
        /// The peer's version.
        theirs: u8,
        /// Ours.
        ours: u8,
    },
    /// The peer's proof is wrong: it does not hold the same key.
    #[error("key mismatch: the peer's proof does not match this end's key (give both ends the same --key-file)")]
    BadKey,
    /// The server said the client's proof was wrong.
    #[error("key mismatch: the far end holds another key (give both ends the same --key-file)")]
    KeyMismatch,
    /// The peer's first bytes are a TLS record and this end does not speak TLS.
    #[error("the peer speaks TLS and this end does not: {0}")]
    SpeaksTls(&'static str),
    /// The server does not have the session a re-opened connection asked to rejoin: it ended
    /// there (its application let go of it, or it was alone too long).
    #[error("the server has no such session: it ended there")]
    NoSession,
    /// The server takes no new sessions (its listener was dropped).
    #[error("the server is not accepting new sessions")]
    NotAccepting,
    /// An answer byte this version does not know.
    #[error("the server answered {0}, which this version does not know")]
    UnknownAnswer(u8),
}

/// The server's answer to a connection's claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Answer {
    /// The connection is part of the session.
    Joined = 0,
    /// A connection rejoining a session the server does not have.
    NoSession = 1,
    /// A new session, and the server takes none.
    NotAccepting = 2,
    /// The client's proof is wrong: it holds another key (sent without the server's proof).
    KeyMismatch = 3,
}

/// What a client claims in its hello, proven by its MAC ([`accept`]); the server answers it
/// with [`answer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The session.
    pub session: SessionId,
    /// The connection's index in it.
    pub index: u16,
    /// Whether the connection may start the session (else it only rejoins one).
    pub new: bool,
    nonce: [u8; 16],
}

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8], role: &[u8], nonce: &[u8; 16], session: &SessionId, index: u16, new: bool) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(role);
    m.update(nonce);
    m.update(session);
    m.update(&index.to_be_bytes());
    m.update(&[u8::from(new)]);
    m
}

/// Reads the peer's `MAGIC`; `tls_hint` is what to say if its first bytes are TLS instead.
async fn read_magic<S: AsyncRead + Unpin>(s: &mut S, tls_hint: &'static str) -> Result<(), HelloError> {
    let mut magic = [0u8; 8];
    let mut got = 0;
    while got < magic.len() {
        match s.read(&mut magic[got..]).await? {
            0 => break,
            n => got += n,
        }
        // A TLS record starts with its content type (22 handshake, 21 alert) and version 3.x.
        if got >= 2 && matches!(magic[0], 21 | 22) && magic[1] == 3 {
            return Err(HelloError::SpeaksTls(tls_hint));
        }
    }
    if got < magic.len() {
        return Err(HelloError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    if magic[..7] == MAGIC[..7] && magic[7] != MAGIC[7] {
        return Err(HelloError::Version { theirs: magic[7], ours: MAGIC[7] });
    }
    if magic != MAGIC {
        return Err(HelloError::NotOurs(magic));
    }
    Ok(())
}

/// The server's side, up to the client's proof: returns the claim the client proved; the
/// server then [`answer`]s it.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, key: &[u8]) -> Result<Claim, HelloError> {
    if let Err(e) = read_magic(s, "give this end --tls-cert and --tls-key, or drop --tls-ca at the client").await {
        if matches!(e, HelloError::SpeaksTls(_)) {
            // The rest of its ClientHello is read first: a socket closed with bytes unread
            // sends a reset, and the client would read "connection reset" instead of an end
            // that says its peer speaks no TLS.
            let mut sink = [0u8; 4096];
            let drain = async { while matches!(s.read(&mut sink).await, Ok(1..)) {} };
            let _ = tokio::time::timeout(std::time::Duration::from_millis(200), drain).await;
        }
        return Err(e);
    }
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut out = Vec::with_capacity(24);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&nonce);
    s.write_all(&out).await?;
    s.flush().await?;
    let mut rest = [0u8; 16 + 2 + 1 + 32];
    s.read_exact(&mut rest).await?;
    let session: SessionId = rest[..16].try_into().expect("16 bytes");
    let index = u16::from_be_bytes([rest[16], rest[17]]);
    let new = rest[18] != 0;
    if mac(key, b"client", &nonce, &session, index, new).verify_slice(&rest[19..]).is_err() {
        let mut refusal = [0u8; 33];
        refusal[0] = Answer::KeyMismatch as u8;
        let _ = s.write_all(&refusal).await;
        let _ = s.flush().await;
        return Err(HelloError::BadKey);
    }
    Ok(Claim { session, index, new, nonce })
}

/// The server's answer to a proven claim, with its own proof.
pub async fn answer<S: AsyncWrite + Unpin>(
    s: &mut S,
    key: &[u8],
    claim: &Claim,
    answer: Answer,
) -> Result<(), HelloError> {
    let mut m = mac(key, b"server", &claim.nonce, &claim.session, claim.index, claim.new);
    m.update(&[answer as u8]);
    let mut out = Vec::with_capacity(33);
    out.push(answer as u8);
    out.extend_from_slice(&m.finalize().into_bytes());
    s.write_all(&out).await?;
    s.flush().await?;
    Ok(())
}

/// The client's side: joins connection `index` to `session`, which it may start if `new` (else
/// the server must already have it).
pub async fn join<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &[u8],
    session: &SessionId,
    index: u16,
    new: bool,
) -> Result<(), HelloError> {
    s.write_all(&MAGIC).await?;
    s.flush().await?;
    read_magic(s, "give this end --tls-ca (the certificate to trust), or drop --tls-cert at the far end").await?;
    let mut nonce = [0u8; 16];
    s.read_exact(&mut nonce).await?;
    let mut out = Vec::with_capacity(16 + 2 + 1 + 32);
    out.extend_from_slice(session);
    out.extend_from_slice(&index.to_be_bytes());
    out.push(u8::from(new));
    out.extend_from_slice(&mac(key, b"client", &nonce, session, index, new).finalize().into_bytes());
    s.write_all(&out).await?;
    s.flush().await?;
    let mut reply = [0u8; 1 + 32];
    s.read_exact(&mut reply).await?;
    if reply[0] == Answer::KeyMismatch as u8 {
        return Err(HelloError::KeyMismatch);
    }
    let mut m = mac(key, b"server", &nonce, session, index, new);
    m.update(&reply[..1]);
    m.verify_slice(&reply[1..]).map_err(|_| HelloError::BadKey)?;
    match reply[0] {
        0 => Ok(()),
        1 => Err(HelloError::NoSession),
        2 => Err(HelloError::NotAccepting),
        other => Err(HelloError::UnknownAnswer(other)),
    }
}

/// A fresh random session id.
pub fn new_session_id() -> SessionId {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).expect("the OS has a random source");
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_same_key_joins_and_a_different_key_is_refused_on_both_sides() {
        let session = new_session_id();
        let (mut a, mut b) = tokio::io::duplex(1024);
        let server = async {
            let claim = accept(&mut a, b"secret").await?;
            answer(&mut a, b"secret", &claim, Answer::Joined).await?;
            Ok::<_, HelloError>(claim)
        };
        let (server, client) = tokio::join!(server, join(&mut b, b"secret", &session, 3, true));
        let claim = server.unwrap();
        assert_eq!((claim.session, claim.index, claim.new), (session, 3, true));
        client.unwrap();

        // A rejoin the server cannot honour is told so, and says why.
        for (said, error) in [(Answer::NoSession, "no such session"), (Answer::NotAccepting, "not accepting")] {
            let (mut a, mut b) = tokio::io::duplex(1024);
            let server = async {
                let claim = accept(&mut a, b"secret").await.unwrap();
                answer(&mut a, b"secret", &claim, said).await.unwrap();
            };
            let ((), client) = tokio::join!(server, join(&mut b, b"secret", &session, 0, false));
            let e = client.unwrap_err();
            assert!(e.to_string().contains(error), "{e}");
        }

        // Another key: both ends say "key mismatch" (before, the client read only an early end
        // of file).
        let (mut a, mut b) = tokio::io::duplex(1024);
        let (server, client) = tokio::join!(
            async move {
                let r = accept(&mut a, b"secret").await;
                drop(a);
                r
            },
            join(&mut b, b"guess", &session, 0, true)
        );
        assert!(matches!(server, Err(HelloError::BadKey)));
        assert!(matches!(client, Err(HelloError::KeyMismatch)), "{client:?}");
        for e in [server.unwrap_err(), client.unwrap_err()] {
            assert!(e.to_string().starts_with("key mismatch"), "{e}");
        }
    }

    #[tokio::test]
    async fn an_end_that_speaks_tls_to_one_that_does_not_is_named_at_both() {
        // A TLS ClientHello's first bytes, at a plain server.
        let (mut a, mut b) = tokio::io::duplex(1024);
        let (server, _) = tokio::join!(accept(&mut a, b"k"), async {
            b.write_all(&[22, 3, 1, 0, 200, 1]).await.unwrap();
        });
        let e = server.unwrap_err();
        assert!(matches!(e, HelloError::SpeaksTls(_)) && e.to_string().contains("--tls-cert"), "{e}");
        // A TLS server's alert, at a plain client.
        let (mut a, mut b) = tokio::io::duplex(1024);
        let id = new_session_id();
        let (client, _) = tokio::join!(join(&mut b, b"k", &id, 0, true), async {
            let mut magic = [0u8; 8];
            a.read_exact(&mut magic).await.unwrap();
            a.write_all(&[21, 3, 3, 0, 2, 2, 50]).await.unwrap();
        });
        let e = client.unwrap_err();
        assert!(matches!(e, HelloError::SpeaksTls(_)) && e.to_string().contains("--tls-ca"), "{e}");
    }

    #[tokio::test]
    async fn a_stranger_is_told_what_it_is_not() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let (server, _) = tokio::join!(accept(&mut a, b"k"), async {
            b.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        });
        assert!(matches!(server, Err(HelloError::NotOurs(m)) if &m == b"GET / HT"));
    }

    #[tokio::test]
    async fn a_peer_of_another_version_is_told_which() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let (server, _) = tokio::join!(accept(&mut a, b"k"), async {
            b.write_all(b"SYMUX\0\0\x03 and the rest of a version-3 hello").await.unwrap();
        });
        let e = server.unwrap_err();
        // Version 3 counted credit in frames and opened without leave.
        assert!(matches!(e, HelloError::Version { theirs: 3, ours: VERSION }), "{e:?}");
        assert!(e.to_string().contains("same release"), "{e}");
    }
}
