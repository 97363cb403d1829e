//! `switchyard.place`: a placer kept across calls (keys in, workers out, members changed), and
//! `switchyard place`'s measurement of policies on a key set.

use std::sync::Mutex;

use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use switchyard_core::place::{self, HashFn, ParentLoad, PsDispatch, QminReading};
use switchyard_core::{
    FlowKey, LoadTracker, PlaceConfig, Placer, Policy, QueueMeasure, Topology, Unit, Weight, WorkerId,
};
use switchyard_experiments::keys::KeySource;
use switchyard_experiments::placement;

use crate::{bad, error};

/// The options every placer takes, as `switchyard place` names them (its `--help` says what
/// each does).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct Options {
    epsilon: f64,
    vnodes: u32,
    maglev_table: u32,
    beta: f64,
    queue: String,
    hash: String,
    qmin: String,
    parent_load: String,
    ca_min: String,
    ps_dispatch: String,
}

/// One of a few names, or the binary's message for a bad value of its option.
fn choose<T: Copy>(option: &str, value: &str, choices: &[(&str, T)]) -> PyResult<T> {
    choices.iter().find(|(n, _)| *n == value).map(|(_, v)| *v).ok_or_else(|| {
        let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
        bad(format!("invalid value '{value}' for {option}: possible values are {}", names.join(", ")))
    })
}

impl Options {
    fn config(&self, topology: Option<Topology>) -> PyResult<PlaceConfig> {
        Ok(PlaceConfig {
            measure: choose("queue", &self.queue, &[("units", QueueMeasure::Units), ("bytes", QueueMeasure::Bytes)])?,
            hash: choose("hash", &self.hash, &[("fast", HashFn::Fast), ("classic", HashFn::Classic)])?,
            qmin: choose("qmin", &self.qmin, &[("true", QminReading::TrueMin), ("nonzero", QminReading::NonZeroMin)])?,
            epsilon: self.epsilon,
            vnodes: self.vnodes,
            maglev_table: self.maglev_table,
            beta: self.beta,
            parent_load: choose(
                "parent_load",
                &self.parent_load,
                &[("eq67", ParentLoad::AnyIdleIsZero), ("sum", ParentLoad::Sum)],
            )?,
            ca_min_weighted: choose("ca_min", &self.ca_min, &[("weighted", true), ("raw", false)])?,
            ps_dispatch: choose(
                "ps_dispatch",
                &self.ps_dispatch,
                &[("set", PsDispatch::Set), ("per-unit", PsDispatch::PerUnit)],
            )?,
            topology,
        })
    }
}

/// The keyword arguments' names, for the messages of the check `switchyard place` also runs.
const KEYWORD_NAMES: placement::ArgNames = placement::ArgNames { workers: "workers", weights: "weights", assign: "=" };

/// The workers and the configuration, checked as `switchyard place` checks its options.
fn setup(
    policies: &[Policy],
    workers: Option<u32>,
    weights: Option<&[f64]>,
    topology: Option<&str>,
    options: &Options,
) -> PyResult<(Vec<(WorkerId, Weight)>, PlaceConfig)> {
    let topology = topology.map(Topology::parse).transpose().map_err(|e| error(&e))?;
    let (members, topology) =
        placement::members(policies, workers, weights, topology, KEYWORD_NAMES).map_err(|e| error(&e))?;
    Ok((members, options.config(topology)?))
}

fn policy(name: &str) -> PyResult<Policy> {
    name.trim().parse::<Policy>().map_err(|e| error(&e))
}

/// Every policy's name, as `switchyard place --policy` takes them.
#[pyfunction]
pub(crate) fn policy_names() -> Vec<&'static str> {
    Policy::ALL.iter().map(|p| p.name()).collect()
}

/// A placement policy with its state and the load it has placed so far.
#[pyclass(module = "switchyard._switchyard", name = "Placer")]
pub(crate) struct PyPlacer {
    state: Mutex<State>,
}

struct State {
    placer: Box<dyn Placer>,
    load: LoadTracker,
}

