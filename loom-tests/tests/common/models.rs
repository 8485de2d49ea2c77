//! The model bodies, parameterised by canary so that a canary test runs
//! exactly the model it claims to break.

use super::{all_present, fill, filter, holds_sixteen, model, model_bounded, Picker};
use crate::ensure;
use koel::loom_support::Canary;
use koel::CuckooFilter;
use loom::sync::Arc;
use loom::thread;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc as StdArc;

/// A pre-filled table, chosen so that the one displacement path is known.
///
/// ```text
/// bucket 0: [free] b0   b0   b0      b0 = pair {0,1}: alternate 1 is full
/// bucket 1:  b1    b1   b1   b1      b1 = pair {1,0}  (`two_free`: last lane free)
/// bucket 2:  b2    b2   b2   b2      b2 = pair {2,3}  (`two_free`: lane 0 is z)
/// bucket 3:  x     b3   b3   b3      b3 = pair {3,2}: alternate 2 is full
/// ```
///
/// `x` has pair `{0,3}` (first bucket 0, so `contains(x)` reads bucket 0
/// first) and sits in bucket 3. `n1` has pair `{3,2}`: both full, and `x`
/// is the first tag the search tries (bucket 3 is `n1`'s first root, `x` its
/// lane 0), so inserting `n1` moves `x` from 3 to 0. In `one_free` it is
/// also the only tag of 3 or 2 whose alternate has room; in `two_free`, `z`
/// is a second way out that only the full search reaches. `n2` has pair
/// `{0,1}`: once `x` is in 0 (lane 0) and bucket 3 has room again,
/// inserting `n2` moves `x` back to 3.
#[derive(Clone, Debug)]
pub struct Layout {
    pub x: u64,
    pub n1: u64,
    pub n2: u64,
    /// A key absent from the pre-fill whose first bucket is 0 (pair {0,1}).
    pub y: u64,
    /// `two_free` only: pair `{2,1}`, in bucket 2 lane 0, the second way out
    /// of a full `{3,2}` once bucket 0 is full.
    pub z: Option<u64>,
    /// Every key present after the pre-fill (including `x` and `z`).
    pub present: Vec<u64>,
    /// Inserted in this order, then `gap` removed.
    order: Vec<u64>,
    gap: u64,
}

impl Layout {
    /// 15 keys in 16 lanes; the free lane is bucket 0, lane 0.
    pub fn one_free() -> Layout {
        Self::build(false)
    }

    /// 14 keys; free lanes in bucket 0 (lane 0) and bucket 1 (lane 3), and
    /// `z` in bucket 2 lane 0 can move to bucket 1.
    pub fn two_free() -> Layout {
        Self::build(true)
    }

    fn build(two_free: bool) -> Layout {
        let mut p = Picker::new();
        let gap = p.key(0, 1);
        let b0 = p.keys(3, 0, 1);
        let x = p.key(0, 3);
        let b3 = p.keys(3, 3, 2);
        let z = two_free.then(|| p.key(2, 1));
        let b2 = p.keys(if two_free { 3 } else { 4 }, 2, 3);
        let b1 = p.keys(if two_free { 3 } else { 4 }, 1, 0);
        let (n1, n2, y) = (p.key(3, 2), p.key(0, 1), p.key(0, 1));

        // Bucket 0 fills first (gap in lane 0), so x, whose first bucket is
        // 0, lands in bucket 3 lane 0; z is the first tag of bucket 2.
        let mut order = vec![gap];
        order.extend(&b0);
        order.push(x);
        order.extend(&b3);
        order.extend(z);
        order.extend(&b2);
        order.extend(&b1);
        let present = order[1..].to_vec();
        Layout {
            x,
            n1,
            n2,
            y,
            z,
            present,
            order,
            gap,
        }
    }

    /// Pre-fills `f` (single-threaded, before any spawn).
    pub fn prefill(&self, f: &CuckooFilter) -> Result<(), String> {
        fill(f, &self.order)?;
        ensure!(f.remove_hash(self.gap), "pre-fill: gap key missing");
        ensure!(f.len() == self.present.len(), "pre-fill: len {}", f.len());
        Ok(())
    }
}

