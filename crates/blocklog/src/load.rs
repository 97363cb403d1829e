//! A load generator with the reproduction's profiles (Dou §2.5; notes 003 §4.1): `streams`
//! streams injected together every `period`, each record `size` bytes due `deadline` after it
//! is appended; bursty, every 10th firing of stream 0 injects 5 records instead of 1.
//!
//! Each payload starts with its stream and its number among that stream's appends, and the rest
//! is a pattern of both, so a reader can check that a record read back is the one appended
//! ([`check_payload`]).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::writer::{Log, LogError, Outcome};

/// One load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Streams (the thesis's processes).
    pub streams: u32,
    /// Time between injections.
    pub period: Duration,
    /// Payload bytes of a record.
    pub size: usize,
    /// Relative deadline of a record.
    pub deadline: Duration,
    /// Every 10th firing of stream 0 injects 5 records instead of 1.
    pub bursty: bool,
    /// How long to inject for.
    pub duration: Duration,
}

impl Default for Profile {
    /// The thesis's "conservative" defaults: 3 streams, a 64-byte record each every 40 ms, due
    /// in 70 ms, not bursty; 10 s (one of its runs).
    fn default() -> Self {
        Self {
            streams: 3,
            period: Duration::from_millis(40),
            size: 64,
            deadline: Duration::from_millis(70),
            bursty: false,
            duration: Duration::from_secs(10),
        }
    }
}

/// Records stream `stream` injects at firing `n` (from 0).
#[must_use]
pub fn records_at(profile: &Profile, stream: u32, n: u64) -> u32 {
    // Dou §2.5: "on every 10th firing of timer_1, process 1 injects 5 requests".
    if profile.bursty && stream == 0 && n % 10 == 9 { 5 } else { 1 }
}

/// The payload of stream `stream`'s `k`th record: stream and `k`, then a pattern of both.
#[must_use]
pub fn payload(stream: u32, k: u64, size: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(size);
    p.extend_from_slice(&stream.to_le_bytes());
    p.extend_from_slice(&k.to_le_bytes());
    p.resize(size.max(12), 0);
    for (i, b) in p.iter_mut().enumerate().skip(12) {
        *b = filler(stream, k, i);
    }
    p.truncate(size);
    p
}

/// The `k` a payload of stream `stream` carries, if it is a whole payload of [`payload`]'s (at
/// least 12 bytes).
#[must_use]
pub fn check_payload(stream: u32, p: &[u8]) -> Option<u64> {
    let s = u32::from_le_bytes(p.get(0..4)?.try_into().ok()?);
    let k = u64::from_le_bytes(p.get(4..12)?.try_into().ok()?);
    let pattern = p.iter().enumerate().skip(12).all(|(i, &b)| b == filler(stream, k, i));
    (s == stream && pattern).then_some(k)
}

fn filler(stream: u32, k: u64, i: usize) -> u8 {
    (k.wrapping_mul(31).wrapping_add(u64::from(stream) * 7).wrapping_add(i as u64)) as u8
}

/// Runs `profile` against `log`, calling `on_outcome` for each record's outcome as it comes (a
/// record's tag is its `k` in its stream). Returns once every record has its outcome; the log is
/// left open.
pub fn run(log: &Log, profile: &Profile, mut on_outcome: impl FnMut(&Outcome)) -> Result<u64, LogError> {
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|scope| {
        let generator = scope.spawn(move || -> Result<u64, LogError> {
            let start = Instant::now();
            let mut next_k = vec![0u64; profile.streams as usize];
            let mut appended = 0;
            let period = profile.period.max(Duration::from_micros(1));
            for n in 0u32.. {
                let at = period * n;
                if at >= profile.duration {
                    break;
                }
                if let Some(wait) = at.checked_sub(start.elapsed()) {
                    std::thread::sleep(wait);
                }
                for stream in 0..profile.streams {
                    for _ in 0..records_at(profile, stream, u64::from(n)) {
                        let k = &mut next_k[stream as usize];
                        log.append_to(stream, &payload(stream, *k, profile.size), profile.deadline, *k, &tx)?;
                        *k += 1;
                        appended += 1;
                    }
                }
            }
            Ok(appended)
        });
        // The channel closes once the generator is done and the log has answered every record.
        for o in &rx {
            on_outcome(&o);
        }
        generator.join().unwrap_or(Err(LogError::Closed))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_recognised_and_a_changed_one_is_not() {
        for size in [12, 13, 64, 400] {
            let mut p = payload(2, 77, size);
            assert_eq!(p.len(), size);
            assert_eq!(check_payload(2, &p), Some(77));
            assert_eq!(check_payload(1, &p), None);
            *p.last_mut().unwrap() ^= 1;
            assert_ne!(check_payload(2, &p), Some(77), "size {size}");
        }
        assert_eq!(check_payload(0, &payload(0, 1, 8)), None, "too short to carry k");
    }

    #[test]
    fn bursty_stream_zero_injects_five_every_tenth_firing() {
        let p = Profile { bursty: true, ..Profile::default() };
        let total: u32 = (0..20).map(|n| records_at(&p, 0, n)).sum();
        assert_eq!(total, 18 + 10);
        assert_eq!(records_at(&p, 1, 9), 1);
    }
}
