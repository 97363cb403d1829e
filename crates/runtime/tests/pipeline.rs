//! The parallel pipeline agrees with the serial one, connection by connection, whatever the
//! policy and the number of workers, and accounts for every packet.

use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{Policy, WorkerId};
use switchyard_ingest::{CaptureReader, ConnConfig, SliceReader};
use switchyard_runtime::inspect::{Engine, Inspector};
use switchyard_runtime::pipeline::{OnFull, PipelineConfig, run};
use switchyard_runtime::serial::{Verdict, inspect_serial};
use switchyard_runtime::tracegen::{TraceSpec, generate};

fn trace() -> Vec<u8> {
    let mut pcap = Vec::new();
    generate(&TraceSpec { connections: 300, elephants: 0.03, seed: 7, ..TraceSpec::default() }, &mut pcap).unwrap();
    pcap
}

#[test]
fn any_policy_and_any_worker_count_gives_the_serial_verdicts() {
    let pcap = trace();
    let inspector = Inspector::new();
    let serial = inspect_serial(CaptureReader::new(&pcap[..]).unwrap(), ConnConfig::default(), &inspector).unwrap();
    let verdicts = |s: &switchyard_runtime::serial::Summary| {
        s.conns.iter().map(|c| (c.id, c.key, c.verdict, c.tls.clone())).collect::<Vec<_>>()
    };
    for policy in [Policy::RoundRobin, Policy::Hrw, Policy::Ahrw, Policy::Affinity, Policy::Bounded] {
        for workers in [1u32, 2, 4] {
            let ids: Vec<WorkerId> = (0..workers).map(WorkerId).collect();
            let mut placer = place::build(policy, &PlaceConfig::default(), &ids).unwrap();
            let config = PipelineConfig { queue_capacity: 4, pin: false, ..PipelineConfig::default() };
            let r = run(SliceReader::new(&pcap).unwrap(), placer.as_mut(), &config, &inspector).unwrap();
            assert_eq!(verdicts(&r.summary), verdicts(&serial), "{policy} on {workers}");
            let s = &r.summary;
            assert_eq!(s.packets, serial.packets);
            assert_eq!(s.inspected + s.skipped_classified + s.marked, s.packets, "{policy} on {workers}");
            assert_eq!(r.dropped, 0);
            if policy == Policy::Affinity || workers == 1 {
                assert_eq!((r.migrations, r.workers.iter().map(|w| w.duplicated).sum::<u64>()), (0, 0));
            }
        }
    }
}

#[test]
fn the_sequential_kernel_gives_the_same_results_serially_and_on_workers() {
    let pcap = trace();
    let combined = Inspector::new();
    let sequential = Inspector::with_engine(Engine::Sequential);
    let rows = |s: &switchyard_runtime::serial::Summary| {
        s.conns.iter().map(|c| (c.id, c.key, c.verdict, c.matched_at, c.tls.clone())).collect::<Vec<_>>()
    };
    let reference = inspect_serial(CaptureReader::new(&pcap[..]).unwrap(), ConnConfig::default(), &combined).unwrap();
    assert!(reference.conns.iter().filter(|c| matches!(c.verdict, Verdict::Matched(_))).count() > 250);
    // Twice each, so that the second run reuses the scratch the first gave back.
    for _ in 0..2 {
        let s = inspect_serial(CaptureReader::new(&pcap[..]).unwrap(), ConnConfig::default(), &sequential).unwrap();
        assert_eq!(rows(&s), rows(&reference));
        let ids: Vec<WorkerId> = (0..2).map(WorkerId).collect();
        let mut placer = place::build(Policy::Ahrw, &PlaceConfig::default(), &ids).unwrap();
        let config = PipelineConfig { queue_capacity: 8, pin: false, ..PipelineConfig::default() };
        let r = run(SliceReader::new(&pcap).unwrap(), placer.as_mut(), &config, &sequential).unwrap();
        assert_eq!(rows(&r.summary), rows(&reference));
    }
}

#[test]
fn dropping_at_full_queues_is_counted() {
    let pcap = trace();
    let ids: Vec<WorkerId> = (0..2).map(WorkerId).collect();
    let mut placer = place::build(Policy::Hrw, &PlaceConfig::default(), &ids).unwrap();
    let config = PipelineConfig { queue_capacity: 1, on_full: OnFull::Drop, pin: false, ..PipelineConfig::default() };
    let inspector = Inspector::new();
    let r = run(SliceReader::new(&pcap).unwrap(), placer.as_mut(), &config, &inspector).unwrap();
    let s = &r.summary;
    assert!(r.dropped > 0, "a queue of one buffer overflows");
    assert_eq!(s.inspected + s.skipped_classified + s.marked + r.dropped, s.packets);
    // A dropped buffer's packet is still fed to its connection's assembly by the next buffer
    // inspected, so whatever matched matched on the bytes the serial pipeline saw.
    let serial = inspect_serial(CaptureReader::new(&pcap[..]).unwrap(), ConnConfig::default(), &inspector).unwrap();
    let (mut matched, mut incomplete) = (0, 0);
    for (c, d) in serial.conns.iter().zip(&s.conns) {
        assert_eq!(c.id, d.id);
        match d.verdict {
            Verdict::Matched(p) => {
                assert_eq!(c.verdict, Verdict::Matched(p), "connection {}", c.id);
                matched += 1;
            }
            // A connection with a dropped buffer and no match has no verdict; one judged
            // no-match or open must be so serially (a dropped buffer was once judged no-match
            // from the bytes that were scanned: 36 of 300 wrong in one run).
            Verdict::Incomplete => incomplete += 1,
            other => assert_eq!(c.verdict, other, "connection {}", c.id),
        }
    }
    assert!(matched > 0);
    eprintln!("{matched} matched, {incomplete} without a verdict, of {}", s.conns.len());
}

