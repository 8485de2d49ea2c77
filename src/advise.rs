//! Choosing a filter: turn what a set needs (size, false-positive rate,
//! deletes, growth) into a concrete configuration with its memory and
//! expected false-positive rate, following the design trade-offs:
//!
//! * no false positive allowed: no filter (ask the real store);
//! * insert-only, size known: [`BloomFilter`] (one cache line per lookup);
//! * deletes or exact concurrent dedup: [`CuckooFilter`] with the
//!   smallest layout that meets the rate;
//! * growth by an unknown amount: a cuckoo filter that grows online, with
//!   the false-positive cost of each doubling.

use crate::bloom::{self, BloomFilter};
use crate::cuckoo::{levels, table_memory, LayoutKind};
use crate::error::{AdviseError, BuildError};
use crate::filter::{Filter, FilterKind};
use crate::{CuckooFilter, Growth};

/// How a set's size changes over its life.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum SetSize {
    /// `items` is the most the set will ever hold.
    Fixed,
    /// The set grows to at most `items * factor` items, a known bound: the
    /// filter is sized for that up front.
    Bounded {
        /// Final size over `items`, at least 1.
        factor: f64,
    },
    /// The set grows by an amount not known in advance; `expected_factor`
    /// is a guess of its final size over `items`, used to report the
    /// memory and false-positive rate after growing that much.
    Unknown {
        /// Expected final size over `items`, at least 1.
        expected_factor: f64,
    },
}

/// What a set needs from its filter; the input of [`advise`].
///
/// ```
/// use koel::{Requirements, SetSize};
///
/// let r = Requirements::new(10_000_000, 1e-3)
///     .deletes(true)
///     .growth(SetSize::Bounded { factor: 2.0 });
/// assert_eq!(r.items, 10_000_000);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Requirements {
    /// Items the set holds (its initial size when it grows). Default 2^20.
    pub items: usize,
    /// Highest acceptable false-positive rate, `0 <= p < 1`; 0 means no
    /// false positive is acceptable. Default 1e-3.
    pub false_positive_rate: f64,
    /// Items are also removed. Default `false`.
    pub deletes: bool,
    /// Concurrent inserts must tell exactly which one added a key first
    /// (dedup of a stream on many threads). Default `false`.
    pub exact_dedup: bool,
    /// How the size changes. Default [`SetSize::Fixed`].
    pub growth: SetSize,
}

impl Default for Requirements {
    fn default() -> Self {
        Requirements {
            items: crate::DEFAULT_CAPACITY,
            false_positive_rate: crate::DEFAULT_FALSE_POSITIVE_RATE,
            deletes: false,
            exact_dedup: false,
            growth: SetSize::Fixed,
        }
    }
}

impl Requirements {
    /// `items` at rate `false_positive_rate`, insert-only, fixed size.
    pub fn new(items: usize, false_positive_rate: f64) -> Self {
        Requirements {
            items,
            false_positive_rate,
            ..Requirements::default()
        }
    }

    /// Whether items are also removed.
    #[must_use]
    pub fn deletes(mut self, deletes: bool) -> Self {
        self.deletes = deletes;
        self
    }

    /// Whether concurrent inserts must deduplicate exactly.
    #[must_use]
    pub fn exact_dedup(mut self, exact_dedup: bool) -> Self {
        self.exact_dedup = exact_dedup;
        self
    }

    /// How the set's size changes.
    #[must_use]
    pub fn growth(mut self, growth: SetSize) -> Self {
        self.growth = growth;
        self
    }
}

