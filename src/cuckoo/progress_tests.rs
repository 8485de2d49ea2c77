//! Which operation may wait for which: plain inserts into free slots never
//! wait for another thread (not for a stripe holder, not for a migration
//! that cannot seal, not for a save blocked in `write_to`), and lookups
//! write no shared memory, not even statistics, while they re-read.
//!
//! Every wait is bounded by a timeout, so on a protocol that blocks these
//! tests fail instead of hanging.

use super::{with_layout, CuckooFilter};
use crate::raw::bucket;
use crate::raw::pause::stopped::{finishes, Frozen, MUST_FINISH};
use crate::raw::pause::{At, Point};
use crate::sync::Ordering;
use std::io::{self, Write};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn filter(capacity: usize, seed: u64) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(capacity)
        .seed(seed)
        .build()
        .unwrap()
}

/// The unordered candidate pair of `hash` in the current table.
fn pair(f: &CuckooFilter, hash: u64) -> (usize, usize) {
    let (_, i1, i2) = f.placement(hash);
    (i1.min(i2), i1.max(i2))
}

/// Whether `hash`'s first or second bucket has a free lane now.
fn has_room(f: &CuckooFilter, hash: u64) -> bool {
    let t = f.table();
    let (_, i1, i2) = f.placement(hash);
    with_layout!(f, L => [i1, i2].iter().any(|&i| {
        // Relaxed: a test-side peek; only this test's inserter writes.
        bucket::has_empty::<L>(t.word(i).load(Ordering::Relaxed))
    }))
}

#[test]
fn plain_inserts_go_on_while_a_writer_holds_their_pair_during_growth() {
    let f = Arc::new(filter(1000, 11));
    for k in 0..100u64 {
        f.insert(&k).unwrap();
    }
    // A doubling has begun and nothing is sealed yet.
    f.loom_begin_growth(false);
    let held = f.hash(&"held");
    let same_pair: Vec<u64> = (1_000_000u64..)
        .map(|k| f.hash(&k))
        .filter(|&h| pair(&f, h) == pair(&f, held))
        .take(3)
        .collect();
    // A writer (a remove, a displacement hop) holds the pair's stripe and
    // is preempted inside its critical section until released.
    let (held_tx, held_rx) = channel();
    let (release_tx, release_rx) = channel::<()>();
    let holder = {
        let f = Arc::clone(&f);
        thread::spawn(move || {
            f.hold_pair_stripe(held, || {
                held_tx.send(()).unwrap();
                release_rx.recv_timeout(2 * MUST_FINISH).ok();
            })
        })
    };
    held_rx.recv().unwrap();
    let inserts = {
        let (f, keys) = (Arc::clone(&f), same_pair.clone());
        finishes(move || keys.iter().map(|&h| f.insert_hash(h)).collect::<Vec<_>>())
    };
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    let inserts = inserts.expect("plain inserts into free slots waited for the stripe holder");
    assert!(inserts.iter().all(Result::is_ok), "{inserts:?}");
    assert_eq!(f.len(), 100 + same_pair.len());
    assert!(same_pair.iter().all(|&h| f.contains_hash(h)));
    f.finish_migration();
    assert_eq!(f.generation(), 1);
    assert!(same_pair.iter().all(|&h| f.contains_hash(h)));
    assert!((0..100u64).all(|k| f.contains(&k)));
}

/// A writer that blocks at its first write until released, and tells when
/// it got there.
struct Gate {
    entered: Option<Sender<()>>,
    release: Receiver<()>,
    bytes: Vec<u8>,
}

