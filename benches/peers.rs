//! koel against every peer a Rust user could pick, single thread, side by
//! side in one run: insert, contains (present and absent keys) and remove.
//!
//! ```text
//! cargo bench --bench peers                                 # 1M, 16M, 100M (~15 min)
//! KOEL_BENCH_SIZES=1M,16M cargo bench --bench peers         # drop 100M
//! KOEL_BENCH_ONLY=koel16,xorf_bfuse8 cargo bench --bench peers
//! KOEL_BENCH_SIZES=100K cargo bench --bench peers -- --test # smoke run
//! ```
//!
//! | id | structure |
//! | --- | --- |
//! | `koel16`, `koel12` | `koel::CuckooFilter`, 16-bit x 4 / 12-bit x 5, one call per key |
//! | `koel16_fixed` | koel16 built with `Growth::Fixed`: a table that never changes, so writes skip the writer announcement (like `cuckoofilter`, it cannot grow) |
//! | `koel16_pinned` | koel16 through one `pin()` handle per 4096-key slice |
//! | `koel16_batch`, `koel12_batch` | the same through `contains_many` / `insert_many` (remove: one call per key) |
//! | `cuckoofilter_ahash` | `cuckoofilter` 0.5 with `ahash::AHasher` (8-bit tags, slots rounded up to a power of two) |
//! | `scalable_cuckoo` | `scalable_cuckoo_filter`, FPR 1e-4, `ahash::AHasher` |
//! | `qfilter` | `qfilter` (quotient filter), FPR 1e-4, ahash; `insert_duplicated`, i.e. no presence check, like koel's `insert` |
//! | `xorf_bfuse8`, `xorf_bfuse16` | `xorf` binary fuse filters: static (built once from all keys, no insert or remove), the lookup ceiling; they take the `u64` key as its own hash |
//! | `fastbloom`, `fastbloom_atomic` | `fastbloom` `BloomFilter` / `AtomicBloomFilter`, FPR 1e-4, ahash |
//! | `hashset_ahash` | `std::collections::HashSet<u64>` with ahash: exact |
//! | `dashset_ahash` | `dashmap::DashSet<u64>` with ahash: exact, concurrent |
//! | `koel_bloom`, `koel_bloom_batch` | koel's `BloomFilter`, FPR 1e-4, one call per key / `contains_many` and `insert_many` |
//!
//! Every structure is sized for `n` items and holds the first `n` keys of
//! one splitmix64 sequence (koel: 95% of its slots; `cuckoofilter`: 95.4%
//! of its power-of-two slots). Peers that take a target FPR get 1e-4, about
//! koel16's rate at that load; each pays its own bits per item for it.
//!
//! Before a structure's first benchmark one line goes to stderr: items,
//! bytes, bits per item, false-positive rate measured over 2^20 absent keys,
//! and the time per insert of the fill that built it (per key of the build
//! for the static xorf filters). For 100M that line is the only insert
//! figure (see `insert_fill`).
//!
//! | group | one iteration |
//! | --- | --- |
//! | `contains_pos/{n}` | lookup of a present key (`time` = ns per lookup) |
//! | `contains_neg/{n}` | lookup of an absent key |
//! | `remove/{n}` | remove of a present key; batches of 4096, re-inserted untimed |
//! | `insert_fill/{n}` | a whole fill from empty to `n` items (`time` per fill; `thrpt` = inserts/s). 1M and 16M only: one 100M fill takes 10-40 s per structure, eleven samples of it for a dozen structures would be over an hour, so at 100M read the stderr line |
//!
//! Lookups run over 4096-key slices (the batch variants take a slice in
//! one call, the others loop), so the harness costs the same for all.
//! Memory: at 100M the key arrays (~0.8 GB) plus one structure at a time
//! (at most ~1.3 GB, the exact sets) are live; structures are built one
//! after another and dropped after their benchmarks.

// `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

mod common;

