//! The **place** stage for pull-based jobs: which task a polling worker gets (Misco and MiscoRT,
//! Dou 2011 ch. 3; notes 003 §2.2–§3.5).
//!
//! Applications are MapReduce jobs with deadlines: M map tasks, then (after every map is done,
//! the barrier) R reduce tasks. Workers are unreliable and are never watched: no heartbeats, no
//! registry. An idle worker polls; the [`Board`] answers with a task or nothing, and learns of
//! failures only from what polls and uploads say and from time passing:
//!
//! - an attempt running much longer than its task usually takes is **presumed failed**
//!   (`presume_factor` × the mean successful time; the thesis gives no number);
//! - a worker that polls while the board thinks it is still working has lost that attempt (it
//!   restarted);
//! - the first upload of a task's result wins; later ones (a replica's, or a presumed-dead
//!   worker's) are refused as duplicates, so no result is counted twice;
//! - a task that fails the same way too many times in a row gives its application up, and a
//!   submitter may cancel one ([`End`]);
//! - a worker that says which programs it runs is offered only the applications it can run
//!   ([`Board::set_programs`], [`Board::require`]).
//!
//! A poll is answered in two steps: the applications are ordered ([`crate::order::apps`]: least
//! laxity, EDF, FIFO), then a [`TaskRule`] picks a task in the first application that has one
//! for this worker (falling through to the next, as the notes advise; the thesis's pseudocode
//! stops at the first).
//!
//! The task rules ([`rules`]): MiscoRT's Algorithm 2 and the thesis's baselines (random,
//! sequential, modified Hadoop), and the modern straggler rules as peers (Spark's speculation,
//! LATE). Estimates of each worker's failure rate and recovery time and of each task's time feed
//! Eq. 3.4's expected times ([`crate::measure::expected_task_time`]).
//!
//! For bags of tasks whose inputs are large shared files, [`locality`] holds the worker-centric
//! choice of Ko et al. (Middleware 2007) — the task whose input the polling worker's site
//! already holds — and its peers, storage affinity and delay scheduling.
//!
//! Sans-IO: time is an argument, randomness comes from a seed, and the board holds no sockets.
//! The simulator and the real coordinator drive the same board.

mod board;
mod ending;
pub mod locality;
mod programs;
pub mod rules;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ending;

pub use board::{
    AppId, AppSpec, AppStatus, Assignment, AttemptId, Board, BoardConfig, Phase, Refusal, TaskRef, Upload, WorkerStatus,
};
pub use ending::{End, NotCancelled};
pub use rules::TaskRule;
