//! Throughput by thread count: koel against the concurrent ways a Rust user
//! could share a filter or set between threads.
//!
//! ```text
//! cargo bench --bench threads                          # 1M and 16M
//! KOEL_BENCH_SIZES=1M cargo bench --bench threads -- read/
//! KOEL_BENCH_SIZES=100K cargo bench --bench threads -- --test   # smoke run
//! ```
//!
//! | id | structure |
//! | --- | --- |
//! | `koel16`, `koel12` | `koel::CuckooFilter` shared by reference, one call per key |
//! | `koel16_fixed` | koel16 built with `Growth::Fixed` (writes skip the writer announcement) |
//! | `koel_bloom` | `koel::BloomFilter`, FPR 1e-4: cannot remove |
//! | `mutex_cuckoofilter` | `Mutex<cuckoofilter::CuckooFilter<ahash::AHasher>>` |
//! | `rwlock_cuckoofilter` | `RwLock<...>` of the same: lookups share the read lock |
//! | `dashset_ahash` | `dashmap::DashSet<u64>` with ahash: exact, sharded locks |
//! | `fastbloom_atomic` | `fastbloom::AtomicBloomFilter`, FPR 1e-4, ahash: cannot remove |
//!
//! Groups, each with `threads` = 1, 2, 4 and 8 (8 is oversubscribed on a
//! 2-core machine, on purpose: it shows what preemption inside a critical
//! section costs):
//!
//! | group | one iteration | start |
//! | --- | --- | --- |
//! | `read/{n}/{id}/{threads}` | one lookup, 50% present / 50% absent keys | `0.9 n` items |
//! | `mix/{n}/{id}/{threads}` | one op of a 90% lookup (50/50) / 9% insert of a fresh key / 1% remove (of a key this thread inserted) mix; every 20k ops per thread the inserted keys are removed again, untimed; the Bloom filters skip the removes | `0.9 n` items |
//! | `insert/{n}/{id}/{threads}` | a whole concurrent fill from empty to `0.9 n` (`time` per fill, `thrpt` = inserts/s) | empty |
//!
//! `time` is wall time divided by the operations of all threads together,
//! i.e. 1 / aggregate throughput. The insert group runs only up to 4M
//! items (`KOEL_BENCH_FILL_MAX` raises it): at 16M one fill takes 1-4 s,
//! and 10 samples of 24 configurations would add 10-20 minutes.
//!
//! Load 0.9 n keeps the 9% inserts of `mix` clear of the table limit
//! (koel: ~86% of slots; `cuckoofilter`: ~86% of its power-of-two slots).

// `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

mod common;

use common::{keys, per_iters, sizes, splitmix, FRESH_BASE, NEG_BASE, SEED};
use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use std::hint::black_box;
use std::sync::{Barrier, Mutex, RwLock};
use std::time::{Duration, Instant};

const THREADS: [usize; 4] = [1, 2, 4, 8];
/// Operations per thread between two synchronisation points (and, in
/// `mix`, two untimed clean-ups).
const ROUND: usize = 20_000;
/// Mixed probe keys for lookups.
const PROBES: usize = 1 << 20;
const PEER_FPR: f64 = 1e-4;

type CfAhash = cuckoofilter::CuckooFilter<ahash::AHasher>;
type AHashState = ahash::RandomState;

fn ahash_state() -> AHashState {
    AHashState::with_seeds(SEED, SEED ^ 1, SEED ^ 2, SEED ^ 3)
}

/// A structure shared by reference between threads.
trait Shared: Sync {
    fn insert(&self, k: u64) -> bool;
    fn contains(&self, k: u64) -> bool;
    /// `None`: cannot remove.
    fn remove(&self, k: u64) -> Option<bool>;
}

impl Shared for koel::CuckooFilter {
    #[inline]
    fn insert(&self, k: u64) -> bool {
        koel::CuckooFilter::insert(self, &k).is_ok()
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        koel::CuckooFilter::contains(self, &k)
    }
    #[inline]
    fn remove(&self, k: u64) -> Option<bool> {
        Some(koel::CuckooFilter::remove(self, &k))
    }
}

