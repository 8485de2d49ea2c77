//! Saving and loading a filter that grew past its first table's tag bits:
//! one record per level, chained by header flag bit 0 (`docs/format.md`,
//! "Levels"). A round trip keeps every key, every answer and the way the
//! filter goes on growing; every record that does not fit where it is, and
//! every damaged, truncated or extended chain, is refused.
//!
//! Version 3 files hold doubling upper levels: the filters here are built
//! with `doubling_levels` (an unstable hook) to write them. A filter with
//! a region level, what every filter builds now, saves it as a format
//! version 4 record (the last test; `tests/persist_regions.rs`).

#![cfg(not(loom))]

mod common;

use common::Keys;
use koel::{ChecksumStatus, CuckooFilter, LoadError};
use std::ops::Range;
use xxhash_rust::xxh3::xxh3_64;

/// Offsets of the header fields (the table of `docs/format.md`).
const FLAGS: usize = 12;
const TAG_BITS: usize = 16;
const TAGS_PER_BUCKET: usize = 17;
const GROWTH: usize = 20;
const SEED: usize = 40;
const PROBE: usize = 48;
const PAYLOAD_LEN: usize = 56;
const PARAM64: usize = 64;
const MAX_MEMORY: usize = 72;
const HEADER: usize = 96;

/// Asserts that `$e` matches `$pat`, printing it otherwise.
macro_rules! assert_matches {
    ($e:expr, $pat:pat $(if $guard:expr)?) => {{
        let e = $e;
        assert!(matches!(e, $pat $(if $guard)?), "{e:?}");
    }};
}

/// A filter for 1000 keys given `n` keys: it stops doubling at 64x and
/// gets a level above.
fn two_levels() -> (CuckooFilter, Vec<u64>) {
    let f = CuckooFilter::builder()
        .capacity(1000)
        .doubling_levels()
        .seed(0x1e7e_1502)
        .build()
        .unwrap();
    let keys: Vec<u64> = Keys(17).take(300_000).collect();
    for k in &keys {
        f.insert(k).unwrap();
    }
    assert_eq!(f.stats().levels, 2);
    (f, keys)
}

/// A filter whose tight `max_false_positive_rate` (1.5e-4) keeps every
/// level from doubling much: keys until it has `levels` levels, then 100
/// more.
fn tight(capacity: usize, levels: usize) -> (CuckooFilter, Vec<u64>) {
    grown(capacity, 1.5e-4, levels)
}

/// A filter for `capacity` keys with `max_false_positive_rate` `rate`,
/// given keys until it has `levels` levels, then 100 more.
fn grown(capacity: usize, rate: f64, levels: usize) -> (CuckooFilter, Vec<u64>) {
    let f = CuckooFilter::builder()
        .capacity(capacity)
        .doubling_levels()
        .max_false_positive_rate(rate)
        .seed(0x1e7e_1503)
        .build()
        .unwrap();
    let mut keys = Vec::new();
    let mut after = 0;
    for k in Keys(29) {
        f.insert(&k).unwrap();
        keys.push(k);
        if f.levels_count() == levels {
            after += 1;
            if after == 100 {
                break;
            }
        }
    }
    assert_eq!(f.stats().levels, levels);
    (f, keys)
}

fn bytes_of(f: &CuckooFilter) -> Vec<u8> {
    let mut b = Vec::new();
    f.write_to(&mut b).unwrap();
    b
}

/// The byte ranges of the records of a saved filter, in order.
fn records(b: &[u8]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let payload = u64::from_le_bytes(
            b[at + PAYLOAD_LEN..at + PAYLOAD_LEN + 8]
                .try_into()
                .unwrap(),
        );
        let end = at + HEADER + payload as usize + 16;
        out.push(at..end);
        at = end;
    }
    out
}

/// Re-seals both checksums of the record `r`, so that only the field
/// checks stand between an edited record and a filter.
fn reseal(b: &mut [u8], r: &Range<usize>) {
    let sum = xxh3_64(&b[r.start..r.start + 88]);
    b[r.start + 88..r.start + 96].copy_from_slice(&sum.to_le_bytes());
    let sum = xxh3_64(&b[r.start..r.end - 8]);
    b[r.end - 8..r.end].copy_from_slice(&sum.to_le_bytes());
}

fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// `bytes` through `read_from` and `load`, which must both refuse it with
/// errors of the same kind; returns `read_from`'s.
fn refused(bytes: &[u8]) -> LoadError {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.koel");
    std::fs::write(&path, bytes).unwrap();
    let a = CuckooFilter::read_from(bytes)
        .map(drop)
        .expect_err("read_from accepted it");
    let l = CuckooFilter::load(&path)
        .map(drop)
        .expect_err("load accepted it");
    assert_eq!(
        std::mem::discriminant(&a),
        std::mem::discriminant(&l),
        "read_from said {a}, load said {l}"
    );
    a
}

/// `g`, loaded from `f`'s bytes, is `f`: same keys, same answers, same
/// levels, same bytes saved again; and both grow alike under the same
/// further inserts. (Not byte for byte: a full level's hint that a search
/// for room fails is not saved, so the loaded level searches once more and
/// may keep a key the saved one sent up.)
fn assert_same(f: &CuckooFilter, g: &CuckooFilter, keys: &[u64], more: usize) {
    let (a, b) = (f.stats(), g.stats());
    assert_eq!(a.levels, b.levels, "levels");
    assert_eq!(f.len(), g.len(), "len");
    assert_eq!(f.capacity(), g.capacity(), "capacity");
    assert_eq!(f.memory_usage(), g.memory_usage(), "memory");
    assert_eq!(f.false_positive_rate(), g.false_positive_rate());
    assert!(keys.iter().all(|k| g.contains(k)), "a key was lost");
    for k in Keys(0xab5e).take(200_000) {
        assert_eq!(f.contains(&k), g.contains(&k), "absent key {k}");
    }
    assert!(bytes_of(f) == bytes_of(g), "saved again, the bytes differ");
    // Going on: the same inserts grow both the same way (the loaded
    // levels got the budgets and memory limits the saved ones had).
    for k in Keys(0x90_0d).take(more) {
        let (x, y) = (f.insert(&k), g.insert(&k));
        assert_eq!(x, y, "insert of {k}");
    }
    assert_eq!(
        f.stats().levels,
        g.stats().levels,
        "levels after more inserts"
    );
    assert_eq!(f.capacity(), g.capacity(), "capacity after more inserts");
    assert_eq!(f.len(), g.len(), "len after more inserts");
}

#[test]
fn a_filter_of_two_levels_round_trips() {
    let (f, keys) = two_levels();
    let bytes = bytes_of(&f);
    let rs = records(&bytes);
    assert_eq!(rs.len(), 2);
    assert_eq!(bytes[FLAGS], 1, "level 0 announces the level above");
    assert_eq!(bytes[rs[1].start + FLAGS], 0, "the top level does not");
    assert_eq!(bytes[rs[1].start + TAG_BITS], 21);
    assert_eq!(bytes[rs[1].start + TAGS_PER_BUCKET], 3);
    let g = CuckooFilter::read_from(&bytes[..]).unwrap();
    assert_same(&f, &g, &keys, 300_000);
}

#[test]
fn a_filter_of_three_levels_round_trips_and_grows_on_alike() {
    let (f, keys) = tight(1000, 3);
    let g = CuckooFilter::read_from(&bytes_of(&f)[..]).unwrap();
    assert_same(&f, &g, &keys, 50_000);
    assert!(f.stats().levels >= 3);
}

#[test]
fn save_and_load_round_trip_a_leveled_filter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("levels.koel");
    let (f, keys) = tight(1000, 3);
    f.save(&path).unwrap();
    let g = CuckooFilter::load(&path).unwrap();
    assert_same(&f, &g, &keys, 20_000);
}

