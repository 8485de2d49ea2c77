//! `docs/format.md`, "Key hashing", implemented again from its text alone
//! and held against the filter: the `Fold` hash of format version 3, and
//! both addressings (versions 1 and 2, version 3) from a hash to a tag and
//! its two buckets, on first tables and grown ones. Filters built today
//! must follow the version 3 rules, filters loaded from version 2 files
//! the version 2 rules, also after they grew, were cloned or were saved and
//! loaded again.

#![cfg(not(loom))]

mod common;

use common::Keys;
use koel::CuckooFilter;
use std::path::PathBuf;
use xxhash_rust::xxh3::xxh3_64_with_seed;

// ---- The specification, transcribed ---------------------------------------

/// "SplitMix64: `state += 0x9E3779B97F4A7C15; z = state; ...`".
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// "`fold(a, b) = low64(a * b) XOR high64(a * b)`".
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// "`h = fold(fold(x XOR seed, k1), k2)`", `k1, k2` "the first two
/// outputs of SplitMix64 started at seed, each OR 1".
fn spec_fold(seed: u64, x: u64) -> u64 {
    let mut s = seed;
    let k1 = splitmix64(&mut s) | 1;
    let k2 = splitmix64(&mut s) | 1;
    fold(fold(x ^ seed, k1), k2)
}

/// Which lines of the addressing a filter follows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Version {
    /// Versions 1 and 2.
    V2,
    V3,
}

/// Tag and buckets of `h` for `w` tag bits, `m0` buckets per region and
/// generation `g`, line by line as the format states them.
fn spec_locate(v: Version, w: u32, m0: u64, g: u32, h: u64) -> (u64, usize, usize) {
    let max = (1u64 << w) - 2;
    let tag = match v {
        Version::V2 => 1 + (((h >> (64 - w)) * max) >> w),
        Version::V3 => 1 + ((u128::from(h) * u128::from(max)) >> 64) as u64,
    };
    let local = ((h & 0xFFFF_FFFF) * m0) >> 32;
    let base = (tag & ((1u64 << g) - 1)) * m0;
    let mix = match v {
        Version::V2 => tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32,
        Version::V3 => tag.wrapping_mul(0x7FEB_352D) % (1 << 32),
    };
    let big_h = ((mix * m0) >> 32) | 1;
    // `(H - local) mod m0`, both below `m0`.
    let alt = (big_h + m0 - local) % m0;
    (tag, (base + local) as usize, (base + alt) as usize)
}

// ---- Helpers ----------------------------------------------------------------