use common::{hashbrown_bytes, keys, sizes, NEG_BASE, SEED};
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use std::collections::HashSet;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Target FPR for the peers that take one: about koel16's at 95% load.
const PEER_FPR: f64 = 1e-4;
/// Absent keys probed (and used for the measured FPR).
const NEGATIVES: usize = 1 << 20;
/// Keys per call of the timed loops.
const CHUNK: usize = 4096;
/// Largest size with a criterion fill benchmark (see the module docs).
const MAX_FILL_BENCH: usize = 16_000_000;

type AHashState = ahash::RandomState;

fn ahash_state() -> AHashState {
    AHashState::with_seeds(SEED, SEED ^ 1, SEED ^ 2, SEED ^ 3)
}

// ---------------------------------------------------------------- peers

/// One structure under test, on `u64` keys (each hashes the key itself,
/// as a caller would). The `*_all` methods are the timed loops: defaults
/// loop over the single-key calls, monomorphised per type.
trait Peer {
    /// `false` if the structure refused the key.
    fn insert(&mut self, k: u64) -> bool;
    fn contains(&self, k: u64) -> bool;
    /// `None`: this structure cannot remove.
    fn remove(&mut self, k: u64) -> Option<bool>;
    /// Heap bytes (an estimate for the hash sets, see `hashbrown_bytes`).
    fn memory_bytes(&self) -> usize;

    /// Inserts every key; returns how many were refused.
    fn insert_all(&mut self, keys: &[u64]) -> usize {
        keys.iter().filter(|&&k| !self.insert(k)).count()
    }

    fn contains_all(&self, keys: &[u64], out: &mut [bool]) {
        for (o, &k) in out.iter_mut().zip(keys) {
            *o = self.contains(k);
        }
    }

    /// Removes every key; `None` if unsupported, else how many were absent.
    fn remove_all(&mut self, keys: &[u64]) -> Option<usize> {
        let mut missing = 0;
        for &k in keys {
            missing += usize::from(!self.remove(k)?);
        }
        Some(missing)
    }
}

/// How the koel variants call the filter.
#[derive(Clone, Copy, PartialEq)]
enum Calls {
    /// One method call per key.
    Single,
    /// One `pin()` handle per 4096-key slice, one call per key.
    Pinned,
    /// `contains_many` / `insert_many` per slice.
    Batch,
}

/// koel's cuckoo filter.
struct Koel {
    f: koel::CuckooFilter,
    calls: Calls,
}

impl Koel {
    fn boxed(n: usize, bits: u32, calls: Calls, growth: koel::Growth) -> Box<dyn Peer> {
        let f = koel::CuckooFilter::builder()
            .capacity(n)
            .fingerprint_bits(bits)
            .seed(SEED)
            .growth(growth)
            .build()
            .expect("koel filter");
        Box::new(Koel { f, calls })
    }
}

impl Peer for Koel {
    #[inline]
    fn insert(&mut self, k: u64) -> bool {
        self.f.insert(&k).is_ok()
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        self.f.contains(&k)
    }
    #[inline]
    fn remove(&mut self, k: u64) -> Option<bool> {
        Some(self.f.remove(&k))
    }
    fn memory_bytes(&self) -> usize {
        self.f.memory_usage()
    }
    fn insert_all(&mut self, mut keys: &[u64]) -> usize {
        match self.calls {
            Calls::Single => return keys.iter().filter(|&&k| !self.insert(k)).count(),
            Calls::Pinned => {
                let p = self.f.pin();
                return keys.iter().filter(|&&k| p.insert(&k).is_err()).count();
            }
            Calls::Batch => {}
        }
        let mut refused = 0;
        // insert_many stops at a refused key: count it, go on after it.
        while let Err(e) = self.f.insert_many(keys) {
            refused += 1;
            keys = &keys[e.failed_at + 1..];
        }
        refused
    }
    fn contains_all(&self, keys: &[u64], out: &mut [bool]) {
        match self.calls {
            Calls::Single => {
                for (o, k) in out.iter_mut().zip(keys) {
                    *o = self.f.contains(k);
                }
            }
            Calls::Pinned => {
                let p = self.f.pin();
                for (o, k) in out.iter_mut().zip(keys) {
                    *o = p.contains(k);
                }
            }
            Calls::Batch => self.f.contains_many(keys, out),
        }
    }

