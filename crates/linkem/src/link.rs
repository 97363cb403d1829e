//! One direction of an emulated link, as a state machine with time passed in: packets are
//! offered, some are dropped (at random, or by the queue), the rest leave one after another at
//! the link's rate and arrive a propagation delay later.
//!
//! The queue is drop-tail or RED (Floyd & Jacobson, "Random Early Detection Gateways", IEEE/ACM
//! ToN 1993, §4): on each arrival the average queue `avg ← (1 − w_q)·avg + w_q·q`; below
//! `min_th` the packet is queued, at or above `max_th` dropped, and between them dropped with
//! `p_a = p_b / (1 − count·p_b)`, `p_b = max_p·(avg − min_th)/(max_th − min_th)`, where `count`
//! is the packets queued since the last drop. After an idle spell the average first decays as
//! if `m` empty-queue samples had been taken, `avg ← (1 − w_q)^m·avg`, with `m` the packets of
//! [`RED_SMALL_PACKET`] bytes the link could have sent while idle (the paper's Fig. 2; its `m`
//! counts "typical small packets" without a size, and ns-2's 500-byte mean is taken). Without
//! it the average stays where the last busy spell left it, and an idle link keeps dropping the
//! next connection's first packets early (the mux stress test's handshakes timed out so).
//! Iwashima's testbed (notes §4.2) ran RED "with a
//! maximum average size of 40 packets" and gives no other parameter; [`Queue::iwashima`] takes
//! `max_th = 40`, and Dummynet's and the paper's usual `min_th = max_th/4`, `max_p = 0.1`,
//! `w_q = 0.002`, with a hard limit of 100 packets.

use std::collections::VecDeque;
use std::time::Duration;

/// The "typical small packet" of RED's idle decay, in bytes.
pub const RED_SMALL_PACKET: f64 = 500.0;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The queue in front of the link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Queue {
    /// Packets beyond this many waiting are dropped.
    DropTail {
        /// Packets the queue holds.
        packets: usize,
    },
    /// Random early detection.
    Red {
        /// Average queue (packets) below which nothing is dropped.
        min_th: f64,
        /// Average queue at or above which every arrival is dropped.
        max_th: f64,
        /// Drop probability as the average reaches `max_th`.
        max_p: f64,
        /// Weight of each sample in the average.
        w_q: f64,
        /// Packets the queue holds at most.
        limit: usize,
    },
}

impl Queue {
    /// RED as in Iwashima's testbed (see the module documentation for the choices).
    pub fn iwashima() -> Self {
        Self::Red { min_th: 10.0, max_th: 40.0, max_p: 0.1, w_q: 0.002, limit: 100 }
    }
}

/// An emulated link direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConfig {
    /// Bits per second.
    pub rate_bps: u64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Probability that a packet is lost on the wire (0 to 1).
    pub loss: f64,
    /// The queue.
    pub queue: Queue,
    /// Seed of the loss and RED draws.
    pub seed: u64,
}

impl Default for LinkConfig {
    /// Iwashima's bottleneck (§4.5): 10 Mb/s, 25 ms one way, no loss, RED.
    fn default() -> Self {
        Self { rate_bps: 10_000_000, delay: Duration::from_millis(25), loss: 0.0, queue: Queue::iwashima(), seed: 1 }
    }
}

/// Why a packet went no further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drop {
    /// Lost on the wire.
    Loss,
    /// The queue was full.
    Full,
    /// RED dropped it early.
    Early,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets offered.
    pub offered: u64,
    /// Packets delivered.
    pub delivered: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// Dropped by random loss.
    pub lost: u64,
    /// Dropped at a full queue.
    pub full: u64,
    /// Dropped early by RED.
    pub early: u64,
}

/// One direction of a link.
#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    /// Queued or on the wire, in order: (end of transmission, arrival), packet.
    pipe: VecDeque<((Duration, Duration), Vec<u8>)>,
    /// When the transmitter is next free.
    free_at: Duration,
    avg: f64,
    /// Packets queued since RED's last drop.
    count: i64,
    rng: ChaCha8Rng,
    stats: LinkStats,
}

