//! Writes `data/traces/sample.pcap`, the small capture the README and tests replay: TCP
//! connections between made-up hosts with heavy-tailed packet counts (a few elephants, many
//! mice), Poisson connection arrivals, and a packet-size mix of pure ACKs, small and full-size
//! segments. Payloads are filler bytes: this trace is for placement and timing, not for
//! classification (the runtime's labelled generator is the one for that).
//!
//! Run: `cargo run -p switchyard-ingest --example make_sample_trace [OUT] [CONNECTIONS]`

use std::time::Duration;

use etherparse::PacketBuilder;
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Pareto};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = args.next().unwrap_or_else(|| "data/traces/sample.pcap".into());
    let connections: u32 = args.next().map_or(Ok(600), |s| s.parse())?;
    let mut rng = ChaCha8Rng::seed_from_u64(2010);
    let arrivals = Exp::new(2_000.0)?; // connections per second
    let gaps = Exp::new(1.0 / 0.002)?; // 2 ms between a connection's packets
    let lengths = Pareto::new(1.0, 1.2)?;
    let mut packets: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut t = 1_700_000_000.0_f64;
    for i in 0..connections {
        t += arrivals.sample(&mut rng);
        let client = [10, 1, (i >> 8) as u8, i as u8];
        let server = [192, 0, 2, 1 + (i % 16) as u8];
        let cport = 20_000 + (i % 40_000) as u16;
        let sport = [80, 443, 25, 22, 53, 8080][i as usize % 6];
        let n = (lengths.sample(&mut rng) as u32).clamp(1, 300);
        let mut at = t;
        for k in 0..n {
            let from_client = k == 0 || rng.random::<f64>() < 0.5;
            let len = match rng.random::<f64>() {
                x if x < 0.25 => 0,
                x if x < 0.55 => rng.random_range(20..200),
                x if x < 0.65 => 536,
                _ => 1448,
            };
            let payload = vec![b'a' + (k % 26) as u8; len];
            let (src, dst, sp, dp) =
                if from_client { (client, server, cport, sport) } else { (server, client, sport, cport) };
            let mut frame = Vec::with_capacity(len + 54);
            PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
                .ipv4(src, dst, 64)
                .tcp(sp, dp, 1_000 + k * 1_448, 65_535)
                .write(&mut frame, &payload)?;
            packets.push(((at * 1e6) as u64, frame));
            at += gaps.sample(&mut rng);
        }
    }
    packets.sort_by_key(|p| p.0);
    let header = PcapHeader { datalink: DataLink::ETHERNET, ..PcapHeader::default() };
    let mut w = PcapWriter::with_header(std::io::BufWriter::new(std::fs::File::create(&out)?), header)?;
    for (us, frame) in &packets {
        w.write_packet(&PcapPacket::new(Duration::from_micros(*us), frame.len() as u32, frame))?;
    }
    eprintln!("wrote {out}: {} packets of {connections} connections", packets.len());
    Ok(())
}
