//! `koel info`: what a filter file (or chain of filters) holds.

use crate::args::FileArgs;
use crate::filter_file::{self, Invalid, Loaded};
use crate::filters::CliFilter;
use crate::human::{HumanBytes, HumanCount};
use crate::outln;
use crate::Outcome;
use koel::{ChecksumStatus, FileInfo, FilterKind};
use std::path::Path;

pub const EXAMPLES: &str = "\
Examples:
  koel info users.koel

A chain of filters (saved by an earlier `koel dedup --state`) shows each
filter and their summed false-positive rate. Exit status: 0 for an intact
file; 1 if the file was read and is not an intact koel filter; 2 if it
cannot be read at all (missing, no permission, a directory).";

pub fn main(args: FileArgs) -> anyhow::Result<Outcome> {
    let prefix = format!("koel info: {}: ", args.file.display());
    show_file(&args.file).or_else(|e| filter_file::report(e, &prefix))
}

fn show_file(path: &Path) -> anyhow::Result<Outcome> {
    let inspected = filter_file::inspect(path)?;
    let loaded = inspected.problem.is_none().then(|| filter_file::load(path));
    let loaded = loaded.transpose()?;
    let filters = loaded.as_ref().map_or_else(Vec::new, Loaded::filters);
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    outln!("file         {} ({})", path.display(), HumanBytes(size))?;
    match inspected.chain {
        None => show(&inspected.filters[0], filters.first().copied(), "")?,
        Some(n) => {
            outln!(
                "chain        {n} cuckoo filter{} (an earlier koel dedup --state): a key is maybe present if any of them says so",
                if n == 1 { "" } else { "s" }
            )?;
            for (k, info) in inspected.filters.iter().enumerate() {
                outln!("filter {} of {n}", k + 1)?;
                show(info, filters.get(k).copied(), "  ")?;
            }
            let total: f64 = filters.iter().map(|f| f.false_positive_rate()).sum();
            if !filters.is_empty() {
                let total = total.min(1.0);
                outln!("total fpr    {total:.2e} expected (the sum of the filters')")?;
            }
        }
    }
    inspected
        .problem
        .map_or(Ok(Outcome::Success), |p| Err(Invalid(p).into()))
}

/// The lines of one filter: its header, items, and (if it loaded) memory
/// and rate, each line after `indent`.
fn show(info: &FileInfo, filter: Option<&dyn CliFilter>, indent: &str) -> anyhow::Result<()> {
    // Every level's slots: the item count covers them all.
    let slots: u64 = std::iter::once(info)
        .chain(&info.upper_levels)
        .map(|l| l.buckets * u64::from(l.tags_per_bucket))
        .sum();
    outln!(
        "{indent}kind         {}, format version {}",
        info.kind.name(),
        info.format_version
    )?;
    if info.kind == FilterKind::Bloom {
        outln!(
            "{indent}layout       {} bits set per key in one of {} blocks of 64 bytes; sized for {} items at {:.1e}",
            info.bits_per_key,
            HumanCount(info.buckets),
            HumanCount(info.sized_capacity.unwrap_or(0)),
            info.target_false_positive_rate.unwrap_or(0.0)
        )?;
    } else {
        outln!(
            "{indent}layout       {}-bit tags x {} per bucket; {} buckets = {} x 2^{} (generation {})",
            info.fingerprint_bits,
            info.tags_per_bucket,
            HumanCount(info.buckets),
            HumanCount(info.m0),
            info.generation,
            info.generation
        )?;
    }
    if info.levels > 1 {
        outln!(
            "{indent}levels       {}: grown past its tag bits, {} level{} of 21-bit tags above the first",
            info.levels,
            info.levels - 1,
            if info.levels == 2 { "" } else { "s" }
        )?;
        for (k, level) in info.upper_levels.iter().enumerate() {
            let slots = level.buckets * u64::from(level.tags_per_bucket);
            let items = level.item_count.unwrap_or(0);
            if let Some(r) = &level.regions {
                outln!(
                    "{indent}level {:<7}{}-bit tags x {}; {} regions of {} buckets (at most {}), {} split slot{}, {} steps; {} items (load {:.1}%); fpr cap {:.1e}",
                    k + 1,
                    level.fingerprint_bits,
                    level.tags_per_bucket,
                    r.regions,
                    HumanCount(level.m0),
                    r.max_regions,
                    r.split_slots,
                    if r.split_slots == 1 { "" } else { "s" },
                    r.steps,
                    HumanCount(items),
                    items as f64 * 100.0 / slots.max(1) as f64,
                    level.max_false_positive_rate.unwrap_or(0.0)
                )?;
                continue;
            }
            outln!(
                "{indent}level {:<7}{}-bit tags x {}; {} buckets = {} x 2^{}; {} items (load {:.1}%); fpr cap {:.1e}",
                k + 1,
                level.fingerprint_bits,
                level.tags_per_bucket,
                HumanCount(level.buckets),
                HumanCount(level.m0),
                level.generation,
                HumanCount(items),
                items as f64 * 100.0 / slots.max(1) as f64,
                level.max_false_positive_rate.unwrap_or(0.0)
            )?;
        }
    }
    outln!(
        "{indent}seed         {:#018x}, hash {}",
        info.seed,
        info.hash_algorithm_name()
    )?;
    match info.growth {
        Some(koel::Growth::Fixed) => outln!("{indent}growth       fixed (never grows)")?,
        Some(_) => outln!(
            "{indent}growth       doubles when full, up to fpr {:.1e}{}",
            info.max_false_positive_rate.unwrap_or(0.0),
            info.max_memory
                .map_or(String::new(), |m| format!(", max memory {}", HumanBytes(m)))
        )?,
        None => {}
    }
    match info.item_count {
        Some(items) if info.kind == FilterKind::Cuckoo => outln!(
            "{indent}items        {} (load {:.1}% of {} slots)",
            HumanCount(items),
            items as f64 * 100.0 / slots.max(1) as f64,
            HumanCount(slots)
        )?,
        Some(bits) => outln!("{indent}bits set     {}", HumanCount(bits))?,
        None => {}
    }
    if let Some(filter) = filter {
        outln!(
            "{indent}memory       {} when loaded",
            HumanBytes(filter.memory_usage() as u64)
        )?;
        outln!(
            "{indent}fpr          {:.2e} expected at this load",
            filter.false_positive_rate()
        )?;
    }
    outln!(
        "{indent}checksum     {}",
        match info.checksum {
            ChecksumStatus::Valid => "valid",
            _ => "NOT valid",
        }
    )?;
    outln!(
        "{indent}hash probe   {}",
        if info.hash_probe_matches {
            "matches this build"
        } else {
            "DIFFERS from this build"
        }
    )
}
