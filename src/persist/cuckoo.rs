//! Saving and loading a [`CuckooFilter`].

use super::error::LoadError;
use super::file;
use super::format::{self, Header};
use super::saved::{self, PayloadCheck, Saved};
use super::stream;
use crate::cuckoo::levels::region::RegionLevel;
use crate::cuckoo::levels::UPPER_LAYOUT;
use crate::cuckoo::levels::{Level, UpperLevel};
use crate::cuckoo::snapshot::FromPartsError;
use crate::cuckoo::{CuckooFilter, Growth, GrowthPolicy, LayoutKind};
use crate::filter::FilterKind;
use crate::hash::{HashAlgorithm, KeyHasher};
use crate::raw::bucket::{self, L12x5, L16x4, L21x3, Layout};
use crate::raw::geometry::{Geometry, GeometryError};
use crate::raw::regions::Regions;
use crate::sync::{AtomicU64, Ordering};
use std::io::{self, Read, Write};
use std::path::Path;

// The record of a level grown by regions (format version 4).
mod regions;

pub use regions::RegionsInfo;
use regions::{RegionCheck, RegionsShape};

/// A cuckoo header's shape, validated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub(crate) layout: LayoutKind,
    pub(crate) geo: Geometry,
    /// Payload bytes: `8 * (m0 << generation)`.
    pub(crate) payload_len: u64,
    /// The saved growth settings (version 1: the builder's defaults).
    pub(crate) policy: GrowthPolicy,
    pub(crate) algorithm: HashAlgorithm,
    pub(crate) seed: u64,
    /// 0 for the first record, `k` for the `k`-th level above it.
    pub(crate) level: usize,
    /// Whether the record of the level above follows this one.
    pub(crate) level_above: bool,
    /// For a level of regions' record (format version 4): its regions of
    /// `geo.m0()` buckets each (its geometry is generation 0) and its map's
    /// slots. `None` for a table's record.
    pub(crate) regions: Option<RegionsShape>,
}

/// Why a first record of format version 4 is refused.
const REGIONS_NEVER_FIRST: &str = "a level of regions (format version 4) is never the first";

/// Growth codes at offset 20 (version 2).
const GROWTH_DOUBLE: u32 = 0;
const GROWTH_FIXED: u32 = 1;

/// The code of `growth` at offset 20.
pub(crate) fn growth_code(growth: Growth) -> u32 {
    match growth {
        Growth::Double => GROWTH_DOUBLE,
        Growth::Fixed => GROWTH_FIXED,
    }
}

/// The growth settings a header holds: version 2 saves them (growth at
/// offset 20, `max_false_positive_rate` at 64, `max_memory` at 72, 0 for
/// none); version 1 has 0 in both of its fields and gets the defaults.
fn policy(h: &Header) -> Result<GrowthPolicy, LoadError> {
    if h.version == 1 {
        for (offset, value) in [
            (format::offset::PARAM32, u64::from(h.param32)),
            (format::offset::PARAM64, h.param64),
        ] {
            if value != 0 {
                return Err(LoadError::ReservedNotZero { offset, value });
            }
        }
        return Ok(GrowthPolicy::default());
    }
    let growth = match h.param32 {
        GROWTH_DOUBLE => Growth::Double,
        GROWTH_FIXED => Growth::Fixed,
        code => return Err(LoadError::UnknownGrowth(code)),
    };
    let rate = f64::from_bits(h.param64);
    // The builder's own rule (`CuckooFilterBuilder::build`).
    if !(rate > 0.0 && rate <= 1.0) {
        return Err(LoadError::InvalidMaxFalsePositiveRate { rate });
    }
    Ok(GrowthPolicy {
        growth,
        max_memory: (h.max_memory != 0)
            .then(|| usize::try_from(h.max_memory).unwrap_or(usize::MAX)),
        max_false_positive_rate: rate,
    })
}