/// How a growing cuckoo filter is expected to develop.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct GrowthPlan {
    /// Capacity to build with, in items: at least `items`, and enough that
    /// the expected items fill the table after `doublings` doublings to at
    /// most 0.88 (0.84 with 5 or fewer tag bits left), a load a doubled
    /// table reaches before its first failed insert. More when the
    /// false-positive budget allows fewer doublings than the growth needs.
    pub initial_capacity: usize,
    /// The expected final size over `items`.
    pub expected_factor: f64,
    /// Table doublings to reach the expected size from `initial_capacity`.
    pub doublings: u32,
    /// Bytes of the table before growing.
    pub initial_memory_bytes: usize,
    /// The false-positive rate at full load before growing.
    pub initial_false_positive_rate: f64,
    /// The false-positive rate holding `items * expected_factor` items
    /// after `doublings` doublings: each doubling spends one tag bit, so
    /// about the initial rate times `2^doublings`.
    pub false_positive_rate_after: f64,
    /// The growth cap to configure (`max_false_positive_rate`, the
    /// requested rate): the first table doubles up to it, and a filter
    /// that outgrows the plan adds levels that keep all of them within it.
    pub max_false_positive_rate: f64,
}

/// A concrete filter configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Configuration {
    /// No filter: ask the exact store (or keep an exact set).
    ExactStore,
    /// `BloomFilter::builder().capacity(capacity).false_positive_rate(false_positive_rate)`.
    Bloom {
        /// Items to size for.
        capacity: usize,
        /// Target rate at `capacity`.
        false_positive_rate: f64,
        /// Bits per key the builder will choose.
        hashes: u32,
        /// 64-byte blocks the builder will allocate.
        blocks: u64,
    },
    /// `CuckooFilter::builder().capacity(capacity).fingerprint_bits(fingerprint_bits)`,
    /// with online growth if `growth` is set.
    Cuckoo {
        /// Items to size for (the initial capacity when it grows).
        capacity: usize,
        /// 16 (4 tags per bucket) or 12 (5 tags per bucket).
        fingerprint_bits: u32,
        /// How it grows, if it must.
        growth: Option<GrowthPlan>,
    },
}

/// What [`advise`] recommends.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Recommendation {
    /// The filter kind, or `None` for no filter (use the exact store).
    pub kind: Option<FilterKind>,
    /// How to build it.
    pub configuration: Configuration,
    /// Heap bytes of the filter holding the expected items (after the
    /// expected growth, when it grows).
    pub memory_bytes: usize,
    /// Its false-positive rate holding them (after the expected growth,
    /// when it grows).
    pub expected_fpr: f64,
    /// Whether the configuration meets every requirement. When `false`,
    /// `reason` says which one it misses and what to do instead.
    pub meets_requirements: bool,
    /// Why this choice, in one paragraph.
    pub reason: String,
    /// The rate asked for.
    requested_fpr: f64,
}

impl Recommendation {
    /// Builds the recommended filter, or `Ok(None)` for the exact store.
    ///
    /// A cuckoo filter gets online growth ([`Growth::Double`]) capped at
    /// the requested false-positive rate: a growing plan starts at its
    /// initial capacity, a fixed one holds its items without growing and
    /// only grows (within the rate) if more arrive.
    ///
    /// ```
    /// let rec = koel::advise(koel::Requirements::new(10_000, 0.01))?;
    /// let filter = rec.build()?.expect("a filter, not the exact store");
    /// assert_eq!(filter.kind(), koel::FilterKind::Bloom);
    /// assert_eq!(filter.memory_usage(), rec.memory_bytes);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`BuildError`] from the filter's builder (e.g. the allocator
    /// refused the table).
    pub fn build(&self) -> Result<Option<Box<dyn Filter>>, BuildError> {
        Ok(match self.configuration {
            Configuration::ExactStore => None,
            Configuration::Bloom {
                capacity,
                false_positive_rate,
                ..
            } => Some(Box::new(
                BloomFilter::builder()
                    .capacity(capacity)
                    .false_positive_rate(false_positive_rate)
                    .build()?,
            )),
            Configuration::Cuckoo {
                capacity,
                fingerprint_bits,
                growth,
            } => {
                let builder = CuckooFilter::builder()
                    .capacity(capacity)
                    .fingerprint_bits(fingerprint_bits);
                let builder = match growth {
                    Some(plan) => builder
                        .growth(Growth::Double)
                        .max_false_positive_rate(plan.max_false_positive_rate),
                    // Sized for the set; growth stays on as a safety net,
                    // but never past the requested rate.
                    None => builder.max_false_positive_rate(self.requested_fpr.min(1.0)),
                };
                Some(Box::new(builder.build()?))
            }
        })
    }
}

