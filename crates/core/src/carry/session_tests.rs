//! A sender and a receiver joined by simulated connections that deliver out of step with each
//! other and die: every byte must arrive once, in order, within the receiver's window.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use std::collections::{BTreeSet, VecDeque};

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
    // Eight frames' worth of credit, in bytes (credit counts bytes from protocol version 4).
    let window = 8 * 700;
    let send_config = SendConfig {
        max_frame: 700,
        channel_buffer: 3000,
        initial_credit: window,
        scheme: plan.scheme,
        pin_by_service: true,
    };
    let mut tx = Sender::new(send_config);
    // Leave to open every channel (open credit is tested on its own).
    tx.on_open_credit(u64::MAX);
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
    // Channels the receiver said had finished.
    let mut finished = BTreeSet::new();
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
            // The application reads the channels the receiver says have bytes (or, one time in
            // two, is busy and reads nothing, so that bytes wait unread against the credit), and
            // credit flows back (instantly: the reverse path is not under test here).
            _ => {
                if m & 0x80 == 0 {
                    while let Some(id) = rx.pop_readable() {
                        while let Some(b) = rx.read(id) {
                            got[id as usize - 1].extend_from_slice(&b);
                        }
                    }
                    for id in 1..=n as u32 {
                        assert_eq!(rx.read(id), None, "channel {id} had bytes the receiver did not name");
                    }
                }
                while let Some(id) = rx.pop_finished() {
                    finished.insert(id);
                }
                for id in 1..=n as u32 {
                    assert_eq!(rx.is_finished(id), finished.contains(&id), "channel {id} finished unnamed");
                }
                while let Some(Frame::Credit { channel, ack, limit }) = rx.poll_credit() {
                    tx.on_credit(channel, ack, limit);
                }
                if plan.retire {
                    let done: Vec<u32> = finished.iter().copied().filter(|id| tx.is_delivered(*id)).collect();
                    for id in done {
                        tx.forget(id);
                        assert!(rx.retire(id));
                        finished.remove(&id);
                    }
                }
            }
        }
        for c in 0..n {
            // The memory bound, in bytes whatever the frames' sizes: held early and unread.
            let buffered = rx.buffered(c as u32 + 1).unwrap_or_default();
            assert!(buffered <= window, "channel {c} holds {buffered} bytes held or unread, over its window {window}");
        }
        tx.check_invariants();
        rx.check_invariants();
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

/// The failure first seen as "channel 0 holds 5800 bytes", shrunk from plans with several
/// connection deaths: frames held behind a gap on a connection that died were sent again, and
/// each copy counted its bytes as held once more, for good (the buffer kept one copy, so the
/// count never came back down), until it passed the window. Failed with "channel 0 holds 5601
/// bytes" before copies of held frames were taken as duplicates.
#[test]
fn copies_of_held_frames_sent_again_after_deaths_are_not_held_twice() {
    let mut moves = vec![
        137, 181, 122, 109, 152, 22, 212, 113, 1, 54, 181, 60, 40, 174, 61, 36, 77, 221, 89, 12, 89, 229, 22, 133, 201,
        12, 5, 60, 7, 3, 110, 37, 66, 38, 188, 27, 0, 148, 134, 172, 3, 3, 161, 3, 181, 0, 0, 42, 205, 23, 0, 142, 181,
        225, 40, 89, 104, 253, 30, 198, 7, 62, 13, 3, 3, 178, 3, 3, 58, 169, 58, 149, 75, 43, 80, 10, 41, 2, 34, 186,
        91, 2, 141, 105, 145, 11, 75, 2, 43, 11, 49, 232, 9, 46, 2, 139, 49, 2, 39, 39, 14, 14, 39, 2, 29, 0, 14, 39,
        2, 14, 210, 109, 88, 34, 118, 2, 2, 23, 222, 0, 34, 171, 113, 2, 2, 101, 46, 2, 106, 11, 105, 0, 0, 0, 0, 0,
        182, 0, 78, 0, 0, 77, 0, 0, 0, 107, 14, 0, 0, 11, 0, 145, 0, 0, 0, 181, 13, 70, 229, 2, 2, 34, 6, 2, 2, 27, 2,
        2, 2, 2, 75, 123, 6, 2, 2, 2, 230, 213, 2, 2, 7, 2, 181, 2, 171, 34, 18, 18, 2, 2, 2, 18, 71, 21, 2, 7, 97, 2,
        198, 102, 230, 21, 2, 70, 114, 2, 50, 2, 2, 2, 2, 2, 2, 2, 165, 117, 53, 0, 118, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 3, 33, 178, 6,
    ];
    moves.extend([0; 263]);
    let plan = Plan {
        scheme: Scheme::Stripe(ConnChoice::LeastQueued),
        conns: 4,
        sizes: vec![12101, 6880, 5304],
        moves,
        kills: vec![209, 194, 393],
        retire: false,
    };
    let got = run(&plan);
    for (c, g) in got.iter().enumerate() {
        assert_eq!(g.len(), plan.sizes[c], "channel {c}");
    }
}

