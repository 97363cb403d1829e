//! `switchyard tunnel`: local TCP ports carried to another machine as weighted channels over
//! several TCP connections, with each channel's rate shown live.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use switchyard_core::carry::frame::DEFAULT_MAX_PAYLOAD;
use switchyard_mux::tunnel::{self, Forward};
use switchyard_mux::{ConnChoice, DEFAULT_FRAME, Listener, MuxConfig, Peer, Scheme, SendConfig, SessionReport, Tls};

/// Carry local TCP ports to another machine (or process) as weighted channels over several connections.
///
/// The two ends share a key (a file, or the SWITCHYARD_KEY environment variable; never a
/// command-line argument, where other users could read it). Every TCP connection to a
/// forwarded port becomes one channel with the forward's weight; channels share what the
/// session's connections together get at the bottleneck in proportion to their weights.
///
/// The key keeps strangers out but frames travel in the clear; add TLS to encrypt them
/// (`tunnel cert` makes a self-signed certificate for a start).
///
/// Example: backups at weight 1 and interactive SSH at weight 8, over 5 connections, with TLS:
///
///   far$  switchyard tunnel cert --name far.example.org --out tls/
///   far$  switchyard tunnel listen --bind 0.0.0.0:7000 --key-file tunnel.key \
///           --tls-cert tls/cert.pem --tls-key tls/key.pem
///   near$ switchyard tunnel connect --to far.example.org:7000 --key-file tunnel.key \
///           --tls-ca cert.pem \
///           --forward 127.0.0.1:8873=backup.internal:873@1 \
///           --forward 127.0.0.1:2222=127.0.0.1:22@8
///
/// Between two processes on one host, the session can run over shared-memory rings
/// (shm:/PATH) or a Unix socket (unix:/PATH) instead of TCP, with the same channels, weights
/// and schedulers. The listening end makes a Unix socket at PATH (its permissions say who may
/// connect; TLS is for networks and is refused here); with shm:, each connection is two rings
/// the connecting end allocates and hands over through that socket:
///
///   $ switchyard tunnel listen --bind shm:/run/user/1000/sy.sock --key-file tunnel.key
///   $ switchyard tunnel connect --to shm:/run/user/1000/sy.sock --key-file tunnel.key \
///       --forward 127.0.0.1:8080=127.0.0.1:80@4 --forward 127.0.0.1:8873=127.0.0.1:873@1
///
/// When something goes wrong, a client of the tunnel gets a reset, never an empty answer, and
/// both ends print why on standard error:
///
///   target not allowed: HOST:PORT     the listening end's --allow does not list it
///   cannot connect to HOST:PORT: …    the target refused, or did not answer in 10 s
///   key mismatch: …                   the two ends hold different keys
///   the peer speaks TLS …             TLS is set at one end only (the line says which to change)
///   the session … stopped             the far end restarted or went away: the connecting end
///                                     opens a new session (250 ms, doubling to 30 s); clients
///                                     wait up to 10 s for it, then are reset
///
/// A burst of connections waits in the deepest backlog the system allows, then for the far
/// end's leave to open a channel: the listening end lets at most --open-window channels be
/// opening (sent, not yet taken by it) at once, and gives leave for more as it takes them. A
/// connection waiting for leave simply waits; it is reset only past a limit set at the
/// listening end (--accept-backlog below --open-window), with the reason.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct TunnelArgs {
    #[command(subcommand)]
    side: Side,
}

#[derive(Subcommand, Debug)]
enum Side {
    /// Accept sessions and connect their channels to the targets they name.
    Listen(ListenArgs),
    /// Open a session and forward local ports through it.
    Connect(ConnectArgs),
    /// Make a self-signed TLS certificate and its key (cert.pem, key.pem) for `listen
    /// --tls-cert/--tls-key`; the connecting end trusts it with `--tls-ca cert.pem`.
    Cert(CertArgs),
}

#[derive(Args, Debug)]
struct CertArgs {
    /// A name the certificate is for: the DNS name or IP address clients connect to
    /// (repeatable).
    #[arg(long = "name", required = true)]
    names: Vec<String>,

    /// Directory to write cert.pem and key.pem to (created if missing; existing files are
    /// not overwritten).
    #[arg(long, default_value = ".")]
    out: PathBuf,
}

