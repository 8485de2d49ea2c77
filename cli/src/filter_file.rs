//! Filter files as koel writes them, read by every command that takes one
//! (`info`, `verify`, `query`, `dedup --state`): one filter in the
//! library's format, or a chain of cuckoo filters, which earlier versions
//! of `dedup --state` saved once a state had no room for a run, and which
//! `dedup --state` saves back when it continues one (framing in
//! docs/format.md, "Filter chains"; this module is its only reader and
//! writer).
//!
//! A chain's count is checked against the file's length before anything
//! is allocated for it; every filter hashes alike (same seed, same tag
//! width), so one key has one hash in all of them.

use crate::chain::{Chain, DEFAULT_FPR_BUDGET};
use crate::errln;
use crate::filters::CliFilter;
use koel::{BloomFilter, ChecksumStatus, CuckooFilter, FileInfo, FilterKind, LoadError};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, Write};
use std::path::Path;

const CHAIN_MAGIC: &[u8; 8] = b"KOELCHN1";
/// The magic and the count.
const CHAIN_HEADER_LEN: u64 = 12;
/// The least one filter of a chain takes: its 80-byte header and 16-byte
/// trailer (docs/format.md).
const MIN_FILTER_BYTES: u64 = 96;
/// More filters than this is a damaged file: koel sized each filter of a
/// chain for at least twice what the others held.
const MAX_CHAIN_FILTERS: u32 = 64;

/// A filter file that was read and is not an intact koel filter: exit
/// status 1 from `info` and `verify`. Every other error of a file (missing,
/// no permission, a directory, an I/O error) or of its report is exit
/// status 2. Context added to it (`filter 2 of 3: ...`) keeps it `Invalid`.
#[derive(Debug)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

/// A load error of `path`: [`Invalid`] unless it is an I/O error.
fn of_load(path: &Path, e: LoadError) -> anyhow::Error {
    match e {
        LoadError::Io(_) => unreadable(path, e),
        invalid => Invalid(invalid.to_string()).into(),
    }
}

/// Ends `info` or `verify` with error `e`: an [`Invalid`] file is a failed
/// check (exit 1), `prefix` and the reason on one line; anything else an
/// error (exit 2).
pub fn report(e: anyhow::Error, prefix: &str) -> anyhow::Result<crate::Outcome> {
    if !e.is::<Invalid>() {
        return Err(e);
    }
    errln!("{prefix}{e:#}");
    Ok(crate::Outcome::CheckFailed)
}

/// Error `e` of a command that needs the filter (`query`, `dedup
/// --state`): an [`Invalid`] file is one line naming `path`.
pub fn cannot_load(path: &Path, e: anyhow::Error) -> anyhow::Error {
    if e.is::<Invalid>() {
        e.context(format!("cannot load {}", path.display()))
    } else {
        e
    }
}

/// Saves `filters` (hashing alike) to `path` atomically (`crate::output`'s
/// rule): one filter as the library's own file, more as a chain file.
pub fn save(path: &Path, filters: &[&CuckooFilter]) -> io::Result<()> {
    if let [only] = filters {
        return only.save(path);
    }
    let count = u32::try_from(filters.len())
        .ok()
        .filter(|&n| n <= MAX_CHAIN_FILTERS)
        .ok_or_else(|| io::Error::other("too many filters for one chain file"))?;
    let mut out = koel::AtomicFile::create(path)?;
    let mut w = BufWriter::new(out.file());
    w.write_all(CHAIN_MAGIC)?;
    w.write_all(&count.to_le_bytes())?;
    filters.iter().try_for_each(|f| f.write_to(&mut w))?;
    w.flush()?;
    drop(w);
    out.commit()
}

/// A filter file's contents, loaded or to be saved: a Bloom filter, or
/// one cuckoo filter or more (a chain), in file order.
pub enum Loaded {
    Cuckoo(Vec<CuckooFilter>),
    Bloom(BloomFilter),
}

impl Loaded {
    /// Each filter, in file order.
    pub fn filters(&self) -> Vec<&dyn CliFilter> {
        match self {
            Loaded::Cuckoo(fs) => fs.iter().map(|f| f as &dyn CliFilter).collect(),
            Loaded::Bloom(f) => vec![f],
        }
    }

