//! Saving and loading: round trips, atomic saves, snapshots under
//! concurrent writers. Hostile input is in `persist_hostile.rs`.

// Persistence is not built under loom (its models do not save or load).
#![cfg(not(loom))]

mod common;

use common::Keys;
use koel::{ChecksumStatus, CuckooFilter, FilterKind, LoadError};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::thread;

/// A filter of `bits`-bit tags holding the first `items` keys of `Keys(seed)`.
fn filled(bits: u32, capacity: usize, items: usize, seed: u64) -> (CuckooFilter, Vec<u64>) {
    let f = CuckooFilter::builder()
        .capacity(capacity)
        .fingerprint_bits(bits)
        .seed(seed)
        .build()
        .unwrap();
    let keys: Vec<u64> = Keys(seed).take(items).collect();
    for k in &keys {
        f.insert(k).unwrap();
    }
    (f, keys)
}

/// Every answer of `b` equals `a`'s over `probes` keys (the first half of
/// `inserted` and as many never-inserted keys).
fn assert_same_answers(a: &CuckooFilter, b: &CuckooFilter, inserted: &[u64], probes: usize) {
    assert_eq!(a.len(), b.len());
    assert_eq!(a.capacity(), b.capacity());
    assert_eq!(a.seed(), b.seed());
    assert_eq!(a.fingerprint_bits(), b.fingerprint_bits());
    assert_eq!(a.memory_usage(), b.memory_usage());
    let absent = Keys(0x00AB_5E17).take(probes - inserted.len().min(probes / 2));
    let mut n = 0;
    for k in inserted.iter().copied().take(probes / 2).chain(absent) {
        assert_eq!(a.contains(&k), b.contains(&k), "contains({k})");
        n += 1;
    }
    assert_eq!(n, probes);
    // A sample of counts too: copies must survive, not only presence.
    for k in inserted.iter().step_by(97) {
        assert_eq!(a.count(k), b.count(k), "count({k})");
    }
}

#[test]
fn round_trip_answers_equal_the_original_for_a_million_probes_both_layouts() {
    let dir = tempfile::tempdir().unwrap();
    for bits in [16, 12] {
        let (f, keys) = filled(bits, 600_000, 600_000, u64::from(bits));
        // A few duplicates and removals, so the table is not insert-only.
        for k in &keys[..1000] {
            f.insert(k).unwrap();
        }
        for k in &keys[1000..3000] {
            assert!(f.remove(k));
        }
        assert!(f.stats().displacements > 0, "a full table displaced tags");

        let mut bytes = Vec::new();
        f.write_to(&mut bytes).unwrap();
        let g = CuckooFilter::read_from(&bytes[..]).unwrap();
        assert_same_answers(&f, &g, &keys, 1_000_000);

        let path = dir.path().join(format!("f{bits}.koel"));
        f.save(&path).unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "save writes write_to's bytes"
        );
        let h = CuckooFilter::load(&path).unwrap();
        assert_same_answers(&f, &h, &keys, 1_000_000);

        // The loaded filter is a live filter: it takes inserts and removes.
        assert!(h.remove(&keys[5000]));
        h.insert(&u64::MAX).unwrap();
        assert!(h.contains(&u64::MAX));
    }
}

#[test]
fn round_trip_after_growth_answers_equal_for_a_million_probes_both_layouts() {
    // 16-bit tags may double 6 times under the default 1% FPR cap, 12-bit
    // tags twice: start small enough that 500k keys need 3 / 2 doublings.
    for (bits, capacity, generation) in [(16, 70_000, 3), (12, 130_000, 2)] {
        let (f, keys) = filled(bits, capacity, 500_000, 40 + u64::from(bits));
        assert_eq!(f.generation(), generation, "{bits}-bit filter grew");
        let mut bytes = Vec::new();
        f.write_to(&mut bytes).unwrap();
        assert_eq!(bytes[19], generation as u8, "generation byte");
        let g = CuckooFilter::read_from(&bytes[..]).unwrap();
        assert_eq!(g.generation(), generation);
        assert_same_answers(&f, &g, &keys, 1_000_000);
        let info = koel::inspect(&bytes[..]).unwrap();
        assert_eq!(info.buckets, info.m0 << generation);
        assert_eq!(info.item_count, Some(500_000));
    }
}