impl Link {
    /// An idle link.
    pub fn new(config: LinkConfig) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            config,
            pipe: VecDeque::new(),
            free_at: Duration::ZERO,
            avg: 0.0,
            count: -1,
            stats: LinkStats::default(),
        }
    }

    /// Packets waiting for or in transmission at `now`.
    pub fn backlog(&self, now: Duration) -> usize {
        self.pipe.iter().rev().take_while(|((tx_end, _), _)| *tx_end > now).count()
    }

    /// A packet arrives at the link at `now`.
    pub fn offer(&mut self, now: Duration, packet: Vec<u8>) -> Result<(), Drop> {
        self.stats.offered += 1;
        let q = self.backlog(now);
        let verdict = match self.config.queue {
            Queue::DropTail { packets } => (q < packets).then_some(()).ok_or(Drop::Full),
            Queue::Red { min_th, max_th, max_p, w_q, limit } => {
                if q == 0 && now > self.free_at {
                    let small = RED_SMALL_PACKET * 8.0 / self.config.rate_bps as f64;
                    let m = (now - self.free_at).as_secs_f64() / small;
                    self.avg *= libm::pow(1.0 - w_q, m);
                }
                self.avg = (1.0 - w_q) * self.avg + w_q * q as f64;
                if q >= limit {
                    Err(Drop::Full)
                } else if self.avg < min_th {
                    self.count = -1;
                    Ok(())
                } else if self.avg >= max_th {
                    self.count = 0;
                    Err(Drop::Early)
                } else {
                    self.count += 1;
                    let p_b = max_p * (self.avg - min_th) / (max_th - min_th);
                    let p_a = p_b / (1.0 - self.count as f64 * p_b).max(1e-9);
                    if self.rng.random::<f64>() < p_a {
                        self.count = 0;
                        Err(Drop::Early)
                    } else {
                        Ok(())
                    }
                }
            }
        };
        if let Err(d) = verdict {
            match d {
                Drop::Full => self.stats.full += 1,
                Drop::Early => self.stats.early += 1,
                Drop::Loss => {}
            }
            return Err(d);
        }
        // A packet lost on the wire still took its time on the transmitter.
        let tx = Duration::from_secs_f64(packet.len() as f64 * 8.0 / self.config.rate_bps as f64);
        let tx_end = self.free_at.max(now) + tx;
        self.free_at = tx_end;
        if self.config.loss > 0.0 && self.rng.random::<f64>() < self.config.loss {
            self.stats.lost += 1;
            return Err(Drop::Loss);
        }
        self.pipe.push_back(((tx_end, tx_end + self.config.delay), packet));
        Ok(())
    }

    /// The next packet that has arrived by `now`, if any.
    pub fn poll(&mut self, now: Duration) -> Option<Vec<u8>> {
        if self.pipe.front().is_some_and(|((_, at), _)| *at <= now) {
            let (_, p) = self.pipe.pop_front()?;
            self.stats.delivered += 1;
            self.stats.delivered_bytes += p.len() as u64;
            return Some(p);
        }
        None
    }

    /// When the next packet arrives.
    pub fn next_arrival(&self) -> Option<Duration> {
        self.pipe.front().map(|((_, at), _)| *at)
    }

    /// The counters.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn packets_leave_at_the_rate_and_arrive_a_delay_later() {
        // 1 Mb/s: a 1,250-byte packet takes 10 ms to send.
        let mut l = Link::new(LinkConfig {
            rate_bps: 1_000_000,
            delay: ms(25),
            queue: Queue::DropTail { packets: 10 },
            ..LinkConfig::default()
        });
        for _ in 0..3 {
            l.offer(ms(0), vec![0; 1250]).unwrap();
        }
        assert_eq!(l.backlog(ms(0)), 3);
        assert_eq!(l.next_arrival(), Some(ms(35)));
        assert!(l.poll(ms(34)).is_none());
        assert!(l.poll(ms(35)).is_some());
        assert!(l.poll(ms(44)).is_none());
        assert!(l.poll(ms(45)).is_some());
        assert!(l.poll(ms(55)).is_some());
        assert_eq!(l.backlog(ms(30)), 0);
    }

    #[test]
    fn drop_tail_refuses_beyond_its_size() {
        let mut l = Link::new(LinkConfig {
            rate_bps: 1_000_000,
            queue: Queue::DropTail { packets: 2 },
            ..LinkConfig::default()
        });
        assert!(l.offer(ms(0), vec![0; 1250]).is_ok());
        assert!(l.offer(ms(0), vec![0; 1250]).is_ok());
        assert_eq!(l.offer(ms(0), vec![0; 1250]), Err(Drop::Full));
        assert_eq!(l.stats().full, 1);
    }

    #[test]
    fn red_drops_early_as_the_average_grows_and_never_below_min() {
        let mut l = Link::new(LinkConfig { rate_bps: 1_000_000, ..LinkConfig::default() });
        // A burst of 99 at once: the average moves slowly, so few are dropped early...
        let mut early = 0;
        for _ in 0..99 {
            if l.offer(ms(0), vec![0; 1250]) == Err(Drop::Early) {
                early += 1;
            }
        }
        assert_eq!(early, 0, "the average is still below min_th");
        // ...but a standing queue raises the average until RED drops.
        let mut t = 0;
        let mut dropped = 0;
        for _ in 0..5000 {
            t += 9; // offered a little faster than the 10 ms it takes to send each
            if l.offer(ms(t), vec![0; 1250]).is_err() {
                dropped += 1;
            }
        }
        assert!(dropped > 0, "a standing queue is signalled");
        assert!(l.stats().early > 0);
    }

    #[test]
    fn red_forgets_a_busy_spell_while_the_link_is_idle() {
        let mut l = Link::new(LinkConfig::default());
        // A long burst drives the average past max_th: arrivals are then dropped early.
        for _ in 0..3000 {
            let _ = l.offer(Duration::ZERO, vec![0u8; 1500]);
        }
        assert!(l.offer(Duration::ZERO, vec![0u8; 100]).is_err());
        let busy_until = l.free_at;
        // A second after the queue has drained, the link has been idle long enough to forget.
        let later = busy_until + Duration::from_secs(1);
        let early = l.stats().early;
        for i in 0..50 {
            l.offer(later + Duration::from_millis(i * 10), vec![0u8; 100]).expect("an idle link drops nothing early");
        }
        assert_eq!(l.stats().early, early);
    }

    #[test]
    fn random_loss_is_seeded_and_near_its_rate() {
        let run = |seed| {
            let mut l = Link::new(LinkConfig {
                loss: 0.05,
                seed,
                queue: Queue::DropTail { packets: 1 << 20 },
                ..LinkConfig::default()
            });
            (0..20_000).filter(|i| l.offer(ms(*i), vec![0; 100]) == Err(Drop::Loss)).count()
        };
        assert_eq!(run(3), run(3));
        let lost = run(3) as f64 / 20_000.0;
        assert!((lost - 0.05).abs() < 0.006, "{lost}");
    }
}
