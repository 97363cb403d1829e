//! Weighted fair queueing across channels: which channel sends the next frame.
//!
//! Iwashima §6.3 (Fig 6‑6) gives an event-driven deficit round robin: every channel accrues
//! credit at the rate of its weight, and the one that needs the fewest steps to afford its next
//! packet sends it. For channels that always have data this picks the smallest *virtual finish
//! time* `F = F_prev + L / w` (notes §3.4), which is what we compute. The thesis never says what an
//! empty channel does (its experiments keep every channel backlogged); if it kept accruing credit
//! it would burst when data came. We follow self-clocked fair queueing (Golestani, INFOCOM 1994):
//! a channel that comes back from idle starts at the virtual time of the last frame picked,
//! `S = max(V, F_prev)`, so it forfeits what it would have earned while idle. A channel with data
//! but no credit from its receiver counts as idle: it cannot use a turn it is given.
//!
//! Ties go to the lower channel id (the thesis's strict `<` scan). A pick costs O(n) in the
//! channels of the group: n is the application's channel count (15 in the source), and the scan
//! lets the caller say per pick which channels can send (credit, pinning) without keeping a
//! heap in step.

use std::collections::BTreeMap;

/// Virtual time is renormalised when it passes this, so that tags keep their precision.
const RENORMALISE_AT: f64 = (1u64 << 40) as f64;

#[derive(Clone, Copy, Debug)]
struct Lane {
    weight: f64,
    /// Virtual finish time of the channel's last frame picked.
    finish: f64,
    /// The channel could send at the last pick (continuously backlogged since, as far as the
    /// queue can tell).
    active: bool,
}

/// One group of channels sharing a sender: a whole session when striping, one connection's
/// pinned channels when pinning.
#[derive(Clone, Debug, Default)]
pub struct Wfq {
    lanes: BTreeMap<u32, Lane>,
    /// Virtual time: the finish tag of the last frame picked.
    now: f64,
}

impl Wfq {
    /// An empty group.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a channel with `weight` (positive and finite), or changes its weight. A new weight
    /// applies from the channel's next frame.
    pub fn set(&mut self, channel: u32, weight: f64) {
        debug_assert!(weight.is_finite() && weight > 0.0);
        let now = self.now;
        self.lanes.entry(channel).or_insert(Lane { weight, finish: now, active: false }).weight = weight;
    }

    /// Removes a channel.
    pub fn remove(&mut self, channel: u32) {
        self.lanes.remove(&channel);
    }

    /// Whether the group holds the channel.
    pub fn contains(&self, channel: u32) -> bool {
        self.lanes.contains_key(&channel)
    }