/// A capture whose TCP openings arrive cut in pieces, out of order and retransmitted, with the
/// pieces of each connection interleaved with other connections'.
fn reordered() -> Vec<u8> {
    use etherparse::PacketBuilder;
    use pcap_file::pcap::{PcapPacket, PcapWriter};
    let opening: &[u8] = b"GET /index.html HTTP/1.1\r\nHost: example.org\r\n\r\n";
    let cuts = [(0, 2), (2, 9), (9, opening.len())];
    // Delivery orders of the three pieces; a repeated piece is a retransmission.
    let orders: [&[usize]; 4] = [&[1, 2, 0, 0], &[2, 0, 1], &[0, 2, 2, 1], &[1, 0, 1, 2]];
    let mut frames = Vec::new();
    // Each connection opens with a SYN, which fixes where its stream starts.
    for c in 0..29u16 {
        let mut frame = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(40_000 + c, 80, 999, 65_535)
            .syn()
            .write(&mut frame, &[])
            .unwrap();
        frames.push(frame);
    }
    for round in 0..4 {
        for c in 0..29u16 {
            let order = orders[usize::from(c) % orders.len()];
            let Some(&piece) = order.get(round) else { continue };
            let (from, to) = cuts[piece];
            let mut frame = Vec::new();
            PacketBuilder::ethernet2([1; 6], [2; 6])
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                .tcp(40_000 + c, 80, 1_000 + from as u32, 65_535)
                .write(&mut frame, &opening[from..to])
                .unwrap();
            frames.push(frame);
        }
    }
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let at = std::time::Duration::from_micros(i as u64);
        w.write_packet(&PcapPacket::new(at, f.len() as u32, f)).unwrap();
    }
    w.into_writer()
}

#[test]
fn reassembly_by_whichever_worker_gets_a_buffer_gives_the_serial_bytes() {
    let pcap = reordered();
    let inspector = Inspector::new();
    let serial = inspect_serial(SliceReader::new(&pcap).unwrap(), ConnConfig::default(), &inspector).unwrap();
    let http = Some(switchyard_runtime::inspect::Protocol::by_name("http").unwrap());
    let matched = |s: &switchyard_runtime::serial::Summary| {
        s.conns.iter().filter(|c| matches!(c.verdict, Verdict::Matched(p) if Some(p) == http)).count()
    };
    assert_eq!(matched(&serial), 29, "every opening is whole once its gap fills");
    for workers in [2u32, 3] {
        // Round robin moves every buffer of a connection to another worker.
        let ids: Vec<WorkerId> = (0..workers).map(WorkerId).collect();
        let mut placer = place::build(Policy::RoundRobin, &PlaceConfig::default(), &ids).unwrap();
        let config = PipelineConfig { queue_capacity: 2, batch: 1, pin: false, ..PipelineConfig::default() };
        let r = run(SliceReader::new(&pcap).unwrap(), placer.as_mut(), &config, &inspector).unwrap();
        assert_eq!(matched(&r.summary), 29, "{workers} workers");
        assert!(r.migrations > 0);
        let verdicts = |s: &switchyard_runtime::serial::Summary| s.conns.iter().map(|c| c.verdict).collect::<Vec<_>>();
        assert_eq!(verdicts(&r.summary), verdicts(&serial));
    }
}

/// The producer reads in stretches of 65,536 packets, sweeping the table and reporting
/// progress between them, whatever becomes of the packet that ends a stretch: a capture several
/// stretches long is read whole, with idle connections ended and started again mid-capture, and
/// gives the serial results; progress rises to the capture's length.
#[test]
fn a_long_capture_is_read_whole_across_the_producer_s_stretches() {
    let mut pcap = Vec::new();
    generate(&TraceSpec { connections: 24_000, rate: 20_000.0, seed: 3, ..TraceSpec::default() }, &mut pcap).unwrap();
    // Two packets a connection inspected: most packets are only marked, and the pause must
    // come on those too.
    let conn = ConnConfig { idle_timeout_ns: 2_000_000, max_packets: 2, ..ConnConfig::default() };
    let inspector = Inspector::new();
    let serial = inspect_serial(SliceReader::new(&pcap).unwrap(), conn, &inspector).unwrap();
    assert!(serial.packets > 2 * 65_536, "{} packets: too few for the test", serial.packets);
    assert!(serial.marked > serial.packets / 2, "{} of {} marked", serial.marked, serial.packets);
    let ids = [WorkerId(0), WorkerId(1)];
    let mut placer = place::build(Policy::Hrw, &PlaceConfig::default(), &ids).unwrap();
    let config = PipelineConfig { conn, pin: false, ..PipelineConfig::default() };
    let mut reports = Vec::new();
    let r = switchyard_runtime::pipeline::run_with_progress(
        SliceReader::new(&pcap).unwrap(),
        placer.as_mut(),
        &config,
        &inspector,
        &mut |at| reports.push(at),
    )
    .unwrap();
    let rows = |s: &switchyard_runtime::serial::Summary| {
        s.conns.iter().map(|c| (c.id, c.key, c.verdict, c.packets)).collect::<Vec<_>>()
    };
    assert_eq!(r.summary.packets, serial.packets);
    assert_eq!(rows(&r.summary), rows(&serial));
    assert_eq!(reports.len() as u64, serial.packets / 65_536, "{reports:?}");
    assert!(reports.windows(2).all(|w| w[0] < w[1]) && reports.iter().all(|&at| at < pcap.len()), "{reports:?}");
}
