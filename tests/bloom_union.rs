//! `BloomFilter::union` across hash algorithms: a filter loaded from a
//! format version 1 file hashes with `ahash`, one built today with XXH3.

#![cfg(not(loom))]

use koel::BloomFilter;
use std::path::PathBuf;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// `BloomFilter::union` promises "as if each of its keys were inserted
/// here" and "a `UnionError` saying which parameter differs; `self` is then
/// unchanged". It checks size, bits per key and seed, but not the hash
/// algorithm: a filter loaded from a format version 1 file keeps hashing
/// with `ahash`, a freshly built one uses XXH3. With equal size, `k` and
/// seed the union is accepted, ORs XXH3-placed bits into an `ahash` filter,
/// and every key of `other` is then missing from `self` (false negatives),
/// and `self` was changed.
#[test]
fn union_refuses_a_filter_that_hashes_with_another_algorithm() {
    let v1 = BloomFilter::load(golden("v1_bloom.koel")).unwrap();
    let fresh = BloomFilter::builder()
        .capacity(v1.capacity())
        .false_positive_rate(v1.target_false_positive_rate())
        .seed(v1.seed())
        .build()
        .unwrap();
    // Same shape and seed: only the hash algorithm differs.
    assert_eq!(
        (fresh.blocks(), fresh.bits_per_key(), fresh.seed()),
        (v1.blocks(), v1.bits_per_key(), v1.seed())
    );
    let keys: Vec<u64> = (1_000_000..1_000_050).collect();
    for k in &keys {
        fresh.insert(k);
    }
    match v1.union(&fresh) {
        Err(_) => {}
        Ok(()) => {
            let missed = keys.iter().filter(|k| !v1.contains(*k)).count();
            assert_eq!(
                missed,
                0,
                "union of an ahash (v1-loaded) and an XXH3 Bloom filter was accepted, \
                 and {missed} of {} keys of `other` are now false negatives",
                keys.len()
            );
        }
    }
}