#[derive(Args, Debug)]
struct KeyArgs {
    /// A file holding the shared key (any bytes; 32 random bytes are plenty).
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
}

impl KeyArgs {
    fn key(&self) -> Result<Vec<u8>> {
        let key = match &self.key_file {
            Some(path) => std::fs::read(path).with_context(|| format!("reading the key file {}", path.display()))?,
            None => match std::env::var_os("SWITCHYARD_KEY") {
                Some(k) => k.into_encoded_bytes(),
                None => bail!("no key: give --key-file FILE, or set SWITCHYARD_KEY (both ends need the same key)"),
            },
        };
        if key.len() < 16 {
            bail!("the key is {} bytes; use at least 16 (e.g. `head -c 32 /dev/urandom > tunnel.key`)", key.len());
        }
        Ok(key)
    }
}

#[derive(Args, Debug)]
struct ListenArgs {
    /// Where to accept sessions: ADDR:PORT (TCP), unix:/PATH (a Unix socket) or shm:/PATH
    /// (shared-memory rings handed over a Unix socket at PATH; it takes unix: clients too).
    #[arg(long, default_value = "0.0.0.0:7000", value_name = "ADDR:PORT|unix:/PATH|shm:/PATH")]
    bind: Peer,

    /// Targets channels may connect to (`host:port`, repeatable). Without it, any target.
    #[arg(long = "allow", value_name = "HOST:PORT")]
    allow: Vec<String>,

    #[command(flatten)]
    key: KeyArgs,

    /// How many channels the connecting end may have opening at once: sent to this end and not
    /// yet taken by it. Past it the connecting end's clients wait (their connections stay
    /// open, nothing is lost) until this end takes channels and gives leave for more, so a
    /// burst of clients is paced by this end instead of queued here without bound. Each
    /// channel opening may bring its first window of data before it is taken, so this also
    /// bounds that memory here. Smaller windows cost time in a burst (each round of leave waits
    /// on both ends): on 2 cores 10,000 clients took 24 s at 1,024 and 11 s at 4,096. At least 1.
    #[arg(long, default_value_t = 4096, value_name = "CHANNELS", value_parser = clap::value_parser!(u64).range(1..))]
    open_window: u64,

    /// Channels that may wait here to be taken before one more is refused: reset, with the
    /// reason, which the connecting end prints and its client sees as a reset. A connecting
    /// end keeps within --open-window, so with the window no larger than this (the defaults)
    /// none is refused; set it below the window to refuse rather than make clients wait.
    #[arg(long, default_value_t = 4096, value_name = "CHANNELS", value_parser = clap::value_parser!(u64).range(1..))]
    accept_backlog: u64,

    /// TLS: this end's certificate chain (PEM, its own certificate first). With --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// TLS: the certificate's private key (PEM). With --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    #[command(flatten)]
    frames: FrameArgs,

    #[command(flatten)]
    buffer: BufferArgs,

    #[command(flatten)]
    show: ShowArgs,
}

/// How channels are spread over connections.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum SchemeArg {
    /// Any channel on any connection, the first with room (Iwashima's striping).
    Stripe,
    /// Striping onto the connection expected to deliver first (from TCP_INFO).
    Earliest,
    /// Each channel on one connection (no reordering), re-pinned every second by the
    /// connections' measured rates and the service each channel got, taking turns so that
    /// shares over time approach the weights.
    Pin,
    /// Pinning re-pinned by measured rates only (fewer moves, shares further off).
    PinRates,
}

#[derive(Args, Debug)]
struct ConnectArgs {
    /// The listening end: HOST:PORT (TCP), unix:/PATH or shm:/PATH (a process on this host,
    /// over a Unix socket or over shared-memory rings).
    #[arg(long, value_name = "HOST:PORT|unix:/PATH|shm:/PATH")]
    to: String,

    /// LOCAL=TARGET[@WEIGHT]: listen on LOCAL here; the far end connects to TARGET (repeatable).
    #[arg(long = "forward", value_name = "LOCAL=TARGET[@WEIGHT]", required = true)]
    forwards: Vec<Forward>,

    /// Connections in the session (m): TCP connections, Unix socket connections, or pairs of
    /// rings. Over TCP, more take a larger share of a shared bottleneck from competing flows:
    /// about m/(m+k) against k others.
    #[arg(long, default_value_t = 5)]
    connections: usize,

