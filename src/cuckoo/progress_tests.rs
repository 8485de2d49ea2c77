//! Which operation may wait for which: plain inserts into free slots never
//! wait for another thread (not for a stripe holder, not for a migration
//! that cannot seal, not for a save blocked in `write_to`), and lookups
//! write no shared memory, not even statistics, while they re-read.
//!
//! Every wait is bounded by a timeout, so on a protocol that blocks these
//! tests fail instead of hanging.

use super::{with_layout, CuckooFilter, LayoutKind};
use crate::raw::bucket;
use crate::raw::bucket::{L12x5, L16x4};
use crate::sync::Ordering;
use std::io::{self, Write};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// How long an operation that must not wait gets before the test fails.
const MUST_FINISH: Duration = Duration::from_secs(10);

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

/// Runs `work` on a new thread; `Err` if it has not finished within
/// [`MUST_FINISH`] (the thread is then left running).
fn finishes<R: Send + 'static>(work: impl FnOnce() -> R + Send + 'static) -> Result<R, ()> {
    let (tx, rx) = channel();
    thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(MUST_FINISH).map_err(|_| ())
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

#[test]
fn lookups_that_re_read_write_no_statistics() {
    let f = Arc::new(filter(1000, 3));
    for k in 0..200u64 {
        f.insert(&k).unwrap();
    }
    let absent = f.hash(&"absent");
    let before = format!("{:?}", f.counters.totals());
    let hold = Duration::from_millis(50);
    let (held_tx, held_rx) = channel();
    let reader = {
        let f = Arc::clone(&f);
        thread::spawn(move || {
            held_rx.recv().unwrap();
            let start = Instant::now();
            let answers = (f.contains_hash(absent), f.count_hash(absent));
            (answers, start.elapsed())
        })
    };
    // The negative lookups overlap a writer's hold of their pair, so they
    // re-read until it ends.
    f.hold_pair_stripe(absent, || {
        held_tx.send(()).unwrap();
        thread::sleep(hold);
    });
    let (answers, waited) = reader.join().unwrap();
    assert_eq!(answers, (false, 0));
    assert!(
        waited >= hold / 2,
        "the lookup did not overlap the hold ({waited:?})"
    );
    assert_eq!(
        format!("{:?}", f.counters.totals()),
        before,
        "a lookup wrote a shared counter"
    );
}