#[test]
fn saving_a_loaded_filter_gives_the_same_bytes() {
    let (f, _) = filled(16, 10_000, 9_000, 3);
    let mut a = Vec::new();
    f.write_to(&mut a).unwrap();
    let mut b = Vec::new();
    CuckooFilter::read_from(&a[..])
        .unwrap()
        .write_to(&mut b)
        .unwrap();
    assert_eq!(a, b);
}

/// The growth settings survive a save: a `Fixed` filter stays fixed (it
/// came back growable in format version 1), and a custom
/// `max_false_positive_rate` and `max_memory` still apply after loading.
#[test]
fn a_loaded_filter_keeps_its_growth_settings() {
    let fixed = CuckooFilter::builder()
        .capacity(1000)
        .growth(koel::Growth::Fixed)
        .max_false_positive_rate(0.003)
        .seed(8)
        .build()
        .unwrap();
    let mut bytes = Vec::new();
    fixed.write_to(&mut bytes).unwrap();
    let g = CuckooFilter::read_from(&bytes[..]).unwrap();
    assert_eq!(g.growth(), koel::Growth::Fixed);
    assert_eq!(g.max_false_positive_rate(), 0.003);
    // Fixed in behaviour too: it fills up instead of doubling.
    let refused = (0..10_000u64).find_map(|k| g.insert(&k).err());
    assert_eq!(refused, Some(koel::InsertError::Full));
    assert_eq!(g.generation(), 0);

    let capped = CuckooFilter::builder()
        .capacity(1000)
        .max_memory(20_000)
        .seed(9)
        .build()
        .unwrap();
    let mut bytes = Vec::new();
    capped.write_to(&mut bytes).unwrap();
    assert_eq!(koel::inspect(&bytes[..]).unwrap().max_memory, Some(20_000));
    let g = CuckooFilter::read_from(&bytes[..]).unwrap();
    let refused = (0..100_000u64).find_map(|k| g.insert(&k).err());
    assert!(
        matches!(refused, Some(koel::InsertError::MemoryLimit { .. })),
        "{refused:?}"
    );
}

#[test]
fn inspect_reports_the_header_and_the_checksum_status() {
    let (f, _) = filled(12, 50_000, 40_000, 11);
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    let info = koel::inspect(&bytes[..]).unwrap();
    let stats = f.stats();
    assert_eq!(info.kind, FilterKind::Cuckoo);
    assert_eq!(info.format_version, 3);
    assert_eq!(info.hash_algorithm_name(), "fold");
    assert_eq!(info.growth, Some(koel::Growth::Double));
    assert_eq!(info.max_false_positive_rate, Some(1e-2));
    assert_eq!(info.max_memory, None);
    assert_eq!((info.fingerprint_bits, info.tags_per_bucket), (12, 5));
    assert_eq!(info.buckets, stats.buckets as u64);
    assert_eq!(
        info.m0, stats.buckets as u64,
        "an ungrown table is one region"
    );
    assert_eq!(info.generation, 0);
    assert_eq!(info.seed, 11);
    assert_eq!(info.payload_bytes, stats.buckets as u64 * 8);
    assert_eq!(info.item_count, Some(40_000));
    assert_eq!(info.counted_items, Some(40_000));
    assert!(info.hash_probe_matches);
    assert_eq!(info.checksum, ChecksumStatus::Valid);

    let mut damaged = bytes.clone();
    damaged[100] ^= 4;
    assert!(matches!(
        koel::inspect(&damaged[..]).unwrap().checksum,
        ChecksumStatus::Mismatch { .. }
    ));
    let cut = &bytes[..bytes.len() / 2];
    let info = koel::inspect(cut).unwrap();
    assert_eq!(
        info.checksum,
        ChecksumStatus::Truncated {
            expected: bytes.len() as u64,
            found: cut.len() as u64
        }
    );
    assert_eq!((info.item_count, info.counted_items), (None, None));
}