    fn remove_all(&mut self, keys: &[u64]) -> Option<usize> {
        let missing = match self.calls {
            Calls::Pinned => {
                let p = self.f.pin();
                keys.iter().filter(|&&k| !p.remove(&k)).count()
            }
            // No remove_many: the batch variant removes one call per key.
            Calls::Single | Calls::Batch => keys.iter().filter(|&&k| !self.f.remove(&k)).count(),
        };
        Some(missing)
    }
}

struct CuckooAhash(cuckoofilter::CuckooFilter<ahash::AHasher>);

impl Peer for CuckooAhash {
    #[inline]
    fn insert(&mut self, k: u64) -> bool {
        // On failure `add` evicts a random other item (a false negative);
        // counted as refused, and the positive lookups warn about it.
        self.0.add(&k).is_ok()
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        self.0.contains(&k)
    }
    #[inline]
    fn remove(&mut self, k: u64) -> Option<bool> {
        Some(self.0.delete(&k))
    }
    fn memory_bytes(&self) -> usize {
        self.0.memory_usage()
    }
}

struct ScalableCuckoo(scalable_cuckoo_filter::ScalableCuckooFilter<u64, ahash::AHasher>);

impl Peer for ScalableCuckoo {
    #[inline]
    fn insert(&mut self, k: u64) -> bool {
        self.0.insert(&k);
        true
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        self.0.contains(&k)
    }
    #[inline]
    fn remove(&mut self, k: u64) -> Option<bool> {
        Some(self.0.remove(&k))
    }
    fn memory_bytes(&self) -> usize {
        (self.0.bits() / 8) as usize
    }
}

struct QFilter(qfilter::Filter<Box<[u8]>, AHashState>);

impl Peer for QFilter {
    #[inline]
    fn insert(&mut self, k: u64) -> bool {
        self.0.insert_duplicated(k).is_ok()
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        self.0.contains(k)
    }
    #[inline]
    fn remove(&mut self, k: u64) -> Option<bool> {
        Some(self.0.remove(k))
    }
    fn memory_bytes(&self) -> usize {
        self.0.memory_usage()
    }
}

struct Fuse8(xorf::BinaryFuse8);
struct Fuse16(xorf::BinaryFuse16);

impl Peer for Fuse8 {
    fn insert(&mut self, _: u64) -> bool {
        false // static: built once from all keys
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        xorf::Filter::contains(&self.0, &k)
    }
    fn remove(&mut self, _: u64) -> Option<bool> {
        None
    }
    fn memory_bytes(&self) -> usize {
        self.0.fingerprints.len()
    }
}

impl Peer for Fuse16 {
    fn insert(&mut self, _: u64) -> bool {
        false // static: built once from all keys
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        xorf::Filter::contains(&self.0, &k)
    }
    fn remove(&mut self, _: u64) -> Option<bool> {
        None
    }
    fn memory_bytes(&self) -> usize {
        self.0.fingerprints.len() * 2
    }
}

struct FastBloom(fastbloom::BloomFilter<AHashState>);
struct FastBloomAtomic(fastbloom::AtomicBloomFilter<AHashState>);

/// Both fastbloom filters: insert-only, memory from their bit count.
macro_rules! fastbloom_peer {
    ($($t:ty),*) => {$(
        impl Peer for $t {
            #[inline]
            fn insert(&mut self, k: u64) -> bool {
                self.0.insert(&k);
                true
            }
            #[inline]
            fn contains(&self, k: u64) -> bool {
                self.0.contains(&k)
            }
            fn remove(&mut self, _: u64) -> Option<bool> {
                None
            }
            fn memory_bytes(&self) -> usize {
                self.0.num_bits() / 8
            }
        }
    )*};
}
fastbloom_peer!(FastBloom, FastBloomAtomic);

