//! The tunnel's forwarder: one TCP connection and one channel, bytes carried both ways until
//! each side has closed, or until either fails.
//!
//! From the socket to the channel, what a read returns goes to the session as it is, frozen
//! out of the buffer it was read into, without a copy (the session holds `Bytes`, as quinn's
//! `write_chunk` takes them). From the channel to the socket, each frame's bytes are written
//! straight from the buffer the session received them in. `tokio::io::copy_bidirectional`,
//! used before, copied every byte once more each way (into its 8 KiB buffers, and out of them
//! into a buffer of the session's), and held its two 8 KiB buffers for as long as the
//! connection lived, idle or not.
//!
//! Each side's end is passed on as it comes: the client's `shutdown(SHUT_WR)` becomes the
//! channel's close after its last byte, and the channel's close becomes `shutdown(SHUT_WR)`
//! on the socket after the last frame, while the other way goes on.
//!
//! # Memory a connection holds
//!
//! - Idle (nothing to read either way): no buffer. The read buffer is allocated when the
//!   socket says it is readable and let go once a read finds the socket drained.
//! - Socket to channel: every byte read is charged to the session's budget
//!   (`MuxConfig::session_buffer`, 32 MiB by default) from before the read until the peer
//!   acknowledges it: the read waits for room, and reads no more than it was granted (at most
//!   [`READ_BUFFER`]). A channel is granted at most half of what is free in the session, and
//!   is bounded on its own too by `SendConfig::channel_buffer` (1 MiB) and the peer's credit.
//!   Before the budget, each of 10,000 channels reading 100 kB answers could pull its whole
//!   answer into the session, whatever the peer had taken. A chunk keeps the whole buffer it
//!   was read into alive, so a read of less than half the buffer is copied out into a buffer
//!   of its own size and the buffer is read into again: a chunk holds at most twice its bytes,
//!   so what the session's chunks hold in memory is at most twice its budget.
//! - Channel to socket: the frames in the channel's queue to the application (the session
//!   bounds it) and the one being written.

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::WriteHalf;

use crate::channel::{SendingHalf, Taken};
use crate::{Channel, MuxError};

/// Bytes a read from the socket may return. Reads this large halve the system calls and the
/// session's commands of copy_bidirectional's 8 KiB, and the buffer is held only while the
/// socket has bytes to read.
pub(crate) const READ_BUFFER: usize = 64 << 10;

/// Which side failed.
#[derive(Debug)]
pub(crate) enum Broke {
    /// The channel: reset by the peer, cut off with its session, or the session gone.
    Channel(MuxError),
    /// The TCP connection: reset, or another error on its socket.
    Tcp(std::io::Error),
}

/// Carries `tcp`'s bytes to `channel` and `channel`'s to `tcp` until both have ended, passing
/// each end on; the first failure stops both ways and says which side failed, for the caller
/// to reset the other.
pub(crate) async fn carry(tcp: &mut TcpStream, channel: &mut Channel) -> Result<(), Broke> {
    let sending = channel.sending_half();
    let (read, write) = tcp.split();
    let mut closed = false;
    let result = tokio::try_join!(to_channel(read.as_ref(), &sending, &mut closed), to_socket(channel, write));
    if closed {
        channel.sent_close();
    }
    result.map(|_| ())
}

/// The socket's bytes to the channel, then its end as the channel's close.
async fn to_channel(tcp: &TcpStream, sending: &SendingHalf, closed: &mut bool) -> Result<(), Broke> {
    // The write the session has not yet said it took: the next read goes on meanwhile, and
    // waits for it before handing its own chunk over (one chunk in flight).
    let mut in_flight: Option<Taken> = None;
    loop {
        tcp.readable().await.map_err(Broke::Tcp)?;
        let mut buffer = BytesMut::new();
        loop {
            // Room before the read: while the session holds its budget the socket is left
            // unread, and TCP holds its sender back.
            let granted = sending.room(READ_BUFFER).await.map_err(Broke::Channel)?;
            if buffer.capacity() < granted {
                buffer = BytesMut::with_capacity(granted);
            }
            let read = tcp.try_read_buf(&mut (&mut buffer).limit(granted));
            sending.give_back(granted - read.as_ref().map_or(0, |n| *n));
            let n = match read {
                Ok(n) => n,
                // Drained: the buffer goes, so that an idle connection holds none.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(Broke::Tcp(e)),
            };
            if let Some(taken) = in_flight.take() {
                SendingHalf::taken(taken).await.map_err(Broke::Channel)?;
            }
            if n == 0 {
                sending.close().await.map_err(Broke::Channel)?;
                *closed = true;
                return Ok(());
            }
            let chunk = if n >= buffer.capacity() / 2 {
                // Split off, not copied; the next read gets a buffer of its own.
                std::mem::take(&mut buffer).freeze()
            } else {
                let chunk = Bytes::copy_from_slice(&buffer);
                buffer.clear();
                chunk
            };
            in_flight = Some(sending.start(chunk).await.map_err(Broke::Channel)?);
        }
    }
}

/// The channel's bytes to the socket, then its close as `shutdown(SHUT_WR)`.
async fn to_socket(channel: &mut Channel, mut tcp: WriteHalf<'_>) -> Result<(), Broke> {
    loop {
        match channel.recv().await {
            Ok(Some(bytes)) => tcp.write_all(&bytes).await.map_err(Broke::Tcp)?,
            Ok(None) => return tcp.shutdown().await.map_err(Broke::Tcp),
            Err(e) => return Err(Broke::Channel(e)),
        }
    }
}
