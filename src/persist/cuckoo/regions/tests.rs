//! A level of regions' record through both loaders (`read_from`'s and
//! `load`'s) and `inspect`: round trips (split slots and growth kept),
//! saves racing inserters, and every refusal with its error.

use super::*;
use crate::cuckoo::CuckooFilter;
use crate::persist::cuckoo::Loaded;
use crate::persist::ChecksumStatus;
use crate::raw::bucket;
use crate::raw::geometry::Addressing;
use crate::raw::regions::tests::{empty, fill_with_junk, key, ABSENT, PRESENT};
use std::sync::atomic::AtomicUsize as StdUsize;
use std::sync::Arc as StdArc;

const SEED: u64 = 5;

/// The level's own growth settings in the samples.
fn own() -> GrowthPolicy {
    GrowthPolicy {
        growth: Growth::Double,
        max_memory: None,
        max_false_positive_rate: 1e-3,
    }
}

/// A first level (16-bit tags, default settings, Fold) to sit below.
fn first() -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(1000)
        .seed(SEED)
        .build()
        .unwrap()
}

/// A file of [`first`] with `level` above it; `first_len` gets the first
/// record's length.
fn file_of(level: &Regions) -> (Vec<u8>, usize) {
    file_above(&first(), level)
}

/// A file of `below` with `level` above it, and the first record's length.
fn file_above(below: &CuckooFilter, level: &Regions) -> (Vec<u8>, usize) {
    let mut bytes = Vec::new();
    below.write_level(&mut bytes, true).unwrap();
    let first_len = bytes.len();
    let algorithm = below.hash_algorithm();
    level
        .with_snapshot(|v| write_record(&mut bytes, v, SEED, algorithm, &own(), false))
        .unwrap();
    (bytes, first_len)
}

/// Slots of the map of the sample `refused` edits (8 regions at most).
fn sample_slots() -> usize {
    crate::raw::regions::slots_for(8)
}

/// A level of 64-bucket regions holding keys `0..n` of [`PRESENT`].
fn level(n: u64, max_regions: usize) -> Regions {
    let r = Regions::new(64, max_regions).unwrap();
    for i in 0..n {
        r.insert(key(PRESENT, i)).unwrap();
    }
    r.finish_step();
    r
}

/// The level of regions `bytes` holds, by `read_from`'s reader and by
/// `load`'s (which must agree).
fn read_both(bytes: &[u8]) -> Result<(Regions, GrowthPolicy), LoadError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.koel");
    std::fs::write(&path, bytes).unwrap();
    let read = saved::read_levels::<CuckooFilter>(bytes);
    let loaded = saved::load_levels::<CuckooFilter>(&path);
    let top = |levels: Result<Vec<Loaded>, LoadError>| {
        let mut levels = levels?;
        assert_eq!(levels.len(), 2);
        match levels.pop() {
            Some(Loaded::Regions { level, policy }) => Ok((*level, policy)),
            _ => panic!("the second record is a level of regions"),
        }
    };
    match (top(read), top(loaded)) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.0.occupied(), b.0.occupied());
            Ok(a)
        }
        (Err(a), Err(b)) => {
            assert_eq!(
                std::mem::discriminant(&a),
                std::mem::discriminant(&b),
                "read_from's reader said {a}, load's {b}"
            );
            Err(a)
        }
        (a, b) => panic!(
            "the loaders disagree: {:?} / {:?}",
            a.map(|_| ()),
            b.map(|_| ())
        ),
    }
}

#[test]
fn a_level_of_regions_round_trips_through_both_loaders() {
    let r = Regions::new(64, 64).unwrap();
    for i in 0..3000 {
        r.insert(key(PRESENT, i)).unwrap();
    }
    r.finish_step();
    // A step whose hops find no room leaves split slots, which the file
    // keeps. (The junk, of slots elsewhere, goes before the save.)
    assert!(r.grow());
    let new = r.regions() - 1;
    fill_with_junk(&r, new);
    r.finish_step();
    empty(&r, new);
    assert!(r.split_slots() > 0);
    let (bytes, first_len) = file_of(&r);
    assert_eq!(&bytes[first_len + 8..first_len + 10], &[4, 0], "version 4");
    assert_eq!(bytes[8], 3, "the first record stays version 3");
    let (back, policy) = read_both(&bytes).unwrap();
    assert_eq!(
        policy.max_false_positive_rate,
        own().max_false_positive_rate
    );
    assert_eq!((back.regions(), back.steps()), (r.regions(), r.steps()));
    assert_eq!(back.split_slots(), r.split_slots());
    assert_eq!(back.len(), 3000);
    assert!(
        (0..3000).all(|i| back.contains(key(PRESENT, i))),
        "false negative"
    );
    let fp = |l: &Regions| (0..50_000).filter(|&i| l.contains(key(ABSENT, i))).count();
    assert_eq!(fp(&back), fp(&r), "the same answers for absent keys");
    // Written again, the same bytes; and it grows on.
    assert_eq!(file_of(&back).0, bytes);
    for i in 3000..6000 {
        back.insert(key(PRESENT, i)).unwrap();
    }
    back.finish_step();
    assert!(back.steps() > r.steps());
    assert!((0..6000).all(|i| back.contains(key(PRESENT, i))));
}

