//! `koel verify`: checksum and invariants of a filter file.

use crate::args::FileArgs;
use crate::filter_file::{self, Invalid};
use crate::human::HumanCount;
use crate::outln;
use crate::Outcome;
use std::path::Path;

pub const EXAMPLES: &str = "\
Examples:
  koel verify users.koel && echo intact

Checks the header, the checksum, the item count against the payload, every
bucket, and that this build hashes keys as the saving build did; a chain
of filters (saved by an earlier `koel dedup --state`) filter by filter and
its framing. Exit status: 0 if the file is intact; 1 if it was read and is
not an intact koel filter (one line on stderr says how); 2 if it cannot
be read at all (missing, no permission, a directory).";

pub fn main(args: FileArgs) -> anyhow::Result<Outcome> {
    let prefix = format!("koel verify: {}: FAILED: ", args.file.display());
    verify(&args.file).or_else(|e| filter_file::report(e, &prefix))
}

fn verify(path: &Path) -> anyhow::Result<Outcome> {
    let inspected = filter_file::inspect(path)?;
    if let Some(problem) = inspected.problem {
        return Err(Invalid(problem).into());
    }
    // Loading re-checks every field and word, and the file length.
    filter_file::load(path)?;
    let filters = &inspected.filters;
    let items: u64 = filters.iter().map(|i| i.item_count.unwrap_or(0)).sum();
    let kind = filters[0].kind;
    let what = match inspected.chain {
        Some(n) => format!("chain of {n} {} filters", kind.name()),
        None => format!("{} filter", kind.name()),
    };
    // A filter grown past its tag bits is one record per level, each with
    // its own checksum and probe.
    let levels: usize = filters.iter().map(|i| i.levels).sum();
    let in_levels = (levels > filters.len()).then(|| format!(" in {levels} levels"));
    let all = if inspected.chain.is_some() || levels > 1 {
        "checksums valid, hash probes match"
    } else {
        "checksum valid, hash probe matches"
    };
    let mut versions: Vec<String> = filters
        .iter()
        .map(|i| i.format_version.to_string())
        .collect();
    versions.dedup();
    outln!(
        "{}: OK ({what}, format version {}, {} {}{}, {all})",
        path.display(),
        versions.join("+"),
        HumanCount(items),
        if kind == koel::FilterKind::Bloom {
            "bits set"
        } else {
            "items"
        },
        in_levels.unwrap_or_default()
    )?;
    Ok(Outcome::Success)
}
