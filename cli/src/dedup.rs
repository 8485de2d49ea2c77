//! `koel dedup`: writes each record the first time its key is seen, in
//! input order, on N threads sharing one cuckoo filter.

mod engine;
mod exact;

pub use engine::{run, Options, Totals};

use crate::args::{RunArgs, SizeArgs};
use crate::chain::{Chain, DEFAULT_FPR_BUDGET};
use crate::errln;
use crate::filter_file::{self, Loaded};
use crate::filters::{self, CliFilter};
use crate::human::{self, HumanBytes, HumanCount};
use crate::input::{InputArgs, Inputs};
use crate::{output, parse, progress, Outcome};
use anyhow::Context;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

const EXAMPLES: &str = "\
Examples:
  koel dedup events.log > unique.log                 # whole line is the key
  koel dedup --field 2 --delimiter , orders.csv -o unique.csv
  cat a.log b.log | koel dedup -j 4 --expected 50M > unique.log
  koel dedup --state seen.koel today.log > new-today.log  # continues across runs
  koel dedup --exact events.log > unique.log         # same output as awk '!s[$0]++'

A false positive (about 1 in 8,000 new keys at full load with 16-bit tags)
drops a new record; the summary estimates how many, and --exact drops none.
A record is bytes (with CRLF line ends the CR is part of it and its key);
records without field K pass through. The filter is sized from --expected
or the input files, plus 10M for stdin; when full it doubles while --fpr
allows, then adds levels of longer tags; only if --fpr leaves it no room is a
filter chained to it: a run never stops halfway. The rules of --state and -o
are in cli/README.md.

Exit status: 0 on success, 2 on an error (missing file, unwritable output,
a --state that cannot meet --fpr, no memory for the filter), reported
before any output is written unless writing or reading itself fails (a
record too long for memory is found only when it is read).";

const FPR_HELP: &str = "Bound on the false-positive rate (new records taken for \
duplicates): 1.2e-4 or more uses 16-bit tags, 5e-3 or more 12-bit tags; the \
filter's growth keeps it [default: 16-bit tags, bound 1e-2]";

const SEED_HELP: &str = "Hash seed, so that a run (and the records its false \
positives drop) can be reproduced: same seed, input and options, same output, on \
any number of threads [default: random]";

#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES, mut_arg("fpr", |a| a.help(FPR_HELP)),
          mut_arg("seed", |a| a.help(SEED_HELP)))]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Writes the records here instead of stdout; replaced only when the
    /// run succeeds, so it may be one of the inputs.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Loads the filter from FILE if it exists and saves it there at the
    /// end (atomically), so that dedup continues across runs; a state
    /// whose bound passes --fpr, or has another --seed, is refused.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Loses nothing: every record the filter takes for a duplicate is
    /// confirmed against an exact set of 128-bit key hashes, so the output
    /// is that of awk '!s[$0]++' (costs 19 to 39 bytes per distinct
    /// record).
    #[arg(long, conflicts_with = "state")]
    pub exact: bool,
    /// Bytes per chunk of input (bounded memory: a few chunks per thread).
    #[arg(long, default_value = "1M", value_parser = parse::count, hide = true)]
    pub chunk_bytes: u64,
}

/// Everything that can fail for a reason other than I/O (sizing, the
/// state file, its compatibility with the options) is decided before the
/// first record is written.
pub fn main(args: Args) -> anyhow::Result<Outcome> {
    let threads = args.run.threads();
    let mut inputs = Inputs::open(args.input.paths())?;
    let bits = args.size.fingerprint_bits()?;
    if let Some(path) = &args.state {
        // Fail now, not after every new record went out: a state that
        // cannot be saved would emit the same records again next run.
        output::check(path)?;
    }
    let filter = match &args.state {
        Some(path) if path.exists() => load_state(path, &args)?,
        _ => {
            let expected = args.size.expected(&inputs)?;
            let budget = args.size.fpr.unwrap_or(DEFAULT_FPR_BUDGET);
            let first = filters::cuckoo(expected, bits, args.run.seed, Some(budget))?;
            Chain::new(vec![first], budget)
        }
    };

    // Output files follow the rule of `crate::output`: replaced only at
    // the end, so `-o` may name an input (as `sort -o`).
    if let (Some(path), Some(state)) = (&args.output, &args.state) {
        output::refuse_same_file(path, "--output", state, "--state")?;
    }
    let mut file_output = match &args.output {
        Some(path) => Some(output::Stream::create(path)?),
        None => {
            output::refuse_stdout_onto(args.input.paths())?;
            None
        }
    };
    let mut output: Box<dyn Write + Send + '_> = match &mut file_output {
        Some(stream) => Box::new(BufWriter::with_capacity(1 << 20, stream.file())),
        None => Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout())),
    };
    let chunk_bytes = usize::try_from(args.chunk_bytes)
        .ok()
        .filter(|&c| c <= 1 << 30)
        .context("--chunk-bytes must be at most 1G")?;
    let options = Options {
        threads,
        key: args.input.key(false),
        chunk_bytes,
        exact: args.exact.then(|| filter.filters()[0].seed()),
    };
    if args.run.quiet {
        progress::hide();
    }
    let bar = progress::bar(
        inputs.total_bytes(),
        "{spinner} dedup [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
    );
    let start = Instant::now();
    let result = run(&filter, &mut inputs, &mut output, options, &|n| bar.inc(n));
    bar.finish_and_clear();
    // `run` flushed the output.
    let totals = match result {
        Ok(t) => t,
        Err(e) if is_broken_pipe(&e) => return Ok(Outcome::Success),
        Err(e) => return Err(e),
    };
    drop(output);
    if let (Some(stream), Some(path)) = (file_output, &args.output) {
        stream
            .finish()
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let secs = start.elapsed().as_secs_f64();
    if let Some(path) = &args.state {
        filter_file::save(path, &filter.filters())
            .with_context(|| format!("cannot save --state {}", path.display()))?;
    }
    if !args.run.quiet {
        summary(&filter, &totals, args.exact, secs, threads);
    }
    Ok(Outcome::Success)
}