    /// How channels are spread over connections.
    #[arg(long, value_enum, default_value_t = SchemeArg::Stripe)]
    scheme: SchemeArg,

    #[command(flatten)]
    key: KeyArgs,

    /// TLS: the certificates to trust for the listening end (PEM: a CA's, or the listening
    /// end's own self-signed one). Without it, frames travel in the clear. TLS 1.3 only; no
    /// key updates: a connection ends and is dialled again after 2^24 records (256 GiB) under
    /// one key.
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<PathBuf>,

    /// TLS: the name the listening end's certificate must carry. Default: the host in --to.
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    tls_name: Option<String>,

    #[command(flatten)]
    frames: FrameArgs,

    #[command(flatten)]
    buffer: BufferArgs,

    #[command(flatten)]
    show: ShowArgs,
}

/// The frames this end sends: the sending half's, so each end sets its own.
#[derive(Args, Debug)]
struct FrameArgs {
    /// Largest payload of a frame this end sends, in bytes (1,024 to 1,048,576, the most a
    /// receiver takes). Larger frames cost less CPU a byte, since much of the session's cost is
    /// per frame and per system call: on loopback 64 KiB frames took 405–422 ns/KB against
    /// 508–512 at 16 KiB. But a frame is the unit of the weights and of head-of-line delay: at
    /// 8 Mbit/s a 64 KiB frame holds the link 64 ms, and an application writing 64 KiB at a time
    /// must wake four times as often to keep a heavy channel backlogged. Raise it on fast paths
    /// with applications that write big; keep the default on slow or shared links.
    #[arg(long, default_value_t = DEFAULT_FRAME as u32, value_name = "BYTES",
          value_parser = clap::value_parser!(u32).range(1024..=i64::from(DEFAULT_MAX_PAYLOAD)))]
    frame: u32,

    /// TCP_NOTSENT_LOWAT of each connection, in bytes: how much the kernel holds unsent before
    /// the scheduler chooses again. Default: one frame (--frame). Lower keeps the scheduler's
    /// choice closer to the wire at the cost of more system calls; much higher lets a connection
    /// queue ahead of the weights.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(1..))]
    lowat: Option<u32>,
}

impl FrameArgs {
    /// The session's settings with this end's frame and mark.
    fn apply(&self, config: MuxConfig) -> MuxConfig {
        MuxConfig {
            send: SendConfig { max_frame: self.frame as usize, ..config.send },
            notsent_lowat: self.lowat.unwrap_or(self.frame),
            ..config
        }
    }

    /// How the start line names them.
    fn describe(&self) -> String {
        format!("{}-byte frames", self.frame)
    }
}

/// What this end holds in memory for the session.
#[derive(Args, Debug)]
struct BufferArgs {
    /// Bytes this end may hold, for the whole session, of what it read from its local
    /// connections (clients here, targets at the listening end) and the far end has not yet
    /// acknowledged. A connection is read only while there is room: one that sends faster
    /// than the far end takes is held back by TCP, never refused or cut. Each connection gets
    /// at most half of what is free, so one alone holds at most half of this, and one whose
    /// far side stops reading leaves the rest to the others.
    ///
    /// Memory bound, per session: this, and up to as much again in read buffers (a chunk
    /// holds at most twice its bytes). Per connection besides, the other way: what the far end
    /// sent and the local side has not read yet, at most its credit window (512 KiB, or its
    /// weight's share of 64 MiB if larger) and 128 KiB queued for its socket (256 KiB with
    /// larger frames, or two frames if those are larger still). With the default, 10,000 connections busy at once hold about 3 KiB each
    /// of the budget.
    #[arg(long, default_value = "32MiB", value_name = "BYTES", value_parser = session_buffer)]
    session_buffer: u64,
}

/// The session buffer as people write sizes (`64K`, `32M`, `1G`), refused below the smallest
/// that lets a connection read at all: the budget grants at least one 64 KiB chunk's worth to a
/// connection alone (half of what is free), so less would leave every connection waiting.
fn session_buffer(s: &str) -> Result<u64, String> {
    const LEAST: usize = 64 << 10;
    let bytes = crate::units::parse_size(s)?;
    if bytes < LEAST {
        return Err(format!(
            "{bytes} bytes is under the least a session can work with, 64K (a connection alone gets at most half of what is free, and reads in chunks of up to 64 KiB); give 64K or more, e.g. 32M (the default) or 128M for a faster burst at about 28 KiB a connection"
        ));
    }
    Ok(bytes as u64)
}