#[test]
fn read_from_consumes_exactly_the_file_and_load_refuses_extra_bytes() {
    let (f, keys) = filled(16, 1000, 900, 5);
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    let len = bytes.len();
    bytes.extend_from_slice(b"next record");
    let mut reader = &bytes[..];
    let g = CuckooFilter::read_from(&mut reader).unwrap();
    assert_eq!(reader, b"next record", "the bytes after the file are left");
    assert!(keys.iter().all(|k| g.contains(k)));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("extra.koel");
    std::fs::write(&path, &bytes).unwrap();
    match CuckooFilter::load(&path) {
        Err(LoadError::FileLengthMismatch { expected, actual }) => {
            assert_eq!((expected, actual), (len as u64, bytes.len() as u64));
        }
        other => panic!("expected FileLengthMismatch, got {other:?}"),
    }
}

/// A writer that accepts `left` bytes, then fails.
struct FailAfter {
    written: Vec<u8>,
    left: usize,
}

impl Write for FailAfter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::other("disk full"));
        }
        let n = buf.len().min(self.left);
        self.left -= n;
        self.written.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_failing_halfway_is_an_error_and_never_a_loadable_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.koel");
    let (old, old_keys) = filled(16, 100_000, 90_000, 1);
    old.save(&path).unwrap();
    let full_len = std::fs::metadata(&path).unwrap().len() as usize;

    let (new, _) = filled(16, 100_000, 90_000, 2);
    for cut in [0, 10, 72, full_len / 2, full_len - 9, full_len - 1] {
        let mut w = FailAfter {
            written: Vec::new(),
            left: cut,
        };
        let err = new.write_to(&mut w).unwrap_err();
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(w.written.len(), cut);
        // What did get written is refused, never loaded as a filter.
        assert!(
            CuckooFilter::read_from(&w.written[..]).is_err(),
            "cut {cut}"
        );
    }
    // The file saved before is untouched and loads.
    let back = CuckooFilter::load(&path).unwrap();
    assert_eq!(back.seed(), 1);
    assert!(old_keys.iter().all(|k| back.contains(k)));
}

/// Per-key states in the concurrent snapshot test.
const NEW: u8 = 0;
const INSERTED: u8 = 1;
const REMOVING: u8 = 2;
const FAILED: u8 = 3;

/// Can fail: with `with_snapshot` taking no stripes (tried once by hand),
/// the first run reported a key missing from the snapshot, moved by a
/// displacement from a bucket not yet written to one already written.
#[test]
fn a_snapshot_during_inserts_displacements_and_removes_holds_every_completed_insert() {
    for bits in [16, 12] {
        snapshot_under_writers(bits, 200_000, 0.88);
    }
}

/// The same while the filter grows: writers keep 4x the first table's
/// slots live, so it doubles twice during the test, and every snapshot
/// finds a table that is migrating or has just been replaced.
#[test]
fn a_snapshot_while_the_filter_grows_holds_every_completed_insert() {
    for bits in [16, 12] {
        snapshot_under_writers(bits, 50_000, 3.5);
    }
}

