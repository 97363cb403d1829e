//! A two-way byte stream as two rings, one each way (issue 25: "a two-way channel is two
//! rings"), as one [`AsyncRead`] + [`AsyncWrite`].

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::{AsyncReader, AsyncWriter, Reader, RingError, RingFds, Writer};

/// One end of a two-way stream: reads from one ring, writes to the other.
///
/// Made in one process by [`duplex`], or across two by [`Duplex::offer`] on one side of a
/// Unix socket and [`Duplex::accept`] on the other. Shutting down the write half closes only
/// the outgoing ring; [`into_split`](Self::into_split) gives the halves to separate tasks.
#[derive(Debug)]
pub struct Duplex {
    reader: AsyncReader,
    writer: AsyncWriter,
}

/// Two ends of a two-way stream over two rings of `capacity` bytes each (a power of two): what
/// one end writes, the other reads. Call within a tokio runtime.
pub fn duplex(capacity: usize) -> Result<(Duplex, Duplex), RingError> {
    let (a_writer, b_reader) = crate::channel(capacity)?;
    let (b_writer, a_reader) = crate::channel(capacity)?;
    Ok((
        Duplex::new(a_reader.into_async()?, a_writer.into_async()?),
        Duplex::new(b_reader.into_async()?, b_writer.into_async()?),
    ))
}

impl Duplex {
    /// Pairs a reader and a writer (normally of two rings going opposite ways).
    pub fn new(reader: AsyncReader, writer: AsyncWriter) -> Self {
        Self { reader, writer }
    }

    /// The two halves, to read and write from different tasks.
    pub fn into_split(self) -> (AsyncReader, AsyncWriter) {
        (self.reader, self.writer)
    }

    /// Creates two rings of `capacity` bytes, sends the peer at the other end of `socket` its
    /// ends (the ring we write to, then the ring it writes to) and opens ours. Both our ends
    /// watch `socket` as their lifeline, so the peer's death ends a wait in
    /// [`RingError::PeerGone`]; keep the peer's end of the socket open for as long as it
    /// uses the rings. Call within a tokio runtime; the peer calls [`accept`](Self::accept).
    pub fn offer(socket: &UnixStream, capacity: usize) -> Result<Self, RingError> {
        let outgoing = RingFds::create(capacity)?;
        let incoming = RingFds::create(capacity)?;
        outgoing.send(socket)?;
        incoming.send(socket)?;
        Self::open(socket, Reader::open(incoming)?, Writer::open(outgoing)?)
    }

    /// The peer's half of [`offer`](Self::offer): receives the two rings from `socket` and
    /// opens them the other way round. Blocks the thread until they arrive (the socket must be
    /// in blocking mode); call within a tokio runtime.
    pub fn accept(socket: &UnixStream) -> Result<Self, RingError> {
        let incoming = RingFds::recv(socket)?;
        let outgoing = RingFds::recv(socket)?;
        Self::open(socket, Reader::open(incoming)?, Writer::open(outgoing)?)
    }

    fn open(socket: &UnixStream, mut reader: Reader, mut writer: Writer) -> Result<Self, RingError> {
        reader.watch(OwnedFd::from(socket.try_clone()?));
        writer.watch(OwnedFd::from(socket.try_clone()?));
        Ok(Self::new(reader.into_async()?, writer.into_async()?))
    }
}

impl AsyncRead for Duplex {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, dst: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().reader).poll_read(cx, dst)
    }
}

impl AsyncWrite for Duplex {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, src: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().writer).poll_write(cx, src)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().writer).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().writer).poll_shutdown(cx)
    }
}