#[test]
fn inspect_reports_every_level() {
    let (f, _) = tight(1000, 3);
    let bytes = bytes_of(&f);
    let info = koel::inspect(&bytes[..]).unwrap();
    assert_eq!(info.levels, 3);
    assert_eq!(info.upper_levels.len(), 2);
    assert_eq!(info.checksum, ChecksumStatus::Valid);
    assert!(info.hash_probe_matches);
    assert_eq!(info.item_count, Some(f.len() as u64));
    assert_eq!(info.counted_items, Some(f.len() as u64));
    assert_eq!(info.fingerprint_bits, 16, "the first level's fields");
    for up in &info.upper_levels {
        assert_eq!(
            (up.fingerprint_bits, up.tags_per_bucket, up.levels),
            (21, 3, 1)
        );
        assert_eq!(up.checksum, ChecksumStatus::Valid);
        assert!(up.max_false_positive_rate < info.max_false_positive_rate);
    }
    // A damaged upper level makes the whole file's status a mismatch.
    let rs = records(&bytes);
    let mut b = bytes.clone();
    b[rs[2].start + HEADER + 8] ^= 0x10;
    let info = koel::inspect(&b[..]).unwrap();
    assert_matches!(info.checksum, ChecksumStatus::Mismatch { .. });
    assert_eq!(info.upper_levels[0].checksum, ChecksumStatus::Valid);
    // A chain cut after a record that announces another level.
    let info = koel::inspect(&bytes[..rs[1].end]).unwrap();
    assert_eq!(info.levels, 2);
    assert_eq!(
        info.checksum,
        ChecksumStatus::Truncated {
            expected: rs[1].end as u64 + HEADER as u64,
            found: rs[1].end as u64
        }
    );
}

#[test]
fn read_from_stops_right_after_the_last_record() {
    let (f, _) = tight(100, 3);
    let mut bytes = bytes_of(&f);
    let end = bytes.len();
    bytes.extend_from_slice(b"more bytes that belong to someone else");
    let mut rest = &bytes[..];
    let g = CuckooFilter::read_from(&mut rest).unwrap();
    assert_eq!(rest, &bytes[end..]);
    assert_eq!(g.stats().levels, 3);
    // `load` wants the file to end there.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.koel");
    std::fs::write(&path, &bytes).unwrap();
    assert_matches!(
        CuckooFilter::load(&path),
        Err(LoadError::FileLengthMismatch { expected, actual })
            if expected == end as u64 && actual == bytes.len() as u64
    );
}

#[test]
fn a_chain_cut_after_any_record_is_refused() {
    let (f, _) = tight(100, 3);
    let bytes = bytes_of(&f);
    let rs = records(&bytes);
    assert_eq!(rs.len(), 3);
    for r in &rs[..2] {
        assert_matches!(
            refused(&bytes[..r.end]),
            LoadError::Truncated {
                section: "header of the level above",
                found: 0,
                ..
            }
        );
    }
    // The last record claims a level above that is not there.
    let mut b = bytes.clone();
    b[rs[2].start + FLAGS] = 1;
    reseal(&mut b, &rs[2]);
    assert_matches!(
        refused(&b),
        LoadError::Truncated {
            section: "header of the level above",
            ..
        }
    );
}

#[test]
fn every_truncation_and_every_byte_flip_of_a_leveled_file_is_refused() {
    let (f, _) = tight(100, 3);
    let bytes = bytes_of(&f);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.koel");
    for cut in 0..bytes.len() {
        let b = &bytes[..cut];
        std::fs::write(&path, b).unwrap();
        assert!(CuckooFilter::read_from(b).is_err(), "cut at {cut}");
        assert!(CuckooFilter::load(&path).is_err(), "cut at {cut}");
        let _ = koel::inspect(b);
    }
    for at in 0..bytes.len() {
        let mut b = bytes.clone();
        b[at] ^= 0x21;
        std::fs::write(&path, &b).unwrap();
        assert!(CuckooFilter::read_from(&b[..]).is_err(), "flip at {at}");
        assert!(CuckooFilter::load(&path).is_err(), "flip at {at}");
        let _ = koel::inspect(&b[..]);
    }
}

/// What the fuzz target `read_from_resealed` asks of any input, for
/// every bit of every record's header and a spread of payload bytes,
/// flipped and resealed in that record (so that only the field checks
/// stand in the way): the file is refused, or it loads as a filter that
/// saves back to the bytes it was read from and takes further keys
/// without a panic or a false negative.
#[test]
fn every_resealed_flip_of_any_record_is_refused_or_loads_sound() {
    let (f, _) = tight(100, 3);
    let bytes = bytes_of(&f);
    let rs = records(&bytes);
    assert_eq!(rs.len(), 3);
    let (mut cases, mut loaded) = (0, 0);
    for r in &rs {
        let header = (r.start..r.start + 88).flat_map(|at| (0..8).map(move |bit| (at, bit)));
        let payload = (r.start + HEADER..r.end - 8)
            .step_by(7)
            .map(|at| (at, (at % 8) as u32));
        for (at, bit) in header.chain(payload) {
            let mut b = bytes.clone();
            b[at] ^= 1 << bit;
            reseal(&mut b, r);
            cases += 1;
            let _ = koel::inspect(&b[..]);
            let Ok(g) = CuckooFilter::read_from(&b[..]) else {
                continue;
            };
            loaded += 1;
            // `read_from` stops after the record that says it is the last.
            assert!(
                b.starts_with(&bytes_of(&g)),
                "flip of bit {bit} at {at}: saved otherwise"
            );
            for k in Keys(0x5eed ^ at as u64).take(300) {
                g.insert(&k).unwrap();
                assert!(g.contains(&k), "flip of bit {bit} at {at}: {k} lost");
            }
            let _ = (g.len(), g.stats(), g.remove(&1u64));
        }
    }
    // Payload words flipped into other valid tags load: the test reached
    // the filters, not only the refusals.
    assert!(loaded > 0 && loaded < cases, "{loaded} of {cases} loaded");
}

