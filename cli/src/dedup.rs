//! `koel dedup`: writes each record the first time its key is seen, in
//! input order, on N threads sharing one cuckoo filter.

mod chain;
mod engine;
mod exact;
mod input;

pub use chain::FilterChain;
pub use engine::{run, run_exact, ExactTotals, KeySpec, Options, Totals};
pub use exact::ExactSet;
pub use input::Inputs;

use crate::filters::{self, CliFilter};
use crate::{human, output, parse, progress, Outcome};
use anyhow::Context;
use koel::Filter;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

const EXAMPLES: &str = "\
Examples:
  koel dedup events.log > unique.log                 # whole line is the key
  koel dedup --field 2 --delimiter , orders.csv -o unique.csv
  cat a.log b.log | koel dedup --threads 4 --expected 50M > unique.log
  koel dedup --state seen.koel today.log > new-today.log  # continues across runs
  koel dedup --exact events.log > unique.log         # same output as awk '!s[$0]++'

The key is the whole line, or field K (1-based) split on the delimiter
(default: tab); records without field K are passed through. A record is
dropped only if the filter says its key was seen: a false positive (about
1 in 8,000 new keys at full load with 16-bit tags) drops a new record, and
the summary estimates how many. With --exact, every such \"seen\" is
confirmed against an exact set of 128-bit hashes of the keys (19 to 39
bytes per distinct record, whatever its length), so no record is lost
(two keys sharing a hash: probability ~n^2/2^129 for n distinct keys).
Records without a trailing newline get one. A record is bytes: with CRLF
line ends the CR is part of the record and of its key (a\\r\\n and a\\n
are different records).

-o FILE replaces FILE only when the run succeeds (temporary file, rename),
so FILE may be one of the inputs, as with `sort -o`; a FIFO or device is
written through. Stdout redirected onto an input (`>> input`) is refused.

The filter is sized from --expected, or the input files' records (counted,
or estimated from newlines sampled all over a large file), plus 10M for
stdin. When it fills up, it grows, then a new
filter is chained to it (lookups check all of them): a run never stops
halfway for lack of room. A --state filter that has no room for this run's
records gets a new filter chained to it rather than growing past the rate
of a fresh one (the state file then holds the chain, which `koel info`,
`verify` and `query` read like any filter file).

Exit status: 0 on success, 2 on an error (missing file, unwritable output,
a --state that cannot meet --fpr, out of memory), reported before any
output is written unless writing itself fails.";

/// Default filter size when the input size is unknown (stdin, pipes).
pub const DEFAULT_EXPECTED: u64 = 10_000_000;

/// Default bound on the false-positive rate of the chained filters
/// together: the rate a single filter reaches after 64x growth.
pub const DEFAULT_FPR_BUDGET: f64 = 1e-2;

/// Options of `koel dedup`.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Input files, read in order ("-" is stdin) [default: stdin].
    pub files: Vec<PathBuf>,
    /// Worker threads [default: the number of cores].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Distinct records expected; sizes the filter [default: the input
    /// files' records, counted or sampled, plus 10M for stdin].
    #[arg(long, value_parser = parse::count, allow_negative_numbers = true)]
    pub expected: Option<u64>,
    /// Bound on the false-positive rate (new records taken for
    /// duplicates): 1.2e-4 or more uses 16-bit tags, 2.5e-3 or more 12-bit
    /// tags; chained filters share it [default: 16-bit tags, bound 1e-2].
    #[arg(long, value_parser = parse::probability, allow_negative_numbers = true)]
    pub fpr: Option<f64>,
    /// The key is this field (1-based) instead of the whole line.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub field: Option<u32>,
    /// Field delimiter for --field: one byte, or "tab".
    #[arg(long, default_value = "tab", value_parser = parse_delimiter)]
    pub delimiter: u8,
    /// Writes the records here instead of stdout; replaced only when the
    /// run succeeds, so it may be one of the inputs.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Hash seed, so that a run (and the records its false positives drop)
    /// can be reproduced: same seed, input and options, same output, on
    /// any number of threads [default: random].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Loads the filter from FILE if it exists and saves it there at the
    /// end (atomically), so that dedup continues across runs. A state's
    /// filters never grow; one without room for this run gets a new filter
    /// chained to it (the run's false-positive rate is then the sum of
    /// theirs); a state whose rate would pass --fpr, or made with another
    /// --seed, is refused before anything is written.
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

