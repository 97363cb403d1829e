//! `switchyard reproduce dou-cacheflow`: Cacheflow's hit rates (Dou 2011 ch. 4) in the
//! simulator, beside the thesis's model and its PlanetLab sample run.

use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use switchyard_core::cache::HitModel;
use switchyard_sim::models::cacheflow::{CacheflowOutcome, CacheflowParams, simulate};

/// The same experiment on real gateways: 6 cooperating gateways (or lone ones), an origin of
/// 5,000 objects and 18 clients, all on loopback in this process.
fn run_real(out: &mut impl Write, seed: u64, object_kb: usize, requests: usize) -> Result<()> {
    use rand::SeedableRng;
    use switchyard_gateway::coop::{ClusterConfig, run_cluster};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let sets = switchyard_sim::models::cacheflow::make_sets(5000, 1000, 100, &mut rng);
    let base = ClusterConfig {
        servers: 6,
        clients_per_server: 3,
        cooperate: true,
        capacity: 600,
        dedup: true,
        link_buffer: 0,
        object_size: object_kb * 1024,
        files: 5000,
        sets,
        requests,
        warmup: requests / 5,
        period: Duration::from_millis(10),
        seed,
    };
    writeln!(
        out,
        "\non real gateways (HTTP on loopback, this process): 6 gateways, an origin of 5,000 objects of {object_kb} KB, 18 clients \
         making {requests} requests each ({} not counted), 10 ms apart\n",
        requests / 5
    )?;
    writeln!(
        out,
        "{:<34} {:>8} {:>12} {:>11} {:>11} {:>10} {:>11} {:>8}",
        "case", "hit rate", "published", "local/req", "remote/req", "delivered", "duplicates", "time"
    )?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    for (name, c, published) in [
        ("alone, 1× memory", ClusterConfig { cooperate: false, ..base.clone() }, "35.4% (model)"),
        ("alone, 2× memory", ClusterConfig { cooperate: false, capacity: 1200, ..base.clone() }, "59.1% (model)"),
        ("alone, 3× memory", ClusterConfig { cooperate: false, capacity: 1800, ..base.clone() }, "72.3% (model)"),
        ("Cacheflow, 1×, L = 0", base.clone(), "≈72% (33+39)"),
    ] {
        let t = std::time::Instant::now();
        let r = runtime.block_on(run_cluster(&c)).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let requests = (r.asked / 100).max(1) as f64;
        writeln!(
            out,
            "{name:<34} {:>7.1}% {published:>12} {:>11.1} {:>11.1} {:>9.1}% {:>11.2} {:>7.1}s",
            100.0 * r.hit_rate(),
            r.local_hits as f64 / requests,
            r.remote_hits as f64 / requests,
            100.0 * (1.0 - r.mispredicted as f64 / r.asked.max(1) as f64),
            r.duplicates as f64 / requests,
            t.elapsed().as_secs_f64()
        )?;
    }
    Ok(())
}

pub(crate) fn run(seed: u64, threads: usize, real: Option<(usize, usize)>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Cacheflow (Dou 2011 ch. 4) in the simulator: 6 servers × 3 clients, 5,000 objects of 50 KB, 1,000 sets of 100 (80/20), \
         a request every 5 s per client, 30 min runs measured after 5 min; seed {seed}\n"
    )?;
    let base = CacheflowParams { seed, ..CacheflowParams::default() };
    let cases: Vec<(&str, CacheflowParams)> = vec![
        ("alone, 1× memory (600 objects)", CacheflowParams { cooperate: false, ..base.clone() }),
        ("alone, 2× memory", CacheflowParams { cooperate: false, cache: 1200, ..base.clone() }),
        ("alone, 3× memory", CacheflowParams { cooperate: false, cache: 1800, ..base.clone() }),
        ("Cacheflow, 1×, L = 0", base.clone()),
        ("Cacheflow, 1×, L = 600 (the sample run)", CacheflowParams { link_buffer: 600, ..base.clone() }),
        (
            "Cacheflow, 1×, L = 600, no de-duplication",
            CacheflowParams { dedup: false, link_buffer: 600, ..base.clone() },
        ),
    ];
    // Independent runs: spread them over the cores.
    let results: Vec<Result<CacheflowOutcome, _>> = std::thread::scope(|s| {
        let chunks: Vec<_> = cases.chunks(cases.len().div_ceil(threads.max(1))).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| s.spawn(move || chunk.iter().map(|(_, p)| simulate(p)).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a run panicked")).collect()
    });
    let model = |cache: f64| HitModel { cache, ..HitModel::CACHEFLOW }.hit_rate(5000);
    writeln!(
        out,
        "{:<42} {:>8} {:>10} {:>12} {:>11} {:>11} {:>10} {:>11}",
        "case", "hit rate", "model", "published", "local/req", "remote/req", "delivered", "duplicates"
    )?;
    for ((name, p), r) in cases.iter().zip(results) {
        let r = r?;
        let per = |n: u64| n as f64 / r.requests.max(1) as f64;
        let model_text = if p.cooperate { "-".to_string() } else { format!("{:.1}%", 100.0 * model(p.cache as f64)) };
        let published = match (p.cooperate, p.cache, p.link_buffer, p.dedup) {
            (false, 600, _, _) => "35.4% (model)",
            (false, 1200, _, _) => "59.1% (model)",
            (false, 1800, _, _) => "72.3% (model)",
            (true, _, 600, true) => "≈72% (33+39)",
            (true, _, _, true) => "2–3× memory",
            _ => "-",
        };
        writeln!(
            out,
            "{:<42} {:>7.1}% {:>10} {:>12} {:>11.1} {:>11.1} {:>9.1}% {:>11.2}",
            name,
            100.0 * r.hit_rate(),
            model_text,
            published,
            per(r.total.local_hits),
            per(r.total.remote_hits),
            100.0 * r.delivered(),
            per(r.total.duplicates)
        )?;
    }
    writeln!(
        out,
        "\npublished sample run (Tables 4.4–4.6): 33–34 local hits, 38–39 remote hits, 23–24 disk loads per request of 100; \
         96.6–97.4 objects delivered (the rest mispredicted: a view said a neighbour held them)\n\
         the thesis: with 2 neighbours the hit rate equals a lone cache's with 2–3× the memory (the model's 59.1–72.3%)\n\n\
         why ours differ:\n\
         - lone caches beat the model at 2× and 3×: clients also choose sets 80/20 (Table 4.2), so whole sets recur, which the \
         model (per-object popularity only, Eqs 4.2–4.4) does not see; at 1× the cache is too small for it to matter\n\
         - the cooperative rate is to be read against the lone rates of the same simulator: it falls between 2× and 3× as the \
         thesis found\n\
         - de-duplication has little to do while views are current: a server loads only what no neighbour's view shows, so \
         copies arise only from stale views (L = 600) or between a server's two neighbours, which do not see each other"
    )?;
    if let Some((object_kb, requests)) = real {
        run_real(&mut out, seed, object_kb, requests)?;
    }
    Ok(())
}
