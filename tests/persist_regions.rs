//! Filters grown past their tag bits into levels of regions, saved as
//! format version 4 and loaded back: every key, the same answers, growth
//! after the load, and saves racing inserters.

use koel::CuckooFilter;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A default filter built for 1,000 keys, holding `0..n`.
fn grown(n: u64) -> CuckooFilter {
    let f = CuckooFilter::builder()
        .capacity(1000)
        .seed(0x5EED)
        .build()
        .unwrap();
    for k in 0..n {
        f.insert(&k).unwrap();
    }
    f
}

/// Positives among `n` keys no test inserts.
fn positives(f: &CuckooFilter, n: u64) -> usize {
    (0..n).filter(|i| f.contains(&(u64::MAX - i))).count()
}

#[test]
fn a_filter_grown_to_a_million_keys_round_trips_and_grows_on() {
    let n = 1_000_000;
    let f = grown(n);
    let stats = f.stats();
    assert!(stats.levels >= 2 && stats.regions > 20, "{stats:?}");
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    let info = koel::inspect(&bytes[..]).unwrap();
    assert_eq!(info.levels, stats.levels);
    let top = info.upper_levels.last().unwrap();
    assert_eq!(top.format_version, 4, "a level of regions' record");
    assert_eq!(
        info.format_version, 3,
        "the first level's record is as before"
    );
    let regions = top.regions.expect("the level's counts");
    assert_eq!(regions.split_slots, stats.split_slots as u64);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grown.koel");
    f.save(&path).unwrap();
    for g in [
        CuckooFilter::read_from(&bytes[..]).unwrap(),
        CuckooFilter::load(&path).unwrap(),
    ] {
        assert_eq!(g.len(), f.len());
        let s = g.stats();
        assert_eq!(
            (s.levels, s.regions, s.split_slots, s.region_steps),
            (
                stats.levels,
                stats.regions,
                stats.split_slots,
                stats.region_steps
            )
        );
        assert!((0..n).all(|k| g.contains(&k)), "false negative after load");
        assert_eq!(positives(&g, 1_000_000), positives(&f, 1_000_000), "FPR");
        let mut again = Vec::new();
        g.write_to(&mut again).unwrap();
        assert!(again == bytes, "saved again, the same bytes");
        // It grows on: more keys, more steps, nothing lost.
        for k in n..n + 300_000 {
            g.insert(&k).unwrap();
        }
        assert!(g.stats().region_steps > stats.region_steps);
        assert!((0..n + 300_000).all(|k| g.contains(&k)), "false negative");
    }
}

/// `write_to` while two threads insert into a level of regions: the file
/// loads and holds every key acknowledged before the save began.
#[test]
fn a_save_while_two_threads_insert_holds_every_acknowledged_key() {
    let base = 200_000;
    let f = Arc::new(grown(base));
    assert!(f.stats().regions > 0);
    let acked: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let stop = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let (f, acked, stop) = (Arc::clone(&f), Arc::clone(&acked), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut i = 0;
                // Relaxed: only ends the loop.
                while stop.load(Ordering::Relaxed) == 0 && i < 2_000_000 {
                    f.insert(&(base + 2 * i + w)).unwrap();
                    i += 1;
                    // Release: a save that sees `i` began after the insert.
                    acked[w as usize].store(i as usize, Ordering::Release);
                }
            })
        })
        .collect();
    for save in 0..4 {
        // Acquire: pairs with the writers' Release.
        let before = [0, 1].map(|w| acked[w].load(Ordering::Acquire) as u64);
        let mut bytes = Vec::new();
        f.write_to(&mut bytes).unwrap();
        let g = CuckooFilter::read_from(&bytes[..]).unwrap();
        assert!((0..base).all(|k| g.contains(&k)), "save {save} lost a key");
        for (w, &n) in before.iter().enumerate() {
            let lost = (0..n).find(|&i| !g.contains(&(base + 2 * i + w as u64)));
            assert_eq!(lost, None, "save {save} lost writer {w}'s key");
        }
    }
    stop.store(1, Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
}

