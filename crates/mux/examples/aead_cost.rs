//! What the TLS records' crypto costs alone on this machine, in CPU ns per KB of payload: each
//! AEAD TLS 1.3 negotiates, sealed and opened in place in 16 KiB records as `record.rs` makes
//! them, on one thread, with ring and (built with `--features aws-lc`) with aws-lc-rs.
//! `bench mux`'s TLS case counts both ends of every record in one process, so its crypto per
//! byte delivered is the seal's plus the open's; set against plain striping's CPU per byte,
//! that says how close TLS can come to plain.
//!
//! `cargo run --release -p switchyard-mux --features aws-lc --example aead_cost [SECONDS]`
//!
//! Measured (a KVM VM of 2 cores of an Intel Xeon with aes, vaes, vpclmulqdq and avx512f, not
//! the AMD EPYC of earlier notes; load 10–13, thread CPU time, so little moved by the load),
//! both ends' ns/KB (seal + open), two runs:
//!
//! | AEAD              | ring 0.17.14            | aws-lc-rs 1.19.0 (aws-lc-sys 0.47.0) |
//! |-------------------|-------------------------|--------------------------------------|
//! | AES-128-GCM       | 157–165 (81–85 + 76–80) | 120–123 (58–59 + 62–64)              |
//! | AES-256-GCM       | 204 (105 + 99)          | 151 (73 + 78)                        |
//! | ChaCha20-Poly1305 | 840                     | 869                                  |
//!
//! (Opened in place, without the move over the header, aws-lc-rs's AES-128-GCM took 118–130
//! and ring's 168–174 at load 10–15: the move costs aws-lc-rs a few ns/KB.)
//!
//! aws-lc-rs's AES-GCM costs 0.74–0.77× ring's: faster, not the twice as fast that would put
//! the crypto alone at a quarter of plain striping's cost. With both ends in one process on
//! two busy cores, rate goes as the inverse of CPU per byte, so TLS ÷ plain is at most
//! plain / (plain + crypto). `bench mux --cases stripe,stripe-tls --rounds 3 --seconds 9`,
//! three runs with each library alternated at load 4–6: plain striping 290–401 ns/KB, so that
//! ceiling is 0.71–0.77 with aws-lc-rs's AES-128-GCM; TLS cost 222–240 ns/KB over plain with
//! it, against 275–317 with ring's AES-256-GCM (what rustls negotiated before the mux put
//! AES-128-GCM first), so TLS ÷ plain by CPU per byte was 0.56–0.64 against 0.50–0.55, by
//! rate 0.52–0.83 (median 0.66) against 0.39–0.58 (median 0.42). 0.8 would need TLS to cost
//! at most a quarter of plain, 75–100 ns/KB for everything: less than either library's crypto
//! alone; the other ~110 ns/KB is the records' own work (headers, the plaintext moved over
//! headers and tags, the hand-over to and from the connection's task). Between two hosts each
//! end's crypto has cores of its own and runs beside the network's limit instead.
//!
//! aws-lc-rs builds with the `cc` crate and the system C compiler alone (no CMake, no NASM on
//! x86_64 Linux): in a scratch project, 1 min 38 s of wall time (52 s of CPU) on 2 cores at
//! load 2–6.

use std::time::{Duration, Instant};

/// A TLS 1.3 record's largest plaintext (RFC 8446 §5.1).
const RECORD: usize = 16 << 10;
/// A record's header (RFC 8446 §5.1).
const HEADER: usize = 5;

fn cpu_now() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a pointer to a live timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Records sealed, then opened, between two readings of the CPU clock (a reading is a system
/// call: once a record, it would be counted in the cost).
const BATCH: usize = 64;

/// One library's key, used as `record.rs` uses it: sealed in place with the tag appended,
/// opened with the plaintext moved over the header before it (`open_within`): ring decrypts
/// and moves in one pass, aws-lc-rs 1.19 decrypts in place, then copies the plaintext.
trait Key {
    fn seal(&self, nonce: [u8; 12], aad: [u8; 5], record: &mut Vec<u8>);
    fn open(&self, nonce: [u8; 12], aad: [u8; 5], record: &mut Vec<u8>);
}

impl Key for ring::aead::LessSafeKey {
    fn seal(&self, nonce: [u8; 12], aad: [u8; 5], record: &mut Vec<u8>) {
        use ring::aead::{Aad, Nonce};
        let tag = self.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), record);
        record.extend_from_slice(tag.expect("sealed").as_ref());
    }
    fn open(&self, nonce: [u8; 12], aad: [u8; 5], record: &mut Vec<u8>) {
        use ring::aead::{Aad, Nonce};
        let plain = self.open_within(Nonce::assume_unique_for_key(nonce), Aad::from(aad), record, HEADER..);
        let plain = plain.expect("opened").len();
        record.truncate(plain);
    }
}

