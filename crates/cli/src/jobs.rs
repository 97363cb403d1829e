//! `switchyard jobs serve|worker|submit|status|output|cancel`: deadline jobs on unreliable workers
//! (Misco and MiscoRT, Dou 2011), with a live status table.

use std::io::{IsTerminal, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use switchyard_core::place::tasks::locality::Metric;
use switchyard_core::place::tasks::{BoardConfig, TaskRule};
use switchyard_experiments::miscort::SCHEDULERS;
use switchyard_jobs::Submission as Submit;
use switchyard_jobs::client::{ClientError, Submitter};
use switchyard_jobs::store::Location;
use switchyard_jobs::wire::{AppView, WorkerView};
use switchyard_jobs::{Allowed, Coordinator, Failures, Limits, Shared, Store, Sync, WorkerConfig};

/// Deadline jobs on unreliable workers: a coordinator, workers that poll it, and a
/// submitter's commands (Misco's pull-based MapReduce with MiscoRT's failure-aware
/// scheduling, Dou 2011).
///
/// A tour, in four terminals:
///
///   export SWITCHYARD_JOBS_TOKEN=secret
///   switchyard jobs serve --db sqlite:jobs.db
///   switchyard jobs worker --name w1
///   switchyard jobs worker --name w2 --fail-rate 0.05 --recovery 5
///   switchyard jobs submit --program wordcount --reduces 4 --deadline 120 book.txt
///   switchyard jobs status --watch
///   switchyard jobs output 0 > counts.tsv
///
/// A worker runs the built-in programs and the commands its operator allow-lists (--allow),
/// and says so with each poll: an application goes only to workers that can run it, and one
/// that no live worker can run waits, with the reason in `jobs status`. A task that fails the
/// same way --max-task-failures times in a row fails its application, with the workers'
/// reason; `jobs cancel APP` stops one.
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct JobsArgs {
    #[command(subcommand)]
    command: JobsCommand,
}

#[derive(Subcommand)]
enum JobsCommand {
    Serve(ServeArgs),
    Worker(WorkerArgs),
    Submit(SubmitArgs),
    Status(StatusArgs),
    Output(OutputArgs),
    Cancel(CancelArgs),
}

#[derive(Args)]
struct Connect {
    /// The coordinator.
    #[arg(long, default_value = "http://127.0.0.1:7700")]
    coordinator: String,
    /// The coordinator's token.
    #[arg(long, env = "SWITCHYARD_JOBS_TOKEN", hide_env_values = true)]
    token: String,
}

/// Run the coordinator: workers poll it for tasks, submitters give it applications. Its state
/// (the log of every decision, the inputs, intermediate and final outputs) lives in the
/// database, and a restarted coordinator carries on from it.
#[derive(Args)]
struct ServeArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:7700")]
    listen: SocketAddr,
    /// The database: sqlite:PATH (created if need be), or postgres://USER@HOST:PORT/DATABASE
    /// (its tables created if need be; several coordinators may share it).
    #[arg(long, default_value = "sqlite:switchyard-jobs.db")]
    db: String,
    /// The token every request must carry (Authorization: Bearer TOKEN). Without one, a
    /// random token is made and printed.
    #[arg(long, env = "SWITCHYARD_JOBS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// How polls are answered: miscort (least laxity first, Algorithm 2), edf (EDF with the
    /// sequential task rule), or least laxity with another task rule: llf+random,
    /// llf+sequential, llf+hadoop, llf+spark, llf+late, llf+boinc.
    #[arg(long, default_value = "miscort")]
    scheduler: String,
    /// Give a worker that says its site (jobs worker --site) the never-assigned map whose split
    /// its site's store holds (Ko et al.'s worker-centric scheduling), by this weight: overlap
    /// (splits present), rest (1 / (1 + splits missing)) or combined; then MiscoRT's re-issue.
    #[arg(long, value_enum)]
    locality: Option<LocalityArg>,
    /// With --locality, draw among this many of the best maps (1: the best).
    #[arg(long, default_value_t = 1)]
    top: u32,
    /// An attempt running longer than this many times its task's mean time is presumed failed.
    #[arg(long, default_value_t = 3.0)]
    presume_factor: f64,
    /// Seconds a task is taken to need before any has finished (unless the submitter says).
    #[arg(long, default_value_t = 60.0)]
    default_task_time: f64,
    /// The largest task estimate a submission may give (jobs submit --estimate), in seconds;
    /// larger ones are refused. Until a task of an application finishes, a worker that dies
    /// holding one is presumed failed only after --presume-factor × the estimate (after
    /// that, × the tasks' observed mean time), so an estimate of 1e9 would leave its task
    /// with a dead worker for decades.
    #[arg(long, default_value_t = 3600.0)]
    max_estimate: f64,
    /// A task whose attempts fail this many times in a row, each with the same reason (the
    /// workers' message, word for word), fails its application: `jobs status` says `failed`
    /// and why, and nothing more of it runs. A different reason starts the count again.
    /// 0: never give up (a task that cannot succeed is retried until cancelled). 4 is
    /// Hadoop's default number of attempts per task.
    #[arg(long, default_value_t = 4)]
    max_task_failures: u32,
    /// Milliseconds an idle worker must wait between polls that get nothing; earlier polls are
    /// refused with 429 and Retry-After.
    #[arg(long, default_value_t = 100)]
    idle_poll_ms: u64,
    /// The largest input a submission may carry, in MiB.
    #[arg(long, default_value_t = 1024)]
    max_input_mib: usize,
    /// The largest result a worker may upload, in MiB.
    #[arg(long, default_value_t = 256)]
    max_result_mib: usize,
    /// How SQLite's commits reach the disk: normal (nothing lost if the process dies) or full
    /// (nor if the machine does).
    #[arg(long, value_enum, default_value_t = SyncArg::Normal)]
    sync: SyncArg,
}

