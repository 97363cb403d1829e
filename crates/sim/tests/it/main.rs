//! One integration-test binary for the simulator: the engine against closed forms, determinism,
//! conservation, and event order.

use proptest::prelude::*;
use switchyard_sim::models::mmc::{Mmc, MmcParams, erlang_c_wait};
use switchyard_sim::{EventQueue, Nanos};

/// Mean wait in line within 5% of Erlang C on long runs. The tolerance is several standard
/// errors at these lengths (waits are strongly autocorrelated near saturation, so the error
/// shrinks slowly).
#[test]
fn mmc_mean_wait_matches_erlang_c() {
    for (lambda, mu, servers) in [(800.0, 1000.0, 1), (3200.0, 1000.0, 4), (12_000.0, 1000.0, 16)] {
        let p = MmcParams { lambda, mu, servers, customers: 2_000_000, seed: 11 };
        let out = Mmc::simulate(&p).unwrap();
        let want = erlang_c_wait(lambda, mu, servers).unwrap();
        let err = out.mean_wait / want - 1.0;
        assert!(
            err.abs() < 0.05,
            "M/M/{servers} λ={lambda} μ={mu}: W_q {} against {want} ({:+.1}%)",
            out.mean_wait,
            err * 100.0
        );
        // Little's law piece: sojourn = wait + mean service.
        assert!((out.mean_sojourn - out.mean_wait - 1.0 / mu).abs() < 0.02 / mu);
    }
}

#[test]
fn same_seed_same_run_and_every_customer_served() {
    let p = MmcParams { lambda: 900.0, mu: 1000.0, servers: 2, customers: 100_000, seed: 5 };
    let a = Mmc::simulate(&p).unwrap();
    let b = Mmc::simulate(&p).unwrap();
    assert_eq!(a.mean_wait.to_bits(), b.mean_wait.to_bits());
    assert_eq!((a.events, a.end.to_bits()), (b.events, b.end.to_bits()));
    assert_eq!(a.served, 100_000, "conservation: every arrival is served by the end");
    assert_eq!(a.events, 200_000, "one arrival and one departure per customer");
    let c = Mmc::simulate(&MmcParams { seed: 6, ..p }).unwrap();
    assert_ne!(a.mean_wait.to_bits(), c.mean_wait.to_bits());
}

proptest! {
    /// Whatever the schedule, events come out in (time, order scheduled) order.
    #[test]
    fn events_pop_in_time_then_schedule_order(times in proptest::collection::vec(0u64..50, 0..300)) {
        let mut q = EventQueue::new();
        for (i, &t) in times.iter().enumerate() {
            q.schedule_at(Nanos(t), i).unwrap();
        }
        let mut want: Vec<(u64, usize)> = times.iter().enumerate().map(|(i, &t)| (t, i)).collect();
        want.sort();
        let got: Vec<(u64, usize)> = std::iter::from_fn(|| q.pop().map(|(t, i)| (t.0, i))).collect();
        prop_assert_eq!(got, want);
    }
}

mod server {
    use switchyard_core::place::PlaceConfig;
    use switchyard_core::{Policy, Topology};
    use switchyard_sim::Nanos;
    use switchyard_sim::models::server::{OnFull, ProducerCore, Server, ServerOutcome, ServerParams, Workload};
    use switchyard_sim::models::workload::SyntheticFlows;

    /// An 8-core Xeon at high load with heavy-tailed flows and a real cost for moving a flow:
    /// the setting of Guo ch. 4–5, reduced to run in a test.
    fn scenario(policy: Policy) -> ServerParams {
        ServerParams {
            topology: Topology::parse("xeon-e5335").unwrap(),
            policy,
            place: PlaceConfig::default(),
            queue_capacity: 64,
            on_full: OnFull::Block,
            decision_cost: Nanos(500),
            packet_cost: Nanos(0),
            service_base: Nanos(5_000),
            service_per_kib: Nanos(20_000),
            migration_penalty: Nanos(5_000),
            home_penalty: Nanos(0),
            cache: None,
            sibling_sharing: 0.0,
            producer_core: ProducerCore::Own,
            workers: None,
            workload: Workload::Synthetic(SyntheticFlows {
                flows: 6_000,
                flow_rate: 60_000.0,
                ..SyntheticFlows::default()
            }),
            seed: 3,
        }
    }

    fn run(policy: Policy) -> ServerOutcome {
        Server::simulate(&scenario(policy)).unwrap()
    }

    #[test]
    fn every_unit_is_served_or_dropped() {
        let blocking = run(Policy::Hrw);
        assert_eq!((blocking.served, blocking.dropped), (blocking.emitted, 0));
        let p = ServerParams { on_full: OnFull::Drop, queue_capacity: 2, ..scenario(Policy::Hrw) };
        let dropping = Server::simulate(&p).unwrap();
        assert!(dropping.dropped > 0, "tiny queues under load must drop");
        assert_eq!(dropping.served + dropping.dropped, dropping.emitted);
    }

