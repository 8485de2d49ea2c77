//! What a stopped thread may not hold up during a step (issue 17: "lookups
//! never wait, migration work per operation bounded"; issue 14: "plain
//! inserts never wait"): a plain insert with room completes while a
//! remove is stopped holding a stripe the sweep needs, and a step whose
//! chunk owner stopped mid-chunk still ends, so inserts that need room
//! complete too.

use super::tests::{
    empty, fill_with_junk, first_moved_key, insert_stopped_after_loading, key, ABSENT, PRESENT,
};
use super::*;
use crate::raw::pause::stopped::{finishes, Frozen, MUST_FINISH};
use crate::raw::pause::{self, At, Point};
use std::sync::mpsc::channel;
use std::sync::Arc as StdArc;
use std::thread;

/// Keys `0..n` of [`PRESENT`] in a level of 64-bucket regions (one sweep
/// chunk per region), then a step begun and not swept.
fn stepping(n: u64) -> (StdArc<Regions>, Vec<u64>) {
    let r = StdArc::new(Regions::with_fixed_map(64, MAX_REGIONS).unwrap());
    let keys: Vec<u64> = (0..n).map(|i| key(PRESENT, i)).collect();
    for &h in &keys {
        r.insert(h).unwrap();
    }
    r.finish_step();
    assert!(r.grow(), "a step begins");
    (r, keys)
}

/// Whether the pair of `at` has a free lane in region `region`.
fn has_room(r: &Regions, region: usize, at: Located) -> bool {
    let free = |i: usize| {
        let w = r.table(region).word(i).load(Ordering::Relaxed);
        (0..L21x3::LANES).any(|lane| bucket::lane::<L21x3>(w, lane) == 0)
    };
    free(at.i1) || free(at.i2)
}

/// A key of `keys` whose slot the running step moves from region 0 to 1.
fn moving_key(r: &Regions, keys: &[u64]) -> u64 {
    keys.iter()
        .copied()
        .find(|&h| r.entry(r.slot_of_hash(h).0) == Entry { cur: 1, prev: 0 })
        .expect("the step moves some slot")
}

/// A remove of `victim` stopped holding its pair's stripe in region 0.
fn remove_stopped(r: &StdArc<Regions>, victim: u64) -> Frozen {
    let frozen = {
        let r = StdArc::clone(r);
        Frozen::at(Point::RemoveHeld, move || assert!(r.remove(victim)))
    };
    assert_eq!(
        frozen.at.tag,
        r.slot_of_hash(victim).1.tag,
        "stopped holding the victim's stripe"
    );
    frozen
}

#[test]
fn a_plain_insert_with_room_never_waits_for_a_stopped_remove() {
    let (r, keys) = stepping(60);
    assert_eq!(r.regions(), 2);
    // A key whose slot the step moves: the sweep must hop its tag from
    // region 0, under the pair's stripe the stopped remove holds.
    let victim = moving_key(&r, &keys);
    let frozen = remove_stopped(&r, victim);
    // A fresh key of a slot that stays, with a free lane: its insert needs
    // no stripe, and its help of the sweep may not wait for one either.
    let fresh = (0..)
        .map(|i| key(ABSENT, i))
        .find(|&h| {
            let (slot, at) = r.slot_of_hash(h);
            r.entry(slot) == Entry::whole(0) && has_room(&r, 0, at)
        })
        .unwrap();
    let inserted = {
        let r = StdArc::clone(&r);
        finishes(move || r.insert(fresh))
    };
    let stepping_meanwhile = r.stepping();
    frozen.thaw();
    assert_eq!(
        inserted,
        Ok(Ok(())),
        "the insert waited for the stopped remove"
    );
    assert!(
        stepping_meanwhile,
        "the step ended though a pair it must hop was held"
    );
    r.finish_step();
    assert!(r.contains(fresh), "false negative");
    assert!(
        keys.iter()
            .filter(|&&h| h != victim)
            .all(|&h| r.contains(h)),
        "false negative"
    );
    assert_eq!(r.len(), keys.len() as i64);
    assert_eq!(r.split_slots(), 0);
}

