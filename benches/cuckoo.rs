//! koel against the `cuckoofilter` crate (0.5): single-thread cost per
//! operation, multi-thread throughput, fill time, and the cost of koel's
//! runtime layout dispatch.
//!
//! ```text
//! cargo bench --bench cuckoo                      # everything, ~8 min on 2 cores
//! cargo bench --bench cuckoo -- 'contains_pos/1M' # one group
//! cargo bench --bench cuckoo -- --test            # smoke run, every bench once
//! ```
//!
//! # Reading the output
//!
//! Every criterion *iteration* is ONE operation: the routines use
//! `iter_custom` over precomputed key arrays and report
//! `Throughput::Elements(1)`, so `time` is ns/op and `thrpt` is ops/s. In the
//! `mt_*` groups `time` is wall time divided by the operations of all
//! threads together, i.e. 1 / aggregate throughput.
//!
//! Ids read as `operation/size@load/filter`, so a group is a table row:
//!
//! | filter | what |
//! | --- | --- |
//! | `koel16` | `koel::CuckooFilter`, 16-bit tags, 4 per bucket |
//! | `koel12` | `koel::CuckooFilter`, 12-bit tags, 5 per bucket |
//! | `cuckoofilter` | `cuckoofilter::CuckooFilter::<DefaultHasher>::with_capacity(n)`, as shipped (SipHash-1-3) |
//! | `cuckoofilter_ahash` | `cuckoofilter::CuckooFilter::<ahash::AHasher>::with_capacity(n)`: same hash family as koel |
//! | `koel16_pinned` | koel16 lookups under one `CuckooFilter::pin()` for the whole loop (per thread in `mt_read`) |
//! | `koel16_batch` | koel16 `contains_many` over 4096 keys (one pin, prefetch 8 keys ahead) |
//! | `koel16_insert_many` | koel16 `fill` as one `insert_many` batch |
//! | `rwlock_cuckoofilter_ahash` | `std::sync::RwLock` around `cuckoofilter_ahash` (multi-thread groups) |
//!
//! Sizes: `1M` / `16M` is the nominal item count `n` the filters are built
//! for (`capacity(n)`, `with_capacity(n)`). koel sizes its table to hold
//! `n` at 95% (16-bit) / 96% (12-bit) load without power-of-two rounding;
//! `cuckoofilter` rounds slots up to a power of two (2^20 / 2^24 here, one
//! byte each). `@95%` means each filter holds 95% of ITS OWN slot count
//! (koel's `capacity()`), always the first keys of one key sequence.
//!
//! | group | what one op is | load |
//! | --- | --- | --- |
//! | `contains_pos` | lookup of a key that is in the filter | 95% |
//! | `contains_neg` | lookup of a key never inserted | 95% |
//! | `insert` | insert of a fresh key; batches of 4096, removed again untimed | 90% (+0.4%) |
//! | `insert_unique_new` | `insert_unique` / `test_and_add` of a fresh key, same batching | 90% (+0.4%) |
//! | `insert_unique_dup` | `insert_unique` / `test_and_add` of a key already present (no change) | 95% |
//! | `remove` | remove of a present key; batches of 4096, re-inserted untimed | 95% (-0.4%) |
//! | `fill` | one insert of a fill from empty to 95% of koel's `capacity()`; `cuckoofilter` gets the same key count in `with_capacity(count)` (koel12: 95% of its own capacity) | 0-95% |
//! | `mt_read` | lookup, 50% present / 50% absent keys | 95% |
//! | `mt_insert` | one insert of a concurrent fill from empty to 95% | 0-95% |
//! | `mt_mix_90c9i1r` | 90% lookups (50/50), 9% inserts of fresh keys, 1% removes of present keys; undone untimed every 50k ops per thread | 90% (+<1.6%) |
//! | `dispatch` | `contains_hash` on an L1-resident 1K-item table, both layouts, and koel16 through a path hard-wired to the 16-bit layout (`hardwired16`) | 95% |
//!
//! Mutating benches keep the load where the id says: timed batches are
//! undone (untimed) right after, and filters are built once, outside the
//! timed loops. Keys are distinct by construction (one splitmix64
//! sequence, disjoint index ranges for inserted, absent and fresh keys).
//!
//! Before the first benchmark that uses a filter, one line per filter goes
//! to stderr: items, slots, load, memory, bits per item, and the measured
//! false-positive rate over 2^20 absent keys. koel's FPR (16-bit: ~0.012%)
//! is far below `cuckoofilter`'s (8-bit tags: ~3%), which matters for the
//! ratios: `cuckoofilter`'s table is half the size (8.4 against 17 bits per
//! item), so more of it stays in cache.
//!
//! A `fill` sample is whole fills (at 16M one fill takes 5-10 s), so
//! criterion warns that it cannot complete 10 samples in the target time;
//! that is expected. On a shared 2-core VM, medians move by 10-30% from run
//! to run (more with other processes running): compare filters within one
//! run, and repeat a run before trusting a small ratio.

// `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

mod common;

use common::{keys, splitmix, FRESH_BASE, NEG_BASE};
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, SamplingMode,
    Throughput,
};
use std::cell::{Cell, RefCell, RefMut};
use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, RwLock};
use std::time::{Duration, Instant};

type CfSip = cuckoofilter::CuckooFilter<DefaultHasher>;
type CfAhash = cuckoofilter::CuckooFilter<ahash::AHasher>;
type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// koel's hash seed: fixed, so bucket placement is the same every run.
const SEED: u64 = 0x6b6f_656c_2d62_656e;
/// Load of the prebuilt filters (fraction of each filter's own slots).
const LOAD: f64 = 0.95;
/// Load the insert benches run at.
const INSERT_LOAD: f64 = 0.90;
/// Timed batch of the insert / remove benches, undone untimed after.
const CHUNK: usize = 4096;
/// Absent keys, fresh keys and mixed probes: 2^20 each.
const POOL: usize = 1 << 20;
/// Thread counts of the `mt_*` groups.
const THREADS: [usize; 3] = [1, 2, 4];
/// Operations per thread between two untimed clean-ups in `mt_mix`.
const MIX_ROUND: usize = 50_000;

