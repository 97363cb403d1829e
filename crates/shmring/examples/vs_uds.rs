//! The ring against a Unix domain socket pair, one writer thread and one reader thread in the
//! same process, messages of 16 KiB to 2 MiB: XenSocket's comparison (notes 004a §10 (d):
//! +33% over UDS at 2 MB, 33% below it at 16 KB) on one modern host.
//!
//! `cargo run --release -p switchyard-shmring --example vs_uds [MiB per point] [runs]`
//!
//! Like netperf there, the writer sends the same buffer again and again and the reader
//! receives whole messages into one buffer; each point is the median of `runs` runs.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Instant;

use switchyard_shmring::channel;

const SIZES: [usize; 8] = [16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20];

fn main() {
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().map_or(512, |a| a.parse().expect("MiB per point"));
    let runs: usize = args.next().map_or(3, |a| a.parse().expect("runs"));
    println!("{mib} MiB per point, median of {runs} runs, Gb/s");
    println!("{:>9} {:>9} {:>11} {:>9} {:>12} {:>12}", "message", "uds", "ring 128K", "ratio", "ring 4M", "ratio");
    for size in SIZES {
        let count = (mib << 20) / size;
        let uds = median(runs, || uds(size, count));
        let small = median(runs, || ring(size, count, 128 << 10));
        let large = median(runs, || ring(size, count, 4 << 20));
        println!(
            "{:>8}K {uds:>9.1} {small:>11.1} {:>9.2} {large:>12.1} {:>12.2}",
            size >> 10,
            small / uds,
            large / uds
        );
    }
}

fn median(runs: usize, mut f: impl FnMut() -> f64) -> f64 {
    let mut v: Vec<f64> = (0..runs).map(|_| f()).collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn gbps(bytes: usize, start: Instant) -> f64 {
    bytes as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9
}

/// The ring with a data area of `capacity` bytes (XenSocket's was 128 KB).
fn ring(size: usize, count: usize, capacity: usize) -> f64 {
    let (mut writer, mut reader) = channel(capacity).expect("ring");
    let start = Instant::now();
    let sender = std::thread::spawn(move || {
        let msg = vec![0x5au8; size];
        for _ in 0..count {
            writer.write_all(&msg).expect("ring write");
        }
    });
    let mut buf = vec![0u8; size];
    for _ in 0..count {
        let mut got = 0;
        while got < size {
            got += reader.read(&mut buf[got..]).expect("ring read");
        }
    }
    let rate = gbps(size * count, start);
    sender.join().expect("writer thread");
    rate
}

/// A connected `AF_UNIX` stream pair with the kernel's default buffers.
fn uds(size: usize, count: usize) -> f64 {
    let (mut tx, mut rx) = UnixStream::pair().expect("socketpair");
    let start = Instant::now();
    let sender = std::thread::spawn(move || {
        let msg = vec![0x5au8; size];
        for _ in 0..count {
            tx.write_all(&msg).expect("uds write");
        }
    });
    let mut buf = vec![0u8; size];
    for _ in 0..count {
        rx.read_exact(&mut buf).expect("uds read");
    }
    let rate = gbps(size * count, start);
    sender.join().expect("writer thread");
    rate
}