/// Checks every cuckoo-specific header field except the hash probe (which
/// [`inspect`](crate::inspect) reports instead of refusing), and that the
/// record fits above `below`, the shape of the record before it (`None`
/// for the first). Allocates nothing.
pub(crate) fn shape(h: &Header, below: Option<&Shape>) -> Result<Shape, LoadError> {
    let found = h.kind()?;
    if found != FilterKind::Cuckoo {
        return Err(LoadError::WrongKind {
            expected: FilterKind::Cuckoo,
            found,
        });
    }
    if h.version == format::REGIONS_VERSION && below.is_none() {
        return Err(LoadError::InvalidLevel {
            level: 0,
            reason: REGIONS_NEVER_FIRST,
        });
    }
    let policy = policy(h)?;
    let algorithm = h.algorithm()?;
    let layout = match (h.tag_bits, h.tags_per_bucket, h.words_per_bucket) {
        (16, 4, 1) => LayoutKind::Tags16x4,
        (12, 5, 1) => LayoutKind::Tags12x5,
        (21, 3, 1) => LayoutKind::Tags21x3,
        _ => {
            return Err(LoadError::UnsupportedLayout {
                tag_bits: h.tag_bits,
                tags_per_bucket: h.tags_per_bucket,
                words_per_bucket: h.words_per_bucket,
            })
        }
    };
    // The engine's own definition of a table it can run (and grow).
    let generation = u32::from(h.generation);
    // A level of regions addresses as its engine does, whatever the hash.
    let addressing = if h.version == format::REGIONS_VERSION {
        crate::raw::regions::ADDRESSING
    } else {
        crate::cuckoo::addressing_of(algorithm)
    };
    let geo =
        Geometry::checked(h.m0, generation, layout.tag_bits(), addressing).map_err(
            |e| match e {
                GeometryError::M0(m0) => LoadError::InvalidM0 { m0 },
                GeometryError::Generation(_) => LoadError::InvalidGeneration {
                    generation: h.generation,
                    tag_bits: h.tag_bits,
                },
            },
        )?;
    let regions = (h.version == format::REGIONS_VERSION)
        .then(|| regions::regions_in(h.buckets, geo.m0()))
        .transpose()?;
    // `checked` keeps the table's bytes below `isize::MAX`: no overflow.
    // A level of regions has at most 2^14 regions of at most 2^32 buckets.
    let buckets = regions.map_or(geo.buckets(), |r| r * geo.m0());
    if h.buckets != buckets {
        return Err(LoadError::BucketCountMismatch {
            stored: h.buckets,
            expected: buckets,
        });
    }
    // A level of regions' block holds its map, whose size the payload's
    // length tells.
    let regions = match regions {
        None => None,
        Some(regions) => Some(RegionsShape {
            regions,
            slots: regions::slots_in(h.payload_len, buckets)?,
        }),
    };
    let payload_len = regions.map_or(0, |r| regions::block_len(r.slots)) + buckets * 8;
    if h.payload_len != payload_len {
        return Err(LoadError::PayloadLengthMismatch {
            stored: h.payload_len,
            expected: payload_len,
        });
    }
    let shape = Shape {
        layout,
        geo,
        payload_len,
        policy,
        algorithm,
        seed: h.seed,
        level: below.map_or(0, |b| b.level + 1),
        level_above: h.level_above(),
        regions,
    };
    check_level(&shape, below)?;
    Ok(shape)
}

/// Checks that a record of `shape` may be where it is: level 0 or above
/// `below`, as `levels.rs` builds levels (`build_upper`). A level above
/// has the upper layout, hashes as the level below, doubles, and has a
/// smaller false-positive rate and memory limit than the level below (the
/// engine subtracts them).
fn check_level(shape: &Shape, below: Option<&Shape>) -> Result<(), LoadError> {
    let invalid = |reason| {
        Err(LoadError::InvalidLevel {
            level: shape.level,
            reason,
        })
    };
    if shape.level >= format::MAX_LEVELS {
        return invalid("more levels than any filter grows (at most 64)");
    }
    if shape.level_above && shape.policy.growth != Growth::Double {
        // Only a doubling level that may not double again gets one.
        return invalid("a level that never grows (Growth::Fixed) has no level above");
    }
    let Some(below) = below else {
        if shape.layout == UPPER_LAYOUT {
            return invalid("21-bit tags are for the levels above the first only");
        }
        return Ok(());
    };
    if below.regions.is_some() && shape.regions.is_none() {
        return invalid("above a level of regions only another level of regions may follow");
    }
    if shape.regions.is_some() && shape.geo.generation() != 0 {
        return invalid("a level of regions has generation 0 (its regions never double)");
    }
    if shape.layout != UPPER_LAYOUT {
        return invalid("a level above the first must hold 21-bit tags, 3 per bucket");
    }
    if shape.policy.growth != Growth::Double {
        return invalid("a level above the first always doubles (growth 0)");
    }
    if shape.seed != below.seed || shape.algorithm != below.algorithm {
        return invalid("its seed or hash algorithm differs from the level below's");
    }
    // Both rates are in (0, 1] (`policy`): no NaN.
    if shape.policy.max_false_positive_rate >= below.policy.max_false_positive_rate {
        return invalid(
            "its max_false_positive_rate is not below the level below's (it gets half of what \
             the levels below leave)",
        );
    }
    let memory_fits = match (shape.policy.max_memory, below.policy.max_memory) {
        (None, None) => true,
        (Some(own), Some(max)) => own <= max,
        _ => false,
    };
    if !memory_fits {
        return invalid(
            "its max_memory is not within the level below's (it gets what the levels below leave)",
        );
    }
    Ok(())
}

