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
