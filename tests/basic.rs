//! Single-threaded behaviour: builder validation, the multiset semantics,
//! `clear`, `Full`, and a differential test against a sequential model.

mod common;

use common::{Keys, MATRIX};
use koel::{BuildError, CuckooFilter, InsertError};
use std::collections::HashMap;

#[test]
fn builder_rejects_bad_settings_with_errors() {
    assert_eq!(
        CuckooFilter::builder().capacity(0).build().unwrap_err(),
        BuildError::ZeroCapacity
    );
    for bits in [0, 8, 13, 32, 64] {
        assert_eq!(
            CuckooFilter::builder()
                .fingerprint_bits(bits)
                .build()
                .unwrap_err(),
            BuildError::UnsupportedFingerprintBits(bits)
        );
    }
    for bits in [16, 12] {
        match CuckooFilter::builder()
            .capacity(usize::MAX)
            .fingerprint_bits(bits)
            .build()
        {
            Err(BuildError::CapacityTooLarge { requested, max }) => {
                assert_eq!(requested, usize::MAX);
                assert!(max > 15_000_000_000, "max {max}");
            }
            other => panic!("expected CapacityTooLarge, got {other:?}"),
        }
    }
    // Every error explains itself.
    let msg = CuckooFilter::builder()
        .fingerprint_bits(9)
        .build()
        .unwrap_err()
        .to_string();
    assert!(msg.contains("16") && msg.contains("12"), "{msg}");
}

