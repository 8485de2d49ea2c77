//! A level of regions' record (format version 4, `docs/format.md`,
//! "Levels of regions"): its header fields, the level block (counts, the
//! slot map, the slot order) and the regions' words, written from a
//! snapshot and read back into a [`Regions`] whose every part was checked.

use super::{self as cuckoo, Shape};
use crate::cuckoo::{Growth, GrowthPolicy};
use crate::hash::HashAlgorithm;
use crate::persist::error::LoadError;
use crate::persist::format::{self, Header};
use crate::persist::saved::{self, PayloadCheck};
use crate::persist::stream;
use crate::raw::bucket::{L21x3, Layout};
use crate::raw::geometry::Geometry;
use crate::raw::regions::{layout_flaw, PartsError, Regions, RegionsParts, RegionsView};
use crate::raw::slot_map::{valid_saved_slots, MAX_REGIONS, MAX_SLOTS};
use std::io::{self, Write};

/// What a level of regions' header and payload length say of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegionsShape {
    /// Regions of `m0` buckets.
    pub(crate) regions: u64,
    /// Slots of its map.
    pub(crate) slots: usize,
}

/// Words of the level block of a map of `slots` slots: regions, region
/// limit, steps and map slots, then the map (two entries a word, the lower
/// slot in the low half), then the slot order (four slots a word, the
/// first in the low 16 bits). Little-endian, these are the map as `u32`s
/// and the order as `u16`s.
fn block_words(slots: usize) -> usize {
    4 + slots / 2 + slots / 4
}

/// Bytes of the level block of a map of `slots` slots.
pub(crate) fn block_len(slots: usize) -> u64 {
    8 * block_words(slots) as u64
}

/// The map slots of a record of `buckets` buckets whose payload is
/// `payload_len` bytes: the level block is what the words leave, and it
/// must be that of a map a level may have (`2^10` to `2^14` slots).
pub(crate) fn slots_in(payload_len: u64, buckets: u64) -> Result<usize, LoadError> {
    let block = payload_len.saturating_sub(8 * buckets);
    let slots = (block / 8).saturating_sub(4) * 4 / 3;
    match usize::try_from(slots) {
        Ok(slots) if valid_saved_slots(slots) && block_len(slots) == block => Ok(slots),
        _ => Err(LoadError::PayloadLengthMismatch {
            stored: payload_len,
            // What a level with the largest map would have.
            expected: block_len(MAX_SLOTS) + 8 * buckets,
        }),
    }
}

/// The regions of a record of `buckets` buckets of `m0` each: a whole
/// number in `1..=MAX_REGIONS`.
pub(crate) fn regions_in(buckets: u64, m0: u64) -> Result<u64, LoadError> {
    let regions = buckets / m0;
    if buckets % m0 != 0 || !(1..=MAX_REGIONS as u64).contains(&regions) {
        return Err(LoadError::InvalidRegionLevel {
            field: "bucket count",
            value: buckets,
            reason: "it must be 1 to 16384 whole regions of m0 buckets",
        });
    }
    Ok(regions)
}

/// The level block of `parts`, as words.
fn block(parts: &RegionsParts) -> Vec<u64> {
    let slots = parts.entries.len();
    let mut words = vec![
        parts.regions as u64,
        parts.max_regions as u64,
        parts.steps,
        slots as u64,
    ];
    words.extend(
        parts
            .entries
            .chunks_exact(2)
            .map(|e| u64::from(e[0]) | u64::from(e[1]) << 32),
    );
    words.extend(parts.order.chunks_exact(4).map(|s| {
        s.iter()
            .rev()
            .fold(0u64, |w, &slot| w << 16 | u64::from(slot))
    }));
    debug_assert_eq!(words.len(), block_words(slots));
    words
}

