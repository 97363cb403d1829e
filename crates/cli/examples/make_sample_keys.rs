//! Writes `data/keys/sample-flows.txt`, the key sample `switchyard place` uses by default.
//!
//! Synthetic, so it can ship with the code: 1,500 flows between clients in 10.1.0.0/16 and
//! 40 servers, 85% TCP (ports 443, 80, 22, 25, 8080) and 15% UDP (port 53, 123), with heavy-tailed
//! packet counts (Pareto, shape 1.2, at least 1, at most 2,000) and packets interleaved in time
//! order, one line per packet. Run: `cargo run -p switchyard --example make_sample_keys`.

use std::fmt::Write as _;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Pareto};

fn main() -> std::io::Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(2010);
    let pareto = Pareto::new(1.0, 1.2).expect("valid Pareto parameters");
    let mut packets: Vec<(u64, String)> = Vec::new();
    for _ in 0..1500 {
        let tcp = rng.random_bool(0.85);
        let (proto, port) = if tcp {
            ("tcp", [443, 443, 443, 80, 80, 22, 25, 8080][rng.random_range(0..8)])
        } else {
            ("udp", [53, 53, 123][rng.random_range(0..3)])
        };
        let client = format!(
            "10.1.{}.{}:{}",
            rng.random_range(0..256),
            rng.random_range(1..255),
            rng.random_range(32768..61000)
        );
        let server = format!("192.0.2.{}:{port}", rng.random_range(1..41));
        let count = (pareto.sample(&mut rng) as u64).clamp(1, 2000);
        let start = rng.random_range(0..1_000_000u64);
        let gap = rng.random_range(50..5_000u64);
        for k in 0..count {
            let line =
                if k % 2 == 0 { format!("{proto} {client} {server}") } else { format!("{proto} {server} {client}") };
            packets.push((start + k * gap, line));
        }
    }
    packets.sort();
    let mut out = String::from(
        "# switchyard key sample: one packet per line, PROTO SRC DST (both directions of each flow).\n\
         # Synthetic; made by `cargo run -p switchyard --example make_sample_keys`.\n",
    );
    for (_, l) in &packets {
        writeln!(out, "{l}").expect("writing to a String");
    }
    let path = std::env::args().nth(1).unwrap_or_else(|| "data/keys/sample-flows.txt".into());
    std::fs::write(&path, out)?;
    eprintln!("wrote {} packets to {path}", packets.len());
    Ok(())
}