#[cfg(feature = "aws-lc")]
impl Key for aws_lc_rs::aead::LessSafeKey {
    fn seal(&self, nonce: [u8; 12], aad: [u8; 5], record: &mut Vec<u8>) {
        use aws_lc_rs::aead::{Aad, Nonce};
        let tag = self.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), record);
        record.extend_from_slice(tag.expect("sealed").as_ref());
    }
    fn open(&self, nonce: [u8; 12], aad: [u8; 5], record: &mut Vec<u8>) {
        use aws_lc_rs::aead::{Aad, Nonce};
        let plain = self.open_within(Nonce::assume_unique_for_key(nonce), Aad::from(aad), record, HEADER..);
        let plain = plain.expect("opened").len();
        record.truncate(plain);
    }
}

/// CPU ns per KB to seal, then to open, `RECORD`-byte records for about `seconds`.
fn measure(key: &dyn Key, seconds: f64) -> (f64, f64) {
    let mut records: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0x5au8; RECORD]).collect();
    let aad = [23u8, 3, 3, 0x40, 0x11];
    let nonce = |i: usize| [i as u8; 12];
    let (mut seal_cpu, mut open_cpu, mut done) = (Duration::ZERO, Duration::ZERO, 0u64);
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds {
        let t = cpu_now();
        for (i, r) in records.iter_mut().enumerate() {
            key.seal(nonce(i), aad, r);
        }
        let sealed = cpu_now();
        // Room for the header before each record, as it arrives: `record.rs` opens a record's
        // plaintext over its header (and over the headers and tags before it in the buffer).
        for r in &mut records {
            r.splice(0..0, [0; HEADER]);
        }
        let shifted = cpu_now();
        for (i, r) in records.iter_mut().enumerate() {
            key.open(nonce(i), aad, r);
        }
        let opened = cpu_now();
        seal_cpu += sealed - t;
        open_cpu += opened - shifted;
        done += BATCH as u64;
    }
    let kb = (done * RECORD as u64) as f64 / 1000.0;
    (seal_cpu.as_nanos() as f64 / kb, open_cpu.as_nanos() as f64 / kb)
}

/// The AEADs TLS 1.3 negotiates (RFC 8446 §B.4), by name.
const SUITES: [&str; 3] = ["AES-128-GCM", "AES-256-GCM", "ChaCha20-Poly1305"];

/// A key of one library for the named AEAD.
type MakeKey = fn(&str) -> Box<dyn Key>;

fn ring_key(suite: &str) -> Box<dyn Key> {
    use ring::aead::{AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305, LessSafeKey, UnboundKey};
    let alg = match suite {
        "AES-128-GCM" => &AES_128_GCM,
        "AES-256-GCM" => &AES_256_GCM,
        _ => &CHACHA20_POLY1305,
    };
    Box::new(LessSafeKey::new(UnboundKey::new(alg, &vec![7u8; alg.key_len()]).expect("a key of its length")))
}

#[cfg(feature = "aws-lc")]
fn aws_lc_key(suite: &str) -> Box<dyn Key> {
    use aws_lc_rs::aead::{AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305, LessSafeKey, UnboundKey};
    let alg = match suite {
        "AES-128-GCM" => &AES_128_GCM,
        "AES-256-GCM" => &AES_256_GCM,
        _ => &CHACHA20_POLY1305,
    };
    Box::new(LessSafeKey::new(UnboundKey::new(alg, &vec![7u8; alg.key_len()]).expect("a key of its length")))
}

fn main() {
    let seconds: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    println!("{RECORD}-byte records, CPU ns per KB of payload (thread CPU time)");
    let libraries: &[(&str, MakeKey)] = &[
        ("ring", ring_key),
        #[cfg(feature = "aws-lc")]
        ("aws-lc-rs", aws_lc_key),
    ];
    if cfg!(not(feature = "aws-lc")) {
        println!("(aws-lc-rs not built: add `--features aws-lc` to compare it)");
    }
    for suite in SUITES {
        for (library, key) in libraries {
            let (seal, open) = measure(&*key(suite), seconds);
            println!("{suite:<17} {library:<9}: seal {seal:>4.0}, open {open:>4.0}, both ends {:>4.0}", seal + open);
        }
    }
}