// ---------------------------------------------------------------- keys

// Keys come from `common` (one splitmix64 sequence); this range is ours.
const PROBE_BASE: u64 = 3 << 40;

/// The next `m` keys of `pool` from `cursor`, wrapping to the start.
fn next_chunk<'a>(pool: &'a [u64], cursor: &Cell<usize>, m: usize) -> &'a [u64] {
    let mut c = cursor.get();
    if c + m > pool.len() {
        c = 0;
    }
    cursor.set(c + m);
    &pool[c..c + m]
}

/// Rescales the time of `done` operations to `iters` operations.
fn per_iters(elapsed: Duration, done: u64, iters: u64) -> Duration {
    if done == iters {
        elapsed
    } else {
        elapsed.mul_f64(iters as f64 / done as f64)
    }
}

/// Whole fills to run for `iters` operations of `count` inserts each:
/// rounded down, at least one. With a target time of ~10 fills at 200+
/// ns/insert criterion asks for under 2 fills per sample, so a sample is
/// one fill and criterion never predicts an overrun (no warning).
fn fills_for(iters: u64, count: usize) -> u64 {
    (iters / count as u64).max(1)
}

/// Target time for the fill groups: about ten fills of `count` keys at
/// 200 ns per insert.
fn fill_target(count: usize) -> Duration {
    Duration::from_nanos(count as u64 * 2_000)
}

// ---------------------------------------------------------------- filters

fn koel_filter(n: usize, bits: u32) -> koel::CuckooFilter {
    koel::CuckooFilter::builder()
        .capacity(n)
        .fingerprint_bits(bits)
        .seed(SEED)
        .build()
        .expect("koel filter")
}

fn koel16(n: usize) -> koel::CuckooFilter {
    koel_filter(n, 16)
}

fn koel12(n: usize) -> koel::CuckooFilter {
    koel_filter(n, 12)
}

fn cf_sip(n: usize) -> CfSip {
    CfSip::with_capacity(n)
}

fn cf_ahash(n: usize) -> CfAhash {
    CfAhash::with_capacity(n)
}

/// The single-thread operations, on `u64` keys (each filter hashes the key
/// itself, as a caller would).
trait Filter {
    fn insert(&mut self, k: u64) -> bool;
    fn insert_unique(&mut self, k: u64) -> Option<bool>;
    fn contains(&self, k: u64) -> bool;
    fn remove(&mut self, k: u64) -> bool;
    fn items(&self) -> usize;
    fn slots(&self) -> usize;
    fn memory_bytes(&self) -> usize;
    fn expected_fpr(&self) -> f64;
    /// Back to empty, same size.
    fn reset(&mut self);
}

impl Filter for koel::CuckooFilter {
    #[inline]
    fn insert(&mut self, k: u64) -> bool {
        koel::CuckooFilter::insert(self, &k).is_ok()
    }
    #[inline]
    fn insert_unique(&mut self, k: u64) -> Option<bool> {
        koel::CuckooFilter::insert_unique(self, &k).ok()
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        koel::CuckooFilter::contains(self, &k)
    }
    #[inline]
    fn remove(&mut self, k: u64) -> bool {
        koel::CuckooFilter::remove(self, &k)
    }
    fn items(&self) -> usize {
        self.len()
    }
    fn slots(&self) -> usize {
        self.capacity()
    }
    fn memory_bytes(&self) -> usize {
        self.memory_usage()
    }
    fn expected_fpr(&self) -> f64 {
        self.false_positive_rate()
    }
    fn reset(&mut self) {
        self.clear();
    }
}

impl<H: Hasher + Default> Filter for cuckoofilter::CuckooFilter<H> {
    #[inline]
    fn insert(&mut self, k: u64) -> bool {
        self.add(&k).is_ok()
    }
    #[inline]
    fn insert_unique(&mut self, k: u64) -> Option<bool> {
        self.test_and_add(&k).ok()
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        cuckoofilter::CuckooFilter::contains(self, &k)
    }
    #[inline]
    fn remove(&mut self, k: u64) -> bool {
        self.delete(&k)
    }
    fn items(&self) -> usize {
        self.len()
    }
    fn slots(&self) -> usize {
        // One byte per slot; the rest is the struct itself.
        self.memory_usage() - std::mem::size_of::<Self>()
    }
    fn memory_bytes(&self) -> usize {
        self.memory_usage()
    }
    fn expected_fpr(&self) -> f64 {
        // 8-bit tags with 255 usable values, 2 buckets of 4 checked.
        let load = self.items() as f64 / self.slots() as f64;
        1.0 - (1.0 - 1.0 / 255.0_f64).powf(8.0 * load)
    }
    fn reset(&mut self) {
        *self = Self::with_capacity(self.slots());
    }
}

/// Prints, once per filter, what a reader needs to interpret the ratios.
fn report<F: Filter + ?Sized>(label: &str, name: &str, f: &F, negatives: &[u64], failed: usize) {
    let false_positives = negatives.iter().filter(|&&k| f.contains(k)).count();
    let items = f.items();
    eprintln!(
        "\n[filter {label}] {name:<26} {items:>9} items / {:>9} slots = load {:5.2}% | {:>9} bytes = {:5.2} bits/item | \
         FPR measured {:.4}% ({false_positives}/{}), expected {:.4}% | failed inserts: {failed}",
        f.slots(),
        100.0 * items as f64 / f.slots() as f64,
        f.memory_bytes(),
        8.0 * f.memory_bytes() as f64 / items as f64,
        100.0 * false_positives as f64 / negatives.len() as f64,
        negatives.len(),
        100.0 * f.expected_fpr(),
    );
}

