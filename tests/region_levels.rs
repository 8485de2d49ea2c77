//! Region levels (issue 17): every level a filter builds past its tag bits
//! grows by adding regions, about a twelfth at a time, and when its budget
//! allows no more regions the next level takes over. These tests cross
//! many steps and several level changes on small levels: a filter for 100
//! keys capped at 3e-4 builds levels of 33, 16, 8, 4, ... regions.

mod common;

use common::{insert_unique_wins, readers_never_miss_acknowledged_keys, stress_threads, Keys};
use koel::{CuckooFilter, InsertError};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::thread;

/// A filter whose region levels are small and change often: 100 keys,
/// capped at 3e-4 (its first table never doubles; level 1 may have 33
/// regions of 64 buckets, level 2 half as many, ...).
fn small_levels(seed: u64) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(100)
        .max_false_positive_rate(3e-4)
        .seed(seed)
        .build()
        .unwrap()
}

/// The `i`th key of writer `w`.
fn key(w: usize, i: u64) -> u64 {
    Keys((w as u64) << 40 | i).next().unwrap()
}

/// Writers insert while readers look up every key whose insert has
/// returned, across dozens of steps and several new levels: none is ever
/// missed.
#[test]
fn readers_never_miss_a_key_across_steps_and_level_changes() {
    let f = small_levels(41);
    let writers = 2;
    let readers = (stress_threads() - writers).max(1);
    let per_writer = 100_000u64;
    let checks = readers_never_miss_acknowledged_keys(&f, writers, readers, per_writer, key);
    let s = f.stats();
    assert!(s.levels >= 3, "the run crossed no level change: {s:?}");
    assert!(s.region_steps >= 20, "{s:?}");
    assert!(checks > 1000);
    assert_eq!(f.len(), writers * per_writer as usize);
    for w in 0..writers {
        assert!((0..per_writer).all(|i| f.contains(&key(w, i))));
    }
}

/// Threads race `insert_unique` over the same keys while region levels
/// step and change: never two winners for one key, `len` counts the
/// winners, every key is found.
#[test]
fn insert_unique_racing_across_region_levels_has_one_winner() {
    let f = small_levels(43);
    let n = 60_000usize;
    let keys: Vec<u64> = Keys(4_300).take(n).collect();
    let won = insert_unique_wins(&f, &keys);
    assert!(won.iter().all(|&w| w <= 1), "a key had two winners");
    let none = won.iter().filter(|&&w| w == 0).count();
    assert!(none as f64 <= 0.01 * n as f64, "{none} keys had no winner");
    assert_eq!(f.len(), n - none);
    assert!(f.stats().levels >= 3, "{:?}", f.stats());
    assert!(keys.iter().all(|k| f.contains(k)));
}

