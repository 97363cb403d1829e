//! Fine-grained per-stream pacing: each stream is held to its promised rate by credit, earned
//! continuously and spent in chunks (earliest-departure-time pacing, as in Linux `fq` and
//! Carousel; the modern form of Yates's hard throughput guarantee, notes 000 §3.4, §7.1).
//!
//! A stream's state is one virtual time `vt`: it has been sent everything it was owed up to
//! `vt`. At `now` it is owed `(now − vt) · rate` bytes. It becomes **due** once it is owed one
//! grain's worth (`vt + grain`, or sooner if `max_chunk` is smaller than a grain's worth), so each send carries about `grain · rate` bytes; the grain trades
//! system calls against smoothness. Sending `b` bytes moves `vt` on by `b / rate`, so the long-run
//! rate is exact however late the driver wakes: lateness makes a chunk larger, not the stream
//! slower.
//!
//! Two bounds keep a stalled stream from bursting without limit:
//! - **`max_lag`** (or **`max_lag_bytes`** of the stream's rate, if longer: 8,192 B, two
//!   packets, so a slow stream is not forgiven a sliver of a packet whenever its worker is
//!   descheduled): lateness past a stream's due time is made up to this much and forgiven
//!   beyond it (the promise for that time is broken and counted in [`Pacer::forgiven`]), so
//!   after a long stall a stream sends at most a grain and `max_lag` of data at once. (Our first
//!   version counted `max_lag` from `now` rather than from the due time, so with a grain longer
//!   than `max_lag` any lateness at all cut the stream's rate: 10,000 streams at a 100 ms grain
//!   ran at exactly half their rate.)
//! - **`max_chunk`**: no single send exceeds it; a stream with more owed stays due.
//!
//! What the two bounds cost each stream is counted ([`Pacer::debts`], totals in
//! [`Pacer::made_up`] and [`Pacer::forgiven`]): bytes **made up** are lateness granted late
//! (owed past the stream's due time, up to the bound, each instant of lateness counted once
//! however many capped sends repay it); bytes **forgiven** are the lateness past the bound,
//! never sent. A stream whose rate over a run falls short by more than its forgiven bytes lost
//! them somewhere else (the observer, or the run's ends), not in the pacer.
//!
//! Due streams sit in a binary heap by due time (O(log n) per send). A stream whose socket is
//! full is taken out of the heap until the driver says it is writable again.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::time::Nanos;

/// Pacing settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaceConfig {
    /// A stream is due once it is owed this much time's worth of bytes (1 ms).
    pub grain: Nanos,
    /// Lateness past a stream's due time is made up to this much and forgiven beyond it (50 ms:
    /// half a 100 ms measurement window, so a stall shorter than that is made up within the
    /// window).
    pub max_lag: Nanos,
    /// Largest single send, in bytes (256 KiB).
    pub max_chunk: u64,
    /// Lateness is made up to this many bytes of a stream's rate where that is longer than
    /// `max_lag` (8,192 B: two 4 KB packets, the σ issue 42 allows every stream). A time bound
    /// alone is a sliver of a packet for a slow stream — 50 ms at 64 kb/s is 400 B — so a
    /// worker descheduled for 222 ms on a shared machine forgave 1.7% of a 10 s run; in bytes,
    /// the burst after a stall stays under two packets at any rate.
    pub max_lag_bytes: u64,
}

impl Default for PaceConfig {
    fn default() -> Self {
        Self {
            grain: Nanos::from_millis(1),
            max_lag: Nanos::from_millis(50),
            max_chunk: 256 * 1024,
            max_lag_bytes: 8192,
        }
    }
}

/// A stream that may send now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Due {
    /// The driver's slot for the stream.
    pub slot: u32,
    /// Bytes it is owed (at most `max_chunk`, at least 1).
    pub bytes: u64,
    /// How long after its due time the driver got to it.
    pub late: Nanos,
}

/// What lateness has cost one stream so far, bytes (see the module's doc).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Debts {
    /// Lateness made up: owed past the stream's due time and granted late, within the bound.
    pub made_up: f64,
    /// Lateness forgiven: past the bound, never granted.
    pub forgiven: f64,
}

