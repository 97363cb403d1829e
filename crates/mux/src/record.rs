//! TLS 1.3 records after the handshake, done by the mux itself (RFC 8446 §5).
//!
//! rustls completes the handshake; its traffic keys are then taken out
//! (`dangerous_extract_secrets`) and the connection's records are sealed and opened here, with
//! ring's AEAD, in the connection's own buffers: a record is opened where it was read and its
//! plaintext lands right behind the plaintext before it (ring decrypts and shifts in one pass),
//! so frames are cut from it as on a plain connection; frames are sealed in place in the
//! buffer that is written to the socket. Through rustls, each record's bytes were copied into
//! and out of its buffers, zeroed first, and sealed into a fresh allocation.
//!
//! Pure: buffers in, buffers out; no sockets, no clock.
//!
//! What this end does not do, and why:
//! - **Key updates** (RFC 8446 §4.6.3): the far end's KeyUpdate is refused with an error (the
//!   connection ends and the session carries on over the others, a client dialling it again).
//!   The far end is this same code, which never sends one: instead, a connection whose key has
//!   sealed as many records as AES-GCM may safely seal (§5.5) ends, and is dialled again with
//!   fresh keys. At 16 KiB a record that is 256 GiB on one connection.
//! - Post-handshake authentication and any handshake message other than a session ticket
//!   (§4.6): refused. Session tickets (§4.6.1) are skipped: the keys are out of rustls, so
//!   there is nothing to store them in.

// The same API in both (aws-lc-rs keeps ring's): AWS-LC's AES-GCM where the `aws-lc` feature
// builds it, as it costs about three quarters of ring's here (`examples/aead_cost.rs`).
#[cfg(feature = "aws-lc")]
use aws_lc_rs::aead::{self, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
#[cfg(not(feature = "aws-lc"))]
use ring::aead::{self, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use rustls::ConnectionTrafficSecrets;

/// The library that seals and opens the records (and does rustls's handshake crypto,
/// [`crate::tls`]): `"aws-lc-rs"` with the mux's `aws-lc` feature, else `"ring"`.
pub const CRYPTO: &str = if cfg!(feature = "aws-lc") { "aws-lc-rs" } else { "ring" };

/// A record's header: content type, legacy version, length (RFC 8446 §5.1).
pub const HEADER: usize = 5;
/// The AEAD's tag at the end of each record.
pub const TAG: usize = 16;
/// Most plaintext one record carries (RFC 8446 §5.1: 2^14 bytes).
pub const MAX_PLAIN: usize = 1 << 14;
/// Most bytes of a record's encrypted part (RFC 8446 §5.2: 2^14 + 256).
pub const MAX_CIPHER: usize = MAX_PLAIN + 256;
/// The largest record, header included.
pub const MAX_RECORD: usize = HEADER + MAX_CIPHER;

/// Content types (RFC 8446 §5.1, appendix B.1).
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;
/// Handshake message types after the handshake (RFC 8446 §4, appendix B.3).
const NEW_SESSION_TICKET: u8 = 4;
const KEY_UPDATE: u8 = 24;
/// Alert descriptions (RFC 8446 §6).
const CLOSE_NOTIFY: u8 = 0;
const USER_CANCELED: u8 = 90;
/// Records one AES-GCM key may protect (RFC 8446 §5.5: 2^24.5 full-size records; rustls keeps
/// to 2^24 as well).
const AES_GCM_LIMIT: u64 = 1 << 24;

/// Why a record could not be sealed or opened. Each ends the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The tag did not match: the far end holds other keys, or the bytes were altered.
    #[error("the far end's record failed authentication: key mismatch or corruption (record {seq} from it)")]
    Authentication {
        /// The record's sequence number.
        seq: u64,
    },
    /// After the handshake every TLS 1.3 record says application data outside (§5.2).
    #[error(
        "the far end sent a record of outer type {0} after the handshake, where TLS 1.3 sends only \
         application data (23): not a TLS 1.3 peer, or the stream lost its place"
    )]
    OuterType(u8),
    /// The legacy version field is not 0x0303 (§5.1).
    #[error("the far end's record says version {0:#06x}, where TLS 1.3 records say 0x0303")]
    Version(u16),
    /// Longer than TLS allows (§5.2, §5.4): `record_overflow`.
    #[error("the far end's record holds {0} bytes, more than TLS 1.3 allows (2^14 + 256, RFC 8446 §5.2)")]
    Overflow(usize),
    /// Too short to hold a tag and a content type.
    #[error("the far end's record holds {0} bytes, too few for its tag and content type")]
    Short(usize),
    /// The plaintext is all padding, with no content type (§5.4).
    #[error("the far end's record holds only padding, no content type (RFC 8446 §5.4)")]
    NoContentType,
    /// A content type TLS 1.3 does not send encrypted.
    #[error("the far end's record holds content type {0}: not application data, handshake or alert")]
    InnerType(u8),
    /// The far end asked for new keys.
    #[error(
        "the far end asked for a key update (RFC 8446 §4.6.3), which this end does not do: its \
         connections end at their key's record limit and are dialled again instead"
    )]
    KeyUpdate,
    /// A handshake message this end does not take after the handshake.
    #[error(
        "the far end sent handshake message type {0} after the handshake, where only session tickets (4) \
         are taken"
    )]
    Handshake(u8),
    /// A record of another type came in the middle of a handshake message (§5.1).
    #[error("the far end broke off a handshake message with a record of another type (RFC 8446 §5.1)")]
    Interleaved,
    /// An alert other than close_notify: the far end ended the connection for a reason.
    #[error("the far end sent TLS alert {0} (RFC 8446 §6) and ended the connection")]
    Alert(u8),
    /// An alert record that is not two bytes.
    #[error("the far end sent an alert of {0} bytes, where alerts are 2")]
    BadAlert(usize),
    /// The key has protected as many records as it safely may (§5.5).
    #[error(
        "{0} records under one key, the most it may safely protect (RFC 8446 §5.5): the connection ends \
         and is dialled again with new keys"
    )]
    Limit(u64),
    /// rustls agreed on a cipher suite this layer does not know.
    #[error("the TLS handshake agreed on a cipher suite the mux's record layer does not know")]
    Suite,
}