#[derive(Clone, Copy, ValueEnum)]
enum LocalityArg {
    Overlap,
    Rest,
    Combined,
}

#[derive(Clone, Copy, ValueEnum)]
enum SyncArg {
    Normal,
    Full,
}

/// Run a worker: poll the coordinator, run the tasks it hands out, upload the results.
/// Programs are built in (wordcount, grep, invindex, kmeans, sleep) or commands allow-listed
/// here; nothing received is evaluated. Each poll says which programs this worker runs (the
/// built-in ones, and exec:NAME for each --allow), and the coordinator hands it only those.
#[derive(Args)]
struct WorkerArgs {
    #[command(flatten)]
    connect: Connect,
    /// This worker's name; keep it across restarts. Default: HOST-PID.
    #[arg(long)]
    name: Option<String>,
    /// Inject crashes at this rate per second (Poisson), busy or idle; the held task is
    /// abandoned without a word, as a crashed worker's is.
    #[arg(long)]
    fail_rate: Option<f64>,
    /// Inject a failure into each task with this probability (its result is thrown away).
    #[arg(long, conflicts_with = "fail_rate")]
    fail_prob: Option<f64>,
    /// Mean seconds down after an injected failure (exponential).
    #[arg(long, default_value_t = 10.0)]
    recovery: f64,
    /// Seed of the failure injector.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Allow a command as the map of `exec:NAME` applications: NAME=COMMAND, run with sh -c,
    /// the split on its stdin, KEY<TAB>VALUE lines on its stdout. Repeatable.
    #[arg(long, value_name = "NAME=COMMAND")]
    allow: Vec<String>,
    /// Allow a command as the reduce of `exec:NAME`: its partition's records, sorted by key, on
    /// stdin; its output lines on stdout. Without one, the sorted records are the output.
    #[arg(long, value_name = "NAME=COMMAND")]
    allow_reduce: Vec<String>,
    /// Milliseconds to wait after a poll that got nothing.
    #[arg(long, default_value_t = 100)]
    idle_ms: u64,
    /// Stop after running this many tasks.
    #[arg(long)]
    tasks: Option<u64>,
    /// The site this worker is at: workers of a site share its store of splits, and a
    /// coordinator started with --locality prefers to give them the maps it holds (Ko et al.).
    #[arg(long, requires = "store")]
    site: Option<String>,
    /// The site's store: a folder the site's workers share, keeping the splits they read.
    #[arg(long, requires = "site")]
    store: Option<PathBuf>,
    /// The store's capacity in MiB; the least recently used splits are evicted past it.
    #[arg(long, default_value_t = 1024)]
    store_mib: u64,
}

