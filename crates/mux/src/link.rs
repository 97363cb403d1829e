//! What carries one connection of a session: a TCP stream, a Unix stream, or two shared-memory
//! rings. The driver asks each the same things (non-blocking reads and writes, tokio-style
//! readiness, a view for the core) and makes the same decisions whatever the answer came from.
//!
//! A local link (Unix or rings) starts with one byte from the client saying which it is, so a
//! server listening on a Unix socket takes both: [`UNIX`] and the hello follows on the socket;
//! [`SHM`] and the client hands over two rings (`Duplex::offer`), the hello follows on them,
//! and the socket stays open only as the rings' lifeline (a peer that dies hangs it up).

use std::io::{self, IoSlice};
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use switchyard_core::carry::choose::ConnView;
use switchyard_shmring::{AsyncReader, AsyncWriter, Duplex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use crate::sockopt;

/// The client's first byte on a Unix socket: the session runs on this socket.
const UNIX: u8 = b'u';
/// The client's first byte on a Unix socket: two rings follow, and the session runs on them.
const SHM: u8 = b's';

/// One connection's carrier.
pub(crate) struct Link {
    kind: Kind,
    /// Bytes handed to the carrier so far.
    written: u64,
    /// The last look at how far the peer has read, for its pace.
    looked: Option<Look>,
    /// The peer's reading pace while it had bytes waiting, in bytes per second (0: unmeasured).
    rate: f64,
}

enum Kind {
    Tcp(TcpStream),
    Unix(UnixStream),
    // Boxed: two ends with their registrations are several times a socket's size.
    Shm(Box<Rings>),
}

/// Two rings, one each way.
struct Rings {
    reader: AsyncReader,
    writer: AsyncWriter,
}

/// How far the peer had read, and when.
#[derive(Clone, Copy)]
struct Look {
    at: Instant,
    delivered: u64,
    /// Bytes were waiting for it then: what it read since was not limited by what it had.
    busy: bool,
}

/// The shortest interval a pace is measured over.
const PACE_OVER: Duration = Duration::from_millis(1);

/// A TCP stream and a Unix stream, for the read both share.
trait Socket {
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
    fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize>;
}

impl Socket for TcpStream {
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        Self::try_io(self, interest, f)
    }

    fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        Self::try_read_buf(self, buf)
    }
}

impl Socket for UnixStream {
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        Self::try_io(self, interest, f)
    }

    fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> io::Result<usize> {
        Self::try_read_buf(self, buf)
    }
}

