//! The concurrent cuckoo filter: a safe `&self` API over the `raw` engine.

mod batch;
mod builder;
mod growth;
#[cfg(any(test, loom))]
mod hooks;
pub(crate) mod levels;
#[cfg(all(feature = "rayon", not(loom)))]
mod parallel;
mod pinned;
#[cfg(all(test, not(loom)))]
mod progress_tests;
mod sizing;
pub(crate) mod snapshot;
mod stats;
mod traits;

pub use batch::BatchInsertError;
pub use builder::{CuckooFilterBuilder, DEFAULT_CAPACITY};
pub(crate) use growth::GrowthPolicy;
pub use growth::{Growth, DEFAULT_MAX_FALSE_POSITIVE_RATE};
#[cfg(all(feature = "rayon", not(loom)))]
#[allow(deprecated)]
pub use parallel::ParInsertError;
pub use pinned::Pinned;
use pinned::WriterPin;
pub(crate) use sizing::table_memory;
pub use stats::Stats;

use crate::error::{BuildError, InsertError};
use crate::hash::{HashAlgorithm, KeyHasher, Known};
use crate::raw::bucket::{L12x5, L16x4, L21x3, Layout};
use crate::raw::counters::Counters;
use crate::raw::geometry::Addressing;
use crate::raw::migrating::{self, Retry};
use crate::raw::ops::{self, InsertFailure, Sealed, Search};
use crate::raw::table::Table;
use crate::raw::tables::Tables;
use crate::raw::writers::Writers;
use crate::sync::Backoff;
use std::fmt;
use std::hash::Hash;

/// The bucket layout, chosen at build time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayoutKind {
    /// 16-bit tags, 4 per bucket.
    Tags16x4,
    /// 12-bit tags, 5 per bucket.
    Tags12x5,
    /// 21-bit tags, 3 per bucket: upper levels only (`levels.rs`).
    Tags21x3,
}

impl LayoutKind {
    pub(crate) fn tag_bits(self) -> u32 {
        match self {
            LayoutKind::Tags16x4 => L16x4::TAG_BITS,
            LayoutKind::Tags12x5 => L12x5::TAG_BITS,
            LayoutKind::Tags21x3 => L21x3::TAG_BITS,
        }
    }

    pub(crate) fn lanes(self) -> u32 {
        match self {
            LayoutKind::Tags16x4 => L16x4::LANES,
            LayoutKind::Tags12x5 => L12x5::LANES,
            LayoutKind::Tags21x3 => L21x3::LANES,
        }
    }

    /// Distinct tag values a key can get.
    pub(crate) fn tag_values(self) -> u64 {
        match self {
            LayoutKind::Tags16x4 => L16x4::MAX_TAG,
            LayoutKind::Tags12x5 => L12x5::MAX_TAG,
            LayoutKind::Tags21x3 => L21x3::MAX_TAG,
        }
    }

    /// The load the builder sizes for: a little under the load at which
    /// the first insert fails, so `capacity` items always fit.
    pub(crate) fn sizing_load(self) -> f64 {
        match self {
            LayoutKind::Tags16x4 => 0.95,
            LayoutKind::Tags12x5 => 0.96,
            LayoutKind::Tags21x3 => 0.90,
        }
    }
}

/// Runs `$body` with `$L` bound to the type of layout `$kind`. The layout
/// is fixed at build time, so the branch is perfectly predicted; each arm is
/// a fully monomorphised copy of the operation.
macro_rules! with_layout_kind {
    ($kind:expr, $L:ident => $body:expr) => {
        match $kind {
            $crate::cuckoo::LayoutKind::Tags16x4 => {
                type $L = $crate::raw::bucket::L16x4;
                $body
            }
            $crate::cuckoo::LayoutKind::Tags12x5 => {
                type $L = $crate::raw::bucket::L12x5;
                $body
            }
            $crate::cuckoo::LayoutKind::Tags21x3 => $crate::cuckoo::levels::cold(|| {
                type $L = $crate::raw::bucket::L21x3;
                $body
            }),
        }
    };
}
pub(crate) use with_layout_kind;

/// `with_layout_kind!` for the filter's own layout.
macro_rules! with_layout {
    ($self:expr, $L:ident => $body:expr) => {
        $crate::cuckoo::with_layout_kind!($self.layout, $L => $body)
    };
}
pub(crate) use with_layout;