/// Loads a `--state` file (one cuckoo filter, or a chain of them that an
/// earlier version saved) and applies its rules before anything is
/// written: its seed is its own, and the false-positive bound it was saved
/// with (which its growth keeps) may not pass `--fpr`.
fn load_state(path: &Path, args: &Args) -> anyhow::Result<Chain> {
    let name = path.display();
    let filters = match filter_file::load(path).map_err(|e| filter_file::cannot_load(path, e))? {
        Loaded::Cuckoo(filters) => filters,
        Loaded::Bloom(_) => anyhow::bail!(
            "cannot load {name}: it holds a bloom filter; a --state is a cuckoo filter"
        ),
    };
    let mut chain = Chain::new(filters, DEFAULT_FPR_BUDGET);
    // Filters chained to it share --fpr, or else the bound it was saved with.
    chain.budget = args.size.fpr.unwrap_or(chain.bound());
    let seed = chain.filters()[0].seed();
    if let Some(asked) = args.run.seed.filter(|&s| s != seed) {
        anyhow::bail!(
            "--seed {asked} differs from the seed of --state {name} ({seed}): drop --seed, a state keeps its own"
        );
    }
    if let Some(fpr) = args.size.fpr.filter(|&fpr| chain.bound() > fpr) {
        anyhow::bail!(
            "--state {name} may reach a false-positive rate of {:.1e} (the bound it was saved with), above --fpr {fpr:e}: start a new state file, or raise --fpr",
            chain.bound()
        );
    }
    Ok(chain)
}

/// A reader of our output went away (`koel dedup ... | head`): not an
/// error worth a message.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn summary(filter: &Chain, t: &Totals, exact: bool, secs: f64, threads: usize) {
    let snap = filter.snapshot();
    let (fpr, budget) = (snap.false_positive_rate, filter.budget);
    let dropped = t.records_in - t.records_out;
    // Each new key was wrongly taken for a duplicate with the FPR of the
    // moment, summed chunk by chunk.
    let fp_drops = t.expected_false_positives;
    let mut s = format!(
        "koel dedup: {} records in ({}), {} out, {} duplicates dropped",
        HumanCount(t.records_in),
        HumanBytes(t.bytes_in),
        HumanCount(t.records_out),
        HumanCount(dropped),
    );
    s += &format!(
        "\n  {:.2} s: {:.0} MB/s, {}records/s on {threads} threads",
        secs,
        t.bytes_in as f64 / secs.max(1e-9) / 1e6,
        human::rate(t.records_in as f64 / secs.max(1e-9)),
    );
    s += &format!(
        "\n  filter: {}{}, {}, growth events {}",
        filter.describe(),
        snap.load_text(),
        HumanBytes(snap.memory_bytes as u64),
        snap.generation
    );
    if exact {
        s += &format!(
            "\n  exact set: {} distinct records, {} ({:.1} bytes each); {} false positives of the filter caught, none dropped",
            HumanCount(t.exact_keys),
            HumanBytes(t.exact_bytes),
            t.exact_bytes as f64 / t.exact_keys.max(1) as f64,
            HumanCount(t.false_positives_caught),
        );
    } else {
        s += &format!(
            "\n  estimated false-positive drops: {fp_drops:.1} (new records taken for duplicates; FPR now {fpr:.1e})"
        );
    }
    if fpr > budget {
        s += &format!(
            "\n  warning: the false-positive rate passed its bound {budget:.1e}: the filter could not grow within it, so a filter was chained; rerun with a larger --expected or --fpr{}",
            if exact { " (--exact lost nothing)" } else { "" }
        );
    }
    if t.missing_field > 0 {
        s += &format!(
            "\n  {} records without the key field passed through",
            HumanCount(t.missing_field)
        );
    }
    errln!("{s}");
}