struct Exact(HashSet<u64, AHashState>);
struct Dash(dashmap::DashSet<u64, AHashState>);

impl Peer for Exact {
    #[inline]
    fn insert(&mut self, k: u64) -> bool {
        self.0.insert(k);
        true
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        self.0.contains(&k)
    }
    #[inline]
    fn remove(&mut self, k: u64) -> Option<bool> {
        Some(self.0.remove(&k))
    }
    fn memory_bytes(&self) -> usize {
        hashbrown_bytes(self.0.capacity(), 8)
    }
}

impl Peer for Dash {
    #[inline]
    fn insert(&mut self, k: u64) -> bool {
        self.0.insert(k);
        true
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        self.0.contains(&k)
    }
    #[inline]
    fn remove(&mut self, k: u64) -> Option<bool> {
        Some(self.0.remove(&k).is_some())
    }
    fn memory_bytes(&self) -> usize {
        // Shards hold a roughly equal share; estimate as one table.
        hashbrown_bytes(self.0.capacity(), 8)
    }
}

/// koel's blocked Bloom filter, one call per key or in batches.
struct KoelBloom {
    f: koel::BloomFilter,
    batch: bool,
}

impl KoelBloom {
    fn boxed(n: usize, batch: bool) -> Box<dyn Peer> {
        let f = koel::BloomFilter::builder()
            .capacity(n)
            .false_positive_rate(PEER_FPR)
            .seed(SEED)
            .build()
            .expect("koel bloom filter");
        Box::new(KoelBloom { f, batch })
    }
}

impl Peer for KoelBloom {
    #[inline]
    fn insert(&mut self, k: u64) -> bool {
        self.f.insert(&k);
        true
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        self.f.contains(&k)
    }
    fn remove(&mut self, _: u64) -> Option<bool> {
        None
    }
    fn memory_bytes(&self) -> usize {
        self.f.memory_usage()
    }
    fn insert_all(&mut self, keys: &[u64]) -> usize {
        if self.batch {
            black_box(self.f.insert_many(keys));
        } else {
            for k in keys {
                self.f.insert(k);
            }
        }
        0
    }
    fn contains_all(&self, keys: &[u64], out: &mut [bool]) {
        if self.batch {
            self.f.contains_many(keys, out);
        } else {
            for (o, k) in out.iter_mut().zip(keys) {
                *o = self.f.contains(k);
            }
        }
    }
}

/// How a structure is made: empty for `n` items and then filled, or built
/// from all keys at once (static).
enum Make {
    Empty(fn(usize) -> Box<dyn Peer>),
    Static(fn(&[u64]) -> Box<dyn Peer>),
}

struct Entry {
    name: &'static str,
    make: Make,
}

