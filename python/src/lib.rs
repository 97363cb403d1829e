//! `switchyard._switchyard`: the native half of the Python package. It converts Python values
//! to the library's types, calls the functions the `switchyard` binary calls, and turns their
//! errors into `SwitchyardError`; it decides nothing (policy logic stays in the core), and the
//! Python half (`python/switchyard/`) turns what comes back into NumPy arrays and DataFrames.
//!
//! Long runs go on a thread of their own while the caller waits without the GIL, waking every
//! 50 ms to ask Python for signals, so that Ctrl-C raises `KeyboardInterrupt` at once (see
//! [`interruptible`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

mod inspect;
mod place;
mod reproduce;
mod sim;

// Named `switchyard.SwitchyardError`, where the package exports it, so that pickle (Dask sends
// a worker's exception back) finds the class again.
pyo3::create_exception!(
    switchyard,
    SwitchyardError,
    PyValueError,
    "Bad input or a failed run, with the one-line message the `switchyard` binary prints."
);

/// The error as the binary prints it: the message, then each cause after a colon.
pub(crate) fn error(e: &(dyn std::error::Error + 'static)) -> PyErr {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        // Library errors often repeat their source's text in their own; say it once.
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    SwitchyardError::new_err(text)
}

/// A message of our own (the checks the binary makes on its arguments).
pub(crate) fn bad(text: impl Into<String>) -> PyErr {
    SwitchyardError::new_err(text.into())
}

/// Runs `work` on a thread of its own and waits for it without the GIL, checking for signals
/// every 50 ms. On Ctrl-C the Python exception is returned at once and `cancel` is set; `work`
/// reads it between its steps (the scenarios of a sweep) and stops, and the step under way
/// finishes on its thread and is thrown away (a simulator case cannot be stopped half-way).
pub(crate) fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce(Arc<AtomicBool>) -> PyResult<T> + Send + 'static,
) -> PyResult<T> {
    let cancel = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let flag = Arc::clone(&cancel);
    std::thread::Builder::new()
        .name("switchyard".into())
        .spawn(move || {
            // The receiver is gone only after an interrupt: nobody wants the result then.
            let _ = tx.send(work(flag));
        })
        .map_err(|e| bad(format!("cannot start a thread for the run: {e}")))?;
    // Behind a lock only because waiting without the GIL needs a `Sync` receiver.
    let rx = std::sync::Mutex::new(rx);
    loop {
        let wait =
            || rx.lock().unwrap_or_else(std::sync::PoisonError::into_inner).recv_timeout(Duration::from_millis(50));
        match py.detach(wait) {
            Ok(result) => return result,
            Err(RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                    return Err(e);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(bad("the run's thread panicked (a bug: please report it with the input)"));
            }
        }
    }
}

/// The machine's cores, as the binary's default `--threads`.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[pymodule]
fn _switchyard(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SwitchyardError", m.py().get_type::<SwitchyardError>())?;
    m.add_class::<place::PyPlacer>()?;
    m.add_function(wrap_pyfunction!(place::measure, m)?)?;
    m.add_function(wrap_pyfunction!(place::policy_names, m)?)?;
    m.add_function(wrap_pyfunction!(sim::report, m)?)?;
    m.add_function(wrap_pyfunction!(sim::sweep, m)?)?;
    m.add_function(wrap_pyfunction!(sim::toml_of_json, m)?)?;
    m.add_function(wrap_pyfunction!(sim::mmc, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce::reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce::names, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::results, m)?)?;
    Ok(())
}
