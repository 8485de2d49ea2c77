//! koel's `BloomFilter` against `fastbloom` (0.17, `AtomicBloomFilter` and
//! `BloomFilter`, both given ahash and koel's bits per item) and against
//! koel's `CuckooFilter` (16-bit tags) at about the same false-positive
//! rate: single-thread and 2-thread insert and contains, 1M and 16M items.
//!
//! ```text
//! cargo bench --bench bloom                        # everything
//! cargo bench --bench bloom -- 'contains_neg/16M'  # one group
//! cargo bench --bench bloom -- --test              # smoke run
//! ```
//!
//! Every criterion iteration is ONE operation (`iter_custom` over
//! precomputed keys), so `time` is ns per operation; in the `mt2_*` groups
//! it is wall time over the operations of both threads together.
//!
//! | filter | what |
//! | --- | --- |
//! | `koel_bloom` | `koel::BloomFilter`, capacity n, p = 1.2e-4 (the cuckoo filter's rate; k = 8, ~23 bits/item) |
//! | `koel_bloom_batch` | the same, through `contains_many` / `insert_many` over 4096 keys |
//! | `fastbloom_atomic` | `fastbloom::AtomicBloomFilter::with_num_bits(koel's bits).hasher(ahash).expected_items(n)` |
//! | `fastbloom_atomic_fp` | `fastbloom::AtomicBloomFilter::with_false_pos(1.2e-4).hasher(ahash).expected_items(n)`: koel's rate, fewer bits (single thread) |
//! | `fastbloom` | `fastbloom::BloomFilter`, same bits as koel (single thread only: it needs `&mut` to insert) |
//! | `koel_cuckoo16` | `koel::CuckooFilter`, capacity n, 16-bit tags (FPR ~1.2e-4 at 95% load) |
//!
//! fastbloom is an unblocked Bloom filter: at the same bits per item its
//! false-positive rate is lower than koel's (koel trades accuracy for one
//! cache line per key). Before each size, one line per filter goes to
//! stderr with its bits per item and its measured FPR over 2^20 absent keys.
//!
//! | group | what one op is |
//! | --- | --- |
//! | `contains_pos` | lookup of an inserted key, filter holding n keys |
//! | `contains_neg` | lookup of a key never inserted, filter holding n keys |
//! | `insert` | insert of a fresh key while filling from 0 to n (cleared untimed when full) |
//! | `mt2_contains` | 2 threads, lookups, half present / half absent |
//! | `mt2_insert` | 2 threads filling disjoint halves of n keys from 0 (cleared untimed when full) |

// `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

type Ahash = ahash::RandomState;
type FastAtomic = fastbloom::AtomicBloomFilter<Ahash>;
type FastPlain = fastbloom::BloomFilter<Ahash>;

/// Fixed seeds: the same placement every run.
const SEED: u64 = 0x6b6f_656c_626c_6f6d;
/// The cuckoo filter's rate with 16-bit tags at 95% load.
const FPR: f64 = 1.2e-4;
/// Probe pools (present, absent) and batch length.
const POOL: usize = 1 << 20;
const BATCH: usize = 4096;
const SIZES: [(&str, usize); 2] = [("1M", 1 << 20), ("16M", 1 << 24)];

const ABSENT_BASE: u64 = 1 << 40;

#[path = "../tests/common/splitmix.rs"]
mod splitmix64;

fn splitmix(i: u64) -> u64 {
    splitmix64::at(0x1234_5678_9ABC_DEF0, i)
}

fn keys(base: u64, n: usize) -> Vec<u64> {
    (base..base + n as u64).map(splitmix).collect()
}

fn ahash_state() -> Ahash {
    Ahash::with_seeds(SEED, SEED ^ 1, SEED ^ 2, SEED ^ 3)
}

// ---------------------------------------------------------------- filters

/// The operations every filter here offers to one thread.
trait Single {
    fn insert(&mut self, k: u64);
    fn clear(&mut self);
    fn bytes(&self) -> usize;
}

/// The operations shared filters offer to many threads.
trait Shared: Sync + Send {
    fn insert(&self, k: u64);
    fn contains(&self, k: u64) -> bool;
    fn clear(&self);
}

impl Single for koel::BloomFilter {
    fn insert(&mut self, k: u64) {
        koel::BloomFilter::insert(self, &k);
    }
    fn clear(&mut self) {
        koel::BloomFilter::clear(self)
    }
    fn bytes(&self) -> usize {
        self.memory_usage()
    }
}

impl Shared for koel::BloomFilter {
    fn insert(&self, k: u64) {
        koel::BloomFilter::insert(self, &k);
    }
    fn contains(&self, k: u64) -> bool {
        koel::BloomFilter::contains(self, &k)
    }
    fn clear(&self) {
        koel::BloomFilter::clear(self)
    }
}

