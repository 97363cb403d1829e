//! The wire's view of each stream's departures: the time each of the server's TCP segments left
//! it, from an `AF_PACKET` ring on the interface the streams cross (`lo` for a server on
//! loopback), fed into a second [`DepartureLine`] per stream beside the one its client keeps.
//!
//! Why a packet ring rather than `SO_TIMESTAMPING` on the clients' sockets: a TCP socket's
//! receive timestamp is that of the last segment a `recvmsg` read, so a late read that drains
//! several segments dates them all at the last one — the blur the wire's view is meant to take
//! away. The ring's timestamps are the kernel's, taken as each segment is handed to the device
//! (`dev_queue_xmit_nit` for a tap), so a capture thread that runs late, or a client that reads
//! late, changes none of them. On `lo` the tap sees each segment twice (as it leaves and as it
//! comes back in); each stream's bytes are counted by TCP sequence number, once, at the first
//! sighting, so the copy and any retransmission add nothing. A veth pair in a namespace would
//! put the same tap at the same point (the device's transmit) for a server and clients on
//! loopback, so none is made.
//!
//! Each stream is keyed by its client's address (the server's segments go to it). Its line is
//! anchored at the segment carrying the server's answer line (`ok w…\n`), as the client
//! anchors its own at reading that answer; the bytes after the answer are the stream's.
//!
//! Needs `CAP_NET_RAW` (root); [`Wire::start`] says so plainly when it cannot open the ring.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use switchyard_core::measure::{DepartureLine, Deviation};
use switchyard_core::time::Nanos;
use switchyard_ingest::live::{Ring, RingConfig};
use switchyard_ingest::{IngestError, Packets};

/// How long a ring block with frames waits before the kernel hands it over; [`Wire::finish`]
/// waits a few of these so the last segments are read.
const BLOCK_TIMEOUT_MS: u32 = 5;

/// Blocks of 1 MiB in the ring: 256 MiB, about 1.5 s of 10,000 streams at 64 kb/s as `lo`
/// carries them (each segment seen twice, with the clients' acknowledgements). The default 64
/// dropped 114 frames in a 10,000-stream run at load 6, where the capture thread waited its
/// turn on a shared core.
const RING_BLOCKS: u32 = 256;

/// Why the wire's view could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The ring could not be opened or read (no such interface, no `CAP_NET_RAW`, ...).
    #[error("no capture on {interface} for the wire's view: {source}")]
    Capture {
        /// The interface.
        interface: String,
        /// What failed.
        #[source]
        source: IngestError,
    },
    /// The capture thread could not be started.
    #[error("cannot start the capture thread for the wire's view: {0}")]
    Spawn(#[source] std::io::Error),
    /// The capture thread panicked.
    #[error("the capture thread on {0} stopped unexpectedly")]
    Thread(String),
}

/// One stream as the wire carried it.
struct Flow {
    /// The sequence number after the highest byte counted.
    next: u32,
    /// Whether the server's answer line has been passed (its bytes are not the stream's).
    answered: bool,
    line: DepartureLine,
}

/// What the wire carried of each stream, once the capture has ended.
#[derive(Clone, Debug)]
pub struct WireView {
    /// Each asked-for client's line as the wire saw it (`None` where no stream bytes went by).
    pub lines: Vec<Option<Deviation>>,
    /// Frames the ring received.
    pub packets: u64,
    /// Frames the kernel dropped because the ring was full: bytes of streams the view missed
    /// (their lines then show lag the wire did not have).
    pub drops: u64,
}

/// A running capture of a server's segments.
pub struct Wire {
    interface: String,
    flows: Arc<Mutex<HashMap<SocketAddr, Flow>>>,
    stop: Arc<AtomicBool>,
    /// When the run ended ([`Wire::end_run`]; 0 until then), on the ring's clock: segments that
    /// leave later are not counted.
    end: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<(u64, u64), IngestError>>>,
}