#[derive(Args, Debug)]
struct ShowArgs {
    /// Seconds between rate reports (0: none). Shown live on a terminal, one line per report
    /// otherwise.
    #[arg(long, default_value_t = 1.0)]
    every: f64,
}

pub(crate) fn run(args: &TunnelArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(async {
        match &args.side {
            Side::Listen(a) => listen(a).await,
            Side::Connect(a) => connect(a).await,
            Side::Cert(a) => cert(a),
        }
    })
}

async fn listen(a: &ListenArgs) -> Result<()> {
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => Some(Tls::server_from_pem(cert, key)?),
        _ => None,
    };
    let encrypted = match (&tls, a.bind.is_local()) {
        (Some(_), _) => "TLS",
        (None, true) => "on this host only",
        (None, false) => "in the clear (no --tls-cert)",
    };
    let config = a.frames.apply(MuxConfig {
        key: a.key.key()?,
        tls,
        open_window: a.open_window,
        accept_backlog: usize::try_from(a.accept_backlog).unwrap_or(usize::MAX),
        session_buffer: a.buffer.session_buffer,
        ..MuxConfig::default()
    });
    let mut listener = Listener::bind_to(a.bind.clone(), config).await?;
    eprintln!("switchyard tunnel: listening on {}, {encrypted}, {}", listener.local(), a.frames.describe());
    let every = a.show.every;
    let mut refusals = listener.refusals();
    loop {
        let session = tokio::select! {
            session = listener.accept() => match session {
                Some(session) => session,
                None => break,
            },
            Some(why) = refusals.recv() => {
                eprintln!("switchyard tunnel: refused {why}");
                continue;
            }
        };
        eprintln!("switchyard tunnel: a session joined");
        tokio::spawn(tunnel::serve(session.clone(), a.allow.clone(), log()));
        if every > 0.0 {
            tokio::spawn(show(session.into(), every));
        }
    }
    Ok(())
}

async fn connect(a: &ConnectArgs) -> Result<()> {
    // A host name is looked up here, once, before anything else runs.
    let to: Peer = a.to.parse().map_err(anyhow::Error::msg)?;
    let scheme = match a.scheme {
        SchemeArg::Stripe => Scheme::Stripe(ConnChoice::LeastQueued),
        SchemeArg::Earliest => Scheme::Stripe(ConnChoice::EarliestDelivery { slack: 0.1 }),
        SchemeArg::Pin | SchemeArg::PinRates => Scheme::Pin { hysteresis: 0.01 },
    };
    let tls = match &a.tls_ca {
        Some(ca) => {
            let name = match &a.tls_name {
                Some(n) => n.clone(),
                None => host_of(&a.to).to_owned(),
            };
            Some(Tls::client_from_pem(ca, &name)?)
        }
        None => None,
    };
    let encrypted = match (&tls, to.is_local()) {
        (Some(_), _) => "TLS",
        (None, true) => "on this host only",
        (None, false) => "in the clear (no --tls-ca)",
    };
    let config = MuxConfig {
        key: a.key.key()?,
        connections: a.connections,
        send: SendConfig {
            scheme,
            pin_by_service: !matches!(a.scheme, SchemeArg::PinRates),
            ..MuxConfig::default().send
        },
        tls,
        session_buffer: a.buffer.session_buffer,
        ..MuxConfig::default()
    };
    let config = a.frames.apply(config);
    let near = tunnel::Near::connect(to.clone(), config, log()).await?;
    eprintln!(
        "switchyard tunnel: session with {to} over {} connections, {encrypted}, {}",
        a.connections,
        a.frames.describe()
    );
    let mut forwards = tokio::task::JoinSet::new();
    for f in &a.forwards {
        eprintln!("switchyard tunnel: {} → {} (weight {})", f.local, f.target, f.weight);
        // Bound now, so that a port in use is an error at once.
        let listener = tunnel::bind(f)?;
        forwards.spawn(tunnel::forward_on(listener, near.clone(), f.clone(), log()));
    }
    if a.show.every > 0.0 {
        tokio::spawn(show(near, a.show.every));
    }
    // A forward ends only when its listener fails: that is the error to report.
    while let Some(done) = forwards.join_next().await {
        done.context("a forward stopped")??;
    }
    Ok(())
}

