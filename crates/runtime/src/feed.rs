//! A capture process feeding an inspector on the same host through shared-memory rings
//! (`switchyard-shmring`, XenSocket's ring; issue 25): `switchyard feed` and `switchyard inspect
//! --feed`.
//!
//! The inspector listens on a Unix socket ([`FeedListener`]). A feeder connects
//! ([`connect`]), is told how many rings to make and how large, makes them and hands them over.
//! The feeder offers the memory and the inspector maps it: the inspector is the side that must
//! not be hurt, and it checks every index it reads from the shared header, so a feeder that
//! misbehaves can spoil only its own stream. The socket stays open as the lifeline: a feeder
//! killed mid-capture ends the inspector's reads with an error instead of a hang.
//!
//! The feeder ([`feed`]) reads a capture (a file, or a stream such as `tcpdump -w -`), places
//! each connection on a ring with a placement policy of the core that places by the flow alone
//! (both directions of a connection land on one ring), and writes each ring as a pcap stream.
//! Each inspector worker reads one ring with the serial kernel, as a live worker reads its
//! `AF_PACKET` ring ([`crate::live`]). Unlike an `AF_PACKET` ring, a full ring makes the feeder
//! wait: nothing is dropped, and the verdicts are those of the file read directly.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use byteorder::NativeEndian;
use pcap_file::DataLink;
use pcap_file::TsResolution;
use pcap_file::pcap::{PcapHeader, PcapPacket};
use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{FlowKey, LoadView, Policy, Unit, WorkerId};
use switchyard_ingest::live::{RingCounters, RingStats};
use switchyard_ingest::{CaptureReader, ConnConfig, IngestError, Packet, Packets, SkipCounts, decode};
use switchyard_shmring::{Reader, RingError, RingFds, Writer};

use crate::inspect::Inspector;
use crate::live::{LiveCounts, LiveReport, inspect_each};
use crate::serial::{Summary, inspect_serial_counting};

/// "SYFEED01": the inspector's hello, so that a feeder pointed at some other socket says so.
const MAGIC: [u8; 8] = *b"SYFEED01";
/// The hello: the magic, the number of rings (u16) and each ring's capacity (u64), big-endian.
const HELLO: usize = 8 + 2 + 8;
/// The most rings a feed carries.
pub const MAX_RINGS: usize = 256;
/// The largest ring a feeder agrees to make.
pub const MAX_CAPACITY: usize = 1 << 30;
/// Each ring's data area by default: 4 MiB holds a few thousand packets, enough to ride out a
/// worker's pause on a long buffer without holding up the feeder.
pub const DEFAULT_CAPACITY: usize = 4 << 20;
/// How long the two sides wait for each other's hello and rings once connected.
const HANDOFF_TIMEOUT: Duration = Duration::from_secs(10);

/// What went wrong with a feed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FeedError {
    /// The socket could not be made, reached or used.
    #[error("{what} {path}")]
    Socket {
        /// What was being done.
        what: &'static str,
        /// The socket's path.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// Something answers at the path already.
    #[error("{0} is in use: an inspector (or another program) is listening there; pick another path or stop it")]
    InUse(PathBuf),
    /// The peer's hello was not an inspector's.
    #[error("the program at {0} is not a switchyard inspector waiting for a feed (`switchyard inspect --feed PATH`)")]
    BadHello(PathBuf),
    /// The inspector asked for rings this feeder will not make.
    #[error(
        "the inspector asked for {rings} rings of {capacity} bytes; a feed has 1 to {MAX_RINGS} rings, each a power of two up to {MAX_CAPACITY} bytes"
    )]
    BadRequest {
        /// Rings asked for.
        rings: usize,
        /// Bytes each.
        capacity: usize,
    },
    /// Nothing listens at the path the feeder was given.
    #[error("no inspector at {path}: start `switchyard inspect --feed {path}` first")]
    NoInspector {
        /// The socket's path.
        path: PathBuf,
        /// What connecting said.
        source: std::io::Error,
    },
    /// The rings failed (made, handed over, or corrupted by the peer).
    #[error(transparent)]
    Ring(#[from] RingError),
    /// The capture could not be read.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// A ring could not take the capture (the inspector went away, or gave up on it).
    #[error("writing to ring {ring}")]
    Write {
        /// Which ring.
        ring: usize,
        /// The failure.
        source: RingError,
    },
    /// A frame could not be encoded as a pcap record (larger than a feed carries).
    #[error("frame {frame} of the capture cannot be sent as a pcap record")]
    Encode {
        /// Its number in the capture, from 0.
        frame: u64,
        /// pcap-file's reason.
        source: pcap_file::PcapError,
    },
    /// The capture holds frames of two link types; a feed carries one.
    #[error(
        "the capture mixes link types {first} and {other}, and a feed carries one: split it first (e.g. `tshark -r IN -Y 'frame.interface_id == 0' -w OUT`)"
    )]
    MixedLinkTypes {
        /// The first frame's.
        first: i32,
        /// A later frame's.
        other: i32,
    },
    /// The feeder went away (killed?) without closing its rings: what it had sent was read,
    /// the rest of the capture is missing.
    #[error(
        "the feeder went away without closing {rings} of its rings (killed?), after {packets} TCP and UDP packets: the rest of the capture is missing"
    )]
    FeederGone {
        /// Rings cut short.
        rings: usize,
        /// Packets read from every ring before that.
        packets: u64,
    },
    /// The policy cannot place by the flow alone, or could not be built.
    #[error("{0}")]
    Policy(String),
}