#[test]
fn an_upper_record_of_another_layout_is_refused() {
    let (f, _) = tight(100, 2);
    let bytes = bytes_of(&f);
    let rs = records(&bytes);
    let mut b = bytes.clone();
    b[rs[1].start + TAG_BITS] = 16;
    b[rs[1].start + TAGS_PER_BUCKET] = 4;
    reseal(&mut b, &rs[1]);
    assert_matches!(refused(&b), LoadError::InvalidLevel { level: 1, .. });
    let mut b = bytes.clone();
    b[rs[1].start + TAG_BITS] = 12;
    b[rs[1].start + TAGS_PER_BUCKET] = 5;
    reseal(&mut b, &rs[1]);
    assert_matches!(refused(&b), LoadError::InvalidLevel { level: 1, .. });
}

#[test]
fn a_record_of_21_bit_tags_as_the_first_level_is_refused() {
    let (f, _) = tight(100, 2);
    let bytes = bytes_of(&f);
    let rs = records(&bytes);
    // The upper record alone.
    let upper = bytes[rs[1].clone()].to_vec();
    let e = refused(&upper);
    assert_matches!(&e, LoadError::InvalidLevel { level: 0, .. });
    assert!(e.to_string().contains("21-bit"), "{e}");
    // The first record relabelled.
    let mut b = bytes.clone();
    b[TAG_BITS] = 21;
    b[TAGS_PER_BUCKET] = 3;
    reseal(&mut b, &rs[0]);
    assert_matches!(refused(&b), LoadError::InvalidLevel { level: 0, .. });
}

#[test]
fn an_upper_record_that_hashes_otherwise_is_refused() {
    let (f, _) = tight(100, 2);
    let bytes = bytes_of(&f);
    let rs = records(&bytes);
    // Another seed, with the probe that seed has: a valid record by itself.
    let other = CuckooFilter::builder().seed(99).build().unwrap();
    let mut b = bytes.clone();
    set_u64(&mut b, rs[1].start + SEED, 99);
    set_u64(
        &mut b,
        rs[1].start + PROBE,
        other.hash(&("koel hash probe", 0x6b6f_656c_7072_6f62u64)),
    );
    reseal(&mut b, &rs[1]);
    let e = refused(&b);
    assert_matches!(&e, LoadError::InvalidLevel { level: 1, .. });
    assert!(e.to_string().contains("seed"), "{e}");
}

#[test]
fn upper_settings_no_level_could_have_are_refused() {
    let (f, _) = tight(100, 2);
    let bytes = bytes_of(&f);
    let rs = records(&bytes);
    let edit = |edit: &dyn Fn(&mut Vec<u8>), r: &Range<usize>| {
        let mut b = bytes.clone();
        edit(&mut b);
        reseal(&mut b, r);
        refused(&b)
    };
    // The same rate as the level below: no budget was halved.
    let e = edit(
        &|b| set_u64(b, rs[1].start + PARAM64, 1.5e-4f64.to_bits()),
        &rs[1],
    );
    assert_matches!(e, LoadError::InvalidLevel { level: 1, .. });
    // A memory limit where the first level has none.
    let e = edit(&|b| set_u64(b, rs[1].start + MAX_MEMORY, 1 << 30), &rs[1]);
    assert_matches!(e, LoadError::InvalidLevel { level: 1, .. });
    // A level above a first level that never grows.
    let e = edit(&|b| b[GROWTH] = 1, &rs[0]);
    assert_matches!(&e, LoadError::InvalidLevel { level: 0, .. });
    // An upper level that does not double.
    let e = edit(&|b| b[rs[1].start + GROWTH] = 1, &rs[1]);
    assert_matches!(e, LoadError::InvalidLevel { level: 1, .. });
}