#[derive(Clone, Copy, Debug)]
struct Stream {
    /// Bytes per nanosecond.
    rate: f64,
    /// The smallest send worth making, bytes.
    min_chunk: f64,
    /// Virtual time in nanoseconds: everything owed before it has been sent.
    vt: f64,
    armed: bool,
    /// When the driver last said the socket could take more (ns): lateness is counted from
    /// then at the earliest, so a client that stopped reading does not make the worker look late.
    since: f64,
    /// Lateness up to this instant (ns) has been counted in `debts`.
    counted: f64,
    debts: Debts,
}

/// Paces the streams of one worker.
pub struct Pacer {
    cfg: PaceConfig,
    streams: Vec<Option<Stream>>,
    /// Per slot, bumped whenever the slot's heap entry goes stale; kept across a slot's reuse so
    /// an old stream's entry never matches a new one.
    generations: Vec<u32>,
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    promised: f64,
    len: usize,
    forgiven: f64,
    made_up: f64,
    max_late: Nanos,
}

impl Pacer {
    /// An empty pacer.
    pub fn new(cfg: PaceConfig) -> Self {
        Self::with_capacity(cfg, 0)
    }

    /// An empty pacer with room for slots `0..streams` reserved up front, so that admitting
    /// them never copies its tables while other streams are due. Growing by doubling copies
    /// the whole table into fresh memory at once: on a VM whose fresh pages are costly to
    /// touch, the copy as 8,192 streams became 8,193 held a worker 4–8 ms, and the streams it
    /// was admitting then left their first chunk up to 25 ms after their answer. Reserved
    /// room is address space only until a slot is used (the kernel backs it a page at a
    /// time), so reserving for more streams than come costs no memory.
    pub fn with_capacity(cfg: PaceConfig, streams: usize) -> Self {
        let grain = Nanos(cfg.grain.0.max(1));
        Self {
            cfg: PaceConfig { grain, max_chunk: cfg.max_chunk.max(1), ..cfg },
            streams: Vec::with_capacity(streams),
            generations: Vec::with_capacity(streams),
            // An entry per armed stream, and the stale ones not yet popped.
            heap: BinaryHeap::with_capacity(2 * streams),
            promised: 0.0,
            len: 0,
            forgiven: 0.0,
            made_up: 0.0,
            max_late: Nanos::ZERO,
        }
    }

    /// The settings.
    pub fn config(&self) -> &PaceConfig {
        &self.cfg
    }

    /// Starts pacing `slot` at `rate` bytes per second, due at once with one grain of credit.
    /// A slot already in use is replaced. A rate that is not finite and positive is refused
    /// (returns false).
    pub fn add(&mut self, slot: u32, rate: f64, now: Nanos) -> bool {
        self.add_with_min(slot, rate, 1, now)
    }

    /// As [`Pacer::add`], but the stream is never due for less than `min_chunk` bytes (capped at
    /// `max_chunk`): a datagram stream whose packets have a size (Yates's 4 KB) waits for a
    /// whole packet's credit rather than sending a sliver each grain.
    pub fn add_with_min(&mut self, slot: u32, rate: f64, min_chunk: u64, now: Nanos) -> bool {
        if !(rate.is_finite() && rate > 0.0) {
            return false;
        }
        let min_chunk = min_chunk.clamp(1, self.cfg.max_chunk) as f64;
        self.remove(slot);
        let i = slot as usize;
        if self.streams.len() <= i {
            self.streams.resize(i + 1, None);
            self.generations.resize(i + 1, 0);
        }
        let rate = rate / 1e9;
        let vt = now.0 as f64 - (self.cfg.grain.0 as f64).max(min_chunk / rate);
        let now = now.0 as f64;
        let debts = Debts::default();
        self.streams[i] = Some(Stream { rate, vt, min_chunk, armed: false, since: now, counted: now, debts });
        self.promised += rate * 1e9;
        self.len += 1;
        self.arm(slot);
        true
    }

    /// Stops pacing `slot`. Unknown slots are ignored.
    pub fn remove(&mut self, slot: u32) {
        if let Some(s) = self.streams.get_mut(slot as usize).and_then(Option::take) {
            self.promised -= s.rate * 1e9;
            self.len -= 1;
            if self.len == 0 {
                self.promised = 0.0; // no float residue once empty
            }
        }
    }

