//! A sender and a receiver joined by simulated connections that deliver out of step with each
//! other and die: every byte must arrive once, in order, within the receiver's window.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use std::collections::VecDeque;

use super::choose::ConnChoice;
use super::frame::{DEFAULT_MAX_PAYLOAD, Frame};
use super::{Receiver, RecvConfig, Scheme, SendConfig, Sender};
use crate::time::Nanos;

/// A byte of channel `c` at offset `i`: a pattern that shows a lost, doubled or misplaced byte.
fn byte(c: u32, i: usize) -> u8 {
    (i as u32).wrapping_mul(31).wrapping_add(c * 7) as u8
}

#[derive(Debug, Clone)]
struct Plan {
    scheme: Scheme,
    conns: usize,
    /// Bytes each channel writes.
    sizes: Vec<usize>,
    /// Random choices driving the interleaving.
    moves: Vec<u8>,
    /// Kill a connection at these steps (its frames in flight are lost), then re-open it later.
    kills: Vec<u16>,
    /// Forget each channel on both sides once it has finished (as the mux driver does), while
    /// copies of its frames may still be in flight.
    retire: bool,
}

fn schemes() -> impl Strategy<Value = Scheme> {
    prop_oneof![
        Just(Scheme::Stripe(ConnChoice::LeastQueued)),
        Just(Scheme::Stripe(ConnChoice::EarliestDelivery { slack: 0.1 })),
        Just(Scheme::Pin { hysteresis: 0.01 }),
        Just(Scheme::PerChannel),
    ]
}

fn plans() -> impl Strategy<Value = Plan> {
    (
        schemes(),
        1usize..5,
        proptest::collection::vec(0usize..20_000, 1..6),
        proptest::collection::vec(any::<u8>(), 500..3000),
        proptest::collection::vec(any::<u16>(), 0..4),
        any::<bool>(),
    )
        .prop_map(|(scheme, conns, sizes, moves, kills, retire)| Plan {
            scheme,
            conns,
            sizes,
            moves,
            kills,
            retire,
        })
}

/// Runs a plan; returns what each channel received.
fn run(plan: &Plan) -> Vec<Vec<u8>> {
    let window = 8;
    let send_config = SendConfig {
        max_frame: 700,
        channel_buffer: 3000,
        initial_credit: window,
        scheme: plan.scheme,
        pin_by_service: true,
    };
    let mut tx = Sender::new(send_config);
    let mut rx = Receiver::new(RecvConfig { window, min_window: window });
    // In flight on each connection: encoded bytes, FIFO (TCP), and whether it is up.
    let mut wires: Vec<VecDeque<Bytes>> = vec![VecDeque::new(); plan.conns];
    let mut up = vec![true; plan.conns];
    for c in 0..plan.conns {
        tx.connection_up(c);
    }
    let n = plan.sizes.len();
    for c in 0..n {
        tx.open(c as u32 + 1, libm::pow(0.8, c as f64), c % 2 == 0).unwrap();
        if plan.sizes[c] == 0 {
            tx.close(c as u32 + 1).unwrap();
        }
    }
    let mut written = vec![0usize; n];
    let mut got: Vec<Vec<u8>> = vec![Vec::new(); n];
    let mut partial = vec![BytesMut::new(); plan.conns];
    let mut moves = plan.moves.iter().copied().cycle();
    let mut step = 0u64;
    // Enough steps to finish whatever the interleaving, with a bound that catches a stall.
    let limit = 400_000;
    loop {
        step += 1;
        assert!(step < limit, "stalled: written {written:?}, got {:?}", got.iter().map(Vec::len).collect::<Vec<_>>());
        if plan.kills.iter().any(|k| u64::from(*k % 2000) + 1 == step) {
            let victim = (step as usize) % plan.conns;
            if up[victim] && up.iter().filter(|u| **u).count() > 1 {
                up[victim] = false;
                wires[victim].clear();
                partial[victim].clear();
                tx.connection_lost(victim);
            }
        }
        if step.is_multiple_of(3000) {
            for (c, u) in up.iter_mut().enumerate() {
                if !*u {
                    *u = true;
                    tx.connection_up(c);
                }
            }
        }
        let m = moves.next().unwrap();
        let conn = (m as usize >> 2) % plan.conns;
        match m % 4 {
            // The application writes.
            0 => {
                let c = (m as usize >> 2) % n;
                let left = plan.sizes[c] - written[c];
                if left > 0 {
                    let chunk: Vec<u8> = (written[c]..written[c] + left.min(1200)).map(|i| byte(c as u32, i)).collect();
                    written[c] += tx.write(c as u32 + 1, chunk.into()).unwrap();
                    if written[c] == plan.sizes[c] {
                        tx.close(c as u32 + 1).unwrap();
                    }
                }
            }
            // A connection with room takes a frame (at most 3 frames in flight each).
            1 => {
                if up[conn]
                    && wires[conn].len() < 3
                    && let Some(f) = tx.poll_transmit(Nanos::ZERO, conn)
                {
                    let mut b = BytesMut::new();
                    f.encode(&mut b);
                    wires[conn].push_back(b.freeze());
                }
            }
            // A connection delivers its oldest frame, cut in two to test framing.
            2 => {
                if let Some(bytes) = wires[conn].pop_front() {
                    let cut = bytes.len() / 2;
                    for piece in [bytes.slice(..cut), bytes.slice(cut..)] {
                        partial[conn].extend_from_slice(&piece);
                        while let Some(f) = Frame::decode(&mut partial[conn], DEFAULT_MAX_PAYLOAD).unwrap() {
                            rx.on_frame(Nanos(step), f).expect("the sender keeps to its credit");
                        }
                    }
                }
            }
            // The application reads, and credit flows back (instantly: the reverse path is not
            // under test here).
            _ => {
                for (c, g) in got.iter_mut().enumerate() {
                    while let Some(b) = rx.read(c as u32 + 1) {
                        g.extend_from_slice(&b);
                    }
                }
                while let Some(Frame::Credit { channel, ack, limit }) = rx.poll_credit() {
                    tx.on_credit(channel, ack, limit);
                }
                if plan.retire {
                    let done: Vec<u32> =
                        (1..=n as u32).filter(|id| rx.is_finished(*id) && tx.is_delivered(*id)).collect();
                    for id in done {
                        tx.forget(id);
                        assert!(rx.retire(id));
                    }
                }
            }
        }
        for c in 0..n {
            let s = rx.stats(c as u32 + 1).unwrap_or_default();
            assert!(s.held_bytes <= window * 700, "channel {c} holds {} bytes", s.held_bytes);
        }
        tx.check_invariants();
        let done = |id| rx.is_finished(id) || rx.is_retired(id);
        if (1..=n as u32).all(done) && tx.is_idle() {
            break;
        }
    }
    got
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn every_byte_arrives_once_and_in_order(plan in plans()) {
        let got = run(&plan);
        for (c, g) in got.iter().enumerate() {
            prop_assert_eq!(g.len(), plan.sizes[c], "channel {}", c);
            // Unordered channels (odd index) may interleave frames; ordered ones must match.
            if c % 2 == 0 {
                let want: Vec<u8> = (0..plan.sizes[c]).map(|i| byte(c as u32, i)).collect();
                prop_assert!(g == &want, "channel {} out of order", c);
            } else {
                let mut g = g.clone();
                let mut want: Vec<u8> = (0..plan.sizes[c]).map(|i| byte(c as u32, i)).collect();
                g.sort_unstable();
                want.sort_unstable();
                prop_assert!(g == want, "channel {} lost or doubled bytes", c);
            }
        }
    }
}