#[test]
fn a_damaged_upper_payload_is_refused() {
    let (f, _) = tight(100, 3);
    let bytes = bytes_of(&f);
    let rs = records(&bytes);
    for r in &rs[1..] {
        let mut b = bytes.clone();
        b[r.start + HEADER + 40] ^= 0x04;
        assert_matches!(refused(&b), LoadError::ChecksumMismatch { .. });
        // A word no filter writes (a bit above the last lane), resealed:
        // the per-word check refuses it instead.
        let mut b = bytes.clone();
        b[r.start + HEADER + 47] |= 0x80;
        reseal(&mut b, r);
        assert_matches!(refused(&b), LoadError::CorruptPayload { word: 5, .. });
    }
}

#[test]
fn unknown_flag_bits_are_refused_on_any_record() {
    let (f, _) = tight(100, 2);
    let bytes = bytes_of(&f);
    let rs = records(&bytes);
    for (r, flags) in [(&rs[0], 3u8), (&rs[1], 2), (&rs[0], 1 | 0x80)] {
        let mut b = bytes.clone();
        b[r.start + FLAGS] = flags;
        reseal(&mut b, r);
        assert_matches!(refused(&b), LoadError::UnknownFlags(x) if x == u32::from(flags));
    }
    // Bit 0 on a Bloom filter: it has no levels.
    let bloom = koel::BloomFilter::builder().capacity(100).build().unwrap();
    let mut b = Vec::new();
    bloom.write_to(&mut b).unwrap();
    b[FLAGS] = 1;
    let all = 0..b.len();
    reseal(&mut b, &all);
    assert_matches!(
        koel::BloomFilter::read_from(&b[..]),
        Err(LoadError::UnknownFlags(1))
    );
}

#[test]
fn trailing_bytes_after_a_leveled_file_are_refused_by_load() {
    let (f, _) = tight(100, 2);
    let mut bytes = bytes_of(&f);
    bytes.extend_from_slice(&[0; 7]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.koel");
    std::fs::write(&path, &bytes).unwrap();
    assert_matches!(
        CuckooFilter::load(&path),
        Err(LoadError::FileLengthMismatch { .. })
    );
    // A whole extra record after the last one, too.
    let mut twice = bytes_of(&f);
    twice.extend_from_slice(&bytes_of(&f));
    std::fs::write(&path, &twice).unwrap();
    assert_matches!(
        CuckooFilter::load(&path),
        Err(LoadError::FileLengthMismatch { .. })
    );
}

#[test]
fn saving_while_other_threads_insert_keeps_every_earlier_key() {
    let (f, keys) = grown(100, 1e-2, 2);
    let f = std::sync::Arc::new(f);
    let writer = {
        let f = f.clone();
        std::thread::spawn(move || {
            for k in Keys(0xfeed).take(50_000) {
                f.insert(&k).unwrap();
            }
        })
    };
    let mut saved = Vec::new();
    for _ in 0..20 {
        saved.push(bytes_of(&f));
    }
    writer.join().unwrap();
    for b in saved {
        let g = CuckooFilter::read_from(&b[..]).unwrap();
        assert!(
            keys.iter().all(|k| g.contains(k)),
            "a key inserted before the save was lost"
        );
    }
}

/// A filter with a region level saves it as a version 4 record and loads
/// it back (`tests/persist_regions.rs` has the rest).
#[test]
fn a_filter_with_a_region_level_saves_and_loads() {
    let f = CuckooFilter::builder()
        .capacity(1000)
        .seed(0x1e7e_1504)
        .build()
        .unwrap();
    let keys: Vec<u64> = Keys(31).take(100_000).collect();
    for k in &keys {
        f.insert(k).unwrap();
    }
    assert_eq!(f.stats().levels, 2);
    assert!(f.stats().regions >= 1);
    let mut b = Vec::new();
    f.write_to(&mut b).unwrap();
    let g = CuckooFilter::read_from(&b[..]).unwrap();
    assert_eq!((g.len(), g.stats().regions), (f.len(), f.stats().regions));
    assert!(keys.iter().all(|k| g.contains(k)));
}
