//! Loom model 12: `insert_unique` at a cap in a filter with levels
//! (`src/cuckoo/levels.rs`, `insert_leveled` with `unique`).
//!
//! The call first decides under the key's level-0 pair stripe with
//! `Lanes::KeepOne` (`ops::insert_unique_beyond`): level 0 takes the key
//! only into a bucket that keeps another free lane, else the newest level
//! inserts it. When the newest level refuses (a cap) and level 0 is below
//! its sizing load (`may_search_after`), the call makes room in the key's
//! level-0 pair by displacement with the stripe let go (`make_room_for`),
//! then decides again under the stripe with `Lanes::Any`, asking every
//! level again. The model checks that two calls racing on one absent key
//! through this path give one `Ok(true)` and one `Ok(false)` and store one
//! copy, and that a plain insert of another key of the pair racing it
//! (which takes only lanes keeping another free, then searches) leaves
//! both keys stored.
//!
//! The filter is the models' 4-bucket, 16-bit one with a
//! `max_false_positive_rate` of [`CAP`]: level 0's bound with every slot
//! full is `8 / 65534 = 1.22e-4` and a doubling would make it 2.44e-4, so
//! level 0 never doubles; the level above gets half of the 7.9e-6 left,
//! which pays one region (`R_max = own * 2^21 / (6 * 0.93) = 1.49`), and a
//! level above that would get 2e-6, which pays none. So a region level of
//! one region of [`REGION_M0`] buckets (a level of one region starts at
//! twice level 0's sizing load: `2 * 15 / 2.7`) refuses a key whose pair
//! there is full with `FalsePositiveRateLimit`: the cap.
//!
//! The pre-fill ([`AtCap`]):
//!
//! ```text
//! level 0                                        a = pair {0,1}
//! bucket 0:  a  a  a  x                          x = pair {0,3}
//! bucket 1:  -  b  b  b   (b removed)            b = pair {1,0}
//! bucket 2:  c  c  c  c                          c = pair {2,3}
//! bucket 3:  -  d  d  d   (d removed)            d = pair {3,2}
//!
//! level 1: one region of 12 buckets; the region pair {r1,r2} of the
//! key holds six tags of keys of that same pair: full, no path.
//! ```
//!
//! The 16 level-0 keys fill level 0 (which places them as listed: a key
//! goes to its first bucket while it has room), so the opener (the first
//! key of level 1) finds no room or path and publishes the level; the
//! five other keys of the region pair go up too; then a `b` and a `d` are
//! removed (14 keys: below the sizing load of 15.2). The key `k` has pair
//! `{0,1}` in level 0 and `{r1,r2}` in the region: its level-0 pair has
//! one free lane, in a bucket that keeps none, so the first decision goes
//! up and is refused; the room is there already (or, once a racing call
//! took that lane, made by moving `x` to bucket 3), and the second
//! decision takes it. The model checks at its start, on a clone, that the
//! pre-fill drives `k` into level 0 this way.
//!
//! Until this model the call made room once: a plain insert that took the
//! room before the second decision left it refused
//! (`FalsePositiveRateLimit`) while a hop could still make room ("51 of 143
//! executions failed; first (execution 1): refused with room for both").
//! It now makes room again while racing inserts take the room it made.
#![cfg(loom)]

mod common;

use common::models::{race, Spawned};
use common::{all_present, fill, model_branching, Picker, BITS};
use koel::loom_support::{level_lens, locate, Canary};
use koel::CuckooFilter;
use loom::sync::Arc;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc as StdArc;

/// Forbids doubling level 0 and allows one level of one region above it
/// (see the module documentation).
const CAP: f64 = 1.3e-4;

/// Buckets of the level-1 region.
const REGION_M0: u64 = 12;

/// Loom branches an execution may take: the pre-fill (24 inserts, two
/// removes, a clone and an insert into it) takes most of them; 3000 were
/// too few.
const BRANCHES: usize = 6000;

/// The models' filter with the [`CAP`].
fn capped_filter(canary: Canary) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(4)
        .fingerprint_bits(BITS)
        .seed(0)
        .max_false_positive_rate(CAP)
        .canary(canary)
        .build()
        .expect("tiny filter")
}