    #[test]
    fn same_seed_same_outcome() {
        let (a, b) = (run(Policy::Ahrw), run(Policy::Ahrw));
        assert_eq!(
            (a.served, a.events, a.makespan, a.migrations, a.out_of_order, a.latency.quantile(0.99)),
            (b.served, b.events, b.makespan, b.migrations, b.out_of_order, b.latency.quantile(0.99))
        );
        assert_eq!(a.jitter_ns.to_bits(), b.jitter_ns.to_bits());
        let c = Server::simulate(&ServerParams { seed: 4, ..scenario(Policy::Ahrw) }).unwrap();
        assert_ne!(a.makespan, c.makespan);
    }

    /// The rankings the source reports, at reduced size: locality beats spraying once moving a
    /// flow costs something (ch. 4), and load adjustment beats static hashing on heavy-tailed
    /// flows (ch. 5). Orderings, not absolute values, are what the model can claim.
    #[test]
    fn rankings_of_the_source_hold() {
        let rr = run(Policy::RoundRobin);
        let affinity = run(Policy::Affinity);
        let hrw = run(Policy::Hrw);
        let ahrw = run(Policy::Ahrw);
        let inflight = run(Policy::InFlight);
        assert!(
            affinity.units_per_s > 1.1 * rr.units_per_s,
            "affinity {} vs round robin {}",
            affinity.units_per_s,
            rr.units_per_s
        );
        assert!(ahrw.units_per_s > 1.1 * hrw.units_per_s, "ahrw {} vs hrw {}", ahrw.units_per_s, hrw.units_per_s);
        assert!(ahrw.latency.quantile(0.99) < hrw.latency.quantile(0.99) / 2);
        // Static hashing and affinity never move or reorder a flow; in-flight affinity may move
        // flows but never reorders them; round robin does both.
        assert_eq!((hrw.migrations, hrw.out_of_order), (0, 0));
        assert_eq!((affinity.migrations, affinity.out_of_order), (0, 0));
        assert_eq!(inflight.out_of_order, 0);
        assert!(inflight.migrations > 0 && rr.out_of_order > 0);
    }

    /// Shared execution: four equal units started together on the four threads of one pipeline
    /// take four times as long with σ = 1 as with σ = 0, and σ = 0.5 sits between (each runs at
    /// 1 / (1 + 0.5 · 3) of its solo speed, so 2.5 times as long).
    #[test]
    fn siblings_share_their_pipeline() {
        let makespan = |sharing: f64| {
            let p = ServerParams {
                topology: Topology::parse("niagara2").unwrap(),
                workers: Some(4),
                policy: Policy::RoundRobin,
                decision_cost: Nanos(0),
                service_base: Nanos(1_000_000),
                service_per_kib: Nanos(0),
                sibling_sharing: sharing,
                workload: Workload::Synthetic(SyntheticFlows {
                    flows: 4,
                    flow_rate: 1e12,
                    units_shape: 1e9,
                    units_max: 1,
                    unit_gap: 1e-9,
                    sizes: vec![(64, 1.0)],
                }),
                ..scenario(Policy::RoundRobin)
            };
            let o = Server::simulate(&p).unwrap();
            assert_eq!(o.served, 4);
            o.makespan.0 as f64
        };
        let solo = makespan(0.0);
        assert!((makespan(1.0) / solo - 4.0).abs() < 0.01, "{}", makespan(1.0) / solo);
        assert!((makespan(0.5) / solo - 2.5).abs() < 0.01, "{}", makespan(0.5) / solo);
        let e = Server::simulate(&ServerParams { sibling_sharing: 1.5, ..scenario(Policy::Hrw) }).unwrap_err();
        assert!(e.to_string().contains("sibling_sharing"), "{e}");
    }

    #[test]
    fn bad_scenarios_are_refused() {
        let e = Server::simulate(&ServerParams { queue_capacity: 0, ..scenario(Policy::Hrw) }).unwrap_err();
        assert!(e.to_string().contains("queue_capacity"), "{e}");
        let w = Workload::Synthetic(SyntheticFlows { sizes: vec![], ..SyntheticFlows::default() });
        let e = Server::simulate(&ServerParams { workload: w, ..scenario(Policy::Hrw) }).unwrap_err();
        assert!(e.to_string().contains("sizes"), "{e}");
        let mut p = scenario(Policy::Jump);
        p.place.maglev_table = 4;
        let e = Server::simulate(&p).unwrap_err();
        assert!(e.to_string().contains("placement: bad maglev table size"), "{e}");
    }
}

mod scenario {
    use switchyard_sim::scenario::Scenario;

    const SMALL: &str = r#"
name = "small"
seed = 7
policies = ["hrw", "ahrw", "in-flight"]

[machine]
topology = "2x2"
service_base_ns = 5000
service_per_kib_ns = 20000
migration_penalty_ns = 2000

[workload]
kind = "synthetic"
flows = 400
flow_rate = 30000.0
unit_gap_s = 20e-6
sizes = [[64, 0.5], [1500, 0.5]]

[sweep]
"workload.flow_rate" = [10000.0, 30000.0]
seed = [1, 2]
"#;

