//! What a client asks a delivery server for, and the server's one-line answer.
//!
//! The whole protocol is one line each way, then data from server to client (or, for `sink`,
//! from client to server):
//!
//! ```text
//! client: bulk\n                    server: ok w3\n            (then bytes as fast as they go)
//! client: stream 4000000\n          server: ok w0\n            (then 4 Mb/s, paced)
//! client: sink\n                    server: ok w1\n            (then the client sends; the server
//!                                                              reads, counts and drops: iperf's receiver)
//!                                   server: refused no room: …\n   (and the connection closes)
//! ```
//!
//! A `sink` client may send its data straight after its line, without waiting for `ok`: every
//! byte after the newline is counted (and, if the answer is `refused`, the connection closes).
//!
//! `sink` is TCP only: it exists to measure the receive path (Guo ch. 3's iperf workload, and
//! receive-side steering), which a datagram socket per client would not exercise the same way.
//!
//! Over UDP each line is one datagram to the server's port; the answer comes from the socket the
//! data will come from. The client sends that socket a datagram (`alive`) at least every few
//! seconds — a stream not heard from in 10 s is dropped — and `bye` ends the stream.

use std::fmt;

/// The longest request line accepted, newline included.
pub const MAX_LINE: usize = 64;

/// A client's request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Request {
    /// An infinite source: as many bytes as the server's schedule gives.
    Bulk,
    /// A constant-bit-rate stream of this many bits per second.
    Stream {
        /// The promised rate, bits per second.
        bits_per_sec: u64,
    },
    /// The reverse direction: the client sends, the server reads and counts (TCP only).
    Sink,
}

impl Request {
    /// The promised rate in bytes per second, for streams.
    pub fn bytes_per_sec(&self) -> Option<f64> {
        match self {
            Self::Bulk | Self::Sink => None,
            Self::Stream { bits_per_sec } => Some(*bits_per_sec as f64 / 8.0),
        }
    }

    /// The line a client sends.
    pub fn line(&self) -> String {
        format!("{self}\n")
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bulk => f.write_str("bulk"),
            Self::Sink => f.write_str("sink"),
            Self::Stream { bits_per_sec } => write!(f, "stream {bits_per_sec}"),
        }
    }
}

/// Why a request line was not understood. The server sends its text back to the client.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Longer than [`MAX_LINE`] or no newline.
    #[error("a request is one line of at most {MAX_LINE} bytes ending in a newline")]
    NotALine,
    /// Not UTF-8, or an unknown verb.
    #[error("unknown request {0:?}: send `bulk`, `stream <bits per second>` or `sink`")]
    Unknown(String),
    /// A stream without a positive whole number of bits per second.
    #[error("bad stream rate {0:?}: give bits per second as a whole number above 0, e.g. `stream 4000000`")]
    BadRate(String),
}

/// Parses one request line (with or without its newline; a `\r` before it is allowed).
pub fn parse(line: &[u8]) -> Result<Request, RequestError> {
    if line.len() > MAX_LINE {
        return Err(RequestError::NotALine);
    }
    let text =
        std::str::from_utf8(line).map_err(|_| RequestError::Unknown(String::from_utf8_lossy(line).into_owned()))?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    if text.contains('\n') {
        return Err(RequestError::NotALine);
    }
    let mut words = text.split_ascii_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("bulk"), None, None) => Ok(Request::Bulk),
        (Some("sink"), None, None) => Ok(Request::Sink),
        (Some("stream"), Some(rate), None) => match rate.parse::<u64>() {
            Ok(bits_per_sec) if bits_per_sec > 0 => Ok(Request::Stream { bits_per_sec }),
            _ => Err(RequestError::BadRate(rate.to_owned())),
        },
        (Some("stream"), _, _) => Err(RequestError::BadRate(text.to_owned())),
        _ => Err(RequestError::Unknown(text.to_owned())),
    }
}

/// The server's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Accepted, and served by this worker.
    Ok {
        /// The worker's number.
        worker: u32,
    },
    /// Refused, with the reason (one line).
    Refused(String),
}

impl Answer {
    /// The line the server sends.
    pub fn line(&self) -> String {
        match self {
            Self::Ok { worker } => format!("ok w{worker}\n"),
            Self::Refused(why) => format!("refused {}\n", why.replace('\n', " ")),
        }
    }

    /// Parses the server's answer line (the bytes up to the first newline); `None` if it is
    /// neither.
    pub fn parse(line: &[u8]) -> Option<Self> {
        let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
        let text = std::str::from_utf8(line).ok()?.trim_end();
        if let Some(w) = text.strip_prefix("ok w") {
            return w.parse().ok().map(|worker| Self::Ok { worker });
        }
        text.strip_prefix("refused ").map(|why| Self::Refused(why.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for r in [Request::Bulk, Request::Stream { bits_per_sec: 4_000_000 }, Request::Sink] {
            assert_eq!(parse(r.line().as_bytes()), Ok(r));
        }
        assert_eq!(parse(b"stream 8\r\n").unwrap().bytes_per_sec(), Some(1.0));
        for a in [Answer::Ok { worker: 7 }, Answer::Refused("no room: full".into())] {
            assert_eq!(Answer::parse(a.line().as_bytes()), Some(a));
        }
        assert_eq!(Answer::parse(b"HTTP/1.1 200 OK\r\n"), None);
        // Found by the fuzzer: a reason is one line, whatever follows it.
        assert_eq!(Answer::parse(b"refused n\0\nom: full"), Some(Answer::Refused("n\0".into())));
    }

    #[test]
    fn bad_lines_say_what_to_send() {
        assert_eq!(parse(b"stream 0\n"), Err(RequestError::BadRate("0".into())));
        assert_eq!(parse(b"stream -3\n"), Err(RequestError::BadRate("-3".into())));
        assert_eq!(parse(b"stream\n"), Err(RequestError::BadRate("stream".into())));
        assert!(matches!(parse(b"GET / HTTP/1.1\n"), Err(RequestError::Unknown(_))));
        assert_eq!(parse(&[b'x'; 65]), Err(RequestError::NotALine));
        assert_eq!(parse(b"bulk\nbulk\n"), Err(RequestError::NotALine));
        assert!(parse(b"\xff\n").is_err());
        assert!(matches!(parse(b"sink 5\n"), Err(RequestError::Unknown(_))));
        assert!(RequestError::Unknown("x".into()).to_string().contains("stream <bits per second>"));
    }
}