/// Nanoseconds since the Unix epoch: the ring's clock.
fn realtime() -> Nanos {
    Nanos(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64))
}

impl Wire {
    /// Starts capturing on `interface` the TCP segments `server` sends, each stream promised
    /// `rate` bytes per second.
    pub fn start(interface: &str, server: SocketAddr, rate: f64) -> Result<Self, WireError> {
        let stop = Arc::new(AtomicBool::new(false));
        let config = RingConfig {
            block_timeout_ms: BLOCK_TIMEOUT_MS,
            blocks: RING_BLOCKS,
            promiscuous: false,
            ..Default::default()
        };
        let mut ring = Ring::open(interface, config, Arc::clone(&stop))
            .map_err(|source| WireError::Capture { interface: interface.into(), source })?;
        let flows: Arc<Mutex<HashMap<SocketAddr, Flow>>> = Arc::default();
        let seen = Arc::clone(&flows);
        let end = Arc::new(AtomicU64::new(0));
        let cut = Arc::clone(&end);
        let thread = std::thread::Builder::new()
            .name("wire".into())
            .spawn(move || {
                while let Some(p) = ring.next_packet()? {
                    let Some(tcp) = p.tcp else { continue };
                    if p.key.proto != 6 || p.key.src() != server || p.payload.is_empty() {
                        continue;
                    }
                    let ended = cut.load(Ordering::Relaxed);
                    if ended != 0 && p.time_ns > ended {
                        continue;
                    }
                    let mut flows = seen.lock().expect("wire lock");
                    let flow = flows.entry(p.key.dst()).or_insert_with(|| Flow {
                        next: tcp.seq,
                        answered: false,
                        line: DepartureLine::new(rate),
                    });
                    count(flow, Nanos(p.time_ns), tcp.seq, p.payload);
                }
                let s = ring.stats();
                Ok((s.packets, s.drops))
            })
            .map_err(WireError::Spawn)?;
        Ok(Self { interface: interface.into(), flows, stop, end, thread: Some(thread) })
    }