/// One direction's key, nonce base and next sequence number (RFC 8446 §5.3). Not `Clone`: a
/// copy would seal with the same nonces (and aws-lc-rs's keys are not `Clone`).
pub struct Direction {
    key: LessSafeKey,
    iv: [u8; NONCE_LEN],
    seq: u64,
    limit: u64,
}

impl Direction {
    /// A direction from the secrets rustls hands out after the handshake, with the sequence
    /// number it had reached.
    pub fn new(seq: u64, secrets: ConnectionTrafficSecrets) -> Result<Self, RecordError> {
        let (algorithm, key, iv, limit) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv, AES_GCM_LIMIT),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv, AES_GCM_LIMIT),
            // ChaCha20-Poly1305's limit is beyond 2^64 records (§5.5).
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (&aead::CHACHA20_POLY1305, key, iv, u64::MAX),
            _ => return Err(RecordError::Suite),
        };
        Self::with_key(seq, algorithm, key.as_ref(), iv.as_ref(), limit)
    }

    fn with_key(
        seq: u64,
        algorithm: &'static aead::Algorithm,
        key: &[u8],
        iv: &[u8],
        limit: u64,
    ) -> Result<Self, RecordError> {
        let key = UnboundKey::new(algorithm, key).map_err(|_| RecordError::Suite)?;
        let iv = iv.try_into().map_err(|_| RecordError::Suite)?;
        Ok(Self { key: LessSafeKey::new(key), iv, seq, limit })
    }

    /// The sequence number of the next record.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The next record's nonce: the sequence number, left-padded, XORed with the IV (§5.3).
    /// Fails at the key's record limit.
    fn next_nonce(&mut self) -> Result<Nonce, RecordError> {
        if self.seq >= self.limit {
            return Err(RecordError::Limit(self.seq));
        }
        let mut nonce = self.iv;
        for (n, s) in nonce[NONCE_LEN - 8..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq += 1;
        Ok(Nonce::assume_unique_for_key(nonce))
    }
}

