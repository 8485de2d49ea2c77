//! Helpers shared by `benches/peers.rs` and `benches/threads.rs`: keys,
//! sizes, and the koel-to-criterion glue (keys for `benches/cuckoo.rs`
//! too).

#![allow(dead_code)]

use std::time::Duration;

/// koel's hash seed: fixed, so bucket placement is the same every run.
pub const SEED: u64 = 0x6b6f_656c_2d62_656e;

/// Key ranges: disjoint index ranges of one splitmix64 sequence give
/// disjoint key sets.
pub const NEG_BASE: u64 = 1 << 40;
pub const FRESH_BASE: u64 = 2 << 40;

#[path = "../../tests/common/splitmix.rs"]
mod splitmix64;

/// Element `i` of one splitmix64 sequence: a bijection of `i`.
pub fn splitmix(i: u64) -> u64 {
    splitmix64::at(0x243F_6A88_85A3_08D3, i)
}

pub fn keys(base: u64, n: usize) -> Vec<u64> {
    (base..base + n as u64).map(splitmix).collect()
}

/// Rescales the time of `done` operations to `iters` operations.
pub fn per_iters(elapsed: Duration, done: u64, iters: u64) -> Duration {
    if done == iters || done == 0 {
        elapsed
    } else {
        elapsed.mul_f64(iters as f64 / done as f64)
    }
}

/// The item counts to run, from `KOEL_BENCH_SIZES` (e.g. `1M,16M`), else
/// `default`. Suffixes `K` and `M` multiply by 10^3 and 10^6.
pub fn sizes(default: &str) -> Vec<(String, usize)> {
    let spec = std::env::var("KOEL_BENCH_SIZES").unwrap_or_else(|_| default.to_string());
    spec.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let s = s.trim();
            let (digits, mult) = match s.chars().last() {
                Some('M') => (&s[..s.len() - 1], 1_000_000),
                Some('K') => (&s[..s.len() - 1], 1_000),
                _ => (s, 1),
            };
            let n: usize = digits
                .parse()
                .unwrap_or_else(|_| panic!("KOEL_BENCH_SIZES: bad size {s:?}"));
            (s.to_string(), n * mult)
        })
        .collect()
}

/// Bytes of a `hashbrown` table (std `HashSet`, each `DashSet` shard)
/// holding `capacity` items of `item` bytes: buckets are the next power of
/// two above `capacity * 8 / 7`, each with one control byte (plus a group
/// of 16 trailing control bytes). An estimate from the documented layout;
/// neither type reports its heap size.
pub fn hashbrown_bytes(capacity: usize, item: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 {
        if capacity < 4 {
            4
        } else {
            8
        }
    } else {
        (capacity * 8 / 7).next_power_of_two()
    };
    buckets * (item + 1) + 16
}