fn entries() -> Vec<Entry> {
    use koel::Growth::{Double, Fixed};
    use Make::{Empty, Static};
    let e = |name, make| Entry { name, make };
    vec![
        e(
            "koel16",
            Empty(|n| Koel::boxed(n, 16, Calls::Single, Double)),
        ),
        e(
            "koel16_fixed",
            Empty(|n| Koel::boxed(n, 16, Calls::Single, Fixed)),
        ),
        e(
            "koel16_pinned",
            Empty(|n| Koel::boxed(n, 16, Calls::Pinned, Double)),
        ),
        e(
            "koel16_batch",
            Empty(|n| Koel::boxed(n, 16, Calls::Batch, Double)),
        ),
        e(
            "koel12",
            Empty(|n| Koel::boxed(n, 12, Calls::Single, Double)),
        ),
        e(
            "koel12_batch",
            Empty(|n| Koel::boxed(n, 12, Calls::Batch, Double)),
        ),
        e(
            "cuckoofilter_ahash",
            Empty(|n| Box::new(CuckooAhash(cuckoofilter::CuckooFilter::with_capacity(n)))),
        ),
        e(
            "scalable_cuckoo",
            Empty(|n| {
                Box::new(ScalableCuckoo(
                    scalable_cuckoo_filter::ScalableCuckooFilterBuilder::new()
                        .initial_capacity(n)
                        .false_positive_probability(PEER_FPR)
                        .hasher(ahash::AHasher::default())
                        .finish(),
                ))
            }),
        ),
        e(
            "qfilter",
            Empty(|n| {
                Box::new(QFilter(
                    qfilter::Filter::new_with_hasher(n as u64, PEER_FPR, ahash_state())
                        .expect("qfilter"),
                ))
            }),
        ),
        e(
            "xorf_bfuse8",
            Static(|k| Box::new(Fuse8(xorf::BinaryFuse8::try_from(k).expect("bfuse8")))),
        ),
        e(
            "xorf_bfuse16",
            Static(|k| Box::new(Fuse16(xorf::BinaryFuse16::try_from(k).expect("bfuse16")))),
        ),
        e(
            "fastbloom",
            Empty(|n| {
                Box::new(FastBloom(
                    fastbloom::BloomFilter::with_false_pos(PEER_FPR)
                        .hasher(ahash_state())
                        .expected_items(n),
                ))
            }),
        ),
        e(
            "fastbloom_atomic",
            Empty(|n| {
                Box::new(FastBloomAtomic(
                    fastbloom::AtomicBloomFilter::with_false_pos(PEER_FPR)
                        .hasher(ahash_state())
                        .expected_items(n),
                ))
            }),
        ),
        e("koel_bloom", Empty(|n| KoelBloom::boxed(n, false))),
        e("koel_bloom_batch", Empty(|n| KoelBloom::boxed(n, true))),
        e(
            "hashset_ahash",
            Empty(|n| Box::new(Exact(HashSet::with_capacity_and_hasher(n, ahash_state())))),
        ),
        e(
            "dashset_ahash",
            Empty(|n| {
                Box::new(Dash(dashmap::DashSet::with_capacity_and_hasher(
                    n,
                    ahash_state(),
                )))
            }),
        ),
    ]
}

/// Entries selected by `KOEL_BENCH_ONLY` (comma-separated ids), else all.
fn selected() -> Vec<Entry> {
    let only = std::env::var("KOEL_BENCH_ONLY").ok();
    entries()
        .into_iter()
        .filter(|e| {
            only.as_ref()
                .is_none_or(|o| o.split(',').any(|s| s == e.name))
        })
        .collect()
}

// ---------------------------------------------------------------- benches

/// Builds `entry` holding `keys`, timing it; prints the stderr line.
fn build(entry: &Entry, size: &str, keys: &[u64], negatives: &[u64]) -> Box<dyn Peer> {
    let (p, refused, took) = match entry.make {
        Make::Empty(make) => {
            let mut p = make(keys.len());
            let t = Instant::now();
            let refused = p.insert_all(keys);
            (p, refused, t.elapsed())
        }
        Make::Static(make) => {
            let t = Instant::now();
            let p = make(keys);
            (p, 0, t.elapsed())
        }
    };
    report(
        entry.name,
        size,
        p.as_ref(),
        keys.len(),
        negatives,
        refused,
        took,
    );
    p
}

fn report(
    name: &str,
    size: &str,
    p: &dyn Peer,
    items: usize,
    negatives: &[u64],
    refused: usize,
    fill: Duration,
) {
    let mut out = vec![false; negatives.len()];
    p.contains_all(negatives, &mut out);
    let fp = out.iter().filter(|&&b| b).count();
    let bytes = p.memory_bytes();
    eprintln!(
        "\n[peer {size}] {name:<19} {items:>10} items | {bytes:>11} bytes = {:6.2} bits/item | \
         FPR measured {:.5}% ({fp}/{}) | fill {:6.1} ns/insert | refused inserts {refused}",
        8.0 * bytes as f64 / items as f64,
        100.0 * fp as f64 / negatives.len() as f64,
        negatives.len(),
        fill.as_nanos() as f64 / items as f64,
    );
}