    /// The group's channels and weights, in id order.
    pub fn weights(&self) -> impl Iterator<Item = (u32, f64)> + '_ {
        self.lanes.iter().map(|(c, l)| (*c, l.weight))
    }

    /// Channels in the group.
    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    /// Whether the group is empty.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// Picks the channel to send next. `head(channel)` is the length of the frame the channel
    /// would send now, or `None` if it cannot send (no data, or no credit). The channel picked is
    /// charged for that frame.
    pub fn pick(&mut self, mut head: impl FnMut(u32) -> Option<usize>) -> Option<u32> {
        let mut best: Option<(f64, u32)> = None;
        for (&channel, lane) in &mut self.lanes {
            let Some(len) = head(channel) else {
                lane.active = false;
                continue;
            };
            if !lane.active {
                // Back from idle: it starts now, and forfeits the turns it did not use.
                lane.finish = lane.finish.max(self.now);
                lane.active = true;
            }
            let finish = lane.finish + len as f64 / lane.weight;
            if best.is_none_or(|(f, _)| finish < f) {
                best = Some((finish, channel));
            }
        }
        let (finish, channel) = best?;
        let lane = self.lanes.get_mut(&channel).expect("picked from the lanes");
        lane.finish = finish;
        self.now = self.now.max(finish);
        if self.now > RENORMALISE_AT {
            let shift = self.now;
            for l in self.lanes.values_mut() {
                l.finish -= shift;
            }
            self.now = 0.0;
        }
        Some(channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bytes each channel sends when every channel always has `len`-byte frames.
    fn run(weights: &[f64], frames: usize, len: usize) -> Vec<f64> {
        let mut q = Wfq::new();
        for (i, w) in weights.iter().enumerate() {
            q.set(i as u32, *w);
        }
        let mut sent = vec![0.0; weights.len()];
        for _ in 0..frames {
            let c = q.pick(|_| Some(len)).unwrap();
            sent[c as usize] += len as f64;
        }
        sent
    }

    /// Iwashima Eq 5.2: a channel never lags its share of what was sent by more than one
    /// largest packet. (It can run ahead by more: the frames the laggards are owed.)
    #[test]
    fn backlogged_channels_lag_their_weighted_share_by_at_most_one_frame() {
        // Iwashima's profile: 15 channels, weights 0.8^i (notes §3.3).
        let weights: Vec<f64> = (0..15).map(|i| libm::pow(0.8, f64::from(i))).collect();
        let sent = run(&weights, 20_000, 1000);
        let total: f64 = sent.iter().sum();
        let w: f64 = weights.iter().sum();
        for (s, wi) in sent.iter().zip(&weights) {
            let ideal = total * wi / w;
            assert!(ideal - s <= 1000.0, "{s} vs {ideal}");
            assert!(s - ideal <= 2000.0, "{s} vs {ideal}");
        }
    }

    #[test]
    fn a_channel_back_from_idle_does_not_burst() {
        let mut q = Wfq::new();
        q.set(1, 1.0);
        q.set(2, 1.0);
        // Channel 2 idle for 100 frames of channel 1.
        for _ in 0..100 {
            assert_eq!(q.pick(|c| (c == 1).then_some(100)), Some(1));
        }
        // Then both have data: they alternate, rather than channel 2 taking 100 turns.
        let picks: Vec<u32> = (0..6).map(|_| q.pick(|_| Some(100)).unwrap()).collect();
        assert_eq!(picks.iter().filter(|c| **c == 2).count(), 3, "{picks:?}");
    }

    #[test]
    fn nothing_to_send_picks_nothing() {
        let mut q = Wfq::new();
        assert_eq!(q.pick(|_| Some(1)), None);
        q.set(4, 2.0);
        assert_eq!(q.pick(|_| None), None);
    }

    proptest! {
        /// Whatever the weights and frame sizes, no continuously backlogged channel lags its
        /// weighted share of what was sent by more than one largest frame (Eq 5.2), and none
        /// runs ahead by more than one frame per channel (what the others can be owed).
        #[test]
        fn fluid_share_within_one_frame(
            weights in proptest::collection::vec(0.01f64..100.0, 1..12),
            lens in proptest::collection::vec(1usize..1500, 1..12),
            frames in 1usize..2000,
        ) {
            let mut q = Wfq::new();
            for (i, w) in weights.iter().enumerate() {
                q.set(i as u32, *w);
            }
            let len_of = |c: u32| lens[c as usize % lens.len()];
            let mut sent = vec![0.0f64; weights.len()];
            for _ in 0..frames {
                let c = q.pick(|c| Some(len_of(c))).unwrap();
                sent[c as usize] += len_of(c) as f64;
            }
            let total: f64 = sent.iter().sum();
            let w: f64 = weights.iter().sum();
            let max_len = *lens.iter().max().unwrap() as f64;
            for (i, s) in sent.iter().enumerate() {
                let ideal = total * weights[i] / w;
                prop_assert!(ideal - s <= max_len + 1e-6, "channel {} lags: {} vs {}", i, s, ideal);
                prop_assert!(s - ideal <= weights.len() as f64 * max_len + 1e-6, "channel {} ahead: {} vs {}", i, s, ideal);
            }
        }
    }
}
