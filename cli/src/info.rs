//! `koel info`: what a filter file holds.

use crate::{human, Outcome};
use anyhow::Context;
use koel::{ChecksumStatus, FileInfo, FilterKind};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

const EXAMPLES: &str = "\
Examples:
  koel info users.koel

Prints the header (kind, layout, geometry, seed), the item count, load,
memory and false-positive estimate, and whether the checksum is valid.
Exit status: 0 for an intact file, 1 if the payload is damaged or this
build hashes differently, 2 if it is not a readable koel file.";

/// Options of `koel info`.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The filter file.
    pub file: PathBuf,
}

/// Reads the header and checksum of `path` (streaming, one buffer).
///
/// # Errors
///
/// The file cannot be opened or its header is not a valid koel header.
pub fn inspect(path: &Path) -> anyhow::Result<FileInfo> {
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    koel::inspect(BufReader::new(f)).with_context(|| format!("cannot read {}", path.display()))
}

/// What is wrong with `info`'s file, if anything.
pub fn problem(info: &FileInfo) -> Option<String> {
    match info.checksum {
        ChecksumStatus::Valid => {}
        ChecksumStatus::Mismatch { stored, computed } => {
            return Some(format!(
                "checksum mismatch (stored {stored:#018x}, computed {computed:#018x}): the file is damaged"
            ))
        }
        ChecksumStatus::Truncated { expected, found } => {
            return Some(format!(
                "truncated: {found} of {expected} bytes"
            ))
        }
        _ => return Some("unknown checksum status".to_string()),
    }
    if info.item_count != info.counted_items {
        return Some(format!(
            "item count {:?} does not match the {:?} items in the payload",
            info.item_count, info.counted_items
        ));
    }
    if !info.hash_probe_matches {
        return Some(
            "saved by a build that hashes keys differently: this build cannot load it".to_string(),
        );
    }
    None
}

/// Runs `koel info`.
///
/// # Errors
///
/// The file is missing or not a koel file.
pub fn main(args: Args) -> anyhow::Result<Outcome> {
    let info = inspect(&args.file)?;
    let size = std::fs::metadata(&args.file).map_or(0, |m| m.len());
    let slots = info.buckets * u64::from(info.tags_per_bucket);
    println!(
        "file         {} ({})",
        args.file.display(),
        human::bytes(size)
    );
    println!(
        "kind         {}, format version {}",
        info.kind.name(),
        info.format_version
    );
    if info.kind == FilterKind::Bloom {
        println!(
            "layout       {} bits set per key in one of {} blocks of 64 bytes; sized for {} items at {:.1e}",
            info.bits_per_key,
            human::count(info.buckets),
            human::count(info.sized_capacity.unwrap_or(0)),
            info.target_false_positive_rate.unwrap_or(0.0)
        );
    } else {
        println!(
            "layout       {}-bit tags x {} per bucket; {} buckets = {} x 2^{} (generation {})",
            info.fingerprint_bits,
            info.tags_per_bucket,
            human::count(info.buckets),
            human::count(info.m0),
            info.generation,
            info.generation
        );
    }
    println!("seed         {:#018x}", info.seed);
    match info.item_count {
        Some(items) if info.kind == FilterKind::Cuckoo => println!(
            "items        {} (load {:.1}% of {} slots)",
            human::count(items),
            items as f64 * 100.0 / slots.max(1) as f64,
            human::count(slots)
        ),
        Some(bits) => println!("bits set     {}", human::count(bits)),
        None => {}
    }
    let problem = problem(&info);
    if problem.is_none() {
        let filter = crate::build::load_any(&args.file)?;
        println!(
            "memory       {} when loaded",
            human::bytes(filter.memory_usage() as u64)
        );
        println!(
            "fpr          {:.2e} expected at this load",
            filter.false_positive_rate()
        );
    }
    println!(
        "checksum     {}",
        match info.checksum {
            ChecksumStatus::Valid => "valid".to_string(),
            _ => "NOT valid".to_string(),
        }
    );
    println!(
        "hash probe   {}",
        if info.hash_probe_matches {
            "matches this build"
        } else {
            "DIFFERS from this build"
        }
    );
    if let Some(p) = problem {
        eprintln!("koel info: {}: {p}", args.file.display());
        return Ok(Outcome::CheckFailed);
    }
    Ok(Outcome::Success)
}
