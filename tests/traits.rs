//! The standard traits of both filter kinds: `Clone` is a consistent copy
//! while writers run, `Extend` works on a shared `&filter`, `FromIterator`
//! and `Default` build usable filters; and the one batch error says what
//! went in.

use koel::{BatchInsertError, BloomFilter, CuckooFilter, Growth, InsertError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

mod common;

/// SplitMix64: distinct, well-mixed keys.
use common::splitmix::mix64 as mix;

const WRITERS: u64 = 2;
/// Keys per cuckoo writer: enough for five doublings of a 10,000-item
/// table, so clones race displacements and migrations.
const PER_WRITER: u64 = 150_000;
/// Keys per Bloom writer: Bloom inserts are faster, and the writers must
/// outlast a few clones.
const PER_BLOOM_WRITER: u64 = 1_000_000;

fn writer_key(w: u64, i: u64) -> u64 {
    mix(w << 32 | i)
}

/// The keys a clone must hold, given how many each writer had finished
/// before it: every one of the last 4096 per writer (the ones most likely
/// in flight), and every 7th before them (key 0 included), so a check
/// stays short next to the writers.
fn earlier_keys(before: &[usize; WRITERS as usize]) -> impl Iterator<Item = (u64, u64)> + '_ {
    (0..WRITERS).flat_map(move |w| {
        let n = before[w as usize] as u64;
        let recent = n.saturating_sub(4096);
        (0..recent).step_by(7).chain(recent..n).map(move |i| (w, i))
    })
}

/// Runs `WRITERS` threads that insert their keys in order with `insert`,
/// publishing how many they finished; meanwhile calls `check(done)` with
/// the per-writer counts read just before, until the writers end. Returns
/// how many checks ran.
fn race_writers(
    per_writer: u64,
    insert: impl Fn(u64) + Sync,
    mut check: impl FnMut(&[usize; WRITERS as usize]),
) -> usize {
    let done: [AtomicUsize; WRITERS as usize] = Default::default();
    let running = AtomicUsize::new(WRITERS as usize);
    let mut checks = 0;
    thread::scope(|s| {
        for w in 0..WRITERS {
            let (done, running, insert) = (&done, &running, &insert);
            s.spawn(move || {
                /// Counts the writer out even if it panics, so the checks end.
                struct Finished<'a>(&'a AtomicUsize);
                impl Drop for Finished<'_> {
                    fn drop(&mut self) {
                        self.0.fetch_sub(1, Ordering::Release);
                    }
                }
                let _finished = Finished(running);
                for i in 0..per_writer {
                    insert(writer_key(w, i));
                    // Release: pairs with the Acquire load before a check,
                    // so the insert happens-before the clone.
                    done[w as usize].store(i as usize + 1, Ordering::Release);
                }
            });
        }
        while running.load(Ordering::Acquire) > 0 || checks == 0 {
            let before = [0, 1].map(|w| done[w].load(Ordering::Acquire));
            check(&before);
            checks += 1;
        }
    });
    checks
}

#[test]
fn a_cuckoo_clone_taken_during_inserts_holds_every_earlier_key_and_counts_its_contents() {
    // Rounds until a few clones began while the table was doubling (the
    // case a word-by-word copy gets wrong) and a few while the writers ran,
    // at most 20. (One round can see no clone mid-run when the scheduler
    // runs both writers while the checker waits: a CI run saw 0 of 594.)
    let mut during_growth = 0;
    let mut clones_mid_run = 0;
    let mut rounds = 0;
    let mut f;
    loop {
        rounds += 1;
        f = CuckooFilter::builder()
            .capacity(5_000)
            .seed(rounds)
            .build()
            .unwrap();
        race_writers(
            PER_WRITER,
            |k| f.insert(&k).unwrap(),
            |before| {
                during_growth += usize::from(f.stats().migrating);
                let g = f.clone();
                for (w, i) in earlier_keys(before) {
                    assert!(
                        g.contains(&writer_key(w, i)),
                        "the clone lost writer {w}'s key {i} (inserted before the clone)"
                    );
                }
                let s = g.stats();
                assert_eq!(g.len(), s.occupied_slots, "len is the clone's contents");
                assert!(!s.migrating, "a clone starts with one table");
                let earlier: usize = before.iter().sum();
                assert!(g.len() >= earlier, "{} < {earlier}", g.len());
                if earlier > 0 && earlier < (WRITERS * PER_WRITER) as usize {
                    clones_mid_run += 1;
                }
                assert_eq!((g.seed(), g.growth()), (f.seed(), f.growth()));
            },
        );
        if (during_growth >= 3 && clones_mid_run >= 2) || rounds == 20 {
            break;
        }
    }
    assert!(
        clones_mid_run >= 2,
        "{clones_mid_run} clones in {rounds} rounds raced the writers"
    );
    assert!(
        during_growth >= 1,
        "no clone in {rounds} rounds began during a doubling"
    );
    let s = f.stats();
    assert!(s.growths >= 3 && s.displacements > 1000, "{s:?}");
    // A clone of the quiet filter is equal to it, and independent.
    let g = f.clone();
    assert_eq!(g.len(), f.len());
    assert_eq!(g.generation(), f.generation());
    for k in 0..20_000u64 {
        assert_eq!(
            g.contains(&mix(k + (1 << 40))),
            f.contains(&mix(k + (1 << 40)))
        );
    }
    g.clear();
    assert!(
        f.contains(&writer_key(0, 0)),
        "clearing the clone left the original"
    );
}