/// The pre-fill of the module documentation.
#[derive(Clone)]
struct AtCap {
    /// Level 0's keys, in order: `a a a x b b b b c c c c d d d d`.
    level0: Vec<u64>,
    /// The keys of the key's region pair, which go up (the first one
    /// publishes the level).
    above: Vec<u64>,
    /// The first `b` and the first `d`, removed once level 1 holds its keys.
    removed: [u64; 2],
    /// Every key present after the pre-fill.
    present: Vec<u64>,
    /// The key the racers insert: pair `{0,1}`, and `{r1,r2}` above.
    key: u64,
    /// Another key of both pairs: the plain insert's.
    rival: u64,
}

impl AtCap {
    fn new() -> AtCap {
        let mut p = Picker::new();
        let mut level0 = p.keys(3, 0, 1);
        level0.push(p.key(0, 3));
        for (i1, i2) in [(1, 0), (2, 3), (3, 2)] {
            level0.extend(p.keys(4, i1, i2));
        }
        let opener = p.key(0, 1);
        let (tag, r1, r2) = locate(21, REGION_M0, opener);
        let mut tags = HashSet::from([tag]);
        let mut pick = |p: &mut Picker| {
            let h = p.key_where(0, 1, |h| {
                let (tag, a, b) = locate(21, REGION_M0, h);
                ((a, b) == (r1, r2) || (a, b) == (r2, r1)) && !tags.contains(&tag)
            });
            tags.insert(locate(21, REGION_M0, h).0);
            h
        };
        let mut above = vec![opener];
        for _ in 0..5 {
            above.push(pick(&mut p));
        }
        let (key, rival) = (pick(&mut p), pick(&mut p));
        let removed = [level0[4], level0[12]];
        let present = level0
            .iter()
            .chain(&above)
            .copied()
            .filter(|h| !removed.contains(h))
            .collect();
        AtCap {
            level0,
            above,
            removed,
            present,
            key,
            rival,
        }
    }

    /// Pre-fills `f` (single-threaded, before any spawn) and checks that
    /// an `insert_unique` of the key takes the path of the module
    /// documentation.
    fn prefill(&self, f: &CuckooFilter) -> Result<(), String> {
        fill(f, &self.level0)?;
        ensure!(
            level_lens(f) == [16],
            "pre-fill: level 0 not full: {:?}",
            level_lens(f)
        );
        f.insert_hash(self.above[0])
            .map_err(|e| format!("pre-fill: the opener was refused: {e:?}"))?;
        let s = f.stats();
        ensure!(
            s.levels == 2 && s.regions == 1 && s.buckets as u64 == 4 + REGION_M0,
            "pre-fill: levels {} regions {} buckets {}: not one region of {REGION_M0}",
            s.levels,
            s.regions,
            s.buckets
        );
        fill(f, &self.above[1..])?;
        for &h in &self.removed {
            ensure!(f.remove_hash(h), "pre-fill: remove of {h:#x} found nothing");
        }
        // Level 0: 14 keys, the pair {0,1} one lane short of full (its
        // 8 lanes hold the a's, x and the b's left: x cannot be in
        // bucket 3, so it is in 0); level 1: the six keys of the key's
        // region pair, which they fill.
        ensure!(
            level_lens(f) == [14, 6],
            "pre-fill: levels hold {:?}",
            level_lens(f)
        );
        ensure!(
            f.count_hash(self.key) == 0 && f.count_hash(self.rival) == 0,
            "pre-fill: the key's or the rival's tag is already stored"
        );
        ensure!(
            f.stats().displacements == 0,
            "pre-fill: a tag was displaced"
        );
        // The path: level 0 takes the key only after the level above
        // refused it, into the lane no bucket keeps free beside another.
        let probe: CuckooFilter = f.clone();
        let alone = probe.insert_unique_hash(self.key);
        ensure!(
            alone == Ok(true) && level_lens(&probe) == [15, 6],
            "pre-fill: insert_unique of the key alone: {alone:?}, levels hold {:?}",
            level_lens(&probe)
        );
        Ok(())
    }
}

/// What races the `insert_unique` of the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rival {
    /// Another `insert_unique` of the key.
    SameKey,
    /// A plain insert of another key of both pairs ([`AtCap::rival`]).
    Plain,
}