/// Recommends a filter for `req`, following the design trade-offs:
///
/// * no false positive allowed: no filter (ask the real store);
/// * insert-only, size known: [`BloomFilter`] (one cache line per lookup);
/// * deletes or exact concurrent dedup: [`CuckooFilter`] with the smallest
///   layout (12-bit or 16-bit tags) that meets the rate;
/// * a known growth bound ([`SetSize::Bounded`]): sized for it up front;
/// * growth by an unknown amount ([`SetSize::Unknown`]): a cuckoo filter
///   that doubles online, each doubling spending a tag bit (so doubling the
///   false-positive rate), capped at the requested rate; it may start larger
///   to need fewer doublings.
///
/// A requirement no filter meets is reported in
/// [`Recommendation::meets_requirements`] and the reason, never hidden; so
/// is a filter larger than one process can address (over 128 TiB, e.g. a
/// huge `SetSize::Bounded` factor): the reason then starts with
/// "NOT buildable".
///
/// ```
/// use koel::{advise, FilterKind, Requirements};
///
/// // Insert-only, a million items, 0.1%: a Bloom filter of ~2 MB.
/// let rec = advise(Requirements::new(1_000_000, 1e-3))?;
/// assert_eq!(rec.kind, Some(FilterKind::Bloom));
/// assert!(rec.memory_bytes < 2_100_000 && rec.expected_fpr <= 1e-3);
///
/// // With deletes: a cuckoo filter with 12-bit tags (the smallest layout
/// // meeting 0.5%).
/// let rec = advise(Requirements::new(1_000_000, 5e-3).deletes(true))?;
/// assert_eq!(rec.kind, Some(FilterKind::Cuckoo));
/// println!("{}", rec.reason);
///
/// // No false positives at all: no filter.
/// assert_eq!(advise(Requirements::new(1_000, 0.0))?.kind, None);
/// # Ok::<(), koel::AdviseError>(())
/// ```
///
/// # Errors
///
/// An [`AdviseError`] for impossible inputs (zero items, a rate outside
/// `0..1`, a growth factor below 1), or when no filter of the chosen kind
/// fits in an address space.
pub fn advise(req: Requirements) -> Result<Recommendation, AdviseError> {
    let mut rec = recommend(req)?;
    if rec.memory_bytes as u64 > MAX_ADDRESSABLE_BYTES {
        rec.meets_requirements = false;
        rec.reason = format!(
            "NOT buildable: this filter needs {:.0} TiB, more than a process can address \
             (128 TiB on x86-64 and ARM64), so no machine can hold it. Split the set across \
             filters (e.g. by key hash) or machines, or use an exact store on disk. {}",
            rec.memory_bytes as f64 / (1u64 << 40) as f64,
            rec.reason
        );
    }
    Ok(rec)
}

/// The user address space of x86-64 and ARM64 with 4-level page tables:
/// no filter larger than this can be allocated by one process.
const MAX_ADDRESSABLE_BYTES: u64 = 1 << 47;

/// [`advise`] before the address-space check.
fn recommend(req: Requirements) -> Result<Recommendation, AdviseError> {
    let p = req.false_positive_rate;
    if req.items == 0 {
        return Err(AdviseError::ZeroItems);
    }
    if !(0.0..1.0).contains(&p) {
        return Err(AdviseError::InvalidFalsePositiveRate);
    }
    let (factor, known) = match req.growth {
        SetSize::Fixed => (1.0, true),
        SetSize::Bounded { factor } => (factor, true),
        SetSize::Unknown { expected_factor } => (expected_factor, false),
    };
    if !(factor.is_finite() && factor >= 1.0) {
        return Err(AdviseError::InvalidGrowth);
    }
    if p == 0.0 {
        return Ok(exact_store(
            p,
            "No false positive is acceptable, and every approximate filter has \
             some: use the exact store (or an exact set) alone. A filter in front of \
             it would only save lookups of absent keys, never replace the store's answer."
                .to_string(),
        ));
    }
    let final_items = req.items as f64 * factor;
    if final_items > usize::MAX as f64 / 2.0 {
        return Err(AdviseError::TooManyItems);
    }
    let final_items = final_items.ceil() as usize;
    if !known {
        return growing_cuckoo(&req, factor);
    }
    let why_cuckoo = if req.deletes {
        Some("Items are deleted, which a Bloom filter cannot do")
    } else if req.exact_dedup {
        Some(
            "Concurrent inserts must deduplicate exactly, which only \
             `CuckooFilter::insert_unique` guarantees (a Bloom filter's insert may tell two \
             racing threads that the same key was new)",
        )
    } else {
        None
    };
    match why_cuckoo {
        Some(why) => fixed_cuckoo(final_items, p, why),
        None => bloom_filter(final_items, p),
    }
}

