//! The tests `.ci/run` runs under Miri (tree borrows): every unsafe path of
//! the engine on small tables, in a few minutes of interpretation.
//!
//! Small tables stay on the heap (tables of 4 MiB and more are `mmap`ed,
//! which Miri does not model), so these cover the heap allocator, the
//! engine's word accesses, growth's table chain (each table owned by the
//! first through its migrations, freed on drop), saving (the snapshot view)
//! and loading (a filter rebuilt from saved words). They also run, quickly,
//! in the ordinary test suite. `.ci/run` runs them with
//! `-Zmiri-ignore-leaks` (crossbeam-epoch's global collector, which koel
//! no longer uses, leaked every pinning thread's registration; the option
//! stays harmless).

mod common;

use common::Keys;
use koel::{BloomFilter, CuckooFilter, Growth};

fn small(growth: Growth) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(200)
        .seed(7)
        .growth(growth)
        .build()
        .expect("small filter builds")
}

/// A small filter holding the first `n` keys of stream `seed`, and the keys.
fn filled(growth: Growth, seed: u64, n: usize) -> (CuckooFilter, Vec<u64>) {
    let f = small(growth);
    let keys: Vec<u64> = Keys(seed).take(n).collect();
    for k in &keys {
        f.insert(k).expect("a small filter takes them");
    }
    (f, keys)
}

#[test]
fn engine_ops_on_a_small_filter() {
    let (f, keys) = filled(Growth::Fixed, 1, 150);
    assert_eq!(f.len(), keys.len());
    assert!(keys.iter().all(|k| f.contains(k)), "no false negative");
    assert_eq!(f.insert_unique(&keys[0]), Ok(false));
    f.insert(&keys[0]).expect("a second copy fits");
    assert!(f.count(&keys[0]) >= 2);
    for k in &keys[..100] {
        assert!(f.remove(k), "an inserted key is removable");
    }
    assert!(f.remove(&keys[0]), "the second copy is still there");
    assert_eq!(f.len(), 50);
    assert!(keys[100..].iter().all(|k| f.contains(k)), "survivors stay");
}

#[test]
fn grow_and_drop() {
    let (f, keys) = filled(Growth::Double, 2, 1_500);
    assert!(f.generation() >= 2, "the table doubled at least twice");
    assert!(keys.iter().all(|k| f.contains(k)), "no false negative");
    // Dropping frees every table of the chain exactly once.
    drop(f);
}

#[test]
fn threaded_inserts_while_growing() {
    let f = small(Growth::Double);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let f = &f;
            s.spawn(move || {
                for k in Keys(10 + t).take(300) {
                    f.insert(&k).expect("a doubling filter takes them");
                }
            });
        }
    });
    for t in 0..2u64 {
        assert!(Keys(10 + t).take(300).all(|k| f.contains(&k)));
    }
}

#[test]
fn save_and_load_round_trip() {
    let (f, keys) = filled(Growth::Double, 3, 600);
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).expect("writing to a Vec succeeds");
    let g = CuckooFilter::read_from(bytes.as_slice()).expect("its own bytes load");
    assert_eq!(g.len(), f.len());
    assert_eq!(g.generation(), f.generation());
    assert!(
        keys.iter().all(|k| g.contains(k)),
        "no key lost in the trip"
    );
}

#[test]
fn threaded_save_while_a_writer_runs() {
    let (f, before) = filled(Growth::Fixed, 4, 80);
    let bytes = std::thread::scope(|s| {
        s.spawn(|| {
            for k in Keys(5).take(60) {
                f.insert(&k).expect("fits");
            }
        });
        let mut bytes = Vec::new();
        f.write_to(&mut bytes).expect("writing to a Vec succeeds");
        bytes
    });
    let g = CuckooFilter::read_from(bytes.as_slice()).expect("a save under writes loads");
    assert!(
        before.iter().all(|k| g.contains(k)),
        "keys inserted before the save are in it"
    );
}

#[test]
fn bloom_ops_and_round_trip() {
    let f = BloomFilter::new(500, 0.01);
    let keys: Vec<u64> = Keys(6).take(300).collect();
    for k in &keys {
        f.insert(k);
    }
    assert!(keys.iter().all(|k| f.contains(k)), "no false negative");
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).expect("writing to a Vec succeeds");
    let g = BloomFilter::read_from(bytes.as_slice()).expect("its own bytes load");
    assert!(
        keys.iter().all(|k| g.contains(k)),
        "no key lost in the trip"
    );
}