    /// The interface captured.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The run ends now: segments that leave from here on are not counted, and the lines are
    /// measured to this instant. Call it where the clients take their own view, before they
    /// close: otherwise what the server sends while thousands of connections close (it is
    /// closing them too, and late to the streams still open) is counted as the run's. At 10,000
    /// streams × 64 kb/s on one server core, streams went up to 103 ms owed and unsent while
    /// the server closed the others, and their last segments left up to 22 ms late: measured to
    /// the capture's end, the worst stream's rate from first segment to last read 0.18% low (p99
    /// 0.16%); measured to the run's end, 0.005%. The first call sets the end; later ones
    /// (and [`Wire::finish`]'s own) leave it.
    pub fn end_run(&self) {
        let _ = self.end.compare_exchange(0, realtime().0.max(1), Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Ends the capture (after the ring's last block is handed over) and returns the line of
    /// each of `clients`, in their order, measured to the run's end ([`Wire::end_run`], made
    /// now if it was not called).
    pub fn finish(mut self, clients: &[Option<SocketAddr>]) -> Result<WireView, WireError> {
        self.end_run();
        let end = Nanos(self.end.load(Ordering::Relaxed));
        std::thread::sleep(Duration::from_millis(u64::from(4 * BLOCK_TIMEOUT_MS)));
        self.stop.store(true, Ordering::Relaxed);
        let (packets, drops) = self
            .thread
            .take()
            .expect("finished once")
            .join()
            .map_err(|_| WireError::Thread(self.interface.clone()))?
            .map_err(|source| WireError::Capture { interface: self.interface.clone(), source })?;
        let flows = self.flows.lock().expect("wire lock");
        let lines = clients.iter().map(|c| c.and_then(|c| flows.get(&c)).and_then(|f| f.line.deviation(end))).collect();
        Ok(WireView { lines, packets, drops })
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Counts the bytes of a segment (sequence `seq`, `payload`) not counted before: the tail past
/// the highest byte seen, so a copy or a retransmission adds nothing. The first segment's
/// answer line anchors the line and is not the stream's.
fn count(flow: &mut Flow, t: Nanos, seq: u32, payload: &[u8]) {
    let end = seq.wrapping_add(payload.len() as u32);
    let new = end.wrapping_sub(flow.next) as i32;
    if new <= 0 {
        return;
    }
    let mut fresh = &payload[payload.len() - (new as usize).min(payload.len())..];
    flow.next = end;
    if !flow.answered {
        match fresh.iter().position(|b| *b == b'\n') {
            Some(i) => {
                flow.answered = true;
                flow.line.start(t);
                fresh = &fresh[i + 1..];
            }
            None => return,
        }
    }
    flow.line.arrive(t, fresh.len() as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A copy of a segment (lo's second sighting) or a retransmission adds nothing; an overlap
    /// adds only its new tail; the answer line anchors the line and is not counted.
    #[test]
    fn bytes_are_counted_once_by_sequence_number() {
        let mut f = Flow { next: 1000, answered: false, line: DepartureLine::new(8_000.0) };
        let mut seg = b"ok w0\n".to_vec();
        seg.extend([0u8; 800]);
        count(&mut f, Nanos(0), 1000, &seg);
        count(&mut f, Nanos(MS), 1000, &seg); // lo's copy
        count(&mut f, Nanos(100 * MS), 1806, &[0u8; 800]);
        count(&mut f, Nanos(150 * MS), 1806, &[0u8; 1600]); // a retransmission with 800 new
        let d = f.line.deviation(Nanos(200 * MS)).unwrap();
        assert_eq!(d.bytes, 2400, "{d:?}");
        assert_eq!(d.arrivals, 3, "{d:?}");
        assert_eq!(d.first_at, 0.0, "anchored at the answer: {d:?}");
        // Wrapping sequence numbers.
        let mut w = Flow { next: u32::MAX - 10, answered: true, line: DepartureLine::new(8_000.0) };
        w.line.start(Nanos(0));
        count(&mut w, Nanos(MS), u32::MAX - 10, &[0u8; 100]);
        count(&mut w, Nanos(2 * MS), 89, &[0u8; 100]);
        assert_eq!(w.line.deviation(Nanos(3 * MS)).unwrap().bytes, 200);
    }

    /// One client of a paced stream at 128 kb/s that does not read for `late`, then reads for
    /// `secs`: its local address, its line as it saw bytes arrive, and the longest time between
    /// two of its reads' returns (a read waits at most 20 ms, so anything longer is this thread
    /// not running: on a loaded machine, 213 ms was seen).
    fn client(server: SocketAddr, late: Duration, secs: f64) -> (SocketAddr, Deviation, Duration) {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(server).unwrap();
        s.write_all(b"stream 128000\n").unwrap();
        let mut answer = Vec::new();
        let mut b = [0u8; 1];
        while answer.last() != Some(&b'\n') {
            s.read_exact(&mut b).unwrap();
            answer.push(b[0]);
        }
        assert!(answer.starts_with(b"ok"), "{answer:?}");
        let mut line = DepartureLine::new(16_000.0);
        line.start(realtime());
        std::thread::sleep(late);
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let until = std::time::Instant::now() + Duration::from_secs_f64(secs);
        let mut buf = vec![0u8; 65_536];
        let mut last = std::time::Instant::now();
        let mut worst_gap = Duration::ZERO;
        while last < until {
            if let Ok(n) = s.read(&mut buf) {
                assert!(n > 0, "the server closed the stream");
                line.arrive(realtime(), n as u64);
            }
            let now = std::time::Instant::now();
            worst_gap = worst_gap.max(now - last);
            last = now;
        }
        (s.local_addr().unwrap(), line.deviation(realtime()).unwrap(), worst_gap)
    }

    /// A server of one worker pacing every 50 ms on loopback, and the wire watching its
    /// 128 kb/s streams; `None`, having said why, where no capture can be opened here.
    fn watched_server() -> Option<(crate::deliver::Server, Wire)> {
        use switchyard_core::order::PaceConfig;

        use crate::deliver::{Pacing, Server, ServerConfig};
        let server = Server::start(ServerConfig {
            workers: 1,
            pacing: Pacing::Fine(PaceConfig { grain: Nanos(50 * MS), ..Default::default() }),
            ..Default::default()
        })
        .unwrap();
        match Wire::start("lo", server.local_addr(), 16_000.0) {
            Ok(w) => Some((server, w)),
            Err(e) => {
                eprintln!("skipped, no capture here: {e}");
                None
            }
        }
    }

    /// The wire's view against the clients': a paced stream read at once looks the same from
    /// both (within a send of 800 B); a client that reads nothing for 600 ms shows that as lag
    /// (its own), which the wire, where the server kept pace, does not have.
    #[test]
    fn the_wire_sees_the_pacing_a_late_reader_does_not() {
        let Some((server, wire)) = watched_server() else { return };
        let addr = server.local_addr();
        let late = std::thread::spawn(move || client(addr, Duration::from_millis(600), 1.4));
        let (prompt_addr, prompt, prompt_gap) = client(addr, Duration::ZERO, 2.0);
        let (late_addr, late, _) = late.join().unwrap();
        let view = wire.finish(&[Some(prompt_addr), Some(late_addr)]).unwrap();
        server.stop();
        // The ring takes every frame on lo, other programs' too, so a drop need not be ours; a
        // dropped segment of ours would show below as lag on the wire.
        assert!(view.packets > 0, "{view:?}");
        let (w_prompt, w_late) =
            (view.lines[0].expect("the prompt stream on the wire"), view.lines[1].expect("the late one"));
        // A prompt client sees what the wire carried within a send of 800 B, plus what the line
        // moved while the client's own thread did not run: a reader descheduled for 213 ms (load
        // 13) lagged 1,612 B more than the wire, which is the client's lateness, not the wire's.
        let within = 800.0 + 16_000.0 * prompt_gap.as_secs_f64();
        let why =
            format!("wire {w_prompt:?}\nclient {prompt:?}\nthe client's longest gap between reads {prompt_gap:?}");
        assert!((w_prompt.lag - prompt.lag).abs() <= within, "{why}");
        assert!((w_prompt.lead - prompt.lead).abs() <= within, "{why}");
        assert!(w_prompt.fit_error().unwrap() < 0.03, "{w_prompt:?}");
        // 600 ms unread is 9,600 B of the line: the client lagged by nearly that, the wire not.
        assert!(late.lag > 8_000.0, "client {late:?}");
        assert!(w_late.lag < 4_000.0 && late.lag - w_late.lag > 6_000.0, "wire {w_late:?}\nclient {late:?}");
    }
    /// The wire's view ends where the run does ([`Wire::end_run`]): what the server sends after
    /// it, while the clients close, is not the run's. A client reads for 1.6 s and the run ends
    /// at 1 s: the wire counts about a second of the stream, not the 0.6 s that follow.
    #[test]
    fn segments_after_the_runs_end_are_not_counted() {
        let Some((server, wire)) = watched_server() else { return };
        let addr = server.local_addr();
        let reader = std::thread::spawn(move || client(addr, Duration::ZERO, 1.6));
        std::thread::sleep(Duration::from_millis(1_000));
        wire.end_run();
        let (addr, whole, _) = reader.join().unwrap();
        let view = wire.finish(&[Some(addr)]).unwrap();
        server.stop();
        let cut = view.lines[0].expect("the stream on the wire");
        // 0.6 s of the stream is 9,600 B; the client's start came a little after the wire's,
        // and its line ran 0.6 s longer.
        assert!(whole.bytes as f64 - cut.bytes as f64 > 6_000.0, "wire {cut:?}\nclient {whole:?}");
        assert!(cut.secs < 1.3, "the wire's line ran to the capture's end: {cut:?}");
    }
}
