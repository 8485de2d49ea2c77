//! `koel build`: a filter file from a list of keys.

use crate::dedup::{self, Inputs, KeySpec, Options};
use crate::filters::{self, CliFilter};
use crate::{human, parse, Outcome};
use anyhow::Context;
use koel::{BloomFilter, CuckooFilter};
use std::path::PathBuf;
use std::time::Instant;

const EXAMPLES: &str = "\
Examples:
  koel build --input users.txt --output users.koel           # one key per line
  koel build --input orders.csv --field 1 --delimiter , --fpr 1e-3 --output orders.koel
  cut -f2 events.tsv | koel build --output events.koel        # keys from stdin
  koel query users.koel alice                                 # then ask it

The file is written atomically (temporary file, sync, rename): a failed
build leaves any old file in place, the new file keeps the old one's
permissions, a symbolic link is written through, and anything but a
regular file (a device, a directory) is refused. Keys are lines, LF or
CRLF (one trailing CR is not part of the key, as in `koel query`); they
hash as bytes, so `koel query` finds exactly the keys given here.";

/// Options of `koel build`.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Files of keys, one per line ("-" is stdin) [default: stdin].
    #[arg(long = "input", short)]
    pub inputs: Vec<PathBuf>,
    /// The filter file to write.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Distinct keys expected [default: estimated from the input files'
    /// sizes, or 10M for stdin]. The filter doubles if there are more.
    #[arg(long, value_parser = parse::count, allow_negative_numbers = true)]
    pub expected: Option<u64>,
    /// Target false-positive rate: 1.2e-4 or more uses 16-bit tags, 2.5e-3
    /// or more 12-bit tags [default: 16-bit tags].
    #[arg(long, value_parser = parse::probability, allow_negative_numbers = true)]
    pub fpr: Option<f64>,
    /// The key is this field (1-based) instead of the whole line.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub field: Option<u32>,
    /// Field delimiter for --field: one byte, or "tab".
    #[arg(long, default_value = "tab", value_parser = dedup::parse_delimiter)]
    pub delimiter: u8,
    /// Worker threads [default: the number of cores].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Hash seed (default: random).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Filter kind: cuckoo (supports remove; grows) or bloom (insert-only,
    /// sized for --expected at --fpr, default 1e-3).
    #[arg(long, value_enum, default_value_t = FileKind::Cuckoo)]
    pub kind: FileKind,
}

/// `--kind` of `koel build`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FileKind {
    /// Cuckoo filter.
    Cuckoo,
    /// Blocked Bloom filter.
    Bloom,
}

/// Runs `koel build`.
///
/// # Errors
///
/// Missing input, an output that cannot be written, a filter that cannot
/// be built.
pub fn main(args: Args) -> anyhow::Result<Outcome> {
    crate::check_writable(&args.output)?;
    let mut inputs = Inputs::open(&args.inputs)?;
    let expected = match args.expected {
        Some(n) => n,
        None => inputs
            .estimate_records()?
            .unwrap_or(dedup::DEFAULT_EXPECTED),
    };
    let filter: Box<dyn Saveable> = match args.kind {
        FileKind::Cuckoo => {
            let bits = args.fpr.map_or(Ok(16), filters::fingerprint_bits_for)?;
            Box::new(filters::build_cuckoo(expected, bits, args.seed)?)
        }
        FileKind::Bloom => {
            let items = usize::try_from(expected)?;
            let mut b = BloomFilter::builder()
                .capacity(items)
                .false_positive_rate(args.fpr.unwrap_or(koel::DEFAULT_FALSE_POSITIVE_RATE));
            if let Some(seed) = args.seed {
                b = b.seed(seed);
            }
            Box::new(b.build().map_err(|e| {
                anyhow::anyhow!("cannot build a Bloom filter for {expected} items: {e}")
            })?)
        }
    };
    let filter = filter.as_ref();
    let options = Options {
        threads: crate::threads(args.threads),
        key: KeySpec {
            field: args.field.map(|f| f as usize),
            delimiter: args.delimiter,
            // Key lists often come from Windows tools: `query` strips the
            // CR of its stdin lines too.
            strip_cr: true,
        },
        chunk_bytes: 1 << 20,
    };
    let start = Instant::now();
    // The dedup pipeline with its output thrown away: every distinct key
    // inserted once, on all threads.
    let totals = dedup::run(filter, &mut inputs, &mut std::io::sink(), options, &|_| {})?;
    filter
        .save_to(&args.output)
        .with_context(|| format!("cannot save {}", args.output.display()))?;
    let size = std::fs::metadata(&args.output).map_or(0, |m| m.len());
    let snap = filter.snapshot();
    let stored = if args.kind == FileKind::Cuckoo {
        format!(
            "{} stored (a key that already tests present, a repeat or a false-positive match, is not stored again)",
            human::count(snap.len as u64)
        )
    } else {
        format!(
            "about {} distinct (estimated from the bits set)",
            human::count(snap.len as u64)
        )
    };
    println!(
        "koel build: {} keys read in {:.2} s, {stored}",
        human::count(totals.records_in - totals.missing_field),
        start.elapsed().as_secs_f64()
    );
    let load = match (snap.load_factor, snap.slots) {
        (Some(load), Some(slots)) => format!(
            ", load {:.1}% of {} slots, generation {}",
            load * 100.0,
            human::count(slots as u64),
            snap.generation
        ),
        _ => String::new(),
    };
    println!(
        "  {}: {} ({}){load}, FPR {:.1e}",
        args.output.display(),
        human::bytes(size),
        filter.describe(),
        snap.false_positive_rate
    );
    if totals.missing_field > 0 {
        println!(
            "  {} records without the key field were skipped",
            human::count(totals.missing_field)
        );
    }
    Ok(Outcome::Success)
}

/// A filter `build` can write.
trait Saveable: CliFilter {
    fn save_to(&self, path: &std::path::Path) -> std::io::Result<()>;
}

impl Saveable for CuckooFilter {
    fn save_to(&self, path: &std::path::Path) -> std::io::Result<()> {
        self.save(path)
    }
}

impl Saveable for BloomFilter {
    fn save_to(&self, path: &std::path::Path) -> std::io::Result<()> {
        self.save(path)
    }
}

/// Loads a cuckoo filter file (for `dedup --state`), as one error line if
/// it cannot.
///
/// # Errors
///
/// The file is missing, damaged, of another kind or version, or was saved
/// by a build that hashes differently.
pub fn load(path: &std::path::Path) -> anyhow::Result<CuckooFilter> {
    CuckooFilter::load(path).with_context(|| format!("cannot load {}", path.display()))
}

/// Loads a filter file of either kind, or a chain of cuckoo filters
/// (see [`crate::info::load`]), as one error line if it cannot.
///
/// # Errors
///
/// As [`load`].
pub fn load_any(path: &std::path::Path) -> anyhow::Result<Box<dyn CliFilter>> {
    crate::info::load(path).map_err(|p| p.into_error(path))
}