/// How often the writer moves `x` while the reader looks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moves {
    /// One displacing insert: `x` goes 3 -> 0.
    One,
    /// `x` goes 3 -> 0 -> 3 -> 0 (insert n1, remove n1, insert n2, remove
    /// n2, insert n1): a tag bounced between its two buckets, which is what
    /// the stripe validation of a negative `contains` is for.
    Three,
}

/// Which of a model's two operations runs on the spawned thread (the other
/// runs on the model's main thread).
///
/// It matters under a preemption bound: the thread that runs on after
/// `spawn` needs no preemption to go first, and the one that goes second
/// can still read stale words if it has not synchronised with the first.
/// So the models run in both orientations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spawned {
    /// Operation `a` runs on the spawned thread, `b` on the main thread.
    A,
    /// Operation `b` runs on the spawned thread, `a` on the main thread.
    B,
}

/// Runs `a` and `b` concurrently on two threads (see [`Spawned`]) and
/// returns both results.
pub fn race<RA, RB>(
    f: &Arc<CuckooFilter>,
    spawned: Spawned,
    a: impl FnOnce(&CuckooFilter) -> RA + Send + 'static,
    b: impl FnOnce(&CuckooFilter) -> RB + Send + 'static,
) -> (RA, RB)
where
    RA: Send + 'static,
    RB: Send + 'static,
{
    let other = Arc::clone(f);
    match spawned {
        Spawned::A => {
            let t = thread::spawn(move || a(&other));
            let rb = b(f);
            (t.join().unwrap(), rb)
        }
        Spawned::B => {
            let t = thread::spawn(move || b(&other));
            let ra = a(f);
            (ra, t.join().unwrap())
        }
    }
}

fn inserted(what: &str, r: Result<(), koel::InsertError>) -> Result<(), String> {
    r.map_err(|e| format!("insert {what} failed: {e:?}"))
}

/// Model 1: `contains` of a present key never misses while a writer
/// displaces that key's tag.
///
/// Operation `a` (the writer) inserts `n1` into its full pair, which moves
/// `x` from bucket 3 to 0 (and, with [`Moves::Three`], back and forth twice
/// more); operation `b` concurrently calls `contains(x)`, which must be
/// `true`.
pub fn contains_vs_displacement(name: &str, canary: Canary, moves: Moves, spawned: Spawned) {
    contains_vs_displacement_bounded(name, canary, moves, spawned, None)
}

/// Model 1 with its own preemption bound (see [`model_bounded`]).
///
/// A bound of 3 reaches the race the stripe's step between copy and clear
/// exists for, with the reader spawned: the writer takes the stripe; the
/// reader reads that held value, then bucket 0 (no `x` yet); the writer
/// copies `x` into 0 and clears it from 3; the reader reads bucket 3 (no
/// `x`) and the stripe again, before the writer releases it. Only the step
/// makes the two stripe values differ.
pub fn contains_vs_displacement_bounded(
    name: &str,
    canary: Canary,
    moves: Moves,
    spawned: Spawned,
    bound: Option<usize>,
) {
    let k = Layout::one_free();
    model_bounded(name, bound, move || {
        let f = Arc::new(filter(canary));
        k.prefill(&f)?;
        let (n1, n2, x) = (k.n1, k.n2, k.x);
        let (writer, seen) = race(
            &f,
            spawned,
            move |f| {
                inserted("n1 (x 3 -> 0)", f.insert_hash(n1))?;
                if moves == Moves::Three {
                    ensure!(f.remove_hash(n1), "remove n1 found nothing");
                    inserted("n2 (x 0 -> 3)", f.insert_hash(n2))?;
                    ensure!(f.remove_hash(n2), "remove n2 found nothing");
                    inserted("n1 again (x 3 -> 0)", f.insert_hash(n1))?;
                }
                Ok(())
            },
            move |f| f.contains_hash(x),
        );
        ensure!(
            seen,
            "false negative: contains(x) returned false while x's tag was being displaced"
        );
        writer?;

        let s = f.stats();
        let expected = if moves == Moves::One { 1 } else { 3 };
        ensure!(
            s.paths_by_length[1] == expected,
            "{expected} one-hop path(s) committed: {s:?}"
        );
        // (The RemoveBeforeCopy canary's hop returns before counting the move.)
        ensure!(
            canary == Canary::RemoveBeforeCopy || s.displacements == expected,
            "the writer displaced x {expected} time(s): {s:?}"
        );
        all_present(&f, &k.present, "pre-inserted")?;
        all_present(&f, &[k.n1], "inserted")?;
        ensure!(f.count_hash(k.x) == 1, "x was moved, not duplicated");
        holds_sixteen(&f, &s)
    });
}