    #[test]
    fn a_sweep_expands_to_every_combination_times_every_policy() {
        let s = Scenario::parse(SMALL, "small.toml", None).unwrap();
        assert_eq!(s.cases.len(), 2 * 2 * 3);
        assert_eq!(s.swept_keys, ["seed", "workload.flow_rate"], "keys in sorted order");
        assert_eq!(
            s.cases[0].swept,
            [("seed".to_string(), "1".to_string()), ("workload.flow_rate".to_string(), "10000.0".to_string())]
        );
        let switchyard_sim::models::server::Workload::Synthetic(w) = &s.cases[3].params.workload else {
            panic!("synthetic")
        };
        assert_eq!(w.flow_rate, 30000.0);
        assert_eq!(s.cases[6].params.seed, 2);
    }

    #[test]
    fn parallel_runs_give_the_serial_results() {
        let s = Scenario::parse(SMALL, "small.toml", None).unwrap();
        let key = |o: &switchyard_sim::models::server::ServerOutcome| {
            (
                o.served,
                o.events,
                o.makespan,
                o.migrations,
                o.out_of_order,
                o.latency.quantile(0.99),
                o.jitter_ns.to_bits(),
            )
        };
        let serial: Vec<_> = s.run(1, &|| {}).unwrap().iter().map(key).collect();
        let parallel: Vec<_> = s.run(4, &|| {}).unwrap().iter().map(key).collect();
        assert_eq!(serial, parallel);
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        for (text, needle) in [
            (SMALL.replace("flow_rate = 30000.0", "flow_rat = 30000.0"), "unknown field `flow_rat`"),
            (SMALL.replace("\"hrw\"", "\"hwr\""), "policies: unknown policy `hwr`"),
            (SMALL.replace("\"2x2\"", "\"2x0\""), "machine.topology: bad topology spec `2x0`"),
            (SMALL.replace("name = \"small\"", "name = 3"), "invalid type"),
            (
                SMALL.replace("[sweep]", "[sweep]\n\"machine.queue_capacity\" = []"),
                "sweep key `machine.queue_capacity` needs a non-empty list",
            ),
            (SMALL.replace("seed = [1, 2]", "seed = [1, \"x\"]"), "(with seed = \"x\""),
            (SMALL.replace("kind = \"synthetic\"", "kind = \"pcap\""), "unknown variant `pcap`"),
            ("name = \"x\"\nname = \"y\"".to_string(), "duplicate key"),
            (SMALL.replace("migration_penalty_ns = 2000", "cache = \"lots\""), "machine.cache = \"lots\""),
            (
                SMALL.replace("migration_penalty_ns = 2000", "cache = { flow_bytes = 1 }"),
                "machine.cache: unknown field `flow_bytes`",
            ),
            (
                SMALL.replace("migration_penalty_ns = 2000", "cache = { miss_ns = [1.0] }"),
                "machine.cache.miss_ns: 1 penalties given for 2 cache levels",
            ),
        ] {
            let e = Scenario::parse(&text, "small.toml", None).unwrap_err().to_string();
            assert!(e.starts_with("small.toml: "), "{e}");
            assert!(e.contains(needle), "wanted {needle:?} in: {e}");
        }
    }

    /// `machine.cache` turns the cache model on, from the topology's data sheet with the
    /// table's overrides; without it, or with "off", the model is off. With every miss penalty 0
    /// a run is the run without the model, and with the data sheet's it is slower.
    #[test]
    fn the_cache_key_sets_the_model_and_costs_only_what_it_charges() {
        let with = |cache: &str| {
            let text = SMALL.replace("migration_penalty_ns = 2000", &format!("migration_penalty_ns = 2000\n{cache}"));
            Scenario::parse(&text, "small.toml", None).unwrap()
        };
        assert!(with("").cases[0].params.cache.is_none());
        assert!(with("cache = \"off\"").cases[0].params.cache.is_none());
        let sheet = with("cache = \"data-sheet\"");
        let c = sheet.cases[0].params.cache.as_ref().unwrap();
        assert_eq!((c.hierarchy.levels.len(), c.flow_state_bytes), (2, 0));
        let table = with("cache = { flow_state_bytes = 4096, size_kib = [16, 1024], miss_ns = [0.0, 0.0] }");
        let c = table.cases[0].params.cache.as_ref().unwrap();
        assert_eq!(
            (c.flow_state_bytes, c.hierarchy.levels[0].size, c.hierarchy.levels[1].size),
            (4096, 16384, 1 << 20)
        );
        let key = |o: &switchyard_sim::models::server::ServerOutcome| (o.served, o.makespan, o.migrations, o.events);
        let off: Vec<_> = with("").run(2, &|| {}).unwrap().iter().map(key).collect();
        let free = table.run(2, &|| {}).unwrap();
        assert_eq!(free.iter().map(key).collect::<Vec<_>>(), off);
        assert!(free.iter().all(|o| o.cache_ns == 0 && o.cache_misses.iter().sum::<u64>() > 0));
        let charged = with("cache = { flow_state_bytes = 4096 }").run(2, &|| {}).unwrap();
        assert!(charged.iter().all(|o| o.cache_ns > 0));
        let busy = |os: &[switchyard_sim::models::server::ServerOutcome]| {
            os.iter().map(|o| o.utilisation.iter().sum::<f64>() * o.makespan.0 as f64).sum::<f64>()
        };
        assert!(busy(&charged) > busy(&free), "misses add busy time");
    }

