//! How far a paced stream strays from its ideal departure line: the measure of a throughput
//! guarantee at rates where a fixed window holds only a few packets.
//!
//! Yates 2006 ch. 4 promises each admitted stream its rate (notes 000 §3). A percentage of a
//! fixed window is the wrong yardstick at low rates: at 64 kb/s a 100 ms window holds 800 bytes,
//! less than a packet, so one packet crossing a window's edge is an error above 100% however
//! well the stream is paced. What a guarantee means is a bound on the stream's cumulative bytes
//! `B(t)` against the line `rate × (t − start)` (the ρ of a (σ, ρ) envelope, Cruz 1991): the
//! largest **lead** `max B(t) − rate·(t − start)` and the largest **lag**
//! `max rate·(t − start) − B(t)`, in bytes and in packets, and the longest time the stream
//! received nothing while it was behind the line (owed data).
//!
//! The choice of `start`: the instant the stream was admitted, when the observer knows it
//! ([`DepartureLine::start`]: a client reading the server's answer), else the instant its first
//! bytes arrived; bytes are counted as they arrive. A perfectly paced stream whose sender grants
//! a chunk of P bytes at admission then leads by exactly one chunk (each chunk is there at once,
//! the line takes P/rate to reach it) and never lags. Anchoring at admission matters when the
//! observer is late to its first read: anchored at the first arrival, a backlog read late
//! counted as lead (10,000 clients opened one after another and read none until all were open:
//! 9 KB of "lead" at 64 kb/s, 1.1 s of opening); anchored at admission it is lag, as any other
//! late read is, and the sender is not charged for the observer's delay. The alternative
//! anchors (the line through the first chunk's end, or the offset that minimises lead + lag)
//! move bytes between lead and lag without changing their sum; [`Deviation::span`] is that sum,
//! the σ the stream needs.
//!
//! The rate over the run is measured from arrival to arrival ([`Deviation::arrival_rate`]):
//! what came after the first arrival over the time from it to the last. Counts sampled at fixed
//! instants (a run's windows) are off by up to a chunk at each end — at 64 kb/s with a 100 ms
//! grain a chunk is 800 B, 1% of a 10 s run, whatever the pacing — while from arrival to arrival
//! a paced stream's rate is exact and only the observer's read jitter (over the run's length)
//! remains.
//!
//! That jitter is all at two instants, though: one read late by `d` at the first or last
//! arrival moves the endpoint rate by `d / T` of a run of `T` seconds — 78 ms late in a 10 s run
//! is 0.78%, whatever the pacing, and at 10,000 streams the client that opens them all is late
//! to some first read. So the stream's rate is also measured as the least-squares slope of its
//! cumulative bytes against time over every arrival ([`Deviation::fit_rate`]): exact for a
//! paced stream too, and one point off by `δ` bytes moves it by at most about `6δ / (n·T)` for
//! `n` evenly spread arrivals (the end point's leverage, `(T/2) / Σ(t − t̄)²` with
//! `Σ(t − t̄)² ≈ nT²/12`), under a tenth of the endpoint's error at 100 arrivals. A stream
//! whose rate drifted shows in both. Both are reported: the endpoint rate says what the worst
//! end of a run looked like, the slope what rate the stream held.
//!
//! Pure: times are arguments ([`Nanos`]); the driver calls [`DepartureLine::arrive`] as bytes
//! come and [`DepartureLine::deviation`] at the end.

use crate::time::Nanos;

/// One stream's departure line and how far it strayed from it so far.
#[derive(Clone, Debug)]
pub struct DepartureLine {
    /// Promised bytes per second.
    rate: f64,
    start: Option<Nanos>,
    /// The first arrival and its bytes (for the rate from arrival to arrival).
    first: Option<(Nanos, u64)>,
    last: Nanos,
    bytes: u64,
    /// The running least-squares fit of cumulative bytes against time.
    fit: Fit,
    lead: f64,
    lag: f64,
    owed_gap: u64,
}