/// Submit an application: its input is split on line boundaries, its maps run, then its
/// reduces, and its output is kept until fetched with `jobs output`.
#[derive(Args)]
struct SubmitArgs {
    #[command(flatten)]
    connect: Connect,
    /// The program: wordcount, grep, invindex (lines DOC<TAB>TEXT), kmeans (lines x,y,…),
    /// sleep (MAP_SECS,REDUCE_SECS), or exec:NAME (a command workers allow-list with
    /// `jobs worker --allow NAME=COMMAND`). Only workers that run it get its tasks; while no
    /// live worker does, it is accepted and waits, and `jobs status` says why.
    #[arg(long)]
    program: String,
    /// The program's argument: grep's pattern, kmeans' centroids as x,y;x,y.
    #[arg(long, default_value = "")]
    arg: String,
    /// Reduce partitions (0 for a map-only program such as grep).
    #[arg(long, default_value_t = 4)]
    reduces: u32,
    /// Seconds from now to the deadline.
    #[arg(long)]
    deadline: f64,
    /// Bytes per split (a map task each); K, M and G suffixes are powers of 1024.
    #[arg(long, default_value = "1M", value_parser = crate::units::parse_size)]
    split: usize,
    /// Seconds you expect one task to take, if you know (else it is learned). At most the
    /// coordinator's --max-estimate (3600 s unless it was started with another): until a task
    /// finishes, a worker that dies holding one is noticed only after --presume-factor × this.
    #[arg(long)]
    estimate: Option<f64>,
    /// A name for people (default: the input's file name).
    #[arg(long)]
    name: Option<String>,
    /// The input file, or - for standard input.
    input: PathBuf,
}

/// Show every application (tasks done, running and repeated, laxity, the verdict: running,
/// met, missed, failed or cancelled, and why where there is a reason) and every worker (the
/// attempt it holds, whether it is presumed failed, its estimated failure rate and recovery).
#[derive(Args)]
struct StatusArgs {
    #[command(flatten)]
    connect: Connect,
    /// Redraw every second until every application has a verdict. A request that fails (the
    /// coordinator is restarting or not up yet) is said on standard error and tried again a
    /// second later; a wrong token ends the watch, since waiting will not mend it.
    #[arg(long)]
    watch: bool,
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "watch")]
    json: bool,
}

/// Write a finished application's output (sorted by key for programs that reduce).
#[derive(Args)]
struct OutputArgs {
    #[command(flatten)]
    connect: Connect,
    /// The application's number (from `jobs submit` or `jobs status`).
    app: u32,
    /// Write here instead of standard output.
    #[arg(short, long)]
    out: Option<PathBuf>,
}

/// Cancel an application: nothing more of it is handed out, the results of its attempts out
/// are refused, and `jobs status` says `cancelled`. Its input and any output so far stay in
/// the database.
#[derive(Args)]
struct CancelArgs {
    #[command(flatten)]
    connect: Connect,
    /// The application's number (from `jobs submit` or `jobs status`).
    app: u32,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")
}

pub(crate) fn run(args: &JobsArgs) -> Result<()> {
    match &args.command {
        JobsCommand::Serve(a) => serve(a),
        JobsCommand::Worker(a) => worker(a),
        JobsCommand::Submit(a) => submit(a),
        JobsCommand::Status(a) => status(a),
        JobsCommand::Output(a) => output(a),
        JobsCommand::Cancel(a) => cancel(a),
    }
}