/// The header of an application-data record whose encrypted part is `len` bytes.
fn header(len: usize) -> [u8; HEADER] {
    let [hi, lo] = u16::try_from(len).expect("records are at most 2^14 + 256 bytes").to_be_bytes();
    [APPLICATION_DATA, 3, 3, hi, lo]
}

/// Seals this end's records.
pub struct Sealer(pub Direction);

impl Sealer {
    /// Seals the record begun at `start` in `buf`: `buf[start..start + HEADER]` is room for its
    /// header and the plaintext follows to the end of `buf` (at most [`MAX_PLAIN`] bytes). The
    /// content type, then the tag, are appended, the plaintext encrypted in place and the header
    /// written.
    pub fn seal(&mut self, buf: &mut Vec<u8>, start: usize) -> Result<(), RecordError> {
        self.seal_as(buf, start, APPLICATION_DATA)
    }

    /// Appends a sealed close_notify alert (RFC 8446 §6.1): the far end reads the end of the
    /// connection as intended, not as a truncation.
    pub fn close_notify(&mut self, buf: &mut Vec<u8>) -> Result<(), RecordError> {
        let start = buf.len();
        // Level 1, "warning", as close_notify is sent (§6: the level is otherwise ignored).
        buf.extend_from_slice(&[0; HEADER]);
        buf.extend_from_slice(&[1, CLOSE_NOTIFY]);
        self.seal_as(buf, start, ALERT)
    }

    fn seal_as(&mut self, buf: &mut Vec<u8>, start: usize, kind: u8) -> Result<(), RecordError> {
        let plain = buf.len() - start - HEADER;
        debug_assert!(plain <= MAX_PLAIN, "a record holds at most 2^14 bytes");
        let nonce = self.0.next_nonce()?;
        buf.push(kind);
        let head = header(plain + 1 + TAG);
        buf[start..start + HEADER].copy_from_slice(&head);
        let tag = self
            .0
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(head), &mut buf[start + HEADER..])
            .map_err(|_| RecordError::Overflow(plain))?;
        buf.extend_from_slice(tag.as_ref());
        Ok(())
    }
}

/// What [`Opener::open`] found at the start of the unopened bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// Application data: `len` bytes of plaintext now follow the plaintext before them; the
    /// record took `used` bytes.
    Data {
        /// Plaintext bytes.
        len: usize,
        /// The record's bytes.
        used: usize,
    },
    /// A record with nothing for the application (a session ticket, user_canceled).
    Nothing {
        /// The record's bytes.
        used: usize,
    },
    /// The far end's close_notify: nothing it sends after counts (RFC 8446 §6.1).
    Closed {
        /// The record's bytes.
        used: usize,
    },
    /// No whole record yet: at least `need` more bytes.
    Partial {
        /// Bytes missing.
        need: usize,
    },
}

/// Opens the far end's records.
pub struct Opener {
    dir: Direction,
    messages: Messages,
}

impl Opener {
    /// An opener with the far end's key.
    pub fn new(dir: Direction) -> Self {
        Self { dir, messages: Messages::default() }
    }

    /// The sequence number of the next record.
    pub fn seq(&self) -> u64 {
        self.dir.seq()
    }