/// A filter built the first time a benchmark that uses it runs, so that a
/// filtered run (`cargo bench -- contains_pos/1M`) does not build all.
struct Lazy<F> {
    name: &'static str,
    make: fn(usize) -> F,
    n: usize,
    cell: RefCell<Option<F>>,
}

impl<F> Lazy<F> {
    fn new(name: &'static str, make: fn(usize) -> F, n: usize) -> Self {
        Lazy {
            name,
            make,
            n,
            cell: RefCell::new(None),
        }
    }

    fn get_or_init(&self, init: impl FnOnce(F) -> F) -> RefMut<'_, F> {
        let mut slot = self.cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(init((self.make)(self.n)));
        }
        RefMut::map(slot, |s| s.as_mut().expect("initialised above"))
    }
}

/// One lazily built filter of each kind.
struct Set {
    koel16: Lazy<koel::CuckooFilter>,
    koel12: Lazy<koel::CuckooFilter>,
    cf: Lazy<CfSip>,
    cf_ahash: Lazy<CfAhash>,
}

impl Set {
    fn new(koel_n: usize, cf_n: usize) -> Self {
        Set {
            koel16: Lazy::new("koel16", koel16, koel_n),
            koel12: Lazy::new("koel12", koel12, koel_n),
            cf: Lazy::new("cuckoofilter", cf_sip, cf_n),
            cf_ahash: Lazy::new("cuckoofilter_ahash", cf_ahash, cf_n),
        }
    }
}

/// Runs `$body` once per filter of a `Set`, with `$lazy` bound to it.
macro_rules! each_filter {
    ($set:expr, |$lazy:ident| $body:expr) => {{
        {
            let $lazy = &$set.koel16;
            $body;
        }
        {
            let $lazy = &$set.koel12;
            $body;
        }
        {
            let $lazy = &$set.cf;
            $body;
        }
        {
            let $lazy = &$set.cf_ahash;
            $body;
        }
    }};
}

/// Keys and filters of one size.
struct Fixture {
    size: &'static str,
    large: bool,
    /// Inserted keys: a filter at 95% holds a prefix of these.
    keys: Vec<u64>,
    /// Never inserted anywhere.
    negatives: Vec<u64>,
    /// Inserted only by the insert benches, and removed again.
    fresh: Vec<u64>,
    /// Filters at 95% load.
    loaded: Set,
    /// Empty filters for `fill`.
    fill: Set,
    /// `fill` key counts: 95% of koel's `capacity()` per layout.
    fill16: usize,
    fill12: usize,
}

impl Fixture {
    fn new(size: &'static str, n: usize, large: bool) -> Self {
        // Building a koel filter only reserves its table; nothing is touched.
        let fill16 = (koel16(n).capacity() as f64 * LOAD) as usize;
        let fill12 = (koel12(n).capacity() as f64 * LOAD) as usize;
        let keys = keys(0, n + n / 50);
        assert!(
            keys.len() >= fill16.max(fill12)
                && keys.len() as f64 >= n.next_power_of_two() as f64 * LOAD
        );
        Fixture {
            size,
            large,
            keys,
            negatives: self::keys(NEG_BASE, POOL),
            fresh: self::keys(FRESH_BASE, POOL),
            loaded: Set::new(n, n),
            fill: Set::new(n, fill16),
            fill16,
            fill12,
        }
    }

    /// `lazy`, filled to 95% of its slots on first use.
    fn loaded<'a, F: Filter>(&'a self, lazy: &'a Lazy<F>) -> RefMut<'a, F> {
        lazy.get_or_init(|mut f| {
            let n = (f.slots() as f64 * LOAD) as usize;
            let ok = self.keys[..n].iter().filter(|&&k| f.insert(k)).count();
            report(
                &format!("{}@95%", self.size),
                lazy.name,
                &f,
                &self.negatives,
                n - ok,
            );
            f
        })
    }

    fn group<'c>(&self, c: &'c mut Criterion, op: &str, load: &str) -> Group<'c> {
        let mut g = c.benchmark_group(format!("{op}/{}@{load}", self.size));
        let measure = if self.large { 2000 } else { 1500 };
        configure(&mut g, Duration::from_millis(measure));
        g
    }
}

fn configure(g: &mut Group<'_>, measurement: Duration) {
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(measurement)
        .throughput(Throughput::Elements(1));
}

fn warn_if(count: u64, what: &str, id: &str) {
    if count > 0 {
        eprintln!("\nWARNING {id}: {count} {what}");
    }
}

// ---------------------------------------------------------------- single thread

fn bench_contains<F: Filter>(g: &mut Group<'_>, fx: &Fixture, lazy: &Lazy<F>, positive: bool) {
    let cursor = Cell::new(0);
    let misses = Cell::new(0u64);
    g.bench_function(lazy.name, |b| {
        let f = fx.loaded(lazy);
        let probes: &[u64] = if positive {
            &fx.keys[..f.items()]
        } else {
            &fx.negatives
        };
        b.iter_custom(|iters| {
            let mut i = cursor.get();
            let mut hits = 0u64;
            let start = Instant::now();
            for _ in 0..iters {
                hits += u64::from(f.contains(probes[i]));
                i += 1;
                if i == probes.len() {
                    i = 0;
                }
            }
            let elapsed = start.elapsed();
            cursor.set(i);
            if positive {
                misses.set(misses.get() + (iters - hits));
            }
            black_box(hits);
            elapsed
        });
    });
    warn_if(misses.get(), "false negatives", lazy.name);
}

