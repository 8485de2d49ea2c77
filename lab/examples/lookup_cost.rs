//! Instructions per single call, for `valgrind --tool=callgrind`: fills a
//! filter of 2^20 capacity to 95%, then runs `calls` single calls of one
//! kind. Run it once with the operation and once with `loop` (the same keys
//! and loop, no filter call); the difference of the two totals divided by
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
//! about 93% of them sit in its second level, of 21-bit tags), `bloom`. Operations: `loop`, `contains-present`, `contains-absent`,
//! `contains-hash` (present keys, hashes precomputed: the engine alone;
//! its baseline is `loop-hashes`), `insert` (into a second filter filled
//! to 50%: at most 400k calls) and `remove` (present keys: at most 996k).

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
    // Decoded once: string compares in the loop would differ per operation.
    #[derive(Clone, Copy)]
    enum Op {
        Loop,
        LoopHashes,
        BloomPresent,
        BloomAbsent,
        Present,
        Absent,
        Hash,
        Insert,
        Remove,
    }
    let op_code = match (filter, op) {
        (_, "loop") => Op::Loop,
        (_, "loop-hashes") => Op::LoopHashes,
        ("bloom", "contains-present") => Op::BloomPresent,
        ("bloom", "contains-absent") => Op::BloomAbsent,
        (_, "contains-present") => Op::Present,
        (_, "contains-absent") => Op::Absent,
        (_, "contains-hash") => Op::Hash,
        (_, "insert") => Op::Insert,
        (_, "remove") => Op::Remove,
        _ => panic!("unknown filter/op {filter} {op}"),
    };
    let mut hits = 0u64;
    for i in 0..calls {
        let present = i % filled;
        let absent = i | 1 << 50;
        let hit = match black_box(op_code) {
            Op::Loop => black_box(present) & 1 == 0,
            Op::LoopHashes => black_box(hashes[i as usize]) & 1 == 0,
            Op::BloomPresent => bloom.contains(&present),
            Op::BloomAbsent => bloom.contains(&absent),
            Op::Present => cuckoo.contains(&present),
            Op::Absent => cuckoo.contains(&absent),
            Op::Hash => cuckoo.contains_hash(hashes[i as usize]),
            Op::Insert => half.insert(&(i | 1 << 41)).is_ok(),
            Op::Remove => cuckoo.remove(&present),
        };
        hits += u64::from(black_box(hit));
    }
    println!("{filter} {op} {calls}: {hits} true");
}
