//! Running the calling thread on one core for a while.
//!
//! Workers are pinned to cores (see [`crate::pipeline`]); a single-threaded baseline measured
//! against them should be too. Left free, the scheduler moved the serial pipeline between the
//! two cores of the test machine, and it ran about a fifth slower than pinned (a cold cache on
//! each move): a baseline slowed that way flatters the pipeline it is compared with.

/// Runs `f` with the calling thread pinned to `core`, then gives the thread back the cores it
/// was allowed before. Where the OS cannot pin (or `core` does not exist), `f` runs unpinned.
pub fn on_core<T>(core: usize, f: impl FnOnce() -> T) -> T {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
        use nix::unistd::Pid;
        let me = Pid::from_raw(0);
        let mut one = CpuSet::new();
        if let (Ok(before), Ok(())) = (sched_getaffinity(me), one.set(core))
            && sched_setaffinity(me, &one).is_ok()
        {
            let out = f();
            // Restoring a mask the thread had a moment ago cannot fail for want of cores.
            let _ = sched_setaffinity(me, &before);
            return out;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = core;
    f()
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_os = "linux")]
    fn the_thread_runs_on_the_core_and_gets_its_cores_back() {
        use nix::sched::sched_getaffinity;
        use nix::unistd::Pid;
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let Some(core) = (0..nix::sched::CpuSet::count()).find(|&c| before.is_set(c).unwrap_or(false)) else {
            return;
        };
        let inside = super::on_core(core, || sched_getaffinity(Pid::from_raw(0)).unwrap());
        let allowed: Vec<usize> =
            (0..nix::sched::CpuSet::count()).filter(|&c| inside.is_set(c).unwrap_or(false)).collect();
        assert_eq!(allowed, [core]);
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
    }
}
