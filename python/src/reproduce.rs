//! `switchyard.reproduce`: the reproductions that run in the simulator, each as the report
//! `switchyard reproduce NAME --format json` prints. Those on real sockets or needing root
//! (iwashima-m, yates-clp, dou-cacheflow's and dou-miscort's `--real` parts) stay with the
//! binary.

use pyo3::prelude::*;
use switchyard_core::cache::{AgeFrom, Rule};
use switchyard_experiments::report::{Quiet, Report};
use switchyard_experiments::{cacheflow, figurehead, guo_irq, guo_xen, ko, miscort, rgedf, scenarios, yates_cache};
use switchyard_sim::models::sensor::Stations;

use crate::{bad, error};

/// The options of the reproductions, as `switchyard reproduce NAME --help` names them; `None`
/// takes the binary's default, and an option a reproduction does not have is refused.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct Options {
    seed: Option<u64>,
    runs: Option<u64>,
    scale: Option<f64>,
    threads: Option<usize>,
    requests: Option<u64>,
    oracle: Option<bool>,
    poisson: Option<bool>,
    presume: Option<f64>,
    app_kib: Option<u64>,
    tables: Option<Vec<String>>,
    lab_data: Option<String>,
    lab_locs: Option<String>,
    neighbourhood: Option<String>,
}

/// The simulated reproductions, by the binary's names.
const NAMES: &[&str] = &[
    "dpi-affinity",
    "niagara-hierarchy",
    "gop-cache-aware",
    "niagara-hierarchy-cache",
    "gop-cache-aware-cache",
    "ps-shares",
    "yates-cache",
    "dou-cacheflow",
    "dou-miscort",
    "dou-rgedf",
    "ko-worker-centric",
    "figurehead",
    "guo-interrupt-affinity",
    "guo-xen-credit",
];

/// The names of the reproductions this package runs.
#[pyfunction(name = "reproduce_names")]
pub(crate) fn names() -> Vec<&'static str> {
    NAMES.to_vec()
}

impl Options {
    /// The options given that `name` does not take, refused as the binary refuses them.
    fn only(&self, name: &str, takes: &[&str]) -> PyResult<()> {
        let given = [
            ("seed", self.seed.is_some()),
            ("runs", self.runs.is_some()),
            ("scale", self.scale.is_some()),
            ("requests", self.requests.is_some()),
            ("oracle", self.oracle.is_some()),
            ("poisson", self.poisson.is_some()),
            ("presume", self.presume.is_some()),
            ("app_kib", self.app_kib.is_some()),
            ("tables", self.tables.is_some()),
            ("lab_data", self.lab_data.is_some()),
            ("lab_locs", self.lab_locs.is_some()),
            ("neighbourhood", self.neighbourhood.is_some()),
        ];
        let extra: Vec<&str> = given.iter().filter(|(n, g)| *g && !takes.contains(n)).map(|(n, _)| *n).collect();
        if extra.is_empty() {
            Ok(())
        } else {
            Err(bad(format!(
                "reproduce {name}: unexpected option {}; it takes {}",
                extra.join(", "),
                if takes.is_empty() { "threads only".to_string() } else { format!("{} and threads", takes.join(", ")) }
            )))
        }
    }
}

