//! The load a `Growth::Fixed` filter reaches before its first refusal, and
//! its false-positive rate there: estimated (`stats`) and measured over 20M
//! absent keys. Shows why growth budgets take each table's bound with
//! every slot full rather than at its sizing load.
//!
//! ```text
//! cargo run --release -p koel-lab --example full_load_fpr -- 16
//! ```

use koel::{CuckooFilter, Growth};

#[path = "../../tests/common/splitmix.rs"]
mod splitmix64;

fn main() {
    let bits: u32 = std::env::args()
        .nth(1)
        .map_or(16, |a| a.parse().expect("bits"));
    let f = CuckooFilter::builder()
        .capacity(1_000_000)
        .fingerprint_bits(bits)
        .growth(Growth::Fixed)
        .seed(5)
        .build()
        .expect("filter");
    let mut n = 0u64;
    while f.insert(&splitmix64::at(0x5eed, n)).is_ok() {
        n += 1;
    }
    let s = f.stats();
    let absent = 20_000_000u64;
    let hits = (0..absent)
        .filter(|&i| f.contains(&splitmix64::at(0xab5e, i)))
        .count();
    println!(
        "{bits}-bit tags: load {:.4}, FPR estimate {:.3e}, measured {:.3e} ({hits} of {absent})",
        s.load_factor,
        s.false_positive_rate,
        hits as f64 / absent as f64
    );
}
