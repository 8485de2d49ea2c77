//! Loom models of a level of consistent regions (issue 17,
//! `src/raw/regions.rs`, the engine of the filter's region levels): a step
//! that moves a slot from region 0 to a new region 1 while a lookup reads
//! the slot's key (model R1), counts it (R4) or removes it (R5), an insert
//! of a key of that slot races the step (model R2), or a displacement
//! inside region 0 would move a tag of that slot past the sweep (model
//! R3), or an insert races a step whose new region has no room (R6), or a
//! helper that may not wait sweeps a chunk that a waiting sweeper sweeps
//! again (R9), or an insert whose pair is full hops a moving tag out of it
//! while the sweep hops it too (R10), each with the canaries that must
//! fail it.
//!
//! Under loom a region has 4 buckets of three 21-bit tags, the map has four
//! slots and a sweep chunk covers two buckets. The first step adds one
//! region and moves two of region 0's four slots to it: the greedy plan
//! takes region 0's last slots, [`MOVING`] and [`TWICE`]; a second step
//! (model R7) moves [`TWICE`] on to region 2.
//!
//! Models R6, R7 and R8 check stale inserts, with inserts that help no
//! sweep (`inserts_not_helping`): the help is R2's, R3's and R9's to
//! check, and it multiplies these models' executions past CI's budget
//! (R8 4.90M, R6 1.71M with it; 374,733 and 728,121 without).
//!
//! Under loom a sweep's hop waits one backoff for a held source stripe,
//! then gives up (`Hopped::Held`: the tag stays, its slot marked failed),
//! so R3, R5, R8 and R10 also explore sweeps that leave a tag behind
//! because a displacement, a remove or an insert's hop held its stripe;
//! canary `HeldUnmarked` (no mark) fails R3 at execution 7. An insert's
//! follow gives up the same way (R8: 382,151 executions, 374,733 when it
//! waited); canary `FollowHeldUnsplit` (no split) fails R8 at execution
//! 885.
//!
//! Models R11 and R12 start from a map of two slots, which the step to a
//! third region doubles: an insert racing that step follows its copy
//! through the new map (R11: 474 executions; canary `FollowOnOldMap`
//! fails at execution 1), and a stale insert's split racing the doubling
//! lands in the new map (R12: 93; canary `UnfrozenDoubling` fails at
//! execution 1) and is read by its writer as a lookup reads it (R12b:
//! 162; canary `FrozenEntryTaken` fails at execution 3).
//!
//! A canary's model stops at its first failing execution
//! (`common::canary_model`): a canary only has to be shown failing, and
//! its whole search cost as much as its model's (`UncheckedJoin` 2.75M
//! executions, `UnsplitStaleInsert` 1.47M).
#![cfg(loom)]

mod common;

use common::{canary_model, model};
use koel::loom_support::{RegionCanary, RegionsModel};
use loom::sync::Arc;
use loom::thread;

/// The slot the first step moves to region 1.
const MOVING: usize = RegionsModel::SLOTS - 1;

/// The slot that stays in region 0.
const STAYING: usize = 0;

/// The slot the first step moves to region 1 and the second (adding
/// region 2) moves on to region 2: the greedy plan takes the last slot of
/// the fullest region each time.
const TWICE: usize = RegionsModel::SLOTS - 2;

