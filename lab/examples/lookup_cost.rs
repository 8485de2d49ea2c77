//! Instructions per single call, for `valgrind --tool=callgrind`: fills a
//! filter of 2^20 capacity to 95%, then runs `calls` single calls of one
//! kind. Run it once with the operation and once with its baseline (below); the difference of the two totals divided by
//! `calls` is the call's own cost, without the harness:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/lookup_cost default contains-present 1000000
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/lookup_cost default loop 1000000
//! ```
//!
//! Filters: `default` (`Growth::Double`), `fixed` (`Growth::Fixed`),
//! `leveled` (the default filter built for 1/1000 of the keys, so that
//! about 93% of them sit in its second level, of 21-bit tags), `bloom`.
//! Operations, each with its baseline (the same keys and loop, no call):
//! `contains-present` and `remove` (present keys; `loop`; remove at most
//! 996k calls), `contains-absent` (`loop-absent`), `contains-hash`
//! (present keys, hashes precomputed: the engine alone; `loop-hashes`),
//! `insert` (into a second filter filled to 50%: at most 400k calls;
//! `loop-insert`).

use koel::{BloomFilter, CuckooFilter, Growth};
use std::hint::black_box;

const CAPACITY: usize = 1 << 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (filter, op) = (args[1].as_str(), args[2].as_str());
    let calls: u64 = args[3].parse().expect("calls");
    let filled = (CAPACITY as f64 * 0.95) as u64;
    let growth = if filter == "fixed" {
        Growth::Fixed
    } else {
        Growth::Double
    };
    let capacity = if filter == "leveled" {
        CAPACITY / 1000
    } else {
        CAPACITY
    };
    let build = || {
        CuckooFilter::builder()
            .capacity(capacity)
            .growth(growth)
            .seed(7)
            .build()
            .expect("filter")
    };
    let cuckoo = build();
    let bloom = BloomFilter::builder()
        .capacity(CAPACITY)
        .seed(7)
        .build()
        .expect("bloom");
    for k in 0..filled {
        if filter == "bloom" {
            bloom.insert(&k);
        } else {
            cuckoo.insert(&k).expect("sized for it");
        }
    }
    let half = build();
    for k in 0..CAPACITY as u64 / 2 {
        half.insert(&(k | 1 << 40)).expect("sized for it");
    }
    let hashes: Vec<u64> = if op == "contains-hash" || op == "loop-hashes" {
        (0..calls).map(|i| cuckoo.hash(&(i % filled))).collect()
    } else {
        Vec::new()
    };
    // One loop per operation, each compiled on its own: the registers a
    // loop keeps are that operation's, not those of every arm of a match.
    let present = |i: u64| i % filled;
    let absent = |i: u64| i | 1 << 50;
    let hits = match (filter, op) {
        (_, "loop") => run(calls, |i| black_box(present(i)) & 1 == 0),
        (_, "loop-absent") => run(calls, |i| black_box(absent(i)) & 1 == 0),
        (_, "loop-hashes") => run(calls, |i| black_box(hashes[i as usize]) & 1 == 0),
        ("bloom", "contains-present") => run(calls, |i| bloom.contains(&present(i))),
        ("bloom", "contains-absent") => run(calls, |i| bloom.contains(&absent(i))),
        (_, "contains-present") => run(calls, |i| cuckoo.contains(&present(i))),
        (_, "contains-absent") => run(calls, |i| cuckoo.contains(&absent(i))),
        (_, "contains-hash") => run(calls, |i| cuckoo.contains_hash(hashes[i as usize])),
        (_, "insert") => run(calls, |i| half.insert(&(i | 1 << 41)).is_ok()),
        (_, "loop-insert") => run(calls, |i| black_box(i | 1 << 41) & 1 == 0),
        (_, "remove") => run(calls, |i| cuckoo.remove(&present(i))),
        _ => panic!("unknown filter/op {filter} {op}"),
    };
    println!("{filter} {op} {calls}: {hits} true");
}

/// Calls `op` for `0..calls`, counting its `true` answers.
#[inline(never)]
fn run(calls: u64, mut op: impl FnMut(u64) -> bool) -> u64 {
    let mut hits = 0u64;
    for i in 0..calls {
        hits += u64::from(black_box(op(i)));
    }
    hits
}