/// The inspector's side: a Unix socket waiting for a feeder. The socket file is removed when
/// this is dropped.
#[derive(Debug)]
pub struct FeedListener {
    listener: UnixListener,
    path: PathBuf,
}

impl FeedListener {
    /// Listens at `path`. A socket file left there by a listener that is gone is replaced; one
    /// that still answers is [`FeedError::InUse`].
    pub fn bind(path: &Path) -> Result<Self, FeedError> {
        let socket = |what, source| FeedError::Socket { what, path: path.to_owned(), source };
        let listener = match UnixListener::bind(path) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                if UnixStream::connect(path).is_ok() {
                    return Err(FeedError::InUse(path.to_owned()));
                }
                std::fs::remove_file(path).map_err(|e| socket("removing the stale socket", e))?;
                UnixListener::bind(path).map_err(|e| socket("listening on", e))?
            }
            Err(e) => return Err(socket("listening on", e)),
        };
        Ok(Self { listener, path: path.to_owned() })
    }

    /// Where it listens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for a feeder, asks it for `rings` rings of `capacity` bytes (a power of two) and
    /// opens them as readers, each watching the connection as its lifeline.
    pub fn accept(&self, rings: usize, capacity: usize) -> Result<Vec<Reader>, FeedError> {
        if !(1..=MAX_RINGS).contains(&rings) || !capacity.is_power_of_two() || capacity > MAX_CAPACITY {
            return Err(FeedError::BadRequest { rings, capacity });
        }
        let socket = |what, source| FeedError::Socket { what, path: self.path.clone(), source };
        let (conn, _) = self.listener.accept().map_err(|e| socket("accepting a feeder on", e))?;
        conn.set_read_timeout(Some(HANDOFF_TIMEOUT)).map_err(|e| socket("setting a timeout on", e))?;
        let mut hello = MAGIC.to_vec();
        hello.extend_from_slice(&(rings as u16).to_be_bytes());
        hello.extend_from_slice(&(capacity as u64).to_be_bytes());
        (&conn).write_all(&hello).map_err(|e| socket("greeting the feeder on", e))?;
        let readers = (0..rings)
            .map(|_| {
                let mut reader = Reader::open(RingFds::recv(&conn)?)?;
                reader.watch(OwnedFd::from(conn.try_clone().map_err(RingError::Io)?));
                Ok(reader)
            })
            .collect::<Result<Vec<_>, FeedError>>()?;
        Ok(readers)
    }
}

impl Drop for FeedListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The feeder's side: connects to an inspector at `path`, makes the rings it asks for, hands
/// them over and returns their writing ends, each watching the connection as its lifeline.
pub fn connect(path: &Path) -> Result<Vec<Writer>, FeedError> {
    let socket = |what, source| FeedError::Socket { what, path: path.to_owned(), source };
    let conn = UnixStream::connect(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            FeedError::NoInspector { path: path.to_owned(), source }
        }
        _ => socket("connecting to an inspector at", source),
    })?;
    conn.set_read_timeout(Some(HANDOFF_TIMEOUT)).map_err(|e| socket("setting a timeout on", e))?;
    let mut hello = [0u8; HELLO];
    (&conn).read_exact(&mut hello).map_err(|_| FeedError::BadHello(path.to_owned()))?;
    if hello[..8] != MAGIC {
        return Err(FeedError::BadHello(path.to_owned()));
    }
    let rings = usize::from(u16::from_be_bytes([hello[8], hello[9]]));
    let capacity = u64::from_be_bytes(hello[10..].try_into().expect("8 bytes"));
    let capacity = usize::try_from(capacity).unwrap_or(usize::MAX);
    if !(1..=MAX_RINGS).contains(&rings) || !capacity.is_power_of_two() || capacity > MAX_CAPACITY {
        return Err(FeedError::BadRequest { rings, capacity });
    }
    (0..rings)
        .map(|_| {
            let fds = RingFds::create(capacity)?;
            fds.send(&conn)?;
            let mut writer = Writer::open(fds)?;
            writer.watch(OwnedFd::from(conn.try_clone().map_err(RingError::Io)?));
            Ok(writer)
        })
        .collect()
}