/// A level of 150 keys in a step whose only chunk's owner is stopped
/// before its first hop.
fn owner_stopped_mid_chunk() -> (StdArc<Regions>, Vec<u64>, Frozen) {
    let (r, keys) = stepping(150);
    let frozen = {
        let r = StdArc::clone(&r);
        Frozen::at(Point::SweepHopping, move || {
            r.help();
        })
    };
    assert!(r.stepping());
    (r, keys, frozen)
}

#[test]
fn a_step_ends_though_a_chunk_owner_stopped_mid_chunk() {
    let (r, keys, frozen) = owner_stopped_mid_chunk();
    let ended = {
        let r = StdArc::clone(&r);
        finishes(move || r.finish_step())
    };
    let ended_ok = ended.is_ok();
    // Inserts that need room (several steps' worth) complete meanwhile.
    let more: Vec<u64> = (0..3_000).map(|i| key(ABSENT, i)).collect();
    let inserted = if ended_ok {
        let (r, more) = (StdArc::clone(&r), more.clone());
        finishes(move || more.iter().all(|&h| r.insert(h).is_ok()))
    } else {
        Err(())
    };
    let steps = r.steps();
    // The owner wakes up with a stale bucket and entry, long after its
    // step ended: it must not move or lose anything.
    frozen.thaw();
    assert!(ended_ok, "the step waited for its stopped chunk owner");
    assert_eq!(inserted, Ok(true), "inserts that need room waited");
    assert!(steps > 3, "only {steps} steps");
    r.finish_step();
    let all = || keys.iter().chain(&more);
    assert!(all().all(|&h| r.contains(h)), "false negative");
    assert!(all().all(|&h| r.count(h) >= 1));
    assert_eq!(r.len(), all().count() as i64);
    assert_eq!(r.occupied(), all().count(), "a copy lost or duplicated");
}

/// The first tag a sweep of region 0 hops in a level that `keys` filled
/// and that then began a step: its bucket and its pair's other bucket.
/// (Filling and the step's plan are deterministic, so a level filled
/// the same way hops the same tag first.)
fn first_hop(keys: &[u64]) -> At {
    let probe = Regions::with_fixed_map(64, MAX_REGIONS).unwrap();
    for &h in keys {
        probe.insert(h).unwrap();
    }
    assert!(probe.grow(), "a step begins");
    let geo = *probe.geometry();
    (0..geo.m0() as usize)
        .flat_map(|local| {
            let w = probe.table(0).word(local).load(Ordering::Relaxed);
            (0..L21x3::LANES).map(move |lane| (local, bucket::lane::<L21x3>(w, lane)))
        })
        .filter(|&(_, tag)| tag != 0)
        .map(|(local, tag)| At {
            a: local,
            b: geo.alt(local, tag),
            tag,
        })
        .find(|at| probe.entry(probe.map().slot_of(at.tag, at.a.min(at.b))).cur != 0)
        .expect("the step moves some slot with a tag")
}

#[test]
fn a_sweeper_that_outlived_its_step_never_strands_a_stale_insert() {
    hopper_outlives_its_step(Point::SweepChecked, |r, _| {
        r.help();
    });
}

/// As the sweeper above, an insert's eviction (`evict_moving`, run here on
/// the first hop's pair) stopped after its check that the step is not
/// over: it passes its step to the hop, which undoes itself. (Passing no
/// step, the stale insert's copy is stranded: count 1.)
#[test]
fn an_eviction_that_outlived_its_step_never_strands_a_stale_insert() {
    hopper_outlives_its_step(Point::EvictChecked, |r, first| {
        let sweep = r.running_sweep().expect("the step runs");
        let pair = Located {
            tag: first.tag,
            i1: first.a,
            i2: first.b,
        };
        r.evict_moving(sweep, 0, pair);
    });
}

