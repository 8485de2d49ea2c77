//! `koel advise`: which filter, how large, at what false-positive rate.

use crate::human::{HumanBytes, HumanCount};
use crate::outln;
use crate::{parse, Outcome};
use koel::{advise, Configuration, Requirements, SetSize};

const EXAMPLES: &str = "\
Examples:
  koel advise --items 10M --fpr 1e-3                       # insert-only: a Bloom filter
  koel advise --items 10M --fpr 1e-3 --deletes             # a cuckoo filter
  koel advise --items 1M --fpr 1e-2 --growth unknown:8     # grows online, about 8x
  koel advise --items 1M --fpr 0                           # no false positive: no filter

Exit status: 0 if the recommendation meets every requirement, 1 if none
can (the reason says which and what to do), 2 on bad options.";

#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Items the set holds (its initial size if it grows).
    #[arg(long, value_parser = parse::count, allow_negative_numbers = true)]
    pub items: u64,
    /// Highest acceptable false-positive rate (0 = none acceptable).
    #[arg(long, value_parser = parse_rate, allow_negative_numbers = true)]
    pub fpr: f64,
    /// Items are also removed.
    #[arg(long)]
    pub deletes: bool,
    /// Many threads dedup a stream and must know exactly which insert of a
    /// key came first.
    #[arg(long)]
    pub exact_dedup: bool,
    /// How the set's size changes: fixed, F (grows to at most F times
    /// --items, known up front), or unknown:F (grows by an unknown amount,
    /// about F times).
    #[arg(long, default_value = "fixed", value_parser = growth, allow_negative_numbers = true)]
    pub growth: SetSize,
}

/// `--growth`: `fixed`, `F` (or `bounded:F`), `unknown:F` (or `unknown`: 4).
fn growth(s: &str) -> Result<SetSize, String> {
    let factor = |f: &str| match f.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 1.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a growth: use fixed, a factor of at least 1 such as 2, or unknown:F"
        )),
    };
    let unknown = |expected_factor| SetSize::Unknown { expected_factor };
    Ok(match (s, s.strip_prefix("unknown:")) {
        ("fixed", _) => SetSize::Fixed,
        ("unknown", _) => unknown(4.0),
        (_, Some(f)) => unknown(factor(f)?),
        _ => SetSize::Bounded {
            factor: factor(s.strip_prefix("bounded:").unwrap_or(s))?,
        },
    })
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "{s:?} is not a false-positive rate from 0 (none) to below 1, e.g. 1e-3"
        )),
    }
}

pub fn main(args: Args) -> anyhow::Result<Outcome> {
    let items = usize::try_from(args.items)?;
    let req = Requirements::new(items, args.fpr)
        .deletes(args.deletes)
        .exact_dedup(args.exact_dedup)
        .growth(args.growth);
    let rec = advise(req).map_err(|e| anyhow::anyhow!("cannot advise: {e}"))?;
    let what = match rec.configuration {
        Configuration::ExactStore => "no filter: ask the exact store (or keep an exact set)".to_string(),
        Configuration::Bloom {
            capacity,
            false_positive_rate,
            hashes,
            blocks,
        } => format!(
            "Bloom filter for {} items at {false_positive_rate:.1e} ({hashes} bits set per key, in one of {} blocks of 64 bytes)\nbuild with   BloomFilter::builder().capacity({capacity}).false_positive_rate({false_positive_rate:e})",
            HumanCount(capacity as u64),
            HumanCount(blocks)
        ),
        Configuration::Cuckoo {
            capacity,
            fingerprint_bits,
            growth,
        } => {
            let mut s = format!(
                "cuckoo filter for {} items, {fingerprint_bits}-bit tags",
                HumanCount(capacity as u64)
            );
            if let Some(g) = growth {
                s += &format!(
                    ", growing online: {} doublings to {:.0}x (FPR {:.1e} before, {:.1e} after; growth capped at {:.1e})",
                    g.doublings,
                    g.expected_factor,
                    g.initial_false_positive_rate,
                    g.false_positive_rate_after,
                    g.max_false_positive_rate
                );
            }
            s += &format!(
                "\nbuild with   CuckooFilter::builder().capacity({capacity}).fingerprint_bits({fingerprint_bits})"
            );
            if let Some(g) = growth {
                s += &format!(".max_false_positive_rate({:e})", g.max_false_positive_rate);
            }
            s
        }
        other => format!("{other:?}"),
    };
    outln!("use          {what}")?;
    if rec.kind.is_some() {
        let memory = rec.memory_bytes as u64;
        match crate::meminfo("MemTotal") {
            Some(ram) if memory > ram => outln!(
                "memory       {} (more than this machine's {} of RAM)",
                HumanBytes(memory),
                HumanBytes(ram)
            )?,
            _ => outln!("memory       {}", HumanBytes(memory))?,
        }
        outln!(
            "expected FPR {:.2e} (asked for {:.2e})",
            rec.expected_fpr,
            args.fpr
        )?;
    }
    outln!(
        "meets all    {}",
        if rec.meets_requirements { "yes" } else { "NO" }
    )?;
    outln!("why          {}", rec.reason)?;
    Ok(if rec.meets_requirements {
        Outcome::Success
    } else {
        Outcome::CheckFailed
    })
}