/// Checks bucket words as they stream past: counts occupied slots and
/// remembers the first word no filter could have written (a reserved tag,
/// bits outside the lanes, a tag outside its bucket's region).
pub(crate) struct WordCheck {
    layout: LayoutKind,
    geo: Geometry,
    words: u64,
    pub(crate) counted: u64,
    pub(crate) first_bad: Option<(u64, &'static str)>,
}

impl WordCheck {
    pub(crate) fn new(shape: &Shape) -> Self {
        WordCheck {
            layout: shape.layout,
            geo: shape.geo,
            words: 0,
            counted: 0,
            first_bad: None,
        }
    }

    fn absorb_in<L: Layout>(&mut self, mut bytes: &[u8]) {
        // Runs of words in one region: the region a tag must name.
        let m0 = self.geo.m0();
        while !bytes.is_empty() {
            let region = self.words / m0;
            let left_in_region = (region + 1) * m0 - self.words;
            let run = bytes
                .len()
                .min(usize::try_from(left_in_region).unwrap_or(usize::MAX) * 8);
            let (now, rest) = bytes.split_at(run);
            self.absorb_run::<L>(now, region);
            bytes = rest;
        }
    }

    /// `bytes`: words of region `region`, starting at word `self.words`.
    fn absorb_run<L: Layout>(&mut self, bytes: &[u8], region: u64) {
        let mask = self.geo.region_mask();
        let words = || bytes.chunks_exact(8).map(stream::le_word);
        // One branch-free pass in the common case; a second only to find a
        // bad word.
        let (occupied, bad) = scan::<L>(bytes, mask, region);
        self.counted += occupied;
        if bad != 0 && self.first_bad.is_none() {
            self.first_bad = words().enumerate().find_map(|(i, w)| {
                let at = self.words + i as u64;
                if w & !L::LANES_MASK != 0 {
                    Some((at, "bits above the last tag lane are set"))
                } else if bucket::count::<L>(w, L::TAG_MASK) != 0 {
                    Some((at, "a lane holds the reserved all-ones tag"))
                } else if self.geo.flaws::<L>(region, w) != 0 {
                    Some((
                        at,
                        "a tag lies outside its region (no key's buckets are there)",
                    ))
                } else {
                    None
                }
            });
        }
        self.words += (bytes.len() / 8) as u64;
    }
}

impl PayloadCheck for WordCheck {
    fn absorb(&mut self, bytes: &[u8]) {
        match self.layout {
            LayoutKind::Tags16x4 => self.absorb_in::<L16x4>(bytes),
            LayoutKind::Tags12x5 => self.absorb_in::<L12x5>(bytes),
            LayoutKind::Tags21x3 => self.absorb_in::<L21x3>(bytes),
        }
    }

    fn counted(&self) -> u64 {
        self.counted
    }

