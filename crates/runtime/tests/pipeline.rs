//! The parallel pipeline agrees with the serial one, connection by connection, whatever the
//! policy and the number of workers, and accounts for every packet.

use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{Policy, WorkerId};
use switchyard_ingest::{CaptureReader, ConnConfig, SliceReader};
use switchyard_runtime::inspect::Inspector;
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
        s.conns.iter().map(|c| (c.id, c.verdict, c.server_name.clone())).collect::<Vec<_>>()
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
    let mut matched = 0;
    for (c, d) in serial.conns.iter().zip(&s.conns) {
        assert_eq!(c.id, d.id);
        if let Verdict::Matched(p) = d.verdict {
            assert_eq!(c.verdict, Verdict::Matched(p), "connection {}", c.id);
            matched += 1;
        }
    }
    assert!(matched > 0);
}