    /// Saves the filters to `path` atomically.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        match self {
            Loaded::Cuckoo(fs) => save(path, &fs.iter().collect::<Vec<_>>()),
            Loaded::Bloom(f) => f.save(path),
        }
    }
}

/// Loads `path` as one filter (`query`): a Bloom filter, or the chain of
/// its cuckoo filters, which answers "maybe" if any of them does.
pub fn open(path: &Path) -> anyhow::Result<Box<dyn CliFilter>> {
    Ok(match load(path).map_err(|e| cannot_load(path, e))? {
        // Read only: the budget of filters it would chain does not matter.
        Loaded::Cuckoo(filters) => Box::new(Chain::new(filters, DEFAULT_FPR_BUDGET)),
        Loaded::Bloom(f) => Box::new(f),
    })
}

/// Loads `path`: a filter of either kind, or a chain.
pub fn load(path: &Path) -> anyhow::Result<Loaded> {
    let (mut reader, Some(count)) = read_framing(path)? else {
        return match CuckooFilter::load(path) {
            Ok(f) => Ok(Loaded::Cuckoo(vec![f])),
            Err(LoadError::WrongKind {
                found: FilterKind::Bloom,
                ..
            }) => BloomFilter::load(path)
                .map(Loaded::Bloom)
                .map_err(|e| of_load(path, e)),
            Err(e) => Err(of_load(path, e)),
        };
    };
    // At most MAX_CHAIN_FILTERS, checked against the file's length.
    let mut filters = Vec::with_capacity(count as usize);
    walk(path, &mut reader, count, |r, _| {
        filters.push(CuckooFilter::read_from(r)?);
        Ok(true)
    })?;
    check_hashing(
        filters
            .iter()
            .map(|f| (f.seed(), f.fingerprint_bits(), f.hash_algorithm_name())),
    )
    .map_err(Invalid)?;
    Ok(Loaded::Cuckoo(filters))
}

/// What [`inspect`] found, without building a filter.
pub struct Inspected {
    /// `Some(n)` for a chain of `n` filters.
    pub chain: Option<u32>,
    /// Each filter's header and payload state, in file order, up to the
    /// first with a problem.
    pub filters: Vec<FileInfo>,
    /// What is wrong with the file, if anything.
    pub problem: Option<String>,
}

/// Reads the header and checksum of `path`'s filters (streaming, one
/// buffer), stopping at the first problem.
pub fn inspect(path: &Path) -> anyhow::Result<Inspected> {
    let (mut reader, chain) = read_framing(path)?;
    let Some(count) = chain else {
        let info = koel::inspect(reader).map_err(|e| of_load(path, e))?;
        let problem = problem(&info);
        let filters = vec![info];
        return Ok(Inspected {
            chain,
            filters,
            problem,
        });
    };
    let (mut filters, mut problem) = (Vec::new(), None);
    let walked = walk(path, &mut reader, count, |r, k| {
        let info = koel::inspect(r)?;
        let why = self::problem(&info).or_else(|| {
            let kind = info.kind.name();
            (info.kind != FilterKind::Cuckoo)
                .then(|| format!("holds a {kind} filter; a chain holds cuckoo filters"))
        });
        filters.push(info);
        problem = why.map(|why| format!("filter {k} of {count}: {why}"));
        Ok(problem.is_none())
    });
    match walked {
        Err(e) if e.is::<Invalid>() && !filters.is_empty() => problem = Some(format!("{e:#}")),
        walked => walked?,
    }
    let problem = problem.or_else(|| {
        check_hashing(
            filters
                .iter()
                .map(|i| (i.seed, i.fingerprint_bits, i.hash_algorithm_name())),
        )
        .err()
    });
    Ok(Inspected {
        chain,
        filters,
        problem,
    })
}

/// What is wrong with a filter `info` describes, if anything.
pub fn problem(info: &FileInfo) -> Option<String> {
    Some(match info.checksum {
        ChecksumStatus::Mismatch { stored, computed } => format!(
            "checksum mismatch (stored {stored:#018x}, computed {computed:#018x}): the file is damaged"
        ),
        ChecksumStatus::Truncated { expected, found } => {
            format!("truncated: {found} of {expected} bytes")
        }
        ChecksumStatus::Valid if info.item_count != info.counted_items => format!(
            "item count {:?} does not match the {:?} items in the payload",
            info.item_count, info.counted_items
        ),
        ChecksumStatus::Valid if !info.hash_probe_matches => {
            "saved by a build that hashes keys differently: this build cannot load it".to_string()
        }
        ChecksumStatus::Valid => return None,
        _ => "unknown checksum status".to_string(),
    })
}

