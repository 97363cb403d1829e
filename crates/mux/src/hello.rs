//! The handshake that binds a TCP connection to a session, and keeps strangers out.
//!
//! The thesis leaves this out entirely: nothing tells the receiver that m sockets belong to one
//! sender (notes §2.8). Ours, before any frame, on every connection:
//!
//! 1. server → client: `MAGIC`, a fresh 16-byte nonce;
//! 2. client → server: `MAGIC`, the 16-byte session id, the connection's index (u16), and
//!    `HMAC-SHA256(key, "client" ‖ nonce ‖ session ‖ index)`;
//! 3. server → client: `HMAC-SHA256(key, "server" ‖ nonce ‖ session ‖ index)`.
//!
//! Each side proves it holds the pre-shared key without sending it, the server's fresh nonce
//! makes a recorded handshake useless, and the MAC covers the session id, so a stranger can
//! neither open a session nor join a connection to someone else's. (The frames that follow are
//! not encrypted or authenticated; that is what the TLS option is for: with it, this handshake
//! and every frame after it travel inside TLS, see [`crate::tls`].)

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The protocol's name and version: a peer that is not ours fails on the first bytes.
const MAGIC: [u8; 8] = *b"SYMUX\0\0\x01";

/// A session's identity, chosen by the client.
pub type SessionId = [u8; 16];

/// Why a connection did not join a session.
#[derive(Debug, thiserror::Error)]
pub enum HelloError {
    /// The socket failed or closed.
    #[error("handshake: {0}")]
    Io(#[from] std::io::Error),
    /// The peer does not speak this protocol (or another version of it).
    #[error("the peer is not a switchyard mux endpoint of this version (first bytes {0:02x?})")]
    NotOurs([u8; 8]),
    /// The peer's proof is wrong: it does not hold the same key.
    #[error("the peer's key does not match ours: the handshake MAC is wrong")]
    BadKey,
}

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8], role: &[u8], nonce: &[u8; 16], session: &SessionId, index: u16) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(role);
    m.update(nonce);
    m.update(session);
    m.update(&index.to_be_bytes());
    m
}

async fn read_magic<S: AsyncRead + Unpin>(s: &mut S) -> Result<(), HelloError> {
    let mut magic = [0u8; 8];
    s.read_exact(&mut magic).await?;
    if magic != MAGIC {
        return Err(HelloError::NotOurs(magic));
    }
    Ok(())
}

/// The server's side: returns the session and index the client proved it may join.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, key: &[u8]) -> Result<(SessionId, u16), HelloError> {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut out = Vec::with_capacity(24);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&nonce);
    s.write_all(&out).await?;
    s.flush().await?;
    read_magic(s).await?;
    let mut rest = [0u8; 16 + 2 + 32];
    s.read_exact(&mut rest).await?;
    let session: SessionId = rest[..16].try_into().expect("16 bytes");
    let index = u16::from_be_bytes([rest[16], rest[17]]);
    mac(key, b"client", &nonce, &session, index).verify_slice(&rest[18..]).map_err(|_| HelloError::BadKey)?;
    let proof = mac(key, b"server", &nonce, &session, index).finalize().into_bytes();
    s.write_all(&proof).await?;
    s.flush().await?;
    Ok((session, index))
}

/// The client's side: joins connection `index` to `session`.
pub async fn join<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &[u8],
    session: &SessionId,
    index: u16,
) -> Result<(), HelloError> {
    read_magic(s).await?;
    let mut nonce = [0u8; 16];
    s.read_exact(&mut nonce).await?;
    let mut out = Vec::with_capacity(8 + 16 + 2 + 32);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(session);
    out.extend_from_slice(&index.to_be_bytes());
    out.extend_from_slice(&mac(key, b"client", &nonce, session, index).finalize().into_bytes());
    s.write_all(&out).await?;
    s.flush().await?;
    let mut proof = [0u8; 32];
    s.read_exact(&mut proof).await?;
    mac(key, b"server", &nonce, session, index).verify_slice(&proof).map_err(|_| HelloError::BadKey)?;
    Ok(())
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
        let (server, client) = tokio::join!(accept(&mut a, b"secret"), join(&mut b, b"secret", &session, 3));
        assert_eq!(server.unwrap(), (session, 3));
        client.unwrap();

        let (mut a, mut b) = tokio::io::duplex(1024);
        let (server, client) = tokio::join!(
            async move {
                // The refusing side hangs up, which is all the client learns.
                let r = accept(&mut a, b"secret").await;
                drop(a);
                r
            },
            join(&mut b, b"guess", &session, 0)
        );
        assert!(matches!(server, Err(HelloError::BadKey)));
        assert!(matches!(client, Err(HelloError::Io(_))));
    }

    #[tokio::test]
    async fn a_stranger_is_told_what_it_is_not() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let (server, _) = tokio::join!(accept(&mut a, b"k"), async {
            let mut buf = [0u8; 24];
            b.read_exact(&mut buf).await.unwrap();
            b.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        });
        assert!(matches!(server, Err(HelloError::NotOurs(m)) if &m == b"GET / HT"));
    }
}