    fn verdict(self, stored_count: u64) -> Result<(), LoadError> {
        if let Some((word, reason)) = self.first_bad {
            return Err(LoadError::CorruptPayload { word, reason });
        }
        if stored_count != self.counted {
            return Err(LoadError::ItemCountMismatch {
                stored: stored_count,
                counted: self.counted,
            });
        }
        Ok(())
    }
}

/// Occupied slots in the little-endian bucket words `bytes`, and a
/// non-zero mask if some word holds the reserved all-ones tag, bits above
/// its last lane, or a tag whose bits under `region_mask` are not `region`
/// (`Geometry::flaws`, for words of one region).
///
/// SWAR without a popcount (x86-64's baseline has none, and a software
/// `count_ones` per word halves the save speed): each word adds 1 to a
/// per-lane counter for every empty lane, and the counters are summed every
/// `BLOCK` words, before a 12-bit lane counter could overflow. Plain adds,
/// ands and shifts, which the compiler vectorises.
pub(crate) fn scan<L: Layout>(bytes: &[u8], region_mask: u64, region: u64) -> (u64, u64) {
    // A table that never grew has one region: no tag can be outside it.
    if region_mask == 0 {
        scan_in::<L, false>(bytes, 0, 0)
    } else {
        scan_in::<L, true>(bytes, region_mask, region)
    }
}

/// [`scan`], with the region check compiled in or out.
fn scan_in<L: Layout, const REGIONS: bool>(
    bytes: &[u8],
    region_mask: u64,
    region: u64,
) -> (u64, u64) {
    const BLOCK: usize = 2048;
    let mut empty = 0u64;
    let mut bad = 0u64;
    for block in bytes.chunks(BLOCK * 8) {
        let mut lanes = 0u64;
        for w in block.chunks_exact(8).map(stream::le_word) {
            lanes += bucket::zero_lanes::<L>(w) >> (L::TAG_BITS - 1);
            bad |= if REGIONS {
                bucket::flaws::<L>(w, region_mask, region)
            } else {
                bucket::invalid_bits::<L>(w)
            };
        }
        for lane in 0..L::LANES {
            empty += (lanes >> (lane * L::TAG_BITS)) & L::TAG_MASK;
        }
    }
    let words = (bytes.len() / 8) as u64;
    (words * u64::from(L::LANES) - empty, bad)
}

/// Writes `words` into `out` as little-endian bytes; returns the occupied
/// slots among them.
pub(crate) fn encode<L: Layout>(words: &[AtomicU64], out: &mut [u8]) -> u64 {
    for (dst, word) in out.chunks_exact_mut(8).zip(words) {
        // Relaxed: the snapshot's stripe holds (Acquire) order every move
        // and remove before this load; a plain insert racing it may or may
        // not be seen, as documented. Each word is loaded once, and the
        // slots are counted from the bytes written, so the two agree.
        dst.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
    }
    scan::<L>(out, 0, 0).0
}

fn from_parts_error(e: FromPartsError, shape: &Shape) -> LoadError {
    match e {
        FromPartsError::Allocation { .. } => LoadError::AllocationFailed {
            bytes: shape.payload_len,
        },
        // The payload check refuses these first, with its reason.
        FromPartsError::BadWord { bucket } => LoadError::CorruptPayload {
            word: bucket as u64,
            reason: "the layout never writes this word (reserved tag or bits outside the lanes)",
        },
        FromPartsError::Fill(e) => LoadError::Io(e),
    }
}

/// The payload check of a cuckoo record: a table's words, or a level of
/// regions' block and words.
pub(crate) enum Check {
    Table(WordCheck),
    Regions(Box<RegionCheck>),
}

/// The check of a record of `shape`.
pub(crate) fn check(shape: &Shape) -> Check {
    match shape.regions {
        None => Check::Table(WordCheck::new(shape)),
        Some(r) => Check::Regions(Box::new(RegionCheck::new(shape, r))),
    }
}

impl PayloadCheck for Check {
    fn absorb(&mut self, bytes: &[u8]) {
        match self {
            Check::Table(c) => c.absorb(bytes),
            Check::Regions(c) => c.absorb(bytes),
        }
    }

    fn counted(&self) -> u64 {
        match self {
            Check::Table(c) => c.counted(),
            Check::Regions(c) => c.counted(),
        }
    }

    fn verdict(self, stored_count: u64) -> Result<(), LoadError> {
        match self {
            Check::Table(c) => c.verdict(stored_count),
            Check::Regions(c) => c.verdict(stored_count),
        }
    }
}

/// One level of a cuckoo filter as a record builds it.
// Moved once, into its filter: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Loaded {
    /// A table's record: the first level, or a doubling level above it
    /// (format versions 1 to 3).
    Table(CuckooFilter),
    /// A level of regions' record (format version 4), with its own growth
    /// settings (its false-positive rate and memory limit).
    Regions {
        level: Box<Regions>,
        policy: GrowthPolicy,
    },
}