/// What a [`DepartureLine`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Deviation {
    /// The line's rate, bytes per second.
    pub promised: f64,
    /// Bytes counted.
    pub bytes: u64,
    /// Seconds from the start (admission, or the first arrival) to the end.
    pub secs: f64,
    /// The rate from the first arrival to the last, bytes per second: the bytes that came after
    /// the first arrival over the time between them (`None` with fewer than two arrivals).
    pub arrival_rate: Option<f64>,
    /// The least-squares slope of the stream's cumulative bytes against time over every
    /// arrival, bytes per second (`None` with fewer than two arrivals at distinct instants):
    /// the rate a stream held, barely moved by one late first or last read.
    pub fit_rate: Option<f64>,
    /// Reads that brought bytes (each is a point of the fit).
    pub arrivals: u64,
    /// Seconds from the start to the first arrival (0 when the line was anchored there).
    pub first_at: f64,
    /// The largest lead over the line, bytes (≥ 0).
    pub lead: f64,
    /// The largest lag behind the line, bytes (≥ 0).
    pub lag: f64,
    /// The longest time, in seconds, nothing arrived while the stream was behind the line.
    pub owed_gap: f64,
}

impl Deviation {
    /// Lead plus lag: the burst σ a (σ, ρ) envelope around this stream needs, whatever the
    /// line's anchor.
    pub fn span(&self) -> f64 {
        self.lead + self.lag
    }

    /// How far [`Deviation::arrival_rate`] is from the line's rate, as a fraction (absolute).
    pub fn arrival_error(&self) -> Option<f64> {
        self.arrival_rate.map(|r| (r / self.promised - 1.0).abs())
    }

    /// How far [`Deviation::fit_rate`] is from the line's rate, as a fraction (absolute).
    pub fn fit_error(&self) -> Option<f64> {
        self.fit_rate.map(|r| (r / self.promised - 1.0).abs())
    }

    /// The mean rate from the start to the end of the run, bytes per second (every byte
    /// counted, so a chunk granted at admission or cut off by the end weighs in; see
    /// [`Deviation::arrival_rate`] for the rate a paced stream holds).
    pub fn rate(&self) -> f64 {
        if self.secs > 0.0 { self.bytes as f64 / self.secs } else { 0.0 }
    }
}

impl DepartureLine {
    /// A stream promised `rate` bytes per second (> 0).
    pub fn new(rate: f64) -> Self {
        Self {
            rate,
            start: None,
            first: None,
            last: Nanos::ZERO,
            bytes: 0,
            fit: Fit::default(),
            lead: 0.0,
            lag: 0.0,
            owed_gap: 0,
        }
    }

    /// Anchors the line at `t`, the instant the stream was admitted (no-op once anchored, by an
    /// earlier call or an arrival): bytes that come later are measured against
    /// `rate × (t' − t)`, so an observer late to its first read sees lag, not lead.
    pub fn start(&mut self, t: Nanos) {
        if self.start.is_none() {
            self.start = Some(t);
            self.last = self.last.max(t);
        }
    }

    /// Where the line stands at `t` (bytes), once started.
    fn line(&self, start: Nanos, t: Nanos) -> f64 {
        self.rate * t.0.saturating_sub(start.0) as f64 / 1e9
    }

    /// Behind the line just before `t` (with what had come by then), and the owed spell that
    /// ends at `t`.
    fn behind_until(&mut self, start: Nanos, t: Nanos) {
        let lag = self.line(start, t) - self.bytes as f64;
        if lag > 0.0 {
            self.lag = self.lag.max(lag);
            // The line passed what had come at this instant: owed from then (or from the last
            // arrival, if later) until `t`.
            let crossed = start.0 + (self.bytes as f64 / self.rate * 1e9).ceil() as u64;
            let owed_from = crossed.max(self.last.0);
            self.owed_gap = self.owed_gap.max(t.0.saturating_sub(owed_from));
        }
    }