/// Lookups of `probes`, cycling, `CHUNK` keys per call.
fn lookups(c: &mut Criterion, group: &str, name: &str, p: &dyn Peer, probes: &[u64], expect: bool) {
    let mut g = c.benchmark_group(group);
    configure(&mut g, probes.len());
    let mut cursor = 0;
    let mut wrong = 0u64;
    let mut out = vec![false; CHUNK];
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut left = iters as usize;
            let mut hits = 0usize;
            let start = Instant::now();
            while left > 0 {
                if cursor + CHUNK > probes.len() {
                    cursor = 0;
                }
                let m = left.min(CHUNK).min(probes.len());
                p.contains_all(&probes[cursor..cursor + m], &mut out[..m]);
                hits += out[..m].iter().filter(|&&b| b).count();
                cursor += m;
                left -= m;
            }
            let elapsed = start.elapsed();
            if expect {
                wrong += iters - hits as u64;
            }
            black_box(hits);
            elapsed
        });
    });
    g.finish();
    if wrong > 0 {
        eprintln!("\nWARNING {group}/{name}: {wrong} present keys not found (false negatives)");
    }
}

/// Removes present keys `CHUNK` at a time, re-inserting each batch untimed.
fn removes(c: &mut Criterion, group: &str, name: &str, p: &mut dyn Peer, keys: &[u64]) {
    let mut g = c.benchmark_group(group);
    configure(&mut g, keys.len());
    let mut cursor = 0;
    let (mut missing, mut refused) = (0usize, 0usize);
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                if cursor + CHUNK > keys.len() {
                    cursor = 0;
                }
                let m = left.min(CHUNK).min(keys.len());
                let batch = &keys[cursor..cursor + m];
                let start = Instant::now();
                missing += p.remove_all(batch).unwrap_or(0);
                total += start.elapsed();
                refused += p.insert_all(batch);
                cursor += m;
                left -= m;
            }
            total
        });
    });
    g.finish();
    if missing + refused > 0 {
        eprintln!(
            "\nWARNING {group}/{name}: {missing} keys not found, {refused} re-inserts refused"
        );
    }
}

/// Whole fills from empty to `keys.len()` items; one iteration is a fill.
fn fills(
    c: &mut Criterion,
    group: &str,
    name: &str,
    make: fn(usize) -> Box<dyn Peer>,
    keys: &[u64],
) {
    let mut g = c.benchmark_group(group);
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut p = make(keys.len());
                let start = Instant::now();
                black_box(p.insert_all(keys));
                total += start.elapsed();
            }
            total
        });
    });
    g.finish();
}

fn configure(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, n: usize) {
    let large = n > 4_000_000;
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(if large { 2000 } else { 1500 }))
        .throughput(Throughput::Elements(1));
}

fn peers(c: &mut Criterion) {
    let negatives = keys(NEG_BASE, NEGATIVES);
    for (size, n) in sizes("1M,16M,100M") {
        let keys = keys(0, n);
        for entry in selected() {
            let mut p = build(&entry, &size, &keys, &negatives);
            lookups(
                c,
                &format!("contains_pos/{size}"),
                entry.name,
                p.as_ref(),
                &keys,
                true,
            );
            lookups(
                c,
                &format!("contains_neg/{size}"),
                entry.name,
                p.as_ref(),
                &negatives,
                false,
            );
            if p.remove(keys[0]).is_some() {
                p.insert(keys[0]);
                removes(c, &format!("remove/{size}"), entry.name, p.as_mut(), &keys);
            }
            drop(p);
            if let Make::Empty(make) = entry.make {
                if n <= MAX_FILL_BENCH {
                    fills(c, &format!("insert_fill/{size}"), entry.name, make, &keys);
                }
            }
        }
    }
}

criterion_group!(benches, peers);
criterion_main!(benches);