impl Single for FastAtomic {
    fn insert(&mut self, k: u64) {
        FastAtomic::insert(self, &k);
    }
    fn clear(&mut self) {
        FastAtomic::clear(self)
    }
    fn bytes(&self) -> usize {
        self.num_bits() / 8
    }
}

impl Shared for FastAtomic {
    fn insert(&self, k: u64) {
        FastAtomic::insert(self, &k);
    }
    fn contains(&self, k: u64) -> bool {
        FastAtomic::contains(self, &k)
    }
    fn clear(&self) {
        FastAtomic::clear(self)
    }
}

impl Single for FastPlain {
    fn insert(&mut self, k: u64) {
        FastPlain::insert(self, &k);
    }
    fn clear(&mut self) {
        FastPlain::clear(self)
    }
    fn bytes(&self) -> usize {
        self.num_bits() / 8
    }
}

impl Single for koel::CuckooFilter {
    fn insert(&mut self, k: u64) {
        koel::CuckooFilter::insert(self, &k).expect("sized for n");
    }
    fn clear(&mut self) {
        koel::CuckooFilter::clear(self)
    }
    fn bytes(&self) -> usize {
        self.memory_usage()
    }
}

impl Shared for koel::CuckooFilter {
    fn insert(&self, k: u64) {
        koel::CuckooFilter::insert(self, &k).expect("sized for n");
    }
    fn contains(&self, k: u64) -> bool {
        koel::CuckooFilter::contains(self, &k)
    }
    fn clear(&self) {
        koel::CuckooFilter::clear(self)
    }
}

fn koel_bloom(n: usize) -> koel::BloomFilter {
    koel::BloomFilter::builder()
        .capacity(n)
        .false_positive_rate(FPR)
        .seed(SEED)
        .build()
        .expect("koel bloom")
}

fn koel_cuckoo(n: usize) -> koel::CuckooFilter {
    koel::CuckooFilter::builder()
        .capacity(n)
        .seed(SEED)
        .build()
        .expect("koel cuckoo")
}

/// fastbloom with koel's bit count for `n` items.
fn fast_atomic(n: usize) -> FastAtomic {
    let bits = koel_bloom(n).memory_usage() * 8;
    fastbloom::AtomicBloomFilter::with_num_bits(bits)
        .hasher(ahash_state())
        .expected_items(n)
}

/// fastbloom sized for koel's target rate (fewer bits than koel).
fn fast_atomic_fp(n: usize) -> FastAtomic {
    fastbloom::AtomicBloomFilter::with_false_pos(FPR)
        .hasher(ahash_state())
        .expected_items(n)
}

fn fast_plain(n: usize) -> FastPlain {
    let bits = koel_bloom(n).memory_usage() * 8;
    fastbloom::BloomFilter::with_num_bits(bits)
        .hasher(ahash_state())
        .expected_items(n)
}

// ---------------------------------------------------------------- state

/// Filters of one size, filled with its `n` keys, plus the probe pools.
struct Filled {
    inserted: Vec<u64>,
    absent: Vec<u64>,
    bloom: Arc<koel::BloomFilter>,
    atomic: Arc<FastAtomic>,
    atomic_fp: FastAtomic,
    plain: FastPlain,
    cuckoo: Arc<koel::CuckooFilter>,
}

fn fpr_of(f: &dyn Fn(u64) -> bool, absent: &[u64]) -> f64 {
    absent.iter().filter(|&&k| f(k)).count() as f64 / absent.len() as f64
}

impl Filled {
    fn new(n: usize) -> Filled {
        let inserted = keys(0, n);
        let absent = keys(ABSENT_BASE, POOL);
        let mut bloom = koel_bloom(n);
        let mut atomic = fast_atomic(n);
        let mut atomic_fp = fast_atomic_fp(n);
        let mut plain = fast_plain(n);
        let mut cuckoo = koel_cuckoo(n);
        for &k in &inserted {
            Single::insert(&mut bloom, k);
            Single::insert(&mut atomic, k);
            Single::insert(&mut atomic_fp, k);
            Single::insert(&mut plain, k);
            Single::insert(&mut cuckoo, k);
        }
        let line = |name: &str, bytes: usize, fpr: f64| {
            eprintln!(
                "n={n} {name:<18} {:6.2} bits/item  FPR {fpr:.3e}",
                bytes as f64 * 8.0 / n as f64
            )
        };
        line(
            "koel_bloom",
            Single::bytes(&bloom),
            fpr_of(&|k| bloom.contains(&k), &absent),
        );
        line(
            "fastbloom_atomic",
            Single::bytes(&atomic),
            fpr_of(&|k| atomic.contains(&k), &absent),
        );
        line(
            "fastbloom_atomic_fp",
            Single::bytes(&atomic_fp),
            fpr_of(&|k| atomic_fp.contains(&k), &absent),
        );
        line(
            "fastbloom",
            Single::bytes(&plain),
            fpr_of(&|k| plain.contains(&k), &absent),
        );
        line(
            "koel_cuckoo16",
            Single::bytes(&cuckoo),
            fpr_of(&|k| cuckoo.contains(&k), &absent),
        );
        Filled {
            inserted,
            absent,
            bloom: Arc::new(bloom),
            atomic: Arc::new(atomic),
            atomic_fp,
            plain,
            cuckoo: Arc::new(cuckoo),
        }
    }
}