/// Inserts fresh keys at 90% load, `CHUNK` at a time, removing each batch
/// again untimed. `unique`: `insert_unique` / `test_and_add` instead.
fn bench_insert<F: Filter>(g: &mut Group<'_>, fx: &Fixture, lazy: &Lazy<F>, unique: bool) {
    let cursor = Cell::new(0);
    let failures = Cell::new(0u64);
    let lowered: Cell<Option<(usize, usize)>> = Cell::new(None);
    g.bench_function(lazy.name, |b| {
        let mut f = fx.loaded(lazy);
        if lowered.get().is_none() {
            let range = ((f.slots() as f64 * INSERT_LOAD) as usize, f.items());
            for &k in &fx.keys[range.0..range.1] {
                f.remove(k);
            }
            lowered.set(Some(range));
        }
        let mut added = vec![false; CHUNK];
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            let mut failed = 0;
            while left > 0 {
                let batch = next_chunk(&fx.fresh, &cursor, left.min(CHUNK));
                let start = Instant::now();
                if unique {
                    for (a, &k) in added.iter_mut().zip(batch) {
                        let r = f.insert_unique(k);
                        failed += u64::from(r.is_none());
                        *a = r == Some(true);
                    }
                } else {
                    for (a, &k) in added.iter_mut().zip(batch) {
                        *a = f.insert(k);
                        failed += u64::from(!*a);
                    }
                }
                total += start.elapsed();
                for (&a, &k) in added.iter().zip(batch) {
                    if a {
                        f.remove(k);
                    }
                }
                left -= batch.len();
            }
            failures.set(failures.get() + failed);
            total
        });
    });
    if let Some((lo, hi)) = lowered.get() {
        let mut f = fx.loaded(lazy);
        for &k in &fx.keys[lo..hi] {
            f.insert(k);
        }
    }
    warn_if(failures.get(), "failed inserts", lazy.name);
}

/// `insert_unique` of keys already present: a check that changes nothing.
fn bench_insert_unique_dup<F: Filter>(g: &mut Group<'_>, fx: &Fixture, lazy: &Lazy<F>) {
    let cursor = Cell::new(0);
    let inserted = Cell::new(0u64);
    g.bench_function(lazy.name, |b| {
        let mut f = fx.loaded(lazy);
        let n = f.items();
        let probes = &fx.keys[..n];
        b.iter_custom(|iters| {
            let mut i = cursor.get();
            let mut new = 0u64;
            let start = Instant::now();
            for _ in 0..iters {
                new += u64::from(f.insert_unique(probes[i]) != Some(false));
                i += 1;
                if i == n {
                    i = 0;
                }
            }
            let elapsed = start.elapsed();
            cursor.set(i);
            inserted.set(inserted.get() + new);
            elapsed
        });
    });
    warn_if(
        inserted.get(),
        "present keys reported new (or failed)",
        lazy.name,
    );
}

/// Removes present keys at 95% load, `CHUNK` at a time, re-inserting each
/// batch untimed.
fn bench_remove<F: Filter>(g: &mut Group<'_>, fx: &Fixture, lazy: &Lazy<F>) {
    let cursor = Cell::new(0);
    let misses = Cell::new(0u64);
    g.bench_function(lazy.name, |b| {
        let mut f = fx.loaded(lazy);
        let present = &fx.keys[..f.items()];
        let mut removed = vec![false; CHUNK];
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            let mut missed = 0;
            while left > 0 {
                let batch = next_chunk(present, &cursor, left.min(CHUNK));
                let start = Instant::now();
                for (r, &k) in removed.iter_mut().zip(batch) {
                    *r = f.remove(k);
                }
                total += start.elapsed();
                for (&r, &k) in removed.iter().zip(batch) {
                    if r {
                        f.insert(k);
                    } else {
                        missed += 1;
                    }
                }
                left -= batch.len();
            }
            misses.set(misses.get() + missed);
            total
        });
    });
    warn_if(
        misses.get(),
        "removes of present keys that found nothing",
        lazy.name,
    );
}

/// Fills an empty filter with `count` keys per fill; every sample is whole
/// fills (rescaled to the iterations criterion asked for).
fn bench_fill<F: Filter>(g: &mut Group<'_>, fx: &Fixture, lazy: &Lazy<F>, count: usize) {
    let failures = Cell::new(0u64);
    let fills = Cell::new(0u64);
    g.bench_function(lazy.name, |b| {
        let mut f = lazy.get_or_init(|f| f);
        b.iter_custom(|iters| {
            let runs = fills_for(iters, count);
            let mut total = Duration::ZERO;
            for _ in 0..runs {
                f.reset();
                let start = Instant::now();
                let mut ok = 0usize;
                for &k in &fx.keys[..count] {
                    ok += usize::from(f.insert(k));
                }
                total += start.elapsed();
                failures.set(failures.get() + (count - ok) as u64);
            }
            fills.set(fills.get() + runs);
            per_iters(total, runs * count as u64, iters)
        });
    });
    if fills.get() > 0 {
        let f = lazy.get_or_init(|f| f);
        eprintln!(
            "\n[fill {}] {:<18} {count} keys into {} slots (to load {:.2}%): {} failed inserts in {} fills",
            fx.size,
            lazy.name,
            f.slots(),
            100.0 * count as f64 / f.slots() as f64,
            failures.get(),
            fills.get(),
        );
    }
}

