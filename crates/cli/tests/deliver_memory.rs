//! `bench deliver`'s memory table, briefly: each server a process of this binary's (ours as
//! `deliver serve`, the tokio peer as `bench deliver-tokio-peer`) or nginx where it is found,
//! measured idle and with 200 streams flowing.

use switchyard_experiments::bench::deliver_memory::{self, Setup, table};
use switchyard_experiments::bench::peers::found;
use switchyard_experiments::report::{Quiet, Value};

/// Each server adds memory with its streams and spends CPU on them; ours adds less than a
/// bound no per-stream buffer would fit under.
#[test]
fn the_memory_table_gives_each_server_a_plausible_figure_per_stream() {
    let dir = std::env::temp_dir().join(format!("switchyard-deliver-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let nginx = found("nginx");
    let setup = Setup {
        streams: 200,
        rate: 64_000,
        cores: 1,
        grain_ms: 100.0,
        warmup: 0.5,
        seconds: 2.0,
        program: env!("CARGO_BIN_EXE_switchyard").into(),
        nginx: nginx.clone(),
    };
    let rows = deliver_memory::run(&setup, &dir, &Quiet);
    let _ = std::fs::remove_dir_all(&dir);
    let rows = rows.unwrap();
    let servers: Vec<&str> = rows.iter().map(|r| r.server).collect();
    let want: &[&str] = if nginx.is_some() { &["switchyard", "tokio", "nginx"] } else { &["switchyard", "tokio"] };
    assert_eq!(servers, want);
    for r in &rows {
        assert_eq!(r.streams, 200, "{r:?}");
        // Ours keeps its promise within a quarter of 200 × 64 kb/s (a busy machine's clients read
        // late). A peer's accuracy is what the table reports, not a property of ours: the tokio
        // peer's sleeps run late on a loaded machine (it kept 42–53% of the rate at 10,000
        // streams), so a peer need only have served. This test once failed here, with a release
        // build beside it, on a check that held every server to the quarter.
        let kept = r.aggregate_bps / (200.0 * 64_000.0);
        if r.server == "switchyard" {
            assert!((kept - 1.0).abs() < 0.25, "ours kept {kept:.2} of the rate: {r:?}");
        } else {
            assert!(kept > 0.0, "{} served nothing: {r:?}", r.server);
        }
        assert!(r.idle.rss > 0 && r.idle.pss > 0 && r.samples == 2, "{r:?}");
        assert!(r.pss_per_stream() > 0.0 && r.rss_per_stream() > 0.0, "{r:?}");
        assert!(r.peak >= r.flowing.rss.min(r.idle.rss), "{r:?}");
        assert!(r.cpu_us_per_stream_second() > 0.0, "{r:?}");
        // At 64 kb/s a socket's queues are mostly empty when sampled: present, maybe 0.
        assert!(r.sockets.is_some() && r.sockstat.is_some(), "{r:?}");
    }
    // Ours keeps a stream's state and shares one payload: a 16 KiB buffer of its own per
    // stream (four of its packets) would put it over this bound.
    let ours = &rows[0];
    assert!(ours.pss_per_stream() < 16_384.0, "{ours:?}");

    // The table carries each row's figures.
    let t = table(&setup, &rows);
    let pss: Vec<Option<f64>> = t.cells("pss_per_stream").map(Value::as_f64).collect();
    assert_eq!(pss, rows.iter().map(|r| Some(r.pss_per_stream())).collect::<Vec<_>>());
    assert_eq!(t.cells("vs_ours_cpu").next().and_then(Value::as_f64), Some(1.0));
}