/// The parts a level block of words `word(0..block_words(slots))` holds,
/// for a record of `m0` buckets per region whose header and length say
/// `shape`, checked (`RegionsParts::check`).
fn parts_of(
    word: impl Fn(usize) -> u64,
    m0: u64,
    shape: RegionsShape,
) -> Result<(RegionsParts, Geometry), LoadError> {
    let RegionsShape { regions, slots } = shape;
    let invalid = |field, value, reason| {
        Err(LoadError::InvalidRegionLevel {
            field,
            value,
            reason,
        })
    };
    if word(0) != regions {
        return invalid(
            "regions",
            word(0),
            "it must be the header's bucket count divided by m0",
        );
    }
    if word(3) != slots as u64 {
        return invalid(
            "map slots",
            word(3),
            "it must be the map the payload's length leaves room for",
        );
    }
    let map = 4;
    let order = map + slots / 2;
    let parts = RegionsParts {
        m0,
        regions: regions as usize,
        // Saturates: `check` refuses anything above MAX_REGIONS.
        max_regions: usize::try_from(word(1)).unwrap_or(usize::MAX),
        steps: word(2),
        entries: (0..slots)
            .map(|s| (word(map + s / 2) >> (32 * (s % 2))) as u32)
            .collect(),
        order: (0..slots)
            .map(|s| (word(order + s / 4) >> (16 * (s % 4))) as u16)
            .collect(),
    };
    let geo = parts.check().map_err(parts_error)?;
    Ok((parts, geo))
}

/// What a level of regions' parts error says in a file's terms.
fn parts_error(e: PartsError) -> LoadError {
    match e {
        PartsError::M0(m0) => LoadError::InvalidM0 { m0 },
        PartsError::Regions { max_regions, .. } => LoadError::InvalidRegionLevel {
            field: "region limit",
            value: max_regions as u64,
            reason: "it must be at least the regions and at most the map's slots",
        },
        // `parts_of` reads as many entries and slots as `slots_in` allows.
        PartsError::Slots { slots, .. } => LoadError::InvalidRegionLevel {
            field: "map slots",
            value: slots as u64,
            reason: "it must be a power of two from 2^10 to 2^14",
        },
        PartsError::Steps { steps, .. } => LoadError::InvalidRegionLevel {
            field: "steps",
            value: steps,
            reason: "each step adds a region, so there are fewer steps than regions",
        },
        PartsError::Entry {
            slot,
            entry,
            reason,
        } => LoadError::InvalidSlotEntry {
            slot,
            entry,
            reason,
        },
        PartsError::Order {
            position,
            slot,
            reason,
        } => LoadError::InvalidSlotOrder {
            position,
            slot,
            reason,
        },
        PartsError::Word { bucket, reason } => LoadError::CorruptPayload {
            word: bucket,
            reason,
        },
        PartsError::Count { stored, counted } => LoadError::ItemCountMismatch { stored, counted },
        PartsError::Allocation { bytes } => LoadError::AllocationFailed {
            bytes: bytes as u64,
        },
        PartsError::Fill(e) => LoadError::Io(e),
    }
}

/// What a level of regions' record holds beyond its header, for
/// [`inspect`](crate::inspect).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegionsInfo {
    /// Regions of `m0` buckets the level has.
    pub regions: u64,
    /// Most regions it may grow to (its false-positive budget's limit).
    pub max_regions: u64,
    /// Steps it took to grow from one region.
    pub steps: u64,
    /// Slots whose keys are in two regions (a step's hop found no room):
    /// their lookups read both.
    pub split_slots: u64,
}

/// Checks a level of regions' payload as it streams past: the level
/// block, then the layout's rules for every word, counting occupied lanes.
pub(crate) struct RegionCheck {
    m0: u64,
    shape: RegionsShape,
    /// The level block's bytes so far (little-endian).
    block: Vec<u8>,
    /// The block's parts, once it is whole and valid.
    parts: Option<(RegionsParts, Geometry)>,
    /// Region words absorbed.
    words: u64,
    counted: u64,
    /// The first thing found wrong.
    first_bad: Option<LoadError>,
}

impl RegionCheck {
    /// The check of a record of `shape` (a level of regions').
    pub(crate) fn new(shape: &Shape, regions: RegionsShape) -> RegionCheck {
        RegionCheck {
            m0: shape.geo.m0(),
            shape: regions,
            block: Vec::with_capacity(block_len(regions.slots) as usize),
            parts: None,
            words: 0,
            counted: 0,
            first_bad: None,
        }
    }