/// koel's two fast paths for lookups in a loop, next to the plain call:
/// `koel16_pinned` (calls through one `CuckooFilter::pin()` handle, which
/// used to hold one epoch pin for the whole loop; now a plain view)
/// and `koel16_batch` (`contains_many` over 4096 keys: one pin, buckets
/// prefetched 8 keys ahead).
fn bench_contains_fast(
    g: &mut Group<'_>,
    fx: &Fixture,
    lazy: &Lazy<koel::CuckooFilter>,
    positive: bool,
) {
    const BATCH: usize = 4096;
    let misses = Cell::new(0u64);
    for mode in ["koel16_pinned", "koel16_batch"] {
        let cursor = Cell::new(0);
        g.bench_function(mode, |b| {
            let f = fx.loaded(lazy);
            let probes: &[u64] = if positive {
                &fx.keys[..f.items()]
            } else {
                &fx.negatives
            };
            let mut out = vec![false; BATCH];
            b.iter_custom(|iters| {
                let mut i = cursor.get();
                let mut hits = 0u64;
                let mut left = iters as usize;
                let start = Instant::now();
                if mode == "koel16_pinned" {
                    let p = f.pin();
                    for _ in 0..left {
                        hits += u64::from(p.contains(&probes[i]));
                        i = if i + 1 == probes.len() { 0 } else { i + 1 };
                    }
                } else {
                    while left > 0 {
                        let n = left.min(BATCH).min(probes.len() - i);
                        f.contains_many(&probes[i..i + n], &mut out[..n]);
                        hits += out[..n].iter().filter(|&&b| b).count() as u64;
                        left -= n;
                        i = if i + n == probes.len() { 0 } else { i + n };
                    }
                }
                let elapsed = start.elapsed();
                cursor.set(i);
                if positive {
                    misses.set(misses.get() + (iters - hits));
                }
                black_box(hits);
                elapsed
            });
        });
    }
    warn_if(misses.get(), "false negatives", "koel16 fast paths");
}

/// `fill` through `insert_many`: the whole fill as one batch.
fn bench_fill_batch(
    g: &mut Group<'_>,
    fx: &Fixture,
    lazy: &Lazy<koel::CuckooFilter>,
    count: usize,
) {
    g.bench_function("koel16_insert_many", |b| {
        let f = lazy.get_or_init(|f| f);
        b.iter_custom(|iters| {
            let runs = fills_for(iters, count);
            let mut total = Duration::ZERO;
            for _ in 0..runs {
                f.clear();
                let start = Instant::now();
                f.insert_many(&fx.keys[..count])
                    .expect("sized for the fill");
                total += start.elapsed();
            }
            per_iters(total, runs * count as u64, iters)
        });
    });
}

fn single_thread_size(c: &mut Criterion, size: &'static str, n: usize, large: bool) {
    let fx = Fixture::new(size, n, large);

    let mut g = fx.group(c, "contains_pos", "95%");
    each_filter!(fx.loaded, |lazy| bench_contains(&mut g, &fx, lazy, true));
    bench_contains_fast(&mut g, &fx, &fx.loaded.koel16, true);
    g.finish();

    let mut g = fx.group(c, "contains_neg", "95%");
    each_filter!(fx.loaded, |lazy| bench_contains(&mut g, &fx, lazy, false));
    bench_contains_fast(&mut g, &fx, &fx.loaded.koel16, false);
    g.finish();

    let mut g = fx.group(c, "insert", "90%");
    each_filter!(fx.loaded, |lazy| bench_insert(&mut g, &fx, lazy, false));
    g.finish();

    let mut g = fx.group(c, "insert_unique_new", "90%");
    each_filter!(fx.loaded, |lazy| bench_insert(&mut g, &fx, lazy, true));
    g.finish();

    let mut g = fx.group(c, "insert_unique_dup", "95%");
    each_filter!(fx.loaded, |lazy| bench_insert_unique_dup(&mut g, &fx, lazy));
    g.finish();

    let mut g = fx.group(c, "remove", "95%");
    each_filter!(fx.loaded, |lazy| bench_remove(&mut g, &fx, lazy));
    g.finish();

    // A sample is whole fills, at least one.
    let mut g = fx.group(c, "fill", "0-95%");
    configure(&mut g, fill_target(fx.fill16));
    bench_fill(&mut g, &fx, &fx.fill.koel16, fx.fill16);
    bench_fill_batch(&mut g, &fx, &fx.fill.koel16, fx.fill16);
    bench_fill(&mut g, &fx, &fx.fill.koel12, fx.fill12);
    bench_fill(&mut g, &fx, &fx.fill.cf, fx.fill16);
    bench_fill(&mut g, &fx, &fx.fill.cf_ahash, fx.fill16);
    g.finish();
}

fn single_thread(c: &mut Criterion) {
    single_thread_size(c, "1M", 1_000_000, false);
    single_thread_size(c, "16M", 16_000_000, true);
}

// ---------------------------------------------------------------- multi thread

/// The operations of a filter shared by threads.
trait Shared: Send + Sync {
    fn contains(&self, k: u64) -> bool;
    fn insert(&self, k: u64) -> bool;
    fn remove(&self, k: u64) -> bool;
    fn reset(&self);
    fn slots(&self) -> usize;
    fn with_filter(&self, f: &mut dyn FnMut(&dyn Filter));
}

impl Shared for koel::CuckooFilter {
    #[inline]
    fn contains(&self, k: u64) -> bool {
        koel::CuckooFilter::contains(self, &k)
    }
    #[inline]
    fn insert(&self, k: u64) -> bool {
        koel::CuckooFilter::insert(self, &k).is_ok()
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        koel::CuckooFilter::remove(self, &k)
    }
    fn reset(&self) {
        self.clear();
    }
    fn slots(&self) -> usize {
        self.capacity()
    }
    fn with_filter(&self, f: &mut dyn FnMut(&dyn Filter)) {
        f(self);
    }
}