impl Saved for CuckooFilter {
    type Shape = Shape;
    type Check = Check;
    type Level = Loaded;

    fn shape(h: &Header, below: Option<&Shape>) -> Result<Shape, LoadError> {
        shape(h, below)
    }

    fn level_above(shape: &Shape) -> bool {
        shape.level_above
    }

    fn first(level: Loaded) -> Result<CuckooFilter, LoadError> {
        match level {
            Loaded::Table(filter) => Ok(filter),
            // `check_level` refuses a first record of regions.
            Loaded::Regions { .. } => Err(LoadError::InvalidLevel {
                level: 0,
                reason: REGIONS_NEVER_FIRST,
            }),
        }
    }

    fn attach(&self, above: Loaded) -> Result<(), LoadError> {
        self.attach_loaded(match above {
            Loaded::Table(level) => UpperLevel::Doubling(level),
            Loaded::Regions { level, policy } => UpperLevel::Regions(RegionLevel::loaded(
                *level,
                policy.max_false_positive_rate,
                policy.max_memory,
            )),
        });
        Ok(())
    }

    fn payload_len(shape: &Shape) -> u64 {
        shape.payload_len
    }

    fn check(shape: &Shape) -> Check {
        check(shape)
    }

    fn build(
        shape: &Shape,
        h: &Header,
        count: u64,
        fill: impl FnMut(&mut [u8]) -> io::Result<()>,
    ) -> Result<Loaded, LoadError> {
        if let Some(regions) = shape.regions {
            let level = regions::build(shape, regions, count, fill)?;
            return Ok(Loaded::Regions {
                level: Box::new(level),
                policy: shape.policy,
            });
        }
        CuckooFilter::from_parts(
            shape.layout,
            KeyHasher::with_algorithm(h.seed, shape.algorithm),
            shape.policy,
            shape.geo,
            count,
            fill,
        )
        .map(Loaded::Table)
        .map_err(|e| from_parts_error(e, shape))
    }
}