#[test]
fn allocation_failure_is_an_error_not_an_abort() {
    // A table larger than memory plus swap: with the kernel's heuristic or
    // strict overcommit the allocation is refused, and koel must say so.
    let mode = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib = |field: &str| -> Option<u64> {
        meminfo
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    let (Some(mem), Some(swap)) = (kib("MemTotal:"), kib("SwapTotal:")) else {
        eprintln!("skipped: no /proc/meminfo");
        return;
    };
    let table_bytes: u64 = 32 << 30; // 2^32 buckets of 8 bytes
    if mode.trim() == "1" || (mem + swap) * 1024 >= table_bytes {
        eprintln!("skipped: this machine would grant a 32 GiB allocation");
        return;
    }
    let capacity = 16_000_000_000usize; // needs close to 2^32 buckets
    match CuckooFilter::builder().capacity(capacity).build() {
        Err(BuildError::AllocationFailed { bytes }) => assert!(bytes > 30 << 30),
        other => panic!("expected AllocationFailed, got {other:?}"),
    }
}

#[test]
#[should_panic(expected = "with_capacity(0)")]
fn with_capacity_panics_on_zero_like_vec() {
    let _ = CuckooFilter::with_capacity(0);
}

#[test]
fn capacity_is_sized_exactly_not_rounded_to_a_power_of_two() {
    for (items, bits) in [(1_000_000usize, 16u32), (3_000_000, 16), (1_000_000, 12)] {
        let f = CuckooFilter::builder()
            .capacity(items)
            .fingerprint_bits(bits)
            .build()
            .unwrap();
        let slots = f.capacity() as f64;
        assert!(slots >= items as f64, "{slots} slots for {items} items");
        assert!(
            slots < items as f64 * 1.07,
            "{slots} slots for {items} items: oversized"
        );
    }
}

#[test]
fn multiset_insert_count_remove() {
    for cfg in MATRIX {
        let f = cfg.build(1);
        for copies in 1..=3 {
            f.insert("k").unwrap();
            assert_eq!(f.count("k"), copies, "{}", cfg.name);
        }
        assert_eq!(f.len(), 3);
        assert!(f.remove("k"));
        assert_eq!(f.count("k"), 2);
        assert!(f.remove("k") && f.remove("k"));
        assert_eq!(f.count("k"), 0);
        assert!(!f.contains("k"));
        assert!(!f.remove("k"), "{}: nothing left to remove", cfg.name);
        assert!(f.is_empty());
    }
}

#[test]
fn insert_unique_reports_presence() {
    for cfg in MATRIX {
        let f = cfg.build(2);
        assert_eq!(f.insert_unique(&42u64), Ok(true));
        assert_eq!(f.insert_unique(&42u64), Ok(false));
        assert_eq!(f.count(&42u64), 1);
        f.insert(&42u64).unwrap();
        assert_eq!(f.insert_unique(&42u64), Ok(false));
        assert_eq!(f.count(&42u64), 2);
        assert_eq!(f.len(), 2, "{}", cfg.name);
    }
}

#[test]
fn hash_variants_agree_with_key_methods() {
    let f = CuckooFilter::builder()
        .capacity(1000)
        .seed(9)
        .build()
        .unwrap();
    let h = f.hash("key");
    f.insert_hash(h).unwrap();
    assert!(f.contains("key"));
    assert_eq!(f.count_hash(h), 1);
    assert_eq!(f.insert_unique_hash(h), Ok(false));
    assert!(f.remove("key"));
    assert!(!f.contains_hash(h));
    // A fixed seed fixes the hash; another seed changes it.
    let same = CuckooFilter::builder()
        .capacity(1000)
        .seed(9)
        .build()
        .unwrap();
    let other = CuckooFilter::builder()
        .capacity(1000)
        .seed(10)
        .build()
        .unwrap();
    assert_eq!(same.hash("key"), h);
    assert_ne!(other.hash("key"), h);
    assert_eq!(same.seed(), 9);
}

#[test]
fn clear_empties_the_filter() {
    for cfg in MATRIX {
        let f = cfg.build(3);
        let n = f.capacity() / 2;
        for k in Keys(5).take(n) {
            f.insert(&k).unwrap();
        }
        assert_eq!(f.len(), n);
        f.clear();
        assert_eq!(f.len(), 0);
        assert_eq!(f.stats().occupied_slots, 0);
        assert!(Keys(5).take(n).all(|k| !f.contains(&k)), "{}", cfg.name);
        // And it is fully usable again.
        for k in Keys(6).take(n) {
            f.insert(&k).unwrap();
        }
        assert!(Keys(6).take(n).all(|k| f.contains(&k)));
    }
}

/// The filter's table, byte for byte, as `write_to` saves it.
fn table_bytes(f: &CuckooFilter) -> Vec<u8> {
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    bytes
}

/// A refused insert leaves the table byte for byte as it was, and `len`
/// and every statistic but the two refusal counters.
#[test]
fn full_table_refuses_and_changes_nothing() {
    for cfg in MATRIX {
        let f = cfg.build(4);
        let mut inserted = Vec::new();
        let mut keys = Keys(7);
        let refused = loop {
            let k = keys.next().unwrap();
            match f.insert(&k) {
                Ok(()) => inserted.push(k),
                Err(e) => break (k, e),
            }
        };
        assert_eq!(refused.1, InsertError::Full);
        // The first refusal (which searched for a path and failed): the
        // table equals that of a twin that never saw the refused key.
        let twin = cfg.build(4);
        for k in &inserted {
            twin.insert(k).unwrap();
        }
        assert!(
            table_bytes(&f) == table_bytes(&twin),
            "{}: the first refused insert changed the table",
            cfg.name
        );
        let mut expected = twin.stats();
        expected.insert_failures += 1;
        expected.growth_refusals += 1;
        assert_eq!(f.stats(), expected, "{}", cfg.name);
        // More inserts (of the same and of other keys): each refusal
        // changes nothing but its two counters.
        let mut refusals = 1;
        for k in std::iter::once(refused.0).chain(keys.take(200)) {
            let (bytes, mut expected) = (table_bytes(&f), f.stats());
            match f.insert(&k) {
                Err(e) => {
                    assert_eq!(e, InsertError::Full);
                    refusals += 1;
                    assert!(
                        table_bytes(&f) == bytes,
                        "{}: a refused insert changed the table",
                        cfg.name
                    );
                    expected.insert_failures += 1;
                    expected.growth_refusals += 1;
                    assert_eq!(f.stats(), expected, "{}", cfg.name);
                }
                Ok(()) => inserted.push(k),
            }
        }
        let after = f.stats();
        assert!(refusals > 1, "{}: no further refusal was tried", cfg.name);
        assert_eq!(after.len, inserted.len(), "{}", cfg.name);
        assert_eq!(after.occupied_slots, inserted.len());
        assert_eq!(after.insert_failures, refusals);
        assert!(
            inserted.iter().all(|k| f.contains(k)),
            "{}: an item was lost",
            cfg.name
        );
    }
}

/// The filter's state as the paper defines it: a multiset of (tag, bucket
/// pair). Two keys with the same tag that share a bucket share both buckets
/// (the alternate is a function of bucket and tag), so this model predicts
/// every answer exactly.
#[derive(Default)]
struct Model {
    copies: HashMap<(u64, usize), usize>,
}

impl Model {
    fn slot(f: &CuckooFilter, key: u64) -> (u64, usize) {
        let (tag, i1, i2) = f.placement(f.hash(&key));
        (tag, i1.min(i2))
    }
    fn count(&self, f: &CuckooFilter, key: u64) -> usize {
        self.copies.get(&Self::slot(f, key)).copied().unwrap_or(0)
    }
}

#[test]
fn random_operations_match_a_sequential_model() {
    for cfg in MATRIX {
        for seed in 0..20u64 {
            let f = cfg.build(seed);
            let mut model = Model::default();
            let mut len = 0usize;
            // Few distinct keys, many operations: duplicates, removes of
            // present and absent keys, and a table driven to Full.
            let universe = (f.capacity() as u64 * 3 / 2).max(8);
            let mut rng = Keys(seed * 1000 + 17);
            for _ in 0..(f.capacity() * 6).min(60_000) {
                let r = rng.next().unwrap();
                let key = (r >> 8) % universe;
                let slot = Model::slot(&f, key);
                match r % 8 {
                    0..=2 => match f.insert(&key) {
                        Ok(()) => {
                            *model.copies.entry(slot).or_default() += 1;
                            len += 1;
                        }
                        Err(InsertError::Full) => {}
                        // A full table refuses a key that fills half its
                        // pair with copies, with their exact number.
                        Err(InsertError::TooManyCopies { copies }) => {
                            let lanes = f.stats().tags_per_bucket as usize;
                            assert_eq!(copies, model.count(&f, key), "{}", cfg.name);
                            assert!(copies >= lanes, "{}: refused at {copies}", cfg.name);
                        }
                        Err(e) => panic!("{e}"),
                    },
                    3 => match f.insert_unique(&key) {
                        Ok(true) => {
                            assert_eq!(
                                model.count(&f, key),
                                0,
                                "{}: unique insert of a present key",
                                cfg.name
                            );
                            *model.copies.entry(slot).or_default() += 1;
                            len += 1;
                        }
                        Ok(false) => {
                            assert!(model.count(&f, key) > 0, "{}: presence invented", cfg.name)
                        }
                        Err(_) => assert_eq!(model.count(&f, key), 0),
                    },
                    4 | 5 => {
                        let expect = model.count(&f, key) > 0;
                        assert_eq!(f.remove(&key), expect, "{} seed {seed}: remove", cfg.name);
                        if expect {
                            *model.copies.get_mut(&slot).unwrap() -= 1;
                            len -= 1;
                        }
                    }
                    6 => assert_eq!(
                        f.count(&key),
                        model.count(&f, key),
                        "{} seed {seed}: count",
                        cfg.name
                    ),
                    _ => assert_eq!(
                        f.contains(&key),
                        model.count(&f, key) > 0,
                        "{} seed {seed}: contains",
                        cfg.name
                    ),
                }
                assert_eq!(f.len(), len, "{} seed {seed}: len must be exact", cfg.name);
            }
            assert_eq!(f.stats().occupied_slots, len);
            for key in 0..universe {
                assert_eq!(
                    f.count(&key),
                    model.count(&f, key),
                    "{} seed {seed}: final count",
                    cfg.name
                );
            }
        }
    }
}

#[test]
fn pinned_handle_gives_the_same_answers() {
    let f = CuckooFilter::builder()
        .capacity(10_000)
        .seed(1)
        .build()
        .unwrap();
    let mut p = f.pin();
    for k in Keys(1).take(5_000) {
        p.insert(&k).unwrap();
    }
    assert_eq!(p.insert_unique(&1u8), Ok(true));
    assert_eq!(p.insert_unique(&1u8), Ok(false));
    p.repin();
    assert!(Keys(1)
        .take(5_000)
        .all(|k| p.contains(&k) && f.contains(&k)));
    assert_eq!(p.count(&1u8), 1);
    assert!(p.remove(&1u8));
    assert_eq!(p.count(&1u8), 0);
    assert_eq!(p.filter().len(), 5_000);
    drop(p);
    assert_eq!(f.len(), 5_000);
}

#[test]
fn batch_operations_match_single_operations() {
    for cfg in MATRIX {
        let f = cfg.build(21);
        let n = f.capacity() * 9 / 10;
        let keys: Vec<u64> = Keys(21).take(n).collect();
        f.insert_many(&keys[..n / 2]).unwrap();
        for k in &keys[n / 2..] {
            f.insert(k).unwrap();
        }
        assert_eq!(f.len(), n);
        // Present keys, absent keys, and lengths around the prefetch window.
        for len in [0, 1, 7, 8, 9, 100, n] {
            let probe: Vec<u64> = keys
                .iter()
                .copied()
                .take(len / 2)
                .chain(Keys(99).take(len - len / 2))
                .collect();
            let mut out = vec![false; probe.len()];
            f.contains_many(&probe, &mut out);
            for (k, got) in probe.iter().zip(&out) {
                assert_eq!(*got, f.contains(k), "{}: contains_many disagrees", cfg.name);
            }
        }
    }
}

#[test]
fn insert_many_stops_at_full_and_reports_how_far_it_got() {
    for cfg in MATRIX {
        let f = cfg.build(22);
        let keys: Vec<u64> = Keys(22).take(f.capacity() * 2).collect();
        let err = f.insert_many(&keys).unwrap_err();
        assert_eq!(err.error, InsertError::Full);
        assert_eq!(f.len(), err.inserted, "{}", cfg.name);
        assert!(keys[..err.inserted].iter().all(|k| f.contains(k)));
        assert!(err.inserted as f64 >= f.capacity() as f64 * 0.9);
    }
}

#[test]
fn insert_unique_many_inserts_each_distinct_key_once() {
    let f = CuckooFilter::builder()
        .capacity(10_000)
        .seed(3)
        .build()
        .unwrap();
    let keys: Vec<u64> = (0..2_000u64).map(|i| i % 700).collect();
    let mut out = vec![false; keys.len()];
    f.insert_unique_many(&keys, &mut out).unwrap();
    assert_eq!(out.iter().filter(|&&b| b).count(), 700);
    assert!(out[..700].iter().all(|&b| b), "first occurrences win");
    assert!(out[700..].iter().all(|&b| !b), "repeats are duplicates");
    assert_eq!(f.len(), 700);
}

/// More copies of one key than a filter holds: `collect` cannot return an
/// error, so it panics with the reason instead of rebuilding larger and
/// larger tables that cannot hold them either (it looped forever).
#[test]
#[should_panic(expected = "this key already has 7 copies")]
fn collect_of_too_many_copies_panics_with_the_reason() {
    let _: CuckooFilter = std::iter::repeat_n(42u64, 8).collect();
}