/// What a feeder has sent so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeedStats {
    /// Frames read from the capture and written to a ring.
    pub frames: u64,
    /// Bytes of those frames as captured.
    pub bytes: u64,
    /// Frames each ring took.
    pub per_ring: Vec<u64>,
    /// Frames that are not TCP or UDP over IP (or are damaged): sent to ring 0, where the
    /// inspector counts them as left out, as a file's reader would.
    pub undecoded: u64,
}

/// Frames between calls of `progress`.
const PROGRESS_EVERY: u64 = 4_096;

/// Reads `capture` (pcap or pcapng) to its end, writing each frame to the ring `policy` places
/// its connection on (one that places by the flow alone), each ring as a pcap stream with
/// nanosecond timestamps; then closes the rings, which the inspector reads as the end of the
/// capture. `progress` is called now and then.
///
/// On any failure (a damaged capture, a policy that cannot place by the flow, an inspector
/// that gave up on a ring) the rings are abandoned, not closed, so that the inspector reports
/// the feed cut short ([`FeedError::FeederGone`]) instead of taking what came before for the
/// whole capture.
pub fn feed(
    capture: impl Read + Send,
    mut rings: Vec<Writer>,
    policy: Policy,
    progress: &mut dyn FnMut(&FeedStats),
) -> Result<FeedStats, FeedError> {
    let mut stats = FeedStats { per_ring: vec![0; rings.len()], ..FeedStats::default() };
    match send(capture, &mut rings, policy, &mut stats, progress) {
        Ok(()) => Ok(stats),
        Err(e) => {
            rings.into_iter().for_each(Writer::abandon);
            Err(e)
        }
    }
}

/// [`feed`]'s work: every frame of `capture` to its ring.
fn send(
    capture: impl Read + Send,
    rings: &mut [Writer],
    policy: Policy,
    stats: &mut FeedStats,
    progress: &mut dyn FnMut(&FeedStats),
) -> Result<(), FeedError> {
    if !policy.by_flow_alone() {
        return Err(FeedError::Policy(format!(
            "policy {} places by load or by earlier placements, which a feeder cannot see; use one of {}",
            policy.name(),
            Policy::by_flow_alone_names()
        )));
    }
    let ids: Vec<WorkerId> = (0..rings.len() as u32).map(WorkerId).collect();
    let mut placer =
        place::build(policy, &PlaceConfig::default(), &ids).map_err(|e| FeedError::Policy(e.to_string()))?;
    let mut reader = CaptureReader::new(capture)?;
    let empty = LoadView::new(&[], &[]);
    // Each ring's pcap header needs the link type, known at the first frame.
    let mut linktype = None;
    // A record is encoded here, then published to its ring in one write: pcap-file writes a
    // record field by field, and each write to a ring is published to the reader at once.
    let mut record = Vec::new();
    while let Some(frame) = reader.next_frame()? {
        let first = match linktype {
            Some(l) => l,
            None => {
                open(rings, frame.linktype, &mut record)?;
                *linktype.insert(frame.linktype)
            }
        };
        if frame.linktype != first {
            return Err(FeedError::MixedLinkTypes { first, other: frame.linktype });
        }
        let ring = match decode(frame.linktype, frame.data) {
            Ok(d) => {
                let unit = Unit::of_flow(FlowKey::Tuple(d.key.undirected()).id(), 0);
                placer.place(&unit, &empty).0 as usize
            }
            Err(_) => {
                stats.undecoded += 1;
                0
            }
        };
        // A capture whose wire length is below what it captured is damaged, not ours to refuse.
        let wire_len = frame.wire_len.max(u32::try_from(frame.data.len()).unwrap_or(u32::MAX));
        let packet = PcapPacket::new(Duration::from_nanos(frame.time_ns), wire_len, frame.data);
        record.clear();
        packet
            .write_to::<_, NativeEndian>(&mut record, TsResolution::NanoSecond, SNAPLEN)
            .map_err(|source| FeedError::Encode { frame: stats.frames, source })?;
        rings[ring].write_all(&record).map_err(|source| FeedError::Write { ring, source })?;
        stats.frames += 1;
        stats.bytes += frame.data.len() as u64;
        stats.per_ring[ring] += 1;
        if stats.frames.is_multiple_of(PROGRESS_EVERY) {
            progress(stats);
        }
    }
    if linktype.is_none() {
        // No frame at all: each ring still carries a valid (empty) capture.
        open(rings, u32::from(DataLink::ETHERNET) as i32, &mut record)?;
    }
    progress(stats);
    Ok(())
}