    /// `bytes` arrived at `t` (times never go backwards; an earlier `t` is taken as the last).
    pub fn arrive(&mut self, t: Nanos, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let t = Nanos(t.0.max(self.last.0));
        let start = *self.start.get_or_insert(t);
        self.first.get_or_insert((t, bytes));
        self.behind_until(start, t);
        self.bytes += bytes;
        let first = self.first.map_or(t, |f| f.0);
        self.fit.add(t.0.saturating_sub(first.0) as f64 / 1e9, self.bytes as f64);
        self.lead = self.lead.max(self.bytes as f64 - self.line(start, t));
        self.last = t;
    }

    /// What it measured, the run ending at `end` (a stream still behind at the end has lagged
    /// until then). `None` if nothing arrived, anchored or not.
    pub fn deviation(&self, end: Nanos) -> Option<Deviation> {
        let start = self.start?;
        let mut at_end = self.clone();
        let end = Nanos(end.0.max(self.last.0));
        at_end.behind_until(start, end);
        if self.bytes == 0 {
            return None;
        }
        let arrival_rate = self.first.and_then(|(t, first)| {
            let secs = self.last.0.saturating_sub(t.0) as f64 / 1e9;
            (secs > 0.0).then(|| (self.bytes - first) as f64 / secs)
        });
        Some(Deviation {
            promised: self.rate,
            bytes: self.bytes,
            secs: end.0.saturating_sub(start.0) as f64 / 1e9,
            arrival_rate,
            fit_rate: self.fit.slope(),
            arrivals: self.fit.n,
            first_at: self.first.map_or(0.0, |(t, _)| t.0.saturating_sub(start.0) as f64 / 1e9),
            lead: at_end.lead,
            lag: at_end.lag,
            owed_gap: at_end.owed_gap as f64 / 1e9,
        })
    }
}

/// A least-squares line through points `(x, y)` added one at a time, by Welford's updates of
/// the means and co-moments (Welford 1962; the covariance form as in Knuth, TAOCP vol. 2,
/// §4.2.2), so that no sum of squares of large times is ever subtracted from another.
#[derive(Clone, Copy, Debug, Default)]
struct Fit {
    n: u64,
    mean_x: f64,
    mean_y: f64,
    /// Σ (x − x̄)².
    sxx: f64,
    /// Σ (x − x̄)(y − ȳ).
    sxy: f64,
}

impl Fit {
    fn add(&mut self, x: f64, y: f64) {
        self.n += 1;
        let n = self.n as f64;
        let dx = x - self.mean_x;
        self.mean_x += dx / n;
        self.mean_y += (y - self.mean_y) / n;
        self.sxx += dx * (x - self.mean_x);
        self.sxy += dx * (y - self.mean_y);
    }