impl Shared for RwLock<CfAhash> {
    #[inline]
    fn contains(&self, k: u64) -> bool {
        self.read().expect("poisoned").contains(&k)
    }
    #[inline]
    fn insert(&self, k: u64) -> bool {
        self.write().expect("poisoned").add(&k).is_ok()
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        self.write().expect("poisoned").delete(&k)
    }
    fn reset(&self) {
        self.write().expect("poisoned").reset();
    }
    fn slots(&self) -> usize {
        Filter::slots(&*self.read().expect("poisoned"))
    }
    fn with_filter(&self, f: &mut dyn FnMut(&dyn Filter)) {
        f(&*self.read().expect("poisoned"));
    }
}

fn shared_koel16(n: usize) -> Arc<koel::CuckooFilter> {
    Arc::new(koel16(n))
}

fn shared_rwlock_cf(n: usize) -> Arc<RwLock<CfAhash>> {
    Arc::new(RwLock::new(cf_ahash(n)))
}

/// Runs `rounds` rounds of `work(filter, thread, round)` on `threads`
/// threads, each holding a clone of `filter`, with `cleanup` between rounds
/// (untimed: every thread has finished `work` before any starts `cleanup`,
/// and the next round starts after every `cleanup`). Returns the sum over
/// rounds of the wall time from the first thread starting `work` to the last
/// one finishing it.
fn run_rounds<F, W, C>(
    filter: &Arc<F>,
    threads: usize,
    rounds: usize,
    work: W,
    cleanup: C,
) -> Duration
where
    F: Shared + ?Sized,
    W: Fn(&F, usize, usize) + Sync,
    C: Fn(&F, usize, usize) + Sync,
{
    let barrier = Barrier::new(threads);
    let spans: Vec<Vec<(Instant, Instant)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|tid| {
                let filter = Arc::clone(filter);
                let (barrier, work, cleanup) = (&barrier, &work, &cleanup);
                s.spawn(move || {
                    let mut spans = Vec::with_capacity(rounds);
                    for round in 0..rounds {
                        barrier.wait();
                        let start = Instant::now();
                        work(&filter, tid, round);
                        spans.push((start, Instant::now()));
                        barrier.wait();
                        cleanup(&filter, tid, round);
                    }
                    spans
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect()
    });
    (0..rounds)
        .map(|r| {
            let start = spans.iter().map(|s| s[r].0).min().expect("threads > 0");
            let end = spans.iter().map(|s| s[r].1).max().expect("threads > 0");
            end - start
        })
        .sum()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Contains,
    Insert,
    Remove,
}

/// 90 lookups, 9 inserts, 1 remove, in a fixed shuffled order.
fn mix_pattern() -> [Op; 100] {
    let mut ops = [Op::Contains; 100];
    ops[90..99].fill(Op::Insert);
    ops[99] = Op::Remove;
    for i in (1..ops.len()).rev() {
        let j = (splitmix(PROBE_BASE + (1 << 30) + i as u64) % (i as u64 + 1)) as usize;
        ops.swap(i, j);
    }
    ops
}

/// Per-thread cursors of `mt_mix`, and what the last round must undo.
#[derive(Default)]
struct MixState {
    probe: usize,
    op: usize,
    fresh: usize,
    base: usize,
    /// Fresh keys inserted this round: from this index of the thread's slice.
    inserted: (usize, usize),
    /// Base keys removed this round.
    removed: (usize, usize),
}

struct MtFixture {
    keys: Vec<u64>,
    negatives: Vec<u64>,
    fresh: Vec<u64>,
    /// 50% keys present at 90% load, 50% absent keys, interleaved at random.
    probes: Vec<u64>,
    koel: Lazy<Arc<koel::CuckooFilter>>,
    rwlock: Lazy<Arc<RwLock<CfAhash>>>,
    koel_fill: Lazy<Arc<koel::CuckooFilter>>,
    rwlock_fill: Lazy<Arc<RwLock<CfAhash>>>,
    fill16: usize,
    /// Items of each filter at 90% load (the smaller of the two).
    n90: usize,
}

impl MtFixture {
    fn new(n: usize) -> Self {
        let fill16 = (koel16(n).capacity() as f64 * LOAD) as usize;
        let keys = keys(0, n + n / 50);
        let n90 = (koel16(n).capacity().min(n.next_power_of_two()) as f64 * INSERT_LOAD) as usize;
        let negatives = self::keys(NEG_BASE, POOL);
        let probes = (0..POOL)
            .map(|i| {
                let r = splitmix(PROBE_BASE + i as u64);
                if r & 1 == 0 {
                    keys[(r >> 1) as usize % n90]
                } else {
                    negatives[i]
                }
            })
            .collect();
        MtFixture {
            keys,
            negatives,
            fresh: self::keys(FRESH_BASE, POOL),
            probes,
            koel: Lazy::new("koel16", shared_koel16, n),
            rwlock: Lazy::new("rwlock_cuckoofilter_ahash", shared_rwlock_cf, n),
            koel_fill: Lazy::new("koel16", shared_koel16, n),
            rwlock_fill: Lazy::new("rwlock_cuckoofilter_ahash", shared_rwlock_cf, fill16),
            fill16,
            n90,
        }
    }

    /// The shared filter of `lazy`, filled to 95% of its slots on first use.
    fn loaded<F: Shared>(&self, lazy: &Lazy<Arc<F>>) -> Arc<F> {
        let f = lazy.get_or_init(|f| {
            let n = (f.slots() as f64 * LOAD) as usize;
            let ok = self.keys[..n].iter().filter(|&&k| f.insert(k)).count();
            f.with_filter(&mut |f| report("mt 1M@95%", lazy.name, f, &self.negatives, n - ok));
            f
        });
        Arc::clone(&f)
    }
}

/// Counts the hits of `hit` over `count` probes from `start`, wrapping.
fn scan_probes(
    probes: &[u64],
    start: usize,
    count: usize,
    mut hit: impl FnMut(u64) -> bool,
) -> u64 {
    let mut i = start;
    let mut hits = 0u64;
    for _ in 0..count {
        hits += u64::from(hit(probes[i]));
        i += 1;
        if i == probes.len() {
            i = 0;
        }
    }
    hits
}

/// `mt_read`: every thread looks up its share of the mixed probes.
fn bench_mt_read<F: Shared>(
    g: &mut Group<'_>,
    mt: &MtFixture,
    lazy: &Lazy<Arc<F>>,
    threads: usize,
) {
    bench_mt_read_with(
        g,
        mt,
        lazy,
        lazy.name,
        threads,
        |f, probes, start, count| scan_probes(probes, start, count, |k| f.contains(k)),
    );
}

/// `mt_read` for koel with one `CuckooFilter::pin()` handle per thread.
fn bench_mt_read_pinned(
    g: &mut Group<'_>,
    mt: &MtFixture,
    lazy: &Lazy<Arc<koel::CuckooFilter>>,
    threads: usize,
) {
    bench_mt_read_with(
        g,
        mt,
        lazy,
        "koel16_pinned",
        threads,
        |f, probes, start, count| {
            let pinned = f.pin();
            scan_probes(probes, start, count, |k| pinned.contains(&k))
        },
    );
}

/// Runs `scan(filter, probes, start, count)` on every thread, each over its
/// own stretch of the probes.
fn bench_mt_read_with<F: Shared>(
    g: &mut Group<'_>,
    mt: &MtFixture,
    lazy: &Lazy<Arc<F>>,
    name: &str,
    threads: usize,
    scan: impl Fn(&F, &[u64], usize, usize) -> u64 + Sync,
) {
    let offset = Cell::new(0);
    g.bench_function(BenchmarkId::new(name, format!("{threads}t")), |b| {
        let filter = mt.loaded(lazy);
        b.iter_custom(|iters| {
            let per_thread = iters.div_ceil(threads as u64) as usize;
            let base = offset.get();
            offset.set((base + per_thread) % POOL);
            let probes = &mt.probes;
            let elapsed = run_rounds(
                &filter,
                threads,
                1,
                |f, tid, _| {
                    let start = (base + tid * (POOL / threads)) % POOL;
                    black_box(scan(f, probes, start, per_thread));
                },
                |_, _, _| {},
            );
            per_iters(elapsed, (per_thread * threads) as u64, iters)
        });
    });
}

/// Concurrent fills from empty to 95%, each thread inserting its share.
fn bench_mt_insert<F: Shared>(
    g: &mut Group<'_>,
    mt: &MtFixture,
    lazy: &Lazy<Arc<F>>,
    threads: usize,
) {
    let failures = AtomicU64::new(0);
    g.bench_function(BenchmarkId::new(lazy.name, format!("{threads}t")), |b| {
        let filter = Arc::clone(&lazy.get_or_init(|f| f));
        let (count, keys) = (mt.fill16, &mt.keys[..]);
        b.iter_custom(|iters| {
            let runs = fills_for(iters, count);
            let elapsed = run_rounds(
                &filter,
                threads,
                runs as usize,
                |f, tid, _| {
                    let part = &keys[tid * count / threads..(tid + 1) * count / threads];
                    let ok = part.iter().filter(|&&k| f.insert(k)).count();
                    failures.fetch_add((part.len() - ok) as u64, Ordering::Relaxed);
                },
                |f, tid, _| {
                    if tid == 0 {
                        f.reset();
                    }
                },
            );
            per_iters(elapsed, runs * count as u64, iters)
        });
    });
    warn_if(
        failures.load(Ordering::Relaxed),
        "failed inserts",
        lazy.name,
    );
}

/// 90% lookups / 9% inserts of fresh keys / 1% removes of present keys at
/// 90% load; every `MIX_ROUND` ops per thread, the round's inserts and
/// removes are undone untimed.
fn bench_mt_mix<F: Shared>(g: &mut Group<'_>, mt: &MtFixture, lazy: &Lazy<Arc<F>>, threads: usize) {
    let pattern = mix_pattern();
    let states: Vec<Mutex<MixState>> = (0..threads)
        .map(|tid| {
            Mutex::new(MixState {
                probe: tid * (POOL / threads),
                op: tid * 37 % pattern.len(),
                ..MixState::default()
            })
        })
        .collect();
    let fresh_len = POOL / THREADS[THREADS.len() - 1];
    let base_len = mt.n90 / threads;
    let failures = AtomicU64::new(0);
    let mut lowered = None;
    let (keys, fresh_keys, probes) = (&mt.keys[..], &mt.fresh[..], &mt.probes[..]);
    g.bench_function(BenchmarkId::new(lazy.name, format!("{threads}t")), |b| {
        let filter = mt.loaded(lazy);
        if lowered.is_none() {
            let range = (
                (filter.slots() as f64 * INSERT_LOAD) as usize,
                (filter.slots() as f64 * LOAD) as usize,
            );
            for &k in &mt.keys[range.0..range.1] {
                filter.remove(k);
            }
            lowered = Some(range);
        }
        b.iter_custom(|iters| {
            let per_thread = iters.div_ceil(threads as u64) as usize;
            let rounds = per_thread.div_ceil(MIX_ROUND);
            let elapsed = run_rounds(
                &filter,
                threads,
                rounds,
                |f, tid, round| {
                    let fresh = &fresh_keys[tid * fresh_len..(tid + 1) * fresh_len];
                    let base = &keys[tid * base_len..(tid + 1) * base_len];
                    let mut st = states[tid].lock().expect("poisoned");
                    let (mut p, mut o, mut ins, mut rem) = (st.probe, st.op, st.fresh, st.base);
                    let (mut n_ins, mut n_rem, mut hits, mut failed) = (0, 0, 0u64, 0u64);
                    for _ in 0..MIX_ROUND.min(per_thread - round * MIX_ROUND) {
                        match pattern[o] {
                            Op::Contains => {
                                hits += u64::from(f.contains(probes[p]));
                                p += 1;
                                if p == POOL {
                                    p = 0;
                                }
                            }
                            Op::Insert => {
                                failed += u64::from(!f.insert(fresh[ins]));
                                n_ins += 1;
                                ins += 1;
                                if ins == fresh.len() {
                                    ins = 0;
                                }
                            }
                            Op::Remove => {
                                failed += u64::from(!f.remove(base[rem]));
                                n_rem += 1;
                                rem += 1;
                                if rem == base.len() {
                                    rem = 0;
                                }
                            }
                        }
                        o += 1;
                        if o == pattern.len() {
                            o = 0;
                        }
                    }
                    black_box(hits);
                    st.inserted = (st.fresh, n_ins);
                    st.removed = (st.base, n_rem);
                    (st.probe, st.op, st.fresh, st.base) = (p, o, ins, rem);
                    if failed > 0 {
                        failures.fetch_add(failed, Ordering::Relaxed);
                    }
                },
                |f, tid, _| {
                    let fresh = &fresh_keys[tid * fresh_len..(tid + 1) * fresh_len];
                    let base = &keys[tid * base_len..(tid + 1) * base_len];
                    let st = states[tid].lock().expect("poisoned");
                    let (from, n) = st.inserted;
                    for j in 0..n {
                        f.remove(fresh[(from + j) % fresh.len()]);
                    }
                    let (from, n) = st.removed;
                    for j in 0..n {
                        f.insert(base[(from + j) % base.len()]);
                    }
                },
            );
            per_iters(elapsed, (per_thread * threads) as u64, iters)
        });
    });
    if let Some((lo, hi)) = lowered {
        let filter = mt.loaded(lazy);
        for &k in &mt.keys[lo..hi] {
            filter.insert(k);
        }
    }
    warn_if(
        failures.load(Ordering::Relaxed),
        "failed inserts or removes",
        lazy.name,
    );
}

fn multi_thread(c: &mut Criterion) {
    let mt = MtFixture::new(1_000_000);
    let measure = Duration::from_millis(2000);

    let mut g = c.benchmark_group("mt_read/1M@95%");
    configure(&mut g, measure);
    for t in THREADS {
        bench_mt_read(&mut g, &mt, &mt.koel, t);
        bench_mt_read_pinned(&mut g, &mt, &mt.koel, t);
        bench_mt_read(&mut g, &mt, &mt.rwlock, t);
    }
    g.finish();

    let mut g = c.benchmark_group("mt_insert/1M@0-95%");
    configure(&mut g, fill_target(mt.fill16).max(measure));
    for t in THREADS {
        bench_mt_insert(&mut g, &mt, &mt.koel_fill, t);
        bench_mt_insert(&mut g, &mt, &mt.rwlock_fill, t);
    }
    g.finish();

    let mut g = c.benchmark_group("mt_mix_90c9i1r/1M@90%");
    configure(&mut g, measure);
    for t in THREADS {
        bench_mt_mix(&mut g, &mt, &mt.koel, t);
        bench_mt_mix(&mut g, &mt, &mt.rwlock, t);
    }
    g.finish();
}

// ---------------------------------------------------------------- dispatch

/// koel picks its layout at build time and dispatches on it per call. On a
/// table that fits in L1, where nothing hides the overhead, this measures
/// `contains_hash` (no key hashing) for both layouts, and for koel16
/// through a path compiled for the 16-bit layout alone (`hardwired16`).
fn dispatch(c: &mut Criterion) {
    let mut g = c.benchmark_group("dispatch");
    configure(&mut g, Duration::from_millis(1500));
    let filters = [("koel16", 16), ("koel12", 12)].map(|(name, bits)| {
        let f = koel_filter(1000, bits);
        let n = (f.capacity() as f64 * LOAD) as usize;
        let inserted = keys(0, n);
        let failed = inserted.iter().filter(|&&k| f.insert(&k).is_err()).count();
        report("dispatch 1K@95%", name, &f, &keys(NEG_BASE, POOL), failed);
        let pos: Vec<u64> = inserted.iter().map(|k| f.hash(k)).collect();
        let neg: Vec<u64> = keys(NEG_BASE, 1024).iter().map(|k| f.hash(k)).collect();
        (name, f, pos, neg)
    });
    for (kind, positive) in [
        ("contains_hash_pos_1K@95%", true),
        ("contains_hash_neg_1K@95%", false),
    ] {
        // `hardwired16`: the same koel16 filter through a path compiled for
        // the 16-bit layout only, without the runtime layout `match`.
        let runs = filters
            .iter()
            .map(|(name, f, pos, neg)| (*name, f, pos, neg, false))
            .chain(std::iter::once({
                let (_, f, pos, neg) = &filters[0];
                ("hardwired16", f, pos, neg, true)
            }));
        for (name, f, pos, neg, hardwired) in runs {
            let probes = if positive { pos } else { neg };
            let cursor = Cell::new(0);
            g.bench_function(BenchmarkId::new(kind, name), |b| {
                b.iter_custom(|iters| {
                    let mut i = cursor.get();
                    let mut hits = 0u64;
                    let start = Instant::now();
                    for _ in 0..iters {
                        hits += u64::from(if hardwired {
                            f.contains_hash_hardwired_16x4(probes[i])
                        } else {
                            f.contains_hash(probes[i])
                        });
                        i += 1;
                        if i == probes.len() {
                            i = 0;
                        }
                    }
                    let elapsed = start.elapsed();
                    cursor.set(i);
                    black_box(hits);
                    elapsed
                });
            });
        }
    }
    g.finish();
}

criterion_group!(benches, single_thread, multi_thread, dispatch);
criterion_main!(benches);
