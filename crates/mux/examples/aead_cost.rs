//! What the TLS records' crypto costs alone on this machine, in CPU ns per KB of payload:
//! AES-128-GCM (what rustls negotiates here) sealed and opened with ring in place, in 16 KiB
//! records as `record.rs` makes them, on one thread. `bench mux`'s TLS case counts both ends of
//! every record in one process, so its crypto per byte delivered is the seal's plus the open's;
//! set against plain striping's CPU per byte, that says how close TLS can come to plain.
//!
//! `cargo run --release -p switchyard-mux --example aead_cost [SECONDS]`
//!
//! Measured (AMD EPYC, 2 cores, vaes and vpclmulqdq: ring 0.17.14 takes its VAES/VPCLMULQDQ AVX2
//! path; load 15, thread CPU time, so little moved by the load): AES-128-GCM seal 109 ns/KB, open
//! 102–103, both ends 211–212; AES-256-GCM 237. In the same hour `bench mux` (load 15–17) put
//! plain striping at 433–502 ns/KB. With both ends in one process on two busy cores, rate goes
//! as the inverse of CPU per byte, so TLS at 0.8× plain's rate leaves the crypto 0.25× plain's
//! cost, 108–125 ns/KB for both ends: ring's 211 is 1.7–2× that before any copy into records,
//! and plain / (plain + crypto) = 0.67–0.70 is the most this bench can show with it (it showed
//! 0.51–0.63). What would meet 0.8: an AES-GCM about twice as fast as ring's here (aws-lc has
//! AVX-512 code for it, not measured here; aws-lc-rs ≥ 1.7 builds for x86_64 Linux with a C
//! compiler alone, no CMake, by its own requirements page, but it is not among the crates the
//! workspace has and was not tried), or each end with cores of its own, as between two hosts,
//! where the crypto runs beside the network's limit rather than in place of the other end's
//! work.

use std::time::{Duration, Instant};

use ring::aead::{AES_128_GCM, AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

/// A TLS 1.3 record's largest plaintext (RFC 8446 §5.1).
const RECORD: usize = 16 << 10;

fn cpu_now() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a pointer to a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Records sealed, then opened, between two readings of the CPU clock (a reading is a system
/// call: once a record, it would be counted in the cost).
const BATCH: usize = 64;

/// CPU ns per KB to seal, then to open, `RECORD`-byte records for about `seconds`.
fn measure(alg: &'static ring::aead::Algorithm, seconds: f64) -> (f64, f64) {
    let key = LessSafeKey::new(UnboundKey::new(alg, &vec![7u8; alg.key_len()]).expect("a key of its length"));
    let mut records: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0x5au8; RECORD]).collect();
    let aad = [23u8, 3, 3, 0x40, 0x11];
    let nonce = |i: usize| Nonce::assume_unique_for_key([i as u8; 12]);
    let (mut seal_cpu, mut open_cpu, mut done) = (Duration::ZERO, Duration::ZERO, 0u64);
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds {
        let t = cpu_now();
        for (i, r) in records.iter_mut().enumerate() {
            let tag = key.seal_in_place_separate_tag(nonce(i), Aad::from(aad), r).expect("sealed");
            r.extend_from_slice(tag.as_ref());
        }
        let sealed = cpu_now();
        for (i, r) in records.iter_mut().enumerate() {
            let plain = key.open_in_place(nonce(i), Aad::from(aad), r).expect("opened").len();
            r.truncate(plain);
        }
        let opened = cpu_now();
        seal_cpu += sealed - t;
        open_cpu += opened - sealed;
        done += BATCH as u64;
    }
    let kb = (done * RECORD as u64) as f64 / 1000.0;
    (seal_cpu.as_nanos() as f64 / kb, open_cpu.as_nanos() as f64 / kb)
}

fn main() {
    let seconds: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    println!("ring AEAD, {RECORD}-byte records, CPU ns per KB of payload (thread CPU time)");
    for (name, alg) in [("AES-128-GCM", &AES_128_GCM), ("AES-256-GCM", &AES_256_GCM)] {
        let (seal, open) = measure(alg, seconds);
        println!("{name}: seal {seal:.0}, open {open:.0}, both ends {:.0}", seal + open);
    }
}