impl Shared for koel::BloomFilter {
    #[inline]
    fn insert(&self, k: u64) -> bool {
        koel::BloomFilter::insert(self, &k);
        true
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        koel::BloomFilter::contains(self, &k)
    }
    fn remove(&self, _: u64) -> Option<bool> {
        None
    }
}

impl Shared for Mutex<CfAhash> {
    #[inline]
    fn insert(&self, k: u64) -> bool {
        self.lock().unwrap().add(&k).is_ok()
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        self.lock().unwrap().contains(&k)
    }
    #[inline]
    fn remove(&self, k: u64) -> Option<bool> {
        Some(self.lock().unwrap().delete(&k))
    }
}

impl Shared for RwLock<CfAhash> {
    #[inline]
    fn insert(&self, k: u64) -> bool {
        self.write().unwrap().add(&k).is_ok()
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        self.read().unwrap().contains(&k)
    }
    #[inline]
    fn remove(&self, k: u64) -> Option<bool> {
        Some(self.write().unwrap().delete(&k))
    }
}

impl Shared for dashmap::DashSet<u64, AHashState> {
    #[inline]
    fn insert(&self, k: u64) -> bool {
        dashmap::DashSet::insert(self, k);
        true
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        dashmap::DashSet::contains(self, &k)
    }
    #[inline]
    fn remove(&self, k: u64) -> Option<bool> {
        Some(dashmap::DashSet::remove(self, &k).is_some())
    }
}

impl Shared for fastbloom::AtomicBloomFilter<AHashState> {
    #[inline]
    fn insert(&self, k: u64) -> bool {
        fastbloom::AtomicBloomFilter::insert(self, &k);
        true
    }
    #[inline]
    fn contains(&self, k: u64) -> bool {
        fastbloom::AtomicBloomFilter::contains(self, &k)
    }
    fn remove(&self, _: u64) -> Option<bool> {
        None
    }
}

fn koel(n: usize, bits: u32, growth: koel::Growth) -> koel::CuckooFilter {
    koel::CuckooFilter::builder()
        .capacity(n)
        .fingerprint_bits(bits)
        .seed(SEED)
        .growth(growth)
        .build()
        .expect("koel filter")
}

/// What one size's benchmarks share.
struct Ctx {
    size: String,
    n: usize,
    /// The first `0.9 n` keys: loaded for `read` and `mix`, filled by
    /// `insert`.
    keys: Vec<u64>,
    probes: Vec<u64>,
    fill: bool,
}

/// All groups for one structure made by `make`, monomorphised for it (no
/// dynamic call per operation).
fn run<S: Shared>(c: &mut Criterion, ctx: &Ctx, name: &str, make: &dyn Fn(usize) -> S) {
    let s = make(ctx.n);
    let refused = ctx.keys.iter().filter(|&&k| !s.insert(k)).count();
    if refused > 0 {
        eprintln!("\nWARNING {name}/{}: {refused} inserts refused", ctx.size);
    }
    read(c, &ctx.size, name, &s, &ctx.probes);
    mix(c, &ctx.size, name, &s, &ctx.probes);
    drop(s);
    if ctx.fill {
        insert(c, &ctx.size, name, make, ctx.n, &ctx.keys);
    }
}

type Runner = Box<dyn Fn(&mut Criterion, &Ctx)>;