/// A filter hashed with XXH3 (format version 2, loaded from such a file)
/// writes its level of regions as version 4 with hash algorithm 2; the
/// regions address as they always do.
#[test]
fn a_level_of_regions_above_an_xxh3_filter_round_trips() {
    let below = CuckooFilter::from_parts(
        crate::cuckoo::LayoutKind::Tags16x4,
        crate::hash::KeyHasher::with_algorithm(SEED, HashAlgorithm::Xxh3),
        GrowthPolicy::default(),
        Geometry::new(64, 0, Addressing::V1),
        0,
        |_| Ok(()),
    )
    .unwrap();
    let r = level(2000, 64);
    let (bytes, first_len) = file_above(&below, &r);
    assert_eq!((bytes[8], bytes[first_len + 8]), (2, 4), "versions");
    assert_eq!(bytes[first_len + 11], 2, "XXH3");
    let (back, _) = read_both(&bytes).unwrap();
    assert!(
        (0..2000).all(|i| back.contains(key(PRESENT, i))),
        "false negative"
    );
    let info = crate::inspect(&bytes[..]).unwrap();
    assert_eq!(info.upper_levels[0].hash_algorithm, 2);
}

#[test]
fn inspect_reports_the_level_of_regions() {
    let r = level(3000, 64);
    let (bytes, _) = file_of(&r);
    let info = crate::inspect(&bytes[..]).unwrap();
    assert_eq!((info.levels, info.checksum), (2, ChecksumStatus::Valid));
    assert_eq!(info.item_count, Some(3000));
    assert_eq!(info.regions, None, "the first level is a table");
    let up = &info.upper_levels[0];
    assert_eq!(up.format_version, 4);
    assert_eq!((up.m0, up.generation, up.fingerprint_bits), (64, 0, 21));
    assert_eq!(up.buckets, 64 * r.regions() as u64);
    assert_eq!(
        up.regions,
        Some(RegionsInfo {
            regions: r.regions() as u64,
            max_regions: 64,
            steps: r.steps(),
            split_slots: r.split_slots() as u64,
        })
    );
    assert_eq!(up.counted_items, Some(3000));
}

/// A save while two threads insert holds every key acknowledged before
/// it began.
#[test]
fn a_save_racing_inserters_holds_every_acknowledged_key() {
    let r = StdArc::new(Regions::new(64, 4096).unwrap());
    let acked = StdArc::new([StdUsize::new(0), StdUsize::new(0)]);
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let (r, acked) = (StdArc::clone(&r), StdArc::clone(&acked));
            std::thread::spawn(move || {
                for i in 0..30_000u64 {
                    r.insert(key(w, i)).unwrap();
                    // Release: pairs with the Acquire before the save.
                    acked[w as usize].store(i as usize + 1, std::sync::atomic::Ordering::Release);
                }
            })
        })
        .collect();
    let mut saves = 0;
    while !writers.iter().all(|h| h.is_finished()) || saves < 2 {
        // Acquire: pairs with the writers' Release.
        let before = [0, 1].map(|w| acked[w].load(std::sync::atomic::Ordering::Acquire) as u64);
        let (bytes, _) = file_of(&r);
        let (back, _) = read_both(&bytes).unwrap();
        for (w, &n) in before.iter().enumerate() {
            let lost = (0..n).find(|&i| !back.contains(key(w as u64, i)));
            assert_eq!(lost, None, "save {saves} lost writer {w}'s key");
        }
        saves += 1;
    }
    for h in writers {
        h.join().unwrap();
    }
}

// ---- Every refusal ---------------------------------------------------------

/// Seals the record at `at..end` again after an edit: its header checksum
/// and its trailer's checksum.
fn reseal(b: &mut [u8], at: usize) {
    let sum = xxhash_rust::xxh3::xxh3_64(&b[at..at + 88]);
    b[at + 88..at + 96].copy_from_slice(&sum.to_le_bytes());
    let end = b.len();
    let sum = xxhash_rust::xxh3::xxh3_64(&b[at..end - 8]);
    b[end - 8..].copy_from_slice(&sum.to_le_bytes());
}

