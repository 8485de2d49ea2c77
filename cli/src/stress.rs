//! `koel stress`: N threads run an operation mix against one shared filter
//! for a fixed time, every answer checked against a ground truth (`check`).
//! `insert` is `insert_unique`, so the key set stays a set and a removal
//! never takes a key that was not inserted (which could take a colliding
//! key's tag: a false negative by design, not a bug).

mod check;
mod mix;
mod plot;
mod report;
mod run;

pub use mix::Mix;
pub use report::{GrowthEvent, StressReport, TimelinePoint};
pub use run::{run, Config};

use crate::args::RunArgs;
use crate::errln;
use crate::filters::{self, KindArg};
use crate::keys::KeyDist;
use crate::outln;
use crate::{output, parse, progress, Outcome};
use anyhow::{bail, Context};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use std::path::PathBuf;
use std::time::Duration;

const EXAMPLES: &str = "\
Examples:
  koel stress                                   # 10 s, all cores, 1M keys, read=90,insert=9,remove=1
  koel stress -j 4 --duration 30 --keys zipf:0.99
  koel stress --mix read=50,insert=40,remove=10 --items 10M --plot stress.svg
  koel stress --duration 2 --json > stress.json
  koel stress --kind bloom                      # the Bloom filter (no removes)

Exit status: 0 if no false negative was seen, 1 if any was (the filter lost
a key), 2 on a usage or runtime error.";

#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES,
          mut_arg("seed", |a| a.help("Hash and key seed, for a reproducible key sequence [default: random]")))]
pub struct Args {
    /// Filter kind.
    #[arg(long, value_enum, default_value_t = KindArg::Cuckoo)]
    pub kind: KindArg,
    #[command(flatten)]
    pub run: RunArgs,
    /// Distinct keys the operations draw from (k, M, G suffixes allowed).
    #[arg(long, default_value = "1M", value_parser = parse::count, allow_negative_numbers = true)]
    pub items: u64,
    /// Filter capacity in items [default: --items].
    #[arg(long, value_parser = parse::count)]
    pub capacity: Option<u64>,
    /// Operation mix, as weights (percentages) of read, insert and remove
    /// [default: read=90,insert=9,remove=1; read=90,insert=10 for bloom].
    #[arg(long)]
    pub mix: Option<Mix>,
    /// Run time in seconds (e.g. 10, 2.5, 500ms).
    #[arg(long, default_value = "10", value_parser = parse::duration, allow_negative_numbers = true)]
    pub duration: Duration,
    /// Key distribution: uniform, zipf:S (S > 0, e.g. zipf:0.99),
    /// sequential, or strings (~30-byte string keys).
    #[arg(long, default_value = "uniform")]
    pub keys: KeyDist,
    /// Fraction of the keys inserted before the timed run.
    #[arg(long, default_value_t = 0.5, value_parser = parse::fraction, allow_negative_numbers = true)]
    pub prefill: f64,
    /// Fingerprint bits of the cuckoo filter: 16 or 12 (for bloom: sized
    /// for the same false-positive rate).
    #[arg(long, default_value = "16",
          value_parser = PossibleValuesParser::new(["16", "12"]).map(|s| s.parse::<u32>().unwrap()))]
    pub fingerprint_bits: u32,
    /// Writes an SVG with throughput over time (growth events marked) and
    /// the latency percentiles.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Prints the results as JSON on stdout instead of the text report.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: Args) -> anyhow::Result<Outcome> {
    if args.run.quiet {
        progress::hide();
    }
    if args.items > u64::from(u32::MAX) {
        bail!("--items {} is too many: at most {}", args.items, u32::MAX);
    }
    let capacity = args.capacity.unwrap_or(args.items);
    if let Some(path) = &args.plot {
        // Fail before a 10-second run, not after it.
        output::check(path)?;
    }
    let filter = filters::build(args.kind, capacity, args.fingerprint_bits, args.run.seed)?;
    let mix = match (args.mix, args.kind) {
        (Some(mix), _) => mix,
        (None, KindArg::Bloom) => "read=90,insert=10".parse()?,
        (None, _) => "read=90,insert=9,remove=1".parse()?,
    };
    let config = Config {
        threads: args.run.threads(),
        items: args.items,
        mix,
        duration: args.duration,
        keys: args.keys,
        prefill: args.prefill,
        seed: args.run.seed.unwrap_or_else(crate::keys::random_seed),
        capacity,
    };
    let report = run(filter.as_ref(), &config)?;
    // Files before stdout: a reader of stdout that goes away ends the
    // command (see main.rs), and must not cost the plot.
    if let Some(path) = &args.plot {
        plot::stress(path, &report)?;
    }
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&report).context("cannot encode the report as JSON")?
        )?;
    } else {
        output::to_stdout(format_args!("{report}"))?;
    }
    if let (Some(path), false) = (&args.plot, args.json) {
        outln!("plot         {}", path.display())?;
    }
    let misses = report.check.false_negatives();
    if misses > 0 {
        errln!(
            "koel stress: FAILED: {misses} false negatives: keys inserted and not removed were reported absent (first key indices: {:?})",
            report.check.examples
        );
        return Ok(Outcome::CheckFailed);
    }
    Ok(Outcome::Success)
}
