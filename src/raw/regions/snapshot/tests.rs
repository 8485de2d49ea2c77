//! Snapshots and levels rebuilt from parts: round trips (split slots
//! kept, growth after the load as before it), snapshots racing inserters,
//! and one refusal per kind of corrupt part.

use super::super::tests::{empty, key, split_by_a_full_step, ABSENT, PRESENT};
use super::*;
use crate::raw::slot_map::MAX_REGIONS;
use std::collections::HashSet;
use std::sync::atomic::AtomicUsize as StdUsize;
use std::sync::Arc as StdArc;
use std::thread;

/// A level's saved form: its parts and each region's little-endian words.
fn saved(r: &Regions) -> (RegionsParts, Vec<Vec<u8>>) {
    r.with_snapshot(|v| {
        assert_eq!(v.joining, 0, "an entry was joining under the claim");
        let words = (0..v.parts.regions)
            .map(|region| {
                v.words(region)
                    .iter()
                    .flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes())
                    .collect()
            })
            .collect();
        (v.parts.clone(), words)
    })
}

/// The level of `parts` and `words` (as [`saved`] gives them).
fn rebuilt(
    parts: &RegionsParts,
    words: &[Vec<u8>],
    len: Option<u64>,
) -> Result<Regions, PartsError> {
    let mut next = words.iter();
    Regions::from_parts(parts, len, |dst| {
        let src = next.next().expect("one call per region");
        for (d, s) in dst.chunks_exact_mut(8).zip(src.chunks_exact(8)) {
            let w = u64::from_le_bytes(s.try_into().unwrap());
            d.copy_from_slice(&w.to_ne_bytes());
        }
        Ok(())
    })
}

/// A level of 64-bucket regions with `n` keys of [`PRESENT`], no step
/// running.
fn level(n: u64, max_regions: usize) -> Regions {
    let r = Regions::new(64, max_regions).unwrap();
    for i in 0..n {
        r.insert(key(PRESENT, i)).unwrap();
    }
    r.finish_step();
    r
}

#[test]
fn a_level_with_split_slots_round_trips() {
    let r = Regions::new(64, 16).unwrap();
    // Split slots; the junk, in slots that stay in region 0, goes before
    // the save.
    let keys = split_by_a_full_step(&r);
    empty(&r, 1);
    assert!(r.split_slots() > 0, "no split slot to save");
    assert_eq!(r.with_snapshot(|v| v.len), 100);
    let (parts, words) = saved(&r);
    let copy = rebuilt(&parts, &words, Some(100)).unwrap();
    assert_eq!(copy.split_slots(), r.split_slots(), "split slots kept");
    for slot in 0..r.map().slots() {
        assert_eq!(copy.entry(slot), r.entry(slot), "slot {slot}");
    }
    assert_eq!((copy.regions(), copy.steps()), (r.regions(), r.steps()));
    assert!(keys.iter().all(|&h| copy.contains(h)), "false negative");
    assert_eq!(copy.len(), 100);
    assert_eq!(saved(&copy), (parts, words), "saving the copy again");
    // The copy's next step moves what the split slots left behind.
    assert!(copy.grow());
    copy.finish_step();
    assert_eq!(copy.split_slots(), 0);
    assert!(keys.iter().all(|&h| copy.contains(h)), "false negative");
}

/// A tag behind its slot (an insert that had not returned when the level
/// was saved, its slot's keys since moved on) loads where it is, which no
/// lookup reads, and the next step's sweep moves it to its slot's region,
/// as it would have in the saved level.
#[test]
fn a_tag_behind_its_slot_loads_and_the_next_step_moves_it() {
    let (parts, mut words) = sample();
    let copy = rebuilt(&parts, &words, None).unwrap();
    // An absent key whose slot is in region 2, and a free lane of its
    // pair in region 0.
    let (h, at) = (0..)
        .map(|i| key(ABSENT, i))
        .map(|h| (h, copy.slot_of_hash(h)))
        .find(|&(h, (slot, at))| {
            !copy.contains(h)
                && copy.entry(slot) == Entry::whole(2)
                && copy.table(0).word(at.i1).load(Ordering::Relaxed) >> 42 == 0
        })
        .map(|(h, (_, at))| (h, at))
        .unwrap();
    let b = &mut words[0][8 * at.i1..8 * at.i1 + 8];
    let w = u64::from_le_bytes((&*b).try_into().unwrap()) | at.tag << 42;
    b.copy_from_slice(&w.to_le_bytes());
    let copy = rebuilt(&parts, &words, Some(301)).unwrap();
    assert!(!copy.contains(h), "region 0 is not read for the slot");
    assert!(copy.grow());
    copy.finish_step();
    assert!(
        copy.contains(h),
        "the sweep moved the tag to its slot's region"
    );
    assert_eq!(copy.count(h), 1);
}

