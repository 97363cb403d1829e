//! A session across an emulated 10 Mb/s, 50 ms-RTT RED bottleneck (Iwashima's testbed, §4),
//! against a competing TCP flow: real congestion control, end to end. Skips, saying so, where
//! namespaces cannot be made.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use switchyard_linkem::{Dumbbell, LinkConfig, LinkemError};
use switchyard_mux::{ConnChoice, Listener, MuxConfig, Scheme, SendConfig, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

#[test]
fn channels_share_a_real_bottleneck_by_weight_and_the_session_takes_more_than_one_flow() {
    let d = match Dumbbell::new(LinkConfig::default(), LinkConfig { seed: 2, ..LinkConfig::default() }) {
        Ok(d) => d,
        Err(LinkemError::Unavailable(why)) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let weights = [1.0, 2.0, 4.0];
    let m = 3;
    // Measured over this long, after 2 s of warm-up.
    let seconds = 6.0;
    // 16 KiB frames and socket mark, as `reproduce iwashima-m` keeps on its emulated links: on
    // this ~8 Mbit/s bottleneck a 64 KiB frame (the loopback default) is 64 ms of link, the
    // six seconds hold about 90 of them, and what reordering holds back at the window's two
    // ends moved the shares the application read by 3 points in a CI run where what arrived
    // was within 1.5 of the weights and the sender lost no turn.
    let config = MuxConfig {
        key: b"emulated link test key".to_vec(),
        connections: m,
        send: SendConfig {
            scheme: Scheme::Stripe(ConnChoice::LeastQueued),
            max_frame: 16 << 10,
            ..MuxConfig::default().send
        },
        notsent_lowat: 16 << 10,
        ..MuxConfig::default()
    };
    let mux_addr = SocketAddr::from((Dumbbell::RIGHT, 7100));
    let flow_addr = SocketAddr::from((Dumbbell::RIGHT, 7101));
    // The far side: the session's receiver, and a sink for the competing flow; reports bytes.
    let server_config = config.clone();
    let (listening, ready) = std::sync::mpsc::sync_channel(1);
    let server = d.right.spawn(move || {
        runtime().block_on(async move {
            let mut listener = Listener::bind(mux_addr, server_config).await.unwrap();
            let sink = tokio::net::TcpListener::bind(flow_addr).await.unwrap();
            let _ = listening.send(());
            // Counters sampled at the same two moments for everyone: the channels open one
            // after another, and slow start is no steady state.
            let count = |n: &Arc<AtomicU64>, k: usize| n.fetch_add(k as u64, Ordering::Relaxed);
            let flow_bytes = Arc::new(AtomicU64::new(0));
            let fb = Arc::clone(&flow_bytes);
            tokio::spawn(async move {
                let (mut s, _) = sink.accept().await.unwrap();
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(k) = s.read(&mut buf).await {
                    if k == 0 {
                        break;
                    }
                    count(&fb, k);
                }
            });
            let session = listener.accept().await.unwrap();
            let mut counters = Vec::new();
            for _ in 0..3 {
                let mut ch = session.accept().await.unwrap();
                let n = Arc::new(AtomicU64::new(0));
                counters.push((ch.id(), Arc::clone(&n)));
                tokio::spawn(async move {
                    while let Ok(Some(b)) = ch.recv().await {
                        count(&n, b.len());
                    }
                });
            }
            counters.sort_by_key(|(id, _)| *id);
            let snapshot = || {
                (
                    counters.iter().map(|(_, n)| n.load(Ordering::Relaxed)).collect::<Vec<_>>(),
                    flow_bytes.load(Ordering::Relaxed),
                )
            };
            // Bytes arrived per channel, in order or not (delivered + held for reordering).
            let arrived = |r: switchyard_mux::SessionReport| {
                let mut v: Vec<(u32, u64)> =
                    r.channels.iter().map(|c| (c.id, c.received.delivered_bytes + c.received.held_bytes)).collect();
                v.sort();
                v.into_iter().map(|(_, b)| b).collect::<Vec<_>>()
            };
            tokio::time::sleep(Duration::from_secs(2)).await;
            let (c0, f0) = snapshot();
            let a0 = arrived(session.report().await.unwrap());
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            let (c1, f1) = snapshot();
            let a1 = arrived(session.report().await.unwrap());
            let per_channel: Vec<(u32, u64)> =
                counters.iter().zip(c0.iter().zip(&c1)).map(|((id, _), (a, b))| (*id, b - a)).collect();
            let arr: Vec<u64> = a0.iter().zip(&a1).map(|(a, b)| b - a).collect();
            let at: u64 = arr.iter().sum();
            let arrived_shares: Vec<f64> = arr.iter().map(|x| *x as f64 / at as f64).collect();
            (per_channel, f1 - f0, arrived_shares)
        })
    });
    // The client starts once the far side listens (not after a fixed pause, too short under load).
    ready.recv_timeout(Duration::from_secs(30)).expect("the far side listening");
    let client = d.left.spawn(move || {
        runtime().block_on(async move {
            let session = Session::connect(mux_addr, config).await.unwrap();
            let mut flow = tokio::net::TcpStream::connect(flow_addr).await.unwrap();
            let competing = tokio::spawn(async move {
                let chunk = vec![0u8; 1 << 16];
                while flow.write_all(&chunk).await.is_ok() {}
            });
            let chunk = Bytes::from(vec![0u8; 1 << 16]);
            let mut writers = Vec::new();
            for w in weights {
                let ch = session.open(w, true).await.unwrap();
                let chunk = chunk.clone();
                writers.push(tokio::spawn(async move { while ch.send(chunk.clone()).await.is_ok() {} }));
            }
            // The sender's own account over (about) the far side's window: turns each channel
            // lost for want of bytes from its writer (idle) or of credit (blocked). A weighted
            // queue keeps weights only among channels with bytes waiting, so a starved writer
            // moves the shares; these say whether one did.
            let turns = |r: switchyard_mux::SessionReport| {
                let mut v: Vec<(u32, u64, u64)> =
                    r.channels.iter().map(|c| (c.id, c.sent.idle_turns, c.sent.blocked_turns)).collect();
                v.sort();
                v
            };
            tokio::time::sleep(Duration::from_secs(2)).await;
            let t0 = turns(session.report().await.unwrap());
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            let t1 = turns(session.report().await.unwrap());
            tokio::time::sleep(Duration::from_millis(500)).await;
            competing.abort();
            for w in writers {
                w.abort();
            }
            t0.iter().zip(&t1).map(|(a, b)| (b.1 - a.1, b.2 - a.2)).collect::<Vec<(u64, u64)>>()
        })
    });
    let (per_channel, flow, arrived) = server.join().unwrap().unwrap();
    let lost_turns = client.join().unwrap().unwrap();
    let total: u64 = per_channel.iter().map(|(_, n)| n).sum();
    let w: f64 = weights.iter().sum();
    let shares: Vec<f64> = per_channel.iter().map(|(_, n)| *n as f64 / total as f64).collect();
    let session_share = total as f64 / (total + flow) as f64;
    eprintln!(
        "session {:.2} Mb/s, competing flow {:.2} Mb/s: session share {session_share:.3} (model m/(m+k) = {:.3}); channel shares {shares:?} (arrived, in order or not: {arrived:?}; targets {:?}); turns lost by the sender (idle, blocked) {lost_turns:?}; link {:?}",
        total as f64 * 8.0 / seconds / 1e6,
        flow as f64 * 8.0 / seconds / 1e6,
        m as f64 / (m as f64 + 1.0),
        weights.iter().map(|x| x / w).collect::<Vec<_>>(),
        d.stats()
    );
    for (s, wi) in shares.iter().zip(weights) {
        // The shares the application read, and beside them what arrived in order or not: a
        // failure seen once (heaviest 0.609 against 0.571) did not come back in 30 runs; if it
        // does, the two say whether the scheduler or reordering and reading moved the share.
        assert!(
            (s - wi / w).abs() < 0.03,
            "shares read {shares:?} (arrived {arrived:?}) against weights {weights:?}; turns lost by the sender (idle, blocked) {lost_turns:?}"
        );
    }
    assert!(session_share > 0.5, "three connections take more than one flow: {session_share:.3}");
}