impl PyPlacer {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic in a placer is a bug that Python has already seen as an exception.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The keys' units: integers are `FlowKey::Number`s, text is read as a key-file line is
/// (`tcp 10.0.0.1:4000 10.0.0.2:80`, a number, or any text).
fn units(keys: &Bound<'_, PyAny>, sizes: Option<&[u64]>) -> PyResult<Vec<Unit>> {
    let flows: Vec<FlowKey> = if let Ok(a) = keys.cast::<PyArray1<u64>>() {
        a.readonly().as_array().iter().map(|&k| FlowKey::Number(k)).collect()
    } else if let Ok(a) = keys.cast::<PyArray1<i64>>() {
        // The bits of a signed key, so that -1 and 2**64-1 are the same key, as NumPy casts them.
        a.readonly().as_array().iter().map(|&k| FlowKey::Number(k as u64)).collect()
    } else if let Ok(a) = keys.cast::<numpy::PyUntypedArray>() {
        return Err(bad(format!(
            "keys: a NumPy array of dtype {} and {} dimension(s) cannot be placed; give a 1-D array of \
             uint64 or int64 keys, or a list of str",
            a.dtype(),
            a.ndim()
        )));
    } else if let Ok(list) = keys.cast::<PyList>() {
        let mut out = Vec::with_capacity(list.len());
        for (i, k) in list.iter().enumerate() {
            if let Ok(s) = k.cast::<PyString>() {
                out.push(FlowKey::parse(&s.to_cow()?));
            } else if let Ok(n) = k.extract::<u64>() {
                out.push(FlowKey::Number(n));
            } else {
                return Err(bad(format!(
                    "keys[{i}]: a {} cannot be a key; give str (`tcp 10.0.0.1:4000 10.0.0.2:80`, any text) or an \
                     int from 0 to 2**64-1",
                    k.get_type().name()?
                )));
            }
        }
        out
    } else {
        return Err(bad(format!(
            "keys: a {} cannot be placed; give a 1-D NumPy array of uint64 or int64, or a list of str or int",
            keys.get_type().name()?
        )));
    };
    if let Some(s) = sizes
        && s.len() != flows.len()
    {
        return Err(bad(format!("sizes has {} values for {} keys; give one size per key", s.len(), flows.len())));
    }
    Ok(flows.iter().enumerate().map(|(i, k)| Unit::new(k, sizes.map_or(1, |s| s[i]))).collect())
}

#[pymethods]
impl PyPlacer {
    #[new]
    #[pyo3(signature = (policy, workers, weights, topology, options))]
    fn new(
        policy: &str,
        workers: Option<u32>,
        weights: Option<Vec<f64>>,
        topology: Option<&str>,
        options: Options,
    ) -> PyResult<Self> {
        let p = self::policy(policy)?;
        let (members, config) = setup(&[p], workers, weights.as_deref(), topology, &options)?;
        let placer = place::build_weighted(p, &config, &members).map_err(|e| error(&e))?;
        Ok(Self { state: Mutex::new(State { placer, load: LoadTracker::new() }) })
    }

    /// The policy's name.
    #[getter]
    fn policy(&self) -> &'static str {
        self.state().placer.policy().name()
    }

    /// The members, as (worker id, weight) pairs.
    #[getter]
    fn workers(&self) -> Vec<(u32, f64)> {
        self.state().placer.members().as_slice().iter().map(|m| (m.id.0, m.weight.get())).collect()
    }

