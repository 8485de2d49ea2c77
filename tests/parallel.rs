//! Parallel bulk operations (feature `rayon`), `Extend` and `FromIterator`:
//! the same answers as the sequential operations, exact lengths, no false
//! negatives.

#![cfg(all(feature = "rayon", not(loom)))]

use koel::{CuckooFilter, Growth, InsertError};
use rayon::prelude::*;

mod common;
use common::splitmix::mix64;

fn keys(range: std::ops::Range<u64>) -> Vec<u64> {
    range.map(mix64).collect()
}

fn filter(capacity: usize, bits: u32) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(capacity)
        .fingerprint_bits(bits)
        .seed(11)
        .build()
        .unwrap()
}

/// A filter that does not grow, so that it can be filled up.
fn fixed(capacity: usize) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(capacity)
        .growth(Growth::Fixed)
        .seed(11)
        .build()
        .unwrap()
}

#[test]
fn par_contains_equals_sequential_contains() {
    for bits in [16, 12] {
        let f = filter(100_000, bits);
        let present = keys(0..90_000);
        f.insert_many(&present).unwrap();
        // Present and absent keys interleaved, over many chunks.
        let probes: Vec<u64> = keys(45_000..135_000);
        let mut par = vec![false; probes.len()];
        f.par_contains(&probes, &mut par);
        let seq: Vec<bool> = probes.iter().map(|k| f.contains(k)).collect();
        assert_eq!(par, seq, "{bits}-bit: par_contains differs from contains");
        assert!(
            par[..45_000].iter().all(|&b| b),
            "{bits}-bit: false negative"
        );
    }
}

#[test]
fn par_insert_len_exact_and_no_false_negatives() {
    for bits in [16, 12] {
        let n = 200_000;
        let par_f = filter(n, bits);
        let seq_f = filter(n, bits);
        let ks = keys(0..n as u64);
        par_f.par_insert(&ks).unwrap();
        seq_f.insert_many(&ks).unwrap();
        assert_eq!(par_f.len(), n, "{bits}-bit: len");
        assert_eq!(par_f.stats().occupied_slots, n, "{bits}-bit: slots used");
        let mut out = vec![false; n];
        par_f.par_contains(&ks, &mut out);
        assert!(out.iter().all(|&b| b), "{bits}-bit: false negative");
        // The parallel fill answers absent keys like the sequential one,
        // up to where displacement happened to put colliding tags.
        let absent = keys(1 << 40..(1 << 40) + 100_000);
        let fp = |f: &CuckooFilter| absent.iter().filter(|k| f.contains(*k)).count() as f64;
        let (p, s) = (fp(&par_f), fp(&seq_f));
        assert!(
            (p - s).abs() <= 5.0 * s.max(25.0).sqrt(),
            "{bits}-bit: false positives {p} (parallel) vs {s} (sequential)"
        );
    }
}

#[test]
fn par_insert_unique_has_one_winner_per_key() {
    let distinct = 30_000u64;
    // Every key three times, spread over distant chunks.
    let ks: Vec<u64> = (0..3).flat_map(|_| keys(0..distinct)).collect();
    let f = filter(100_000, 16);
    let mut out = vec![false; ks.len()];
    f.par_insert_unique(&ks, &mut out).unwrap();
    let mut wins = vec![0u32; distinct as usize];
    for (i, &won) in out.iter().enumerate() {
        wins[i % distinct as usize] += u32::from(won);
    }
    assert!(wins.iter().all(|&w| w <= 1), "a key won twice");
    let total: u32 = wins.iter().sum();
    assert_eq!(f.len(), total as usize, "len counts the winners");
    // A key gets no win only by a tag collision with an earlier key: at
    // this load, a handful at most.
    assert!(
        total as u64 >= distinct - 30,
        "only {total} of {distinct} keys won"
    );
    assert!(keys(0..distinct).iter().all(|k| f.contains(k)));
}

#[test]
fn par_insert_into_a_full_filter_reports_what_went_in() {
    let f = fixed(1000);
    let ks = keys(0..20_000);
    let err = f.par_insert(&ks).unwrap_err();
    assert_eq!(err.error, InsertError::Full);
    assert_eq!(
        err.inserted,
        f.len(),
        "inserted counts what is in the filter"
    );
    assert!(err.inserted >= 1000, "the sized capacity fits");
    assert!(err.inserted < ks.len());
}

#[test]
#[should_panic(expected = "par_contains: keys and out differ in length")]
fn par_contains_rejects_mismatched_lengths() {
    let f = filter(1000, 16);
    f.par_contains(&[1u64, 2], &mut [false; 3]);
}

#[test]
fn par_extend_inserts_everything() {
    let mut f = filter(100_000, 12);
    let ks = keys(0..80_000);
    f.par_extend(ks.par_iter().copied());
    assert_eq!(f.len(), ks.len());
    assert!(ks.iter().all(|k| f.contains(k)));
}

#[test]
fn extend_inserts_everything() {
    let mut f = filter(10_000, 16);
    let ks = keys(0..5_000);
    f.extend(ks.iter().copied());
    f.extend(std::iter::empty::<u64>());
    assert_eq!(f.len(), ks.len());
    assert!(ks.iter().all(|k| f.contains(k)));
}

#[test]
#[should_panic(expected = "use insert_many")]
fn extend_past_a_fixed_capacity_panics_naming_the_fallible_call() {
    let mut f = fixed(1000);
    f.extend(keys(0..20_000));
}

#[test]
fn from_iterator_sizes_for_the_items() {
    let ks = keys(0..50_000);
    let f: CuckooFilter = ks.iter().copied().collect();
    assert_eq!(f.len(), ks.len());
    assert!(ks.iter().all(|k| f.contains(k)));
    // Sized for them: not more than a table for twice as many.
    assert!(f.capacity() < 2 * ks.len(), "capacity {}", f.capacity());
    let empty: CuckooFilter = std::iter::empty::<u64>().collect();
    assert!(empty.is_empty());
}

#[test]
fn par_insert_and_extend_grow_past_the_initial_capacity() {
    let ks = keys(0..40_000);
    let f = filter(1000, 16);
    f.par_insert(&ks).unwrap();
    assert_eq!(f.len(), ks.len());
    assert!(f.stats().generation > 0, "the table doubled");
    let mut out = vec![false; ks.len()];
    f.par_contains(&ks, &mut out);
    assert!(out.iter().all(|&b| b), "false negative across growth");

    let mut g = filter(1000, 16);
    g.extend(ks.iter().copied());
    assert_eq!(g.len(), ks.len());
    assert!(ks.iter().all(|k| g.contains(k)));
}
