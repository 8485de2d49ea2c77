//! `koel verify`: checksum and invariants of a filter file.

use crate::{human, Outcome};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  koel verify users.koel && echo intact

Checks the header, the checksum over header, payload and item count, the
item count against the payload, that no bucket holds a reserved tag,
stray bits or a tag outside its region, and that this build hashes keys
as the saving build did (by loading the filter). Exit status: 0 if the file is intact, 1 if it is
damaged (one line on stderr says how), 2 if it cannot be read at all.";

/// Options of `koel verify`.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// The filter file.
    pub file: PathBuf,
}

/// Runs `koel verify`.
///
/// # Errors
///
/// The file cannot be opened.
pub fn main(args: Args) -> anyhow::Result<Outcome> {
    let path = &args.file;
    std::fs::File::open(path)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    let failed = |why: String| {
        eprintln!("koel verify: {}: FAILED: {why}", path.display());
        Ok(Outcome::CheckFailed)
    };
    let info = match crate::info::inspect(path) {
        Ok(info) => info,
        Err(e) => return failed(format!("{e:#}")),
    };
    if let Some(problem) = crate::info::problem(&info) {
        return failed(problem);
    }
    // Loading re-checks every field and word, and the file length.
    if let Err(e) = crate::build::load_any(path) {
        return failed(format!("{e:#}"));
    }
    println!(
        "{}: OK ({} filter, {} {}, checksum valid, hash probe matches)",
        path.display(),
        info.kind.name(),
        human::count(info.item_count.unwrap_or(0)),
        if info.kind == koel::FilterKind::Bloom {
            "bits set"
        } else {
            "items"
        }
    );
    Ok(Outcome::Success)
}