/// Where the tunnel's lines about connections it could not carry go: standard error.
fn log() -> tunnel::Log {
    std::sync::Arc::new(|line| eprintln!("switchyard tunnel: {line}"))
}

/// The host in `host:port` (`[v6]:port` too).
fn host_of(to: &str) -> &str {
    let host = to.rsplit_once(':').map_or(to, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Writes a self-signed certificate for `a.names` and its key.
fn cert(a: &CertArgs) -> Result<()> {
    let certified = switchyard_mux::SelfSigned::generate(&a.names)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let write = |name: &str, text: String, mode: u32| -> Result<PathBuf> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = a.out.join(name);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
            .with_context(|| format!("writing {} (an existing file is not overwritten)", path.display()))?;
        f.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    };
    let cert = write("cert.pem", certified.cert_pem, 0o644)?;
    // Only its owner may read the key.
    let key = write("key.pem", certified.key_pem, 0o600)?;
    println!("wrote {} and {}", cert.display(), key.display());
    println!(
        "listening end: --tls-cert {} --tls-key {}; connecting end: --tls-ca {} (a copy of it)",
        cert.display(),
        key.display(),
        cert.display()
    );
    Ok(())
}

/// Prints each channel's rate in both directions every `every` seconds: redrawn in place on a
/// terminal, a line per report otherwise.
async fn show(near: tunnel::Near, every: f64) {
    let live = std::io::stderr().is_terminal();
    let mut last: Option<(Instant, SessionReport)> = None;
    let mut drawn = 0;
    loop {
        tokio::time::sleep(Duration::from_secs_f64(every)).await;
        // While a new session is being opened there is nothing to show.
        let Some(session) = near.current() else { continue };
        let Ok(now) = session.report().await else { continue };
        let t = Instant::now();
        if let Some((then, before)) = &last {
            let dt = t.duration_since(*then).as_secs_f64().max(1e-9);
            let rate = |id: u32, f: &dyn Fn(&switchyard_mux::ChannelReport) -> u64| {
                let was = before.channels.iter().find(|c| c.id == id).map_or(0, f);
                now.channels.iter().find(|c| c.id == id).map_or(0, f).saturating_sub(was) as f64 / dt
            };
            let mut text = format!(
                "{} connections ({} lost so far); {} channels finished, {} reset ({} refused here); {} opening \
                 here, {} waiting for the far end's leave to open\n",
                now.connections, now.lost, now.retired.0, now.reset, now.refused, now.opening, now.waiting_to_open
            );
            text.push_str(&format!(
                "{:>8} {:>7} {:>12} {:>12} {:>9}\n",
                "channel", "weight", "out MB/s", "in MB/s", "resent"
            ));
            for c in &now.channels {
                let out = rate(c.id, &|c| c.sent.sent_bytes) / 1e6;
                let inn = rate(c.id, &|c| c.received.delivered_bytes) / 1e6;
                if out > 0.0 || inn > 0.0 || !live {
                    text.push_str(&format!(
                        "{:>8} {:>7.2} {:>12.2} {:>12.2} {:>9}\n",
                        c.id, c.weight, out, inn, c.sent.resent_frames
                    ));
                }
            }
            let mut err = std::io::stderr().lock();
            if live {
                // Back over the previous report.
                let _ = write!(err, "\x1b[{drawn}A\x1b[J");
            }
            drawn = text.lines().count();
            let _ = err.write_all(text.as_bytes());
        }
        last = Some((t, now));
    }
}

#[cfg(test)]
mod tests {
    use super::session_buffer;
    use switchyard_mux::MuxConfig;

    #[test]
    fn the_session_buffers_default_is_the_sessions_own() {
        // The flag's default is written as text for --help; it must say what the mux defaults to.
        assert_eq!(session_buffer("32MiB"), Ok(MuxConfig::default().session_buffer));
        assert_eq!(session_buffer("64K"), Ok(64 << 10));
        assert!(session_buffer("65535").is_err());
    }
}
