//! Switchyard's **mux** driver: n weighted application channels multiplexed over m TCP
//! connections to one peer (Iwashima, MIT MEng 2003), on tokio.
//!
//! # What lives here
//!
//! - [`Session`] (the client's [`Session::connect`], the server's [`Listener`]): the connections
//!   of a session, joined by a keyed handshake ([`hello`]), and the driver task that carries out
//!   the core's decisions on them.
//! - [`Channel`]: an application's end of one channel: `send` with backpressure, `recv`, weight,
//!   close, counters; `AsyncRead` and `AsyncWrite` for existing code.
//! - [`sockopt`]: the kernel's help (`TCP_NOTSENT_LOWAT`, `TCP_INFO`).
//! - [`tls`]: TLS for the connections (rustls), on top of the keyed handshake.
//! - [`tunnel`]: local TCP ports carried across a session as weighted channels.
//!
//! # What does not
//!
//! Every scheduling decision (which channel sends, on which connection, what is sent again when
//! a connection dies, how much credit a channel has) is made by `switchyard_core::carry`; this
//! crate only moves bytes between sockets and the core.

mod channel;
mod conn;
pub mod hello;
mod session;
pub mod sockopt;
pub mod tls;
pub mod tunnel;

pub use channel::Channel;
pub use session::{ChannelReport, Listener, MuxConfig, MuxError, Session, SessionReport, Stopped};
pub use switchyard_core::carry::choose::ConnChoice;
pub use switchyard_core::carry::{Cut, RecvConfig, Scheme, SendConfig};
pub use tls::{SelfSigned, Tls, TlsError};