/// SplitMix64's outputs on 1, 2, ...: the models' hashes.
fn hashes() -> impl Iterator<Item = u64> {
    (1u64..).map(|i| {
        let mut z = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// The first hash whose slot is [`MOVING`].
fn moving_key() -> u64 {
    key(MOVING, |_, _| true)
}

/// The first hash whose slot is `slot` and whose pair `(i1, i2)` passes
/// `pair`.
fn key(slot: usize, pair: impl Fn(usize, usize) -> bool) -> u64 {
    hashes()
        .find(|&h| {
            let (s, i1, i2) = RegionsModel::slot(h);
            s == slot && pair(i1, i2)
        })
        .expect("a quarter of the hashes or more")
}

/// `n` distinct tags of slot [`STAYING`] that, stored in `bucket`, have
/// `alt` as their alternate (the sweep leaves them where they are), none
/// in `taken`.
fn fillers(n: usize, bucket: usize, alt: usize, taken: &mut Vec<u64>) -> Vec<u64> {
    let tags: Vec<u64> = (1u64..)
        .filter(|t| !taken.contains(t) && RegionsModel::alt(bucket, *t) == (alt, STAYING))
        .take(n)
        .collect();
    taken.extend(&tags);
    tags
}

/// Runs the model `body` of `canary`: the whole search for the real
/// protocol, up to the first failing execution for a canary.
fn run<F>(name: &str, canary: RegionCanary, body: F)
where
    F: Fn() -> Result<(), String> + Sync + Send + 'static,
{
    if canary == RegionCanary::None {
        model(name, body)
    } else {
        canary_model(name, body)
    }
}

/// Runs a step (its claim, its entries, the bump, every sweep chunk) on
/// the calling thread.
fn step(level: &RegionsModel) {
    assert!(level.grow(), "no step was running");
    level.finish_step();
}

/// Model R1: a lookup of a key whose slot moves, during the step that
/// hops its tag from region 0 to region 1, finds it.
fn lookup_vs_hop(name: &str, canary: RegionCanary) {
    let x = moving_key();
    run(name, canary, move || {
        let level = Arc::new(RegionsModel::new(2, canary));
        ensure!(level.insert(x), "pre-fill: insert refused");
        let stepper = {
            let level = Arc::clone(&level);
            thread::spawn(move || step(&level))
        };
        let found = level.contains(x);
        stepper.join().unwrap();
        ensure!(found, "false negative: contains(x) during the step");
        ensure!(
            level.entry(MOVING) == (1, 1),
            "the step left the slot at {:?}",
            level.entry(MOVING)
        );
        ensure!(level.contains(x), "false negative after the step");
        ensure!(
            level.count(x) == 1,
            "count {} after the step",
            level.count(x)
        );
        Ok(())
    });
}

/// Model R4: a count of a key whose slot moves, during the step, is 1.
fn count_vs_hop(name: &str, canary: RegionCanary) {
    let x = moving_key();
    run(name, canary, move || {
        let level = Arc::new(RegionsModel::new(2, canary));
        ensure!(level.insert(x), "pre-fill: insert refused");
        let stepper = {
            let level = Arc::clone(&level);
            thread::spawn(move || step(&level))
        };
        let n = level.count(x);
        stepper.join().unwrap();
        ensure!(
            n == 1,
            "count(x) was {n} during the step (counted twice or missed)"
        );
        Ok(())
    });
}

/// Model R5: a remove of a key whose slot moves, during the step, finds
/// it, and afterwards no copy is left in either region.
fn remove_vs_hop(name: &str, canary: RegionCanary) {
    let x = moving_key();
    run(name, canary, move || {
        let level = Arc::new(RegionsModel::new(2, canary));
        ensure!(level.insert(x), "pre-fill: insert refused");
        let stepper = {
            let level = Arc::clone(&level);
            thread::spawn(move || step(&level))
        };
        let removed = level.remove(x);
        stepper.join().unwrap();
        ensure!(
            removed,
            "false negative: remove(x) found nothing during the step"
        );
        ensure!(
            level.count(x) == 0,
            "count {} after the remove",
            level.count(x)
        );
        Ok(())
    });
}

/// Model R6: as R2, but the new region is full (of tags no key here
/// matches), so every hop into it finds no room: the sweep's, or the
/// insert's own if the sweep missed its tag. Either way the tag stays in
/// region 0 and the slot stays split. (An insert that comes after the
/// step finds region 1 full and no room for another region: refused.)
/// The insert helps no sweep: a helper meeting a full pair is R9's.
fn insert_vs_step_without_room(name: &str, canary: RegionCanary) {
    let y = moving_key();
    run(name, canary, move || {
        let level = Arc::new(RegionsModel::with_full_new_regions(2, canary).inserts_not_helping());
        let inserter = {
            let level = Arc::clone(&level);
            thread::spawn(move || level.insert(y))
        };
        step(&level);
        if !inserter.join().unwrap() {
            ensure!(!level.contains(y), "a refused insert left its tag");
            return Ok(());
        }
        ensure!(
            level.contains(y),
            "false negative: y, inserted during the step, is lost"
        );
        ensure!(
            level.count(y) == 1,
            "count {} after the step",
            level.count(y)
        );
        ensure!(
            level.entry(MOVING) == (1, 0),
            "the slot is {:?}, not split",
            level.entry(MOVING)
        );
        Ok(())
    });
}

/// Model R7: an insert of a key whose slot moves in each of two steps
/// (region 0 to 1, then 1 to 2), racing both: it may put its tag into
/// region 0 after both sweeps passed, and must then follow it two regions
/// on.
fn insert_vs_two_steps(name: &str, canary: RegionCanary) {
    let y = key(TWICE, |_, _| true);
    run(name, canary, move || {
        let level = Arc::new(RegionsModel::new(3, canary).inserts_not_helping());
        let inserter = {
            let level = Arc::clone(&level);
            thread::spawn(move || level.insert(y))
        };
        step(&level);
        step(&level);
        ensure!(inserter.join().unwrap(), "insert refused");
        ensure!(
            level.entry(TWICE) == (2, 2),
            "the steps left the slot at {:?}",
            level.entry(TWICE)
        );
        ensure!(
            level.contains(y),
            "false negative: y, inserted during two steps, is lost"
        );
        ensure!(
            level.count(y) == 1,
            "count {} after the steps",
            level.count(y)
        );
        Ok(())
    });
}

/// Model R8: two inserts of one key (one tag, one pair: their copies are
/// the same to every query) racing two steps that move its slot twice.
/// Once the first insert has returned, the key is found, even while the
/// second still runs (it may have moved the first one's copy and not yet
/// followed it); once both have, it is counted twice.
fn two_inserts_vs_two_steps(name: &str, canary: RegionCanary) {
    let y = key(TWICE, |_, _| true);
    run(name, canary, move || {
        let level = Arc::new(RegionsModel::new(3, canary).inserts_not_helping());
        let spawn = || {
            let level = Arc::clone(&level);
            thread::spawn(move || level.insert(y))
        };
        let (first, second) = (spawn(), spawn());
        step(&level);
        step(&level);
        ensure!(first.join().unwrap(), "insert refused");
        ensure!(
            level.contains(y),
            "false negative: y, whose first insert returned, is missing"
        );
        ensure!(second.join().unwrap(), "insert refused");
        ensure!(level.count(y) == 2, "count {} after both", level.count(y));
        Ok(())
    });
}

/// Model R2: an insert of a key whose slot moves, racing the step (it may
/// load the old entry and CAS into region 0 after the sweep passed), is
/// found once both have returned.
fn insert_vs_step(name: &str, canary: RegionCanary) {
    let y = moving_key();
    run(name, canary, move || {
        let level = Arc::new(RegionsModel::new(2, canary));
        let inserter = {
            let level = Arc::clone(&level);
            thread::spawn(move || level.insert(y))
        };
        step(&level);
        ensure!(inserter.join().unwrap(), "insert refused");
        ensure!(
            level.contains(y),
            "false negative: y, inserted during the step, is lost"
        );
        ensure!(
            level.count(y) == 1,
            "count {} after the step",
            level.count(y)
        );
        Ok(())
    });
}

/// Model R3: region 0 with bucket 1 the only one with room, and `x` (slot
/// [`MOVING`], pair `{1,2}`) in bucket 2:
///
/// ```text
/// bucket 0:  f  f  f      f: pair {0,3}, slot STAYING
/// bucket 1:  u  u  -      u: pair {1,0}, slot STAYING
/// bucket 2:  x  a  a      a: pair {2,3}, slot STAYING
/// bucket 3:  c  c  c      c: pair {3,2}, slot STAYING
/// ```
///
/// Inserting `z` (slot [`STAYING`], pair `{2,3}`) displaces `x` from 2 to
/// 1 unless `x` is pinned. The step's sweep reads buckets 0 and 1 in its
/// first chunk and 2 and 3 in its second: a move of `x` between the two
/// chunks would hide it from the sweep, and the step would end with `x`
/// in region 0 and its slot naming region 1 alone.
///
/// The insert runs on the model's own thread and the step on the spawned
/// one. The races this model guards take two preemptions either way (the
/// insert checks the pins, the step begins and sweeps the first chunk,
/// the insert moves `x`, the step sweeps the second), but with the roles
/// the other way round loom explored 1,417,483 executions and reached the
/// failure of `PinCheckedBeforeCopy` only at execution 1,519,081 (237 s
/// for the canary alone); this way round 489,189 executions, and that
/// canary fails at execution 19, `Unpinned` at 74.
///
/// With `evict` (model R10), `z`'s insert, when its search finds no path
/// during the step, hops `x` (whose slot moves) out of bucket 2 itself
/// (`evict_moving`), racing the step's sweep of the same chunk: `x` must
/// end in region 1 once, `z` stored (247,117 executions, 23 s; canary
/// `UnlockedEvict` fails at execution 52). R3 runs without it, so that
/// its insert meets the sweep only by displacing.
fn displacement_vs_sweep(name: &str, canary: RegionCanary, evict: bool) {
    let x = key(MOVING, |i1, i2| (i1.min(i2), i1.max(i2)) == (1, 2));
    let z = key(STAYING, |i1, i2| (i1, i2) == (2, 3));
    let mut taken = vec![RegionsModel::tag(x), RegionsModel::tag(z)];
    let f = fillers(3, 0, 3, &mut taken);
    let u = fillers(2, 1, 0, &mut taken);
    let a = fillers(2, 2, 3, &mut taken);
    let c = fillers(3, 3, 2, &mut taken);
    let buckets = [
        [f[0], f[1], f[2]],
        [u[0], u[1], 0],
        [RegionsModel::tag(x), a[0], a[1]],
        [c[0], c[1], c[2]],
    ];
    run(name, canary, move || {
        let level = RegionsModel::new(2, canary);
        let level = Arc::new(if evict {
            level
        } else {
            level.inserts_not_evicting()
        });
        for (b, tags) in buckets.iter().enumerate() {
            level.set_bucket(0, b, *tags);
        }
        let stepper = {
            let level = Arc::clone(&level);
            thread::spawn(move || step(&level))
        };
        let inserted = level.insert(z);
        stepper.join().unwrap();
        ensure!(inserted, "insert refused");
        ensure!(level.contains(z), "false negative: z");
        ensure!(
            level.contains(x),
            "false negative: x was left behind in region 0"
        );
        let n = level.count(x);
        ensure!(n == 1, "x counted {n} times: a copy lost or duplicated");
        Ok(())
    });
}

/// Model R9: a helper that may not wait (an insert with room) claims the
/// chunk of `x` (slot [`MOVING`], pair in chunk 0) while `finish_step`
/// sweeps every chunk not done, that one too: the chunk may be swept twice
/// at once, and `x` is then moved once, neither lost nor copied twice.
/// With `full`, the new region has no free lane: the helper skips `x` and
/// gives the chunk back, the waiting sweep finds no room and leaves the
/// slot split.
fn chunk_swept_twice(name: &str, canary: RegionCanary, full: bool) {
    let x = key(MOVING, |i1, i2| i1 < 2 && i2 < 2);
    run(name, canary, move || {
        let level = Arc::new(if full {
            RegionsModel::with_full_new_regions(2, canary)
        } else {
            RegionsModel::new(2, canary)
        });
        ensure!(level.insert(x), "pre-fill: insert refused");
        ensure!(level.grow(), "no step began");
        let helper = {
            let level = Arc::clone(&level);
            thread::spawn(move || level.help())
        };
        level.finish_step();
        helper.join().unwrap();
        ensure!(level.contains(x), "false negative: x after the step");
        let n = level.count(x);
        ensure!(n == 1, "x counted {n} times: a copy lost or duplicated");
        let split = if full { (1, 0) } else { (1, 1) };
        ensure!(
            level.entry(MOVING) == split,
            "the step left the slot at {:?}",
            level.entry(MOVING)
        );
        Ok(())
    });
}

#[test]
fn a_chunk_swept_twice() {
    chunk_swept_twice("a_chunk_swept_twice", RegionCanary::None, false);
}

#[test]
#[should_panic(expected = "x counted 2 times")]
fn canary_unchecked_resweep() {
    chunk_swept_twice(
        "canary_unchecked_resweep",
        RegionCanary::UncheckedResweep,
        false,
    );
}

#[test]
fn a_helper_skipping_a_full_pair() {
    chunk_swept_twice("a_helper_skipping_a_full_pair", RegionCanary::None, true);
}

#[test]
#[should_panic(expected = "false negative")]
fn canary_done_with_skips() {
    chunk_swept_twice("canary_done_with_skips", RegionCanary::DoneWithSkips, true);
}

#[test]
fn displacement_during_a_step() {
    displacement_vs_sweep("displacement_during_a_step", RegionCanary::None, false);
}

#[test]
#[should_panic(expected = "false negative: x")]
fn canary_unpinned() {
    displacement_vs_sweep("canary_unpinned", RegionCanary::Unpinned, false);
}

#[test]
#[should_panic(expected = "false negative: x")]
fn canary_pin_checked_before_copy() {
    displacement_vs_sweep(
        "canary_pin_checked_before_copy",
        RegionCanary::PinCheckedBeforeCopy,
        false,
    );
}

#[test]
fn an_insert_evicting_during_a_step() {
    displacement_vs_sweep("an_insert_evicting_during_a_step", RegionCanary::None, true);
}

#[test]
#[should_panic(expected = "x counted 2 times")]
fn canary_unlocked_evict() {
    displacement_vs_sweep("canary_unlocked_evict", RegionCanary::UnlockedEvict, true);
}

/// R3 with a sweep that gives up on a stripe the displacement holds
/// (`Hopped::Held`) and leaves x without marking its slot.
#[test]
#[should_panic(expected = "false negative: x")]
fn canary_held_unmarked() {
    displacement_vs_sweep("canary_held_unmarked", RegionCanary::HeldUnmarked, false);
}

#[test]
fn lookup_during_a_step() {
    lookup_vs_hop("lookup_during_a_step", RegionCanary::None);
}

#[test]
fn insert_during_a_step() {
    insert_vs_step("insert_during_a_step", RegionCanary::None);
}

#[test]
#[should_panic(expected = "false negative")]
fn canary_region_clear_before_copy() {
    lookup_vs_hop(
        "canary_region_clear_before_copy",
        RegionCanary::ClearBeforeCopy,
    );
}

#[test]
#[should_panic(expected = "false negative")]
fn canary_bump_before_entries() {
    lookup_vs_hop(
        "canary_bump_before_entries",
        RegionCanary::BumpBeforeEntries,
    );
}

#[test]
#[should_panic(expected = "false negative")]
fn canary_unfollowed_insert() {
    insert_vs_step("canary_unfollowed_insert", RegionCanary::UnfollowedInsert);
}

#[test]
#[should_panic(expected = "false negative")]
fn canary_unfenced_insert() {
    insert_vs_step("canary_unfenced_insert", RegionCanary::UnfencedInsert);
}

#[test]
fn count_during_a_step() {
    count_vs_hop("count_during_a_step", RegionCanary::None);
}

#[test]
#[should_panic(expected = "counted twice")]
fn canary_unchecked_count() {
    count_vs_hop("canary_unchecked_count", RegionCanary::UncheckedCount);
}

#[test]
fn remove_during_a_step() {
    remove_vs_hop("remove_during_a_step", RegionCanary::None);
}

#[test]
#[should_panic(expected = "false negative")]
fn canary_remove_cur_first() {
    remove_vs_hop("canary_remove_cur_first", RegionCanary::RemoveCurFirst);
}

#[test]
fn insert_during_a_step_without_room() {
    insert_vs_step_without_room("insert_during_a_step_without_room", RegionCanary::None);
}

#[test]
#[should_panic(expected = "false negative")]
fn canary_unsplit_stale_insert() {
    insert_vs_step_without_room(
        "canary_unsplit_stale_insert",
        RegionCanary::UnsplitStaleInsert,
    );
}

#[test]
#[should_panic(expected = "false negative")]
fn canary_unchecked_join() {
    insert_vs_step_without_room("canary_unchecked_join", RegionCanary::UncheckedJoin);
}

#[test]
fn insert_during_two_steps() {
    insert_vs_two_steps("insert_during_two_steps", RegionCanary::None);
}

#[test]
#[should_panic(expected = "false negative")]
fn canary_unfollowed_insert_two_steps() {
    insert_vs_two_steps(
        "canary_unfollowed_insert_two_steps",
        RegionCanary::UnfollowedInsert,
    );
}

/// R8 with a follow that, finding the old pair's stripe held (the other
/// insert's hop), returns without splitting the slot: the step's end then
/// hides that copy.
#[test]
#[should_panic(expected = "count 1 after both")]
fn canary_follow_held_unsplit() {
    two_inserts_vs_two_steps(
        "canary_follow_held_unsplit",
        RegionCanary::FollowHeldUnsplit,
    );
}

#[test]
fn two_inserts_of_one_key_during_two_steps() {
    two_inserts_vs_two_steps(
        "two_inserts_of_one_key_during_two_steps",
        RegionCanary::None,
    );
}

/// The slot (of four) the step that doubles the map moves from region 1
/// to region 2, in a level whose first map has two slots: after the
/// first step region 0 holds slot 0 and region 1 slot 1 of the small map;
/// the doubling makes them 0, 1 and 2, 3, and the greedy plan takes the
/// last slot of the fuller region with the higher index.
const DOUBLED_MOVING: usize = 3;

/// Model R11: an insert of a key whose slot moves in a step that doubles
/// the map (a third region: its first map has two slots), racing that
/// step. It may load the small map, put its tag into region 1 after the
/// sweep passed, and must then follow it through the new map to region
/// 2. Before any thread runs, a first step (no doubling) gives region 1
/// the key's slot.
fn insert_vs_doubling_step(name: &str, canary: RegionCanary) {
    let y = key(DOUBLED_MOVING, |_, _| true);
    run(name, canary, move || {
        let level = Arc::new(RegionsModel::with_small_map(3, canary, false).inserts_not_helping());
        step(&level);
        ensure!(level.slots() == 2, "the first step doubled the map");
        let inserter = {
            let level = Arc::clone(&level);
            thread::spawn(move || level.insert(y))
        };
        step(&level);
        ensure!(inserter.join().unwrap(), "insert refused");
        ensure!(level.slots() == 4, "the second step did not double the map");
        ensure!(
            level.entry(DOUBLED_MOVING) == (2, 2),
            "the step left the slot at {:?}",
            level.entry(DOUBLED_MOVING)
        );
        ensure!(
            level.contains(y),
            "false negative: y, inserted during a doubling step, is lost"
        );
        ensure!(
            level.count(y) == 1,
            "count {} after the step",
            level.count(y)
        );
        Ok(())
    });
}

/// Model R12: a stale insert keeping its slot split (`keep_split`: its
/// hop out of region 0 found no room) while the next step's claimant
/// doubles the map. Before any thread runs, a first step (no doubling)
/// moved the key's slot to region 1 and ended. Whenever the split lands,
/// in the old map before its entry is frozen (the copy carries it) or
/// after (the writer goes on in the new map), the new map names region 0
/// for the key's slot once both have returned, unless the split found
/// the slot moving on to region 2 (two other regions: refused). (The
/// rest of a stale insert across steps, its tag, the sweep and the
/// marks, is R6's and R7's; a split entry in the new map is read as in
/// the old.)
fn split_vs_doubling(name: &str, canary: RegionCanary) {
    let y = key(DOUBLED_MOVING, |_, _| true);
    run(name, canary, move || {
        let level = Arc::new(RegionsModel::with_small_map(3, canary, false).inserts_not_helping());
        step(&level);
        ensure!(
            level.entry(1) == (1, 1),
            "the first step left {:?}",
            level.entry(1)
        );
        let splitter = {
            let level = Arc::clone(&level);
            thread::spawn(move || level.keep_split(y, 0))
        };
        ensure!(level.grow(), "no second step");
        let kept = splitter.join().unwrap();
        ensure!(level.slots() == 4, "the second step did not double the map");
        let (cur, prev) = level.entry(DOUBLED_MOVING);
        ensure!(
            !kept || cur == 0 || prev == 0,
            "the split was lost: the slot is ({cur}, {prev}) after the doubling"
        );
        Ok(())
    });
}

/// Model R12b (review of df4f415): R12, but the splitter reads its
/// slot's entry as a lookup does once `keep_split` returned: it must name
/// region 0, where the stale insert's tag lies. A split that went into a
/// new map (its old entry frozen) is read only once the claimant
/// publishes that map, which may come after the split returned.
fn split_read_during_doubling(name: &str, canary: RegionCanary) {
    let y = key(DOUBLED_MOVING, |_, _| true);
    run(name, canary, move || {
        let level = Arc::new(RegionsModel::with_small_map(3, canary, false).inserts_not_helping());
        step(&level);
        let splitter = {
            let level = Arc::clone(&level);
            thread::spawn(move || {
                let kept = level.keep_split(y, 0);
                (kept, level.entry_of(y))
            })
        };
        ensure!(level.grow(), "no second step");
        let (kept, (cur, prev)) = splitter.join().unwrap();
        ensure!(
            !kept || cur == 0 || prev == 0,
            "the split was hidden: its writer then read ({cur}, {prev})"
        );
        Ok(())
    });
}

#[test]
fn a_split_is_read_once_made_during_a_doubling() {
    split_read_during_doubling(
        "a_split_is_read_once_made_during_a_doubling",
        RegionCanary::None,
    );
}

#[test]
#[should_panic(expected = "the split was hidden")]
fn canary_unfrozen_doubling_hides_a_split() {
    split_read_during_doubling(
        "canary_unfrozen_doubling_hides_a_split",
        RegionCanary::UnfrozenDoubling,
    );
}

/// R12b with readers that take a frozen entry as it is: the split made in
/// the map not yet published is missed.
#[test]
#[should_panic(expected = "the split was hidden")]
fn canary_frozen_entry_taken() {
    split_read_during_doubling("canary_frozen_entry_taken", RegionCanary::FrozenEntryTaken);
}

#[test]
fn insert_during_a_doubling_step() {
    insert_vs_doubling_step("insert_during_a_doubling_step", RegionCanary::None);
}

#[test]
#[should_panic(expected = "false negative")]
fn canary_follow_on_old_map() {
    insert_vs_doubling_step("canary_follow_on_old_map", RegionCanary::FollowOnOldMap);
}

#[test]
fn a_split_during_a_doubling() {
    split_vs_doubling("a_split_during_a_doubling", RegionCanary::None);
}

#[test]
#[should_panic(expected = "the split was lost")]
fn canary_unfrozen_doubling() {
    split_vs_doubling("canary_unfrozen_doubling", RegionCanary::UnfrozenDoubling);
}
