//! Runs the M/M/c model once and prints one JSON line: the mean wait beside Erlang C's, events,
//! and wall-clock speed. `bench/sim-vs-simpy.sh` runs it beside the same model in SimPy.
//!
//! Usage: `cargo run --release -p switchyard-sim --example mmc -- LAMBDA MU SERVERS CUSTOMERS SEED`

// A benchmark harness measures wall time; the simulator's ban on the clock is for model code.
#![allow(clippy::disallowed_methods)]

use std::process::ExitCode;
use std::time::Instant;

use switchyard_sim::models::mmc::{Mmc, MmcParams, erlang_c_wait};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: mmc LAMBDA MU SERVERS CUSTOMERS SEED (rates per second)";
    let parsed = (|| -> Option<MmcParams> {
        Some(MmcParams {
            lambda: args.first()?.parse().ok()?,
            mu: args.get(1)?.parse().ok()?,
            servers: args.get(2)?.parse().ok()?,
            customers: args.get(3)?.parse().ok()?,
            seed: args.get(4)?.parse().ok()?,
        })
    })();
    let Some(p) = parsed.filter(|_| args.len() == 5) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let start = Instant::now();
    let out = match Mmc::simulate(&p) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mmc: {e}");
            return ExitCode::from(2);
        }
    };
    let wall = start.elapsed().as_secs_f64();
    let theory = erlang_c_wait(p.lambda, p.mu, p.servers).map_or_else(|| "null".to_string(), |w| w.to_string());
    println!(
        "{{\"engine\":\"switchyard-sim\",\"customers\":{},\"events\":{},\"mean_wait\":{},\"erlang_c\":{},\"wall_s\":{},\"customers_per_s\":{},\"events_per_s\":{}}}",
        out.served,
        out.events,
        out.mean_wait,
        theory,
        wall,
        out.served as f64 / wall,
        out.events as f64 / wall
    );
    ExitCode::SUCCESS
}