    /// What the level block says, once it was read and is valid.
    pub(crate) fn info(&self) -> Option<RegionsInfo> {
        self.parts.as_ref().map(|(p, _)| RegionsInfo {
            regions: p.regions as u64,
            max_regions: p.max_regions as u64,
            steps: p.steps,
            split_slots: p.entries.iter().filter(|&&e| e & 0xFFFF != e >> 16).count() as u64,
        })
    }
}

impl PayloadCheck for RegionCheck {
    fn absorb(&mut self, mut bytes: &[u8]) {
        let len = block_len(self.shape.slots) as usize;
        if self.block.len() < len {
            let take = bytes.len().min(len - self.block.len());
            self.block.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.block.len() == len {
                let block = &self.block;
                let word = |i: usize| stream::le_word(&block[8 * i..8 * i + 8]);
                match parts_of(word, self.m0, self.shape) {
                    Ok(parts) => self.parts = Some(parts),
                    Err(e) => self.first_bad = Some(e),
                }
            }
        }
        // The layout's rules here, in one pass, as for a table; whether
        // each tag's region may hold it is `Regions::from_parts`'s check
        // (once per load: it needs the map and the tag's pair).
        let (occupied, bad) = cuckoo::scan::<L21x3>(bytes, 0, 0);
        self.counted += occupied;
        if bad != 0 && self.first_bad.is_none() {
            let at = self.words;
            self.first_bad = bytes
                .chunks_exact(8)
                .map(stream::le_word)
                .zip(at..)
                .find_map(|(w, word)| {
                    let reason = layout_flaw(w)?;
                    Some(LoadError::CorruptPayload { word, reason })
                });
        }
        self.words += (bytes.len() / 8) as u64;
    }

    fn counted(&self) -> u64 {
        self.counted
    }

    fn verdict(self, stored_count: u64) -> Result<(), LoadError> {
        if let Some(e) = self.first_bad {
            return Err(e);
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

/// The level of regions of a record of `shape` (whose header said
/// `regions`), built from its payload, which `fill` writes as
/// native-endian words piece by piece: the level block, then one region
/// at a time. `count` is the trailer's item count, which the occupied
/// lanes must equal.
pub(crate) fn build(
    shape: &Shape,
    regions: RegionsShape,
    count: u64,
    mut fill: impl FnMut(&mut [u8]) -> io::Result<()>,
) -> Result<Regions, LoadError> {
    let mut block = vec![0u8; block_len(regions.slots) as usize];
    fill(&mut block)?;
    let word = |i: usize| u64::from_ne_bytes(block[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    let (parts, _) = parts_of(word, shape.geo.m0(), regions)?;
    Regions::from_parts(&parts, Some(count), fill).map_err(parts_error)
}

/// Writes the record of a level of regions from `view`, hashed with
/// `algorithm` under `seed`, with its own growth settings `policy` (its
/// false-positive rate and memory limit, as a doubling level's record
/// carries them); `above`: the level above follows it.
pub(crate) fn write_record<W: Write>(
    writer: W,
    view: &RegionsView<'_>,
    seed: u64,
    algorithm: HashAlgorithm,
    policy: &GrowthPolicy,
    above: bool,
) -> io::Result<()> {
    let parts = &view.parts;
    let buckets = parts.regions as u64 * parts.m0;
    let header = Header {
        version: format::REGIONS_VERSION,
        kind: format::KIND_CUCKOO,
        hash_algorithm: algorithm.id(),
        flags: if above { format::FLAG_LEVEL_ABOVE } else { 0 },
        tag_bits: L21x3::TAG_BITS as u8,
        tags_per_bucket: L21x3::LANES as u8,
        words_per_bucket: 1,
        generation: 0,
        m0: parts.m0,
        buckets,
        seed,
        probe: saved::probe(seed, algorithm),
        payload_len: block_len(parts.entries.len()) + 8 * buckets,
        param32: cuckoo::growth_code(Growth::Double),
        param64: policy.max_false_positive_rate.to_bits(),
        max_memory: policy.max_memory.map_or(0, |m| m as u64),
        reserved: 0,
    };
    let prefix: Vec<u8> = block(parts).iter().flat_map(|w| w.to_le_bytes()).collect();
    let runs: Vec<_> = (0..parts.regions).map(|r| view.words(r)).collect();
    saved::write_parts(writer, header, &prefix, &runs, cuckoo::encode::<L21x3>)
}

#[cfg(test)]
mod tests;
