//! `switchyard trace-gen`: write a labelled capture of known protocols.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use switchyard_runtime::tracegen::{TraceSpec, generate, write_labels};

/// Write a capture of connections of known protocols, with the ground truth beside it.
///
/// Each connection speaks one of the 40 protocols `switchyard inspect` names, opening with that
/// protocol's real first message, then carries a heavy-tailed amount of bulk data. With
/// --elephants, that fraction of connections carries 20 times as much: the skewed trace on which
/// static hashing overloads some workers. The same options give the same bytes.
///
/// Example:
///
///   switchyard trace-gen --out skewed.pcap --labels skewed.csv --connections 5000 --elephants 0.02
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct TraceGenArgs {
    /// The capture to write (pcap).
    #[arg(long)]
    out: PathBuf,

    /// Where to write the labels (CSV: id, proto, client, server, protocol, packets, elephant).
    #[arg(long)]
    labels: Option<PathBuf>,

    /// Connections.
    #[arg(long, default_value_t = 1_000)]
    connections: u32,

    /// Connections started per second.
    #[arg(long, default_value_t = 2_000.0)]
    rate: f64,

    /// Fraction of connections that are elephants (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    elephants: f64,

    /// Most bulk packets in an ordinary connection (elephants carry 20 times this).
    #[arg(long, default_value_t = 40)]
    max_bulk: u32,

    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub(crate) fn run(args: &TraceGenArgs) -> Result<()> {
    let spec = TraceSpec {
        connections: args.connections,
        rate: args.rate,
        elephants: args.elephants,
        max_bulk: args.max_bulk,
        seed: args.seed,
    };
    let out = File::create(&args.out).with_context(|| format!("cannot create `{}`", args.out.display()))?;
    let labels = generate(&spec, BufWriter::new(out)).with_context(|| format!("writing `{}`", args.out.display()))?;
    if let Some(path) = &args.labels {
        let f = File::create(path).with_context(|| format!("cannot create `{}`", path.display()))?;
        write_labels(&labels, BufWriter::new(f)).with_context(|| format!("writing `{}`", path.display()))?;
    }
    let packets: u64 = labels.iter().map(|l| l.packets).sum();
    eprintln!("wrote {}: {} connections, {packets} packets", args.out.display(), labels.len());
    Ok(())
}