    #[test]
    fn the_shipped_scenarios_parse() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                Scenario::parse(&text, &path.display().to_string(), None).unwrap();
                n += 1;
            }
        }
        assert!(n > 0);
    }
}

mod dpi {
    use switchyard_core::place::PlaceConfig;
    use switchyard_core::{Policy, Topology};
    use switchyard_sim::Nanos;
    use switchyard_sim::models::server::{OnFull, ProducerCore, Server, ServerOutcome, ServerParams, Workload};
    use switchyard_sim::models::workload::{DpiConnections, SyntheticFlows};

    fn run(policy: Policy, workers: u32) -> ServerOutcome {
        let flows = SyntheticFlows {
            flows: 8_000,
            flow_rate: 200_000.0,
            units_shape: 1.1,
            unit_gap: 5e-6,
            ..SyntheticFlows::default()
        };
        Server::simulate(&ServerParams {
            topology: Topology::parse("xeon-e5335").unwrap(),
            policy,
            place: PlaceConfig::default(),
            queue_capacity: 32,
            on_full: OnFull::Block,
            decision_cost: Nanos(300),
            packet_cost: Nanos(0),
            service_base: Nanos(1_000),
            service_per_kib: Nanos(10_000),
            migration_penalty: Nanos(2_000),
            home_penalty: Nanos(0),
            cache: None,
            sibling_sharing: 0.0,
            producer_core: ProducerCore::Own,
            workers: Some(workers),
            workload: Workload::Dpi(DpiConnections { flows, inspect_packets: 8, match_fraction: 0.7 }),
            seed: 2,
        })
        .unwrap()
    }

    /// Guo ch. 4: connection affinity beats spreading a connection's buffers over workers. (In
    /// the model the scanned bytes need not be higher for round robin: its parallel scans
    /// classify connections sooner, so more later packets are only marked; the duplicated scans
    /// and the lost locality show in throughput.) On one worker every policy does the same work.
    #[test]
    fn affinity_beats_spreading_buffers() {
        let (rr, affinity) = (run(Policy::RoundRobin, 7), run(Policy::Affinity, 7));
        assert!(affinity.offered_gbps > 1.1 * rr.offered_gbps, "{} vs {}", affinity.offered_gbps, rr.offered_gbps);
        assert_eq!((affinity.migrations, affinity.out_of_order), (0, 0));
        let (rr1, affinity1) = (run(Policy::RoundRobin, 1), run(Policy::Affinity, 1));
        assert_eq!(rr1.scanned_bytes, affinity1.scanned_bytes);
        assert_eq!(affinity.offered_bytes, affinity1.offered_bytes, "the same trace whatever the policy");
        // Nothing queued is lost: every inspected buffer is served.
        assert_eq!(affinity.served, affinity.emitted);
    }
}

/// The shipped capture replayed: every flow of the trace runs, every packet is accounted for,
/// and a missing or foreign file is refused with its name and the key.
mod trace {
    use switchyard_sim::scenario::Scenario;

