//! `reproduce yates-clp`'s measurements on real threads and sockets (Yates 2006 ch. 3–4):
//! bulk connections on a number of worker threads, measured from the send side as the thesis
//! did, with soft throughput-based scheduling off or on; and rate-promised streams measured by
//! their clients, window by window. (Its processor scaling is the simulator's, `models::clp`.)

use std::time::{Duration, Instant};

use switchyard_core::measure::{Spread, balance, spread};
use switchyard_core::order::PaceConfig;
use switchyard_core::place::rebalance::{Direction, RebalanceConfig};
use switchyard_runtime::deliver::load::{Opened, Summary};
use switchyard_runtime::deliver::{
    Handshake, Load, LoadConfig, Pacing, Request, Server, ServerConfig, Transport, Windows,
};

use crate::ExperimentError;

/// What one run of bulk connections measured, from the send side as the thesis did.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Worker threads.
    pub threads: usize,
    /// The connections' rates summed (bits/s).
    pub aggregate_bps: f64,
    /// The thesis's percentile view of the threads' rates.
    pub per_thread: Spread,
    /// The same of the connections' rates.
    pub per_conn: Spread,
    /// Jain's index of the connections' rates.
    pub conn_jain: f64,
    /// The threads' CPU time, spread.
    pub cpu: Spread,
    /// Connections the rebalancer moved.
    pub moves: u64,
    /// Connections the server did not accept.
    pub not_accepted: usize,
}

fn server(workers: usize, pacing: Pacing, rebalance: Option<RebalanceConfig>) -> Result<Server, ExperimentError> {
    // One packet per connection per turn, the unit of the thesis's fairness and scheduling runs.
    let cfg = ServerConfig { workers, pacing, rebalance, burst: 1, ..Default::default() };
    Server::start(cfg).map_err(|e| ExperimentError::Real(format!("cannot start the delivery server on loopback: {e}")))
}

/// Clients, and how many of them the server did not accept.
fn clients(
    server: &Server,
    transport: Transport,
    conns: usize,
    request: Request,
) -> Result<(Load, usize), ExperimentError> {
    let l = Load::start(LoadConfig {
        server: server.local_addr(),
        transport,
        conns,
        handshake: Handshake::Switchyard(request),
        threads: 1,
        recv_buffer: Some(1 << 20),
    })?;
    let bad = l.opened().into_iter().filter(|o| !matches!(o, Opened::Accepted(_))).count();
    Ok((l, bad))
}

/// Bulk connections on `threads` workers: the send side's view, as the thesis measured it.
pub fn bulk_case(
    threads: usize,
    transport: Transport,
    conns: usize,
    secs: f64,
    warmup: f64,
    soft: Option<Direction>,
) -> Result<Measured, ExperimentError> {
    let srv = server(
        threads,
        Pacing::Fine(PaceConfig::default()),
        soft.map(|direction| RebalanceConfig { direction, ..Default::default() }),
    )?;
    let (load, not_accepted) = clients(&srv, transport, conns, Request::Bulk)?;
    std::thread::sleep(Duration::from_secs_f64(warmup));
    let before = srv.connections();
    let seen = srv.history().len();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let after = srv.connections();
    let elapsed = t0.elapsed().as_secs_f64();
    let history = srv.history();
    let moves = srv.totals().moves;
    drop(load);
    srv.stop();
    let per_conn: Vec<f64> = after
        .iter()
        .map(|a| (a.bytes - before.iter().find(|b| b.id == a.id).map_or(0, |b| b.bytes)) as f64 * 8.0 / elapsed)
        .collect();
    let samples = &history[seen.min(history.len())..];
    let span: f64 = samples.iter().map(|s| s.secs).sum::<f64>().max(1e-9);
    let per_thread: Vec<f64> =
        (0..threads).map(|i| samples.iter().map(|s| s.bytes[i]).sum::<u64>() as f64 * 8.0 / span).collect();
    let cpu: Vec<f64> = (0..threads).map(|i| samples.iter().map(|s| s.cpu_ns[i]).sum::<u64>() as f64).collect();
    Ok(Measured {
        threads,
        aggregate_bps: per_conn.iter().sum(),
        per_thread: spread(&per_thread),
        per_conn: spread(&per_conn),
        conn_jain: balance(&per_conn, None).jain,
        cpu: spread(&cpu),
        moves,
        not_accepted,
    })
}

/// Streams at `bits` on every connection, measured by the clients in 100 ms windows after a
/// second's warm-up; with how many connections the server did not accept.
pub fn hard_case(
    threads: usize,
    conns: usize,
    bits: u64,
    pacing: Pacing,
    secs: f64,
) -> Result<(Summary, Windows, usize), ExperimentError> {
    let srv = server(threads, pacing, None)?;
    let (load, not_accepted) = clients(&srv, Transport::Udp, conns, Request::Stream { bits_per_sec: bits })?;
    let skip: Vec<bool> = load.opened().iter().map(|o| !matches!(o, Opened::Accepted(_))).collect();
    let windows = (secs * 10.0).ceil() as usize;
    let w = load.measure(Duration::from_secs(1), Duration::from_millis(100), windows, |_, _| {});
    drop(load);
    srv.stop();
    Ok((w.summary(0, Some(bits as f64 / 8.0), &skip), w, not_accepted))
}