/// One key raced by every thread at once, key after key, while the levels
/// step: exactly one `Ok(true)` per key (a key may be a false positive:
/// then none).
#[test]
fn insert_unique_of_one_key_at_a_time_has_one_winner() {
    let f = small_levels(47);
    for k in Keys(4_700).take(20_000) {
        f.insert(&k).unwrap();
    }
    let threads = 4;
    let rounds = 3_000u64;
    let barrier = std::sync::Barrier::new(threads);
    let wins: Vec<AtomicU8> = (0..rounds).map(|_| AtomicU8::new(0)).collect();
    thread::scope(|s| {
        for _ in 0..threads {
            let (f, barrier, wins) = (&f, &barrier, &wins);
            s.spawn(move || {
                for r in 0..rounds {
                    barrier.wait();
                    if f.insert_unique(&key(7, r)).unwrap() {
                        wins[r as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let won: Vec<u8> = wins.iter().map(|w| w.load(Ordering::Relaxed)).collect();
    assert!(won.iter().all(|&w| w <= 1), "a key had two winners");
    assert!(won.iter().filter(|&&w| w == 1).count() as u64 >= rounds * 99 / 100);
    assert!((0..rounds).all(|r| f.contains(&key(7, r))));
}

/// The one-holder rule with region levels: a key only in a region level
/// is removed from there; a key whose tag shows in two levels (inserted
/// before and after a level appeared) is not removed, the remove says a
/// copy was found, and `ambiguous_removes` counts it; no other key is
/// touched.
#[test]
fn removes_keep_the_one_holder_rule_across_region_levels() {
    let f = small_levels(53);
    let early: Vec<u64> = Keys(5_300).take(200).collect();
    for k in &early {
        f.insert(k).unwrap();
    }
    assert_eq!(f.levels_count(), 1);
    let later: Vec<u64> = Keys(5_301).take(50_000).collect();
    for k in &later {
        f.insert(k).unwrap();
    }
    assert!(f.levels_count() >= 3, "{:?}", f.stats());
    // `early[0]` again: now its second copy goes to the newest level.
    f.insert(&early[0]).unwrap();
    assert_eq!(f.count(&early[0]), 2);
    let before = f.stats().ambiguous_removes;
    assert!(f.remove(&early[0]), "a copy was found");
    assert_eq!(f.count(&early[0]), 2, "an ambiguous remove removed");
    assert_eq!(f.stats().ambiguous_removes, before + 1);
    // Keys of the region levels come out, one copy each.
    let (gone, kept) = later.split_at(later.len() / 2);
    let mut removed = 0;
    for k in gone {
        assert!(f.remove(k));
        removed += usize::from(!f.contains(k));
    }
    assert!(removed as f64 >= 0.98 * gone.len() as f64, "{removed}");
    assert!(kept.iter().all(|k| f.contains(k)), "a kept key was lost");
    assert!(early.iter().all(|k| f.contains(k)), "an early key was lost");
    let s = f.stats();
    assert_eq!(
        f.len(),
        early.len() + 2 + kept.len() + (s.ambiguous_removes - before - 1) as usize - 1,
        "{s:?}"
    );
}

/// A `max_memory` that a region level reaches between steps: the insert
/// that needed the step is refused with `MemoryLimit` naming the user's
/// cap, its key is not stored, and no other key is lost; the filter stays
/// within the cap, and later inserts with room still go in.
#[test]
fn a_memory_cap_reached_at_a_step_refuses_and_loses_nothing() {
    let max = 3 << 20;
    let f = CuckooFilter::builder()
        .capacity(1_000)
        .seed(59)
        .max_memory(max)
        .build()
        .unwrap();
    let mut inserted = Vec::new();
    let mut refused = None;
    for k in Keys(5_900) {
        match f.insert(&k) {
            Ok(()) => inserted.push(k),
            Err(e) => {
                refused = Some((k, e));
                break;
            }
        }
    }
    let (k, err) = refused.unwrap();
    assert!(
        matches!(err, InsertError::MemoryLimit { max: m, needed } if m == max && needed > max),
        "{err:?}"
    );
    let s = f.stats();
    assert_eq!(s.levels, 2, "{s:?}");
    assert!(s.regions > 1, "refused when the level was built: {s:?}");
    assert!(f.memory_usage() <= max, "{} > {max}", f.memory_usage());
    assert_eq!(f.len(), inserted.len());
    assert_eq!(f.count(&k), usize::from(f.contains(&k)).min(1));
    assert!(inserted.iter().all(|k| f.contains(k)), "a key was lost");
    // Concurrent inserts at the cap: each either goes in or is refused
    // with the same error; none loses a key.
    let more: Vec<u64> = Keys(5_901).take(20_000).collect();
    let taken: Vec<AtomicBool> = more.iter().map(|_| AtomicBool::new(false)).collect();
    thread::scope(|s| {
        for t in 0..4 {
            let (f, more, taken) = (&f, &more, &taken);
            s.spawn(move || {
                for (i, k) in more.iter().enumerate().skip(t).step_by(4) {
                    match f.insert(k) {
                        Ok(()) => taken[i].store(true, Ordering::Relaxed),
                        Err(InsertError::MemoryLimit { max: m, .. }) => assert_eq!(m, max),
                        Err(e) => panic!("{e:?}"),
                    }
                }
            });
        }
    });
    let added = taken.iter().filter(|t| t.load(Ordering::Relaxed)).count();
    assert_eq!(f.len(), inserted.len() + added);
    assert!(inserted.iter().all(|k| f.contains(k)));
    assert!(more
        .iter()
        .zip(&taken)
        .all(|(k, t)| !t.load(Ordering::Relaxed) || f.contains(k)));
    assert!(f.memory_usage() <= max);
}

/// A clone taken while writers run (steps under way) holds every key
/// whose insert returned before the clone began, and works on its own.
#[test]
fn a_clone_during_steps_holds_every_earlier_key() {
    let f = small_levels(61);
    let per_writer = 60_000u64;
    let acked: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(0)).collect();
    thread::scope(|s| {
        for w in 0..2 {
            let (f, acked) = (&f, &acked);
            s.spawn(move || {
                for i in 0..per_writer {
                    f.insert(&key(w, i)).unwrap();
                    acked[w].store(i + 1, Ordering::Release);
                }
            });
        }
        let (f, acked) = (&f, &acked);
        s.spawn(move || {
            let mut copies = 0;
            while acked.iter().any(|a| a.load(Ordering::Acquire) < per_writer) {
                let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
                let c = f.clone();
                for (w, &n) in before.iter().enumerate() {
                    assert!((0..n).all(|i| c.contains(&key(w, i))), "writer {w}: lost");
                }
                c.insert(&u64::MAX).unwrap();
                assert!(c.contains(&u64::MAX));
                copies += 1;
            }
            assert!(copies > 0);
        });
    });
    assert!(f.stats().levels >= 3);
}

/// `stats` and `Debug` cover region levels: regions, steps, memory and
/// capacity are those of every level, and `memory_bytes` is
/// `memory_usage`.
#[test]
fn stats_and_debug_cover_region_levels() {
    let f = small_levels(67);
    let keys: Vec<u64> = Keys(6_700).take(30_000).collect();
    for k in &keys {
        f.insert(k).unwrap();
    }
    let s = f.stats();
    assert!(s.levels >= 2 && s.regions >= s.levels - 1, "{s:?}");
    assert!(s.region_steps > 0);
    assert_eq!(s.memory_bytes, f.memory_usage());
    assert_eq!(s.capacity, f.capacity());
    assert_eq!((s.len, s.occupied_slots), (keys.len(), keys.len()));
    assert!(s.false_positive_rate <= 3e-4, "{s:?}");
    assert!(format!("{f:?}").contains(&format!("levels: {}", s.levels)));
}

/// A 12-bit filter (which stops doubling at 4x) grows on region levels
/// too: 1,000 -> 1M keys, never refused, none lost, measured FPR within
/// the default cap.
#[test]
fn a_12_bit_filter_grows_a_thousand_fold_on_region_levels() {
    let f = CuckooFilter::builder()
        .capacity(1_000)
        .fingerprint_bits(12)
        .seed(71)
        .build()
        .unwrap();
    let keys: Vec<u64> = Keys(7_100).take(1_000_000).collect();
    for (i, k) in keys.iter().enumerate() {
        f.insert(k)
            .unwrap_or_else(|e| panic!("refused at {i} keys: {e}"));
    }
    assert!(keys.iter().all(|k| f.contains(k)), "a key was lost");
    let s = f.stats();
    assert!(s.levels >= 2 && s.regions > 1, "{s:?}");
    assert!(f.false_positive_rate() <= 1e-2);
    let hits = Keys(7_101)
        .take(200_000)
        .filter(|k| f.contains(&(k | 1 << 63)))
        .count();
    assert!(hits as f64 / 200_000.0 <= 1e-2, "{hits} of 200,000");
}
