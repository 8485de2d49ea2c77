//! What a filter built for `n` keys costs as it grows past its tag bits
//! into region levels (issue 17; docs/design.md, "Wiring the engine into
//! the filter"): one thread inserts keys and, at each power of ten of
//! growth from 10x on, prints the levels and regions, bits per key
//! (`memory_bytes * 8 / len`, against 16.87 for a 16-bit filter built at
//! that size), the FPR measured over 1M absent keys against the filter's
//! estimate and its cap, the cache lines a lookup of an absent key reads
//! (two per level), the insert time of the last stretch, and the time of a
//! lookup of a present key (up to 1M of them, spread over all inserted)
//! and of an absent one.
//!
//! ```text
//! cargo run --release -p koel-lab --example region_growth -- 1000 10000 [doubling]
//! ```
//! (arguments: `n`, the growth to reach, and `doubling` for the levels
//! version 3 files hold, for comparison).

use koel::CuckooFilter;
use std::time::Instant;

#[path = "../../tests/common/splitmix.rs"]
mod splitmix64;

const RIGHT_SIZED_BITS: f64 = 16.87;
const ABSENT: u64 = 1_000_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).map_or(1000, |a| a.parse().expect("n"));
    let growth: u64 = args.get(2).map_or(10_000, |a| a.parse().expect("growth"));
    let mut b = CuckooFilter::builder().capacity(n as usize).seed(7);
    if args.get(3).is_some_and(|a| a == "doubling") {
        b = b.doubling_levels();
    }
    let f = b.build().expect("filter");
    let key = |i: u64| splitmix64::at(0x243F_6A88_85A3_08D3, i);
    let absent = |i: u64| splitmix64::at(0x1319_8A2E_0370_7344, i);
    println!(
        "| keys | growth | levels | regions | split | bits/key | x right-sized | FPR measured | FPR estimate | lines/lookup | insert ns/key | present ns | absent ns |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let (mut inserted, mut target) = (0u64, 10 * n);
    while target <= growth * n {
        let start = Instant::now();
        for i in inserted..target {
            f.insert(&key(i)).expect("growth stops only at memory");
        }
        let ns = start.elapsed().as_nanos() as f64 / (target - inserted) as f64;
        inserted = target;
        let s = f.stats();
        let bits = s.memory_bytes as f64 * 8.0 / s.len as f64;
        let start = Instant::now();
        let hits = (0..ABSENT).filter(|&i| f.contains(&absent(i))).count();
        let absent_ns = start.elapsed().as_nanos() as f64 / ABSENT as f64;
        let start = Instant::now();
        let step = (inserted / ABSENT).max(1);
        let found = (0..inserted)
            .step_by(step as usize)
            .filter(|&i| f.contains(&key(i)))
            .count();
        let present_ns = start.elapsed().as_nanos() as f64 / found as f64;
        println!(
            "| {inserted} | {}x | {} | {} | {} | {bits:.2} | {:.2}x | {:.3e} | {:.3e} | {} | {ns:.0} | {present_ns:.0} | {absent_ns:.0} |",
            inserted / n,
            s.levels,
            s.regions,
            s.split_slots,
            bits / RIGHT_SIZED_BITS,
            hits as f64 / ABSENT as f64,
            s.false_positive_rate,
            2 * s.levels,
        );
        target *= 10;
    }
    // No false negative at the end.
    assert!(
        (0..inserted).all(|i| f.contains(&key(i))),
        "a false negative"
    );
}