/// A thread running `hop` (which hops the step's first tag to move, `At`)
/// stops at `point`, after its check that its step is not over; the step
/// ends and later steps move the tag's slot on; a stale insert of the same
/// key puts a copy into region 0; the thread wakes and hops that copy by
/// its old step's entry. The insert must still find its copy (or follow
/// it): the key is counted twice.
fn hopper_outlives_its_step(point: Point, hop: impl FnOnce(&Regions, At) + Send + 'static) {
    let keys: Vec<u64> = (0..60).map(|i| key(PRESENT, i)).collect();
    let first = first_hop(&keys);
    let r = StdArc::new(Regions::with_fixed_map(64, MAX_REGIONS).unwrap());
    for &h in &keys {
        r.insert(h).unwrap();
    }
    // The key whose tag the step's sweep hops first.
    let victim = keys
        .iter()
        .copied()
        .find(|&h| {
            let at = r.slot_of_hash(h).1;
            at.tag == first.tag && at.i1.min(at.i2) == first.a.min(first.b)
        })
        .unwrap();
    let slot = r.slot_of_hash(victim).0;
    // A stale insert of the victim again: it loads the slot's entry before
    // the step (region 0), then stops until told to put, and again after
    // its put.
    let (put_tx, put_rx) = channel::<()>();
    let (follow_tx, follow_rx) = channel::<()>();
    let (stopped_tx, stopped_rx) = channel::<Point>();
    let stale = {
        let r = StdArc::clone(&r);
        thread::spawn(move || {
            pause::arm(Point::RegionInsertLoaded, move |_| {
                stopped_tx.send(Point::RegionInsertLoaded).unwrap();
                let _ = put_rx.recv_timeout(6 * MUST_FINISH);
                pause::arm(Point::RegionInsertPut, move |_| {
                    stopped_tx.send(Point::RegionInsertPut).unwrap();
                    let _ = follow_rx.recv_timeout(6 * MUST_FINISH);
                });
            });
            r.insert(victim)
        })
    };
    assert_eq!(
        stopped_rx.recv_timeout(MUST_FINISH),
        Ok(Point::RegionInsertLoaded)
    );
    assert!(r.grow(), "a step begins");
    assert_eq!(r.entry(slot), Entry { cur: 1, prev: 0 });
    // The hopper stops after its check, before its hop of the victim's
    // tag (from region 0 to 1).
    let sweeper = {
        let r = StdArc::clone(&r);
        Frozen::at(point, move || hop(&r, first))
    };
    assert_eq!(sweeper.at, first);
    // The step ends without it, and later steps move the slot on, out of
    // region 1, sweeping region 1 each time.
    r.finish_step();
    let mut steps = 0;
    while r.entry(slot).cur == 1 || r.entry(slot).prev == 1 {
        assert!(steps < 64, "the slot never left region 1");
        assert!(r.grow(), "a step begins");
        r.finish_step();
        steps += 1;
    }
    // The stale insert puts its copy into region 0 and stops; the sweeper
    // wakes and hops by its old step's entry; the insert follows its copy.
    put_tx.send(()).unwrap();
    assert_eq!(
        stopped_rx.recv_timeout(MUST_FINISH),
        Ok(Point::RegionInsertPut)
    );
    sweeper.thaw();
    follow_tx.send(()).unwrap();
    assert_eq!(stale.join().unwrap(), Ok(()));
    assert_eq!(r.count(victim), 2, "a copy of the stale insert stranded");
    assert!(r.remove(victim));
    assert!(r.contains(victim), "false negative");
    assert!(keys.iter().all(|&h| r.contains(h)), "false negative");
    assert_eq!(r.occupied(), r.len() as usize, "a copy lost or duplicated");
}

#[test]
fn a_copy_of_a_level_is_not_held_up_by_a_stopped_chunk_owner() {
    let (r, keys, frozen) = owner_stopped_mid_chunk();
    // A copy (and a save, which freezes the same way) helps the step to
    // its end first: it sweeps the stopped owner's chunk itself.
    let copied = {
        let r = StdArc::clone(&r);
        finishes(move || r.try_clone().map(|c| c.len()))
    };
    frozen.thaw();
    let copied = copied.expect("the copy waited for the stopped chunk owner");
    assert_eq!(copied.ok(), Some(keys.len() as i64));
    assert!(keys.iter().all(|&h| r.contains(h)), "false negative");
}