/// A copy grows on exactly as the level it was saved from: same steps,
/// same slots moved, same words (the plan's slot order is saved).
#[test]
fn a_copy_grows_as_the_saved_level_would_have() {
    let r = level(1500, 64);
    let steps = r.steps();
    assert!(steps >= 5, "only {steps} steps");
    let (parts, words) = saved(&r);
    let copy = rebuilt(&parts, &words, Some(1500)).unwrap();
    for l in [&r, &copy] {
        for i in 1500..4000 {
            l.insert(key(PRESENT, i)).unwrap();
        }
        l.finish_step();
    }
    assert!(copy.steps() > steps + 2, "the copy took steps");
    assert!((0..4000).all(|i| copy.contains(key(PRESENT, i))));
    assert!(saved(&r) == saved(&copy), "the copy grew differently");
}

/// Snapshots taken while two threads insert (through dozens of steps):
/// each holds every key whose insert returned before it began, and no tag
/// that no started insert put there.
#[test]
fn snapshots_racing_inserters_hold_every_returned_key_and_nothing_else() {
    const SNAPSHOTS: u32 = 9;
    let writers = 2u64;
    let r = StdArc::new(Regions::new(64, MAX_REGIONS).unwrap());
    let acked: StdArc<Vec<StdUsize>> =
        StdArc::new((0..writers).map(|_| StdUsize::new(0)).collect());
    // Keys each writer may insert: snapshot `s` is taken once both have
    // 1,000 x 2^s, while they go on towards twice that.
    let allowed = StdArc::new(StdUsize::new(0));
    let stop = StdArc::new(StdUsize::new(0));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let (r, acked) = (StdArc::clone(&r), StdArc::clone(&acked));
            let (allowed, stop) = (StdArc::clone(&allowed), StdArc::clone(&stop));
            thread::spawn(move || {
                // Relaxed, both: they only pace the loop.
                let relaxed = std::sync::atomic::Ordering::Relaxed;
                for i in 0.. {
                    while i >= allowed.load(relaxed) {
                        if stop.load(relaxed) != 0 {
                            return;
                        }
                        thread::yield_now();
                    }
                    r.insert(key(w, i as u64)).unwrap();
                    // Release: a snapshot that sees `i + 1` began after
                    // the insert returned.
                    acked[w as usize].store(i + 1, std::sync::atomic::Ordering::Release);
                }
            })
        })
        .collect();
    let acked_now = |w: u64| {
        // Acquire: pairs with the writer's Release.
        acked[w as usize].load(std::sync::atomic::Ordering::Acquire) as u64
    };
    for snapshot in 0..SNAPSHOTS {
        let threshold = 1000u64 << snapshot;
        // Relaxed: only paces the writers.
        allowed.store(2 * threshold as usize, std::sync::atomic::Ordering::Relaxed);
        while (0..writers).any(|w| acked_now(w) < threshold) {
            thread::yield_now();
        }
        let before: Vec<u64> = (0..writers).map(acked_now).collect();
        let (parts, words) = saved(&r);
        // A key not acknowledged after the snapshot is at most the one in
        // flight then.
        let after: Vec<u64> = (0..writers).map(acked_now).collect();
        let copy = rebuilt(&parts, &words, None).unwrap();
        for w in 0..writers {
            // The newest keys and a spread of older ones.
            let n = before[w as usize];
            let newest = n.saturating_sub(2000)..n;
            let missing = (0..n)
                .step_by(37)
                .chain(newest)
                .find(|&i| !copy.contains(key(w, i)));
            assert_eq!(missing, None, "snapshot {snapshot} lost writer {w}'s key");
        }
        let started: HashSet<(u64, usize)> = (0..writers)
            .flat_map(|w| (0..=after[w as usize]).map(move |i| key(w, i)))
            .map(|h| {
                let (_, at) = copy.slot_of_hash(h);
                (at.tag, at.i1.min(at.i2))
            })
            .collect();
        let geo = *copy.geometry();
        for region in 0..copy.regions() {
            let t = copy.table(region);
            for b in 0..t.buckets() {
                let w = t.word(b).load(Ordering::Relaxed);
                for lane in 0..L21x3::LANES {
                    let tag = bucket::lane::<L21x3>(w, lane);
                    let low = b.min(geo.alt(b, tag));
                    assert!(
                        tag == 0 || started.contains(&(tag, low)),
                        "snapshot {snapshot}: tag {tag:#x} at bucket {b} of region {region} \
                         was never inserted"
                    );
                }
            }
        }
        let total_after: u64 = after.iter().map(|a| a + 1).sum();
        assert!(copy.len() as u64 <= total_after);
    }
    // Relaxed: see the writers.
    stop.store(1, std::sync::atomic::Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let ended: Vec<u64> = (0..writers).map(acked_now).collect();
    assert!(r.steps() > 40, "only {} steps", r.steps());
    let (parts, words) = saved(&r);
    let copy = rebuilt(&parts, &words, None).unwrap();
    assert_eq!(copy.len(), ended.iter().sum::<u64>() as i64);
    assert!((0..writers).all(|w| (0..ended[w as usize]).all(|i| copy.contains(key(w, i)))));
}