thread_local! {
    static FILLED: RefCell<HashMap<usize, &'static Filled>> = RefCell::new(HashMap::new());
}

/// The filled filters of size `n`, built on first use and kept (leaked)
/// for the rest of the run.
fn filled(n: usize) -> &'static Filled {
    FILLED.with(|m| {
        *m.borrow_mut()
            .entry(n)
            .or_insert_with(|| Box::leak(Box::new(Filled::new(n))))
    })
}

// ---------------------------------------------------------------- timing

/// Times `iters` lookups cycling through `pool`.
fn time_lookups(iters: u64, pool: &[u64], contains: impl Fn(u64) -> bool) -> Duration {
    let start = Instant::now();
    let mut hits = 0u64;
    // A wrapping cursor, not `i % len`: a division per lookup would be a
    // good part of an L1-resident lookup's time.
    let mut at = 0;
    for _ in 0..iters {
        hits += u64::from(contains(pool[at]));
        at += 1;
        if at == pool.len() {
            at = 0;
        }
    }
    black_box(hits);
    start.elapsed()
}

/// Times `iters` lookups through a batch call over `BATCH` keys.
fn time_batches(iters: u64, pool: &[u64], f: &koel::BloomFilter) -> Duration {
    let mut out = vec![false; BATCH];
    let start = Instant::now();
    let mut done = 0usize;
    let mut at = 0usize;
    while (done as u64) < iters {
        if at + BATCH > pool.len() {
            at = 0;
        }
        f.contains_many(&pool[at..at + BATCH], &mut out);
        black_box(&out);
        at += BATCH;
        done += BATCH;
    }
    start.elapsed().mul_f64(iters as f64 / done as f64)
}

/// A fill from empty to `n` keys, timed in pieces: each call inserts the
/// next keys, clearing (untimed) when the filter is full.
struct Filler {
    keys: Vec<u64>,
    cursor: usize,
}

impl Filler {
    fn new(n: usize) -> Filler {
        Filler {
            keys: keys(2 << 40, n),
            cursor: 0,
        }
    }

    /// The next `iters` keys (at most all `n`), after clearing if they do
    /// not fit; returns them and the factor to scale their time to `iters`.
    fn next(&mut self, iters: u64, clear: impl FnOnce()) -> (&[u64], f64) {
        let n = self.keys.len();
        let take = (iters as usize).clamp(1, n);
        if self.cursor + take > n {
            clear();
            self.cursor = 0;
        }
        let chunk = &self.keys[self.cursor..self.cursor + take];
        self.cursor += take;
        (chunk, iters as f64 / take as f64)
    }
}

fn time_inserts(filler: &mut Filler, iters: u64, f: &mut dyn Single) -> Duration {
    let (chunk, scale) = filler.next(iters, || f.clear());
    let chunk = chunk.to_vec();
    let start = Instant::now();
    for &k in &chunk {
        f.insert(k);
    }
    start.elapsed().mul_f64(scale)
}

/// Runs `op(thread, i)` for `i in 0..per_thread` on 2 threads started
/// together; returns the wall time.
fn two_threads(per_thread: usize, op: impl Fn(usize, usize) + Sync) -> Duration {
    let barrier = Barrier::new(3);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (barrier, op) = (&barrier, &op);
            s.spawn(move || {
                barrier.wait();
                for i in 0..per_thread {
                    op(t, i);
                }
                barrier.wait();
            });
        }
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        start.elapsed()
    })
}

// ---------------------------------------------------------------- groups

