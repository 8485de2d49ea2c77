//! Loom models of online doubling: a 4-bucket table (two 2-bucket chunks,
//! two stripes) migrating into its 8-bucket successor.
//!
//! Each model has a canary twin in this file that breaks one rule of the
//! protocol and must fail (`#[should_panic]`). Summaries of their failing
//! output (`LOOM_MAX_PREEMPTIONS=2`) are in the comment of each canary.
//!
//! `loom_begin_growth` starts a doubling whatever the load (a full 4-bucket
//! table would take far longer to model); `loom_finish_growth` drives the
//! migration to the end, as `clear` and snapshots do.
#![cfg(loom)]

mod common;

use common::{all_present, fill, filter, model, Picker, BITS, M0};
use koel::loom_support::{locate, Canary};
use loom::sync::Arc;
use loom::thread;

/// Keys of pair `{0,1}` (chunk 0) whose tags go to the successor's low
/// half (`tag` bit 0 clear: buckets 0/1) and high half (set: buckets 4/5).
fn low_and_high(p: &mut Picker) -> (u64, u64) {
    let mut low = None;
    let mut high = None;
    while low.is_none() || high.is_none() {
        let h = p.key(0, 1);
        let slot = if locate(BITS, M0, h).0 & 1 == 0 {
            &mut low
        } else {
            &mut high
        };
        slot.get_or_insert(h);
    }
    (low.unwrap(), high.unwrap())
}

/// A reader looks up keys of both halves while another thread migrates
/// their buckets and installs the successor: no false negative at any
/// point, and afterwards the filter is one generation older with both keys.
/// (The reader runs on the spawned thread: since lookups take no epoch pin,
/// a reader on the model's main thread left loom 54 executions, none of
/// them inside the canary's window.)
fn reader_during_migration(name: &str, canary: Canary) {
    let (low, high) = low_and_high(&mut Picker::new());
    model(name, move || {
        let f = Arc::new(filter(canary));
        fill(&f, &[low, high])?;
        f.loom_begin_growth(true);
        let reader = {
            let f = f.clone();
            thread::spawn(move || (f.contains_hash(low), f.contains_hash(high)))
        };
        f.loom_finish_growth();
        let seen = reader.join().unwrap();
        ensure!(
            seen == (true, true),
            "false negative during migration: {seen:?}"
        );
        ensure!(f.generation() == 1, "generation {}", f.generation());
        all_present(&f, &[low, high], "migrated")
    });
}

#[test]
fn contains_during_migration() {
    reader_during_migration("contains_during_migration", Canary::None);
}

/// Forwarding before copying fails it (counts vary from run to run), e.g.
/// `canary_forward_before_copy: 472 of
/// 1448 executions failed; first (execution 153): false negative during
/// migration: (true, false)` (the reader saw the old bucket forwarded and
/// the successor's bucket still empty).
#[test]
#[should_panic(expected = "false negative during migration")]
fn canary_forward_before_copy() {
    reader_during_migration("canary_forward_before_copy", Canary::ForwardBeforeCopy);
}

/// A plain insert into a bucket that the migrator is forwarding at that
/// moment: the insert lands in the old bucket (and is copied) or in the
/// successor, never nowhere.
fn insert_vs_forward(name: &str, canary: Canary) {
    let mut p = Picker::new();
    let (a, x) = (p.key(0, 1), p.key(0, 1));
    model(name, move || {
        let f = Arc::new(filter(canary));
        fill(&f, &[a])?;
        f.loom_begin_growth(true);
        let migrator = {
            let f = f.clone();
            thread::spawn(move || f.loom_finish_growth())
        };
        let inserted = f.insert_hash(x);
        migrator.join().unwrap();
        ensure!(inserted.is_ok(), "insert failed: {inserted:?}");
        f.loom_finish_growth();
        let s = f.stats();
        ensure!(s.generation == 1, "generation {}", s.generation);
        ensure!(
            f.len() == 2 && s.occupied_slots == 2,
            "lost an insert: len {} occupied {}",
            f.len(),
            s.occupied_slots
        );
        all_present(&f, &[a, x], "inserted during forwarding")
    });
}

#[test]
fn insert_during_forwarding() {
    insert_vs_forward("insert_during_forwarding", Canary::None);
}

/// A forwarding store instead of a CAS fails it, e.g. `canary_blind_forward: 120
/// of 748 executions failed; first (execution 245): lost an insert: len 2
/// occupied 1` (the insert's CAS landed between the migrator's read of the
/// bucket and its store).
#[test]
#[should_panic(expected = "lost an insert")]
fn canary_blind_forward() {
    insert_vs_forward("canary_blind_forward", Canary::BlindForward);
}