/// A lock-free concurrent cuckoo filter: approximate set membership with
/// delete, shared by many threads as `Arc<CuckooFilter>`.
///
/// Every method takes `&self`. `contains` answers `false` only if the key is
/// definitely absent (no false negatives, under any interleaving), and
/// `true` if it is probably present (false positives at about
/// `2 * tags_per_bucket / 2^fingerprint_bits` at full load).
///
/// It is a multiset, as in the cuckoo filter paper: `insert` of the same key
/// twice stores two copies, `count` reports them, and `remove` takes one.
/// Use [`insert_unique`](Self::insert_unique) to deduplicate.
///
/// # Coming from `HashSet`, qfilter or RedisBloom
///
/// | you used | koel's equivalent |
/// | --- | --- |
/// | `HashSet::insert` (returns whether it was new), qfilter's `insert` (deduplicates) | [`insert_unique`](Self::insert_unique): `Ok(true)` if new; exactly one winner among racing threads |
/// | RedisBloom `CF.ADD` (adds a copy), `CF.ADDNX` | [`insert`](Self::insert) (adds a copy), [`insert_unique`](Self::insert_unique) |
/// | `CF.DEL`, `CF.COUNT`, `CF.EXISTS` | [`remove`](Self::remove) (one copy), [`count`](Self::count), [`contains`](Self::contains) |
///
/// Mixing the two is safe: `insert_unique` finds a key that `insert`
/// stored, and `remove` takes one copy of either.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
///
/// let filter = Arc::new(koel::CuckooFilter::builder().capacity(100_000).build()?);
/// let workers: Vec<_> = (0..4u64)
///     .map(|t| {
///         let filter = Arc::clone(&filter);
///         thread::spawn(move || {
///             for i in 0..10_000u64 {
///                 filter.insert(&(t * 10_000 + i)).expect("sized for 100k items");
///             }
///         })
///     })
///     .collect();
/// for w in workers {
///     w.join().unwrap();
/// }
/// assert_eq!(filter.len(), 40_000);
/// assert!((0..40_000u64).all(|k| filter.contains(&k)));
/// # Ok::<(), koel::BuildError>(())
/// ```
pub struct CuckooFilter {
    /// Every table so far and the current one. The current table is loaded
    /// once per operation attempt, and every geometry value comes from
    /// that one object; growth replaces it.
    tables: Tables,
    layout: LayoutKind,
    hasher: KeyHasher,
    counters: Counters,
    /// Writers announce themselves here (growable filters only), so that a
    /// replaced table's pages are released only when none can write them.
    writers: Writers,
    policy: GrowthPolicy,
    /// The level above this one, once this level may not double again
    /// (`levels.rs`).
    upper: levels::Upper,
    /// Which path `contains` takes: this layout's, or the levels' (`levels.rs`).
    route: levels::Route,
}

/// How the tables of a filter hashing with `algorithm` find a hash's tag
/// and buckets: format version 3 brought the `Fold` hash and the cheaper
/// addressing together; filters of older files keep theirs.
pub(crate) fn addressing_of(algorithm: HashAlgorithm) -> Addressing {
    match algorithm {
        HashAlgorithm::Fold => Addressing::V3,
        HashAlgorithm::Xxh3 | HashAlgorithm::Ahash => Addressing::V1,
    }
}

impl CuckooFilter {
    /// A builder with the defaults listed on [`CuckooFilterBuilder`].
    ///
    /// ```
    /// let f = koel::CuckooFilter::builder()
    ///     .capacity(1_000_000)
    ///     .fingerprint_bits(12)
    ///     .seed(42)
    ///     .build()?;
    /// assert!(f.capacity() >= 1_000_000);
    /// # Ok::<(), koel::BuildError>(())
    /// ```
    pub fn builder() -> CuckooFilterBuilder {
        CuckooFilterBuilder::default()
    }

    /// A filter with the default layout sized for `items` items.
    ///
    /// # Panics
    ///
    /// If `items` is 0, too large for one table, or the allocation fails,
    /// like `Vec::with_capacity`. Use [`builder`](Self::builder) to get a
    /// [`BuildError`] instead.
    pub fn with_capacity(items: usize) -> Self {
        match Self::builder().capacity(items).build() {
            Ok(f) => f,
            Err(e) => panic!("CuckooFilter::with_capacity({items}): {e}"),
        }
    }

    /// A filter of `table` and the given parts, holding `len` items; its
    /// route follows from `upper` (the one place a filter is put together:
    /// the builder, loading, `Clone` and a new level all come here).
    pub(crate) fn assemble(
        table: Table,
        layout: LayoutKind,
        hasher: KeyHasher,
        policy: GrowthPolicy,
        upper: levels::Upper,
        len: u64,
    ) -> CuckooFilter {
        let counters = Counters::default();
        counters.set_len(i64::try_from(len).unwrap_or(i64::MAX));
        #[allow(unused_mut)]
        let mut writers = policy.writers();
        #[cfg(loom)]
        {
            writers.canary = table.canary;
        }
        // The one place a table meets its hasher: every table of a filter
        // addresses as its hash algorithm's format version says.
        assert_eq!(
            table.geometry().addressing(),
            addressing_of(hasher.algorithm()),
            "a table addressed for another hash algorithm"
        );
        let route = levels::Route::for_level(layout, hasher.algorithm(), upper.exists());
        CuckooFilter {
            tables: Tables::new(table),
            layout,
            hasher,
            counters,
            writers,
            policy,
            upper,
            route,
        }
    }

    /// The current table. No pin needed: tables live until the filter
    /// drops (see `raw/tables.rs`).
    #[inline(always)]
    pub(crate) fn table(&self) -> &Table {
        self.tables.current()
    }

    /// The algorithm this filter hashes keys with.
    pub(crate) fn hash_algorithm(&self) -> HashAlgorithm {
        self.hasher.algorithm()
    }

    /// The addressing of every table of this filter (`addressing_of`).
    pub(crate) fn addressing(&self) -> Addressing {
        addressing_of(self.hasher.algorithm())
    }