fn entries() -> Vec<(&'static str, Runner)> {
    use koel::Growth::{Double, Fixed};
    vec![
        (
            "koel16",
            Box::new(|c, x| run(c, x, "koel16", &|n| koel(n, 16, Double))),
        ),
        (
            "koel16_fixed",
            Box::new(|c, x| run(c, x, "koel16_fixed", &|n| koel(n, 16, Fixed))),
        ),
        (
            "koel12",
            Box::new(|c, x| run(c, x, "koel12", &|n| koel(n, 12, Double))),
        ),
        (
            "koel_bloom",
            Box::new(|c, x| {
                run(c, x, "koel_bloom", &|n| {
                    koel::BloomFilter::builder()
                        .capacity(n)
                        .false_positive_rate(PEER_FPR)
                        .seed(SEED)
                        .build()
                        .expect("koel bloom filter")
                })
            }),
        ),
        (
            "mutex_cuckoofilter",
            Box::new(|c, x| {
                run(c, x, "mutex_cuckoofilter", &|n| {
                    Mutex::new(CfAhash::with_capacity(n))
                })
            }),
        ),
        (
            "rwlock_cuckoofilter",
            Box::new(|c, x| {
                run(c, x, "rwlock_cuckoofilter", &|n| {
                    RwLock::new(CfAhash::with_capacity(n))
                })
            }),
        ),
        (
            "dashset_ahash",
            Box::new(|c, x| {
                run(c, x, "dashset_ahash", &|n| {
                    dashmap::DashSet::with_capacity_and_hasher(n, ahash_state())
                })
            }),
        ),
        (
            "fastbloom_atomic",
            Box::new(|c, x| {
                run(c, x, "fastbloom_atomic", &|n| {
                    fastbloom::AtomicBloomFilter::with_false_pos(PEER_FPR)
                        .hasher(ahash_state())
                        .expected_items(n)
                })
            }),
        ),
    ]
}

/// Fresh key `i` of thread `t`: disjoint from every other key set.
#[inline]
fn fresh(t: usize, i: u64) -> u64 {
    splitmix(FRESH_BASE + ((t as u64) << 32) + i)
}

/// Runs `rounds` rounds of `work(thread, round)` on `threads` threads,
/// timing only the work (from all threads released to all done), and
/// then `after(thread)` untimed after each round.
fn timed_rounds(
    threads: usize,
    rounds: usize,
    work: &(dyn Fn(usize, usize) + Sync),
    after: &(dyn Fn(usize) + Sync),
) -> Duration {
    let start_line = Barrier::new(threads + 1);
    let finish_line = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (start_line, finish_line) = (&start_line, &finish_line);
            s.spawn(move || {
                for r in 0..rounds {
                    start_line.wait();
                    work(t, r);
                    finish_line.wait();
                    after(t);
                }
            });
        }
        let mut total = Duration::ZERO;
        for _ in 0..rounds {
            start_line.wait();
            let t0 = Instant::now();
            finish_line.wait();
            total += t0.elapsed();
        }
        total
    })
}

fn configure(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500));
}

/// Lookups over `probes`, each thread from its own offset.
fn read<S: Shared>(c: &mut Criterion, size: &str, name: &str, s: &S, probes: &[u64]) {
    let mut g = c.benchmark_group(format!("read/{size}"));
    configure(&mut g);
    g.throughput(Throughput::Elements(1));
    for threads in THREADS {
        g.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &threads| {
            b.iter_custom(|iters| {
                let per_thread = (iters as usize).div_ceil(threads);
                let rounds = per_thread.div_ceil(ROUND);
                let work = |t: usize, r: usize| {
                    let mut i = (t * probes.len() / threads + r * ROUND) % probes.len();
                    let mut hits = 0usize;
                    for _ in 0..ROUND {
                        hits += usize::from(s.contains(probes[i]));
                        i += 1;
                        if i == probes.len() {
                            i = 0;
                        }
                    }
                    black_box(hits);
                };
                let took = timed_rounds(threads, rounds, &work, &|_| {});
                per_iters(took, (rounds * ROUND * threads) as u64, iters)
            });
        });
    }
    g.finish();
}

