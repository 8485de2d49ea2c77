//! The statistics snapshot of a [`CuckooFilter`](crate::CuckooFilter).

use crate::raw::counters::{Totals, PATH_HISTOGRAM};

/// Sizes and operation counters of a filter at one moment, from
/// [`CuckooFilter::stats`](crate::CuckooFilter::stats).
///
/// Counters are summed over shards while other threads may run, so under
/// concurrent writers they are a recent value, not an atomic snapshot.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Items stored (inserts minus removes).
    pub len: usize,
    /// Occupied tag slots found by scanning the table (equals `len` when no
    /// writer runs and `clear` did not race writers).
    pub occupied_slots: usize,
    /// Tag slots (`buckets * tags_per_bucket`).
    pub capacity: usize,
    /// Bucket words.
    pub buckets: usize,
    /// `len / capacity`.
    pub load_factor: f64,
    /// Bytes of buckets and version stripes (both tables while migrating).
    pub memory_bytes: usize,
    /// Whether the table asked the OS for transparent huge pages and the
    /// kernel accepted (Linux, tables of 4 MiB or more, THP mode `always`
    /// or `madvise`). `false` for smaller tables, other systems, or when
    /// THP is off: the filter works the same, with more TLB misses.
    /// Accepted advice is a request, not proof that every page is huge.
    pub huge_pages: bool,
    /// Version stripes guarding bucket pairs.
    pub version_stripes: usize,
    /// Bits per tag.
    pub fingerprint_bits: u32,
    /// Tags per bucket.
    pub tags_per_bucket: u32,
    /// Table generation: how many times it has doubled.
    pub generation: u32,
    /// Expected false-positive rate at the current load and generation
    /// (a region level's: two buckets of three 21-bit tags at its load,
    /// each tag taken for another with probability `regions / 2^21`).
    pub false_positive_rate: f64,
    /// The bound all levels together stay within (default 1e-2: the first
    /// table's doublings stop at 64x with 16-bit
    /// tags, 4x with 12-bit).
    pub max_false_positive_rate: f64,
    /// Doublings completed (migrations finished).
    pub growths: u64,
    /// Growths refused (memory or FPR bound, allocation failure, `Fixed`).
    pub growth_refusals: u64,
    /// Whether a doubling is migrating right now (`memory_bytes` then
    /// counts both tables).
    pub migrating: bool,
    /// Tags moved between their two buckets by displacement.
    pub displacements: u64,
    /// Committed displacement paths, indexed by their number of hops.
    pub paths_by_length: [u64; PATH_HISTOGRAM],
    /// Displacement paths abandoned because a bucket changed after the
    /// search (then searched again).
    pub stale_paths: u64,
    /// Inserts that found no displacement path in a full table: each one
    /// starts a doubling, or fails with an [`InsertError`](crate::InsertError)
    /// if growth is refused. At the growth cap this includes inserts
    /// refused without a search (see [`CuckooFilter::insert`](crate::CuckooFilter::insert));
    /// it excludes [`TooManyCopies`](crate::InsertError::TooManyCopies).
    pub insert_failures: u64,
    /// Always 0. It counted negative lookups re-read because a writer
    /// overlapped them, which made each such lookup write a shared counter;
    /// lookups now never write shared memory, so they count nothing. Kept
    /// so that code reading it still compiles.
    pub validation_retries: u64,
    /// Bucket CASes that lost a race and were retried.
    pub cas_retries: u64,
    /// Bytes (address space) of the tables that earlier doublings replaced,
    /// kept until the filter drops: lookups take no pin or announcement, so
    /// one may still be reading such a table. Each table is half the size of its
    /// successor, so this stays below the current table's size.
    pub retired_bytes: usize,
    /// The part of `retired_bytes` that still holds physical memory. Once
    /// no writer can reach a replaced table (on Linux), its bucket pages
    /// are returned to the OS if it was itself made by a doubling and
    /// holds 32 KiB or more; the first table, smaller doubled ones
    /// (together under 32 KiB), version stripes and migration state stay
    /// resident.
    pub retired_resident_bytes: usize,
    /// Levels: 1 until the first table may not double again, then one more
    /// each time the newest level may grow no further (see
    /// [`CuckooFilter::insert`](crate::CuckooFilter::insert), "Past the
    /// tag bits").
    pub levels: usize,
    /// Regions of the filter's region levels (0 while it has none): each
    /// level past the tag bits grows by adding regions, about a twelfth at
    /// a time (see [`CuckooFilter::insert`](crate::CuckooFilter::insert),
    /// "Past the tag bits").
    pub regions: usize,
    /// Slots of region levels whose keys are in two regions outside a
    /// step (a move found no room; lookups of them read one more pair).
    pub split_slots: usize,
    /// Growth steps of the region levels (each adds regions and moves the
    /// keys of the slots it gives them).
    pub region_steps: u64,
    /// Removes that found the key's tag in more than one level and so
    /// removed nothing, to rule out taking another key's only copy (they
    /// answered `true`; the key stays, a false positive).
    pub ambiguous_removes: u64,
}

impl Stats {
    /// Committed displacement paths of any length.
    pub fn paths(&self) -> u64 {
        self.paths_by_length.iter().sum()
    }

    /// Bits of table per stored item (`memory_bytes * 8 / len`).
    pub fn bits_per_item(&self) -> f64 {
        self.memory_bytes as f64 * 8.0 / self.len.max(1) as f64
    }

    /// One level's operation counters from its `totals`, every other field
    /// zero (or one level): each kind of level fills in its sizes.
    pub(crate) fn counted(totals: &Totals) -> Stats {
        Stats {
            len: 0,
            occupied_slots: 0,
            capacity: 0,
            buckets: 0,
            load_factor: 0.0,
            memory_bytes: 0,
            huge_pages: false,
            version_stripes: 0,
            fingerprint_bits: 0,
            tags_per_bucket: 0,
            generation: 0,
            false_positive_rate: 0.0,
            max_false_positive_rate: 0.0,
            growths: 0,
            growth_refusals: 0,
            migrating: false,
            displacements: totals.displacements,
            paths_by_length: totals.paths,
            stale_paths: totals.stale_paths,
            insert_failures: totals.full,
            validation_retries: 0,
            cas_retries: totals.cas_retries,
            retired_bytes: 0,
            retired_resident_bytes: 0,
            levels: 1,
            regions: 0,
            split_slots: 0,
            region_steps: 0,
            ambiguous_removes: 0,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::CuckooFilter;

    #[test]
    fn small_filter_reports_no_huge_pages() {
        let f = CuckooFilter::with_capacity(1000);
        assert!(!f.stats().huge_pages);
    }

    /// 4M items need a 32 MiB table: it asks, and reports the kernel's
    /// answer as this machine's THP settings predict it.
    #[cfg(target_os = "linux")]
    #[test]
    fn large_filter_reports_the_kernels_answer() {
        use crate::memory::{tests::expected_answer, HugePages};
        let f = CuckooFilter::with_capacity(4_000_000);
        assert_eq!(
            f.stats().huge_pages,
            expected_answer() == HugePages::Accepted
        );
    }
}