/// Model 12: of two threads running `insert_unique` of one absent key at
/// the cap, exactly one gets `Ok(true)` and one copy is stored, in level 0
/// ([`Rival::SameKey`]); with a plain insert of another key of the pair
/// racing it, both are stored ([`Rival::Plain`]).
///
/// Returns whether some execution displaced a tag (a call that made room
/// after the other had taken the free lane).
fn unique_at_cap(name: &str, canary: Canary, rival: Rival, spawned: Spawned) -> bool {
    let l = AtCap::new();
    let hopped = StdArc::new(AtomicBool::new(false));
    let hopped_once = hopped.clone();
    let body = move || {
        let f = Arc::new(capped_filter(canary));
        l.prefill(&f)?;
        let (key, other) = (l.key, l.rival);
        let (mine, theirs) = race(
            &f,
            spawned,
            move |f| f.insert_unique_hash(key),
            move |f| match rival {
                Rival::SameKey => f.insert_unique_hash(key),
                Rival::Plain => f.insert_hash(other).map(|()| true),
            },
        );
        if f.stats().displacements > 0 {
            hopped_once.store(true, Relaxed);
        }
        let mut inserted = vec![key];
        if rival == Rival::SameKey {
            let winners = [mine, theirs].iter().filter(|r| **r == Ok(true)).count();
            ensure!(
                winners == 1,
                "insert_unique winners: {winners} (a {mine:?}, b {theirs:?})"
            );
            ensure!(
                matches!(
                    (mine, theirs),
                    (Ok(true), Ok(false)) | (Ok(false), Ok(true))
                ),
                "not one Ok(true) and one Ok(false): a {mine:?}, b {theirs:?}"
            );
        } else {
            ensure!(
                mine == Ok(true) && theirs == Ok(true),
                "refused with room for both: insert_unique {mine:?}, insert {theirs:?}"
            );
            inserted.push(other);
        }
        for &h in &inserted {
            let copies = f.count_hash(h);
            ensure!(copies == 1, "{copies} copies of {h:#x} stored");
        }
        all_present(&f, &inserted, "inserted")?;
        all_present(&f, &l.present, "pre-inserted")?;
        let lens = level_lens(&f);
        ensure!(
            lens == [14 + inserted.len(), 6],
            "levels hold {lens:?} after {} inserts into level 0",
            inserted.len()
        );
        ensure!(
            f.len() == l.present.len() + inserted.len(),
            "len {} after {} inserts",
            f.len(),
            inserted.len()
        );
        Ok(())
    };
    // Not `canary_model` for the canary: its panic inside the model would
    // drop the filter's levels outside it, whose drop loads a loom atomic.
    model_branching(name, BRANCHES, body);
    hopped.load(Relaxed)
}

#[test]
fn insert_unique_at_the_cap_has_one_winner() {
    for spawned in [Spawned::A, Spawned::B] {
        // Loom's bounded search never runs the loser's hop here (a call
        // that decided before the winner put and makes room after it: up
        // to 4 preemptions, 502 executions); the canary's failure needs
        // that schedule, and the plain insert's model runs hops.
        unique_at_cap(
            &format!("insert_unique_at_the_cap_has_one_winner ({spawned:?} spawned)"),
            Canary::None,
            Rival::SameKey,
            spawned,
        );
    }
}

#[test]
fn insert_unique_at_the_cap_beside_a_plain_insert() {
    for spawned in [Spawned::A, Spawned::B] {
        let hopped = unique_at_cap(
            &format!("insert_unique_at_the_cap_beside_a_plain_insert ({spawned:?} spawned)"),
            Canary::None,
            Rival::Plain,
            spawned,
        );
        assert!(
            hopped,
            "{spawned:?} spawned: no call made room by displacement: x never moved"
        );
    }
}

// The second decision trusting the first's "no copy" fails model 12:
// "canary_unchecked_second_decision: 30 of 99 executions failed; first
// (execution 28): insert_unique winners: 2 (a Ok(true), b Ok(true))". Both
// calls decided (KeepOne) before either put; one took the free lane, the
// other then made room by moving x to bucket 3 and put a second copy.
#[test]
#[should_panic(expected = "insert_unique winners: 2")]
fn canary_unchecked_second_decision() {
    unique_at_cap(
        "canary_unchecked_second_decision",
        Canary::UncheckedSecondDecision,
        Rival::SameKey,
        Spawned::A,
    );
}