    /// Places each key in order; each stays queued on its worker (nothing completes), so that
    /// load-aware policies see the load placed so far, as in `switchyard place`.
    #[pyo3(signature = (keys, sizes=None))]
    fn place<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        sizes: Option<Vec<u64>>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let units = units(keys, sizes.as_deref())?;
        // The lock is taken without the GIL: a thread holding the GIL while it waits for the
        // placer would never let the thread placing come back (a deadlock).
        let out: Vec<u32> = py.detach(|| {
            let mut state = self.state();
            let st = &mut *state;
            units
                .iter()
                .map(|u| {
                    let w = st.placer.place(u, &st.load.view());
                    st.load.on_enqueue(w, u);
                    w.0
                })
                .collect()
        });
        Ok(PyArray1::from_vec(py, out))
    }

    /// Empties every queue (the load load-aware policies read).
    fn reset_load(&self) {
        self.state().load.reset();
    }

    /// The load placed so far on each worker id 0..=max, in units and in bytes.
    fn load<'py>(&self, py: Python<'py>) -> (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u64>>) {
        let st = self.state();
        let units = st.load.units_by_worker().to_vec();
        let bytes = st.load.bytes_by_worker().to_vec();
        (PyArray1::from_vec(py, units), PyArray1::from_vec(py, bytes))
    }

    /// Adds worker `id` with `weight`.
    #[pyo3(signature = (id, weight=1.0))]
    fn add_worker(&self, id: u32, weight: f64) -> PyResult<()> {
        let w = Weight::new(WorkerId(id), weight).map_err(|e| error(&e))?;
        self.state().placer.add_worker(WorkerId(id), w).map_err(|e| error(&e))
    }

    /// Removes worker `id`.
    fn remove_worker(&self, id: u32) -> PyResult<()> {
        self.state().placer.remove_worker(WorkerId(id)).map_err(|e| error(&e))
    }

    /// Sets worker `id`'s weight.
    fn set_weight(&self, id: u32, weight: f64) -> PyResult<()> {
        let w = Weight::new(WorkerId(id), weight).map_err(|e| error(&e))?;
        self.state().placer.set_weight(WorkerId(id), w).map_err(|e| error(&e))
    }

    fn __repr__(&self) -> String {
        let st = self.state();
        format!("Placer({:?}, workers={})", st.placer.policy().name(), st.placer.members().len())
    }
}

/// `switchyard place`: each policy on the keys; a dict per policy with the columns of
/// `place --format csv`, and the notes the binary prints on standard error.
#[pyfunction]
#[pyo3(signature = (policies, workers, weights, topology, keys, seed, undirected, options))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure<'py>(
    py: Python<'py>,
    policies: Vec<String>,
    workers: Option<u32>,
    weights: Option<Vec<f64>>,
    topology: Option<String>,
    keys: String,
    seed: u64,
    undirected: bool,
    options: Options,
) -> PyResult<(Vec<Bound<'py, PyDict>>, Vec<String>)> {
    let mut chosen: Vec<Policy> = Vec::new();
    for name in &policies {
        let list = if name.trim() == "all" { Policy::ALL.to_vec() } else { vec![policy(name)?] };
        for p in list {
            if !chosen.contains(&p) {
                chosen.push(p);
            }
        }
    }
    let (members, config) = setup(&chosen, workers, weights.as_deref(), topology.as_deref(), &options)?;
    let mut notes = Vec::new();
    if weights.is_some() {
        let (keep, skip): (Vec<Policy>, Vec<Policy>) = chosen.iter().partition(|p| p.supports_weights());
        if !skip.is_empty() {
            let names = skip.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ");
            if policies.iter().any(|p| p == "all") {
                notes.push(format!("note: weights given; skipping policies that ignore weights: {names}"));
            } else {
                return Err(bad(format!(
                    "weights given but {names} ignore{} weights; weighted policies are: {}",
                    if skip.len() == 1 { "s" } else { "" },
                    Policy::weighted_names()
                )));
            }
        }
        chosen = keep;
    }
    let source: KeySource = keys.parse().map_err(|e| error(&e))?;
    let weighted = weights.is_some();
    let rows = crate::interruptible(py, move |cancel| {
        let units = source.load(seed, undirected).map_err(|e| error(&e))?;
        if let Some(said) = &units.left_out {
            notes.push(said.clone());
        }
        let s = placement::Setup { weighted, workers: members, config, units: units.units };
        let mut rows = Vec::new();
        for p in chosen {
            if cancel.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            rows.push(placement::measure(p, &s, &|_| {}).map_err(|e| bad(format!("policy {p}: {e}")))?);
        }
        Ok((rows, notes))
    })?;
    let (rows, notes) = rows;
    let dicts = rows
        .iter()
        .map(|r| {
            let d = PyDict::new(py);
            d.set_item("policy", &r.policy)?;
            d.set_item("workers", r.workers)?;
            d.set_item("keys", r.keys)?;
            d.set_item("max_over_mean", r.max_over_mean)?;
            d.set_item("cov", r.cov)?;
            d.set_item("jain", r.jain)?;
            d.set_item("moved_on_remove", r.moved_on_remove)?;
            d.set_item("moved_on_add", r.moved_on_add)?;
            d.set_item("ns_per_decision", r.ns_per_decision)?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok((dicts, notes))
}
