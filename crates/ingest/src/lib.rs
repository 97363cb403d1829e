//! Packet ingest: pcap and pcapng captures read into timestamped packets with their flow keys.
//!
//! One reader for every driver: the simulator's trace-driven workloads, `switchyard place --keys`
//! and the runtime all take packets from here. What lives here is the outside-input boundary —
//! capture formats (through `pcap-parser`), link layers and IP/TCP/UDP headers (through
//! `etherparse`) — and the rule for what a damaged packet becomes: it is counted under a
//! [`Skip`] reason and left out, never a panic. Above the reader, sans-IO: the connection table
//! that numbers each connection's packets ([`conn`]), and TCP reassembly ([`stream`]) into the
//! growing buffer a DPI engine inspects ([`assemble`]), kept apart so that a producer can track
//! while workers reassemble. Live interfaces are read like captures, from `AF_PACKET` rings
//! ([`live`], Linux). What does not live here: anything that decides where work goes (that is
//! the core's) or runs it (the runtime's). Beside packets, [`labdata`] reads the Intel Berkeley
//! Research Lab sensor trace that drives the sensor-field experiments, and makes synthetic ones.
//!
//! ```no_run
//! let file = std::fs::File::open("trace.pcap")?;
//! let mut reader = switchyard_ingest::CaptureReader::new(file)?;
//! while let Some(packet) = reader.next_packet()? {
//!     println!("{} {:?} {} payload bytes", packet.time_ns, packet.key, packet.payload.len());
//! }
//! println!("skipped: {}", reader.skipped());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod assemble;
pub mod conn;
mod decode;
pub mod glimpse;
pub mod labdata;
#[cfg(target_os = "linux")]
pub mod live;
mod mapped;
mod read;
mod slice;
pub mod stream;

pub use assemble::Assembly;
pub use conn::{Conn, ConnConfig, ConnTable, Sent, Step};
pub use decode::{Decoded, Skip, Tcp, decode, decode_thorough};
pub use glimpse::Glimpse;
pub use mapped::CaptureBytes;
pub use read::{CaptureReader, Frame, IngestError, Packet, SkipCounts};
pub use slice::{Packets, SliceReader};
