//! Shared test support: the configuration matrix and key generators.
#![allow(dead_code)]

use koel::{CuckooFilter, Growth};

pub mod splitmix;
// Not every test binary draws keys.
#[allow(unused_imports)]
pub use splitmix::Keys;

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