    /// Opens the record at `buf[raw..]`, if it is there whole, writing its plaintext at
    /// `buf[plain..]` (`plain <= raw`): what lies between is the header and tags of records
    /// already opened, which the plaintext overwrites.
    pub fn open(&mut self, buf: &mut [u8], plain: usize, raw: usize) -> Result<Opened, RecordError> {
        debug_assert!(plain <= raw && raw <= buf.len());
        let have = buf.len() - raw;
        if have < HEADER {
            return Ok(Opened::Partial { need: HEADER - have });
        }
        let head: [u8; HEADER] = buf[raw..raw + HEADER].try_into().expect("five bytes");
        // Checked before the rest arrives: a stream that is not records fails at once rather
        // than after up to 64 KiB more.
        if head[0] != APPLICATION_DATA {
            return Err(RecordError::OuterType(head[0]));
        }
        let version = u16::from_be_bytes([head[1], head[2]]);
        if version != 0x0303 {
            return Err(RecordError::Version(version));
        }
        let len = usize::from(u16::from_be_bytes([head[3], head[4]]));
        if len > MAX_CIPHER {
            return Err(RecordError::Overflow(len));
        }
        if len < TAG + 1 {
            return Err(RecordError::Short(len));
        }
        let used = HEADER + len;
        if have < used {
            return Ok(Opened::Partial { need: used - have });
        }
        let seq = self.dir.seq;
        let nonce = self.dir.next_nonce()?;
        let opened = self
            .dir
            .key
            .open_within(nonce, Aad::from(head), &mut buf[plain..raw + used], raw - plain + HEADER..)
            .map_err(|_| RecordError::Authentication { seq })?;
        // TLSInnerPlaintext: content, its type, zeros (§5.4).
        let kind_at = opened.iter().rposition(|&b| b != 0).ok_or(RecordError::NoContentType)?;
        if kind_at > MAX_PLAIN {
            return Err(RecordError::Overflow(opened.len()));
        }
        let kind = opened[kind_at];
        let content = &opened[..kind_at];
        if kind != HANDSHAKE && self.messages.midway() {
            return Err(RecordError::Interleaved);
        }
        match kind {
            APPLICATION_DATA => Ok(Opened::Data { len: kind_at, used }),
            HANDSHAKE => {
                self.messages.skip(content)?;
                Ok(Opened::Nothing { used })
            }
            ALERT => match content {
                [_, CLOSE_NOTIFY] => Ok(Opened::Closed { used }),
                [_, USER_CANCELED] => Ok(Opened::Nothing { used }),
                [_, description] => Err(RecordError::Alert(*description)),
                _ => Err(RecordError::BadAlert(content.len())),
            },
            other => Err(RecordError::InnerType(other)),
        }
    }
}

/// Handshake messages after the handshake, which may span records (§5.1): session tickets are
/// skipped, anything else refused.
#[derive(Default)]
struct Messages {
    /// A message's type and 24-bit length, as far as they have come.
    head: [u8; 4],
    have: usize,
    /// Bytes of the current message's body still to skip.
    left: usize,
}

impl Messages {
    fn midway(&self) -> bool {
        self.have > 0 || self.left > 0
    }