/// Model 1c: `count` of a key whose tag a writer displaces counts it
/// exactly once: never zero (the step between copy and clear) and never
/// twice (the tag in flight, marked in the stripe from the take to the
/// release, makes the count read again while the copy shows in both
/// buckets). A writer stopped with the tag in flight is the one case in
/// which a lookup waits; loom shows that it then gets the right answer.
pub fn count_vs_displacement(name: &str, canary: Canary, spawned: Spawned) {
    let k = Layout::one_free();
    model(name, move || {
        let f = Arc::new(filter(canary));
        k.prefill(&f)?;
        let (n1, x) = (k.n1, k.x);
        let (writer, copies) = race(
            &f,
            spawned,
            move |f| inserted("n1 (x 3 -> 0)", f.insert_hash(n1)),
            move |f| f.count_hash(x),
        );
        ensure!(copies != 0, "false negative: count(x) was 0 while x moved");
        ensure!(
            copies == 1,
            "count(x) counted twice: {copies} copies while x moved"
        );
        writer?;
        let s = f.stats();
        ensure!(s.displacements == 1, "the writer displaced x once: {s:?}");
        all_present(&f, &k.present, "pre-inserted")?;
        ensure!(f.count_hash(x) == 1, "x was moved, not duplicated");
        holds_sixteen(&f, &s)
    });
}

/// What some execution of a model reached (`std` flags, set inside the
/// model and read after `loom::model` returns).
#[derive(Clone, Default)]
pub struct Reached {
    pub displaced: StdArc<AtomicBool>,
    pub stale: StdArc<AtomicBool>,
    pub full: StdArc<AtomicBool>,
}

impl Reached {
    fn note(&self, s: &koel::Stats) {
        if s.displacements > 0 {
            self.displaced.store(true, Relaxed);
        }
        if s.stale_paths > 0 {
            self.stale.store(true, Relaxed);
        }
    }

    pub fn displaced(&self) -> bool {
        self.displaced.load(Relaxed)
    }

    pub fn stale(&self) -> bool {
        self.stale.load(Relaxed)
    }

    pub fn full(&self) -> bool {
        self.full.load(Relaxed)
    }
}

/// Model 2: `remove` racing a displacement of the same entry removes
/// exactly one copy, and the copy does not come back.
///
/// Operation `a` inserts `n1`, which displaces `x` (3 -> 0) unless the
/// remove came first; operation `b` removes `x` once.
pub fn remove_vs_displacement(name: &str, canary: Canary, spawned: Spawned) -> Reached {
    let k = Layout::one_free();
    let reached = Reached::default();
    let seen = reached.clone();
    model(name, move || {
        let f = Arc::new(filter(canary));
        k.prefill(&f)?;
        let (n1, x) = (k.n1, k.x);
        let (insert, removed) = race(
            &f,
            spawned,
            move |f| f.insert_hash(n1),
            move |f| f.remove_hash(x),
        );
        inserted("n1", insert)?;
        ensure!(removed, "remove(x) found no copy of a present key");

        let copies = f.count_hash(k.x);
        ensure!(
            copies == 0,
            "x was inserted once and removed once, but {copies} copy is back"
        );
        let others: Vec<u64> = k.present.iter().copied().filter(|&h| h != k.x).collect();
        all_present(&f, &others, "pre-inserted")?;
        all_present(&f, &[k.n1], "inserted")?;
        let s = f.stats();
        ensure!(
            f.len() == k.present.len() && s.occupied_slots == k.present.len(),
            "one removed, one inserted: len {} occupied {}",
            f.len(),
            s.occupied_slots
        );
        seen.note(&s);
        Ok(())
    });
    reached
}