    /// What a writer holds for one operation: its announcement (see
    /// `raw/writers.rs`), except on a [`Growth::Fixed`] filter, which never
    /// replaces its table. Call it before loading the current table.
    #[inline(always)]
    fn writer_pin(&self) -> WriterPin<'_> {
        WriterPin::new(self.policy.replaces_tables().then_some(&self.writers))
    }

    /// A handle with the same operations as the filter. Writes used to pin
    /// the thread (a full memory barrier) per call, which the handle paid
    /// once; they no longer do, so the handle now costs and saves nothing
    /// and is kept for code written against it.
    ///
    /// ```
    /// let f = koel::CuckooFilter::with_capacity(10_000);
    /// let pinned = f.pin();
    /// for k in 0..1000u32 {
    ///     pinned.insert(&k).unwrap();
    /// }
    /// assert!((0..1000u32).all(|k| pinned.contains(&k)));
    /// ```
    #[must_use = "a Pinned handle does nothing unless its operations are called"]
    pub fn pin(&self) -> Pinned<'_> {
        Pinned {
            filter: self,
            _not_send: std::marker::PhantomData,
        }
    }

    /// `insert` (or, with `unique`, `insert_unique`) of the hash `hash`
    /// gives (told what the route knows of the algorithm). Dispatched on
    /// the route, as `contains_in` is: a filter with levels takes the
    /// cold path of `levels.rs` (a free lane of its first table, else its
    /// newest level).
    #[inline(always)]
    pub(crate) fn insert_in(
        &self,
        hash: impl FnOnce(Known) -> u64,
        unique: bool,
        pin: &WriterPin,
    ) -> Result<bool, InsertError> {
        match self.route.get() {
            levels::Route::TAGS_16X4 => {
                self.insert_here_in::<L16x4>(hash(Known::Fold), Addressing::V3, unique, pin)
            }
            levels::Route::TAGS_12X5 => {
                self.insert_here_in::<L12x5>(hash(Known::Fold), Addressing::V3, unique, pin)
            }
            _ => self.insert_leveled(hash(Known::Any), unique),
        }
    }

    /// `insert_in` on this level alone (which goes up when it may not grow).
    pub(crate) fn insert_here(
        &self,
        hash: u64,
        unique: bool,
        pin: &WriterPin,
    ) -> Result<bool, InsertError> {
        let a = self.addressing();
        with_layout!(self, L => self.insert_here_in::<L>(hash, a, unique, pin))
    }

    /// `insert_here` for this level's layout `L` and `addressing`.
    #[inline(always)]
    pub(crate) fn insert_here_in<L: Layout>(
        &self,
        hash: u64,
        addressing: Addressing,
        unique: bool,
        _pin: &WriterPin,
    ) -> Result<bool, InsertError> {
        let t = self.table();
        if t.migration().is_none() {
            // An `insert_unique` also asks the levels above, under the
            // pair's stripe (in case the route changed under it); a plain
            // insert never asks.
            let fast = if unique {
                let above = || self.contains_above(hash);
                ops::insert_hash::<L>(
                    t,
                    hash,
                    addressing,
                    true,
                    above,
                    Search::UnlessHinted,
                    &self.counters,
                )
            } else {
                ops::insert_hash::<L>(
                    t,
                    hash,
                    addressing,
                    false,
                    ops::nowhere,
                    Search::UnlessHinted,
                    &self.counters,
                )
            };
            match fast {
                Ok(inserted) => return Ok(inserted),
                Err(failure) => {
                    let at = t.geometry().locate::<L>(hash);
                    if let Some(inserted) =
                        self.after_insert_failure(t, at, hash, unique, failure)?
                    {
                        return Ok(inserted);
                    }
                }
            }
        }
        self.insert_slow(hash, unique)
    }

    /// `insert_in` when the table is full or migrating: grows, helps the
    /// migration, and retries on whatever table is current.
    #[cold]
    #[inline(never)]
    fn insert_slow(&self, hash: u64, unique: bool) -> Result<bool, InsertError> {
        let mut backoff = Backoff::default();
        // This operation's share of a migration: one chunk, and more only
        // while the successor has no room for the key yet.
        let mut helped = false;
        loop {
            let t = self.table();
            match t.migration() {
                None => {
                    let at = with_layout!(self, L => t.geometry().locate::<L>(hash));
                    let above = || self.contains_above(hash);
                    let r = with_layout!(self, L => ops::insert::<L>(t, at, unique, above, Search::UnlessHinted, &self.counters));
                    match r {
                        Ok(inserted) => return Ok(inserted),
                        Err(
                            failure
                            @ (InsertFailure::Full { .. } | InsertFailure::Saturated { .. }),
                        ) => {
                            if let Some(inserted) =
                                self.after_insert_failure(t, at, hash, unique, failure)?
                            {
                                return Ok(inserted);
                            }
                        }
                        Err(InsertFailure::Sealed) => {
                            // A migration began under us (and is visible now:
                            // a sealed stripe is read with Acquire). A sealed
                            // or forwarded word without one would be a
                            // corrupt table: refuse instead of spinning.
                            if t.migration().is_none() {
                                debug_assert!(
                                    false,
                                    "sealed stripe or forwarded word without a migration"
                                );
                                return Err(InsertError::Full);
                            }
                        }
                    }
                }
                Some(m) => {
                    let above = || self.contains_above(hash);
                    let r = with_layout!(self, L => migrating::insert::<L>(t, m, t.geometry().locate::<L>(hash), unique, above, &self.counters));
                    if !helped || r == Err(Retry::NeedRoom) {
                        // Also installs the successor once all is migrated.
                        self.help_migration(t, m);
                        helped = true;
                    } else {
                        self.install_if_done(t, m);
                    }
                    match r {
                        Ok(inserted) => return Ok(inserted),
                        Err(Retry::Saturated { copies }) => {
                            return Err(InsertError::TooManyCopies { copies })
                        }
                        Err(_) => backoff.snooze(),
                    }
                }
            }
        }
    }

    /// `contains` on every level. The route is the one byte the layout
    /// dispatch reads anyway: a filter without levels goes straight to its
    /// layout's lookup; one that has levels (or is one) takes the cold
    /// path, which asks the levels above on a negative answer. `hash` is
    /// told what the route knows of the hash algorithm (a fast route
    /// hashes with `Fold`, and addresses as version 3, without asking).
    #[inline(always)]
    pub(crate) fn contains_in(&self, hash: impl FnOnce(Known) -> u64) -> bool {
        match self.route.get() {
            levels::Route::TAGS_16X4 => {
                self.contains_here_in::<L16x4>(hash(Known::Fold), Addressing::V3)
            }
            levels::Route::TAGS_12X5 => {
                self.contains_here_in::<L12x5>(hash(Known::Fold), Addressing::V3)
            }
            _ => self.contains_leveled(hash(Known::Any)),
        }
    }

    /// `contains` on this level alone.
    #[inline(always)]
    pub(crate) fn contains_here(&self, hash: u64) -> bool {
        let a = self.addressing();
        with_layout!(self, L => self.contains_here_in::<L>(hash, a))
    }

    /// `contains_here` for this level's layout `L` and `addressing`.
    #[inline(always)]
    pub(crate) fn contains_here_in<L: Layout>(&self, hash: u64, addressing: Addressing) -> bool {
        let t = self.table();
        match ops::contains_hash::<L>(t, hash, addressing) {
            Ok(found) => found,
            Err(Sealed) => self.read_slow(hash, |t, next, at| {
                with_layout!(self, L => match next {
                    None => ops::contains::<L>(t, at),
                    Some(next) => migrating::contains::<L>(t, next, at),
                })
            }),
        }
    }

    /// A read whose pair was sealed: retries `read(table, successor, at)`
    /// on the current table until it answers. `successor` is `Some` when
    /// the table has a migration; `read` tries the plain path first.
    ///
    /// A migrating read's answer stands only if its table is still current
    /// afterwards: once a replaced table's pages are released its words
    /// read 0, which the migrating read cannot tell from an empty bucket
    /// (see `raw/tables.rs`). A read that saw a released word also sees the
    /// replacement, so the check below catches it.
    #[cold]
    #[inline(never)]
    fn read_slow<R>(
        &self,
        hash: u64,
        read: impl Fn(&Table, Option<&Table>, crate::raw::geometry::Located) -> Result<R, Sealed>,
    ) -> R {
        let mut backoff = Backoff::default();
        loop {
            let t = self.table();
            let at = with_layout!(self, L => t.geometry().locate::<L>(hash));
            if let Ok(r) = read(t, None, at) {
                return r;
            }
            if let Some(m) = t.migration() {
                if let Ok(r) = read(t, Some(m.next()), at) {
                    #[cfg(loom)]
                    if t.canary == crate::canary::Canary::UncheckedRetiredRead {
                        // Deliberately broken: trusts a read that may have
                        // met released (zeroed) words.
                        return r;
                    }
                    if self.tables.is_current(t) {
                        return r;
                    }
                    continue;
                }
            }
            // The successor is sealed too: it must have been installed.
            backoff.snooze();
        }
    }

    /// `remove` on every level (see `levels.rs` for a filter that has
    /// more than one).
    #[inline(always)]
    pub(crate) fn remove_in(&self, hash: u64, pin: &WriterPin) -> bool {
        if self.upper.exists() {
            return self.remove_leveled(hash);
        }
        self.remove_here(hash, pin)
    }

    /// `remove` on this level alone.
    #[inline(always)]
    pub(crate) fn remove_here(&self, hash: u64, _pin: &WriterPin) -> bool {
        let mut backoff = Backoff::default();
        let mut helped = false;
        loop {
            let t = self.table();
            let r = match t.migration() {
                None => with_layout!(self, L => ops::remove::<L>(t, hash, &self.counters))
                    .map_err(Retry::from),
                Some(m) => {
                    let r = with_layout!(self, L => migrating::remove::<L>(t, m, t.geometry().locate::<L>(hash), &self.counters));
                    if helped {
                        self.install_if_done(t, m);
                    } else {
                        self.help_migration(t, m);
                        helped = true;
                    }
                    r
                }
            };
            match r {
                Ok(removed) => return removed,
                Err(_) => backoff.snooze(),
            }
        }
    }

    /// `count` summed over every level.
    #[inline(always)]
    pub(crate) fn count_in(&self, hash: u64) -> usize {
        let here = self.count_here(hash);
        if self.upper.exists() {
            return here + self.count_above(hash);
        }
        here
    }

    /// `count` on this level alone.
    #[inline(always)]
    pub(crate) fn count_here(&self, hash: u64) -> usize {
        let t = self.table();
        match with_layout!(self, L => ops::count::<L>(t, t.geometry().locate::<L>(hash))) {
            Ok(n) => n,
            Err(Sealed) => self.read_slow(hash, |t, next, at| {
                with_layout!(self, L => match next {
                    None => ops::count::<L>(t, at),
                    Some(next) => migrating::count::<L>(t, next, at),
                })
            }),
        }
    }

    /// The 64-bit hash of `key` under this filter's seed, for the `*_hash`
    /// methods.
    #[inline]
    pub fn hash<K: Hash + ?Sized>(&self, key: &K) -> u64 {
        self.hasher.hash(key)
    }

    /// The tag and the two candidate buckets of a hash in the current table:
    /// what a sequential reference model needs to mirror the filter exactly.
    /// Only with the feature `unstable-internals`: not a stable API.
    #[cfg(any(test, feature = "unstable-internals"))]
    #[doc(hidden)]
    pub fn placement(&self, hash: u64) -> (u64, usize, usize) {
        let t = self.table();
        let at = with_layout!(self, L => t.geometry().locate::<L>(hash));
        (at.tag, at.i1, at.i2)
    }

    /// Adds one copy of `key`: inserting the same key twice stores two
    /// copies (a multiset, as in the cuckoo filter paper and RedisBloom's
    /// `CF.ADD`); use [`insert_unique`](Self::insert_unique) for set
    /// semantics, as in `HashSet::insert`.
    ///
    /// ```
    /// let f = koel::CuckooFilter::with_capacity(1000);
    /// f.insert("a")?;
    /// f.insert("a")?;
    /// assert_eq!((f.count("a"), f.len()), (2, 2));
    /// assert_eq!(f.insert_unique("a")?, false); // present: not added
    /// # Ok::<(), koel::InsertError>(())
    /// ```
    ///
    /// Lock-free when a candidate bucket has room (one CAS): it then waits
    /// for no other thread, also while the table doubles and while a save
    /// ([`write_to`](Self::write_to), [`save`](Self::save)) holds the
    /// table. Otherwise it displaces other tags along a short path, taking
    /// one bucket-pair stripe at a time (blocking under contention on that
    /// pair), and during a doubling it may wait until its buckets are
    /// migrated (behind a save: until the save ends). In a level grown by
    /// regions (past the tag bits) an insert during a growth step first
    /// helps move one chunk of keys, without waiting: it skips a pair
    /// another thread holds and leaves it to the step. One whose key finds
    /// no room then moves on the keys leaving the region from at most
    /// eight buckets near its pair, and helps with more chunks only if
    /// that frees nothing. Two rare cases take a bucket-pair stripe as a
    /// displacement does: an insert that raced the step's start (its key's
    /// slot moved as it inserted) moves its tag on to the slot's new
    /// region, and a helper delayed across a whole step takes back a copy
    /// it made too late.
    ///
    /// # Past the tag bits
    ///
    /// Each doubling spends a tag bit. When one more doubling of the first
    /// table would pass `max_false_positive_rate`, a [`Growth::Double`]
    /// filter adds a *level* above it instead: 21-bit tags, 3 per bucket,
    /// in *regions* of equal size, the first with 0.4 of the room of the
    /// level below. When a region is full the level adds about a twelfth
    /// more regions online, moving only the keys of the slots they take
    /// over (about one copy per key over a level's life), so memory follows
    /// the keys: at most 1.5x the bits per key of a filter built at the
    /// final size (measured at 100x a first size of 200 or more, and at
    /// 1,000x and 10,000x a first size of 1,000; below about 200 the
    /// smallest first table, 64 buckets for 243 keys, and its doublings
    /// decide: 1.58x at 100x a first size of 100). Its
    /// false-positive rate may reach half of what the first table left
    /// under the cap, which bounds its regions; when it has them all the
    /// next level gets half of what is left then, so all levels together
    /// stay within the cap and growth stops only at memory (or when what is
    /// left of the cap cannot pay one region). An insert takes a free slot
    /// of its two first-table buckets if that bucket keeps another free
    /// slot, else goes to the newest level (so the first table never fills
    /// its last slots, whose rate its bound counts: it ends about 0.88 to
    /// 0.95 full); lookups read the newest level first and, for a negative
    /// answer, every level (two cache lines per level; a 16-bit filter
    /// built for 1,000 keys holds 10,000,000 on two levels at the default
    /// 1%). `insert_unique` keeps exactly one winner (it decides under the
    /// key's first-level bucket-pair stripe and asks every level there).
    /// A filter that never outgrows its first table costs what it did
    /// before levels existed.
    ///
    /// ```
    /// let f = koel::CuckooFilter::with_capacity(1_000);
    /// for k in 0..200_000u32 {
    ///     f.insert(&k)?; // 200x the first size, never refused
    /// }
    /// assert_eq!(f.stats().levels, 2);
    /// assert!(f.false_positive_rate() <= 1e-2);
    /// # Ok::<(), koel::InsertError>(())
    /// ```
    ///
    /// # At the growth cap
    ///
    /// A filter that cannot grow (at its `max_memory`, a
    /// `max_false_positive_rate` too low for another level, or
    /// [`Growth::Fixed`]) stays full until something is
    /// removed. So once one insert has searched for a displacement path in
    /// vain, the inserts after it only try a free slot in their own two
    /// buckets (one CAS, well under a microsecond) and are otherwise
    /// refused without searching (about 10 us), until the next `remove` or
    /// `clear`. Precisely: at the cap, an insert succeeds iff one of its
    /// two buckets has a free slot, or a search finds room and no search
    /// has failed since the last remove. A refusal without a search always
    /// rests on a search that saw every remove completed before the insert
    /// began, and a remove that frees a slot in the key's own buckets lets
    /// it in at once.
    ///
    /// With levels, new keys go to a free slot of their first-table
    /// buckets or to the newest level; when the newest level refuses one
    /// (at a cap) and the first table is below its sizing load (0.95 for
    /// 16-bit tags), it searches the first table for room, as
    /// `insert_unique` does then. So a remove frees room for new keys if it
    /// takes a key from one of those two: at its `max_memory`, a filter
    /// whose oldest keys (in its first table) are removed takes new ones
    /// again. Keys removed from a level between the first and the newest (a
    /// filter with three levels or more) free room that no new key takes.
    ///
    /// # Errors
    ///
    /// Nothing is changed on any error.
    ///
    /// * [`InsertError::Full`] if no displacement path frees a slot and the
    ///   filter does not grow; [`InsertError::FalsePositiveRateLimit`],
    ///   [`InsertError::MemoryLimit`] or [`InsertError::AllocationFailed`]
    ///   if it would have to grow and may not or cannot.
    /// * [`InsertError::TooManyCopies`] if the key already has `2 *
    ///   tags_per_bucket - 1` copies (7 with 16-bit tags, 9 with 12-bit; 5
    ///   once new keys go to a level of 21-bit tags, past 64x the first
    ///   size at the default cap), or at least `tags_per_bucket` (3 in such
    ///   a level) and no displacement frees a lane in its buckets; copies
    ///   of other keys with the same tag and buckets count too: no growth
    ///   could separate the copies, so the filter refuses without growing.
    #[inline]
    pub fn insert<K: Hash + ?Sized>(&self, key: &K) -> Result<(), InsertError> {
        let hash = |known| self.hasher.hash_known(key, known);
        self.insert_in(hash, false, &self.writer_pin()).map(|_| ())
    }

    /// [`insert`](Self::insert) for a hash from [`hash`](Self::hash).
    #[inline]
    pub fn insert_hash(&self, hash: u64) -> Result<(), InsertError> {
        self.insert_in(|_| hash, false, &self.writer_pin())
            .map(|_| ())
    }

    /// Adds `key` unless it is (probably) present: `Ok(true)` if this call
    /// inserted it, `Ok(false)` if a copy was already there.
    ///
    /// Linearizable: of any number of threads racing to insert the same
    /// absent key, exactly one gets `Ok(true)`. It holds the key's
    /// bucket-pair stripe for its check-then-insert, so it blocks while
    /// another writer holds that stripe. A false positive makes it return
    /// `Ok(false)` for a key never inserted (at the filter's FPR).
    ///
    /// ```
    /// let f = koel::CuckooFilter::with_capacity(1000);
    /// assert_eq!(f.insert_unique("order-17"), Ok(true));
    /// assert_eq!(f.insert_unique("order-17"), Ok(false));
    /// assert_eq!(f.count("order-17"), 1);
    /// ```
    ///
    /// # Errors
    ///
    /// As for [`insert`](Self::insert), except
    /// [`InsertError::TooManyCopies`]: a present key gives `Ok(false)`.
    #[inline]
    pub fn insert_unique<K: Hash + ?Sized>(&self, key: &K) -> Result<bool, InsertError> {
        let hash = |known| self.hasher.hash_known(key, known);
        self.insert_in(hash, true, &self.writer_pin())
    }

    /// [`insert_unique`](Self::insert_unique) for a precomputed hash.
    #[inline]
    pub fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError> {
        self.insert_in(|_| hash, true, &self.writer_pin())
    }

    /// `false` if `key` is definitely absent, `true` if it is probably
    /// present.
    ///
    /// Never takes a lock, never writes shared memory and never waits for
    /// another thread. A positive answer is wait-free (three loads). A
    /// negative one is validated against the bucket pair's version stripe
    /// and re-read only if a writer of that pair completed a step during
    /// it (lock-free): a writer preempted inside its critical section does
    /// not delay it.
    #[inline]
    pub fn contains<K: Hash + ?Sized>(&self, key: &K) -> bool {
        self.contains_in(|known| self.hasher.hash_known(key, known))
    }

    /// [`contains`](Self::contains) for a precomputed hash.
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        self.contains_in(|_| hash)
    }

    /// `contains_hash` compiled for the 16-bit layout only, without the
    /// runtime layout dispatch: the benchmarks' baseline for showing that
    /// the dispatch costs nothing. Only with the feature
    /// `unstable-internals`: not a stable API.
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    #[inline]
    pub fn contains_hash_hardwired_16x4(&self, hash: u64) -> bool {
        debug_assert_eq!(self.layout, LayoutKind::Tags16x4);
        let t = self.table();
        match ops::contains_hash::<L16x4>(t, hash, self.addressing()) {
            Ok(found) => found || (self.upper.exists() && self.contains_above(hash)),
            Err(Sealed) => self.contains_in(|_| hash),
        }
    }

    /// Removes one copy of `key`; `true` if a copy was found.
    ///
    /// Only remove keys that were inserted: removing an absent key whose tag
    /// collides with a present one removes that one (a false negative for
    /// it), as in every cuckoo filter. Holds the key's bucket-pair stripe,
    /// so a copy being displaced at that moment is removed exactly once.
    ///
    /// In a filter with levels (see [`insert`](Self::insert), "Past the tag
    /// bits") the key's tag is looked for in every level first: if it shows
    /// in more than one, one of them may be another key's only copy, so
    /// nothing is removed, and the answer is still `true` (a copy was
    /// found): the key's copy stays, a false positive for it, and `len` is
    /// not lowered (`Stats::ambiguous_removes` counts these). For a key
    /// inserted only once that happens at about the levels' false-positive
    /// rate; a key inserted both before and after a level was added has
    /// copies in two levels, and none of its removes removes anything, so
    /// inserting and removing it in turn adds a copy each time until
    /// [`InsertError::TooManyCopies`]. Keep such keys out of a filter that
    /// grows past its tag bits, or use `Growth::Fixed` or a capacity that
    /// needs no level.
    ///
    /// ```
    /// let f = koel::CuckooFilter::with_capacity(1000);
    /// f.insert(&7u32).unwrap();
    /// f.insert(&7u32).unwrap();
    /// assert!(f.remove(&7u32));
    /// assert_eq!(f.count(&7u32), 1);
    /// ```
    #[inline]
    pub fn remove<K: Hash + ?Sized>(&self, key: &K) -> bool {
        self.remove_hash(self.hash(key))
    }

    /// [`remove`](Self::remove) for a precomputed hash.
    #[inline]
    pub fn remove_hash(&self, hash: u64) -> bool {
        self.remove_in(hash, &self.writer_pin())
    }

    /// Copies of `key` present (including false-positive tag collisions).
    /// Read consistently: a copy in flight between its two buckets counts
    /// once. Never writes shared memory; it re-reads while a displacement
    /// of this key's tag is under way (a writer preempted in that step
    /// delays it) or after a writer of its bucket pair completed a step.
    #[inline]
    pub fn count<K: Hash + ?Sized>(&self, key: &K) -> usize {
        self.count_hash(self.hash(key))
    }

    /// [`count`](Self::count) for a precomputed hash.
    #[inline]
    pub fn count_hash(&self, hash: u64) -> usize {
        self.count_in(hash)
    }

    /// Items stored: inserts minus removes. Exact when no writer runs
    /// concurrently; otherwise a value the count passed through recently.
    pub fn len(&self) -> usize {
        self.levels().map(|l| l.len()).sum()
    }

    /// Whether [`len`](Self::len) is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tag slots in the table (`buckets * tags_per_bucket`), summed over
    /// the levels of a filter that has grown past its tag bits. The first
    /// [`InsertError::Full`] comes at about 95% of this.
    pub fn capacity(&self) -> usize {
        self.levels().map(|l| l.slots()).sum()
    }

    /// Tag slots of table `t`.
    pub(crate) fn slots(&self, t: &Table) -> usize {
        t.buckets() * self.layout.lanes() as usize
    }

    /// `len() / capacity()`.
    pub fn load_factor(&self) -> f64 {
        self.len() as f64 / self.capacity() as f64
    }

    /// Bytes of the table: bucket words plus version stripes; while the
    /// table doubles, the old and the new table together. Tables replaced
    /// by earlier doublings are not counted: see
    /// [`Stats::retired_bytes`]. Summed over the levels of a filter that
    /// has them (a region level: its regions' words and stripes, and its
    /// slot map and failure marks, 4 bytes and a bit per slot: 16.5 KiB
    /// at the default cap, 66 KiB at most).
    pub fn memory_usage(&self) -> usize {
        self.levels().map(|l| l.memory()).sum()
    }

    /// The name of the algorithm this filter hashes keys with: `"fold"`
    /// (filters built by this version), `"xxh3"` or `"ahash"` (loaded from
    /// format version 2 or 1 files), as [`FileInfo`](crate::FileInfo)
    /// names a file's.
    pub fn hash_algorithm_name(&self) -> &'static str {
        self.hash_algorithm().name()
    }

    /// Whether this filter hashes every key as `other` does (the same seed
    /// and hash algorithm), so that hashes of one serve the other's
    /// `*_hash` calls. See [`CuckooFilterBuilder::hash_like`].
    pub fn hashes_like(&self, other: &CuckooFilter) -> bool {
        self.seed() == other.seed() && self.hash_algorithm() == other.hash_algorithm()
    }

    /// Bits per tag (16 or 12).
    pub fn fingerprint_bits(&self) -> u32 {
        self.layout.tag_bits()
    }

    /// The fingerprint (tag) this filter's first level stores for `hash`,
    /// in `1..2^fingerprint_bits - 1`. In that level a key can only be
    /// taken for another whose fingerprint is equal, so work sharded by
    /// fingerprint keeps every pair of colliding keys on one shard (as
    /// `koel dedup` does). Doubling never changes it.
    ///
    /// ```
    /// let f = koel::CuckooFilter::with_capacity(1000);
    /// let h = f.hash(&42u64);
    /// assert!((1..(1 << f.fingerprint_bits()) - 1).contains(&f.fingerprint(h)));
    /// ```
    pub fn fingerprint(&self, hash: u64) -> u64 {
        let a = self.addressing();
        with_layout!(self, L => crate::raw::geometry::Geometry::tag_of::<L>(hash, a))
    }

    /// Tags per bucket (4 or 5).
    pub fn tags_per_bucket(&self) -> u32 {
        self.layout.lanes()
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.hasher.seed()
    }

    /// Expected false-positive rate of `contains` for an absent key at the
    /// current load: `1 - (1 - 2^g/V)^(2 * b * load)` for `V` tag values,
    /// `b` tags per bucket and `g` doublings so far (each doubling spends
    /// one tag bit on addressing); summed over the levels of a filter that
    /// has them.
    pub fn false_positive_rate(&self) -> f64 {
        self.levels().map(|l| l.false_positive_rate()).sum()
    }

    /// `false_positive_rate` of this level alone.
    pub(crate) fn level_false_positive_rate(&self) -> f64 {
        let t = self.table();
        let load = self.counters.len().max(0) as f64 / self.slots(t) as f64;
        self.layout
            .false_positive_rate_at(t.geometry().generation(), load)
    }

    /// Doublings so far (0 for the first table).
    pub fn generation(&self) -> u32 {
        self.table().geometry().generation()
    }

    /// The growth setting (see [`Growth`]).
    pub fn growth(&self) -> Growth {
        self.policy.growth
    }

    /// The false-positive rate growth may not pass (see
    /// [`CuckooFilterBuilder::max_false_positive_rate`]).
    pub fn max_false_positive_rate(&self) -> f64 {
        self.policy.max_false_positive_rate
    }

    /// Finishes, on this thread, the growth work in progress: a table's
    /// doubling that is still migrating, or a step of a level of regions
    /// that is still moving keys to its new regions.
    ///
    /// Inserts carry that work a piece at a time. A filter that stops
    /// taking inserts in the middle of it (at the end of a bulk load, say)
    /// keeps it unfinished, and a lookup of a key still in flight reads
    /// both places it may be: two more cache lines for those keys (about a
    /// thirteenth of a region level's keys during a step). Call this after
    /// a bulk load to bring every lookup back to two buckets per level.
    /// Lookups and writers go on meanwhile; it may wait for a thread
    /// stopped in the middle of a piece of growth work. When it returns,
    /// [`Stats::migrating`] is `false` unless an insert began growing
    /// again meanwhile. Nothing else changes: no key moves between levels,
    /// and no memory is allocated.
    ///
    /// ```
    /// let f = koel::CuckooFilter::with_capacity(1_000);
    /// for k in 0..500_000u32 {
    ///     f.insert(&k)?;
    /// }
    /// f.finish_growth();
    /// assert!(!f.stats().migrating);
    /// assert!((0..500_000u32).all(|k| f.contains(&k)));
    /// # Ok::<(), koel::InsertError>(())
    /// ```
    pub fn finish_growth(&self) {
        for level in self.levels() {
            level.finish_growth();
        }
    }

    /// Removes every item. Not atomic with respect to concurrent writers:
    /// an insert racing `clear` may or may not survive it, and `len` may
    /// then be off; call it while no other thread writes if that matters.
    /// It holds every version stripe while it zeroes, so a displacement is
    /// never half done across it, and inserts that start after it returned
    /// are kept.
    pub fn clear(&self) {
        // The levels stay (a lookup may be reading one); they are emptied.
        for level in self.levels() {
            level.clear();
        }
    }

    /// `clear` of this level alone.
    pub(crate) fn clear_here(&self) {
        let _pin = self.writer_pin();
        loop {
            // A migrating table is finished first, so one table holds all.
            self.finish_migration();
            if ops::clear(self.table()).is_ok() {
                break;
            }
        }
        self.counters.reset_len();
    }

    /// A snapshot of sizes and operation statistics, summed over the
    /// levels of a filter that has grown past its tag bits (sizes, counts,
    /// bytes); `generation`, `fingerprint_bits` and `tags_per_bucket` are
    /// the first level's, `levels` says how many there are.
    pub fn stats(&self) -> Stats {
        let mut all = self.level_stats();
        for level in self.levels().skip(1) {
            let s = level.stats();
            all.len += s.len;
            all.occupied_slots += s.occupied_slots;
            all.capacity += s.capacity;
            all.buckets += s.buckets;
            all.memory_bytes += s.memory_bytes;
            all.huge_pages |= s.huge_pages;
            all.version_stripes += s.version_stripes;
            all.false_positive_rate += s.false_positive_rate;
            all.growths += s.growths;
            all.growth_refusals += s.growth_refusals;
            all.migrating |= s.migrating;
            all.displacements += s.displacements;
            for (a, b) in all.paths_by_length.iter_mut().zip(s.paths_by_length) {
                *a += b;
            }
            all.stale_paths += s.stale_paths;
            all.insert_failures += s.insert_failures;
            all.cas_retries += s.cas_retries;
            all.retired_bytes += s.retired_bytes;
            all.retired_resident_bytes += s.retired_resident_bytes;
            all.regions += s.regions;
            all.split_slots += s.split_slots;
            all.region_steps += s.region_steps;
            all.levels += 1;
        }
        all.load_factor = all.len as f64 / all.capacity as f64;
        all
    }

    /// `stats` of this level alone.
    pub(crate) fn level_stats(&self) -> Stats {
        let totals = self.counters.totals();
        let (growths, growth_refusals) = self.counters.growth_events();
        // Every size comes from the one table loaded here.
        let t = self.table();
        let migration = t.migration();
        let (retired_bytes, retired_resident_bytes) = self.retired_bytes();
        {
            let len = self.counters.len().max(0) as usize;
            let capacity = self.slots(t);
            let load_factor = len as f64 / capacity as f64;
            let generation = t.geometry().generation();
            Stats {
                len,
                occupied_slots: with_layout!(self, L => match migration {
                    None => ops::occupied::<L>(t),
                    Some(m) => migrating::occupied::<L>(t, m.next()),
                }),
                capacity,
                buckets: t.buckets(),
                load_factor,
                memory_bytes: t.bytes() + migration.map_or(0, |m| m.next().bytes() + m.bytes()),
                huge_pages: t.huge_pages(),
                version_stripes: t.stripe_count(),
                fingerprint_bits: self.fingerprint_bits(),
                tags_per_bucket: self.tags_per_bucket(),
                generation,
                false_positive_rate: self.layout.false_positive_rate_at(generation, load_factor),
                max_false_positive_rate: self.policy.max_false_positive_rate,
                growths,
                growth_refusals,
                migrating: migration.is_some(),
                retired_bytes,
                retired_resident_bytes,
                ambiguous_removes: self.counters.ambiguous_removes(),
                ..Stats::counted(&totals)
            }
        }
    }
}

impl CuckooFilter {
    /// Bytes of the tables earlier doublings replaced: `(reserved,
    /// resident)` (see [`Stats::retired_bytes`]).
    pub(super) fn retired_bytes(&self) -> (usize, usize) {
        self.tables.retired().fold((0, 0), |(all, resident), t| {
            let state = t.migration().map_or(0, |m| m.bytes());
            let stripes = t.stripe_count() * std::mem::size_of::<u64>();
            let words = t.buckets() * std::mem::size_of::<u64>();
            let kept = if t.is_released() { 0 } else { words };
            (all + t.bytes() + state, resident + stripes + state + kept)
        })
    }
}

impl fmt::Debug for CuckooFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CuckooFilter")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("fingerprint_bits", &self.fingerprint_bits())
            .field("tags_per_bucket", &self.tags_per_bucket())
            .field("levels", &self.levels_count())
            .finish_non_exhaustive()
    }
}

impl TryFrom<CuckooFilterBuilder> for CuckooFilter {
    type Error = BuildError;

    fn try_from(builder: CuckooFilterBuilder) -> Result<Self, BuildError> {
        builder.build()
    }
}