fn serve(a: &ServeArgs) -> Result<()> {
    let at = Location::parse(&a.db)?;
    let Some(s) = SCHEDULERS.iter().find(|s| s.name == a.scheduler) else {
        let names: Vec<_> = SCHEDULERS.iter().map(|s| s.name).collect();
        bail!("--scheduler {:?}: choose one of {}", a.scheduler, names.join(", "));
    };
    if !(a.presume_factor.is_finite() && a.presume_factor > 1.0) {
        bail!("--presume-factor {}: give a number above 1", a.presume_factor);
    }
    if !(a.default_task_time.is_finite() && a.default_task_time > 0.0) {
        bail!("--default-task-time {}: give a positive number of seconds", a.default_task_time);
    }
    if !(a.max_estimate.is_finite() && a.max_estimate > 0.0) {
        bail!("--max-estimate {}: give a positive number of seconds", a.max_estimate);
    }
    let token = match &a.token {
        Some(t) if !t.is_empty() => t.clone(),
        _ => {
            let mut b = [0u8; 16];
            getrandom::fill(&mut b).map_err(|e| anyhow::anyhow!("making a token: {e}"))?;
            let t: String = b.iter().map(|x| format!("{x:02x}")).collect();
            eprintln!("token: {t}  (give it to workers and submitters as --token or SWITCHYARD_JOBS_TOKEN)");
            t
        }
    };
    let sync = match a.sync {
        SyncArg::Normal => Sync::Normal,
        SyncArg::Full => Sync::Full,
    };
    let store = Store::connect(&at, sync)?;
    let rule = match a.locality {
        None => s.rule,
        Some(m) => TaskRule::WorkerCentric {
            metric: match m {
                LocalityArg::Overlap => Metric::Overlap,
                LocalityArg::Rest => Metric::Rest,
                LocalityArg::Combined => Metric::Combined { as_printed: false },
            },
            top: a.top.max(1),
        },
    };
    let config = BoardConfig {
        order: s.order,
        rule,
        presume_factor: a.presume_factor,
        default_task_time: a.default_task_time,
        give_up_after: (a.max_task_failures > 0).then_some(a.max_task_failures),
        ..BoardConfig::default()
    };
    let coordinator = Coordinator::open(store, config, Duration::from_millis(a.idle_poll_ms))
        .with_context(|| format!("opening {}", at.name()))?
        .with_max_estimate(a.max_estimate);
    let apps = coordinator.board().status(switchyard_core::Nanos(0)).len();
    let limits = Limits { max_input: a.max_input_mib << 20, max_result: a.max_result_mib << 20 };
    runtime()?.block_on(async {
        let listener =
            tokio::net::TcpListener::bind(a.listen).await.with_context(|| format!("listening on {}", a.listen))?;
        eprintln!(
            "jobs coordinator on http://{} ({} scheduler{}, state in {}: {apps} applications so far)",
            listener.local_addr()?,
            s.name,
            if a.locality.is_some() { ", worker-centric maps" } else { "" },
            at.name()
        );
        let stop = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        switchyard_jobs::server::serve(listener, Shared::new(coordinator, token), limits, stop).await.context("serving")
    })
}

fn pairs(flag: &str, items: &[String]) -> Result<std::collections::HashMap<String, String>> {
    items
        .iter()
        .map(|i| match i.split_once('=') {
            Some((n, c)) if !n.is_empty() && !c.is_empty() => Ok((n.to_string(), c.to_string())),
            _ => bail!("--{flag} {i:?}: give NAME=COMMAND"),
        })
        .collect()
}