fn run(name: &str, o: &Options) -> PyResult<Report> {
    let threads = o.threads.unwrap_or_else(crate::cores);
    let seed = o.seed.unwrap_or(1);
    let e = |e: switchyard_experiments::ExperimentError| error(&e);
    Ok(match name {
        _ if scenarios::spec(name).is_some() => {
            o.only(name, &[])?;
            let spec = scenarios::spec(name).expect("checked");
            let scenario = scenarios::scenario(name).map_err(e)?;
            scenarios::run(&scenario, threads, &Quiet).map_err(e)?.report(spec, &scenario)
        }
        "yates-cache" => {
            o.only(name, &["tables", "scale", "seed", "lab_data", "lab_locs", "neighbourhood"])?;
            let rule = |s: &str, option: &str| s.parse::<Rule>().map_err(|e| bad(format!("{option}: {e}")));
            let setup = yates_cache::Setup {
                tables: o.tables.clone().unwrap_or_default(),
                scale: o.scale.unwrap_or(1.0),
                seed,
                threads,
                age_from: AgeFrom::default(),
                stations: Stations::Quadrants,
                neighbourhood: rule(o.neighbourhood.as_deref().unwrap_or("nearest:4"), "neighbourhood")?,
                lattice_neighbourhood: None,
                keep_approximations: false,
            };
            let trace = if yates_cache::chosen(&setup.tables).map_err(e)?.iter().any(|t| !t.lattice) {
                let data = o.lab_data.as_deref().unwrap_or("data/labdata/data.txt.gz");
                let locs = o.lab_locs.as_deref().unwrap_or("data/labdata/mote_locs.txt");
                Some(yates_cache::lab_trace(data.as_ref(), locs.as_ref()).map_err(e)?)
            } else {
                None
            };
            let runs = yates_cache::run(&setup, trace.as_ref().map(|t| &t.0), &Quiet).map_err(e)?;
            yates_cache::report(&setup, &runs, trace.as_ref().map(|t| t.1.as_str()))
        }
        "dou-cacheflow" => {
            o.only(name, &["seed"])?;
            let setup = cacheflow::Setup::thesis(seed, threads);
            let cases = cacheflow::simulated(&setup, &Quiet).map_err(e)?;
            cacheflow::report(&setup, &cases, None)
        }
        "dou-miscort" => {
            o.only(name, &["runs", "seed", "poisson", "presume"])?;
            let setup = miscort::Setup {
                runs: o.runs.unwrap_or(5),
                seed,
                poisson: o.poisson.unwrap_or(false),
                presume_factor: o.presume.unwrap_or(3.0),
                ..miscort::Setup::thesis(threads)
            };
            miscort::report(&setup, &miscort::run(&setup, &Quiet).map_err(e)?)
        }
        "dou-rgedf" => {
            o.only(name, &["runs", "seed"])?;
            let setup = rgedf::Setup { runs: o.runs.unwrap_or(10), seed, ..rgedf::Setup::thesis(threads) };
            rgedf::report(&setup, &rgedf::run(&setup, &Quiet).map_err(e)?)
        }
        "ko-worker-centric" => {
            o.only(name, &["runs", "seed", "scale"])?;
            let setup = ko::Setup {
                runs: o.runs.unwrap_or(3),
                seed,
                scale: o.scale.unwrap_or(0.1),
                ..ko::Setup::paper(threads)
            };
            ko::report(&setup, &ko::run(&setup, &Quiet).map_err(e)?)
        }
        "figurehead" => {
            o.only(name, &["requests", "oracle", "seed"])?;
            let requests = o.requests.unwrap_or(20_000);
            if requests == 0 {
                return Err(bad("requests=0: a run needs at least one request"));
            }
            let oracle = o.oracle.unwrap_or(false);
            let table = figurehead::table2(seed);
            let rows =
                figurehead::sweep(&figurehead::scenarios(), requests, oracle, seed, threads, &Quiet).map_err(e)?;
            figurehead::report(&table, &rows, requests, oracle, seed)
        }
        "guo-interrupt-affinity" => {
            o.only(name, &["seed"])?;
            let setup = guo_irq::Setup::guo(seed, threads);
            guo_irq::run(&setup).map_err(e)?.report(&setup)
        }
        "guo-xen-credit" => {
            o.only(name, &["runs", "seed", "scale", "app_kib"])?;
            let app_bytes = o
                .app_kib
                .map(|k| k.checked_mul(1024).ok_or_else(|| bad(format!("app_kib {k} is too large"))))
                .transpose()?;
            let setup = guo_xen::Setup {
                scale: o.scale.unwrap_or(1.0),
                runs: o.runs.unwrap_or(3),
                app_bytes,
                ..guo_xen::Setup::guo(seed, threads)
            };
            guo_xen::run_with(&setup, &Quiet).map_err(e)?.report(&setup)
        }
        "iwashima-m" | "yates-clp" => {
            return Err(bad(format!(
                "reproduce {name} runs real sockets (iwashima-m needs root); run it with the binary: \
                 switchyard reproduce {name}"
            )));
        }
        other => {
            return Err(bad(format!("no reproduction `{other}`; the simulated ones are: {}", NAMES.join(", "))));
        }
    })
}

/// Runs reproduction `name` with `options`; its report as JSON (`--format json`'s).
#[pyfunction]
pub(crate) fn reproduce(py: Python<'_>, name: String, options: Options) -> PyResult<String> {
    crate::interruptible(py, move |_| {
        let report = run(&name, &options)?;
        serde_json::to_string(&report).map_err(|e| bad(format!("cannot write the report of {name}: {e}")))
    })
}
