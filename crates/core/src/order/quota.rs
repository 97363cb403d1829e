//! Yates's hard throughput-based scheduling: a worker sends a quota of packets, then pauses
//! k × 10 ms, with the quota corrected from its measured rate (Yates 2006 §4.4, Fig. 4.17; notes
//! 000 §3.4).
//!
//! The thesis's system could sleep only in steps of about 10 ms, so each worker computes how many
//! packets to send between pauses of k ticks — "choosing the minimum k and then n_i for that
//! pause length that delivers the target" — and nudges n_i up when its EWMA rate falls short of
//! the sum of its connections' rates and down when it overshoots. Its worked example: 32
//! connections × 4 Mb/s = 128 Mb/s per worker, about 39 packets of 4 KB per 10 ms.
//!
//! Choices the text leaves open, made here:
//! - **k**: the smallest k ≥ 1 for which the quota is at least one packet (k = 0, no pause, would
//!   not be pacing).
//! - **The nudge**: a multiplicative correction `c ← c · (1 + g · (target / rate − 1))`, clamped
//!   to [1/4, 4], with the EWMA's gain g, rather than ±1 packet: ±1 of 39 is a 2.6% step, which
//!   alone would break a 1% promise. The quota carries its fraction from round to round, so a
//!   quota of 39.4 sends 39, 39, 40, … and averages 39.4.
//! - The pause does not include the time spent sending, as in the thesis: the correction is what
//!   absorbs the send time.

use crate::measure::Ewma;
use crate::time::Nanos;

/// Quota settings; the defaults are the thesis's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuotaConfig {
    /// The sleep granularity (10 ms).
    pub tick: Nanos,
    /// Bytes per packet (4 KB of user data).
    pub packet: u64,
    /// EWMA gain on each new sample (1/8), also the correction's step.
    pub gain: f64,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        Self { tick: Nanos::from_millis(10), packet: 4096, gain: Ewma::YATES_GAIN }
    }
}

/// One round: send `packets` (round-robin over the worker's connections), then sleep `pause`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Round {
    /// Packets to send.
    pub packets: u64,
    /// How long to sleep after sending them.
    pub pause: Nanos,
}

/// One worker's quota controller.
pub struct Quota {
    cfg: QuotaConfig,
    target: f64,
    k: u64,
    base: f64,
    correction: f64,
    carry: f64,
    rate: Ewma,
}

impl Quota {
    /// A controller for a worker promised `target` bytes per second in all.
    pub fn new(cfg: QuotaConfig, target: f64) -> Self {
        let cfg = QuotaConfig { packet: cfg.packet.max(1), tick: Nanos(cfg.tick.0.max(1)), ..cfg };
        let mut q = Self { cfg, target: 0.0, k: 1, base: 0.0, correction: 1.0, carry: 0.0, rate: Ewma::new(cfg.gain) };
        q.set_target(target);
        q
    }

    /// Changes the promised total (a stream joined or left). The correction learned so far is
    /// kept: it describes the worker, not the target.
    pub fn set_target(&mut self, target: f64) {
        self.target = if target.is_finite() { target.max(0.0) } else { 0.0 };
        let per_tick = self.target * self.cfg.tick.0 as f64 / 1e9 / self.cfg.packet as f64;
        // The smallest k with at least one packet per pause; a zero target idles a tick at a time.
        self.k = if per_tick >= 1.0 || per_tick <= 0.0 { 1 } else { (1.0 / per_tick).ceil() as u64 };
        self.base = per_tick * self.k as f64;
    }

    /// The promised total, bytes per second.
    pub fn target(&self) -> f64 {
        self.target
    }

    /// The pause length in ticks (k).
    pub fn ticks(&self) -> u64 {
        self.k
    }

    /// Packets per round before correction (n_i as first computed).
    pub fn base(&self) -> f64 {
        self.base
    }

    /// The current correction factor.
    pub fn correction(&self) -> f64 {
        self.correction
    }

    /// The next round.
    pub fn next_round(&mut self) -> Round {
        let want = self.base * self.correction + self.carry;
        let packets = want.floor().max(0.0);
        self.carry = want - packets;
        Round { packets: packets as u64, pause: Nanos(self.cfg.tick.0 * self.k) }
    }

    /// Feeds the monitor: the worker sent `bytes` over the last `elapsed` (the thesis samples every
    /// 100 ms). Adjusts the correction toward the target.
    pub fn sample(&mut self, bytes: u64, elapsed: Nanos) {
        if elapsed.0 == 0 || self.target <= 0.0 {
            return;
        }
        let rate = self.rate.push(bytes as f64 * 1e9 / elapsed.0 as f64);
        if rate > 0.0 {
            let step = 1.0 + self.cfg.gain * (self.target / rate - 1.0);
            self.correction = (self.correction * step).clamp(0.25, 4.0);
        } else {
            self.correction = (self.correction * (1.0 + self.cfg.gain)).min(4.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thesis_example_is_39_packets_per_10ms() {
        // 32 connections × 4 Mb/s = 16 MB/s; 16e6 × 0.01 / 4096 = 39.06.
        let mut q = Quota::new(QuotaConfig::default(), 32.0 * 4e6 / 8.0);
        assert_eq!(q.ticks(), 1);
        assert!((q.base() - 39.0625).abs() < 1e-9);
        let r: Vec<u64> = (0..16).map(|_| q.next_round().packets).collect();
        assert_eq!(r.iter().sum::<u64>(), 625, "16 rounds of 39.0625 carry their fractions");
        assert_eq!(q.next_round().pause, Nanos::from_millis(10));
    }

    #[test]
    fn slow_targets_pause_longer_rather_than_send_nothing() {
        // 100 kB/s is 0.24 packets per 10 ms, so pause 5 ticks and send 1.22 packets.
        let q = Quota::new(QuotaConfig::default(), 100_000.0);
        assert_eq!(q.ticks(), 5);
        assert!(q.base() >= 1.0);
    }

    /// A worker whose sending takes time: its real rate is below the quota's nominal one. The
    /// correction must bring it to the target.
    #[test]
    fn the_correction_absorbs_send_time() {
        let target = 16e6;
        let mut q = Quota::new(QuotaConfig::default(), target);
        let per_packet_ns = 50_000.0; // 50 µs to send a packet: 39 packets take 2 ms beyond the 10 ms pause
        let mut last = 0.0;
        for _ in 0..200 {
            let (mut bytes, mut ns) = (0u64, 0.0);
            while ns < 100e6 {
                let r = q.next_round();
                bytes += r.packets * 4096;
                ns += r.packets as f64 * per_packet_ns + r.pause.0 as f64;
            }
            q.sample(bytes, Nanos(ns as u64));
            last = bytes as f64 * 1e9 / ns;
        }
        assert!((last / target - 1.0).abs() < 0.02, "rate {last} vs {target}");
        assert!(q.correction() > 1.1);
    }
}