impl CuckooFilter {
    /// Writes the filter in koel's file format (specified in
    /// `docs/format.md`) to `writer`.
    ///
    /// Streams the table in 1 MiB chunks, so it runs at the speed of the
    /// writer and needs no second copy of the table in memory. Pass a
    /// buffered or fast writer: every chunk is one `write_all`.
    ///
    /// # Concurrency
    ///
    /// Other threads may keep using the filter. The file holds every item
    /// whose insert happened before this call and that no `remove` took
    /// before it; an item inserted during the call may or may not be in it.
    /// While the table streams out, no tag may move or be removed: inserts
    /// that need a displacement, `insert_unique` and `remove` wait until it
    /// is written (they take the version stripes the save holds frozen);
    /// every lookup and inserts into free slots go on, also when an insert
    /// finds the table full meanwhile and starts a doubling (which then
    /// waits for the save to end before it moves any tag). Writing to a
    /// slow device therefore stalls those writers for as long as it takes;
    /// to bound the stall, write to memory or the page cache first.
    ///
    /// A growing filter is saved after its current migration finishes, as
    /// one table of its current generation. The file holds everything the
    /// filter needs to behave as before: layout, seed, hash algorithm,
    /// generation and the growth settings ([`Growth`](crate::Growth),
    /// `max_memory`, `max_false_positive_rate`). (A format version 1 file
    /// had no growth settings: loaded, it gets the builder's defaults.)
    ///
    /// A filter that grew past its first table's tag bits (more than one
    /// level, [`Stats::levels`](crate::Stats::levels)) is saved level by
    /// level, each as one record of the format and under its own snapshot
    /// (keys never move between levels, so the guarantee above holds for
    /// the whole filter); a level published during the call may or may not
    /// be in the file, and holds only items inserted during it. A level of
    /// regions (what every level past the first grows as) is a format
    /// version 4 record, written after its running step ends (the saving
    /// thread helps it) while no step, move or remove runs in it; the
    /// first level's record keeps its version.
    ///
    /// # Errors
    ///
    /// Any error of `writer`; what was written until then is not a valid
    /// file (its checksum and trailer are missing).
    ///
    /// ```
    /// let f = koel::CuckooFilter::builder().capacity(1000).seed(1).build()?;
    /// f.insert("a")?;
    /// let mut bytes = Vec::new();
    /// f.write_to(&mut bytes)?;
    /// let g = koel::CuckooFilter::read_from(&bytes[..])?;
    /// assert!(g.contains("a"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_to<W: Write>(&self, mut writer: W) -> io::Result<()> {
        // Level by level, each under its own snapshot: keys never move
        // between levels, so an item inserted before this call is in its
        // level's snapshot. A level published meanwhile holds only items
        // inserted during the call; it is written only if the level below
        // had it when that level's record began.
        let mut level = Some(Level::Table(self));
        while let Some(here) = level {
            let above = here.above();
            match here {
                Level::Table(f) => f.write_level(&mut writer, above.is_some())?,
                Level::Regions(r) => r.regions().with_snapshot(|view| {
                    regions::write_record(
                        &mut writer,
                        view,
                        self.seed(),
                        self.hash_algorithm(),
                        &GrowthPolicy {
                            growth: Growth::Double,
                            max_memory: r.max_memory(),
                            max_false_positive_rate: r.own_rate(),
                        },
                        above.is_some(),
                    )
                })?,
            }
            level = above;
        }
        Ok(())
    }

    /// Writes this level's record; `above`: the level above follows it.
    pub(crate) fn write_level<W: Write>(&self, writer: W, above: bool) -> io::Result<()> {
        self.with_snapshot(|view| {
            let header = Header {
                version: format::written_version(view.hash_algorithm.id()),
                kind: format::KIND_CUCKOO,
                hash_algorithm: view.hash_algorithm.id(),
                flags: if above { format::FLAG_LEVEL_ABOVE } else { 0 },
                tag_bits: view.layout.tag_bits() as u8,
                tags_per_bucket: view.layout.lanes() as u8,
                words_per_bucket: 1,
                generation: view.generation as u8,
                m0: view.m0,
                buckets: view.words.len() as u64,
                seed: view.seed,
                probe: saved::probe(view.seed, view.hash_algorithm),
                payload_len: view.words.len() as u64 * 8,
                param32: growth_code(view.policy.growth),
                param64: view.policy.max_false_positive_rate.to_bits(),
                max_memory: view.policy.max_memory.map_or(0, |m| m as u64),
                reserved: 0,
            };
            saved::write_file(writer, header, view.words, |chunk, out| match view.layout {
                LayoutKind::Tags16x4 => encode::<L16x4>(chunk, out),
                LayoutKind::Tags12x5 => encode::<L12x5>(chunk, out),
                LayoutKind::Tags21x3 => encode::<L21x3>(chunk, out),
            })
        })
    }

    /// Reads a filter written by [`write_to`](Self::write_to) or
    /// [`save`](Self::save) from `reader`, checking every field, the
    /// payload and the checksum before the filter is returned.
    ///
    /// Reads exactly the file's bytes (every level's record, up to the one
    /// that announces no level above), nothing after them. Never allocates
    /// more than the input justifies: the payload is buffered as it
    /// arrives (growing with it), then copied into the table, so memory
    /// peaks at twice the table. [`load`](Self::load) reads a path with
    /// one copy.
    ///
    /// # Errors
    ///
    /// A [`LoadError`] saying what is wrong: a damaged, truncated or
    /// foreign file, another format version or filter kind, a build that
    /// hashes differently, a read error.
    pub fn read_from<R: Read>(reader: R) -> Result<CuckooFilter, LoadError> {
        saved::read_from(reader)
    }

    /// Saves the filter to `path` atomically: it writes a temporary file
    /// in the same directory, syncs it to disk, renames it over `path` and
    /// syncs the directory. A crash or error at any point leaves either the
    /// old file or the new one at `path`, never a mix; on error the
    /// temporary file is removed.
    ///
    /// Concurrency as in [`write_to`](Self::write_to); the stripes are
    /// released before the final sync.
    ///
    /// The new file keeps the old file's permission bits (and its owner
    /// and group where the process may set them); a new file gets the
    /// default permissions. A symbolic link at `path` is followed: the file
    /// it points to is replaced (or created), the link stays. Anything at `path` that is
    /// not a regular file (a directory, a device such as `/dev/full`, a
    /// FIFO, a socket) is refused, never replaced. On Linux the temporary
    /// file has no name while it is written (`O_TMPFILE`), so a process
    /// killed mid-save leaves nothing partial behind (a kill in the
    /// microseconds between linking and renaming the finished file leaves
    /// it, and the next save to `path` removes it); elsewhere it is a short
    /// hidden name (`.koel-<16 hex>.tmp`). Any legal file name, UTF-8 or
    /// not, can be saved to.
    ///
    /// # Errors
    ///
    /// Any I/O error (the old file at `path` is then untouched);
    /// `InvalidInput` for a path that names no file, something other than
    /// a regular file, or a loop of symbolic links; `PermissionDenied` for
    /// an existing file the caller may not write (it is not replaced).
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("seen.koel");
    /// let f = koel::CuckooFilter::with_capacity(10_000);
    /// f.insert("order-17")?;
    /// f.save(&path)?;
    /// let g = koel::CuckooFilter::load(&path)?;
    /// assert!(g.contains("order-17"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn save(&self, path: impl AsRef<Path>) -> io::Result<()> {
        file::replace_atomically(path.as_ref(), |f| self.write_to(f))
    }

    /// Loads a filter saved with [`save`](Self::save) (or any file written
    /// by [`write_to`](Self::write_to)).
    ///
    /// Checks the header (every level's, for a filter with levels), then
    /// that the file is exactly as long as they announce, before
    /// allocating a table; then reads the
    /// payload straight into the table and verifies it and the checksum.
    /// A file that occupies less storage than its length (sparse, or on a
    /// compressing file system) is verified first, in one 1 MiB buffer,
    /// so a small file claiming a huge table is refused before the table
    /// is allocated (such a file is read twice).
    ///
    /// # Errors
    ///
    /// As [`read_from`](Self::read_from), plus
    /// [`LoadError::FileLengthMismatch`] for a file shorter or longer than
    /// its header says.
    pub fn load(path: impl AsRef<Path>) -> Result<CuckooFilter, LoadError> {
        saved::load(path.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::geometry::Addressing;

    fn words(ws: &[u64]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// A check of one region large enough for any test's words.
    fn flat(layout: LayoutKind) -> WordCheck {
        WordCheck::new(&Shape {
            layout,
            geo: Geometry::new(crate::raw::geometry::MAX_M0, 0, Addressing::V1),
            payload_len: 0,
            policy: GrowthPolicy::default(),
            algorithm: HashAlgorithm::Xxh3,
            seed: 0,
            level: 0,
            level_above: false,
            regions: None,
        })
    }

    #[test]
    fn word_check_counts_slots_and_finds_the_first_bad_word() {
        let mut c = flat(LayoutKind::Tags16x4);
        c.absorb(&words(&[0, 0x0001_0000_0000_0002, 0xFFFE_FFFE_FFFE_FFFE]));
        assert_eq!(c.counted, 6);
        assert!(c.first_bad.is_none());
        c.absorb(&words(&[0x0000_FFFF_0000_0000, 0xFFFF]));
        assert_eq!(c.counted, 8);
        assert_eq!(
            c.first_bad,
            Some((3, "a lane holds the reserved all-ones tag"))
        );
        assert!(matches!(
            c.verdict(8),
            Err(LoadError::CorruptPayload { word: 3, .. })
        ));

        let mut c = flat(LayoutKind::Tags12x5);
        c.absorb(&words(&[0x0FFE_0000_0000_0001, 1 << 60]));
        assert_eq!(c.counted, 2);
        assert_eq!(
            c.first_bad,
            Some((1, "bits above the last tag lane are set"))
        );
        let mut c = flat(LayoutKind::Tags12x5);
        c.absorb(&words(&[0xFFF << 24]));
        assert_eq!(c.first_bad.map(|b| b.0), Some(0));
        let mut c = flat(LayoutKind::Tags12x5);
        c.absorb(&words(&[0x0FFE_FFEF_FEFF_EFFE]));
        assert_eq!((c.counted, c.first_bad), (5, None));
        assert!(matches!(
            c.verdict(4),
            Err(LoadError::ItemCountMismatch {
                stored: 4,
                counted: 5
            })
        ));
    }

    fn scan_matches_per_word_counts<L: Layout>() {
        // Random words with many empty and full lanes, over several blocks.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let ws: Vec<u64> = (0..5000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let keep = if i % 3 == 0 { x.rotate_left(17) } else { !0 };
                x & keep & (L::LOW * L::TAG_MASK) & !(L::LOW << (i % 4))
            })
            .collect();
        let expected: u64 = ws
            .iter()
            .map(|&w| u64::from(bucket::occupied::<L>(w)))
            .sum();
        let reserved = ws.iter().any(|&w| bucket::count::<L>(w, L::TAG_MASK) > 0);
        let (occupied, bad) = scan::<L>(&words(&ws), 0, 0);
        assert_eq!((occupied, bad != 0), (expected, reserved));
        let full = L::LOW * (L::TAG_MASK - 1);
        let run = vec![full; 4500];
        assert_eq!(scan::<L>(&words(&run), 0, 0).0, 4500 * u64::from(L::LANES));
        assert_eq!(scan::<L>(&words(&vec![0; 4500]), 0, 0), (0, 0));
        assert_ne!(
            scan::<L>(&words(&[0, L::TAG_MASK << L::TAG_BITS]), 0, 0).1,
            0
        );
    }

    /// The scan flags exactly the words that break the layout's rules or
    /// hold a tag of another region, written out lane by lane.
    fn scan_matches_the_region_definition<L: Layout>(generation: u32) {
        let geo = Geometry::new(64, generation, Addressing::V3);
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut refused = 0;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly plausible words: tags of one region, some lanes empty,
            // now and then one tag of another region.
            let region = i % (1 << generation);
            let mut w = 0;
            for lane in 0..L::LANES {
                let r = (x >> (lane * 7)) & 0x7F;
                let tag_region = if r < 3 {
                    (region + 1) % (1 << generation)
                } else {
                    region
                };
                let high = ((x >> (lane * 11 + 3)) % (L::MAX_TAG >> generation)) << generation;
                let tag = if r % 4 == 1 {
                    0
                } else {
                    (high | tag_region).clamp(0, L::MAX_TAG)
                };
                w |= tag << (lane * L::TAG_BITS);
            }
            let (_, bad) = scan::<L>(&words(&[w]), geo.region_mask(), region);
            // The definition lane by lane: no reserved tag, nothing above
            // the lanes, every tag of this region.
            let valid = w & !L::LANES_MASK == 0
                && (0..L::LANES).all(|lane| {
                    let tag = bucket::lane::<L>(w, lane);
                    tag == 0 || (tag != L::TAG_MASK && tag & geo.region_mask() == region)
                });
            assert_eq!(bad == 0, valid, "word {w:#x} in region {region}");
            refused += u32::from(!valid);
        }
        assert!((500..5000).contains(&refused), "{refused} words refused");
    }

    #[test]
    fn swar_scan_flags_exactly_the_words_the_rules_refuse() {
        for g in [1, 2, 5] {
            scan_matches_the_region_definition::<L16x4>(g);
        }
        scan_matches_the_region_definition::<L12x5>(2);
    }

    #[test]
    fn swar_scan_counts_like_the_per_word_count() {
        scan_matches_per_word_counts::<L16x4>();
        scan_matches_per_word_counts::<L12x5>();
    }

    #[test]
    fn a_grown_geometry_round_trips() {
        // A table of generation 2 (four regions), built from parts the way
        // growth will leave one: every field survives the file.
        let l = LayoutKind::Tags16x4;
        let src = CuckooFilter::from_parts(
            l,
            KeyHasher::with_algorithm(5, HashAlgorithm::Fold),
            GrowthPolicy::default(),
            Geometry::new(128, 2, Addressing::V3),
            0,
            |_| Ok(()),
        )
        .unwrap();
        let keys: Vec<u64> = (0..1500).collect();
        for k in &keys {
            src.insert(k).unwrap();
        }
        let mut bytes = Vec::new();
        src.write_to(&mut bytes).unwrap();
        assert_eq!(bytes[19], 2, "generation byte");
        let back = CuckooFilter::read_from(&bytes[..]).unwrap();
        assert_eq!(back.stats().generation, 2);
        assert_eq!(back.capacity(), src.capacity());
        assert_eq!(back.len(), 1500);
        for k in 0..20_000u64 {
            assert_eq!(back.contains(&k), src.contains(&k), "key {k}");
        }
    }
}