/// Many channels coming and going: opened, written, closed or reset, re-weighted, read by the
/// receiver's say-so (some rarely, so that they run out of credit), finished and forgotten on
/// both sides, over connections that are slow, die and come back, pinned channels re-balanced.
/// After every step the sender's and the receiver's kept indexes, sums and turn counts must
/// agree with a scan of every channel.
fn churn(scheme: Scheme, conns: usize, moves: &[u16]) {
    let window = 8 * 500;
    let mut tx = Sender::new(SendConfig {
        max_frame: 500,
        channel_buffer: 3000,
        initial_credit: window,
        scheme,
        pin_by_service: true,
    });
    // Leave to open every channel (open credit is tested on its own).
    tx.on_open_credit(u64::MAX);
    let mut rx = Receiver::new(RecvConfig { window: 40 * 500, min_window: window });
    let mut wires: Vec<VecDeque<Bytes>> = vec![VecDeque::new(); conns];
    let mut partial = vec![BytesMut::new(); conns];
    let mut up = vec![true; conns];
    for c in 0..conns {
        tx.connection_up(c);
    }
    let (mut next_id, mut live, mut closed, mut finished) = (1u32, Vec::new(), Vec::new(), BTreeSet::new());
    let weights = [1.0, 0.5, 2.0, 0.8, 3.3, 0.01, 7.0];
    for (step, &m) in moves.iter().enumerate() {
        let pick = |len: usize| (m as usize >> 6) % len.max(1);
        let c = pick(conns);
        match m % 64 {
            0..=3 if live.len() < 60 => {
                tx.open(next_id, weights[pick(weights.len())], m & 1 == 0).unwrap();
                live.push(next_id);
                next_id += 1;
            }
            4..=16 if !live.is_empty() => {
                let id = live[pick(live.len())];
                let chunk = vec![id as u8; 1 + (m as usize >> 4) % 1500];
                tx.write(id, chunk.into()).unwrap();
            }
            17..=18 if !live.is_empty() => {
                let id = live.swap_remove(pick(live.len()));
                if m & 0x100 == 0 {
                    tx.reset(id, "churn".into()).unwrap();
                    rx.abandon(id);
                } else {
                    tx.close(id).unwrap();
                    closed.push(id);
                }
            }
            19 if !live.is_empty() => {
                let id = live[pick(live.len())];
                tx.set_weight(id, weights[(m as usize >> 3) % weights.len()]).unwrap();
            }
            20..=35 => {
                if up[c]
                    && wires[c].len() < 4
                    && let Some(f) = tx.poll_transmit(Nanos(step as u64), c)
                {
                    let mut b = BytesMut::new();
                    f.encode(&mut b);
                    wires[c].push_back(b.freeze());
                }
            }
            // Connection 0 is slow: frames behind its own wait, and the rest overtake them.
            36..=50 if c != 0 || m & 0x8 == 0 => {
                if let Some(b) = wires[c].pop_front() {
                    partial[c].extend_from_slice(&b);
                    while let Some(f) = Frame::decode(&mut partial[c], DEFAULT_MAX_PAYLOAD).unwrap() {
                        // A reset channel's frames may still come: the receiver drops them.
                        let _ = rx.on_frame(Nanos(step as u64), f);
                    }
                }
            }
            51..=57 => {
                // Channels numbered in threes are read rarely, and run out of credit.
                let mut unread = Vec::new();
                while let Some(id) = rx.pop_readable() {
                    if id % 3 != 0 || m & 0x7 == 0 {
                        while let Some(b) = rx.read(id) {
                            assert!(b.iter().all(|x| *x == id as u8));
                        }
                    } else {
                        unread.push(id);
                    }
                }
                // Not read now: the receiver names them again only when more bytes come, so
                // the application keeps them in mind (as the driver does).
                for id in unread {
                    while rx.read(id).is_some() {}
                }
                if m & 0x40 == 0 {
                    rx.flush_acks();
                }
                while let Some(f) = rx.poll_credit() {
                    if let Frame::Credit { channel, ack, limit } = f {
                        tx.on_credit(channel, ack, limit);
                    }
                }
                while let Some(id) = rx.pop_finished() {
                    finished.insert(id);
                }
            }
            58..=59 => {
                let done: Vec<u32> =
                    closed.iter().copied().filter(|id| finished.contains(id) && tx.is_delivered(*id)).collect();
                for id in done {
                    tx.forget(id);
                    assert!(rx.retire(id));
                    closed.retain(|c| *c != id);
                    finished.remove(&id);
                }
                // A reset channel is forgotten once its reset is acknowledged.
                let gone: Vec<u32> = (1..next_id).filter(|id| rx.is_retired(*id) && tx.is_delivered(*id)).collect();
                for id in gone {
                    tx.forget(id);
                }
            }
            60 => {
                if up[c] && up.iter().filter(|u| **u).count() > 1 {
                    up[c] = false;
                    wires[c].clear();
                    partial[c].clear();
                    tx.connection_lost(c);
                    rx.connection_lost();
                } else if !up[c] {
                    up[c] = true;
                    tx.connection_up(c);
                }
            }
            61 => {
                for (k, u) in up.iter().enumerate() {
                    if *u {
                        let rate = 1e5 * (1 + (m as usize >> (k % 8)) % 9) as f64;
                        let view = super::choose::ConnView { rate, rtt_ns: 1, ..Default::default() };
                        tx.set_view(k, view);
                    }
                }
                tx.rebalance();
            }
            _ => {}
        }
        tx.check_invariants();
        rx.check_invariants();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn kept_indexes_agree_with_a_scan_of_every_channel(
        scheme in schemes(),
        conns in 1usize..5,
        moves in proptest::collection::vec(any::<u16>(), 1000..5000),
    ) {
        churn(scheme, conns, &moves);
    }
}

/// Credit in bytes cuts frames to what is left of it, so frames vary in size; the scheduler
/// charges each channel the bytes it sent, so shares stay by weight, in bytes. Three channels
/// (weights 1, 2, 4), always backlogged, windows smaller than two frames (so most frames are
/// cut by credit, to sizes that differ by channel), one connection, the application reading
/// one time in three.
#[test]
fn credit_in_bytes_keeps_shares_by_weight_with_frames_cut_to_the_credit() {
    let max_frame = 1000;
    let mut tx = Sender::new(SendConfig {
        max_frame,
        channel_buffer: 4 * max_frame,
        initial_credit: 1500,
        scheme: Scheme::Stripe(ConnChoice::LeastQueued),
        pin_by_service: true,
    });
    let mut rx = Receiver::new(RecvConfig { window: 3 * 1500, min_window: 1500 });
    // Leave to open every channel (open credit is tested on its own).
    tx.on_open_credit(u64::MAX);
    tx.connection_up(0);
    let weights = [1.0, 2.0, 4.0];
    for (i, w) in weights.iter().enumerate() {
        tx.open(i as u32 + 1, *w, true).unwrap();
    }
    let mut got = [0u64; 3];
    let mut sizes = BTreeSet::new();
    for step in 0..30_000u64 {
        for id in 1..=3u32 {
            let room = tx.capacity(id);
            if room > 0 {
                tx.write(id, Bytes::from(vec![id as u8; room.min(777)])).unwrap();
            }
        }
        if let Some(f) = tx.poll_transmit(Nanos::ZERO, 0) {
            if let Frame::Data { payload, .. } = &f {
                sizes.insert(payload.len());
            }
            rx.on_frame(Nanos(step), f).expect("the sender keeps to its credit");
        }
        if step % 3 == 0 {
            while let Some(id) = rx.pop_readable() {
                while let Some(b) = rx.read(id) {
                    got[id as usize - 1] += b.len() as u64;
                }
            }
        }
        rx.flush_acks();
        while let Some(Frame::Credit { channel, ack, limit }) = rx.poll_credit() {
            tx.on_credit(channel, ack, limit);
        }
        for id in 1..=3u32 {
            assert!(rx.buffered(id).unwrap_or(0) <= 1500 * 4, "channel {id} over its window");
        }
    }
    assert!(sizes.iter().filter(|s| **s < max_frame).count() >= 2, "frames cut to the credit: sizes {sizes:?}");
    let total: u64 = got.iter().sum();
    let wsum: f64 = weights.iter().sum();
    for (i, w) in weights.iter().enumerate() {
        let gap = (got[i] as f64 / total as f64 - w / wsum).abs();
        assert!(
            gap < 0.01,
            "channel {} got {:.3} of the bytes, its weight {:.3}",
            i + 1,
            got[i] as f64 / total as f64,
            w / wsum
        );
    }
}

/// Channels opened under open credit, between an opener and an accepting end whose application
/// accepts when it gets round to it, over connections that die with frames in flight both ways
/// (grants among them). Returns what each channel carried to the accepting application.
fn opens(window: u64, sizes: &[usize], resets: &[bool], conns: usize, moves: &[u8], kills: &[u16]) -> Vec<Vec<u8>> {
    use super::OpenWindow;
    let mut tx = Sender::new(SendConfig {
        max_frame: 300,
        channel_buffer: 1000,
        // Four frames' worth of bytes, as credit is counted in bytes.
        initial_credit: 4 * 300,
        scheme: Scheme::Stripe(ConnChoice::LeastQueued),
        pin_by_service: true,
    });
    let mut rx = Receiver::new(RecvConfig { window: 4 * 300, min_window: 4 * 300 });
    let mut win = OpenWindow::new(window);
    // Both directions of each connection, whole frames in order, and whether it is up.
    let mut ahead: Vec<VecDeque<Frame>> = vec![VecDeque::new(); conns];
    let mut back: Vec<VecDeque<Frame>> = vec![VecDeque::new(); conns];
    let mut up = vec![true; conns];
    for c in 0..conns {
        tx.connection_up(c);
    }
    let n = sizes.len();
    let (mut opened, mut written) = (0usize, vec![0usize; n]);
    // The accepting end: channels arrived and waiting for the application, accepted ones, and
    // what each carried.
    let (mut waiting, mut accepted) = (VecDeque::new(), BTreeSet::new());
    let mut got: Vec<Vec<u8>> = vec![Vec::new(); n];
    let mut reset_seen = BTreeSet::new();
    let mut moves = moves.iter().copied().cycle();
    let id = |k: usize| 2 * k as u32 + 1;
    let index = |id: u32| (id as usize - 1) / 2;
    for step in 0u64.. {
        assert!(
            step < 300_000,
            "stalled: {opened} of {n} opened, {:?} (opened, limit), {} opening at the far end, {} waiting; \
             idle {}, unfinished {:?}, accepted {accepted:?}",
            tx.opens(),
            win.opening(),
            waiting.len(),
            tx.is_idle(),
            (0..n)
                .filter(|k| !(rx.is_retired(id(*k)) || reset_seen.contains(&id(*k))))
                .map(|k| (id(k), tx.stats(id(k)), rx.stats(id(k)), got[k].len(), sizes[k], resets[k]))
                .collect::<Vec<_>>(),
        );
        if kills.iter().any(|k| u64::from(*k % 3000) + 1 == step) {
            let victim = step as usize % conns;
            if up[victim] && up.iter().filter(|u| **u).count() > 1 {
                up[victim] = false;
                ahead[victim].clear();
                back[victim].clear();
                tx.connection_lost(victim);
                rx.connection_lost();
                win.connection_lost();
            }
        }
        if step % 2000 == 1999 {
            for (c, u) in up.iter_mut().enumerate() {
                if !*u {
                    *u = true;
                    tx.connection_up(c);
                }
            }
        }
        let m = moves.next().expect("cycled");
        let c = (m as usize >> 3) % conns;
        match m % 8 {
            // The opener opens its next channel if it has leave, and is refused if not.
            0 if opened < n => {
                let may = tx.may_open();
                match tx.open(id(opened), 1.0, true) {
                    Ok(()) => {
                        assert!(may);
                        if sizes[opened] == 0 {
                            tx.close(id(opened)).unwrap();
                        }
                        if resets[opened] {
                            tx.reset(id(opened), "given up".into()).unwrap();
                        }
                        opened += 1;
                    }
                    Err(e) => assert!(!may && matches!(e, super::SendError::NoOpenCredit { .. }), "{e}"),
                }
            }
            1 => {
                // The first channel from the one the move names that has bytes left to write.
                let left = |k: usize| k < opened && !resets[k] && written[k] < sizes[k];
                if let Some(k) = (0..n).map(|i| (i + (m as usize >> 3)) % n).find(|k| left(*k)) {
                    let chunk: Vec<u8> = (written[k]..sizes[k].min(written[k] + 700)).map(|i| byte(id(k), i)).collect();
                    written[k] += tx.write(id(k), chunk.into()).unwrap();
                    if written[k] == sizes[k] {
                        tx.close(id(k)).unwrap();
                    }
                }
            }
            2 | 3 => {
                if up[c]
                    && ahead[c].len() < 4
                    && let Some(f) = tx.poll_transmit(Nanos(step), c)
                {
                    ahead[c].push_back(f);
                }
            }
            // The accepting end takes a frame: a channel it has not seen (nor forgotten) is one
            // the peer opened, and must have had leave.
            4 => {
                if let Some(f) = ahead[c].pop_front() {
                    let ch = f.channel();
                    let new = !accepted.contains(&ch) && !waiting.contains(&ch) && !rx.is_retired(ch);
                    let reset_first = matches!(f, Frame::Reset { .. });
                    rx.on_frame(Nanos(step), f).expect("the opener keeps to its data credit");
                    if new {
                        win.on_open().expect("the opener keeps to its open credit");
                        if reset_first {
                            // Abandoned before anything else of it came: settled at once.
                            win.settle(1);
                        } else {
                            waiting.push_back(ch);
                        }
                    }
                    while let Some((ch, _)) = rx.poll_reset() {
                        reset_seen.insert(ch);
                    }
                }
            }
            // The accepting application accepts, now and then, and reads what it accepted.
            5 => {
                if m & 0x20 == 0
                    && let Some(ch) = waiting.pop_front()
                {
                    accepted.insert(ch);
                    win.settle(1);
                }
                for &ch in &accepted {
                    while let Some(b) = rx.read(ch) {
                        got[index(ch)].extend_from_slice(&b);
                    }
                }
                let done: Vec<u32> = accepted.iter().copied().filter(|ch| rx.is_finished(*ch)).collect();
                for ch in done {
                    assert!(rx.retire(ch));
                    accepted.remove(&ch);
                }
                rx.flush_acks();
            }
            // Credit and leave back, on a connection that is up.
            6 => {
                if up[c] {
                    back[c].extend(std::iter::from_fn(|| rx.poll_credit()));
                    back[c].extend(win.poll_grant());
                }
            }
            _ => {
                if let Some(f) = back[c].pop_front() {
                    match f {
                        Frame::Credit { channel, ack, limit } => tx.on_credit(channel, ack, limit),
                        Frame::OpenCredit { limit } => tx.on_open_credit(limit),
                        other => panic!("{other:?} on the way back"),
                    }
                }
            }
        }
        // Leave is never more than the window beyond what the accepting application settled.
        assert!(win.opening() <= win.window());
        assert!(tx.opens().0 <= tx.opens().1);
        assert!(tx.opens().1 <= win.limit(), "the opener's limit {:?} beyond the far end's", tx.opens());
        for k in 0..opened {
            if tx.is_delivered(id(k)) && (accepted.contains(&id(k)) || rx.is_retired(id(k))) {
                tx.forget(id(k));
            }
        }
        let finished = (0..n).all(|k| rx.is_retired(id(k)) || reset_seen.contains(&id(k)));
        if opened == n && finished && waiting.is_empty() && tx.is_idle() {
            break;
        }
    }
    assert_eq!(win.limit(), n as u64 + win.window(), "every channel's credit came back");
    got
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// The opener never has more channels opening than the accepting end's window, credit comes
    /// back as the application accepts (or the channel is abandoned), and nothing is lost when
    /// connections die with data, leave or credit in flight.
    #[test]
    fn channels_open_within_the_window_and_every_one_carries_its_bytes(
        window in 1u64..6,
        channels in proptest::collection::vec((0usize..1500, proptest::bool::weighted(0.15)), 1..30),
        conns in 1usize..4,
        moves in proptest::collection::vec(any::<u8>(), 500..2000),
        kills in proptest::collection::vec(any::<u16>(), 0..4),
    ) {
        let (sizes, resets): (Vec<usize>, Vec<bool>) = channels.into_iter().unzip();
        let got = opens(window, &sizes, &resets, conns, &moves, &kills);
        for k in 0..sizes.len() {
            if resets[k] {
                continue;
            }
            let want: Vec<u8> = (0..sizes[k]).map(|i| byte(2 * k as u32 + 1, i)).collect();
            prop_assert!(got[k] == want, "channel {}: {} bytes of {}", 2 * k + 1, got[k].len(), sizes[k]);
        }
    }
}