/// The largest frame a feed carries: as large as the inspector's reader takes.
const SNAPLEN: u32 = 1 << 26;

/// Starts each ring's pcap stream for frames of `linktype` (nanosecond timestamps, this
/// machine's byte order), each header in one write.
fn open(rings: &mut [Writer], linktype: i32, scratch: &mut Vec<u8>) -> Result<(), FeedError> {
    let header = PcapHeader {
        datalink: DataLink::from(linktype as u32),
        ts_resolution: TsResolution::NanoSecond,
        snaplen: SNAPLEN,
        endianness: pcap_file::Endianness::native(),
        ..PcapHeader::default()
    };
    scratch.clear();
    header.write_to(scratch).map_err(|source| FeedError::Encode { frame: 0, source })?;
    for (ring, w) in rings.iter_mut().enumerate() {
        w.write_all(scratch).map_err(|source| FeedError::Write { ring, source })?;
    }
    Ok(())
}

/// Counts a ring's packets as they are read, for the live view.
struct Counted<P> {
    inner: P,
    counter: Arc<RingCounters>,
}

impl<P: Packets> Packets for Counted<P> {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, IngestError> {
        let p = self.inner.next_packet()?;
        if p.is_some() {
            self.counter.packets.fetch_add(1, Ordering::Relaxed);
        }
        Ok(p)
    }

    fn skipped(&self) -> SkipCounts {
        self.inner.skipped()
    }
}

/// A ring read as a capture, noting whether the feeder went away without closing it.
struct Fed<'a> {
    ring: &'a mut Reader,
    cut: &'a mut bool,
}

impl Read for Fed<'_> {
    fn read(&mut self, dst: &mut [u8]) -> std::io::Result<usize> {
        // The ring's own `read`: its error says whether the peer went away.
        let r = self.ring.read(dst);
        *self.cut |= matches!(r, Err(RingError::PeerGone));
        r.map_err(Into::into)
    }
}

/// One worker's ring, its counts, and whether the feeder cut it short.
struct Source {
    /// Taken by its worker, and closed when the worker is done with it.
    ring: Option<Reader>,
    counter: Arc<RingCounters>,
    cut: bool,
}

/// Inspects what a feeder sends through `rings`, a worker thread per ring, until the feeder
/// closes every ring; the summary is a file's. In `counts`, each ring's `packets` are the TCP
/// and UDP packets read from it (nothing is ever dropped). A feeder that goes away without
/// closing its rings (killed) is [`FeedError::FeederGone`], once everything it sent is read.
pub fn inspect_feed(
    rings: Vec<Reader>,
    conn: ConnConfig,
    inspector: &Inspector,
    counts: &LiveCounts,
) -> Result<LiveReport, FeedError> {
    let sources: Vec<Source> =
        rings.into_iter().map(|ring| Source { ring: Some(ring), counter: Arc::default(), cut: false }).collect();
    if let Ok(mut watched) = counts.rings.lock() {
        *watched = sources.iter().map(|s| Arc::clone(&s.counter)).collect();
    }
    let started = Instant::now();
    let cut = std::sync::atomic::AtomicUsize::new(0);
    let result = inspect_each(sources, "sy-feed", counts, |source, on_match| {
        let Source { ring, counter, cut: ring_cut } = source;
        let Some(mut ring) = ring.take() else { return Ok(Summary::default()) };
        let run = CaptureReader::new(Fed { ring: &mut ring, cut: &mut *ring_cut }).and_then(|reader| {
            inspect_serial_counting(Counted { inner: reader, counter: Arc::clone(counter) }, conn, inspector, on_match)
        });
        // Closed as soon as its worker is done, above all when the worker failed: the feeder
        // waiting on this ring's room then fails (`ReaderClosed`) and closes the others,
        // instead of every side waiting on another for good.
        drop(ring);
        if *ring_cut {
            cut.fetch_add(1, Ordering::Relaxed);
        }
        run
    });
    let packets = counts.ring_totals().packets;
    match cut.into_inner() {
        0 => {
            let (summary, _) = result?;
            Ok(LiveReport { summary, ring: RingStats { packets, drops: 0 }, elapsed: started.elapsed() })
        }
        rings => Err(FeedError::FeederGone { rings, packets }),
    }
}