/// Every filter of a chain must hash as the first: `(seed, tag bits, hash
/// algorithm)` of each, in order; else what differs.
fn check_hashing(filters: impl Iterator<Item = (u64, u32, &'static str)>) -> Result<(), String> {
    let mut filters = filters.enumerate();
    let Some((_, (seed1, bits1, hash1))) = filters.next() else {
        return Ok(());
    };
    match filters.find(|&(_, f)| f != (seed1, bits1, hash1)) {
        None => Ok(()),
        Some((k, (seed, bits, hash))) => Err(format!(
            "filter {} has seed {seed:#x}, {bits}-bit tags and hash {hash}, filter 1 seed {seed1:#x}, {bits1}-bit tags and hash {hash1}: a chain's filters must hash alike",
            k + 1
        )),
    }
}

fn unreadable(path: &Path, e: impl Into<anyhow::Error>) -> anyhow::Error {
    e.into().context(format!("cannot read {}", path.display()))
}

/// Opens `path` and tells a chain from a single filter: the reader, at the
/// start of the file, or of a chain's first filter with the chain's count
/// (checked against the file's length).
fn read_framing(path: &Path) -> anyhow::Result<(BufReader<File>, Option<u32>)> {
    let mut file = File::open(path).map_err(|e| unreadable(path, e))?;
    let meta = file.metadata().map_err(|e| unreadable(path, e))?;
    if meta.is_dir() {
        anyhow::bail!(
            "cannot read {}: it is a directory, not a filter file",
            path.display()
        );
    }
    let mut head = Vec::with_capacity(CHAIN_HEADER_LEN as usize);
    (&mut file)
        .take(CHAIN_HEADER_LEN)
        .read_to_end(&mut head)
        .map_err(|e| unreadable(path, e))?;
    let count = match head.strip_prefix(CHAIN_MAGIC) {
        None => None,
        Some(n) => Some(u32::from_le_bytes(n.try_into().map_err(|_| {
            Invalid(format!(
                "truncated chain header: {} of {CHAIN_HEADER_LEN} bytes",
                head.len()
            ))
        })?)),
    };
    let room = meta.len().saturating_sub(CHAIN_HEADER_LEN) / MIN_FILTER_BYTES;
    if let Some(n) = count.filter(|&n| n == 0 || n > MAX_CHAIN_FILTERS || u64::from(n) > room) {
        anyhow::bail!(Invalid(format!(
            "damaged chain header: it announces {n} filters{}",
            match n {
                0 => String::new(),
                _ => format!(
                    "; its {} bytes hold at most {} (the file is damaged or truncated)",
                    meta.len(),
                    room.min(u64::from(MAX_CHAIN_FILTERS))
                ),
            }
        )));
    }
    let at = if count.is_some() { CHAIN_HEADER_LEN } else { 0 };
    file.seek(io::SeekFrom::Start(at))
        .map_err(|e| unreadable(path, e))?;
    Ok((BufReader::new(file), count))
}

/// Calls `each(reader, k)` for the filters `k = 1..=count` of a chain, the
/// reader at the start of filter `k`, while it returns `true`; then checks
/// that nothing follows the last filter.
fn walk(
    path: &Path,
    reader: &mut BufReader<File>,
    count: u32,
    mut each: impl FnMut(&mut dyn Read, u32) -> Result<bool, LoadError>,
) -> anyhow::Result<()> {
    let at_end = |r: &mut BufReader<File>| {
        r.fill_buf()
            .map(<[u8]>::is_empty)
            .map_err(|e| unreadable(path, e))
    };
    for k in 1..=count {
        if at_end(reader)? {
            anyhow::bail!(Invalid(format!(
                "truncated chain: its header announces {count} filters, the file ends after {}",
                k - 1
            )));
        }
        match each(reader, k).map_err(|e| of_load(path, e)) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) if e.is::<Invalid>() => return Err(e.context(format!("filter {k} of {count}"))),
            Err(unreadable) => return Err(unreadable),
        }
    }
    if !at_end(reader)? {
        anyhow::bail!(Invalid(format!(
            "bytes after the last of its {count} filters: the file is damaged"
        )));
    }
    Ok(())
}
