//! `switchyard.sim`: a scenario's report (the one `switchyard sim --out` writes as report.json)
//! and a sweep of many scenarios on local threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pyo3::prelude::*;
use switchyard_experiments::report::Quiet;
use switchyard_experiments::scenarios;
use switchyard_sim::scenario::Scenario;

use crate::{bad, error};

/// A scenario as the caller gave it: its TOML text, where it came from (a path, or a name for
/// text and dicts, for the messages), and a seed replacing the file's.
type Given = (String, String, Option<u64>);

/// Runs one scenario on `threads` threads; its report as JSON.
fn run_one(given: &Given, threads: usize) -> PyResult<String> {
    let (text, origin, seed) = given;
    let scenario = Scenario::parse(text, origin, *seed).map_err(|e| error(&e))?;
    let run = scenarios::run(&scenario, threads, &Quiet).map_err(|e| error(&e))?;
    let report = run.report(&scenarios::SIM, &scenario);
    serde_json::to_string(&report).map_err(|e| bad(format!("cannot write the report of `{origin}`: {e}")))
}

/// `switchyard sim`: the report of one scenario (report.json's JSON), its runs on `threads`
/// threads (the machine's cores if `None`; the result is the same whatever their number).
#[pyfunction]
#[pyo3(signature = (text, origin, seed=None, threads=None))]
pub(crate) fn report(
    py: Python<'_>,
    text: String,
    origin: String,
    seed: Option<u64>,
    threads: Option<usize>,
) -> PyResult<String> {
    let threads = threads.unwrap_or_else(crate::cores);
    crate::interruptible(py, move |_| run_one(&(text, origin, seed), threads))
}

/// Many scenarios, each on one thread, `threads` at a time (the machine's cores if `None`); the
/// reports in the order given. A bad scenario fails the sweep with its message; Ctrl-C stops it
/// between scenarios.
#[pyfunction]
#[pyo3(signature = (scenarios, threads=None))]
pub(crate) fn sweep(py: Python<'_>, scenarios: Vec<Given>, threads: Option<usize>) -> PyResult<Vec<String>> {
    let threads = threads.unwrap_or_else(crate::cores).clamp(1, scenarios.len().max(1));
    crate::interruptible(py, move |cancel: Arc<AtomicBool>| {
        let next = AtomicUsize::new(0);
        let mut out: Vec<Option<PyResult<String>>> = (0..scenarios.len()).map(|_| None).collect();
        let slots = std::sync::Mutex::new(&mut out);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    loop {
                        if cancel.load(Ordering::Relaxed) {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(given) = scenarios.get(i) else { break };
                        let r = run_one(given, 1);
                        let failed = r.is_err();
                        slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(r);
                        if failed {
                            // The first error is the sweep's: the rest would be thrown away.
                            cancel.store(true, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        // The first failure in the order given is the sweep's, whichever finished first.
        if let Some(i) = out.iter().position(|r| matches!(r, Some(Err(_))))
            && let Some(Err(e)) = out.swap_remove(i)
        {
            return Err(e);
        }
        let mut reports = Vec::with_capacity(out.len());
        for r in out {
            reports.push(r.ok_or_else(|| bad("the sweep was stopped before its end"))??);
        }
        Ok(reports)
    })
}

/// A scenario given as a dict (here as its JSON) in TOML, for [`Scenario::parse`]: the same
/// keys and tables as a scenario file.
#[pyfunction]
pub(crate) fn toml_of_json(json: &str) -> PyResult<String> {
    let value: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(format!("scenario dict: {e}")))?;
    let table = toml::Table::try_from(value).map_err(|e| bad(format!("scenario dict: {e}")))?;
    toml::to_string(&table).map_err(|e| bad(format!("scenario dict: {e}")))
}

/// The M/M/c model of `switchyard_sim::models::mmc` (the one `bench/sim-vs-simpy.sh` runs
/// beside SimPy): customers served, events, the mean wait in seconds, and Erlang C's.
#[pyfunction]
pub(crate) fn mmc(
    py: Python<'_>,
    lambda: f64,
    mu: f64,
    servers: u32,
    customers: u64,
    seed: u64,
) -> PyResult<(u64, u64, f64, Option<f64>)> {
    use switchyard_sim::models::mmc::{Mmc, MmcParams, erlang_c_wait};
    crate::interruptible(py, move |_| {
        let p = MmcParams { lambda, mu, servers, customers, seed };
        let out = Mmc::simulate(&p).map_err(|e| bad(format!("mmc: {e}")))?;
        Ok((out.served, out.events, out.mean_wait, erlang_c_wait(lambda, mu, servers)))
    })
}