/// The sample file (a level of three regions holding 300 keys) with
/// `edit` applied to its second record (`b[0]` is that record's first
/// byte), resealed: the error both loaders give.
fn refused(edit: impl FnOnce(&mut Vec<u8>)) -> LoadError {
    let r = level(300, 8);
    while r.regions() < 3 {
        assert!(r.grow());
        r.finish_step();
    }
    let (bytes, first_len) = file_of(&r);
    let mut record = bytes[first_len..].to_vec();
    edit(&mut record);
    let mut b = bytes[..first_len].to_vec();
    b.extend_from_slice(&record);
    reseal(&mut b, first_len);
    read_both(&b).err().expect("refused")
}

/// Byte offset in the record of the level block's word `i`.
fn block_word(i: usize) -> usize {
    96 + 8 * i
}

fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    stream::le_word(&b[at..at + 8])
}

#[test]
fn a_bucket_count_that_is_not_whole_regions_is_refused() {
    for buckets in [0, 64 * 3 + 2, 64 * 16385] {
        let e = refused(|b| set_u64(b, 32, buckets));
        assert!(
            matches!(e, LoadError::InvalidRegionLevel { field: "bucket count", value, .. } if value == buckets),
            "{e}"
        );
        assert!(e.to_string().contains("whole regions"), "{e}");
    }
}

#[test]
fn header_fields_a_level_of_regions_never_has_are_refused() {
    let e = refused(|b| b[19] = 1);
    assert!(
        matches!(e, LoadError::InvalidLevel { reason, .. } if reason.contains("generation 0")),
        "{e}"
    );
    let e = refused(|b| {
        let len = get_u64(b, 56);
        set_u64(b, 56, len - 8);
    });
    assert!(matches!(e, LoadError::PayloadLengthMismatch { .. }), "{e}");
    // Another seed than the level below's.
    let e = refused(|b| b[40] ^= 1);
    assert!(matches!(e, LoadError::InvalidLevel { level: 1, .. }), "{e}");
}

#[test]
fn a_level_of_regions_as_the_first_record_is_refused() {
    let (bytes, first_len) = file_of(&level(10, 4));
    let e = saved::read_levels::<CuckooFilter>(&bytes[first_len..])
        .err()
        .expect("refused");
    assert!(
        matches!(e, LoadError::InvalidLevel { level: 0, reason } if reason.contains("never the first")),
        "{e}"
    );
}

#[test]
fn level_block_counts_out_of_range_are_refused() {
    let field = |e: &LoadError| match e {
        LoadError::InvalidRegionLevel { field, .. } => *field,
        other => panic!("refused for another reason: {other}"),
    };
    assert_eq!(field(&refused(|b| set_u64(b, block_word(0), 4))), "regions");
    assert_eq!(
        field(&refused(|b| set_u64(b, block_word(1), 2))),
        "region limit"
    );
    assert_eq!(
        field(&refused(|b| set_u64(b, block_word(1), 16385))),
        "region limit"
    );
    assert_eq!(field(&refused(|b| set_u64(b, block_word(2), 3))), "steps");
    assert_eq!(
        field(&refused(|b| set_u64(b, block_word(3), 1 << 15))),
        "map slots"
    );
}