#[test]
fn a_bloom_clone_taken_during_inserts_holds_every_earlier_key() {
    let f = BloomFilter::builder()
        .capacity((WRITERS * PER_BLOOM_WRITER) as usize)
        .seed(5)
        .build()
        .unwrap();
    let mut clones_mid_run = 0;
    // Rounds (writing the same keys again) until a few clones raced the
    // writers: one round can see none if the scheduler lets the writers
    // finish while the checker waits.
    for _ in 0..10 {
        if clones_mid_run >= 2 {
            break;
        }
        race_writers(
            PER_BLOOM_WRITER,
            |k| {
                f.insert(&k);
            },
            |before| {
                let g = f.clone();
                for (w, i) in earlier_keys(before) {
                    assert!(
                        g.contains(&writer_key(w, i)),
                        "the clone lost writer {w}'s key {i} (inserted before the clone)"
                    );
                }
                let earlier: usize = before.iter().sum();
                if earlier > 0 && earlier < (WRITERS * PER_BLOOM_WRITER) as usize {
                    clones_mid_run += 1;
                }
                assert_eq!(
                    (g.seed(), g.blocks(), g.bits_per_key()),
                    (f.seed(), f.blocks(), f.bits_per_key())
                );
            },
        );
    }
    assert!(
        clones_mid_run >= 2,
        "{clones_mid_run} clones raced the writers"
    );
    let g = f.clone();
    g.clear();
    assert!(
        f.contains(&writer_key(0, 0)),
        "clearing the clone left the original"
    );
}

#[test]
fn extend_on_a_shared_filter_from_many_threads() {
    let cuckoo = Arc::new(CuckooFilter::with_capacity(1000));
    let bloom = Arc::new(BloomFilter::with_capacity(40_000));
    thread::scope(|s| {
        for t in 0..4u64 {
            let (cuckoo, bloom) = (Arc::clone(&cuckoo), Arc::clone(&bloom));
            s.spawn(move || {
                (&*cuckoo).extend((0..10_000).map(|i| t * 10_000 + i));
                (&*bloom).extend((0..10_000).map(|i| t * 10_000 + i));
            });
        }
    });
    assert_eq!(cuckoo.len(), 40_000, "grew from 1000 and kept every copy");
    assert!((0..40_000u64).all(|k| cuckoo.contains(&k) && bloom.contains(&k)));
}

#[test]
#[should_panic(expected = "use insert_many to handle a full filter")]
fn extend_past_a_fixed_filters_room_panics_naming_the_fallible_call() {
    let f = CuckooFilter::builder()
        .capacity(100)
        .growth(Growth::Fixed)
        .build()
        .unwrap();
    (&f).extend(0..100_000u32);
}

#[test]
fn from_iterator_and_default_build_working_filters() {
    let c: CuckooFilter = (0..5000u32).chain(0..5000).collect();
    assert_eq!(c.len(), 10_000, "a key given twice is stored twice");
    // At least 2: a tag collision with another key may add to a count.
    assert!((0..5000u32).all(|k| c.count(&k) >= 2));
    let b: BloomFilter = (0..5000u32).collect();
    assert_eq!(b.capacity(), 5000);
    assert!((0..5000u32).all(|k| b.contains(&k)));
    let absent = (1u32 << 20..(1 << 20) + 100_000)
        .filter(|k| b.contains(k))
        .count();
    assert!(absent < 300, "{absent} false positives in 100k at 0.1%");
    let empty: BloomFilter = std::iter::empty::<u32>().collect();
    assert!(!empty.contains(&1u32));

    let c = CuckooFilter::default();
    assert!(c.is_empty() && c.capacity() >= koel::DEFAULT_CAPACITY);
    assert_eq!(c.growth(), Growth::Double);
    let b = BloomFilter::default();
    assert_eq!(
        (b.capacity(), b.target_false_positive_rate()),
        (koel::DEFAULT_CAPACITY, koel::DEFAULT_FALSE_POSITIVE_RATE)
    );
    let w = BloomFilter::with_capacity(1000);
    assert_eq!(
        (w.capacity(), w.bits_per_key()),
        (1000, BloomFilter::new(1000, 1e-3).bits_per_key())
    );
}

#[test]
fn the_batch_error_says_what_went_in() {
    let fixed = || {
        CuckooFilter::builder()
            .capacity(1000)
            .growth(Growth::Fixed)
            .seed(3)
            .build()
            .unwrap()
    };
    let keys: Vec<u64> = (0..100_000).map(mix).collect();
    let f = fixed();
    let e: BatchInsertError = f.insert_many(&keys).unwrap_err();
    assert_eq!(e.error, InsertError::Full);
    assert_eq!(e.inserted, e.failed_at, "in order: the prefix went in");
    assert_eq!(f.len(), e.inserted);
    assert!(keys[..e.failed_at].iter().all(|k| f.contains(k)));

    // insert_unique_many: keys found present are applied but not counted.
    let f = fixed();
    let mut doubled: Vec<u64> = Vec::new();
    for &k in &keys {
        doubled.extend([k, k]);
    }
    let mut out = vec![false; doubled.len()];
    let e = f.insert_unique_many(&doubled, &mut out).unwrap_err();
    let won = out[..e.failed_at].iter().filter(|&&b| b).count();
    assert_eq!(e.inserted, won, "inserted counts this call's new keys");
    assert_eq!(f.len(), e.inserted);
    assert!(e.inserted <= e.failed_at / 2 + 1 && e.failed_at >= 1000);
    assert!(doubled[..e.failed_at].iter().all(|k| f.contains(k)));
    let text = e.to_string();
    assert!(text.contains(&format!("at key {}", e.failed_at)), "{text}");
}