fn golden(name: &str) -> CuckooFilter {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    CuckooFilter::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn saved(f: &CuckooFilter) -> Vec<u8> {
    let mut b = Vec::new();
    f.write_to(&mut b).unwrap();
    b
}

/// Asserts that `f`'s first level places every hash as `v` says, in its
/// current table (whose `m0` and generation its saved header names).
fn assert_addressing(what: &str, f: &CuckooFilter, v: Version) {
    let info = koel::inspect(&saved(f)[..]).unwrap();
    let expected_version = match v {
        Version::V2 => (2, "xxh3"),
        Version::V3 => (3, "fold"),
    };
    assert_eq!(
        (info.format_version, info.hash_algorithm_name()),
        expected_version,
        "{what}"
    );
    for l in &info.upper_levels {
        assert_eq!(l.format_version, info.format_version, "{what}: a level");
        assert_eq!(l.hash_algorithm, info.hash_algorithm, "{what}: a level");
    }
    let (w, m0, g) = (info.fingerprint_bits, info.m0, info.generation);
    for h in Keys(0xADD5).take(50_000) {
        assert_eq!(
            f.placement(h),
            spec_locate(v, w, m0, g, h),
            "{what}: {v:?}, w {w}, m0 {m0}, generation {g}, h {h:#x}"
        );
        assert_eq!(f.fingerprint(h), f.placement(h).0, "{what}");
    }
}

// ---- Tests ------------------------------------------------------------------

#[test]
fn the_documented_test_vectors_hold_in_this_transcription() {
    let mut s = 0;
    assert_eq!(splitmix64(&mut s) | 1, 0xe220_a839_7b1d_cdaf);
    assert_eq!(splitmix64(&mut s) | 1, 0x6e78_9e6a_a1b9_65f5);
    assert_eq!(spec_fold(0, 1), 0x9f7c_1c75_ae29_10ec);
    assert_eq!(spec_fold(42, 0x6b6f_656c), 0x0d36_1df4_3485_bdaf);
    assert_eq!(
        spec_locate(Version::V3, 16, 1000, 0, 0x9f7c_1c75_ae29_10ec),
        (40827, 680, 867)
    );
}

#[test]
fn new_filters_hash_eight_byte_keys_by_fold_and_others_by_xxh3() {
    for seed in [0, 1, 42, u64::MAX, 0x005E_ED0F_F01D] {
        let f = CuckooFilter::builder().seed(seed).build().unwrap();
        for x in Keys(seed ^ 7).take(2_000).chain([0, 1, u64::MAX, seed]) {
            let want = spec_fold(seed, x);
            // Every key whose `Hash` bytes are 8: the little-endian word.
            assert_eq!(f.hash(&x), want, "u64 {x:#x}, seed {seed:#x}");
            assert_eq!(f.hash(&(x as i64)), want);
            assert_eq!(f.hash(&(x as usize)), want);
            assert_eq!(f.hash(&(x as u32, (x >> 32) as u32)), want);
            // Any other length: XXH3-64 of the bytes, as algorithm 2.
            let small = x as u32;
            assert_eq!(
                f.hash(&small),
                xxh3_64_with_seed(&small.to_le_bytes(), seed)
            );
            let wide = u128::from(x) << 3;
            assert_eq!(f.hash(&wide), xxh3_64_with_seed(&wide.to_le_bytes(), seed));
            let mut pair = x.to_le_bytes().to_vec();
            pair.extend_from_slice(&(!x).to_le_bytes());
            assert_eq!(f.hash(&(x, !x)), xxh3_64_with_seed(&pair, seed));
        }
        // Strings add their 0xff: 7 bytes of text are a fold, others not.
        let seven = u64::from_le_bytes(*b"1234567\xff");
        assert_eq!(f.hash("1234567"), spec_fold(seed, seven));
        assert_eq!(f.hash("koel"), xxh3_64_with_seed(b"koel\xff", seed));
        assert_eq!(f.hash(""), xxh3_64_with_seed(b"\xff", seed));
        // A byte slice writes its length first (as a `u64`): the empty
        // slice is 8 bytes, a fold of 0; a longer one XXH3.
        assert_eq!(f.hash::<[u8]>(&[]), spec_fold(seed, 0));
        assert_eq!(
            f.hash::<[u8]>(b"abc"),
            xxh3_64_with_seed(b"\x03\0\0\0\0\0\0\0abc", seed)
        );
    }
}

#[test]
fn new_filters_place_as_version_3_in_every_generation() {
    for bits in [16, 12] {
        let f = CuckooFilter::builder()
            .capacity(100)
            .fingerprint_bits(bits)
            .seed(3)
            // Room for three doublings of 12-bit tags.
            .max_false_positive_rate(0.5)
            .build()
            .unwrap();
        assert_addressing("new", &f, Version::V3);
        let mut keys = Keys(bits.into());
        for _ in 0..100_000 {
            if f.generation() >= 3 {
                break;
            }
            f.insert(&keys.next().unwrap()).unwrap();
        }
        assert!(f.generation() >= 3, "{bits}: did not grow");
        assert_addressing("grown", &f, Version::V3);
        assert_addressing("clone", &f.clone(), Version::V3);
        let back = CuckooFilter::read_from(&saved(&f)[..]).unwrap();
        assert_addressing("reloaded", &back, Version::V3);
    }
}

#[test]
fn filters_of_version_2_files_place_as_version_2_for_life() {
    for name in [
        "v2_cuckoo16.koel",
        "v2_cuckoo12_fixed.koel",
        "v2_cuckoo16_grown.koel",
        "v2_cuckoo16_levels.koel",
    ] {
        let f = golden(name);
        assert_addressing(name, &f, Version::V2);
        // Grown (where it may), by 8-byte keys, the ones the two hashes
        // tell apart.
        let (g, memory) = (f.generation(), f.memory_usage());
        let mut keys = Keys(99);
        let mut added = Vec::new();
        for k in keys.by_ref().take(20_000) {
            if f.insert(&k).is_err() {
                break;
            }
            added.push(k);
            if f.generation() > g + 1 {
                break;
            }
        }
        if f.growth() == koel::Growth::Double {
            // Doubled, or (a first level that may not) grew its levels.
            assert!(f.memory_usage() > memory, "{name}: did not grow");
        }
        assert_addressing(&format!("{name}, grown"), &f, Version::V2);
        let c = f.clone();
        assert_addressing(&format!("{name}, cloned"), &c, Version::V2);
        for k in keys.take(500) {
            if c.insert(&k).is_ok() {
                added.push(k);
            }
        }
        let back = CuckooFilter::read_from(&saved(&c)[..]).unwrap();
        assert_addressing(&format!("{name}, clone saved"), &back, Version::V2);
        for k in &added {
            assert!(back.contains(k), "{name}: {k}");
            assert!(back.count(k) >= 1, "{name}: {k}");
        }
    }
}

// ---- The hash probe ---------------------------------------------------------

/// `file` with its format version and hash algorithm id set (offsets 8
/// and 11), the probe left as it was, and both checksums re-sealed.
fn relabelled(file: &[u8], version: u16, id: u8) -> Vec<u8> {
    let mut b = file.to_vec();
    b[8..10].copy_from_slice(&version.to_le_bytes());
    b[11] = id;
    let sum = xxhash_rust::xxh3::xxh3_64(&b[..88]);
    b[88..96].copy_from_slice(&sum.to_le_bytes());
    let end = b.len() - 8;
    let sum = xxhash_rust::xxh3::xxh3_64(&b[..end]);
    b[end..].copy_from_slice(&sum.to_le_bytes());
    b
}

/// The hash probe exists so that a file whose keys this build would hash
/// differently is refused instead of answering "absent" for keys it holds
/// (`docs/format.md`, "Why this shape": it "still catches a broken port").
/// XXH3 and `Fold` differ on every 8-byte key, so a header that names one
/// over a table the other filled must fail its probe. But the probe input,
/// `("koel hash probe", u64)`, is 24 bytes, which `Fold` hashes with XXH3:
/// the probes of the two algorithms are equal under every seed, and no
/// probe checks any of `Fold`'s own arithmetic (`fold_keys`, `fold8`).
/// (In its own test binary: a failing test's backtrace raises the peak
/// memory that `persist_hostile`'s sparse-file test measures.)
#[test]
fn a_table_of_one_hash_relabelled_as_the_other_fails_its_probe() {
    let v3 = CuckooFilter::builder()
        .capacity(150)
        .seed(0x5EED)
        .build()
        .unwrap();
    let keys: Vec<u64> = Keys(1).take(150).collect();
    for k in &keys {
        v3.insert(k).unwrap();
    }
    let v2 = golden("v2_cuckoo16.koel");
    for k in &keys {
        v2.insert(k).unwrap();
    }
    for (what, f, version, id) in [
        ("version 3 (Fold) named XXH3", &v3, 2u16, 2u8),
        ("version 2 (XXH3) named Fold", &v2, 3, 3),
    ] {
        let b = relabelled(&saved(f), version, id);
        let info = koel::inspect(&b[..]).unwrap();
        assert_eq!(info.checksum, koel::ChecksumStatus::Valid, "{what}");
        match CuckooFilter::read_from(&b[..]) {
            Err(koel::LoadError::HashProbeMismatch { .. }) => {}
            Err(e) => panic!("{what}: {e}"),
            Ok(g) => {
                let missed = keys
                    .iter()
                    .filter(|k| f.contains(k) && !g.contains(k))
                    .count();
                panic!(
                    "{what}: loaded, its probe matched (inspect: {}); of the keys the \
                     original holds it misses {missed}",
                    info.hash_probe_matches
                );
            }
        }
    }
}