#[test]
fn map_entries_and_slot_orders_the_filter_never_writes_are_refused() {
    // Slot 9's entry (the high half of map word 4).
    let entry = |v: u32| {
        move |b: &mut Vec<u8>| {
            let at = block_word(4 + 4) + 4;
            b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
    };
    for (v, reason) in [
        (5, "does not have"),
        (1 | 2 << 16, "newer"),
        (1 | 1 << 31, "bits 15 and 31"),
    ] {
        let e = refused(entry(v));
        assert!(
            matches!(&e, LoadError::InvalidSlotEntry { slot: 9, entry, reason: r } if *entry == v && r.contains(reason)),
            "{e}"
        );
    }
    // The order's first two slots the same.
    let order = block_word(4 + sample_slots() / 2);
    let e = refused(|b| {
        let first = [b[order], b[order + 1]];
        b[order + 2..order + 4].copy_from_slice(&first);
    });
    assert!(
        matches!(&e, LoadError::InvalidSlotOrder { position: 1, reason, .. } if reason.contains("twice")),
        "{e}"
    );
}

#[test]
fn region_words_no_level_writes_are_refused() {
    let words = block_word(block_words(sample_slots()));
    // A reserved tag in bucket 70 (region 1).
    let e = refused(|b| {
        let at = words + 8 * 70;
        let w = get_u64(b, at) | L21x3::TAG_MASK;
        set_u64(b, at, w);
    });
    assert!(
        matches!(e, LoadError::CorruptPayload { word: 70, .. }),
        "{e}"
    );
    // A tag of a slot in an older region, in bucket 5 of region 2.
    let e = refused(|b| {
        let geo = Geometry::new(64, 0, crate::raw::regions::ADDRESSING);
        let entry = |s: usize| {
            let at = block_word(4 + s / 2) + 4 * (s % 2);
            u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
        };
        let tag = (1..)
            .find(|&t: &u64| {
                let s = crate::raw::regions::slot_of(t, 5usize.min(geo.alt(5, t)), sample_slots());
                entry(s) & 0xFFFF < 2
            })
            .unwrap();
        // The count follows the edit: only the tag's place is wrong.
        let at = words + 8 * (128 + 5);
        let lanes = bucket::occupied::<L21x3>(get_u64(b, at));
        set_u64(b, at, tag);
        let count = b.len() - 16;
        let n = get_u64(b, count) + 1 - u64::from(lanes);
        set_u64(b, count, n);
    });
    assert!(
        matches!(e, LoadError::CorruptPayload { word: 133, reason } if reason.contains("newer than its slot")),
        "{e}"
    );
}

#[test]
fn an_item_count_that_is_not_the_occupied_lanes_is_refused() {
    let e = refused(|b| {
        let at = b.len() - 16;
        let n = get_u64(b, at);
        set_u64(b, at, n + 1);
    });
    assert!(
        matches!(
            e,
            LoadError::ItemCountMismatch {
                stored: 301,
                counted: 300
            }
        ),
        "{e}"
    );
}

#[test]
fn a_damaged_or_truncated_record_is_refused_as_such() {
    let (bytes, first_len) = file_of(&level(300, 8));
    for at in [
        first_len + block_word(0),
        first_len + block_word(4 + 100),
        first_len + block_word(block_words(sample_slots()) + 3),
        bytes.len() - 12,
    ] {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        let e = read_both(&b).err().expect("refused");
        assert!(
            matches!(e, LoadError::ChecksumMismatch { .. }),
            "byte {at}: {e}"
        );
    }
    let e = saved::read_levels::<CuckooFilter>(&bytes[..bytes.len() - 100])
        .err()
        .expect("refused");
    assert!(matches!(e, LoadError::Truncated { .. }), "{e}");
}

/// Save and load speed of a level of regions of 3M keys (9,260-bucket
/// regions, as the engine's measured runs) against one table of about the
/// same bytes. A measurement, not a test of speed:
/// `cargo test -p koel --release --lib regions_save_and_load_measured -- --ignored --nocapture`.
#[test]
#[ignore]
fn regions_save_and_load_measured() {
    let n = 3_000_000;
    let r = Regions::new(9260, MAX_REGIONS).unwrap();
    for i in 0..n {
        r.insert(key(PRESENT, i)).unwrap();
    }
    r.finish_step();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.koel");
    let best = |f: &mut dyn FnMut()| {
        (0..5)
            .map(|_| {
                let t = std::time::Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::MAX, f64::min)
    };
    let mut bytes = Vec::new();
    let save = best(&mut || bytes = file_of(&r).0);
    std::fs::write(&path, &bytes).unwrap();
    let read = best(&mut || drop(saved::read_levels::<CuckooFilter>(&bytes[..]).unwrap()));
    let load = best(&mut || drop(saved::load_levels::<CuckooFilter>(&path).unwrap()));
    // A first level's table of the same bytes.
    let t = CuckooFilter::from_parts(
        crate::cuckoo::LayoutKind::Tags16x4,
        crate::hash::KeyHasher::with_algorithm(SEED, HashAlgorithm::Fold),
        GrowthPolicy::default(),
        Geometry::new(
            (bytes.len() as u64 / 8).next_multiple_of(2),
            0,
            Addressing::V3,
        ),
        0,
        |_| Ok(()),
    )
    .unwrap();
    let mut table = Vec::new();
    let table_save = best(&mut || {
        table.clear();
        t.write_level(&mut table, false).unwrap()
    });
    let table_read = best(&mut || drop(saved::read_levels::<CuckooFilter>(&table[..]).unwrap()));
    let mb = bytes.len() as f64 / 1e6;
    println!(
        "{n} keys, {} regions, {mb:.1} MB: save {:.0} MB/s, read_from {:.0} MB/s, load {:.0} MB/s; \
         a table of {:.1} MB: save {:.0} MB/s, read_from {:.0} MB/s (best of 5)",
        r.regions(),
        mb / save,
        mb / read,
        mb / load,
        table.len() as f64 / 1e6,
        table.len() as f64 / 1e6 / table_save,
        table.len() as f64 / 1e6 / table_read
    );
}