/// Recomputes both checksums of the record at `at` (its header's and its
/// trailer's), so an edit reaches the field and payload checks.
fn reseal(b: &mut [u8], at: usize, end: usize) {
    let sum = xxhash_rust::xxh3::xxh3_64(&b[at..at + 88]);
    b[at + 88..at + 96].copy_from_slice(&sum.to_le_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&b[at..end - 8]);
    b[end - 8..end].copy_from_slice(&sum.to_le_bytes());
}

/// Bits of a level of regions' record flipped and the record resealed:
/// every bit of its header, and bytes spread over its level block and
/// words. Each file is refused with a `LoadError` (no panic), or loads as
/// a filter that saves back to the bytes it was read from and takes more
/// keys without a false negative.
#[test]
fn flipped_and_resealed_region_records_are_refused_or_load_whole() {
    let f = grown(80_000);
    assert_eq!(f.stats().levels, 2);
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    let info = koel::inspect(&bytes[..]).unwrap();
    let at = bytes.len() - (96 + info.upper_levels[0].payload_bytes as usize + 16);
    let end = bytes.len();
    let block = at + 96..at + 96 + 98_336;
    let header = (at..at + 88).flat_map(|byte| (0..8).map(move |bit| (byte, bit)));
    let block_bytes = block.clone().step_by(61).map(|byte| (byte, byte % 8));
    let words = (block.end..end - 16)
        .step_by(13)
        .map(|byte| (byte, byte % 8));
    let (mut refused, mut loaded) = (0, 0);
    for (byte, bit) in header.chain(block_bytes).chain(words) {
        let mut b = bytes.clone();
        b[byte] ^= 1 << bit;
        reseal(&mut b, at, end);
        match CuckooFilter::read_from(&b[..]) {
            Err(_) => refused += 1,
            Ok(g) => {
                loaded += 1;
                let mut again = Vec::new();
                g.write_to(&mut again).unwrap();
                assert!(again == b, "byte {byte} bit {bit}: saved back differently");
                for k in 1u64 << 40..(1 << 40) + 300 {
                    g.insert(&k).unwrap();
                }
                assert!(((1u64 << 40)..(1 << 40) + 300).all(|k| g.contains(&k)));
            }
        }
    }
    println!("{refused} refused, {loaded} loaded");
    assert!(refused > 500, "{refused} refused, {loaded} loaded");
}

/// A file with a level of regions cut anywhere is refused by both loaders.
#[test]
fn truncated_files_with_a_level_of_regions_are_refused() {
    let f = grown(80_000);
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.koel");
    for (i, len) in (0..bytes.len()).step_by(97).enumerate() {
        assert!(
            CuckooFilter::read_from(&bytes[..len]).is_err(),
            "{len} bytes"
        );
        if i % 20 == 0 {
            std::fs::write(&path, &bytes[..len]).unwrap();
            assert!(CuckooFilter::load(&path).is_err(), "{len} bytes");
        }
    }
}

/// Version 4 files saved before a level's map followed its most regions
/// hold a map of 2^14 slots: they still load, save back to the same
/// bytes, and grow on (their level keeps its map; new levels get theirs).
#[test]
fn a_file_with_a_map_of_16384_slots_still_loads_and_grows() {
    // Written by the code of 2026-12-07 morning (main a419f76).
    let old = include_bytes!("../fuzz/seeds/v4_cuckoo16_regions.koel");
    let f = CuckooFilter::read_from(&old[..]).unwrap();
    assert!(f.levels_count() >= 2, "a level of regions");
    let mut again = Vec::new();
    f.write_to(&mut again).unwrap();
    assert!(again == old, "saved back to other bytes");
    let len = f.len();
    let fresh = |i: u64| 0xF0F0_0000_0000 + i;
    for i in 0..50_000 {
        f.insert(&fresh(i)).unwrap();
    }
    assert_eq!(f.len(), len + 50_000);
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    let back = CuckooFilter::read_from(&bytes[..]).unwrap();
    assert!(
        (0..50_000).all(|i| back.contains(&fresh(i))),
        "false negative"
    );
    assert_eq!(back.len(), f.len());
}