/// The cuckoo layouts, smallest per item first.
const LAYOUTS: [LayoutKind; 2] = [LayoutKind::Tags12x5, LayoutKind::Tags16x4];

/// Memory and full-load rate of a cuckoo table for `capacity`.
struct CuckooSize {
    memory_bytes: usize,
    fpr: f64,
}

/// Memory and rate of a cuckoo table sized for `capacity`, holding `items`
/// after `doublings` doublings.
fn cuckoo_grown(
    capacity: usize,
    layout: LayoutKind,
    doublings: u32,
    items: f64,
) -> Option<CuckooSize> {
    // The builder's own sizing, so the estimate is what `build` allocates.
    let (buckets, memory_bytes) = table_memory(capacity, layout, doublings)?;
    let load = items / (buckets as f64 * f64::from(layout.lanes()));
    Some(CuckooSize {
        memory_bytes,
        fpr: layout.false_positive_rate_at(doublings, load),
    })
}

/// Memory and rate of a cuckoo table sized for and holding `capacity`.
fn cuckoo_size(capacity: usize, layout: LayoutKind) -> Option<CuckooSize> {
    cuckoo_grown(capacity, layout, 0, capacity as f64)
}

fn fixed_cuckoo(items: usize, p: f64, why: &str) -> Result<Recommendation, AdviseError> {
    let sizes: Vec<(LayoutKind, CuckooSize)> = LAYOUTS
        .iter()
        .map(|&l| cuckoo_size(items, l).map(|s| (l, s)))
        .collect::<Option<_>>()
        .ok_or(AdviseError::TooManyItems)?;
    let fitting = sizes.iter().find(|(_, s)| s.fpr <= p);
    let meets = fitting.is_some();
    let (layout, size) = fitting.unwrap_or(&sizes[1]);
    let bits = layout.tag_bits();
    let reason = if meets {
        format!(
            "{why}: a cuckoo filter. {bits}-bit tags ({} per bucket) are the smallest layout \
             whose false-positive rate at full load ({:.2e}) meets {p:.2e}: {:.1} bits per item{}.",
            layout.lanes(),
            size.fpr,
            size.memory_bytes as f64 * 8.0 / items as f64,
            if bits == 12 {
                ""
            } else {
                "; 12-bit tags would be 25% smaller but give about 2.4e-3"
            },
        )
    } else {
        format!(
            "{why}: a cuckoo filter, but NOT at {p:.2e}: its best layout (16-bit tags) gives \
             {:.2e} at full load. A lower rate needs a table sized for more items than it \
             holds (the rate falls in proportion to the load), or an exact set.",
            size.fpr
        )
    };
    Ok(Recommendation {
        requested_fpr: p,
        kind: Some(FilterKind::Cuckoo),
        configuration: Configuration::Cuckoo {
            capacity: items,
            fingerprint_bits: bits,
            growth: None,
        },
        memory_bytes: size.memory_bytes,
        expected_fpr: size.fpr,
        meets_requirements: meets,
        reason,
    })
}