/// 90% lookups / 9% inserts / 1% removes; inserted keys are removed
/// again, untimed, after every round.
fn mix<S: Shared>(c: &mut Criterion, size: &str, name: &str, s: &S, probes: &[u64]) {
    let mut g = c.benchmark_group(format!("mix/{size}"));
    configure(&mut g);
    g.throughput(Throughput::Elements(1));
    for threads in THREADS {
        // Per thread: keys inserted this round and not yet removed, and
        // how many the timed removes already took (from the front).
        let inserted: Vec<Mutex<(Vec<u64>, usize)>> =
            (0..threads).map(|_| Mutex::new((Vec::new(), 0))).collect();
        let next_fresh: Vec<Mutex<u64>> = (0..threads).map(|_| Mutex::new(0)).collect();
        g.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &threads| {
            b.iter_custom(|iters| {
                let per_thread = (iters as usize).div_ceil(threads);
                let rounds = per_thread.div_ceil(ROUND);
                let work = |t: usize, r: usize| {
                    // Thread-local state, locked once per round (uncontended).
                    let mut own = inserted[t].lock().unwrap();
                    let mut fresh_i = next_fresh[t].lock().unwrap();
                    let (list, taken) = &mut *own;
                    let mut i = (t * probes.len() / threads + r * ROUND) % probes.len();
                    let mut hits = 0usize;
                    for op in 0..ROUND {
                        // Spread the 9 inserts and 1 remove over each 100 ops.
                        let kind = (op * 37) % 100;
                        if kind < 90 || (kind == 99 && *taken == list.len()) {
                            hits += usize::from(s.contains(probes[i]));
                            i += 1;
                            if i == probes.len() {
                                i = 0;
                            }
                        } else if kind < 99 {
                            let k = fresh(t, *fresh_i);
                            *fresh_i += 1;
                            if s.insert(k) {
                                list.push(k);
                            }
                        } else {
                            hits += usize::from(s.remove(list[*taken]).unwrap_or(false));
                            *taken += 1;
                        }
                    }
                    black_box(hits);
                };
                let after = |t: usize| {
                    let mut own = inserted[t].lock().unwrap();
                    let (list, taken) = &mut *own;
                    for &k in &list[*taken..] {
                        s.remove(k);
                    }
                    list.clear();
                    *taken = 0;
                };
                let took = timed_rounds(threads, rounds, &work, &after);
                per_iters(took, (rounds * ROUND * threads) as u64, iters)
            });
        });
    }
    g.finish();
}

/// Whole concurrent fills of `keys` into a fresh structure; threads take
/// interleaved slices.
fn insert<S: Shared>(
    c: &mut Criterion,
    size: &str,
    name: &str,
    make: &dyn Fn(usize) -> S,
    n: usize,
    keys: &[u64],
) {
    let mut g = c.benchmark_group(format!("insert/{size}"));
    configure(&mut g);
    g.warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(1))
        .throughput(Throughput::Elements(keys.len() as u64));
    for threads in THREADS {
        g.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &threads| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let s = make(n);
                    let s = &s;
                    let per = keys.len().div_ceil(threads);
                    let work = |t: usize, _: usize| {
                        let from = (t * per).min(keys.len());
                        let to = (from + per).min(keys.len());
                        let ok = keys[from..to].iter().filter(|&&k| s.insert(k)).count();
                        black_box(ok);
                    };
                    total += timed_rounds(threads, 1, &work, &|_| {});
                }
                total
            });
        });
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    let fill_max: usize = std::env::var("KOEL_BENCH_FILL_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000_000);
    let only = std::env::var("KOEL_BENCH_ONLY").ok();
    for (size, n) in sizes("1M,16M") {
        let loaded = n * 9 / 10;
        let keys = keys(0, loaded);
        // Present and absent keys alternate.
        let probes: Vec<u64> = (0..PROBES)
            .map(|i| {
                if i % 2 == 0 {
                    keys[(splitmix(i as u64) % loaded as u64) as usize]
                } else {
                    splitmix(NEG_BASE + i as u64)
                }
            })
            .collect();
        let ctx = Ctx {
            size,
            n,
            keys,
            probes,
            fill: n <= fill_max,
        };
        for (name, runner) in entries() {
            if only
                .as_ref()
                .is_none_or(|o| o.split(',').any(|s| s == name))
            {
                runner(c, &ctx);
            }
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