/// Model 3: of two threads running `insert_unique` of one absent key,
/// exactly one gets `Ok(true)`, and one copy is stored.
///
/// With `full`, the key's two buckets are full (the `one_free` layout, key
/// `n1`), so each call drops its stripe, displaces `x`, and tries again. The
/// loser may then get `Err(Full)` (noted in [`Reached::full`]): the winner
/// can take the table's last lane while the loser searches for room.
pub fn unique_pair(name: &str, canary: Canary, full: bool) -> Reached {
    let k = Layout::one_free();
    let reached = Reached::default();
    let seen = reached.clone();
    model(name, move || {
        let f = Arc::new(filter(canary));
        let key = if full {
            k.prefill(&f)?;
            k.n1
        } else {
            k.x
        };
        let before = f.len();
        // Symmetric, so one orientation covers both.
        let (mine, theirs) = race(
            &f,
            Spawned::A,
            move |f| f.insert_unique_hash(key),
            move |f| f.insert_unique_hash(key),
        );
        let winners = [mine, theirs].iter().filter(|r| **r == Ok(true)).count();
        ensure!(
            winners == 1,
            "insert_unique winners: {winners} (spawned {mine:?}, main {theirs:?})"
        );
        for r in [mine, theirs] {
            match r {
                Ok(_) => {}
                Err(koel::InsertError::Full) if full => seen.full.store(true, Relaxed),
                Err(e) => return Err(format!("insert_unique failed: {e:?}")),
            }
        }
        let copies = f.count_hash(key);
        ensure!(copies == 1, "{copies} copies stored");
        ensure!(
            f.len() == before + 1,
            "len {} after one winner, was {before}",
            f.len()
        );
        if full {
            all_present(&f, &k.present, "pre-inserted")?;
        }
        seen.note(&f.stats());
        Ok(())
    });
    reached
}

/// Model 4: a displacement path that goes stale is aborted and searched
/// again without losing anything.
///
/// `two_free` layout. Operation `a` inserts `n1` (pair {3,2}, both full):
/// its search finds "move x from 3 to 0". Operation `b` inserts `y`, whose
/// first bucket is 0, so it can take bucket 0's last lane between `a`'s
/// search and `a`'s move; then `a`'s copy into 0 fails, the path is stale,
/// and the second search moves `z` from 2 to 1 instead. `b` then checks
/// `contains(x)` and `contains(z)` while `a` may still be moving them.
pub fn stale_path(name: &str, canary: Canary, spawned: Spawned) -> Reached {
    let k = Layout::two_free();
    let reached = Reached::default();
    let seen = reached.clone();
    model(name, move || {
        let f = Arc::new(filter(canary));
        k.prefill(&f)?;
        let (n1, x, y, z) = (k.n1, k.x, k.y, k.z.expect("two_free has z"));
        let (insert_n1, (insert_y, seen_x, seen_z)) = race(
            &f,
            spawned,
            move |f| f.insert_hash(n1),
            move |f| (f.insert_hash(y), f.contains_hash(x), f.contains_hash(z)),
        );
        ensure!(
            seen_x,
            "false negative: contains(x) returned false during a racing displacement"
        );
        ensure!(
            seen_z,
            "false negative: contains(z) returned false during a racing displacement"
        );
        inserted("n1", insert_n1)?;
        inserted("y", insert_y)?;

        all_present(&f, &k.present, "pre-inserted")?;
        all_present(&f, &[k.n1, k.y], "inserted")?;
        ensure!(f.count_hash(x) == 1, "x neither lost nor duplicated");
        ensure!(f.count_hash(z) == 1, "z neither lost nor duplicated");
        let s = f.stats();
        let expected = k.present.len() + 2;
        ensure!(
            f.len() == expected && s.occupied_slots == expected,
            "len {} occupied {}, expected {expected}",
            f.len(),
            s.occupied_slots
        );
        ensure!(s.paths() >= 1, "n1 needed a displacement: {s:?}");
        seen.note(&s);
        Ok(())
    });
    reached
}

