//! # koel
//!
//! Approximate set membership under heavy concurrency: a **lock-free
//! concurrent cuckoo filter** that many threads share as
//! `Arc<CuckooFilter>`, with insert, deduplicating insert, lookup, delete and
//! count, all on `&self`.
//!
//! A filter answers `false` = definitely absent, `true` = maybe present.
//! A false negative would be a data-loss bug and cannot happen, under any
//! interleaving of threads; false positives happen at the layout's rate.
//!
//! ## Usage
//!
//! ```
//! use std::sync::Arc;
//!
//! let filter = Arc::new(
//!     koel::CuckooFilter::builder()
//!         .capacity(1_000_000) // items; the table is sized so they fit
//!         .fingerprint_bits(16) // 16 (default) or 12
//!         .build()?,
//! );
//! filter.insert("alice")?;
//! assert!(filter.contains("alice"));
//! assert_eq!(filter.insert_unique("bob")?, true);
//! assert_eq!(filter.insert_unique("bob")?, false);
//! assert!(filter.remove("alice"));
//! // Only a tag collision with "bob" in the same bucket pair could keep
//! // "alice" visible: about one chance in 10^9 in this two-key filter.
//! assert!(!filter.contains("alice"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `insert` adds a copy (a multiset, as in the cuckoo filter paper and
//! RedisBloom's `CF.ADD`); `insert_unique` is `HashSet::insert`'s set
//! semantics. Both filter kinds implement `Clone` (a consistent copy, also
//! while other threads write), `Default`, `FromIterator`, and `Extend` on
//! the shared `&filter` as well as the owned one, so a filter behind an
//! `Arc` can be extended: `(&*filter).extend(keys)`.
//!
//! ## Consistency
//!
//! Every operation is linearizable on the multiset of tags:
//!
//! | operation | progress | a racing `contains` may return |
//! | --- | --- | --- |
//! | `contains` | never writes, never takes a lock, never waits for a writer; a positive answer is wait-free; a negative answer re-reads only if a writer of its bucket pair completed a step during the read (lock-free) | `true` once the insert's CAS landed |
//! | `insert` | lock-free when a candidate bucket has room (one CAS): it waits for no other thread, also during growth and during a save; displacement takes one bucket-pair stripe at a time (blocking under contention). In a level grown by regions (past the tag bits) an insert during a step also helps move one chunk of keys without waiting (it skips pairs others hold); one that raced the step's start, or helped across a whole step, takes a stripe as a displacement does | — |
//! | `insert_unique` | holds the key's pair stripe for check-then-insert (blocking under contention); exactly one winner per absent key | — |
//! | `remove` | holds the key's pair stripe (blocking under contention); removes exactly one copy | `false` once the removing CAS landed |
//! | `count` | like a negative `contains`; it also re-reads while a displacement of its own tag is in flight (so that copy counts once), the one case in which a preempted writer delays a lookup | — |
//!
//! A key that is in the filter is found by every `contains` that its
//! `insert` happens-before (e.g. after a join, a channel message, or an
//! Acquire load of a flag the inserter stored with Release) and that does
//! not overlap a `remove` of it, also while
//! displacement moves its tag between its two buckets: a move copies the tag
//! into the destination before clearing the source, and a negative read is
//! checked against the pair's version stripe.
//!
//! `len()` is exact when no writer runs. `clear()` is not atomic against
//! concurrent writers.
//!
//! ## Growth
//!
//! By default ([`Growth::Double`]) a filter whose insert finds no room
//! doubles its table online, and once its tag bits are spent adds levels of
//! wider tags ([`CuckooFilter::insert`], "Past the tag bits"), so
//! [`InsertError`] is rare: it says why growth was refused
//! ([`CuckooFilterBuilder::max_memory`]; a failed allocation; a
//! [`CuckooFilterBuilder::max_false_positive_rate`] too low for another
//! level), and the filter then keeps working at its size with nothing lost.
//! Growth happens when an insert finds no room: for keys inserted once, at
//! 95-98% load in a first table and 89-95% after doublings (a doubled
//! table's tags keep fewer bits to spread alternates). Copies of one key
//! never leave its two buckets, so a key takes at most `2 *
//! tags_per_bucket - 1` copies ([`InsertError::TooManyCopies`]); many keys
//! near that limit can still make a table double early (at about 2% load
//! when 410 of 90,000 keys sit at it). Each doubling spends one tag bit, so
//! the false-positive rate about doubles:
//!
//! | doublings | 16-bit tags, FPR at full load | 12-bit tags |
//! | --- | --- | --- |
//! | 0 | 1.2e-4 | 2.3e-3 |
//! | 1 | 2.3e-4 | 4.7e-3 |
//! | 2 | 4.6e-4 | 9.4e-3 (last under the default 1e-2 cap: 4x) |
//! | 4 | 1.9e-3 | — |
//! | 6 | 7.4e-3 (last under the default cap: 64x; then levels) | — |
//!
//! While a table migrates into its successor:
//!
//! * `contains` and `count` still never write and never take a lock: for a
//!   key whose buckets were already moved they read the successor, validated
//!   against its version stripe;
//! * writers each migrate one chunk of 256 buckets (plus the chunks of
//!   their own two buckets if nobody has claimed them; more only while
//!   their key finds no room in the successor yet), so no operation pays
//!   for the whole table. Helping never waits: a chunk is migrated only
//!   once every old stripe could be sealed without waiting for its holder;
//! * an insert into a free slot waits for nobody, also while a `remove`,
//!   an `insert_unique` or a save holds its bucket pair; only an insert
//!   whose two buckets are full, `insert_unique` and `remove` may wait
//!   (for a chunk another thread is copying, or for a stripe holder);
//! * no operation can miss a key whose insert it happens-after, and
//!   `insert_unique` still has exactly one winner;
//! * the old table is kept until the filter drops (a late reader still
//!   reads valid memory there); on Linux its bucket pages (tables of 4 MiB
//!   or more) go back to the OS once no write that could reach it is still
//!   running.
//!
//! ## Memory
//!
//! A bucket is one 64-bit word: 4 tags of 16 bits (default) or 5 of 12.
//! The table has exactly enough buckets for the requested capacity (no
//! power-of-two rounding), plus at most 32 KiB of version stripes; while it
//! doubles, the old and the new table (3x the old size) coexist:
//!
//! | layout | FPR at full load | bits per item at 95% load |
//! | --- | --- | --- |
//! | 16-bit x 4 | ~1.2e-4 | ~16.8 |
//! | 12-bit x 5 | ~2.4e-3 | ~13.5 (5 tags use 60 of the 64 bits) |
//!
//! ## Performance
//!
//! `contains` touches two cache lines (the two candidate buckets) plus one
//! version stripe (a small, cache-resident array), and takes no lock and no
//! epoch pin, on every filter. Inserts and removes take no pin either: on a
//! filter that may grow they announce themselves in a word of their
//! thread's own (a plain store, no barrier on Linux, where the rare thread
//! that replaces a table runs `membarrier` instead); a [`Growth::Fixed`]
//! filter skips even that. In loops use the batch calls
//! [`CuckooFilter::contains_many`] / [`CuckooFilter::insert_many`], which
//! prefetch. BENCHMARKS.md has measured numbers against other filters.
//! With the opt-in feature `rayon` (`koel = { version = "0.1", features =
//! ["rayon"] }`), `par_contains`, `par_insert`,
//! `par_insert_unique` and `ParallelExtend` run those batches on rayon's
//! thread pool (one pin per chunk of 4096 keys). Tables of 4 MiB and more
//! ask Linux for transparent huge pages; `stats().huge_pages` says whether
//! the kernel agreed.
//!
//! ## The Bloom sibling, and choosing between them
//!
//! [`BloomFilter`] is a concurrent blocked Bloom filter for insert-only
//! sets: one 64-byte block (one cache line) per key, bits set with atomic
//! `fetch_or`, sized from a capacity and a target false-positive rate with
//! the blocked layout's exact false-positive model. [`advise`] turns what a
//! set needs (items, rate, deletes, growth) into a recommendation with its
//! memory and expected rate. Both filter kinds implement [`Filter`].
//!
//! ```
//! let rec = koel::advise(koel::Requirements::new(1_000_000, 1e-3))?;
//! assert_eq!(rec.kind, Some(koel::FilterKind::Bloom));
//! let bloom = koel::BloomFilter::new(1_000_000, 1e-3);
//! assert_eq!(bloom.memory_usage(), rec.memory_bytes);
//! bloom.insert("alice");
//! assert!(bloom.contains("alice"));
//! # Ok::<(), koel::AdviseError>(())
//! ```
//!
//! ## Hash portability
//!
//! A key's hash is a function, under the filter's seed, of the bytes its
//! `Hash` impl writes, every integer little-endian and `usize` / `isize`
//! widened to 64 bits: two folded 128-bit multiplies for keys of 8 bytes
//! in a cuckoo filter built since format version 3, XXH3-64 for every other
//! key (and for every key of a cuckoo filter loaded from a version 1 or 2
//! file, which keeps its file's hash for life). A filter gives a key the
//! same bits on every platform and in every koel version, so a saved
//! filter loads anywhere; two filters of one seed agree only if they hash
//! alike ([`FileInfo::hash_algorithm`]), so keep `filter.hash(&key)`
//! values for the filter that made them. The exact
//! rules are in the file format's specification (`docs/format.md`, "Key
//! hashing"). One exception: std feeds a slice of integers wider than a
//! byte (`&[u32]`, `Vec<u64>`) as its native-endian memory, so such keys
//! hash differently on big-endian targets.

