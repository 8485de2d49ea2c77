//! `koel verify`: checksum and invariants of a filter file.

use crate::info::{inspect, load, FileProblem};
use crate::{human, Outcome};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  koel verify users.koel && echo intact

Checks the header, the checksum over header, payload and item count, the
item count against the payload, that no bucket holds a reserved tag,
stray bits or a tag outside its region, and that this build hashes keys
as the saving build did (by loading the filter). Exit status: 0 if the
file is intact; 1 if it was read and is not an intact koel filter
(damaged, truncated, foreign, another format version: one line on stderr
says how); 2 if it cannot be read at all (missing, no permission, a
directory).";

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
    let prefix = format!("koel verify: {}: FAILED: ", path.display());
    let info = match inspect(path) {
        Ok(info) => info,
        Err(p) => return p.report(&prefix),
    };
    if let Some(problem) = crate::info::problem(&info) {
        return FileProblem::Invalid(problem).report(&prefix);
    }
    // Loading re-checks every field and word, and the file length.
    if let Err(p) = load(path) {
        return p.report(&prefix);
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
