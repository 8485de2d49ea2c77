//! `koel info`: what a filter file holds.

use crate::{human, Outcome};
use koel::{ChecksumStatus, FileInfo, FilterKind, LoadError};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

const EXAMPLES: &str = "\
Examples:
  koel info users.koel

Prints the header (kind, layout, geometry, seed), the item count, load,
memory and false-positive estimate, and whether the checksum is valid.
Exit status: 0 for an intact file; 1 if the file was read and is not an
intact koel filter (damaged, truncated, foreign, another format version,
saved by a build that hashes differently); 2 if it cannot be read at all
(missing, no permission, a directory).";

/// Options of `koel info`.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The filter file.
    pub file: PathBuf,
}

/// Why a filter file cannot be described or used.
#[derive(Debug)]
pub enum FileProblem {
    /// It cannot be read at all (missing, no permission, a directory, an
    /// I/O error): exit status 2.
    Unreadable(anyhow::Error),
    /// It was read and is not an intact koel filter: exit status 1 from
    /// `info` and `verify`.
    Invalid(String),
}

impl FileProblem {
    /// A load error of `path`, sorted into the two cases.
    pub fn of_load(path: &Path, e: LoadError) -> FileProblem {
        match e {
            LoadError::Io(_) => FileProblem::Unreadable(
                anyhow::Error::new(e).context(format!("cannot read {}", path.display())),
            ),
            invalid => FileProblem::Invalid(invalid.to_string()),
        }
    }

    /// Ends `info` or `verify`: an unreadable file is an error (exit 2),
    /// an invalid one a failed check (exit 1) with `prefix` and the reason
    /// on one line.
    ///
    /// # Errors
    ///
    /// [`FileProblem::Unreadable`].
    pub fn report(self, prefix: &str) -> anyhow::Result<Outcome> {
        match self {
            FileProblem::Unreadable(e) => Err(e),
            FileProblem::Invalid(why) => {
                eprintln!("{prefix}{why}");
                Ok(Outcome::CheckFailed)
            }
        }
    }
}

/// Reads the header and checksum of `path` (streaming, one buffer).
///
/// # Errors
///
/// The file cannot be read, or its header is not a valid koel header.
pub fn inspect(path: &Path) -> Result<FileInfo, FileProblem> {
    let unreadable = |e: std::io::Error| {
        FileProblem::Unreadable(
            anyhow::Error::new(e).context(format!("cannot open {}", path.display())),
        )
    };
    let f = File::open(path).map_err(unreadable)?;
    if f.metadata().map_err(unreadable)?.is_dir() {
        return Err(FileProblem::Unreadable(anyhow::anyhow!(
            "cannot read {}: it is a directory, not a filter file",
            path.display()
        )));
    }
    koel::inspect(BufReader::new(f)).map_err(|e| FileProblem::of_load(path, e))
}

/// Loads `path` as a filter of either kind, sorting a failure as
/// [`inspect`] does.
///
/// # Errors
///
/// As [`inspect`].
pub fn load(path: &Path) -> Result<Box<dyn crate::filters::CliFilter>, FileProblem> {
    crate::build::load_any_raw(path).map_err(|e| FileProblem::of_load(path, e))
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
    let prefix = format!("koel info: {}: ", args.file.display());
    let info = match inspect(&args.file) {
        Ok(info) => info,
        Err(p) => return p.report(&prefix),
    };
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
        let filter = match load(&args.file) {
            Ok(f) => f,
            Err(p) => return p.report(&prefix),
        };
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
        return FileProblem::Invalid(p).report(&prefix);
    }
    Ok(Outcome::Success)
}
