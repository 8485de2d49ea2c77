//! `koel build`: a filter file from a list of keys.

use crate::args::{RunArgs, SizeArgs};
use crate::dedup::{self, Options};
use crate::filter_file::Loaded;
use crate::filters;
use crate::human::{HumanBytes, HumanCount};
use crate::input::{InputArgs, Inputs};
use crate::outln;
use crate::{output, Outcome};
use anyhow::Context;
use std::path::PathBuf;
use std::time::Instant;

const EXAMPLES: &str = "\
Examples:
  koel build users.txt --output users.koel                   # one key per line
  koel build orders.csv --field 1 --delimiter , --fpr 1e-3 -o orders.koel
  cut -f2 events.tsv | koel build -o events.koel              # keys from stdin
  koel query users.koel alice                                 # then ask it

Input is taken as by `koel dedup`. Keys are lines, LF or CRLF (one
trailing CR is not part of the key, as in `koel query`). The file is
replaced atomically: a failed build leaves any old file in place. An
output that is one of the input files (or stdin) is refused. The summary
is printed after the file is saved: if stdout fails (exit 2), the new
file stays.";

#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
    /// The filter file to write.
    #[arg(long, short)]
    pub output: PathBuf,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Filter kind: cuckoo (supports remove; grows) or bloom (insert-only,
    /// sized for --expected at --fpr, default 1e-3).
    #[arg(long, value_enum, default_value_t = FileKind::Cuckoo)]
    pub kind: FileKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FileKind {
    /// Cuckoo filter.
    Cuckoo,
    /// Blocked Bloom filter.
    Bloom,
}

pub fn main(args: Args) -> anyhow::Result<Outcome> {
    output::refuse_output_onto(&args.output, args.input.paths())?;
    output::check(&args.output)?;
    let mut inputs = Inputs::open(args.input.paths())?;
    let expected = args.size.expected(&inputs)?;
    let seed = args.run.seed;
    let built = match args.kind {
        FileKind::Cuckoo => {
            let bits = args.size.fingerprint_bits()?;
            Loaded::Cuckoo(vec![filters::cuckoo(expected, bits, seed, None)?])
        }
        FileKind::Bloom => {
            let fpr = args.size.fpr.unwrap_or(koel::DEFAULT_FALSE_POSITIVE_RATE);
            Loaded::Bloom(filters::bloom(expected, fpr, seed)?)
        }
    };
    let filter = built.filters()[0];
    let options = Options {
        threads: args.run.threads(),
        // Key lists often come from Windows tools: `query` strips the CR of
        // its stdin lines too.
        key: args.input.key(true),
        chunk_bytes: 1 << 20,
        exact: None,
    };
    let start = Instant::now();
    // The dedup pipeline with its output thrown away: every distinct key
    // inserted once, on all threads.
    let totals = dedup::run(filter, &mut inputs, &mut std::io::sink(), options, &|_| {})?;
    built
        .save(&args.output)
        .with_context(|| format!("cannot save {}", args.output.display()))?;
    if args.run.quiet {
        return Ok(Outcome::Success);
    }
    let size = std::fs::metadata(&args.output).map_or(0, |m| m.len());
    let snap = filter.snapshot();
    let n = HumanCount(snap.len as u64);
    let stored = match args.kind {
        FileKind::Cuckoo => format!(
            "{n} stored (a key that already tests present, a repeat or a false-positive match, is not stored again)"
        ),
        FileKind::Bloom => format!("about {n} distinct (estimated from the bits set)"),
    };
    outln!(
        "koel build: {} keys read in {:.2} s, {stored}",
        HumanCount(totals.records_in - totals.missing_field),
        start.elapsed().as_secs_f64()
    )?;
    let mut load = snap.load_text();
    if args.kind == FileKind::Cuckoo {
        load += &format!(", generation {}", snap.generation);
    }
    outln!(
        "  {}: {} ({}){load}, FPR {:.1e}",
        args.output.display(),
        HumanBytes(size),
        filter.describe(),
        snap.false_positive_rate
    )?;
    if totals.missing_field > 0 {
        outln!(
            "  {} records without the key field were skipped",
            HumanCount(totals.missing_field)
        )?;
    }
    Ok(Outcome::Success)
}