fn worker(a: &WorkerArgs) -> Result<()> {
    let failures = match (a.fail_rate, a.fail_prob) {
        (Some(r), _) if !(r.is_finite() && r >= 0.0) => bail!("--fail-rate {r}: give failures per second, 0 or more"),
        (_, Some(p)) if !(0.0..=1.0).contains(&p) => bail!("--fail-prob {p}: give a probability from 0 to 1"),
        (Some(rate), _) => Failures::Poisson { rate, recovery: a.recovery },
        (_, Some(p)) => Failures::PerTask { p, recovery: a.recovery },
        _ => Failures::Never,
    };
    if !(a.recovery.is_finite() && a.recovery >= 0.0) {
        bail!("--recovery {}: give seconds, 0 or more", a.recovery);
    }
    let name = a.name.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "worker".into());
        format!("{}-{}", host.trim(), std::process::id())
    });
    let config = WorkerConfig {
        coordinator: a.connect.coordinator.clone(),
        token: a.connect.token.clone(),
        name: name.clone(),
        idle: Duration::from_millis(a.idle_ms),
        failures,
        seed: a.seed,
        allowed: Allowed { map: pairs("allow", &a.allow)?, reduce: pairs("allow-reduce", &a.allow_reduce)? },
        max_tasks: a.tasks,
        site: a.site.clone(),
        store: a.store.clone().map(|d| (d, a.store_mib << 20)),
    };
    eprintln!("worker {name} polling {}", a.connect.coordinator);
    let log = move |line: &str| eprintln!("{name}: {line}");
    let report = runtime()?.block_on(switchyard_jobs::worker::run(
        config,
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
        &log,
    ))?;
    eprintln!(
        "results kept {}, refused {}, tasks failed {}, injected failures {}",
        report.kept, report.refused, report.failed, report.crashes
    );
    if a.store.is_some() {
        eprintln!("maps read from the site's store {}, fetched from the coordinator {}", report.local, report.fetched);
    }
    Ok(())
}

fn submit(a: &SubmitArgs) -> Result<()> {
    let input = if a.input.as_os_str() == "-" {
        let mut v = Vec::new();
        std::io::stdin().read_to_end(&mut v).context("reading standard input")?;
        v
    } else {
        std::fs::read(&a.input).with_context(|| format!("reading {}", a.input.display()))?
    };
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| a.input.file_name().map_or_else(|| "stdin".into(), |n| n.to_string_lossy().into_owned()));
    let args = Submit {
        name,
        program: a.program.clone(),
        arg: a.arg.clone(),
        reduces: a.reduces,
        deadline: a.deadline,
        split: a.split,
        estimate: a.estimate,
    };
    let sub = Submitter::new(&a.connect.coordinator, &a.connect.token);
    let r = runtime()?.block_on(sub.submit(&args, input))?;
    println!("application {}: {} maps, {} reduces, due in {} s", r.app, r.maps, r.reduces, a.deadline);
    if let Some(why) = &r.waiting {
        eprintln!("note: application {}: {why}", r.app);
    }
    Ok(())
}

fn table(out: &mut impl Write, views: &[AppView]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>4}  {:<20} {:<10} {:>11} {:>11} {:>7} {:>9} {:>7} {:>10} {:>10}  verdict",
        "app", "name", "program", "maps", "reduces", "running", "attempts", "repeats", "laxity s", "due in s"
    )?;
    for v in views {
        let name: String = v.name.chars().take(20).collect();
        let laxity = v.laxity.map_or_else(|| "-".into(), |l| format!("{l:.1}"));
        // A countdown to the deadline means something only while the application runs: once
        // it has ended (met, missed, failed, cancelled) the deadline passing is not news, and a
        // negative "due in" beside "met" read as a fault.
        let due = if v.verdict == "running" { format!("{:.1}", v.to_deadline) } else { "-".into() };
        let verdict = match (&*v.verdict, v.took) {
            (verdict, Some(t)) => format!("{verdict} (took {t:.1} s)"),
            (verdict, None) => verdict.to_string(),
        };
        writeln!(
            out,
            "{:>4}  {:<20} {:<10} {:>11} {:>11} {:>7} {:>9} {:>7} {:>10} {:>10}  {verdict}",
            v.app,
            name,
            v.program,
            format!("{}/{}", v.maps.0, v.maps.1),
            format!("{}/{}", v.reduces.0, v.reduces.1),
            v.running,
            v.attempts,
            v.repeats,
            laxity,
            due,
        )?;
    }
    // Reasons are too long for a column: each on a line of its own.
    for v in views {
        if let Some(why) = &v.why {
            writeln!(out, "  app {} {}: {why}", v.app, v.verdict)?;
        }
    }
    Ok(())
}