#![warn(missing_docs)]
// docs.rs builds with `--cfg docsrs` on nightly: show the feature that
// gates each item (`rayon`).
#![cfg_attr(docsrs, feature(doc_cfg))]
// `loom` is the test models' cfg, never a user's: not worth a badge.
#![cfg_attr(docsrs, doc(auto_cfg(hide(loom))))]
// Atomics come from crate::sync alone. clippy.toml lists std's atomics; the
// lint can only tell them apart from the facade's under loom (`.ci/run`
// lints the loom build), where the facade's are loom's.
#![cfg_attr(loom, warn(clippy::disallowed_types, clippy::disallowed_methods))]

mod advise;
mod bloom;
mod cuckoo;
mod error;
mod filter;
mod hash;
mod memory;
#[cfg(not(loom))]
mod persist;
mod raw;
mod sync;

#[cfg(loom)]
mod canary;
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_support;

pub use advise::{advise, Configuration, GrowthPlan, Recommendation, Requirements, SetSize};
pub use bloom::{BloomFilter, BloomFilterBuilder, DEFAULT_FALSE_POSITIVE_RATE};
pub use cuckoo::{
    BatchInsertError, CuckooFilter, CuckooFilterBuilder, Growth, Pinned, Stats, DEFAULT_CAPACITY,
    DEFAULT_MAX_FALSE_POSITIVE_RATE,
};
pub use error::{AdviseError, BuildError, InsertError, UnionError};

#[cfg(all(feature = "rayon", not(loom)))]
#[allow(deprecated)]
#[doc(hidden)]
pub use cuckoo::ParInsertError;
pub use filter::{Filter, FilterKind};
/// Atomic, crash-safe replacement of a file, shared with the `koel`
/// command-line tool: not part of the library's stable API.
#[cfg(not(loom))]
#[doc(hidden)]
pub use persist::AtomicFile;
#[cfg(not(loom))]
pub use persist::{inspect, ChecksumStatus, FileInfo, LoadError, RegionsInfo};

// The Rust examples of the README and the design notes compile and run as
// doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
#[doc = include_str!("../docs/design.md")]
struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CuckooFilter>();
        assert_send_sync::<std::sync::Arc<CuckooFilter>>();
        assert_send_sync::<BloomFilter>();
        assert_send_sync::<std::sync::Arc<BloomFilter>>();
    }
}