/// "No filter: use the exact store", for a requested rate `p`.
fn exact_store(p: f64, reason: String) -> Recommendation {
    Recommendation {
        requested_fpr: p,
        kind: None,
        configuration: Configuration::ExactStore,
        memory_bytes: 0,
        expected_fpr: 0.0,
        meets_requirements: true,
        reason,
    }
}

fn bloom_filter(items: usize, p: f64) -> Result<Recommendation, AdviseError> {
    let plan = match bloom::plan(items, p) {
        Ok(plan) => plan,
        Err(BuildError::InvalidFalsePositiveRate(_)) => {
            return Ok(exact_store(
                p,
                format!(
                    "A rate of {p:.1e} is below what any koel filter is built for (1e-20): \
                     use the exact store alone."
                ),
            ))
        }
        Err(_) => return Err(AdviseError::TooManyItems),
    };
    let memory_bytes = plan.bytes() as usize;
    let bits = memory_bytes as f64 * 8.0 / items as f64;
    let mut reason = format!(
        "Insert-only with a known size: a blocked Bloom filter, {} bits set per key in one \
         64-byte block, so each lookup reads one cache line (a cuckoo filter reads two). \
         {bits:.1} bits per item for {p:.2e} (the unblocked optimum is {:.1}; blocking costs \
         the difference).",
        8 * plan.rounds,
        1.44 * (1.0 / p).log2(),
    );
    if let Some((layout, size)) = LAYOUTS
        .iter()
        .filter_map(|&l| cuckoo_size(items, l).map(|s| (l, s)))
        .find(|(_, s)| s.fpr <= p && s.memory_bytes < memory_bytes)
    {
        reason.push_str(&format!(
            " A cuckoo filter with {}-bit tags would be smaller ({:.1} bits per item) at \
             two cache lines per lookup.",
            layout.tag_bits(),
            size.memory_bytes as f64 * 8.0 / items as f64
        ));
    }
    Ok(Recommendation {
        requested_fpr: p,
        kind: Some(FilterKind::Bloom),
        configuration: Configuration::Bloom {
            capacity: items,
            false_positive_rate: p,
            hashes: 8 * plan.rounds,
            blocks: plan.blocks,
        },
        memory_bytes,
        expected_fpr: plan.expected_fpr,
        meets_requirements: true,
        reason,
    })
}

/// The load a plan fills its table to after `doublings` doublings. A
/// doubled table spends tag bits on its bucket index, so a tag's alternate
/// bucket takes fewer distinct offsets and the first insert fails at a
/// lower load: measured (2026-12-06, filters built for 4,000 and 62,500
/// keys, three seeds) about 0.97 at generation 0, 0.92-0.95 with 6 to 8
/// free tag bits, 0.89 with 4. Planning the sizing load after doublings
/// (0.96 for 12-bit tags) made a filled plan add an unplanned level at
/// 2.8x the reported memory.
fn planned_load(layout: LayoutKind, doublings: u32) -> f64 {
    let free_bits = layout.tag_bits() - doublings;
    match doublings {
        0 => layout.sizing_load(),
        _ if free_bits >= 6 => 0.88,
        _ => 0.84,
    }
}

/// Doublings to grow by `factor`: `ceil(log2(factor))`.
fn doublings_for(factor: f64) -> u32 {
    let mut d = 0;
    while f64::from(1u32 << d) < factor && d < 31 {
        d += 1;
    }
    d
}