impl Write for Gate {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(entered) = self.entered.take() {
            entered.send(()).unwrap();
            self.release
                .recv_timeout(3 * MUST_FINISH)
                .map_err(|_| io::Error::other("never released"))?;
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn free_slot_inserts_go_on_while_write_to_blocks_with_a_growth_pending() {
    let (capacity, seed) = (300, 5);
    // The first key whose insert finds no room (so starts a doubling), found
    // on a twin: single-threaded inserts place tags deterministically.
    let twin = filter(capacity, seed);
    let trigger = (0u64..)
        .find(|k| {
            twin.insert(k).unwrap();
            twin.stats().insert_failures > 0
        })
        .unwrap();
    let f = Arc::new(filter(capacity, seed));
    for k in 0..trigger {
        f.insert(&k).unwrap();
    }
    assert_eq!(f.stats().insert_failures, 0);

    // A save that blocks in its writer (a stalled socket or disk).
    let (entered_tx, entered_rx) = channel();
    let (release_tx, release_rx) = channel();
    let saver = {
        let f = Arc::clone(&f);
        thread::spawn(move || {
            let mut gate = Gate {
                entered: Some(entered_tx),
                release: release_rx,
                bytes: Vec::new(),
            };
            f.write_to(&mut gate).map(|()| gate.bytes)
        })
    };
    entered_rx.recv().unwrap();
    // An insert that needs room starts the doubling; it may wait for the
    // save (its key's buckets are full and cannot be migrated meanwhile).
    let grower = {
        let f = Arc::clone(&f);
        thread::spawn(move || f.insert(&trigger))
    };
    let started = Instant::now();
    while !f.stats().migrating {
        assert!(started.elapsed() < MUST_FINISH, "the doubling never began");
        thread::sleep(Duration::from_millis(1));
    }
    // Keys with a free slot in one of their buckets.
    let fresh: Vec<u64> = (10_000_000u64..)
        .map(|k| f.hash(&k))
        .filter(|&h| has_room(&f, h))
        .take(20)
        .collect();
    let inserts = {
        let (f, fresh) = (Arc::clone(&f), fresh.clone());
        finishes(move || {
            fresh
                .iter()
                .filter(|&&h| has_room(&f, h))
                .map(|&h| f.insert_hash(h))
                .collect::<Vec<_>>()
        })
    };
    release_tx.send(()).unwrap();
    let inserts = inserts.expect("free-slot inserts waited for the save blocked in write_to");
    assert!(!inserts.is_empty() && inserts.iter().all(Result::is_ok));
    assert_eq!(grower.join().unwrap(), Ok(()));
    let bytes = saver.join().unwrap().unwrap();
    let loaded = CuckooFilter::read_from(&bytes[..]).unwrap();
    assert!(
        (0..trigger).all(|k| loaded.contains(&k)),
        "the save holds every key inserted before it"
    );
    assert!((0..=trigger).all(|k| f.contains(&k)));
    assert_eq!(f.len() as u64, trigger + 1 + inserts.len() as u64);
}

/// Keys (as hashes) whose pair in the current table is `{a, b}`, or that
/// share its version stripe: `present` among `inserted`, and `absent` ones
/// (fresh hashes whose tag is in neither bucket), a few of each kind.
struct PairKeys {
    present: Vec<u64>,
    absent: Vec<u64>,
}

fn keys_of_pair(f: &CuckooFilter, inserted: &[u64], a: usize, b: usize) -> PairKeys {
    let stripe = |(i, j): (usize, usize)| f.table().stripe_index(i, j);
    let want = (a.min(b), a.max(b));
    let in_pair = |h: u64| pair(f, h) == want;
    let tags_there: Vec<u64> = inserted
        .iter()
        .filter(|&&h| in_pair(h))
        .map(|&h| f.placement(h).0)
        .collect();
    let present: Vec<u64> = inserted.iter().copied().filter(|&h| in_pair(h)).collect();
    let mut absent: Vec<u64> = (1u64 << 40..)
        .map(|k| f.hash(&k))
        .filter(|&h| in_pair(h) && !tags_there.contains(&f.placement(h).0))
        .take(3)
        .collect();
    // Two more of another pair of the same stripe (absent: fresh tags
    // whose buckets hold none of them is not checked here; they are
    // looked up with `contains` only, which must complete either way).
    absent.extend(
        (1u64 << 41..)
            .map(|k| f.hash(&k))
            .filter(|&h| pair(f, h) != want && stripe(pair(f, h)) == stripe(want))
            .take(2),
    );
    PairKeys { present, absent }
}

/// Per present key `(contains, count)`, per absent key whether either
/// lookup saw it.
type Answers = (Vec<(bool, usize)>, Vec<bool>);

/// Looks up every key of `keys` (with `contains` and `count`) on another
/// thread; `Err` if that does not finish within [`MUST_FINISH`]. `skip`
/// is a key whose `count` is not asked.
fn lookups_finish(
    f: &Arc<CuckooFilter>,
    keys: &PairKeys,
    skip_count: Option<u64>,
) -> Result<Answers, ()> {
    let (f, present, absent) = (Arc::clone(f), keys.present.clone(), keys.absent.clone());
    finishes(move || {
        let present = present
            .iter()
            .map(|&h| {
                let count = if Some(h) == skip_count {
                    1
                } else {
                    f.count_hash(h)
                };
                (f.contains_hash(h), count)
            })
            .collect();
        let absent = absent
            .iter()
            .map(|&h| f.contains_hash(h) | (f.count_hash(h) > 0))
            .collect();
        (present, absent)
    })
}

/// A `Growth::Fixed` filter filled until the next key's insert needs a
/// displacement; returns it, the inserted hashes, and that next hash.
fn filled_until_displacement(seed: u64) -> (Arc<CuckooFilter>, Vec<u64>, u64) {
    let f = CuckooFilter::builder()
        .capacity(2000)
        .seed(seed)
        .growth(crate::Growth::Fixed)
        .build()
        .unwrap();
    let mut inserted = Vec::new();
    for k in 0u64.. {
        let h = f.hash(&k);
        if !has_room(&f, h) {
            return (Arc::new(f), inserted, h);
        }
        f.insert_hash(h).unwrap();
        inserted.push(h);
    }
    unreachable!()
}

fn check_answers(what: &str, answers: Result<Answers, ()>, keys: &PairKeys) {
    let (present, absent) =
        answers.unwrap_or_else(|()| panic!("lookups waited for a writer stopped {what}"));
    assert!(!keys.present.is_empty() && keys.absent.len() == 5);
    for (h, (found, count)) in keys.present.iter().zip(present) {
        assert!(
            found && count >= 1,
            "{what}: present key {h:#x} reads ({found}, {count})"
        );
    }
    // Only the pair's own absent keys are known to be absent.
    for (h, seen) in keys.absent.iter().zip(absent).take(3) {
        assert!(!seen, "{what}: absent key {h:#x} was seen");
    }
}

/// Stops a displacing insert's hop at `point` and checks that every
/// lookup of the pair's keys completes meanwhile (the moving tag's own
/// `count` re-reads until the hop ends: see
/// `lookups_that_re_read_write_no_statistics`) and answers right; then
/// lets the hop finish. The filter and the moving key's hash, for the
/// caller's own check.
fn lookups_complete_while_a_hop_is_stopped(
    seed: u64,
    point: Point,
    what: &str,
) -> (Arc<CuckooFilter>, u64) {
    let (f, inserted, next) = filled_until_displacement(seed);
    let frozen = {
        let f = Arc::clone(&f);
        Frozen::at(point, move || f.insert_hash(next).unwrap())
    };
    let keys = keys_of_pair(&f, &inserted, frozen.at.a, frozen.at.b);
    let moving = moving_key(&f, &keys, frozen.at);
    let answers = lookups_finish(&f, &keys, Some(moving));
    frozen.thaw();
    check_answers(what, answers, &keys);
    assert!(inserted.iter().chain([&next]).all(|&h| f.contains_hash(h)));
    (f, moving)
}

#[test]
fn lookups_complete_while_a_hop_is_stopped_after_taking_its_stripe() {
    let (f, _) =
        lookups_complete_while_a_hop_is_stopped(21, Point::HopHeld, "after taking a hop's stripe");
    assert!(f.stats().displacements > 0);
}

#[test]
fn lookups_complete_while_a_hop_is_stopped_between_copy_and_clear() {
    let (f, moving) = lookups_complete_while_a_hop_is_stopped(
        22,
        Point::HopCopied,
        "between a hop's copy and clear",
    );
    assert_eq!(f.count_hash(moving), 1);
}

/// The key of `keys` whose tag the hop stopped at `at` moves.
fn moving_key(f: &CuckooFilter, keys: &PairKeys, at: At) -> u64 {
    keys.present
        .iter()
        .copied()
        .find(|&h| f.placement(h).0 == at.tag)
        .expect("the moving tag belongs to a key of its pair")
}

/// The one lookup that re-reads while a writer is stopped: a `count` of the
/// tag a hop has in flight (its copy shows in both buckets between the
/// copy and the clear). It writes no shared memory meanwhile, not even
/// statistics, and counts the tag once when the hop ends.
#[test]
fn lookups_that_re_read_write_no_statistics() {
    let (f, inserted, next) = filled_until_displacement(23);
    let frozen = {
        let f = Arc::clone(&f);
        Frozen::at(Point::HopCopied, move || f.insert_hash(next).unwrap())
    };
    let keys = keys_of_pair(&f, &inserted, frozen.at.a, frozen.at.b);
    let moving = moving_key(&f, &keys, frozen.at);
    let before = format!("{:?}", f.counters.totals());
    let (started_tx, started_rx) = channel();
    let reader = {
        let f = Arc::clone(&f);
        thread::spawn(move || {
            started_tx.send(()).unwrap();
            let start = Instant::now();
            let copies = f.count_hash(moving);
            (copies, f.contains_hash(moving), start.elapsed())
        })
    };
    started_rx.recv().unwrap();
    let hold = Duration::from_millis(50);
    thread::sleep(hold);
    // Still stopped: the reader has been re-reading all along.
    assert!(
        !reader.is_finished(),
        "count read the tag in flight without waiting"
    );
    assert_eq!(
        format!("{:?}", f.counters.totals()),
        before,
        "a re-reading lookup wrote a shared counter"
    );
    frozen.thaw();
    let (copies, found, waited) = reader.join().unwrap();
    assert_eq!((copies, found), (1, true), "the tag in flight counts once");
    assert!(waited >= hold / 2, "{waited:?}");
}

#[test]
fn lookups_complete_while_a_remove_is_stopped_holding_its_stripe() {
    let (f, inserted, _) = filled_until_displacement(24);
    let victim = inserted[inserted.len() / 2];
    let frozen = {
        let f = Arc::clone(&f);
        Frozen::at(Point::RemoveHeld, move || assert!(f.remove_hash(victim)))
    };
    let At { a, b, .. } = frozen.at;
    let keys = keys_of_pair(&f, &inserted, a, b);
    assert!(keys.present.contains(&victim));
    let answers = lookups_finish(&f, &keys, None);
    frozen.thaw();
    check_answers("inside remove", answers, &keys);
    let rest: Vec<u64> = inserted.iter().copied().filter(|&h| h != victim).collect();
    assert!(rest.iter().all(|&h| f.contains_hash(h)));
    assert_eq!(f.len(), rest.len());
}

#[test]
fn lookups_complete_while_a_migration_chunk_copy_is_stopped() {
    let f = Arc::new(filter(2000, 25));
    let inserted: Vec<u64> = (0..1000u64).map(|k| f.hash(&k)).collect();
    for &h in &inserted {
        f.insert_hash(h).unwrap();
    }
    f.loom_begin_growth(true);
    let frozen = {
        let f = Arc::clone(&f);
        Frozen::at(Point::ForwardCopied, move || f.finish_migration())
    };
    let j = frozen.at.a;
    // Keys with old bucket `j` in their pair (the lookups run on the old
    // table's geometry: the successor is not installed yet).
    let with_j = |h: u64| {
        let (a, b) = pair(&f, h);
        a == j || b == j
    };
    let present: Vec<u64> = inserted.iter().copied().filter(|&h| with_j(h)).collect();
    // Absent: no inserted key has the same tag and pair (chosen without a
    // lookup, which a regression could keep waiting).
    let placed = |h: u64| (f.placement(h).0, pair(&f, h));
    let taken: Vec<_> = present.iter().map(|&h| placed(h)).collect();
    let absent: Vec<u64> = (1u64 << 40..)
        .map(|k| f.hash(&k))
        .filter(|&h| with_j(h) && !taken.contains(&placed(h)))
        .take(5)
        .collect();
    assert!(!present.is_empty());
    let keys = PairKeys { present, absent };
    let answers = lookups_finish(&f, &keys, None);
    frozen.thaw();
    check_answers("inside a migration chunk copy", answers, &keys);
    assert_eq!(f.generation(), 1);
    assert!(inserted.iter().all(|&h| f.contains_hash(h)));
}
