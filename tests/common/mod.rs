//! Shared test support: the configuration matrix and key generators.
#![allow(dead_code)]

use koel::{CuckooFilter, Growth};

pub mod splitmix;
// Not every test binary draws keys.
#[allow(unused_imports)]
pub use splitmix::Keys;

/// A growing filter for `n` keys of `bits`-bit tags under the cap `cap`.
pub fn growing(n: usize, bits: u32, cap: f64, seed: u64) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(n)
        .fingerprint_bits(bits)
        .max_false_positive_rate(cap)
        .seed(seed)
        .build()
        .expect("a valid configuration")
}

/// One filter configuration of the test matrix.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub name: &'static str,
    pub capacity: usize,
    pub fingerprint_bits: u32,
}

/// The matrix: a tiny table (one minimum-size region), the default layout,
/// and the compact layout. Built with `Growth::Fixed`: these tests pin down
/// the semantics of one table (growth has its own tests).
pub const MATRIX: [Config; 3] = [
    Config {
        name: "tiny",
        capacity: 1,
        fingerprint_bits: 16,
    },
    Config {
        name: "default",
        capacity: 20_000,
        fingerprint_bits: 16,
    },
    Config {
        name: "compact",
        capacity: 20_000,
        fingerprint_bits: 12,
    },
];

impl Config {
    pub fn build(&self, seed: u64) -> CuckooFilter {
        CuckooFilter::builder()
            .capacity(self.capacity)
            .fingerprint_bits(self.fingerprint_bits)
            .seed(seed)
            .growth(Growth::Fixed)
            .build()
            .expect("test configuration builds")
    }
}

/// Number of threads for stress tests: oversubscribe the machine's cores.
pub fn stress_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cores * 3).max(6)
}

/// `writers` threads insert `per_writer` keys each (`key(w, i)`) while
/// `readers` threads look up, over and over, the newest and a random
/// earlier key of each writer whose insert has returned, asserting each is
/// found. Returns the number of lookups checked.
pub fn readers_never_miss_acknowledged_keys(
    f: &CuckooFilter,
    writers: usize,
    readers: usize,
    per_writer: u64,
    key: impl Fn(usize, u64) -> u64 + Sync,
) -> u64 {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let acked: Vec<AtomicU64> = (0..writers).map(|_| AtomicU64::new(0)).collect();
    let done = AtomicBool::new(false);
    let checks = AtomicU64::new(0);
    let key = &key;
    std::thread::scope(|s| {
        for w in 0..writers {
            let acked = &acked;
            s.spawn(move || {
                for i in 0..per_writer {
                    f.insert(&key(w, i)).unwrap();
                    // Release: pairs with the readers' Acquire load.
                    acked[w].store(i + 1, Ordering::Release);
                }
            });
        }
        for r in 0..readers {
            let (acked, done, checks) = (&acked, &done, &checks);
            s.spawn(move || {
                let mut probe = r as u64;
                while !done.load(Ordering::Relaxed) {
                    for (w, a) in acked.iter().enumerate() {
                        let n = a.load(Ordering::Acquire);
                        if n == 0 {
                            continue;
                        }
                        // The newest acknowledged key and an older one.
                        for i in [n - 1, probe % n] {
                            assert!(f.contains(&key(w, i)), "writer {w} key {i} missed");
                            checks.fetch_add(1, Ordering::Relaxed);
                        }
                        probe = probe.wrapping_mul(6364136223846793005).wrapping_add(1);
                    }
                }
            });
        }
        s.spawn(|| {
            while acked.iter().any(|a| a.load(Ordering::Acquire) < per_writer) {
                std::thread::yield_now();
            }
            done.store(true, Ordering::Relaxed);
        });
    });
    checks.load(Ordering::Relaxed)
}

/// Races `insert_unique` of every key on [`stress_threads`] threads (at
/// least two), each walking the keys from its own offset so that every key
/// is raced at different moments; returns how many threads won each key.
pub fn insert_unique_wins(f: &CuckooFilter, keys: &[u64]) -> Vec<u8> {
    use std::sync::atomic::{AtomicU8, Ordering};
    let n = keys.len();
    let wins: Vec<AtomicU8> = (0..n).map(|_| AtomicU8::new(0)).collect();
    std::thread::scope(|s| {
        for t in 0..stress_threads().max(2) {
            let wins = &wins;
            s.spawn(move || {
                for j in 0..n {
                    let i = (j + t * 7919) % n;
                    if f.insert_unique(&keys[i]).unwrap() {
                        wins[i].fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    wins.iter().map(|w| w.load(Ordering::Relaxed)).collect()
}