    /// The slope, if the points span some time.
    fn slope(&self) -> Option<f64> {
        (self.n >= 2 && self.sxx > 0.0).then(|| self.sxy / self.sxx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    /// Packets of `p` bytes every `p / rate` seconds, from `t0`.
    fn paced(line: &mut DepartureLine, rate: f64, p: u64, n: u64, t0: u64) {
        let every = (p as f64 / rate * 1e9) as u64;
        for k in 0..n {
            line.arrive(Nanos(t0 + k * every), p);
        }
    }

    #[test]
    fn a_perfectly_paced_stream_leads_by_one_packet_and_never_lags() {
        let mut l = DepartureLine::new(8_000.0); // 64 kb/s
        paced(&mut l, 8_000.0, 1_000, 100, 5 * MS);
        // The run ends as the next packet is due: on the line, not behind it.
        let d = l.deviation(Nanos(5 * MS + 100 * 125 * MS)).unwrap();
        assert_eq!(d.lead, 1_000.0);
        assert!(d.lag <= 1e-6, "{d:?}");
        assert_eq!(d.owed_gap, 0.0);
        assert!((d.rate() - 8_000.0).abs() < 1.0, "{d:?}");
        assert!((d.arrival_rate.unwrap() - 8_000.0).abs() < 0.01, "{d:?}");
    }

    /// A client that opened other streams before its first read finds a backlog: anchored at
    /// admission it lagged while it did not read and leads by no more than the sender's first
    /// chunk; anchored at the first arrival the same bytes looked like a burst of 9 KB.
    #[test]
    fn a_late_first_read_is_lag_when_the_line_starts_at_admission() {
        let feed = |l: &mut DepartureLine| {
            // Admitted at 0 with a chunk of 800 B at once and one every 100 ms; the client
            // reads nothing until 1,050 ms, then on time.
            l.arrive(Nanos(1_050 * MS), 800 * 11);
            for k in 11..40 {
                l.arrive(Nanos(k * 100 * MS), 800);
            }
        };
        let mut anchored = DepartureLine::new(8_000.0);
        anchored.start(Nanos(0));
        feed(&mut anchored);
        let d = anchored.deviation(Nanos(4_000 * MS)).unwrap();
        assert!((d.lead - 800.0).abs() < 1e-6, "{d:?}");
        // The line reached 8,400 B at 1,050 ms; nothing had come.
        assert!((d.lag - 8_400.0).abs() < 1e-6, "{d:?}");
        assert!((d.secs - 4.0).abs() < 1e-9, "{d:?}");
        let mut unanchored = DepartureLine::new(8_000.0);
        feed(&mut unanchored);
        assert_eq!(unanchored.deviation(Nanos(4_000 * MS)).unwrap().lead, 9_200.0);
        // Anchoring is once: an arrival or an earlier anchor holds.
        anchored.start(Nanos(2_000 * MS));
        assert_eq!(anchored.deviation(Nanos(4_000 * MS)).unwrap(), d);
        let mut empty = DepartureLine::new(8_000.0);
        empty.start(Nanos(0));
        assert!(empty.deviation(Nanos(MS)).is_none(), "anchored but nothing came");
    }

    /// Counts taken at fixed instants are off by up to a chunk at each end; from arrival to
    /// arrival a paced stream's rate is exact.
    #[test]
    fn the_rate_from_arrival_to_arrival_is_exact_for_a_paced_stream() {
        let mut l = DepartureLine::new(8_000.0);
        l.start(Nanos(0));
        paced(&mut l, 8_000.0, 800, 100, 0); // chunks at 0, 100, …, 9,900 ms
        // The run ends just before the next chunk: 80,000 B over 9.999 s reads 0.01% fast; one
        // millisecond earlier the last chunk would be missing, 1% slow.
        let d = l.deviation(Nanos(9_999 * MS)).unwrap();
        assert!((d.rate() / 8_000.0 - 1.0).abs() > 1e-4, "{d:?}");
        assert!((d.arrival_rate.unwrap() - 8_000.0).abs() < 1e-6, "{d:?}");
        assert!(d.arrival_error().unwrap() < 1e-9, "{d:?}");
        let mut one = DepartureLine::new(8_000.0);
        one.arrive(Nanos(MS), 800);
        assert_eq!(one.deviation(Nanos(2 * MS)).unwrap().arrival_rate, None, "one arrival has no rate");
    }

    /// The least-squares slope is exact for a paced stream, as the endpoint rate is.
    #[test]
    fn the_fitted_rate_is_exact_for_a_paced_stream() {
        let mut l = DepartureLine::new(8_000.0);
        l.start(Nanos(0));
        paced(&mut l, 8_000.0, 800, 100, 0);
        let d = l.deviation(Nanos(9_999 * MS)).unwrap();
        assert!(d.fit_error().unwrap() < 1e-9, "{d:?}");
        assert_eq!(d.arrivals, 100);
        assert_eq!(d.first_at, 0.0);
        let mut one = DepartureLine::new(8_000.0);
        one.arrive(Nanos(MS), 800);
        assert_eq!(one.deviation(Nanos(2 * MS)).unwrap().fit_rate, None, "one arrival has no slope");
    }

    /// One late read at either end of a 10 s stream of 800 B every 100 ms (64 kb/s, the scale
    /// case's grain): the endpoint rate moves by the lateness over the run (0.78% for 78 ms),
    /// the slope over every arrival by under a tenth of that.
    #[test]
    fn one_late_endpoint_moves_the_fitted_rate_far_less_than_the_endpoint_rate() {
        for late_first in [true, false] {
            let mut l = DepartureLine::new(8_000.0);
            l.start(Nanos(0));
            for k in 0..101u64 {
                let late = match (late_first, k) {
                    (true, 0) | (false, 100) => 78 * MS,
                    _ => 0,
                };
                l.arrive(Nanos(k * 100 * MS + late), 800);
            }
            let d = l.deviation(Nanos(10_100 * MS)).unwrap();
            let (endpoint, fit) = (d.arrival_error().unwrap(), d.fit_error().unwrap());
            assert!(endpoint > 0.007, "late first {late_first}: {d:?}");
            assert!(fit < 0.001, "late first {late_first}: fit off by {fit}: {d:?}");
            assert_eq!(d.first_at, if late_first { 0.078 } else { 0.0 });
        }
    }

    #[test]
    fn a_stall_shows_as_lag_and_as_the_time_owed() {
        let mut l = DepartureLine::new(8_000.0);
        paced(&mut l, 8_000.0, 1_000, 10, 0);
        // Nothing for 500 ms after the last packet (due 125 ms after it), then four at once.
        let last = 9 * 125 * MS;
        l.arrive(Nanos(last + 500 * MS), 4_000);
        let d = l.deviation(Nanos(last + 500 * MS)).unwrap();
        // The line reached 13,000 bytes at 1,625 ms; 10,000 had come: 3 packets behind.
        assert!((d.lag - 3_000.0).abs() < 1.0, "{d:?}");
        // Owed from when the line passed 10,000 bytes (1,250 ms) until 1,625 ms.
        assert!((d.owed_gap - 0.375).abs() < 1e-6, "{d:?}");
        assert_eq!(d.lead, 1_000.0);
    }

    #[test]
    fn a_burst_shows_as_lead() {
        let mut l = DepartureLine::new(8_000.0);
        l.arrive(Nanos(0), 1_000);
        l.arrive(Nanos(MS), 5_000);
        let d = l.deviation(Nanos(MS)).unwrap();
        assert!((d.lead - 5_992.0).abs() < 1e-6, "{d:?}");
    }

    #[test]
    fn a_stream_that_stops_lags_until_the_end() {
        let mut l = DepartureLine::new(1_000.0);
        l.arrive(Nanos(0), 1_000);
        let d = l.deviation(Nanos(3_000 * MS)).unwrap();
        assert!((d.lag - 2_000.0).abs() < 1e-6, "{d:?}");
        assert!((d.owed_gap - 2.0).abs() < 1e-6, "{d:?}");
        assert!(DepartureLine::new(1.0).deviation(Nanos(5)).is_none());
    }

    proptest! {
        /// Reads that coalesce packets (a late client) can only add lag, never lead, and never
        /// change the bytes counted.
        #[test]
        fn late_reads_add_lag_not_lead(delays in proptest::collection::vec(0u64..300, 40)) {
            let rate = 8_000.0;
            let mut exact = DepartureLine::new(rate);
            let mut late = DepartureLine::new(rate);
            // Both admitted at 0: even the first read may be late.
            exact.start(Nanos(0));
            late.start(Nanos(0));
            let mut pending = 0;
            let mut read_at = 0;
            for (k, d) in delays.iter().enumerate() {
                let t = k as u64 * 125 * MS;
                exact.arrive(Nanos(t), 1_000);
                pending += 1_000;
                if t >= read_at {
                    late.arrive(Nanos(t + d * MS), pending);
                    read_at = t + d * MS;
                    pending = 0;
                }
            }
            let end = Nanos(40 * 125 * MS + 300 * MS);
            late.arrive(end, pending);
            let (e, l) = (exact.deviation(end).unwrap(), late.deviation(end).unwrap());
            prop_assert_eq!(e.bytes, l.bytes);
            prop_assert!(l.lead <= e.lead + 1e-6, "{:?} {:?}", e, l);
            prop_assert!(l.lag + 1e-6 >= e.lag, "{:?} {:?}", e, l);
        }
    }
}
