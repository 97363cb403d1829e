//! Runs a grid of independent, deterministic simulations on a few threads: every (point,
//! variant, run) in order, results in the same order whatever the threads did.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `simulate(point, variant, run)` for every point, variant and run (`runs` each), on up to
/// `threads` threads, calling `progress` with the count done after each; returns the results
/// point-major, then variant, then run.
pub(crate) fn sweep<R: Send, E: Send>(
    points: usize,
    variants: usize,
    runs: u64,
    threads: usize,
    simulate: &(dyn Fn(usize, usize, u64) -> Result<R, E> + Sync),
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<R>, E> {
    let jobs: Vec<(usize, usize, u64)> =
        (0..points).flat_map(|p| (0..variants).flat_map(move |v| (0..runs).map(move |r| (p, v, r)))).collect();
    let mut out: Vec<Option<Result<R, E>>> = (0..jobs.len()).map(|_| None).collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots = Mutex::new(&mut out);
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(p, v, r)) = jobs.get(i) else { break };
                    let result = simulate(p, v, r);
                    slots.lock().expect("no run panics holding the lock")[i] = Some(result);
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1);
                }
            });
        }
    });
    out.into_iter().map(|o| o.expect("every run ran")).collect()
}