/// A full table at its growth cap, for model 9.
///
/// ```text
/// bucket 0:  r    b0   b0   b0      r, b0 = pair {0,1}
/// bucket 1:  b1   b1   b1   b1      b1 = pair {1,0}
/// bucket 2:  b2   b2   b2   b2      b2 = pair {2,3}
/// bucket 3:  x    b3   b3   b3      x = pair {0,3}; b3 = pair {3,2}
/// ```
///
/// `ka` and `kb` have pair `{3,2}`: both full, and the full search from
/// bucket 3 reaches bucket 0 through `x` (lane 0), so once `r` is removed
/// either can get in by moving `x` to bucket 0; while the table is full,
/// their searches fail.
struct CapLayout {
    r: u64,
    x: u64,
    ka: u64,
    kb: u64,
    /// Inserted in this order; all present after the pre-fill.
    order: Vec<u64>,
}

impl CapLayout {
    fn new() -> CapLayout {
        let mut p = Picker::new();
        let r = p.key(0, 1);
        let b0 = p.keys(3, 0, 1);
        let x = p.key(0, 3);
        let b3 = p.keys(3, 3, 2);
        let b2 = p.keys(4, 2, 3);
        let b1 = p.keys(4, 1, 0);
        let (ka, kb) = (p.key(3, 2), p.key(3, 2));
        // Bucket 0 fills first, so x (first bucket 0) lands in 3, lane 0.
        let mut order = vec![r];
        order.extend(&b0);
        order.push(x);
        order.extend(&b3);
        order.extend(&b2);
        order.extend(&b1);
        CapLayout {
            r,
            x,
            ka,
            kb,
            order,
        }
    }
}

/// Model 9: at the growth cap, a remove lets later inserts search again.
///
/// The table is full and cannot grow (its false-positive cap forbids a
/// doubling and a level above). Operation `a` inserts `ka`: its search
/// fails unless the remove came first, so it sets the full hint, and
/// inserts after it skip the search. Operation `b` removes `r` (freeing a lane in bucket 0) and
/// then inserts `kb`, whose only way in is a search (moving `x` to 0).
/// The hint must not refuse `kb` with a search that predates the remove:
/// if `kb` is refused, `ka` must have taken the freed lane.
pub fn full_hint_vs_remove(name: &str, canary: Canary, spawned: Spawned) {
    let k = CapLayout::new();
    model(name, move || {
        let f = Arc::new(
            CuckooFilter::builder()
                .capacity(4)
                .fingerprint_bits(super::BITS)
                .seed(0)
                // Forbids a doubling (2.3e-4 at full load) and a level
                // above: half of the 4e-6 that level 0's bound (1.16e-4)
                // leaves is less than a first 21-bit table's 2.6e-6.
                // (2e-4 allowed a level, and the refused inserts went up.)
                .max_false_positive_rate(1.2e-4)
                .canary(canary)
                .build()
                .expect("tiny filter"),
        );
        fill(&f, &k.order)?;
        let (r, ka, kb) = (k.r, k.ka, k.kb);
        let (a, (removed, b)) = race(
            &f,
            spawned,
            move |f| f.insert_hash(ka),
            move |f| (f.remove_hash(r), f.insert_hash(kb)),
        );
        ensure!(removed, "remove(r) found no copy of a present key");
        for res in [&a, &b] {
            if let Err(e) = res {
                ensure!(
                    matches!(e, koel::InsertError::FalsePositiveRateLimit { .. }),
                    "refused with {e:?}"
                );
            }
        }
        ensure!(
            a.is_ok() || b.is_ok(),
            "kb was refused while the lane the remove freed stayed free (ka refused too): \
             the full hint came from a search that missed the remove"
        );
        ensure!(!(a.is_ok() && b.is_ok()), "two inserts took one free lane");
        let mut present: Vec<u64> = k.order.iter().copied().filter(|&h| h != r).collect();
        present.extend(a.is_ok().then_some(ka));
        present.extend(b.is_ok().then_some(kb));
        all_present(&f, &present, "present")?;
        ensure!(f.count_hash(k.x) == 1, "x was lost or doubled");
        holds_sixteen(&f, &f.stats())?;
        Ok(())
    });
}
