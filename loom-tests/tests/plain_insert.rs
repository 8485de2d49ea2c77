//! Loom models of plain inserts during a migration: they never wait for
//! another thread, and what they insert is never lost or missed.
//!
//! A plain insert during a migration does not seal its old bucket pair (see
//! "Who seals" in `raw/migrating.rs`): it puts its tag into an old bucket
//! that is not forwarded, or into the successor bucket of a forwarded one.
//! Each model has a canary twin here that breaks one of those rules and
//! must fail (`#[should_panic]`); their failing output
//! (`LOOM_MAX_PREEMPTIONS=2`) is summarised in each canary's comment.
#![cfg(loom)]

mod common;

use common::{all_present, fill, filter, model, Picker};
use koel::loom_support::Canary;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

/// How many times the holder yields to the inserter before it gives up
/// and releases the stripe. The inserter finishes within the first few
/// unless it waits: with two preemptions the holder runs at most three
/// times while a thread that never yields has not finished.
const HOLDER_YIELDS: usize = 8;

/// A doubling has begun (nothing sealed yet) and a writer holds the
/// stripe of pair {0,1}, as a `remove` or a displacement hop preempted in
/// its critical section would. A plain insert of a key of that pair (old
/// bucket 0 has room) must complete while the stripe is still held; then
/// the migration finishes with both keys present.
fn insert_while_pair_held(name: &str, canary: Canary) {
    let mut p = Picker::new();
    let (a, x) = (p.key(0, 1), p.key(0, 1));
    model(name, move || {
        let f = Arc::new(filter(canary));
        fill(&f, &[a])?;
        f.loom_begin_growth(false);
        let done = Arc::new(AtomicBool::new(false));
        let (inserter, done_while_held) = f.hold_pair_stripe(x, || {
            let inserter = {
                let (f, done) = (f.clone(), done.clone());
                thread::spawn(move || {
                    let r = f.insert_hash(x);
                    // Release: pairs with the holder's Acquire load, so
                    // the holder's later checks see the insert.
                    done.store(true, Ordering::Release);
                    r
                })
            };
            for _ in 0..HOLDER_YIELDS {
                // Acquire: pairs with the Release store above.
                if done.load(Ordering::Acquire) {
                    break;
                }
                thread::yield_now();
            }
            (inserter, done.load(Ordering::Acquire))
        });
        let inserted = inserter.join().unwrap();
        ensure!(
            done_while_held,
            "the plain insert waited for the writer holding its pair's stripe"
        );
        ensure!(inserted.is_ok(), "insert failed: {inserted:?}");
        ensure!(f.contains_hash(x), "x missing after its insert");
        f.loom_finish_growth();
        let s = f.stats();
        ensure!(s.generation == 1, "generation {}", s.generation);
        ensure!(
            f.len() == 2 && s.occupied_slots == 2,
            "len {} occupied {}",
            f.len(),
            s.occupied_slots
        );
        all_present(&f, &[a, x], "migrated")
    });
}

#[test]
fn plain_insert_does_not_wait_for_a_held_pair_during_growth() {
    insert_while_pair_held(
        "plain_insert_does_not_wait_for_a_held_pair_during_growth",
        Canary::None,
    );
}

/// Sealing the old pair first, as plain inserts did before, fails it:
/// `canary_sealed_plain_insert: 38 of 38 executions failed; first
/// (execution 1): the plain insert waited for the writer holding its
/// pair's stripe` (every execution fails: the seal cannot pass the held
/// stripe, so the insert finishes only after the holder gives up).
#[test]
#[should_panic(expected = "the plain insert waited")]
fn canary_sealed_plain_insert() {
    insert_while_pair_held("canary_sealed_plain_insert", Canary::SealedPlainInsert);
}

/// A plain insert races the whole migration, which begins unsealed: the
/// insert may land before the seals, between them, in an old bucket the
/// migrator is forwarding, or in the successor. Its own `contains` right
/// after sees it, and afterwards it is stored exactly once.
fn insert_vs_unsealed_migration(name: &str, canary: Canary) {
    let mut p = Picker::new();
    let (a, x) = (p.key(0, 1), p.key(0, 1));
    model(name, move || {
        let f = Arc::new(filter(canary));
        fill(&f, &[a])?;
        f.loom_begin_growth(false);
        let migrator = {
            let f = f.clone();
            thread::spawn(move || f.loom_finish_growth())
        };
        let inserted = f.insert_hash(x);
        let seen = f.contains_hash(x);
        migrator.join().unwrap();
        ensure!(inserted.is_ok(), "insert failed: {inserted:?}");
        ensure!(seen, "lost x: contains(x) was false right after its insert");
        f.loom_finish_growth();
        let s = f.stats();
        ensure!(s.generation == 1, "generation {}", s.generation);
        ensure!(
            f.len() == 2 && s.occupied_slots == 2,
            "lost x: len {} occupied {}",
            f.len(),
            s.occupied_slots
        );
        all_present(&f, &[a, x], "inserted during the migration")
    });
}

#[test]
fn plain_insert_during_unsealed_migration() {
    insert_vs_unsealed_migration("plain_insert_during_unsealed_migration", Canary::None);
}

/// Writing the successor bucket before its old bucket is forwarded fails
/// it: `canary_successor_first: 11228 of 16180 executions failed; first
/// (execution 1): lost x: contains(x) was false right after its insert`
/// (readers look in the successor only for a forwarded bucket).
#[test]
#[should_panic(expected = "lost x")]
fn canary_successor_first() {
    insert_vs_unsealed_migration("canary_successor_first", Canary::SuccessorFirst);
}

/// A `remove` of `a` that may still be in the old table (holding the old
/// pair's stripe, unsealed) while the migration begins and a plain insert
/// of `x` into the same pair goes on: `a` is gone exactly once, `x` is
/// found right after its insert and stays.
fn insert_vs_old_table_remove(name: &str, canary: Canary) {
    let mut p = Picker::new();
    let (a, x) = (p.key(0, 1), p.key(0, 1));
    model(name, move || {
        let f = Arc::new(filter(canary));
        fill(&f, &[a])?;
        let remover = {
            let f = f.clone();
            thread::spawn(move || f.remove_hash(a))
        };
        f.loom_begin_growth(false);
        let inserted = f.insert_hash(x);
        let seen = f.contains_hash(x);
        let removed = remover.join().unwrap();
        ensure!(inserted.is_ok(), "insert failed: {inserted:?}");
        ensure!(seen, "lost x: contains(x) was false right after its insert");
        ensure!(removed, "remove(a) found no copy of a present key");
        f.loom_finish_growth();
        let s = f.stats();
        ensure!(f.count_hash(a) == 0, "a came back: {}", f.count_hash(a));
        ensure!(
            f.len() == 1 && s.occupied_slots == 1,
            "lost x: len {} occupied {}",
            f.len(),
            s.occupied_slots
        );
        all_present(&f, &[x], "inserted during the migration")
    });
}

#[test]
fn plain_insert_vs_old_table_remove_during_growth() {
    insert_vs_old_table_remove(
        "plain_insert_vs_old_table_remove_during_growth",
        Canary::None,
    );
}

/// The same canary fails it: `canary_successor_first_vs_remove: 19314 of
/// 24361 executions failed; first (execution 1): lost x: contains(x) was
/// false right after its insert`.
#[test]
#[should_panic(expected = "lost x")]
fn canary_successor_first_vs_remove() {
    insert_vs_old_table_remove("canary_successor_first_vs_remove", Canary::SuccessorFirst);
}
