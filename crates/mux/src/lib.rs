//! Switchyard's **mux** driver: n weighted application channels multiplexed over m TCP
//! connections to one peer (Iwashima, MIT MEng 2003), on tokio; or, between processes on one
//! host, over m Unix socket connections or m pairs of shared-memory rings.
//!
//! # What lives here
//!
//! - [`Session`] (the client's [`Session::connect`] / [`Session::connect_to`], the server's
//!   [`Listener`]): the connections of a session, joined by a keyed handshake ([`hello`]), and
//!   the driver task that carries out the core's decisions on them.
//! - [`Peer`]: where the other end is: `HOST:PORT` (TCP), `unix:/PATH` (a Unix socket) or
//!   `shm:/PATH` (two `switchyard_shmring` rings per connection, handed over a Unix socket at
//!   `PATH` that then stays open as their lifeline, so a peer that dies is noticed). The
//!   driver makes the same decisions over each: a connection is read and written without
//!   blocking when it says it is ready, and the core gets a view of each (`TCP_INFO` over TCP;
//!   over rings the exact bytes the peer has not read yet, with `TCP_NOTSENT_LOWAT`'s
//!   low-water mark applied to them; over Unix sockets the kernel's queue, `SIOCOUTQ`). TLS
//!   is for TCP only: a local peer with TLS set is refused.
//! - [`Channel`]: an application's end of one channel: `send` with backpressure, `recv`, weight,
//!   close, counters; `AsyncRead` and `AsyncWrite` for existing code.
//! - [`sockopt`]: the kernel's help (`TCP_NOTSENT_LOWAT`, `TCP_INFO`, `SIOCOUTQ`).
//! - [`tls`]: TLS for the connections (rustls), on top of the keyed handshake.
//! - [`record`]: the connections' TLS 1.3 records after rustls's handshake, sealed and opened
//!   in the connection's own buffers, on a task of the connection's own (`offload.rs`), so
//!   that a session's crypto is spread over the cores and off its driver's task.
//! - [`tunnel`]: local TCP ports carried across a session as weighted channels.
//!
//! # What does not
//!
//! Every scheduling decision (which channel sends, on which connection, what is sent again when
//! a connection dies, how much credit a channel has) is made by `switchyard_core::carry`; this
//! crate only moves bytes between its links (sockets or rings) and the core.

mod budget;
mod channel;
mod conn;
mod forwarder;
pub mod hello;
mod link;
mod offload;
mod peer;
pub mod record;
mod session;
pub mod sockopt;
pub mod tls;
pub mod tunnel;

pub use channel::Channel;
pub use peer::Peer;
pub use session::{ChannelReport, DEFAULT_FRAME, Listener, MuxConfig, MuxError, Session, SessionReport, Stopped};
pub use switchyard_core::carry::choose::ConnChoice;
pub use switchyard_core::carry::{Cut, RecvConfig, Scheme, SendConfig};
pub use tls::{SelfSigned, Tls, TlsError};