    /// Streams paced.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no stream is paced.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sum of the promised rates, bytes per second.
    pub fn promised(&self) -> f64 {
        self.promised
    }

    /// Bytes of promise forgiven because streams fell more than `max_lag` behind, every
    /// stream's since the pacer began (removed ones too).
    pub fn forgiven(&self) -> f64 {
        self.forgiven
    }

    /// Bytes of lateness made up (granted late, within the bound), every stream's since the
    /// pacer began (removed ones too).
    pub fn made_up(&self) -> f64 {
        self.made_up
    }

    /// What lateness has cost `slot`'s stream so far (`None` if no stream is there).
    pub fn debts(&self, slot: u32) -> Option<Debts> {
        self.streams.get(slot as usize)?.as_ref().map(|s| s.debts)
    }

    /// The worst lateness seen by [`Pacer::poll`] since the last call, then reset: the signal a
    /// worker reports to [`crate::order::Admission`].
    pub fn take_max_late(&mut self) -> Nanos {
        std::mem::take(&mut self.max_late)
    }

    /// When the next stream falls due (in the past if one is overdue), or `None` if none is
    /// waiting to send.
    pub fn next_due(&mut self) -> Option<Nanos> {
        self.drop_stale();
        self.heap.peek().map(|Reverse((t, _, _))| Nanos(*t))
    }

    /// The next stream due at or before `now`, with what it is owed. It leaves the heap until the
    /// driver reports with [`Pacer::sent`] or [`Pacer::blocked`].
    pub fn poll(&mut self, now: Nanos) -> Option<Due> {
        self.drop_stale();
        let &Reverse((due, slot, _)) = self.heap.peek()?;
        if due > now.0 {
            return None;
        }
        self.heap.pop();
        let (cfg, max_chunk) = (self.cfg, self.cfg.max_chunk);
        let s = self.streams[slot as usize].as_mut().expect("armed streams exist");
        s.armed = false;
        let late = Nanos(now.0 - (due as f64).max(s.since).min(now.0 as f64) as u64);
        self.max_late = self.max_late.max(late);
        // Lateness past `max_lag` (or `max_lag_bytes` of the stream, if longer) beyond the due
        // time is forgiven; up to it, it is made up.
        let lag = (cfg.max_lag.0 as f64).max(cfg.max_lag_bytes as f64 / s.rate);
        let wait = Self::wait(&cfg, s);
        let floor = now.0 as f64 - wait - lag;
        if s.vt < floor {
            let forgiven = (floor - s.vt) * s.rate;
            self.forgiven += forgiven;
            s.debts.forgiven += forgiven;
            s.vt = floor;
        }
        // Owed past its due time and not counted before (a capped send leaves the stream due
        // at the same instant; its rest is the same lateness, counted once).
        let from = (s.vt + wait).max(s.counted);
        if (now.0 as f64) > from {
            let made_up = (now.0 as f64 - from) * s.rate;
            self.made_up += made_up;
            s.debts.made_up += made_up;
            s.counted = now.0 as f64;
        }
        let owed = ((now.0 as f64 - s.vt) * s.rate).floor() as u64;
        // Whole multiples of the stream's smallest send (a datagram stream sends whole packets;
        // the rest stays owed), at least one of them, and at most `max_chunk`.
        let unit = s.min_chunk as u64;
        let bytes = (owed.min(max_chunk) / unit * unit).max(unit.min(max_chunk)).max(1);
        Some(Due { slot, bytes, late })
    }

    /// The driver sent `bytes` of `slot` and can send more: the stream is re-armed at its next due
    /// time.
    pub fn sent(&mut self, slot: u32, bytes: u64) {
        if self.spend(slot, bytes) {
            self.arm(slot);
        }
    }

    /// The driver sent `bytes` of `slot` and then found its socket full: the stream waits for
    /// [`Pacer::writable`].
    pub fn blocked(&mut self, slot: u32, bytes: u64) {
        self.spend(slot, bytes);
    }

    /// `slot`'s socket can take more at `now`: it goes back among the due streams (no-op if it
    /// is there).
    pub fn writable(&mut self, slot: u32, now: Nanos) {
        if let Some(Some(s)) = self.streams.get_mut(slot as usize)
            && !s.armed
        {
            s.since = now.0 as f64;
            self.arm(slot);
        }
    }