/// A small grown level's parts, with a slot in each of three regions.
fn sample() -> (RegionsParts, Vec<Vec<u8>>) {
    let r = level(300, 8);
    while r.regions() < 3 {
        assert!(r.grow());
        r.finish_step();
    }
    saved(&r)
}

/// `parts` changed by `change` are refused with an error `refused` accepts.
fn refused_after(
    change: impl FnOnce(&mut RegionsParts, &mut Vec<Vec<u8>>),
    len: Option<u64>,
    refused: impl FnOnce(&PartsError) -> bool,
) {
    let (mut parts, mut words) = sample();
    assert!(rebuilt(&parts, &words, len.map(|_| 300)).is_ok());
    change(&mut parts, &mut words);
    match rebuilt(&parts, &words, len) {
        Ok(_) => panic!("corrupt parts were accepted"),
        Err(e) => assert!(refused(&e), "refused for another reason: {e:?}"),
    }
}

#[test]
fn an_invalid_m0_is_refused() {
    refused_after(|p, _| p.m0 = 63, None, |e| matches!(e, PartsError::M0(63)));
    refused_after(|p, _| p.m0 = 32, None, |e| matches!(e, PartsError::M0(32)));
}

#[test]
fn region_counts_out_of_order_are_refused() {
    let regions = |e: &PartsError| matches!(e, PartsError::Regions { .. });
    refused_after(|p, _| p.max_regions = 2, None, regions);
    refused_after(|p, _| p.max_regions = MAX_REGIONS + 1, None, regions);
    refused_after(
        |p, w| {
            p.regions = 0;
            p.max_regions = 0;
            w.clear();
        },
        None,
        regions,
    );
}

#[test]
fn more_steps_than_regions_added_are_refused() {
    refused_after(
        |p, _| p.steps = 3,
        None,
        |e| {
            matches!(
                e,
                PartsError::Steps {
                    steps: 3,
                    regions: 3
                }
            )
        },
    );
}

/// Slot `slot`'s entry set to `entry` in the sample, and the order moved
/// to match (so only the entry is wrong).
fn entry_refused(entry: u32, reason: &str) {
    refused_after(
        |p, _| p.entries[7] = entry,
        None,
        |e| matches!(e, PartsError::Entry { slot: 7, reason: r, .. } if r.contains(reason)),
    );
}

#[test]
fn entries_the_engine_never_writes_are_refused() {
    entry_refused(1 | JOINING, "bits 15 and 31");
    entry_refused(1 << 15, "bits 15 and 31");
    entry_refused(3, "does not have");
    entry_refused(1 | 3 << 16, "does not have");
    entry_refused(1 | 2 << 16, "newer than");
}

