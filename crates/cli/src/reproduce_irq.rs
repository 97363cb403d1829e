//! `switchyard reproduce guo-interrupt-affinity`: prints Guo ch. 3's interrupt affinity
//! (`switchyard_experiments::guo_irq`) by message size, then each published claim beside ours.

use std::io::Write;

use anyhow::Result;
use switchyard_experiments::guo_irq::{self, Setup};
use switchyard_sim::models::irq::Placement;

pub(crate) fn run(seed: u64, threads: usize) -> Result<()> {
    let repro = guo_irq::run(&Setup::guo(seed, threads))?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Guo ch. 3 in the simulator: an iperf TCP receive on a Xeon E5335 (L2 shared by core pairs), \
         interrupts round-robin and the application moved every 1 ms, against interrupt affinity \
         (interrupt on core 0, application on its L2 sibling) and one core for both; seed {seed}\n"
    )?;
    writeln!(
        out,
        "{:>8}  {:<36} {:>11} {:>9} {:>12} {:>10} {:>10}",
        "message", "placement", "Mbit/s", "vs rr", "L2 miss/msg", "cpu µs/msg", "shared L2"
    )?;
    for r in &repro.rows {
        let o = &r.outcome;
        writeln!(
            out,
            "{:>8}  {:<36} {:>11.0} {:>+8.1}% {:>12.1} {:>10.2} {:>9.0}%",
            r.size,
            r.placement.name(),
            o.throughput * 8e-6,
            (repro.gain(r.size, r.placement).unwrap_or(1.0) - 1.0) * 100.0,
            o.l2_per_message,
            o.cpu_ns_per_message * 1e-3,
            o.shared_l2 * 100.0
        )?;
        if r.placement == Placement::SameCore {
            writeln!(out)?;
        }
    }
    writeln!(out, "published beside ours")?;
    crate::report::print_claims(&mut out, &repro.claims)
}