fn growing_cuckoo(req: &Requirements, factor: f64) -> Result<Recommendation, AdviseError> {
    let p = req.false_positive_rate;
    let needed = doublings_for(factor);
    // The filter doubles its first table while the rate at its sizing
    // load stays within the cap and leaves levels room (then adds levels
    // within what is left); the plan starts large enough to need no
    // level. The cap is the requested rate.
    let cap = p;
    let items_after = req.items as f64 * factor;
    let mut options = Vec::new();
    for layout in LAYOUTS {
        let at = |d: u32| layout.bound_at(d);
        if at(0) > cap {
            continue;
        }
        let mut allowed = 0;
        while allowed < layout.max_generation()
            && levels::first_level_may_reach(at(allowed + 1), cap)
        {
            allowed += 1;
        }
        // Start larger when the rate allows fewer doublings than needed.
        let doublings = needed.min(allowed);
        let headroom = layout.sizing_load() / planned_load(layout, doublings);
        let initial_capacity = (items_after * headroom / f64::from(1u32 << doublings))
            .ceil()
            .max(req.items as f64) as usize;
        let start = cuckoo_size(initial_capacity, layout).ok_or(AdviseError::TooManyItems)?;
        let end = cuckoo_grown(initial_capacity, layout, doublings, items_after)
            .ok_or(AdviseError::TooManyItems)?;
        let plan = GrowthPlan {
            initial_capacity,
            expected_factor: factor,
            doublings,
            initial_memory_bytes: start.memory_bytes,
            initial_false_positive_rate: start.fpr,
            false_positive_rate_after: end.fpr,
            max_false_positive_rate: cap,
        };
        options.push((layout, plan, end.memory_bytes));
    }
    let best = options.into_iter().min_by_key(|&(_, _, bytes)| bytes);
    let Some((layout, plan, memory_bytes)) = best else {
        let base = cuckoo_size(req.items, LayoutKind::Tags16x4)
            .ok_or(AdviseError::TooManyItems)?
            .fpr;
        let mut rec = fixed_cuckoo(
            (req.items as f64 * factor).ceil() as usize,
            p,
            "The set grows by an unknown amount",
        )?;
        rec.meets_requirements = false;
        rec.reason = format!(
            "The set grows by an unknown amount, which only a growing cuckoo filter handles, \
             but NOT at {p:.2e}: even 16-bit tags give {base:.2e} before any doubling, and each \
             doubling doubles it. This configuration pre-sizes for the expected {factor}x \
             without growth; for lower rates use an exact set."
        );
        return Ok(rec);
    };
    let bits = layout.tag_bits();
    let reason = format!(
        "The set grows by an unknown amount, which a Bloom filter cannot follow: a cuckoo \
         filter that doubles its table online. Each doubling spends one of the {bits} tag \
         bits, so the false-positive rate doubles too: {:.2e} at first, about {:.2e} after \
         the {} doubling(s) to the expected {factor}x{}. {bits}-bit tags are the smallest \
         layout that stays within {p:.2e}; growth is capped there.",
        plan.initial_false_positive_rate,
        plan.false_positive_rate_after,
        plan.doublings,
        if plan.initial_capacity > req.items {
            format!(
                " (the initial table is sized for {} items instead of {}{}; after its doublings \
                 it holds the expected items below the load where doubled tables fill up)",
                plan.initial_capacity,
                req.items,
                if plan.doublings < needed {
                    ", to need fewer doublings"
                } else {
                    ""
                }
            )
        } else {
            String::new()
        },
    );
    Ok(Recommendation {
        requested_fpr: p,
        kind: Some(FilterKind::Cuckoo),
        configuration: Configuration::Cuckoo {
            capacity: plan.initial_capacity,
            fingerprint_bits: bits,
            growth: Some(plan),
        },
        memory_bytes,
        expected_fpr: plan.false_positive_rate_after,
        meets_requirements: true,
        reason,
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn cuckoo_size_mirrors_the_builder() {
        for capacity in [1, 100, 1000, 65_537, 1_000_000, 3_000_001] {
            for (layout, bits) in [(LayoutKind::Tags16x4, 16), (LayoutKind::Tags12x5, 12)] {
                let f = CuckooFilter::builder()
                    .capacity(capacity)
                    .fingerprint_bits(bits)
                    .build()
                    .unwrap();
                let size = cuckoo_size(capacity, layout).unwrap();
                assert_eq!(size.memory_bytes, f.memory_usage(), "{capacity} @ {bits}");
            }
        }
    }

    #[test]
    fn doublings_round_up() {
        assert_eq!(doublings_for(1.0), 0);
        assert_eq!(doublings_for(1.5), 1);
        assert_eq!(doublings_for(2.0), 1);
        assert_eq!(doublings_for(64.0), 6);
        assert_eq!(doublings_for(65.0), 7);
    }
}
