//! A channel's application end: send with backpressure, receive, change weight, close; and
//! tokio's `AsyncRead`/`AsyncWrite`, so existing code (`tokio::io::copy`, codecs) can use it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::session::{ChannelReport, Command, MuxError};

type WriteOp = Pin<Box<dyn Future<Output = Result<(), MuxError>> + Send + Sync>>;

/// One weighted channel of a session.
pub struct Channel {
    id: u32,
    commands: mpsc::Sender<Command>,
    incoming: mpsc::Receiver<Bytes>,
    /// Wakes the session's driver when this end takes bytes (its queue has room again).
    room: Arc<Notify>,
    unread: Bytes,
    writing: Option<WriteOp>,
    closed: bool,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel").field("id", &self.id).finish_non_exhaustive()
    }
}

async fn write(commands: mpsc::Sender<Command>, id: u32, data: Bytes) -> Result<(), MuxError> {
    let (reply, rx) = oneshot::channel();
    commands.send(Command::Write { id, data, reply }).await.map_err(|_| MuxError::Ended)?;
    rx.await.map_err(|_| MuxError::Ended)?
}

impl Channel {
    pub(crate) fn new(
        id: u32,
        commands: mpsc::Sender<Command>,
        incoming: mpsc::Receiver<Bytes>,
        room: Arc<Notify>,
    ) -> Self {
        Self { id, commands, incoming, room, unread: Bytes::new(), writing: None, closed: false }
    }

    /// The channel's number in the session (odd if the client opened it, even if the server did).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Sends `data`, waiting while the channel's buffer is full: the session takes a channel's
    /// bytes only as fast as the scheduler gives it turns and the receiver gives it credit.
    pub async fn send(&self, data: Bytes) -> Result<(), MuxError> {
        if data.is_empty() {
            return Ok(());
        }
        write(self.commands.clone(), self.id, data).await
    }

    /// The next bytes the peer sent on the channel; `None` once the peer has closed it and
    /// everything has been read.
    pub async fn recv(&mut self) -> Option<Bytes> {
        if !self.unread.is_empty() {
            return Some(std::mem::take(&mut self.unread));
        }
        let b = self.incoming.recv().await;
        self.room.notify_one();
        b
    }

    /// Changes the channel's weight (in both directions).
    pub async fn set_weight(&self, weight: f64) -> Result<(), MuxError> {
        let (reply, rx) = oneshot::channel();
        self.commands.send(Command::SetWeight { id: self.id, weight, reply }).await.map_err(|_| MuxError::Ended)?;
        rx.await.map_err(|_| MuxError::Ended)?
    }

    /// Sends no more: the peer reads to the end of what was sent, then sees the channel end.
    /// Receiving goes on.
    pub async fn close(&mut self) -> Result<(), MuxError> {
        self.closed = true;
        self.commands.send(Command::Close { id: self.id }).await.map_err(|_| MuxError::Ended)
    }

    /// The channel's counters.
    pub async fn report(&self) -> Result<ChannelReport, MuxError> {
        let (reply, rx) = oneshot::channel();
        self.commands.send(Command::Report { reply }).await.map_err(|_| MuxError::Ended)?;
        let report = rx.await.map_err(|_| MuxError::Ended)?;
        Ok(report.channels.into_iter().find(|c| c.id == self.id).unwrap_or_default())
    }
}

impl Drop for Channel {
    /// A dropped channel is closed for sending (what was sent still arrives).
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.commands.try_send(Command::Close { id: self.id });
        }
    }
}

impl AsyncRead for Channel {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        if self.unread.is_empty() {
            match ready!(self.incoming.poll_recv(cx)) {
                Some(b) => {
                    self.unread = b;
                    self.room.notify_one();
                }
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = self.unread.len().min(buf.remaining());
        buf.put_slice(&self.unread[..n]);
        self.unread.advance(n);
        Poll::Ready(Ok(()))
    }
}

fn io_error(e: MuxError) -> std::io::Error {
    match e {
        MuxError::Io { source, .. } => source,
        other => std::io::Error::new(std::io::ErrorKind::BrokenPipe, other),
    }
}

impl AsyncWrite for Channel {
    /// Takes the bytes at once and hands them to the session; the next write, flush or
    /// shutdown waits until the session has taken them, so at most one buffer is in flight.
    /// The hand-over starts here, not at the next flush, so a writer that then waits for an
    /// answer without flushing is not left waiting forever.
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        ready!(self.as_mut().poll_flush(cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let mut op: WriteOp = Box::pin(write(self.commands.clone(), self.id, Bytes::copy_from_slice(buf)));
        match op.as_mut().poll(cx) {
            Poll::Ready(r) => r.map_err(io_error)?,
            Poll::Pending => self.writing = Some(op),
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if let Some(op) = self.writing.as_mut() {
            let r = ready!(op.as_mut().poll(cx));
            self.writing = None;
            r.map_err(io_error)?;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.as_mut().poll_flush(cx))?;
        if !self.closed {
            self.closed = true;
            let _ = self.commands.try_send(Command::Close { id: self.id });
        }
        Poll::Ready(Ok(()))
    }
}
