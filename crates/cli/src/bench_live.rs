//! `switchyard bench inspect --live`: prints the live runs `switchyard_experiments::bench::live`
//! makes, and the highest replay rate each worker count took without a drop.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use switchyard_experiments::bench::live::{Bench, LiveRun, RATES, Veth};

pub(crate) fn run(sample: &Path) -> Result<()> {
    let bench = Bench::new(sample)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "replaying {} ({} packets) into {} in namespace {}, looped for about 1 s at each rate\n",
        sample.display(),
        bench.packets,
        Veth::CAPTURE,
        bench.veth.namespace()
    )?;
    writeln!(out, "workers  asked pps   sent pps  packets read    frames  dropped")?;
    let results = bench.clean_rates(&[1, 2], &RATES, &mut |w, rate, run: &LiveRun| {
        let _ = writeln!(
            out,
            "{w:>7}  {:>9}  {:>9.0}  {:>12}  {:>8}  {:>7}",
            rate.map_or("top".into(), |r| r.to_string()),
            run.sent_pps,
            run.report.summary.packets,
            run.report.ring.packets,
            run.report.ring.drops
        );
    })?;
    writeln!(out)?;
    for (workers, best) in results {
        match best {
            Some((rate, run)) => writeln!(
                out,
                "{workers} worker{}: nothing dropped up to {} (tcpreplay sent {:.0} pps)",
                if workers == 1 { "" } else { "s" },
                rate.map_or("tcpreplay's top speed".to_string(), |r| format!("{r} pps asked")),
                run.sent_pps
            )?,
            None => writeln!(out, "{workers} workers: frames dropped even at {:?} pps", RATES[0])?,
        }
    }
    Ok(())
}