#[test]
fn a_slot_order_that_is_not_the_map_is_refused() {
    let order = |reason: &'static str| move |e: &PartsError| matches!(e, PartsError::Order { reason: r, .. } if r.contains(reason));
    refused_after(
        |p, _| p.order[5] = p.entries.len() as u16,
        None,
        order("no such slot"),
    );
    refused_after(|p, _| p.order[5] = p.order[6], None, order("twice"));
    // Region 0's first slot last: it comes after region 2's.
    refused_after(|p, _| p.order.rotate_left(1), None, order("grouped"));
}

/// The sample's word at `bucket` of region `region` set by `set`.
fn word_refused(region: usize, bucket: usize, set: impl FnOnce(u64, &RegionsParts) -> u64) {
    refused_after(
        |p, w| {
            let b = &mut w[region][8 * bucket..8 * bucket + 8];
            let old = u64::from_le_bytes((&*b).try_into().unwrap());
            b.copy_from_slice(&set(old, p).to_le_bytes());
        },
        None,
        |e| matches!(e, PartsError::Word { bucket: b, .. } if *b == (region * 64 + bucket) as u64),
    );
}

#[test]
fn words_no_level_writes_are_refused() {
    // A reserved tag, bits above the lanes.
    word_refused(1, 3, |w, _| w | L21x3::TAG_MASK << 21);
    word_refused(2, 63, |w, _| w | 1 << 63);
    // A tag of a slot in region 0 or 1, stored in region 2: no step put
    // it there, and a sweep would hop it backwards.
    word_refused(2, 10, |_, p| {
        let geo = p.check().unwrap();
        (1..)
            .find(|&tag| {
                let low = 10usize.min(geo.alt(10, tag));
                Entry::unpack(p.entries[slot_of(tag, low, p.entries.len())]).cur < 2
            })
            .unwrap()
    });
}

#[test]
fn a_count_that_is_not_the_occupied_lanes_is_refused() {
    refused_after(
        |_, _| {},
        Some(299),
        |e| {
            matches!(
                e,
                PartsError::Count {
                    stored: 299,
                    counted: 300
                }
            )
        },
    );
}

#[test]
fn lookups_of_absent_keys_on_a_copy_answer_as_on_the_level() {
    let r = level(3000, 64);
    let (parts, words) = saved(&r);
    let copy = rebuilt(&parts, &words, Some(3000)).unwrap();
    for i in 0..20_000 {
        let h = key(ABSENT, i);
        assert_eq!(copy.contains(h), r.contains(h), "key {i}");
    }
}

/// A level whose map grew to fewer slots than a file's map for its most
/// regions saves that larger map (the format of files before the growing
/// map) and loads with its own small map again: same slots, same bytes,
/// every key found, and the next step grows it as it would the original.
#[test]
fn a_small_map_is_saved_as_the_larger_one_and_loaded_back_small() {
    let r = level(700, 64);
    assert!(r.regions() >= 3, "{} regions", r.regions());
    let small = r.slots();
    assert!(small < crate::raw::slot_map::slots_for(64), "{small} slots");
    let (parts, words) = saved(&r);
    assert_eq!(parts.entries.len(), crate::raw::slot_map::slots_for(64));
    let copy = rebuilt(&parts, &words, Some(700)).unwrap();
    assert_eq!(copy.slots(), small, "the map halved back");
    assert_eq!(copy.map_bytes(), crate::raw::slot_map::bytes_for(small));
    for slot in 0..small {
        assert_eq!(copy.entry(slot), r.entry(slot), "slot {slot}");
    }
    assert!(
        (0..700).all(|i| copy.contains(key(PRESENT, i))),
        "false negative"
    );
    assert_eq!(saved(&copy), (parts, words), "saving the copy again");
    for (a, b) in [(&r, "original"), (&copy, "copy")] {
        assert!(a.grow(), "{b}");
        a.finish_step();
    }
    assert_eq!(copy.slots(), r.slots());
    for slot in 0..r.slots() {
        assert_eq!(copy.entry(slot), r.entry(slot), "slot {slot} after a step");
    }
}
