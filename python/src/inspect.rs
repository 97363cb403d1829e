//! `switchyard.inspect`: a capture file in, the connections `switchyard inspect --results`
//! writes out (as its CSV, which the Python half reads into a DataFrame).

use std::fs::File;

use pyo3::prelude::*;
use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{Policy, Topology, WorkerId};
use switchyard_ingest::{CaptureBytes, ConnConfig, SliceReader};
use switchyard_runtime::inspect::{Inspector, Ports};
use switchyard_runtime::pipeline::{self, PipelineConfig};

use crate::{bad, error};

/// `switchyard inspect FILE --results -`: the producer design on `workers` threads placing
/// with `policy`, inspecting `packets` packets and `bytes` bytes of each connection; `guess`
/// names by port what the payload did not. The results as CSV.
#[pyfunction(name = "inspect_results")]
#[pyo3(signature = (path, workers=None, policy=None, topology=None, packets=8, bytes=12_000, guess=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn results(
    py: Python<'_>,
    path: String,
    workers: Option<u32>,
    policy: Option<String>,
    topology: Option<String>,
    packets: u32,
    bytes: usize,
    guess: bool,
) -> PyResult<String> {
    let policy: Policy = policy.as_deref().unwrap_or("affinity").parse().map_err(|e| error(&e))?;
    let n = workers.unwrap_or_else(|| crate::cores() as u32);
    if n == 0 {
        return Err(bad("workers=0: at least one worker is needed"));
    }
    if packets == 0 {
        return Err(bad("packets=0: at least one packet per connection must be inspected"));
    }
    let topology = topology.as_deref().map(Topology::parse).transpose().map_err(|e| error(&e))?;
    let config = PlaceConfig { topology, ..PlaceConfig::default() };
    let ids: Vec<WorkerId> = (0..n).map(WorkerId).collect();
    let mut placer = place::build(policy, &config, &ids).map_err(|e| error(&e))?;
    crate::interruptible(py, move |_| {
        let file = File::open(&path).map_err(|e| bad(format!("cannot open capture `{path}`: {e}")))?;
        let capture = CaptureBytes::open(&file).map_err(|e| bad(format!("cannot read `{path}`: {e}")))?;
        let reader = SliceReader::new(capture.bytes()).map_err(|e| bad(format!("reading `{path}`: {e}")))?;
        let pipeline_config = PipelineConfig {
            conn: ConnConfig { max_packets: packets, max_bytes: bytes, ..ConnConfig::default() },
            ..PipelineConfig::default()
        };
        let mut report = pipeline::run(reader, placer.as_mut(), &pipeline_config, &Inspector::default())
            .map_err(|e| bad(format!("reading `{path}`: {e}")))?;
        if guess {
            for c in &mut report.summary.conns {
                c.verdict = c.verdict.guessed(Ports::of(&c.key));
            }
        }
        let mut out = Vec::new();
        switchyard_runtime::serial::write_results(&report.summary.conns, &mut out)
            .map_err(|e| bad(format!("cannot write the results of `{path}`: {e}")))?;
        String::from_utf8(out).map_err(|e| bad(format!("the results of `{path}` are not UTF-8: {e}")))
    })
}