    fn scenario(text: &str) -> Result<Scenario, String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/trace-sample.toml");
        Scenario::parse(text, path, None).map_err(|e| e.to_string())
    }

    #[test]
    fn the_sample_capture_replays_whole() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/trace-sample.toml");
        let text = std::fs::read_to_string(path).unwrap().replace("[0.05, 0.01, 0.002]", "[0.01]");
        let s = scenario(&text).unwrap();
        let out = s.run(2, &|| {}).unwrap();
        let offered = out[0].offered_bytes;
        assert!(offered > 500_000, "payload bytes of the sample: {offered}");
        for o in &out {
            assert_eq!(o.served + o.dropped, o.emitted, "{}", o.policy);
            assert_eq!(o.offered_bytes, offered, "the same trace whatever the policy");
        }
        let mut packets = text.replace("inspect_packets = 8\n", "");
        packets = packets.replace("match_fraction = 0.7\n", "");
        let whole = scenario(&packets).unwrap();
        let o = &whole.run(1, &|| {}).unwrap()[0];
        assert_eq!(o.emitted, 2503, "every packet of the sample is a unit without DPI buffering");
    }

    /// Match points measured by a real run replace the drawn ones. On one worker, a connection
    /// said to match at its first packet has only its first buffer scanned (later ones are
    /// skipped as classified); one said never to match has every buffer scanned, up to the
    /// limit — whatever the drawn fraction says.
    #[test]
    fn measured_match_points_are_replayed() {
        use std::sync::Arc;

        use switchyard_core::place::PlaceConfig;
        use switchyard_core::{Policy, Topology};
        use switchyard_sim::Nanos;
        use switchyard_sim::models::server::{OnFull, ProducerCore, Server, ServerParams, Workload};
        use switchyard_sim::models::trace::{Trace, TraceReplay};

        let pcap = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/traces/sample.pcap")).unwrap();
        let base = Trace::read(&pcap[..], true).unwrap();
        // Each flow's id and its packets' payload lengths.
        let mut flows: Vec<(switchyard_core::FlowId, Vec<u64>)> = Vec::new();
        let mut reader = switchyard_ingest::SliceReader::new(&pcap).unwrap();
        while let Some(p) = reader.next_packet().unwrap() {
            let id = switchyard_core::flow::FlowKey::Tuple(p.key.undirected()).id();
            let len = p.payload.len() as u64;
            match flows.iter_mut().find(|(i, _)| *i == id) {
                Some((_, lens)) => lens.push(len),
                None => flows.push((id, vec![len])),
            }
        }
        let scanned = |at: u64| {
            let mut trace = base.clone();
            let set = trace.set_match_points(flows.iter().map(|(id, _)| (*id, at)));
            assert_eq!(set, trace.flows());
            let o = Server::simulate(&ServerParams {
                topology: Topology::flat(1).unwrap(),
                policy: Policy::Affinity,
                place: PlaceConfig::default(),
                queue_capacity: 64,
                on_full: OnFull::Block,
                decision_cost: Nanos(0),
                packet_cost: Nanos(0),
                service_base: Nanos(1_000),
                service_per_kib: Nanos(0),
                migration_penalty: Nanos(0),
                home_penalty: Nanos(0),
                cache: None,
                sibling_sharing: 0.0,
                producer_core: ProducerCore::Own,
                workers: None,
                workload: Workload::Trace(TraceReplay { trace: Arc::new(trace), time_scale: 0.0, dpi: Some((8, 0.5)) }),
                seed: 1,
            })
            .unwrap();
            o.scanned_bytes
        };
        let first: u64 = flows.iter().map(|(_, lens)| lens[0]).sum();
        assert_eq!(scanned(1), first, "only each connection's first buffer scanned");
        // Buffer k holds the first k packets' payloads.
        let all: u64 = flows
            .iter()
            .map(|(_, lens)| (1..=lens.len().min(8)).map(|k| lens[..k].iter().sum::<u64>()).sum::<u64>())
            .sum();
        assert_eq!(scanned(0), all, "every buffer scanned, up to the packet limit");
    }

    /// A producer that shares its worker's core: the core does both jobs one after the other,
    /// so the run takes the sum of the two works; with a core each it takes the larger one.
    #[test]
    fn a_producer_sharing_a_core_adds_its_work_to_the_worker_s() {
        use std::sync::Arc;

        use switchyard_core::place::PlaceConfig;
        use switchyard_core::{Policy, Topology, WorkerId};
        use switchyard_sim::Nanos;
        use switchyard_sim::models::server::{OnFull, ProducerCore, Server, ServerParams, Workload};
        use switchyard_sim::models::trace::{Trace, TraceReplay};

        let pcap = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/traces/sample.pcap")).unwrap();
        let trace = Arc::new(Trace::read(&pcap[..], true).unwrap());
        let units = trace.packets() as f64;
        let (p, s) = (300.0, 200.0);
        let makespan = |core: ProducerCore, workers: u32| {
            let o = Server::simulate(&ServerParams {
                topology: Topology::flat(workers).unwrap(),
                policy: Policy::ModN,
                place: PlaceConfig::default(),
                queue_capacity: 1_000_000,
                on_full: OnFull::Block,
                decision_cost: Nanos(0),
                packet_cost: Nanos(p as u64),
                service_base: Nanos(s as u64),
                service_per_kib: Nanos(0),
                migration_penalty: Nanos(0),
                home_penalty: Nanos(0),
                cache: None,
                sibling_sharing: 0.0,
                producer_core: core,
                workers: None,
                workload: Workload::Trace(TraceReplay { trace: Arc::clone(&trace), time_scale: 0.0, dpi: None }),
                seed: 1,
            })
            .unwrap();
            assert_eq!(o.served, o.emitted);
            o.makespan.0 as f64
        };
        let alone = makespan(ProducerCore::Own, 1);
        assert!((alone / (units * p) - 1.0).abs() < 0.01, "the producer is the bottleneck: {alone}");
        let shared = makespan(ProducerCore::Shares(WorkerId(0)), 1);
        assert!((shared / (units * (p + s)) - 1.0).abs() < 0.01, "one core does both: {shared}");
        // With one worker there is nowhere to float to.
        assert_eq!(makespan(ProducerCore::Floats, 1), shared);
        // Two workers, the producer on worker 0's core: that core does all of the producer's
        // work and half the service (static hash splits the sample's flows about evenly).
        let two = makespan(ProducerCore::Shares(WorkerId(0)), 2);
        assert!(two > units * (p + 0.3 * s) && two < units * (p + 0.7 * s), "{two}");
        // Free to move to whichever worker is idle, it does better than pinned beside one, and
        // no better than on a core of its own.
        let floats = makespan(ProducerCore::Floats, 2);
        let own = makespan(ProducerCore::Own, 2);
        assert!(own <= floats && floats < two, "own {own}, floating {floats}, beside worker 0 {two}");
    }

    #[test]
    fn a_bad_capture_is_refused_by_name() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/trace-sample.toml")).unwrap();
        let e = scenario(&text.replace("sample.pcap", "missing.pcap")).unwrap_err();
        assert!(e.contains("workload.file: cannot open") && e.contains("missing.pcap"), "{e}");
        let e = scenario(&text.replace("../data/traces/sample.pcap", "xeon-flows.toml")).unwrap_err();
        assert!(e.contains("not a pcap or pcapng capture"), "{e}");
    }
}