/// `--delimiter`: one byte, or `tab`.
///
/// # Errors
///
/// Anything longer, empty, or a newline.
pub fn parse_delimiter(s: &str) -> Result<u8, String> {
    match s {
        "tab" | "\\t" => Ok(b'\t'),
        _ if s.len() == 1 && s.as_bytes()[0] != b'\n' => Ok(s.as_bytes()[0]),
        _ => Err(format!(
            "{s:?} is not a one-byte delimiter (e.g. , or ; or tab)"
        )),
    }
}

/// Runs `koel dedup`.
///
/// Everything that can fail for a reason other than I/O (sizing, the
/// state file, its compatibility with the options) is decided before the
/// first record is written.
///
/// # Errors
///
/// Missing or unreadable input, unwritable output, a filter that cannot be
/// built, a state file that cannot meet `--fpr`.
pub fn main(args: Args) -> anyhow::Result<Outcome> {
    let threads = crate::threads(args.threads);
    let mut inputs = Inputs::open(&args.files)?;
    let bits = args.fpr.map_or(Ok(16), filters::fingerprint_bits_for)?;
    let budget = args.fpr.unwrap_or(DEFAULT_FPR_BUDGET);
    let expected = match args.expected {
        Some(n) => n,
        None => {
            let (records, unsized_input) = inputs.records()?;
            let sized = input::with_margin(records);
            if unsized_input {
                sized + DEFAULT_EXPECTED
            } else {
                sized
            }
        }
    };
    let filter = match &args.state {
        Some(path) if path.exists() => {
            let chain = FilterChain::load(path, budget)?;
            prepare_state(&chain, &args, expected, path)?;
            chain
        }
        Some(path) => {
            // Fail now, not after the whole input.
            crate::check_writable(path)?;
            FilterChain::new(expected, bits, args.seed, budget)?
        }
        None => FilterChain::new(expected, bits, args.seed, budget)?,
    };

    // Output files follow the rule of `crate::output`: replaced only at
    // the end, so `-o` may name an input (as `sort -o`).
    let mut file_output = match &args.output {
        Some(path) => {
            if let Some(state) = &args.state {
                output::refuse_same_file(path, "--output", state, "--state")?;
            }
            Some(output::Stream::create(path)?)
        }
        None => {
            output::refuse_stdout_onto(&args.files)?;
            None
        }
    };
    let mut output: Box<dyn Write + Send + '_> = match &mut file_output {
        Some(stream) => Box::new(BufWriter::with_capacity(1 << 20, stream)),
        None => Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout())),
    };
    let chunk_bytes = usize::try_from(args.chunk_bytes)
        .ok()
        .filter(|&c| c <= 1 << 30)
        .context("--chunk-bytes must be at most 1G")?;
    let options = Options {
        threads,
        key: KeySpec {
            field: args.field.map(|f| f as usize),
            delimiter: args.delimiter,
            strip_cr: false,
        },
        chunk_bytes,
    };
    let bar = progress::bar(
        inputs.total_bytes(),
        "{spinner} dedup [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
    );
    let fpr_before = filter.false_positive_rate();
    let start = Instant::now();
    let progress = |n| bar.inc(n);
    let result = if args.exact {
        run_exact(
            &filter,
            &mut inputs,
            &mut output,
            options,
            filter.seed(),
            &progress,
        )
        .map(|(totals, exact)| (totals, Some(exact)))
    } else {
        run(&filter, &mut inputs, &mut output, options, &progress).map(|t| (t, None))
    };
    bar.finish_and_clear();
    let (totals, exact) = match result.and_then(|t| {
        output.flush().context("cannot write the output")?;
        Ok(t)
    }) {
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
        filter.save(path)?;
    }
    summary(&filter, &totals, exact, secs, threads, fpr_before, budget);
    Ok(Outcome::Success)
}