/// Reads up to `room` bytes from a socket onto `inbox`.
///
/// A read that leaves room emptied the socket's queue: tokio is told the socket would block,
/// so that it waits for the next arrival instead of the driver asking again for nothing (one
/// system call in two, on loopback). Data arriving after the read is a new readiness event,
/// which tokio keeps.
fn read_socket(socket: &impl Socket, inbox: &mut BytesMut, room: usize) -> io::Result<(usize, bool)> {
    let mut got = 0;
    let read = socket.try_io(Interest::READABLE, || {
        got = socket.try_read_buf(&mut (&mut *inbox).limit(room))?;
        if got > 0 && got < room { Err(io::ErrorKind::WouldBlock.into()) } else { Ok(()) }
    });
    match read {
        Ok(()) => Ok((got, false)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => Ok((got, true)),
        Err(e) => Err(e),
    }
}

impl Link {
    fn new(kind: Kind) -> Self {
        Self { kind, written: 0, looked: None, rate: 0.0 }
    }

    /// A TCP connection.
    pub(crate) fn tcp(stream: TcpStream) -> Self {
        Self::new(Kind::Tcp(stream))
    }

    /// A client's local link: a connection to the Unix socket at `path`, carrying the session
    /// itself or, with `shm`, the hand-over of two rings of `capacity` bytes each.
    pub(crate) async fn connect_local(path: &Path, shm: bool, capacity: usize) -> io::Result<Self> {
        let mut socket = UnixStream::connect(path).await?;
        socket.write_all(&[if shm { SHM } else { UNIX }]).await?;
        if !shm {
            return Ok(Self::new(Kind::Unix(socket)));
        }
        // The hand-over is a few small messages on an empty socket: it does not wait.
        let socket = socket.into_std()?;
        socket.set_nonblocking(false)?;
        let rings = Duplex::offer(&socket, capacity)?;
        Ok(Self::shm(rings))
    }

    /// A server's side of a local link accepted on its Unix socket: which kind the client's
    /// first byte asks for, and with rings, the rings it hands over (within `limit`).
    pub(crate) async fn accept_local(mut socket: UnixStream, limit: Duration) -> io::Result<Self> {
        let mut first = [0u8; 1];
        socket.read_exact(&mut first).await?;
        match first[0] {
            UNIX => Ok(Self::new(Kind::Unix(socket))),
            SHM => {
                let socket = socket.into_std()?;
                // Receiving blocks, on a thread of its own and not for longer than the
                // handshake may take: a client that says "rings" and sends none holds up
                // nobody.
                socket.set_nonblocking(false)?;
                socket.set_read_timeout(Some(limit))?;
                let rings = tokio::task::spawn_blocking(move || Duplex::accept(&socket))
                    .await
                    .map_err(|e| io::Error::other(format!("receiving the rings: {e}")))??;
                Ok(Self::shm(rings))
            }
            other => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a switchyard mux client: its first byte is {other:#04x}, not 'u' or 's'"),
            )),
        }
    }

    fn shm(rings: Duplex) -> Self {
        let (reader, writer) = rings.into_split();
        Self::new(Kind::Shm(Box::new(Rings { reader, writer })))
    }

    /// A second handle on a TCP link's socket (a duplicated descriptor, registered with tokio
    /// on its own), so that one task can read the kernel's view of the connection while
    /// another does its I/O. `None` for local links, or if the descriptor cannot be
    /// duplicated (out of descriptors).
    pub(crate) fn twin(&self) -> Option<Self> {
        use std::os::fd::AsFd;
        let Kind::Tcp(s) = &self.kind else { return None };
        let fd = s.as_fd().try_clone_to_owned().ok()?;
        // Non-blocking already: the flag belongs to the socket both descriptors share.
        let twin = TcpStream::from_std(std::net::TcpStream::from(fd)).ok()?;
        Some(Self::tcp(twin))
    }

    /// Applies the session's settings for its connections: for TCP, no Nagle delay and
    /// `TCP_NOTSENT_LOWAT`; for rings, the same low-water mark on what waits unread (a Unix
    /// socket has neither).
    pub(crate) fn tune(&mut self, notsent_lowat: u32) {
        match &mut self.kind {
            Kind::Tcp(s) => {
                let _ = s.set_nodelay(true);
                let _ = sockopt::set_notsent_lowat(s, notsent_lowat);
            }
            Kind::Unix(_) => {}
            Kind::Shm(r) => r.writer.set_low_water(u64::from(notsent_lowat)),
        }
    }

    /// Ready when a read would return something (tokio's readiness; the rings look afresh).
    pub(crate) fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.kind {
            Kind::Tcp(s) => s.poll_read_ready(cx),
            Kind::Unix(s) => s.poll_read_ready(cx),
            Kind::Shm(r) => r.reader.poll_read_ready(cx),
        }
    }

    /// Ready when a write would take bytes.
    pub(crate) fn poll_write_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.kind {
            Kind::Tcp(s) => s.poll_write_ready(cx),
            Kind::Unix(s) => s.poll_write_ready(cx),
            Kind::Shm(r) => r.writer.poll_write_ready(cx),
        }
    }

    /// Waits until a write would take bytes.
    pub(crate) async fn writable(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_write_ready(cx)).await
    }

    /// Writes what the carrier takes now; `WouldBlock` if nothing.
    pub(crate) fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let n = match &mut self.kind {
            Kind::Tcp(s) => s.try_write_vectored(bufs),
            Kind::Unix(s) => s.try_write_vectored(bufs),
            Kind::Shm(r) => r.writer.try_write_vectored(bufs),
        }?;
        self.written += n as u64;
        Ok(n)
    }

    /// Writes what the carrier takes of `buf` now; `WouldBlock` if nothing.
    pub(crate) fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.try_write_vectored(&[IoSlice::new(buf)])
    }

    /// Reads up to `room` bytes onto the end of `inbox`: `Ok((n, drained))`, `n == 0` being
    /// the end and `drained` saying that nothing more was there, so the next read should
    /// wait for readiness; `WouldBlock` if nothing had arrived.
    pub(crate) fn read_into(&mut self, inbox: &mut BytesMut, room: usize) -> io::Result<(usize, bool)> {
        match &mut self.kind {
            Kind::Tcp(s) => read_socket(s, inbox, room),
            Kind::Unix(s) => read_socket(s, inbox, room),
            Kind::Shm(r) => {
                let ready = r.reader.available()?.min(room);
                if ready == 0 {
                    // Nothing ready: the end, a dead writer, or nothing yet; a byte that
                    // lands meanwhile is taken.
                    let mut one = [0u8; 1];
                    let n = r.reader.try_read(&mut one)?;
                    inbox.extend_from_slice(&one[..n]);
                    return Ok((n, true));
                }
                // Zeroed first: the ring copies into initialised bytes only.
                let len = inbox.len();
                inbox.resize(len + ready, 0);
                let n = r.reader.try_read(&mut inbox[len..]);
                inbox.truncate(len + *n.as_ref().unwrap_or(&0));
                let n = n?;
                Ok((n, n < room))
            }
        }
    }

    /// Closes the sending direction: the peer reads the end after the last byte.
    pub(crate) async fn shutdown(&mut self) -> io::Result<()> {
        match &mut self.kind {
            Kind::Tcp(s) => s.shutdown().await,
            Kind::Unix(s) => s.shutdown().await,
            Kind::Shm(r) => r.writer.shutdown().await,
        }
    }

    /// What the core may know of the connection (`at_ns` left for the caller to stamp).
    ///
    /// TCP: the kernel's `TCP_INFO`. Local links have no round trip to measure (`rtt_ns` 0,
    /// so earliest delivery treats them as least queued); their unsent bytes are what the
    /// peer has not read yet (exact for rings, the kernel's accounting of the socket's queue
    /// for Unix sockets, which counts some overhead), and their rate is the pace at which the
    /// peer read while it had bytes waiting.
    pub(crate) fn view(&mut self, now: Instant) -> Option<ConnView> {
        let unread = match &mut self.kind {
            Kind::Tcp(s) => return sockopt::view(s),
            Kind::Unix(s) => sockopt::unix_unread(s)?,
            Kind::Shm(r) => r.writer.unread().ok()?,
        };
        let delivered = self.written.saturating_sub(unread);
        let look = Look { at: now, delivered, busy: unread > 0 };
        match self.looked {
            Some(last) if now.duration_since(last.at) < PACE_OVER => {}
            Some(last) => {
                if last.busy && delivered > last.delivered {
                    self.rate = (delivered - last.delivered) as f64 / now.duration_since(last.at).as_secs_f64();
                }
                self.looked = Some(look);
            }
            None => self.looked = Some(look),
        }
        Some(ConnView { open: true, unsent: unread, rate: self.rate, ..ConnView::default() })
    }
}

/// The hello runs on the link before the driver takes it over.
impl AsyncRead for Link {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().kind {
            Kind::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Kind::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Kind::Shm(r) => Pin::new(&mut r.reader).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Link {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = std::task::ready!(match &mut this.kind {
            Kind::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Kind::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Kind::Shm(r) => Pin::new(&mut r.writer).poll_write(cx, buf),
        })?;
        this.written += n as u64;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().kind {
            Kind::Tcp(s) => Pin::new(s).poll_flush(cx),
            Kind::Unix(s) => Pin::new(s).poll_flush(cx),
            Kind::Shm(r) => Pin::new(&mut r.writer).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().kind {
            Kind::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Kind::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Kind::Shm(r) => Pin::new(&mut r.writer).poll_shutdown(cx),
        }
    }
}