    fn spend(&mut self, slot: u32, bytes: u64) -> bool {
        let Some(s) = self.streams.get_mut(slot as usize).and_then(Option::as_mut) else {
            return false;
        };
        s.vt += bytes as f64 / s.rate;
        true
    }

    /// How long after `vt` a stream falls due: when a grain's worth is owed (but at least the
    /// stream's smallest send), or a whole chunk if that comes first — a fast stream with a small
    /// chunk cap must not wait a grain between capped sends.
    fn wait(cfg: &PaceConfig, s: &Stream) -> f64 {
        (cfg.grain.0 as f64).max(s.min_chunk / s.rate).min(cfg.max_chunk as f64 / s.rate)
    }

    fn arm(&mut self, slot: u32) {
        let cfg = self.cfg;
        let i = slot as usize;
        let s = self.streams[i].as_mut().expect("arming a live stream");
        self.generations[i] = self.generations[i].wrapping_add(1);
        s.armed = true;
        let due = (s.vt + Self::wait(&cfg, s)).max(0.0).ceil() as u64;
        self.heap.push(Reverse((due, slot, self.generations[i])));
    }

    fn drop_stale(&mut self) {
        while let Some(&Reverse((_, slot, generation))) = self.heap.peek() {
            let i = slot as usize;
            let live =
                self.streams.get(i).is_some_and(|s| s.is_some_and(|s| s.armed)) && self.generations[i] == generation;
            if live {
                return;
            }
            self.heap.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Runs a pacer with a driver that wakes every `tick` (plus `jitter` on odd ticks) and sends
    /// all that is owed; returns bytes sent per stream.
    fn drive(p: &mut Pacer, streams: u32, until: u64, tick: u64, jitter: u64) -> Vec<u64> {
        let mut got = vec![0u64; streams as usize];
        let mut t = 0;
        let mut n = 0;
        while t <= until {
            while let Some(d) = p.poll(Nanos(t)) {
                got[d.slot as usize] += d.bytes;
                p.sent(d.slot, d.bytes);
            }
            n += 1;
            t += tick + if n % 2 == 1 { jitter } else { 0 };
        }
        got
    }

    #[test]
    fn long_run_rate_is_exact_despite_late_wakeups() {
        let mut p = Pacer::new(PaceConfig::default());
        // 500 kB/s and 1.25 MB/s (4 and 10 Mb/s), a driver waking every 1-4 ms.
        assert!(p.add(0, 500_000.0, Nanos(0)));
        assert!(p.add(1, 1_250_000.0, Nanos(0)));
        let got = drive(&mut p, 2, 1_000 * MS, MS, 3 * MS);
        assert!((got[0] as f64 - 500_000.0).abs() <= 500.0 + 1.0, "{got:?}");
        assert!((got[1] as f64 - 1_250_000.0).abs() <= 1_250.0 + 1.0, "{got:?}");
        assert_eq!(p.forgiven(), 0.0);
        assert!(p.take_max_late() <= Nanos(3 * MS));
        assert_eq!(p.take_max_late(), Nanos::ZERO);
    }

    #[test]
    fn a_long_stall_forgives_past_max_lag_and_bounds_the_burst() {
        let mut p = Pacer::new(PaceConfig::default());
        p.add(0, 1_000_000.0, Nanos(0));
        let d = p.poll(Nanos(0)).unwrap();
        p.sent(0, d.bytes);
        // Nothing for a second: a grain and 50 ms worth come out at once, the rest is forgiven.
        let d = p.poll(Nanos(1_000 * MS)).unwrap();
        assert_eq!(d.bytes, 51_000);
        assert!((p.forgiven() - 949_000.0).abs() < 1_001.0, "{}", p.forgiven());
        assert!(d.late >= Nanos(990 * MS));
    }

    /// A slow stream's owed bytes are made up to two 4 KB packets however long that is at its
    /// rate: at 64 kb/s and a 100 ms grain, a worker descheduled for 222 ms (seen at load 11 on
    /// a shared machine) used to forgive 172 ms of the stream (1,376 B, 1.7% of a 10 s run);
    /// now all is made up, and only what lies past 8,192 B behind is forgiven.
    #[test]
    fn a_slow_stream_makes_up_a_stall_to_two_packets_of_bytes() {
        let mut p = Pacer::new(PaceConfig { grain: Nanos(100 * MS), ..Default::default() });
        p.add(0, 8_000.0, Nanos(0));
        let d = p.poll(Nanos(0)).unwrap();
        p.sent(0, d.bytes);
        // Due at 100 ms; the worker comes at 322 ms.
        let d = p.poll(Nanos(322 * MS)).unwrap();
        assert_eq!(p.forgiven(), 0.0, "{d:?}");
        assert_eq!(d.bytes, 2_576, "the 322 ms owed since the first grant");
        p.sent(0, d.bytes);
        // A stall of 3 s: a grain and 8,192 B are made up, the rest of the 24,000 B forgiven.
        let d = p.poll(Nanos(3_322 * MS)).unwrap();
        assert_eq!(d.bytes, 8_992, "{d:?}");
        assert!((p.forgiven() - (24_000.0 - 8_992.0)).abs() < 1.0, "{}", p.forgiven());
        // What it cost the stream: 222 ms made up after the first stall (1,776 B), 8,192 B
        // after the second, and the rest of the second forgiven.
        let debts = p.debts(0).unwrap();
        assert!((debts.made_up - (1_776.0 + 8_192.0)).abs() < 1.0, "{debts:?}");
        assert!((debts.forgiven - p.forgiven()).abs() < 1e-6, "{debts:?}");
        assert_eq!(p.made_up(), debts.made_up);
    }

    /// Lateness repaid in several capped sends is made up once, a driver that comes on time
    /// makes up nothing, and a removed stream's debts stay in the totals.
    #[test]
    fn lateness_is_counted_once_however_many_sends_repay_it() {
        let mut p = Pacer::new(PaceConfig { grain: Nanos(10 * MS), max_chunk: 4_000, ..Default::default() });
        // 1 MB/s: a grain is 10,000 B, owed in chunks of 4,000.
        p.add(0, 1_000_000.0, Nanos(0));
        p.add(1, 1_000_000.0, Nanos(0));
        let on_time = drive(&mut p, 2, 100 * MS, 4 * MS, 0);
        assert!(on_time.iter().all(|b| *b >= 100_000), "{on_time:?}");
        // Each poll comes at most 4 ms after the due time: lateness, not a stall, and small.
        let before = p.debts(0).unwrap();
        assert_eq!(before.forgiven, 0.0, "{before:?}");
        // A stall of 30 ms past the due time: 30,000 B owed beyond it, repaid 4,000 at a time.
        let due = p.next_due().unwrap();
        let t = Nanos(due.0 + 30 * MS);
        let mut sent = 0;
        while let Some(d) = p.poll(t) {
            if d.slot == 0 {
                sent += d.bytes;
            }
            p.sent(d.slot, d.bytes);
        }
        assert!(sent > 30_000, "{sent}");
        let after = p.debts(0).unwrap();
        assert!((after.made_up - before.made_up - 30_000.0).abs() < 1.0, "{before:?} {after:?}");
        assert_eq!(after.forgiven, 0.0, "30 ms is within max_lag");
        let total = p.made_up();
        p.remove(0);
        assert_eq!(p.debts(0), None);
        assert_eq!(p.made_up(), total, "the totals keep a removed stream's debts");
    }

    #[test]
    fn blocked_streams_wait_for_writable_and_removed_ones_vanish() {
        let mut p = Pacer::new(PaceConfig::default());
        p.add(0, 1_000_000.0, Nanos(0));
        p.add(1, 1_000_000.0, Nanos(0));
        let a = p.poll(Nanos(0)).unwrap();
        p.blocked(a.slot, 0);
        let b = p.poll(Nanos(0)).unwrap();
        assert_ne!(a.slot, b.slot);
        p.remove(b.slot);
        assert_eq!(p.next_due(), None, "the blocked stream is not due and the removed one is gone");
        p.writable(a.slot, Nanos(MS));
        p.writable(a.slot, Nanos(MS));
        assert_eq!(p.poll(Nanos(MS)).map(|d| d.slot), Some(a.slot));
        assert_eq!(p.poll(Nanos(MS)), None, "writable twice arms once");
        assert_eq!(p.len(), 1);
        assert_eq!(p.promised(), 1_000_000.0);
    }

    #[test]
    fn chunks_are_a_grain_and_capped() {
        let mut p = Pacer::new(PaceConfig { grain: Nanos(10 * MS), max_chunk: 4096, ..Default::default() });
        p.add(3, 1_000_000.0, Nanos(0));
        assert_eq!(p.poll(Nanos(0)).unwrap().bytes, 4096, "10 kB owed, capped at 4 KiB");
        p.sent(3, 4096);
        assert_eq!(p.next_due(), Some(Nanos(0)), "still owed, so still due");
        assert!(!p.add(4, 0.0, Nanos(0)));
        assert!(!p.add(4, f64::NAN, Nanos(0)));
    }

    #[test]
    fn a_stalled_reader_is_not_lateness_and_a_reused_slot_is_a_new_stream() {
        let mut p = Pacer::new(PaceConfig::default());
        p.add(0, 1_000_000.0, Nanos(0));
        let d = p.poll(Nanos(0)).unwrap();
        p.blocked(0, d.bytes);
        // The client read nothing for 400 ms; when its socket drains, the stream is on time.
        p.writable(0, Nanos(400 * MS));
        assert_eq!(p.poll(Nanos(400 * MS)).unwrap().late, Nanos::ZERO);
        p.take_max_late();
        // Slot 0 is removed while armed and reused: the old heap entry must not serve the new one.
        p.sent(0, 1);
        p.remove(0);
        p.add(0, 1.0, Nanos(400 * MS));
        let first = p.poll(Nanos(400 * MS)).unwrap();
        p.sent(0, first.bytes);
        assert_eq!(p.poll(Nanos(401 * MS)), None, "1 B/s is not due again within a millisecond");
    }

    #[test]
    fn datagram_streams_wait_for_a_whole_packet() {
        let mut p = Pacer::new(PaceConfig::default());
        // 500 kB/s owes 500 B a millisecond; with 4 KB packets it is due every 8.192 ms.
        p.add_with_min(0, 500_000.0, 4096, Nanos(0));
        assert_eq!(p.poll(Nanos(0)).unwrap().bytes, 4096);
        p.sent(0, 4096);
        assert_eq!(p.next_due(), Some(Nanos(8_192_000)));
        let got = drive(&mut p, 1, 1_000 * MS, MS, 0);
        assert!((got[0] as f64 - 500_000.0).abs() <= 4096.0, "{got:?}");
        assert_eq!(got[0] % 4096, 0, "whole packets only");
    }

    /// A grain longer than `max_lag`, and a driver always a little late: the rate must still
    /// hold (the first version halved it).
    #[test]
    fn a_coarse_grain_with_late_wakeups_keeps_the_rate() {
        let mut p = Pacer::new(PaceConfig { grain: Nanos(100 * MS), ..Default::default() });
        p.add(0, 8_000.0, Nanos(0));
        let got = drive(&mut p, 1, 10_000 * MS, 7 * MS, 5 * MS);
        assert!((got[0] as f64 - 80_800.0).abs() <= 8_000.0 * 0.112 + 1.0, "{got:?}");
        assert_eq!(p.forgiven(), 0.0);
    }

    /// Sized for its streams, a pacer never grows a table while they come, go and are served:
    /// 2,000 streams at 64 kb/s over 10 s of 1 ms turns, a tenth of them closed and replaced
    /// every second, a few blocked and writable again. (Grown by doubling instead, each table
    /// copies itself whole at 1,024 streams and again at 2,048.)
    #[test]
    fn a_pacer_sized_for_its_streams_never_grows_a_table() {
        let n = 2_000u32;
        let mut p = Pacer::with_capacity(PaceConfig { grain: Nanos(100 * MS), ..Default::default() }, n as usize);
        let sizes = |p: &Pacer| (p.streams.capacity(), p.generations.capacity(), p.heap.capacity());
        let reserved = sizes(&p);
        assert!(reserved.0 >= n as usize && reserved.2 >= 2 * n as usize, "{reserved:?}");
        for i in 0..n {
            p.add_with_min(i, 8_000.0, 2_048, Nanos(u64::from(i) * 500_000));
        }
        let mut t = 0;
        let mut full = Vec::new();
        while t <= 10_000 * MS {
            if t % (300 * MS) == 20 * MS {
                for slot in full.drain(..) {
                    p.writable(slot, Nanos(t));
                }
            }
            if t.is_multiple_of(1_000 * MS) {
                for i in (0..n).filter(|i| (i + (t / MS) as u32).is_multiple_of(10)) {
                    p.remove(i);
                    p.add_with_min(i, 8_000.0, 2_048, Nanos(t));
                }
            }
            while let Some(d) = p.poll(Nanos(t)) {
                if d.slot.is_multiple_of(97) && t.is_multiple_of(300 * MS) {
                    p.blocked(d.slot, 0);
                    full.push(d.slot);
                } else {
                    p.sent(d.slot, d.bytes);
                }
            }
            assert_eq!(sizes(&p), reserved, "a table grew at {} ms ({} in the heap)", t / MS, p.heap.len());
            t += MS;
        }
        assert_eq!(p.len(), n as usize);
    }

    proptest::proptest! {
        /// A stream's grants never lead its departure line, drawn from the instant it was
        /// added, by more than its first grant: a grain's worth, or its smallest send if that
        /// is larger — at 64 kb/s and a 100 ms grain 800 B, under a 4 KB packet; for a
        /// datagram stream one packet. However late the driver and whenever the stream joins.
        #[test]
        fn a_new_stream_never_leads_its_line_by_more_than_its_first_grant(
            rate in 1_000u32..2_000_000, grain_ms in 1u64..200, datagram in proptest::bool::ANY,
            joins in 0u64..3_000, tick in 100_000u64..20_000_000, jitter in 0u64..20_000_000,
        ) {
            let mut p = Pacer::new(PaceConfig { grain: Nanos(grain_ms * MS), ..Default::default() });
            // A stream already there, so the driver's wakes are not the new one's.
            p.add(1, 100_000.0, Nanos(0));
            let (rate, packet) = (f64::from(rate), 4096u64);
            let min = if datagram { packet } else { 1 };
            // The credit it starts with (sent in chunks of at most `max_chunk`).
            let first = (rate * grain_ms as f64 / 1e3).max(min as f64);
            let (mut t, mut n, mut added, mut got) = (0u64, 0u64, None, 0u64);
            while t <= joins * MS + 3_000 * MS {
                if added.is_none() && t >= joins * MS {
                    p.add_with_min(0, rate, min, Nanos(t));
                    added = Some(t);
                }
                while let Some(d) = p.poll(Nanos(t)) {
                    p.sent(d.slot, d.bytes);
                    if d.slot == 0 {
                        got += d.bytes;
                        let line = rate * (t - added.unwrap_or(t)) as f64 / 1e9;
                        proptest::prop_assert!(got as f64 - line <= first + 1.0,
                            "{got} B granted by {} ms after admission, line {line}, first grant {first}", (t - added.unwrap()) / MS);
                    }
                }
                n += 1;
                t += tick + if n % 2 == 1 { jitter } else { 0 };
            }
        }

        /// Whatever the rates and however irregular the driver, no stream gets more than it was
        /// promised plus one grain and one chunk, and none falls short by more than a grain
        /// plus the driver's largest gap.
        #[test]
        fn every_stream_gets_its_rate(rates in proptest::collection::vec(1_000u32..5_000_000, 1..20),
                                      tick in 100_000u64..5_000_000, jitter in 0u64..5_000_000) {
            let mut p = Pacer::new(PaceConfig::default());
            for (i, r) in rates.iter().enumerate() {
                p.add(i as u32, f64::from(*r), Nanos(0));
            }
            let until = 2_000 * MS;
            let got = drive(&mut p, rates.len() as u32, until, tick, jitter);
            for (g, r) in got.iter().zip(&rates) {
                let promised = f64::from(*r) * 2.0 + f64::from(*r) / 1_000.0;
                let slack = f64::from(*r) * (tick + jitter) as f64 / 1e9 + f64::from(*r) / 1_000.0 + 1.0;
                proptest::prop_assert!((*g as f64) <= promised + 1.0, "{g} > {promised}");
                proptest::prop_assert!((*g as f64) >= promised - slack - f64::from(*r) / 1_000.0, "{g} < {promised} - {slack}");
            }
        }
    }
}
