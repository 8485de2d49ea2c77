use crate::raw::bucket::{self, L16x4};
use crate::CuckooFilter;

/// Buckets of the first level with no free lane, and its load.
fn full_buckets_and_load(f: &CuckooFilter) -> (usize, f64) {
    let t = f.table();
    let full = (0..t.geometry().buckets() as usize)
        .filter(|&i| bucket::empty::<L16x4>(t.word(i).load(crate::sync::Ordering::Relaxed)) == 0)
        .count();
    (full, f.counters.len() as f64 / f.slots(t) as f64)
}

/// Fills a filter for 200 keys (64-bucket regions, whose first failed
/// search comes at about 0.80 full) by `insert` or `insert_unique` to
/// 100x: from the moment a level is added, the first level takes the keys
/// its pairs have a free lane for, in a bucket that keeps another (the
/// module's rule), so it fills further but no bucket of it fills up.
/// Before, plain inserts all went to the newest level (the first level
/// stayed at 0.84 here) and `insert_unique` took the last lanes too
/// (0.9999).
fn fill_to_100x(unique: bool) {
    let f = CuckooFilter::builder()
        .capacity(200)
        .seed(5)
        .build()
        .unwrap();
    let insert = |k: u64| {
        if unique {
            assert!(f.insert_unique(&k).unwrap() || f.contains(&k));
        } else {
            f.insert(&k).unwrap();
        }
    };
    let mut k = 0u64;
    while f.levels_count() == 1 {
        insert(k);
        k += 1;
    }
    let (full_then, load_then) = full_buckets_and_load(&f);
    for k in k..20_000 {
        insert(k);
    }
    let (full_now, load_now) = full_buckets_and_load(&f);
    assert_eq!(full_now, full_then, "buckets filled up (unique: {unique})");
    assert!(
        load_now >= load_then + 0.03 && load_now >= 0.87,
        "first level {load_then:.4} -> {load_now:.4} full (unique: {unique})"
    );
    // Every key is still found, wherever it went.
    assert!((0..20_000u64).all(|k| f.contains(&k)));
}

#[test]
fn plain_inserts_fill_the_first_level_keeping_a_lane_per_bucket_after_a_level_is_added() {
    fill_to_100x(false);
}

#[test]
fn insert_unique_fills_the_first_level_by_the_plain_inserts_rule() {
    fill_to_100x(true);
}

/// Lanes a remove frees in the first level are taken again: emptied by
/// removes and filled anew, the first level takes the new keys, not the
/// upper level.
#[test]
fn plain_inserts_take_the_lanes_removes_free_in_the_first_level() {
    let f = CuckooFilter::builder()
        .capacity(200)
        .seed(6)
        .build()
        .unwrap();
    for k in 0..20_000u64 {
        f.insert(&k).unwrap();
    }
    for k in 0..20_000u64 {
        assert!(f.remove(&k));
    }
    let first = f.levels().next().unwrap();
    assert!(first.len() < 100, "{} left", first.len());
    for k in 100_000..110_000u64 {
        f.insert(&k).unwrap();
    }
    let load = first.len() as f64 / first.slots() as f64;
    assert!(
        load >= 0.55,
        "first level {load:.4} full after 10,000 inserts"
    );
}

/// At a memory cap, a plain insert the newest level refuses searches the
/// first level for room while it is below its sizing load; when that
/// search finds none it sets the first level's full hint, as any search at
/// a growth cap does, so the refusals after it skip the search until the
/// next remove (the rustdoc of `insert`, "At the growth cap"). Before, a
/// remove cleared the hint and every later refusal searched again.
#[test]
fn a_fruitless_search_after_a_refusal_sets_the_first_levels_full_hint() {
    // 64-bucket regions: searches fail well below the sizing load.
    let f = CuckooFilter::builder()
        .capacity(200)
        .max_memory(100000)
        .seed(9)
        .build()
        .unwrap();
    let mut k = 0u64;
    while f.insert(&k).is_ok() {
        k += 1;
    }
    assert_eq!(f.levels_count(), 2);
    // A remove from the first level (key 0 went there first) clears its
    // hint.
    assert!(f.remove(&0u64));
    assert!(!f.table().room().is_full());
    let mut refused = 0;
    for k in (1 << 40)..(1 << 40) + 2_000u64 {
        refused += usize::from(f.insert(&k).is_err());
    }
    let (_, load) = full_buckets_and_load(&f);
    assert!(refused > 500, "{refused} refused");
    assert!(load < 0.95, "the first level reached its sizing load");
    assert!(f.table().room().is_full(), "no search set the hint");
}