fn worker_table(out: &mut impl Write, workers: &[WorkerView]) -> std::io::Result<()> {
    writeln!(out, "\n{:<24} {:>9} {:>9} {:>11} {:>11}", "worker", "holding", "presumed", "λ est /s", "μ est s")?;
    for w in workers {
        let holding = w.holding.map_or_else(|| "-".into(), |a| a.to_string());
        let presumed = if w.presumed { "yes" } else { "no" };
        writeln!(out, "{:<24} {:>9} {:>9} {:>11.4} {:>11.2}", w.name, holding, presumed, w.rate, w.recovery)?;
    }
    Ok(())
}

fn status(a: &StatusArgs) -> Result<()> {
    let sub = Submitter::new(&a.connect.coordinator, &a.connect.token);
    let rt = runtime()?;
    let mut out = std::io::stdout().lock();
    loop {
        let got = rt.block_on(async { Ok::<_, ClientError>((sub.status().await?, sub.workers().await?)) });
        let (views, workers) = match got {
            Ok(got) => got,
            Err(e) if a.watch && e.is_transient() => {
                // The coordinator may be restarting, or not up yet: say so, and keep watching.
                eprintln!("{e}; trying again in 1 s");
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if a.json {
            serde_json::to_writer_pretty(&mut out, &serde_json::json!({ "apps": views, "workers": workers }))?;
            writeln!(out)?;
            return Ok(());
        }
        if a.watch && std::io::stdout().is_terminal() {
            // Home the cursor and clear, so the table is redrawn in place.
            write!(out, "\x1b[H\x1b[2J")?;
        }
        table(&mut out, &views)?;
        worker_table(&mut out, &workers)?;
        out.flush()?;
        if !a.watch || (!views.is_empty() && views.iter().all(|v| v.verdict != "running")) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(1));
        if !std::io::stdout().is_terminal() {
            writeln!(out)?;
        }
    }
}

fn cancel(a: &CancelArgs) -> Result<()> {
    let sub = Submitter::new(&a.connect.coordinator, &a.connect.token);
    let v = runtime()?.block_on(sub.cancel(a.app))?;
    println!(
        "application {} cancelled: {}/{} maps and {}/{} reduces were done",
        v.app, v.maps.0, v.maps.1, v.reduces.0, v.reduces.1
    );
    Ok(())
}

fn output(a: &OutputArgs) -> Result<()> {
    let sub = Submitter::new(&a.connect.coordinator, &a.connect.token);
    let data = runtime()?.block_on(sub.output(a.app))?;
    match &a.out {
        Some(p) => std::fs::write(p, &data).with_context(|| format!("writing {}", p.display()))?,
        None => std::io::stdout().lock().write_all(&data)?,
    }
    Ok(())
}

#[cfg(test)]
mod table_tests {
    use switchyard_jobs::wire::AppView;

    fn view(verdict: &str, to_deadline: f64, laxity: Option<f64>) -> AppView {
        AppView {
            app: 0,
            name: "wc".into(),
            program: "wordcount".into(),
            maps: (4, 4),
            reduces: (1, 1),
            running: 0,
            attempts: 5,
            repeats: 0,
            duplicates: 0,
            to_deadline,
            laxity,
            took: (verdict != "running").then_some(12.0),
            verdict: verdict.into(),
            why: None,
        }
    }

    #[test]
    fn an_ended_application_shows_no_countdown_to_its_deadline() {
        let mut out = Vec::new();
        super::table(&mut out, &[view("met", -30.0, None), view("running", 40.0, Some(-2.5))]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let met = text.lines().find(|l| l.contains("met")).unwrap();
        assert!(!met.contains("-30.0"), "{text}");
        let running = text.lines().find(|l| l.contains("running (") || l.ends_with("running")).unwrap();
        assert!(running.contains("40.0") && running.contains("-2.5"), "{text}");
    }
}