/// A plain insert's help holds a source stripe across its hop
/// (try-acquired, so taking it waited for no one). Stopped there, it held
/// up every waiting sweeper of that pair until 2026-12-07 (review): so
/// `finish_step`, an insert whose region is full, a copy and a save. A
/// sweep's hop now waits at most `PATIENCE` for a source stripe, then
/// leaves the tag where it is and its slot split, as when the new region
/// has no room: the step ends, and lookups still read both regions.
#[test]
fn a_step_ends_though_a_helping_insert_stopped_mid_hop() {
    let (r, keys) = stepping(150);
    let frozen = {
        let r = StdArc::clone(&r);
        Frozen::at(Point::RegionHopCopied, move || {
            r.help();
        })
    };
    let ended = {
        let r = StdArc::clone(&r);
        finishes(move || r.finish_step())
    };
    frozen.thaw();
    r.finish_step();
    assert!(keys.iter().all(|&h| r.contains(h)), "false negative");
    assert!(
        ended.is_ok(),
        "the step's end waited for the stopped helper"
    );
}

/// A remove stopped holding an old pair's stripe (the pair a step's sweep
/// must hop its own tag out of) holds up no step's end: the sweep gives up
/// on that pair (`Hopped::Held`), marks the slot failed, and the step ends
/// with the slot split, lookups reading both regions. Once the remove has
/// taken its tag, the next step's sweep finds nothing left there and
/// joins the slot.
#[test]
fn a_step_ends_though_a_remove_stopped_holding_an_old_pair() {
    let (r, keys) = stepping(60);
    assert_eq!(r.regions(), 2);
    let victim = moving_key(&r, &keys);
    let slot = r.slot_of_hash(victim).0;
    let frozen = remove_stopped(&r, victim);
    let ended = {
        let r = StdArc::clone(&r);
        finishes(move || r.finish_step())
    };
    // Read while the remove is still stopped.
    let stepping_after = r.stepping();
    let entry_after = r.entry(slot);
    let found_after = keys.iter().all(|&h| r.contains(h));
    let victim_count = r.count(victim);
    frozen.thaw();
    assert!(
        ended.is_ok(),
        "the step's end waited for the stopped remove"
    );
    assert!(!stepping_after, "the step did not end");
    assert_eq!(
        entry_after,
        Entry { cur: 1, prev: 0 },
        "the slot of a tag left behind was joined"
    );
    assert!(found_after, "false negative while the remove was stopped");
    assert_eq!(victim_count, 1, "the victim counted wrong meanwhile");
    // The remove took its tag from region 0; the next step moves what else
    // was left behind and joins every slot.
    assert_eq!(r.len(), keys.len() as i64 - 1);
    assert!(r.grow(), "a step begins");
    r.finish_step();
    assert_eq!(r.entry(slot), Entry::whole(1), "the slot was not joined");
    assert_eq!(r.split_slots(), 0);
    assert!(
        keys.iter()
            .filter(|&&h| h != victim)
            .all(|&h| r.contains(h)),
        "false negative"
    );
    assert_eq!(r.occupied(), r.len() as usize, "a copy lost or duplicated");
}

/// A helping insert stopped between its hop's copy and its clear, across
/// two steps: each step's sweep gives up on the held pair and leaves the
/// slot split (the tag in both regions meanwhile); the helper, woken
/// after a later step began, takes its copy back (`undo_if_stale`), and
/// the next step moves the tag and joins the slot: nothing lost, nothing
/// counted twice.
#[test]
fn a_helping_insert_stopped_mid_hop_across_two_steps_strands_nothing() {
    let (r, keys) = stepping(150);
    let frozen = {
        let r = StdArc::clone(&r);
        Frozen::at(Point::RegionHopCopied, move || {
            r.help();
        })
    };
    let slot = r.map().slot_of(frozen.at.tag, frozen.at.a.min(frozen.at.b));
    let two_steps = {
        let r = StdArc::clone(&r);
        finishes(move || {
            r.finish_step();
            let first = r.entry(slot);
            let grew = r.grow();
            r.finish_step();
            (first, grew, r.entry(slot))
        })
    };
    let found_meanwhile = keys.iter().all(|&h| r.contains(h));
    frozen.thaw();
    let (first, grew, second) = two_steps.expect("a step's end waited for the stopped helper");
    assert!(grew, "a second step begins");
    assert!(first.is_split(), "the first step joined a held slot");
    assert_eq!(
        second, first,
        "a split slot moved, or was joined while held"
    );
    assert!(
        found_meanwhile,
        "false negative while the helper was stopped"
    );
    assert!(r.grow(), "a third step begins");
    r.finish_step();
    assert_eq!(r.split_slots(), 0);
    assert!(keys.iter().all(|&h| r.contains(h)), "false negative");
    assert_eq!(r.len(), keys.len() as i64);
    assert_eq!(r.occupied(), keys.len(), "a copy lost or duplicated");
}