/// Two `insert_unique` of one absent key, one of them (the grower's) in
/// migration mode right after the migration is published and before the
/// stripes are sealed, the other possibly still in the old table: exactly
/// one wins and one copy is stored.
fn unique_across_migration(name: &str, canary: Canary) {
    let mut p = Picker::new();
    let (a, k) = (p.key(0, 1), p.key(0, 1));
    model(name, move || {
        let f = Arc::new(filter(canary));
        fill(&f, &[a])?;
        let grower = {
            let f = f.clone();
            thread::spawn(move || {
                f.loom_begin_growth(false);
                f.insert_unique_hash(k)
            })
        };
        let mine = f.insert_unique_hash(k);
        let theirs = grower.join().unwrap();
        ensure!(
            matches!(
                (mine, theirs),
                (Ok(true), Ok(false)) | (Ok(false), Ok(true))
            ),
            "not exactly one winner: {mine:?} / {theirs:?}"
        );
        f.loom_finish_growth();
        ensure!(f.count_hash(k) == 1, "copies of k: {}", f.count_hash(k));
        Ok(())
    });
}

#[test]
fn insert_unique_across_migration() {
    unique_across_migration("insert_unique_across_migration", Canary::None);
}

/// Skipping the seal of the old pair fails it: `canary_unsealed_unique: 554
/// of 2715 executions failed; first (execution 1): not exactly one winner:
/// Ok(true) / Ok(true)` (the old-table call held the old stripe, the
/// migrating one the successor's, and neither saw the other's copy).
#[test]
#[should_panic(expected = "not exactly one winner")]
fn canary_unsealed_unique() {
    unique_across_migration("canary_unsealed_unique", Canary::UnsealedUnique);
}

/// A lookup (which takes no epoch pin) while another thread finishes the
/// migration, installs the successor and releases the old table's pages,
/// which `Release` models by storing 0 into every old word: the lookup may
/// read released words, and still never answers a false negative. The
/// keys' chunk is forwarded before the lookup starts, so it takes the
/// migrating read, the one that cannot tell a released word from an empty
/// one. (Their chunk is the second: the migrator's cursor starts at the
/// first, so it never finds its claim taken and yields.)
fn reader_during_release(name: &str, canary: Canary) {
    let keys = Picker::new().keys(2, 2, 3);
    let (low, high) = (keys[0], keys[1]);
    model(name, move || {
        let f = Arc::new(filter(canary));
        fill(&f, &[low, high])?;
        f.loom_begin_growth(true);
        f.loom_migrate_chunk_of(2);
        let migrator = {
            let f = f.clone();
            thread::spawn(move || {
                f.loom_finish_growth();
                f.loom_collect();
            })
        };
        let seen = (f.contains_hash(low), f.contains_hash(high));
        migrator.join().unwrap();
        ensure!(
            seen == (true, true),
            "false negative while the old table is released: {seen:?}"
        );
        all_present(&f, &[low, high], "after the release")
    });
}

#[test]
fn contains_while_old_table_released() {
    reader_during_release("contains_while_old_table_released", Canary::None);
}

/// Trusting a migrating read without re-checking that its table is still
/// current fails it (see the summary in `docs/design.md`): the reader read
/// an old word after its release, saw it empty (not forwarded), and never
/// looked in the successor.
#[test]
#[should_panic(expected = "false negative while the old table is released")]
fn canary_unchecked_retired_read() {
    reader_during_release(
        "canary_unchecked_retired_read",
        Canary::UncheckedRetiredRead,
    );
}

/// A plain insert (announced, as every write on a growable filter) racing
/// the end of a migration and the release of the old table's pages: the
/// release waits for the insert, so its CAS never lands in a released word.
/// (`raw/writers.rs`: `membarrier` is stood in by a `SeqCst` fence on the
/// installer's side, paired with the writer's fence after announcing.)
fn insert_during_release(name: &str, canary: Canary) {
    let mut p = Picker::new();
    let (a, x) = (p.key(0, 1), p.key(0, 1));
    model(name, move || {
        let f = Arc::new(filter(canary));
        fill(&f, &[a])?;
        f.loom_begin_growth(true);
        let migrator = {
            let f = f.clone();
            thread::spawn(move || {
                f.loom_finish_growth();
                f.loom_collect();
            })
        };
        let inserted = f.insert_hash(x);
        migrator.join().unwrap();
        ensure!(inserted.is_ok(), "insert failed: {inserted:?}");
        f.loom_finish_growth();
        let s = f.stats();
        ensure!(
            s.occupied_slots == 2,
            "lost an insert to a released table: occupied {}",
            s.occupied_slots
        );
        all_present(&f, &[a, x], "inserted during the release")
    });
}

#[test]
fn insert_while_old_table_released() {
    insert_during_release("insert_while_old_table_released", Canary::None);
}

/// A writer whose announcement is not fenced before its load of the
/// current table fails it: the installer's scan can miss the announcement
/// while the writer still loads the old table.
#[test]
#[should_panic(expected = "lost an insert to a released table")]
fn canary_unannounced_writer() {
    insert_during_release("canary_unannounced_writer", Canary::UnannouncedWriter);
}

/// Releasing at once, without waiting for announced writers, fails it (see
/// the summary in `docs/design.md`): the insert loaded the old table, the
/// migrator forwarded, installed and released it, and the insert's CAS
/// then found a zeroed word and put the tag there, where nothing reads it.
#[test]
#[should_panic(expected = "lost an insert to a released table")]
fn canary_immediate_release() {
    insert_during_release("canary_immediate_release", Canary::ImmediateRelease);
}