/// Decision costs taken from `switchyard place --format json`, per policy and scaled.
mod measured_costs {
    use switchyard_sim::Nanos;
    use switchyard_sim::scenario::Scenario;

    #[test]
    fn each_policy_pays_its_measured_cost() {
        let dir = std::env::temp_dir().join(format!("switchyard-costs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("costs.json"),
            r#"[{"policy": "hrw", "workers": 8, "ns_per_decision": 20.4}, {"policy": "ahrw", "ns_per_decision": 61.0}]"#,
        )
        .unwrap();
        let text = r#"
            name = "costs"
            policies = ["hrw", "ahrw"]
            [machine]
            topology = "flat:4"
            service_base_ns = 1000
            decision_costs = "costs.json"
            decision_cost_scale = 10.0
            [workload]
            kind = "synthetic"
            flows = 10
            flow_rate = 1000.0
            unit_gap_s = 1e-4
            sizes = [[64, 1.0]]
        "#;
        let origin = dir.join("s.toml").display().to_string();
        let s = Scenario::parse(text, &origin, None).unwrap();
        assert_eq!(s.cases[0].params.decision_cost, Nanos(204));
        assert_eq!(s.cases[1].params.decision_cost, Nanos(610));
        let e = Scenario::parse(&text.replace("\"ahrw\"]", "\"maglev\"]"), &origin, None).unwrap_err().to_string();
        assert!(e.contains("machine.decision_costs") && e.contains("no timing for maglev"), "{e}");
        let e = Scenario::parse(&text.replace("costs.json", "none.json"), &origin, None).unwrap_err().to_string();
        assert!(e.contains("cannot read") && e.contains("none.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// GOPs measured on a real run, replayed: each takes its measured time, in the real pool's order.
mod measured_gops {
    use switchyard_core::place::PlaceConfig;
    use switchyard_core::{FlowId, Policy, Topology, WorkerId};
    use switchyard_sim::Nanos;
    use switchyard_sim::models::server::{OnFull, ProducerCore, Server, ServerParams, Workload};
    use switchyard_sim::models::workload::MeasuredGops;

    fn params(workers: u32, policy: Policy, gops: MeasuredGops) -> ServerParams {
        ServerParams {
            topology: Topology::flat(workers).unwrap(),
            policy,
            place: PlaceConfig::default(),
            queue_capacity: 3,
            on_full: OnFull::Block,
            decision_cost: Nanos(0),
            packet_cost: Nanos(0),
            service_base: Nanos(0),
            service_per_kib: Nanos(0),
            migration_penalty: Nanos(0),
            home_penalty: Nanos(0),
            cache: None,
            sibling_sharing: 0.0,
            producer_core: ProducerCore::Own,
            workers: None,
            workload: Workload::Measured(gops),
            seed: 1,
        }
    }

    fn gops(moved: f64) -> MeasuredGops {
        let streams = (0..3u64)
            .map(|s| {
                (FlowId(0x9e37_79b9 * (s + 1)), (0..4u64).map(|k| (1000 + k, 1_000_000 * (s + 1) + k * 7)).collect())
            })
            .collect();
        MeasuredGops { streams, moved }
    }

    #[test]
    fn one_worker_takes_the_sum_of_the_costs() {
        let g = gops(1.5);
        let sum: u64 = g.streams.iter().flat_map(|s| s.1.iter().map(|x| x.1)).sum();
        let o = Server::simulate(&params(1, Policy::RoundRobin, g)).unwrap();
        assert_eq!(o.served, 12);
        assert_eq!(o.makespan, Nanos(sum), "one worker, no decision cost: the run is the costs end to end");
    }

    #[test]
    fn gops_arrive_round_by_round_and_round_robin_deals_them_in_turn() {
        let g = gops(1.0);
        let o = Server::simulate(&params(2, Policy::RoundRobin, g.clone())).unwrap();
        let mut placed = o.placements.clone();
        placed.sort_by_key(|&(f, seq, _)| (seq, g.streams.iter().position(|s| s.0 == f).unwrap()));
        // Round k offers stream 0, 1, 2's GOP k; round robin deals them 0, 1, 0, 1, ...
        for (n, &(_, _, w)) in placed.iter().enumerate() {
            assert_eq!(w, WorkerId(n as u32 % 2), "the {n}th GOP offered");
        }
        assert_eq!(o.served, 12);
    }

    #[test]
    fn a_gop_that_changes_worker_pays_the_cache_effect() {
        // Round robin over two workers moves every stream of three at every GOP; one worker never.
        let warm = Server::simulate(&params(2, Policy::RoundRobin, gops(1.0))).unwrap();
        let cold = Server::simulate(&params(2, Policy::RoundRobin, gops(2.0))).unwrap();
        let busy =
            |o: &switchyard_sim::models::server::ServerOutcome| o.utilisation.iter().sum::<f64>() * o.makespan.0 as f64;
        let g = gops(1.0);
        let firsts: f64 = g.streams.iter().map(|s| s.1[0].1 as f64).sum();
        let all: f64 = g.streams.iter().flat_map(|s| s.1.iter().map(|x| x.1 as f64)).sum();
        // Every GOP but each stream's first is moved, and costs twice as much.
        let want = firsts + 2.0 * (all - firsts);
        assert!((busy(&cold) - want).abs() < 16.0, "busy {} against {want}", busy(&cold));
        assert!((busy(&warm) - all).abs() < 16.0, "busy {} against {all}", busy(&warm));
    }

    #[test]
    fn bad_measurements_are_refused_by_name() {
        let e = Server::simulate(&params(1, Policy::Hrw, MeasuredGops { streams: vec![], moved: 1.0 })).unwrap_err();
        assert!(e.to_string().contains("measured"), "{e}");
        let e = Server::simulate(&params(1, Policy::Hrw, gops(f64::NAN))).unwrap_err();
        assert!(e.to_string().contains("moved"), "{e}");
    }
}

/// Yates ch. 5 on the 1,000-location lattice, reduced: the cache's bound, its hit ratio against
/// a renewal model, the baselines, determinism, and the trace field.
mod sensor {
    use switchyard_core::cache::{AgeFrom, Lookup, Rule};
    use switchyard_sim::models::sensor::{ChangeModel, FieldSpec, SensorParams, Stations, Trace, experiment, simulate};

    fn lattice(ttl_s: f64) -> SensorParams {
        SensorParams {
            field: FieldSpec::Lattice {
                model: ChangeModel::Correlated,
                rate: 90.0,
                stations: Stations::Quadrants,
                rule: None,
            },
            ttl_s,
            age_from: AgeFrom::Load,
            keep_approximations: false,
            lambda: 81.0,
            poll_s: 1000.0 / 9.0,
            link_capacity: 25.0,
            max_wait_s: 2.0,
            warmup_s: 200.0,
            measure_s: 400.0,
            seed: 9,
        }
    }

    /// Eq 5.1: a blocking policy reads each location at most once per T, so at most |N|/T reads a
    /// second (11.25 at T = 88.9 s), while simple lookups, which do not block, may exceed it
    /// when T is small against the miss delay.
    #[test]
    fn blocking_policies_read_the_field_at_most_n_over_t_a_second() {
        let p = lattice(800.0 / 9.0);
        for lookup in [Lookup::Piggyback, Lookup::GreedyAge, Lookup::MedianOf3] {
            let r = simulate(&p, lookup).unwrap();
            assert!(r.read_rate() <= 11.25 * 1.02, "{lookup}: {} reads/s", r.read_rate());
            // Piggyback, which has no neighbours to lean on, comes near the bound (notes 000
            // §5.4: 10.8 against 11.25 in the thesis).
            if lookup == Lookup::Piggyback {
                assert!(r.read_rate() > 9.0, "the bound is near, not far: {}", r.read_rate());
            }
        }
        // At T = 0.1 s the bound (10,000/s) is far above the link; simple and piggyback both
        // read, and piggyback coalesces some queries that simple sends.
        let small = lattice(0.1);
        let (s, pb) = (simulate(&small, Lookup::Simple).unwrap(), simulate(&small, Lookup::Piggyback).unwrap());
        assert!(pb.coalesced > 0 && s.coalesced == 0);
        assert!(pb.reads < s.reads);
    }

    /// Simple lookups against the renewal model of notes 000 §5.4: each location is asked at
    /// λ_l = 0.09/s, a miss takes about the All-misses delay d, and the entry lives T, so
    /// h ≈ λ_l·T / (λ_l·(d + T) + 1). (The polling tenth of the queries is regular, not Poisson,
    /// which the model ignores: hence the tolerance.)
    #[test]
    fn simple_lookups_hit_as_the_renewal_model_says() {
        for ttl_s in [80.0 / 9.0, 800.0 / 9.0] {
            let p = lattice(ttl_s);
            let miss = simulate(&p, Lookup::AllMisses).unwrap();
            let simple = simulate(&p, Lookup::Simple).unwrap();
            let l = 0.09;
            let want = l * ttl_s / (l * (miss.mean_delay() + ttl_s) + 1.0);
            assert!((simple.hit_ratio() - want).abs() < 0.03, "T = {ttl_s}: {} against {want}", simple.hit_ratio());
        }
    }

    #[test]
    fn the_baselines_are_what_they_say_and_the_rankings_hold() {
        let p = lattice(80.0 / 9.0);
        let ex = experiment(&p, &Lookup::ALL, 2).unwrap();
        let by = |l: Lookup| ex.runs.iter().find(|r| r.lookup == Some(l)).unwrap();
        let (hits, misses) = (by(Lookup::AllHits), by(Lookup::AllMisses));
        assert_eq!((hits.hit_ratio(), hits.cost, hits.reads), (1.0, 0.0, 0));
        assert_eq!(misses.hits + misses.approx_hits + misses.coalesced, 0);
        assert_eq!(misses.reads + misses.dropped, misses.queries);
        assert!((misses.cost_per_query() / misses.miss_cost - 1.0).abs() < 0.05);
        // Approximation buys hits and saves cost; at A = 0.9 (delay matters) it gives the best
        // quality of the practical policies, at A = 0.1 (deviation matters) the precise ones
        // do: Yates §5.4's trade-off.
        let (simple, greedy) = (by(Lookup::Simple), by(Lookup::GreedyAge));
        assert!(greedy.hit_ratio() > simple.hit_ratio() + 0.1);
        assert!(greedy.cost_per_query() < simple.cost_per_query());
        assert!(ex.quality(greedy, 0.9) < ex.quality(simple, 0.9));
        assert!(ex.quality(simple, 0.1) < ex.quality(greedy, 0.1));
        // All hits answers at once and never fresher: the best at A = 0.9, the worst at A = 0.1.
        assert!(ex.runs.iter().all(|r| ex.quality(hits, 0.9) <= ex.quality(r, 0.9)));
        assert!(ex.runs.iter().all(|r| ex.quality(hits, 0.1) >= ex.quality(r, 0.1)));
    }

    #[test]
    fn same_seed_same_run() {
        let p = lattice(80.0 / 9.0);
        let (a, b) = (simulate(&p, Lookup::MedianOf3).unwrap(), simulate(&p, Lookup::MedianOf3).unwrap());
        assert_eq!(
            (a.queries, a.hits, a.approx_hits, a.reads, a.cost.to_bits()),
            (b.queries, b.hits, b.approx_hits, b.reads, b.cost.to_bits())
        );
        assert_eq!(a.answers, b.answers);
        let c = simulate(&SensorParams { seed: 10, ..p }, Lookup::MedianOf3).unwrap();
        assert_ne!(a.answers, c.answers);
    }

    #[test]
    fn a_trace_field_replays_its_readings_in_a_loop() {
        // Three motes in a row; the middle one's light steps from 10 to 500 halfway.
        let mut readings = Vec::new();
        for k in 0..200 {
            let t = f64::from(k) * 30.0;
            readings.push((t, 0, 10.0));
            readings.push((t + 1.0, 1, if k < 100 { 10.0 } else { 500.0 }));
            readings.push((t + 2.0, 2, 10.0));
        }
        let trace = Trace { positions: vec![(0.0, 0.0), (5.0, 0.0), (10.0, 0.0)], readings };
        let p = SensorParams {
            field: FieldSpec::Trace { trace, rule: Rule::Nearest(2) },
            ttl_s: 90.0,
            lambda: 0.5,
            poll_s: 60.0,
            link_capacity: 1.0,
            max_wait_s: 7.5,
            warmup_s: 100.0,
            measure_s: 20_000.0, // three laps of the 6,000 s trace
            ..lattice(90.0)
        };
        let misses = simulate(&p, Lookup::AllMisses).unwrap();
        assert!(misses.queries > 10_000 && misses.mean_deviation() < 5.0, "reads are exact up to their travel");
        let hits = simulate(&p, Lookup::AllHits).unwrap();
        // Values frozen at the start: the middle mote is off by 490 for half of every lap.
        assert!((hits.mean_deviation() - 490.0 / 6.0).abs() < 15.0, "{}", hits.mean_deviation());
        let e = simulate(
            &SensorParams { field: FieldSpec::Trace { trace: Trace::default(), rule: Rule::Nearest(2) }, ..p },
            Lookup::Simple,
        )
        .unwrap_err();
        assert!(e.to_string().contains("at least two"), "{e}");
        let e = simulate(&SensorParams { lambda: 0.0, ..lattice(1.0) }, Lookup::Simple).unwrap_err();
        assert!(e.to_string().contains("lambda"), "{e}");
    }
}

/// Cacheflow, reduced to 10 minutes: cooperation does what the thesis says, and stale views
/// cost deliveries.
mod cacheflow {
    use switchyard_core::cache::HitModel;
    use switchyard_sim::models::cacheflow::{CacheflowParams, simulate};

    fn short() -> CacheflowParams {
        CacheflowParams { run_s: 600.0, warmup_s: 120.0, ..CacheflowParams::default() }
    }

    #[test]
    fn cooperating_caches_hit_like_a_lone_cache_with_two_to_three_times_the_memory() {
        let alone = |cache| simulate(&CacheflowParams { cooperate: false, cache, ..short() }).unwrap().hit_rate();
        let (one, two, three) = (alone(600), alone(1200), alone(1800));
        let model = HitModel::CACHEFLOW.hit_rate(5000);
        assert!((one - model).abs() < 0.05, "a lone cache {one} against the model's {model}");
        let coop = simulate(&short()).unwrap();
        assert!(coop.hit_rate() > two && coop.hit_rate() < three, "{} not between {two} and {three}", coop.hit_rate());
        assert!(coop.delivered() > 0.995, "current views mispredict almost nothing: {}", coop.delivered());
        let stale = simulate(&CacheflowParams { link_buffer: 600, ..short() }).unwrap();
        assert!(stale.delivered() < 0.99 && stale.hit_rate() < coop.hit_rate(), "{stale:?}");
        assert_eq!(simulate(&short()).unwrap(), coop, "same seed, same run");
        let e = simulate(&CacheflowParams { servers: 0, ..short() }).unwrap_err();
        assert!(e.to_string().contains("servers"), "{e}");
    }
}