/// The rules of a loaded `--state`, applied before anything is written:
/// its seed is its own; it must have room for this run's `expected`
/// records without growing (growth would raise its false-positive rate
/// above a fresh filter's), else a new filter is chained to it; and its
/// rate with this run's must stay within `--fpr` if one is given.
fn prepare_state(
    chain: &FilterChain,
    args: &Args,
    expected: u64,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let name = path.display();
    if let Some(seed) = args.seed.filter(|&s| s != chain.seed()) {
        anyhow::bail!(
            "--seed {seed} differs from the seed of --state {name} ({}): drop --seed, a state keeps its own",
            chain.seed()
        );
    }
    if chain.room() < expected {
        chain.chain_new(expected)?;
    }
    if let Some(fpr) = args.fpr {
        // Every filter but the newest is closed at its rate of now; the
        // newest may fill up at its present size (it may not grow).
        let projected = chain.closed_rate() + chain.newest_full_rate();
        if projected > fpr {
            anyhow::bail!(
                "--state {name} ({} filter(s) of {}-bit tags) would reach a false-positive rate of {projected:.1e} in this run, above --fpr {fpr:e}: start a new state file, or raise --fpr",
                chain.stages(),
                chain.fingerprint_bits()
            );
        }
    }
    Ok(())
}

/// A reader of our output went away (`koel dedup ... | head`): not an
/// error worth a message.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The summary on stderr.
fn summary(
    filter: &FilterChain,
    t: &Totals,
    exact: Option<ExactTotals>,
    secs: f64,
    threads: usize,
    fpr_before: f64,
    budget: f64,
) {
    let snap = filter.snapshot();
    let dropped = t.records_in - t.records_out;
    // Each new key was wrongly taken for a duplicate with the FPR of the
    // moment; the FPR grows about linearly with the load.
    let fp_drops = t.new_keys as f64 * (fpr_before + snap.false_positive_rate) / 2.0;
    let mut s = format!(
        "koel dedup: {} records in ({}), {} out, {} duplicates dropped\n",
        human::count(t.records_in),
        human::bytes(t.bytes_in),
        human::count(t.records_out),
        human::count(dropped),
    );
    s += &format!(
        "  {:.2} s: {:.0} MB/s, {}records/s on {threads} threads\n",
        secs,
        t.bytes_in as f64 / secs.max(1e-9) / 1e6,
        human::rate(t.records_in as f64 / secs.max(1e-9)),
    );
    s += &format!("  filter: {}", filter.describe());
    if let (Some(load), Some(slots)) = (snap.load_factor, snap.slots) {
        s += &format!(
            ", load {:.1}% of {} slots",
            load * 100.0,
            human::count(slots as u64)
        );
    }
    s += &format!(
        ", {}, growth events {}\n",
        human::bytes(snap.memory_bytes as u64),
        snap.generation
    );
    if let Some(e) = exact {
        s += &format!(
            "  exact set: {} distinct records, {} ({:.1} bytes each); {} false positives of the filter caught, none dropped\n",
            human::count(e.keys),
            human::bytes(e.bytes),
            e.bytes as f64 / e.keys.max(1) as f64,
            human::count(e.false_positives_caught),
        );
    } else {
        s += &format!(
            "  estimated false-positive drops: {fp_drops:.1} (new records taken for duplicates; FPR now {:.1e})\n",
            snap.false_positive_rate
        );
    }
    if snap.false_positive_rate > budget {
        s += &format!(
            "  warning: the false-positive rate passed its bound {budget:.1e}: far more distinct records than --expected; rerun with a larger --expected{}\n",
            if exact.is_some() { " (--exact lost nothing)" } else { "" }
        );
    }
    if t.missing_field > 0 {
        s += &format!(
            "  {} records without the key field passed through\n",
            human::count(t.missing_field)
        );
    }
    eprint!("{s}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delimiters() {
        assert_eq!(parse_delimiter("tab"), Ok(b'\t'));
        assert_eq!(parse_delimiter(","), Ok(b','));
        assert!(parse_delimiter(",,").is_err());
        assert!(parse_delimiter("").is_err());
        assert!(parse_delimiter("\n").is_err());
    }
}