fn snapshot_under_writers(bits: u32, capacity: usize, live_per_slot: f64) {
    const WRITERS: usize = 4;
    let f = CuckooFilter::builder()
        .capacity(capacity)
        .fingerprint_bits(bits)
        .seed(7)
        .build()
        .unwrap();
    // Each writer keeps `live` of its keys in the filter (removing the key
    // inserted `live` steps earlier), so the table stays about 88% full
    // (or grows to hold them) while keys churn through it and inserts
    // displace tags.
    let first_generation = f.generation();
    let live = (f.capacity() as f64 * live_per_slot) as usize / WRITERS;
    let per_writer = live * 6;
    let keys: Vec<u64> = Keys(99).take(WRITERS * per_writer).collect();
    let state: Vec<AtomicU8> = keys.iter().map(|_| AtomicU8::new(NEW)).collect();
    let writers_done = AtomicUsize::new(0);
    let snapshots = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        for w in 0..WRITERS {
            let (f, keys, state, writers_done, snapshots) =
                (&f, &keys, &state, &writers_done, &snapshots);
            s.spawn(move || {
                let mine = w * per_writer..(w + 1) * per_writer;
                for i in mine.clone() {
                    // Paced by the snapshots: a sixth of the keys per
                    // snapshot until 5 are taken, so snapshots overlap the
                    // writers however the threads are scheduled.
                    while (i - mine.start) * 6
                        >= per_writer * (snapshots.load(Ordering::Relaxed) + 1)
                        && snapshots.load(Ordering::Relaxed) < 5
                    {
                        thread::yield_now();
                    }
                    let ok = f.insert(&keys[i]).is_ok();
                    // Release: pairs with the snapshot thread's Acquire
                    // scan, so an insert it sees as done happened before
                    // the snapshot.
                    state[i].store(if ok { INSERTED } else { FAILED }, Ordering::Release);
                    if i >= mine.start + live && state[i - live].load(Ordering::Relaxed) == INSERTED
                    {
                        // Marked before the remove starts: a remove that
                        // lands before a snapshot is visible to the scan
                        // after it (through the stripe the remove held).
                        state[i - live].store(REMOVING, Ordering::Release);
                        assert!(f.remove(&keys[i - live]), "an inserted key is removable");
                    }
                }
                writers_done.fetch_add(1, Ordering::Release);
            });
        }
        let (f, keys, state, snapshots, stop) = (&f, &keys, &state, &snapshots, &stop);
        s.spawn(move || {
            let mut bytes = Vec::new();
            while !stop.load(Ordering::Acquire) {
                // Acquire: pairs with the writers' Release stores.
                let before: Vec<usize> = (0..keys.len())
                    .filter(|&i| state[i].load(Ordering::Acquire) == INSERTED)
                    .collect();
                bytes.clear();
                f.write_to(&mut bytes).unwrap();
                let kept: Vec<usize> = before
                    .into_iter()
                    .filter(|&i| state[i].load(Ordering::Acquire) == INSERTED)
                    .collect();
                let copy = CuckooFilter::read_from(&bytes[..]).unwrap();
                for &i in &kept {
                    assert!(
                        copy.contains(&keys[i]),
                        "key {i} was inserted before the snapshot and not removed, \
                         but the snapshot lacks it"
                    );
                }
                snapshots.fetch_add(1, Ordering::Relaxed);
            }
        });
        while writers_done.load(Ordering::Acquire) < WRITERS {
            thread::yield_now();
        }
        stop.store(true, Ordering::Release);
    });
    let stats = f.stats();
    assert!(
        stats.displacements > 1000,
        "{bits}-bit: writers displaced only {} tags",
        stats.displacements
    );
    assert!(
        snapshots.load(Ordering::Relaxed) >= 3,
        "{bits}-bit: only {} snapshots overlapped the writers",
        snapshots.load(Ordering::Relaxed)
    );
    assert!(
        state.iter().all(|s| s.load(Ordering::Relaxed) != FAILED),
        "no insert failed at this load"
    );
    if live_per_slot > 1.0 {
        assert!(
            f.generation() >= first_generation + 2,
            "{bits}-bit: the filter grew only to generation {}",
            f.generation()
        );
    }
}

// ---- Bloom filter ----------------------------------------------------------

fn bloom(capacity: usize, rate: f64, items: usize, seed: u64) -> (koel::BloomFilter, Vec<u64>) {
    let f = koel::BloomFilter::builder()
        .capacity(capacity)
        .false_positive_rate(rate)
        .seed(seed)
        .build()
        .unwrap();
    let keys: Vec<u64> = Keys(seed).take(items).collect();
    for k in &keys {
        f.insert(k);
    }
    (f, keys)
}