fn single_thread(c: &mut Criterion) {
    for (label, n) in SIZES {
        for (group_name, present) in [("contains_pos", true), ("contains_neg", false)] {
            let mut g = c.benchmark_group(format!("{group_name}/{label}"));
            g.throughput(Throughput::Elements(1));
            let f = filled(n);
            let pool: &[u64] = if present {
                &f.inserted[..POOL.min(n)]
            } else {
                &f.absent
            };
            g.bench_function("koel_bloom", |b| {
                b.iter_custom(|it| time_lookups(it, pool, |k| f.bloom.contains(&k)))
            });
            g.bench_function("koel_bloom_batch", |b| {
                b.iter_custom(|it| time_batches(it, pool, &f.bloom))
            });
            g.bench_function("fastbloom_atomic", |b| {
                b.iter_custom(|it| time_lookups(it, pool, |k| f.atomic.contains(&k)))
            });
            g.bench_function("fastbloom_atomic_fp", |b| {
                b.iter_custom(|it| time_lookups(it, pool, |k| f.atomic_fp.contains(&k)))
            });
            g.bench_function("fastbloom", |b| {
                b.iter_custom(|it| time_lookups(it, pool, |k| f.plain.contains(&k)))
            });
            g.bench_function("koel_cuckoo16", |b| {
                b.iter_custom(|it| time_lookups(it, pool, |k| f.cuckoo.contains(&k)))
            });
            g.finish();
        }

        let mut g = c.benchmark_group(format!("insert/{label}"));
        g.throughput(Throughput::Elements(1));
        let mut filler = Filler::new(n);
        let mut bloom = koel_bloom(n);
        g.bench_function("koel_bloom", |b| {
            b.iter_custom(|it| time_inserts(&mut filler, it, &mut bloom))
        });
        drop(bloom);
        let bloom = koel_bloom(n);
        let mut filler = Filler::new(n);
        g.bench_function("koel_bloom_batch", |b| {
            b.iter_custom(|it| {
                let (chunk, scale) = filler.next(it, || bloom.clear());
                let start = Instant::now();
                for piece in chunk.chunks(BATCH) {
                    black_box(bloom.insert_many(piece));
                }
                start.elapsed().mul_f64(scale)
            })
        });
        drop(bloom);
        let mut atomic = fast_atomic(n);
        let mut filler = Filler::new(n);
        g.bench_function("fastbloom_atomic", |b| {
            b.iter_custom(|it| time_inserts(&mut filler, it, &mut atomic))
        });
        drop(atomic);
        let mut atomic_fp = fast_atomic_fp(n);
        let mut filler = Filler::new(n);
        g.bench_function("fastbloom_atomic_fp", |b| {
            b.iter_custom(|it| time_inserts(&mut filler, it, &mut atomic_fp))
        });
        drop(atomic_fp);
        let mut plain = fast_plain(n);
        let mut filler = Filler::new(n);
        g.bench_function("fastbloom", |b| {
            b.iter_custom(|it| time_inserts(&mut filler, it, &mut plain))
        });
        drop(plain);
        let mut cuckoo = koel_cuckoo(n);
        let mut filler = Filler::new(n);
        g.bench_function("koel_cuckoo16", |b| {
            b.iter_custom(|it| time_inserts(&mut filler, it, &mut cuckoo))
        });
        g.finish();
    }
}

fn mt_contains<F: Shared + ?Sized>(f: &F, it: u64, present: &[u64], absent: &[u64]) -> Duration {
    let per_thread = (it as usize).div_ceil(2);
    let hits = std::sync::atomic::AtomicU64::new(0);
    let wall = two_threads(per_thread, |t, i| {
        let pool = if (i + t) % 2 == 0 { present } else { absent };
        if f.contains(pool[(i * 2 + t) % pool.len()]) {
            hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    black_box(hits);
    wall.mul_f64(it as f64 / (2 * per_thread) as f64)
}

fn mt_insert<F: Shared + ?Sized>(f: &F, filler: &mut Filler, it: u64) -> Duration {
    let (chunk, scale) = filler.next(it, || f.clear());
    let half = chunk.len().div_ceil(2);
    let wall = two_threads(half, |t, i| {
        if let Some(&k) = chunk.get(t * half + i) {
            f.insert(k);
        }
    });
    wall.mul_f64(scale)
}

fn two_thread(c: &mut Criterion) {
    for (label, n) in SIZES {
        let f = filled(n);
        let present = &f.inserted[..POOL.min(n)];
        let mut g = c.benchmark_group(format!("mt2_contains/{label}"));
        g.throughput(Throughput::Elements(1));
        let filters: [(&str, &dyn Shared); 3] = [
            ("koel_bloom", &*f.bloom),
            ("fastbloom_atomic", &*f.atomic),
            ("koel_cuckoo16", &*f.cuckoo),
        ];
        for (name, filter) in filters {
            g.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter_custom(|it| mt_contains(filter, it, present, &f.absent))
            });
        }
        g.finish();

        let mut g = c.benchmark_group(format!("mt2_insert/{label}"));
        g.throughput(Throughput::Elements(1));
        let empties: [(&str, Box<dyn Shared>); 3] = [
            ("koel_bloom", Box::new(koel_bloom(n))),
            ("fastbloom_atomic", Box::new(fast_atomic(n))),
            ("koel_cuckoo16", Box::new(koel_cuckoo(n))),
        ];
        for (name, filter) in empties {
            let mut filler = Filler::new(n);
            g.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter_custom(|it| mt_insert(&*filter, &mut filler, it))
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_secs(1));
    targets = single_thread, two_thread
}
criterion_main!(benches);