/// An insert that raced a step follows its copy into the slot's new
/// region, which takes the old pair's stripe. A remove stopped holding that
/// stripe holds up neither the step's end nor the follow: after its
/// patience the follow leaves the copy in the old region, the slot split,
/// and returns; nothing is lost once the remove wakes.
#[test]
fn a_follow_is_not_held_up_by_a_remove_stopped_on_its_old_pair() {
    let r = StdArc::new(Regions::with_fixed_map(64, MAX_REGIONS).unwrap());
    let stale = first_moved_key(&r);
    let slot = r.slot_of_hash(stale).0;
    r.insert(stale).unwrap();
    let (inserter, go_tx) = insert_stopped_after_loading(&r, stale);
    // The remove holds the pair's stripe in region 0, where both the
    // step's sweep and the stale insert's follow must take it.
    let frozen = remove_stopped(&r, stale);
    assert!(r.grow(), "a step begins");
    let ended = {
        let r = StdArc::clone(&r);
        finishes(move || r.finish_step())
    };
    assert!(
        ended.is_ok(),
        "the step's end waited for the stopped remove"
    );
    assert_eq!(r.entry(slot), Entry { cur: 1, prev: 0 }, "left split");
    go_tx.send(()).unwrap();
    let inserted = finishes(move || inserter.join().unwrap());
    assert_eq!(
        inserted,
        Ok(Ok(())),
        "the follow waited for the stopped remove"
    );
    assert_eq!(r.count(stale), 2, "both copies readable");
    frozen.thaw();
    assert_eq!(r.count(stale), 1);
    assert!(r.contains(stale), "false negative");
}

/// A stale insert whose follow finds no room keeps its slot split
/// (`keep_split`). If the next step's claimant is doubling the map then,
/// the slot's old entry is frozen and the split goes into the new map,
/// which the claimant publishes only once every entry is copied. The
/// insert has returned by then, so a lookup after it must find the key;
/// it reads the old map, whose frozen entry names region 1 alone, while
/// the tag lies in region 0.
#[test]
fn a_split_made_while_the_map_doubles_is_read_once_its_insert_returned() {
    let r = StdArc::new(Regions::new(64, 16).unwrap());
    let stale = first_moved_key(&r);
    let (inserter, go_tx) = insert_stopped_after_loading(&r, stale);
    // The whole first step (no doubling: two regions want 64 slots) runs
    // while the insert holds its old entry.
    assert!(r.grow());
    r.finish_step();
    let (slot, _) = r.slot_of_hash(stale);
    assert_eq!(r.entry(slot), Entry::whole(1), "the step moved the slot");
    assert_eq!(r.slots(), 64);
    fill_with_junk(&r, 1);
    // The second step (three regions want 128 slots) stops with every old
    // entry frozen and copied, the new map not yet published.
    let claimant = {
        let r = StdArc::clone(&r);
        Frozen::at(Point::MapDoubled, move || assert!(r.grow()))
    };
    assert_eq!((claimant.at.a, claimant.at.b), (64, 128));
    go_tx.send(()).unwrap();
    let inserted = finishes(move || inserter.join().unwrap());
    assert_eq!(inserted, Ok(Ok(())), "the follow waited for the claimant");
    // The insert has returned: its key must be found.
    let found_before_publication = r.contains(stale);
    let counted_before_publication = r.count(stale);
    empty(&r, 1);
    claimant.thaw();
    assert_eq!(r.slots(), 128, "the claimant doubled the map");
    let (slot, _) = r.slot_of_hash(stale);
    assert_eq!(
        r.entry(slot),
        Entry { cur: 1, prev: 0 },
        "split in the new map"
    );
    assert!(
        r.contains(stale),
        "false negative once the map is published"
    );
    assert_eq!(
        (found_before_publication, counted_before_publication),
        (true, 1),
        "false negative: the insert returned, its split is in a map not yet published"
    );
    r.finish_step();
    assert!(r.contains(stale), "false negative after the step");
    assert_eq!(r.count(stale), 1);
}