#[test]
fn bloom_round_trip_answers_equal_the_original_for_a_million_probes() {
    let dir = tempfile::tempdir().unwrap();
    // Two bit counts per key (k = 8 and a larger one).
    for (rate, seed) in [(0.02, 1u64), (1e-6, 2)] {
        let (f, keys) = bloom(500_000, rate, 500_000, seed);
        let path = dir.path().join(format!("b{seed}.koel"));
        f.save(&path).unwrap();
        let mut bytes = Vec::new();
        f.write_to(&mut bytes).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        for g in [
            koel::BloomFilter::load(&path).unwrap(),
            koel::BloomFilter::read_from(&bytes[..]).unwrap(),
        ] {
            assert_eq!(
                (g.bits_per_key(), g.blocks(), g.seed(), g.capacity()),
                (f.bits_per_key(), f.blocks(), f.seed(), f.capacity())
            );
            assert_eq!(
                g.target_false_positive_rate(),
                f.target_false_positive_rate()
            );
            assert_eq!(g.len_estimate(), f.len_estimate());
            let absent = Keys(0xB100_0000).take(500_000);
            let mut n = 0;
            for k in keys.iter().copied().chain(absent) {
                assert_eq!(f.contains(&k), g.contains(&k), "contains({k})");
                n += 1;
            }
            assert_eq!(n, 1_000_000);
            // Still a live filter.
            g.insert(&u64::MAX);
            assert!(g.contains(&u64::MAX));
        }
        let info = koel::inspect(&bytes[..]).unwrap();
        assert_eq!(info.kind, FilterKind::Bloom);
        assert_eq!(info.bits_per_key, f.bits_per_key());
        assert_eq!(info.buckets, f.blocks());
        assert_eq!(info.sized_capacity, Some(500_000));
        assert_eq!(info.target_false_positive_rate, Some(rate));
        assert_eq!(info.checksum, ChecksumStatus::Valid);
        assert!(info.hash_probe_matches);
        assert!(info.item_count.is_some() && info.item_count == info.counted_items);
    }
}

#[test]
fn a_bloom_snapshot_during_4_inserting_threads_holds_every_completed_insert() {
    const WRITERS: usize = 4;
    let f = koel::BloomFilter::builder()
        .capacity(4_000_000)
        .false_positive_rate(1e-4)
        .seed(3)
        .build()
        .unwrap();
    let keys: Vec<u64> = Keys(77).take(4_000_000).collect();
    let done: Vec<AtomicBool> = keys.iter().map(|_| AtomicBool::new(false)).collect();
    let writers_done = AtomicUsize::new(0);
    let snapshots = AtomicUsize::new(0);
    thread::scope(|s| {
        for w in 0..WRITERS {
            let (f, keys, done, writers_done, snapshots) =
                (&f, &keys, &done, &writers_done, &snapshots);
            s.spawn(move || {
                for i in (w..keys.len()).step_by(WRITERS) {
                    // Enough overlap seen: stop early to keep the test short.
                    if i % 1024 < WRITERS && snapshots.load(Ordering::Relaxed) >= 4 {
                        break;
                    }
                    // Paced by the snapshots (an eighth of the keys per
                    // snapshot), so they overlap the writers however the
                    // threads are scheduled.
                    while i * 8 >= keys.len() * (snapshots.load(Ordering::Relaxed) + 1) {
                        thread::yield_now();
                    }
                    f.insert(&keys[i]);
                    // Release: pairs with the snapshot thread's Acquire scan.
                    done[i].store(true, Ordering::Release);
                }
                writers_done.fetch_add(1, Ordering::Release);
            });
        }
        let (f, keys, done, snapshots, writers_done) =
            (&f, &keys, &done, &snapshots, &writers_done);
        s.spawn(move || {
            let mut bytes = Vec::new();
            while writers_done.load(Ordering::Acquire) < WRITERS {
                let before: Vec<usize> = (0..keys.len())
                    .filter(|&i| done[i].load(Ordering::Acquire))
                    .collect();
                bytes.clear();
                f.write_to(&mut bytes).unwrap();
                let copy = koel::BloomFilter::read_from(&bytes[..]).unwrap();
                for &i in &before {
                    assert!(
                        copy.contains(&keys[i]),
                        "key {i} inserted before the snapshot is missing"
                    );
                }
                snapshots.fetch_add(1, Ordering::Relaxed);
            }
        });
    });
    assert!(
        snapshots.load(Ordering::Relaxed) >= 2,
        "snapshots overlapped the writers"
    );
}