    fn skip(&mut self, mut bytes: &[u8]) -> Result<(), RecordError> {
        while !bytes.is_empty() {
            if self.left > 0 {
                let n = self.left.min(bytes.len());
                self.left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (4 - self.have).min(bytes.len());
            self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == 4 {
                match self.head[0] {
                    NEW_SESSION_TICKET => {}
                    KEY_UPDATE => return Err(RecordError::KeyUpdate),
                    other => return Err(RecordError::Handshake(other)),
                }
                self.left =
                    usize::from(self.head[1]) << 16 | usize::from(self.head[2]) << 8 | usize::from(self.head[3]);
                self.have = 0;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// A rustls client and server that have done their handshake in memory, with the server's
    /// session tickets still unsent.
    fn handshaken() -> (rustls::Connection, rustls::Connection) {
        let names = vec!["localhost".to_owned()];
        let (server, client) = crate::tls::SelfSigned::generate(&names).unwrap().pair("localhost").unwrap();
        let (crate::tls::Tls::Client { config, name }, crate::tls::Tls::Server(server)) = (client, server) else {
            unreachable!("a client and a server")
        };
        let mut client = rustls::Connection::Client(rustls::ClientConnection::new(config, name).unwrap());
        let mut server = rustls::Connection::Server(rustls::ServerConnection::new(server).unwrap());
        while client.is_handshaking() || server.is_handshaking() {
            let to_server = written(&mut client);
            feed(&mut server, &to_server);
            if !server.is_handshaking() {
                // Its session tickets stay with it, for the client's keys to open.
                break;
            }
            let to_client = written(&mut server);
            feed(&mut client, &to_client);
        }
        assert!(!client.is_handshaking() && !server.is_handshaking());
        (client, server)
    }

    /// Everything `conn` has to send.
    fn written(conn: &mut rustls::Connection) -> Vec<u8> {
        let mut wire = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut wire).unwrap();
        }
        wire
    }

    fn feed(conn: &mut rustls::Connection, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            conn.read_tls(&mut bytes).unwrap();
            conn.process_new_packets().unwrap();
        }
    }

    /// The client's keys taken out for this layer; the server stays rustls.
    fn ours() -> (Sealer, Opener, rustls::Connection) {
        let (client, server) = handshaken();
        let secrets = client.dangerous_extract_secrets().unwrap();
        let sealer = Sealer(Direction::new(secrets.tx.0, secrets.tx.1).unwrap());
        let opener = Opener::new(Direction::new(secrets.rx.0, secrets.rx.1).unwrap());
        (sealer, opener, server)
    }

    /// A direction's AEAD, key and IV as bytes: openers that start from the same keys, one
    /// per try ([`Direction`] is not `Clone`).
    fn raw(secrets: &ConnectionTrafficSecrets) -> (&'static aead::Algorithm, Vec<u8>, Vec<u8>) {
        let (algorithm, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (&aead::CHACHA20_POLY1305, key, iv),
            _ => panic!("a cipher suite the record layer does not know"),
        };
        (algorithm, key.as_ref().to_vec(), iv.as_ref().to_vec())
    }

    /// Both ends of the mux agree on AES-128-GCM: the cheapest of TLS 1.3's AEADs here with
    /// either library (`examples/aead_cost.rs`), where rustls's own order puts AES-256-GCM first.
    #[test]
    fn the_mux_ends_agree_on_aes_128_gcm() {
        let (client, server) = handshaken();
        for end in [&client, &server] {
            let suite = end.negotiated_cipher_suite().map(|s| s.suite());
            assert_eq!(suite, Some(rustls::CipherSuite::TLS13_AES_128_GCM_SHA256));
        }
        let secrets = client.dangerous_extract_secrets().unwrap();
        assert!(matches!(secrets.tx.1, ConnectionTrafficSecrets::Aes128Gcm { .. }));
    }

    fn pattern(n: usize, seed: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 + seed * 7 + 1) as u8).collect()
    }

    /// Opens every whole record in `buf` from `raw` on as the driver does; the plaintext so far
    /// is `buf[..*plain]`.
    fn open_all(opener: &mut Opener, buf: &mut [u8], plain: &mut usize, raw: &mut usize) -> Result<bool, RecordError> {
        loop {
            match opener.open(buf, *plain, *raw)? {
                Opened::Data { len, used } => {
                    *plain += len;
                    *raw += used;
                }
                Opened::Nothing { used } => *raw += used,
                Opened::Closed { used } => {
                    *raw += used;
                    return Ok(true);
                }
                Opened::Partial { .. } => return Ok(false),
            }
        }
    }

    /// Opens `wire` arriving in the pieces `cuts` makes: the plaintext, and whether a
    /// close_notify ended it.
    fn open_in_pieces(opener: &mut Opener, wire: &[u8], cuts: &[usize]) -> Result<(Vec<u8>, bool), RecordError> {
        let (mut buf, mut plain, mut raw) = (Vec::new(), 0, 0);
        let mut at = 0;
        for &cut in cuts.iter().chain([&wire.len()]) {
            buf.extend_from_slice(&wire[at..cut]);
            at = cut;
            if open_all(opener, &mut buf, &mut plain, &mut raw)? {
                buf.truncate(plain);
                return Ok((buf, true));
            }
        }
        assert_eq!(raw, buf.len(), "bytes left over that are not a whole record");
        buf.truncate(plain);
        Ok((buf, false))
    }

    /// Records this layer seals are read by rustls, whole and in order, down to the
    /// close_notify, which rustls takes as the end.
    #[test]
    fn records_sealed_here_are_read_by_rustls_then_its_close_notify() {
        let (mut sealer, _, mut server) = ours();
        let mut wire = Vec::new();
        let mut sent = Vec::new();
        for (seed, n) in [0, 1, 100, MAX_PLAIN - 1, MAX_PLAIN, 3].into_iter().enumerate() {
            let start = wire.len();
            wire.extend_from_slice(&[0; HEADER]);
            let plain = pattern(n, seed);
            wire.extend_from_slice(&plain);
            sent.extend_from_slice(&plain);
            sealer.seal(&mut wire, start).unwrap();
        }
        sealer.close_notify(&mut wire).unwrap();
        let mut bytes = &wire[..];
        let mut got = Vec::new();
        while !bytes.is_empty() {
            server.read_tls(&mut bytes).unwrap();
            let state = server.process_new_packets().unwrap();
            let mut chunk = vec![0; state.plaintext_bytes_to_read()];
            server.reader().read_exact(&mut chunk).unwrap();
            got.extend_from_slice(&chunk);
        }
        assert!(got == sent, "rustls read {} bytes of {}, or they differ", got.len(), sent.len());
        assert!(server.process_new_packets().unwrap().peer_has_closed(), "rustls did not see the close_notify");
    }

    /// rustls's records (after its session tickets, and its close_notify) opened here, the
    /// bytes arriving cut at every byte boundary in turn, and a byte at a time: the same
    /// plaintext each time, the tickets skipped, the end seen.
    #[test]
    fn rustls_records_cut_at_every_byte_are_opened_here_tickets_skipped() {
        let (client, mut server) = handshaken();
        let (seq, rx) = client.dangerous_extract_secrets().unwrap().rx;
        let (algorithm, key, iv) = raw(&rx);
        let mut sent = Vec::new();
        for (seed, n) in [700, 1, 2000, 0, 5].into_iter().enumerate() {
            let plain = pattern(n, seed);
            server.writer().write_all(&plain).unwrap();
            sent.extend_from_slice(&plain);
        }
        server.send_close_notify();
        let wire = written(&mut server);
        let fresh = || Opener::new(Direction::with_key(seq, algorithm, &key, &iv, AES_GCM_LIMIT).unwrap());
        for cut in 0..=wire.len() {
            let (got, closed) = open_in_pieces(&mut fresh(), &wire, &[cut]).unwrap();
            assert!(got == sent && closed, "cut at {cut}: {} bytes of {}, closed {closed}", got.len(), sent.len());
        }
        let every: Vec<usize> = (1..wire.len()).collect();
        let (got, closed) = open_in_pieces(&mut fresh(), &wire, &every).unwrap();
        assert!(got == sent && closed, "a byte at a time: {} bytes of {}, closed {closed}", got.len(), sent.len());
    }

    /// A record altered on the way (one bit of its body, or of its header) is refused with the
    /// message that names the likely cause.
    #[test]
    fn a_tampered_record_is_refused_naming_key_mismatch_or_corruption() {
        let (_, mut opener, mut server) = ours();
        let tickets = written(&mut server);
        let (got, _) = open_in_pieces(&mut opener, &tickets, &[]).unwrap();
        assert!(got.is_empty());
        server.writer().write_all(&pattern(1000, 1)).unwrap();
        let mut wire = written(&mut server);
        wire[HEADER + 10] ^= 1;
        let e = open_in_pieces(&mut opener, &wire, &[]).unwrap_err();
        assert_eq!(e, RecordError::Authentication { seq: opener.seq() - 1 });
        assert!(e.to_string().contains("failed authentication: key mismatch or corruption"), "{e}");
    }

    /// Bytes that are not TLS records (the plain hello, an oversized length) are refused at
    /// their header, before waiting for a body.
    #[test]
    fn bytes_that_are_not_records_are_refused_at_the_header() {
        let (_, mut opener, _) = ours();
        let mut plain = *b"SWYDx";
        assert_eq!(opener.open(&mut plain, 0, 0), Err(RecordError::OuterType(b'S')));
        let mut long = [23, 3, 3, 0x41, 0x01];
        assert_eq!(opener.open(&mut long, 0, 0), Err(RecordError::Overflow(0x4101)));
        let mut old = [23, 3, 1, 0, 40];
        assert_eq!(opener.open(&mut old, 0, 0), Err(RecordError::Version(0x0301)));
        let mut short = [23, 3, 3, 0, 16];
        assert_eq!(opener.open(&mut short, 0, 0), Err(RecordError::Short(16)));
    }

    /// rustls's key update is refused with a message saying this end does not do them.
    #[test]
    fn a_key_update_from_the_far_end_is_refused() {
        let (_, mut opener, mut server) = ours();
        server.refresh_traffic_keys().unwrap();
        server.writer().write_all(b"after").unwrap();
        let wire = written(&mut server);
        let e = open_in_pieces(&mut opener, &wire, &[]).unwrap_err();
        assert_eq!(e, RecordError::KeyUpdate);
        assert!(e.to_string().contains("key update"), "{e}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any bytes as the far end's records, arriving in any pieces: the opener takes whole
        /// records, waits for partial ones and refuses bad ones without panicking, never reads
        /// past what has arrived, and never puts plaintext past the record it came from. Half
        /// the inputs start with well-formed headers, so that bodies reach the AEAD.
        #[test]
        fn any_bytes_as_records_are_refused_or_waited_for_never_a_panic(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3000),
            lengths in proptest::collection::vec(0usize..MAX_CIPHER + 300, 0..4),
            cuts in proptest::collection::vec(0usize..4000, 0..6),
        ) {
            let mut wire = Vec::new();
            let mut rest = &body[..];
            for len in lengths {
                let [hi, lo] = u16::try_from(len.min(0xffff)).unwrap().to_be_bytes();
                wire.extend_from_slice(&[APPLICATION_DATA, 3, 3, hi, lo]);
                let n = len.min(rest.len());
                wire.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
            }
            wire.extend_from_slice(rest);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(wire.len())).collect();
            cuts.sort_unstable();
            let mut opener = fixed_opener();
            let (mut buf, mut plain, mut raw) = (Vec::new(), 0, 0);
            let mut at = 0;
            for cut in cuts.into_iter().chain([wire.len()]) {
                buf.extend_from_slice(&wire[at..cut]);
                at = cut;
                match open_all(&mut opener, &mut buf, &mut plain, &mut raw) {
                    Ok(_) => proptest::prop_assert!(plain <= raw && raw <= buf.len()),
                    Err(_) => break,
                }
            }
        }
    }

    /// An opener with a key of its own (no handshake: the property above needs many).
    fn fixed_opener() -> Opener {
        let key = rustls::crypto::cipher::AeadKey::from([7u8; 32]);
        let secrets = ConnectionTrafficSecrets::Aes256Gcm { key, iv: rustls::crypto::cipher::Iv::from([9; NONCE_LEN]) };
        Opener::new(Direction::new(0, secrets).unwrap())
    }

    /// A key seals no more records than AES-GCM may safely protect; the limit is refused, not
    /// wrapped.
    #[test]
    fn a_key_at_its_record_limit_seals_no_more() {
        let (client, _) = handshaken();
        let secrets = client.dangerous_extract_secrets().unwrap();
        let mut sealer = Sealer(Direction::new(AES_GCM_LIMIT - 1, secrets.tx.1).unwrap());
        let mut wire = vec![0; HEADER];
        sealer.seal(&mut wire, 0).unwrap();
        let mut more = vec![0; HEADER];
        assert_eq!(sealer.seal(&mut more, 0), Err(RecordError::Limit(AES_GCM_LIMIT)));
    }
}
