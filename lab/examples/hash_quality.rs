//! How well a filter's hash and addressing spread structured keys: for each
//! key family, fills a `Growth::Fixed` filter until its first refusal and
//! measures the load reached and the false-positive rate over absent keys
//! of the same family.
//!
//! ```text
//! cargo run --release -p koel-lab --example hash_quality -- [capacity] [absent] [seeds]
//! # the design note's run: 1048576 2000000 3
//! ```

use koel::{CuckooFilter, Growth};

/// The `i`-th key of family `f` (absent keys use the same shape, offset).
fn key(f: &str, i: u64) -> u64 {
    match f {
        "seq" => i,
        "shl8" => i.rotate_left(8),
        "shl16" => i.rotate_left(16),
        "shl24" => i.rotate_left(24),
        "shl32" => i.rotate_left(32),
        "shl40" => i.rotate_left(40),
        "shl48" => i.rotate_left(48),
        "rev" => i.reverse_bits(),
        "gray" => i ^ (i >> 1),
        "mul" => i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        _ => panic!("family {f}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let capacity: usize = args
        .get(1)
        .map_or(1 << 20, |a| a.parse().expect("capacity"));
    let absent: u64 = args
        .get(2)
        .map_or(4_000_000, |a| a.parse().expect("absent"));
    let seeds: u64 = args.get(3).map_or(3, |a| a.parse().expect("seeds"));
    println!("family  load(min/mean)  fpr(mean)  fpr/estimate");
    for f in [
        "seq", "shl8", "shl16", "shl24", "shl32", "shl40", "shl48", "rev", "gray", "mul",
    ] {
        let (mut lmin, mut lsum, mut fsum, mut est) = (1.0f64, 0.0, 0.0, 0.0);
        for s in 0..seeds {
            let filter = CuckooFilter::builder()
                .capacity(capacity)
                .growth(Growth::Fixed)
                .seed(0x5eed + s)
                .build()
                .expect("filter");
            let mut n = 0u64;
            // Keys 0.. go in; absent keys are the family's keys from 2^23 on
            // (shifted families keep their shape; 2^23 keys never go in).
            while n < (1 << 23) && filter.insert(&key(f, n)).is_ok() {
                n += 1;
            }
            let load = filter.load_factor();
            let fp = (0..absent)
                .filter(|&i| filter.contains(&key(f, (1 << 23) + i)))
                .count();
            lmin = lmin.min(load);
            lsum += load;
            fsum += fp as f64 / absent as f64;
            est += filter.false_positive_rate();
        }
        let k = seeds as f64;
        println!(
            "{f:7} {lmin:.4}/{:.4}  {:.3e}  {:.3}",
            lsum / k,
            fsum / k,
            (fsum / k) / (est / k)
        );
    }
}
