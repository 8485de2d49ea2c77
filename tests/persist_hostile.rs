//! Hostile input: every truncation and every single-bit flip of a valid
//! file, each header field set wrong (with the header checksum re-sealed so
//! the field check itself is what answers), absurd sizes, a foreign hash,
//! payloads that pass the checksum but no filter could have written, and
//! property tests over random and mutated files (over 100k cases in all).
//! Every case must give a `LoadError`, never a panic, never a wrong filter,
//! and never an allocation larger than the input justifies.
//!
//! Offsets are those of the format table in `docs/format.md`.

mod common;

use common::Keys;
use koel::{BloomFilter, ChecksumStatus, CuckooFilter, FilterKind, LoadError};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use xxhash_rust::xxh3::xxh3_64;

/// Asserts that the error `$e` matches `$pat`, and prints it otherwise.
macro_rules! assert_matches {
    ($e:expr, $pat:pat) => {{
        let e = $e;
        assert!(matches!(e, $pat), "{e}");
    }};
}

// ---- The largest single allocation, per thread -------------------------

/// Wraps the system allocator to record, per thread, the largest block
/// requested: a reader that believed a hostile header would ask for it.
struct PeakTracking;

thread_local! {
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: allocations during thread teardown are not tracked.
    let _ = PEAK.try_with(|p| p.set(p.get().max(size)));
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees hold; `note` only touches a
// thread-local `Cell` (const-initialised, no allocation, no drop).
unsafe impl GlobalAlloc for PeakTracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded from our caller, who upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as in `alloc`; `ptr` and `layout` come from our caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as in `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: PeakTracking = PeakTracking;

/// The largest single allocation `f` makes on this thread.
fn peak_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    PEAK.with(|p| p.set(0));
    let r = f();
    (r, PEAK.with(|p| p.get()))
}

// ---- Files -----------------------------------------------------------------

/// Format version 2 (`docs/format.md`).
const HEADER: usize = 96;
const MAGIC: usize = 0;
const VERSION: usize = 8;
const KIND: usize = 10;
const HASH_ALGORITHM: usize = 11;
const FLAGS: usize = 12;
const TAG_BITS: usize = 16;
const TAGS_PER_BUCKET: usize = 17;
const WORDS_PER_BUCKET: usize = 18;
const GENERATION: usize = 19;
/// Cuckoo: the growth setting (version 2).
const GROWTH: usize = 20;
/// Bloom: the bit-mapping version.
const BIT_MAPPING: usize = 20;
const M0: usize = 24;
const BUCKETS: usize = 32;
const PROBE: usize = 48;
const PAYLOAD_LEN: usize = 56;
const PARAM64: usize = 64;
const MAX_MEMORY: usize = 72;
const RESERVED: usize = 80;
const HEADER_CHECKSUM: usize = 88;

/// A valid small file: 64 buckets (the minimum) holding 150 keys.
fn small_file(bits: u32) -> Vec<u8> {
    let f = CuckooFilter::builder()
        .capacity(150)
        .fingerprint_bits(bits)
        .seed(0x5EED)
        .build()
        .unwrap();
    for k in Keys(1).take(150) {
        f.insert(&k).unwrap();
    }
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    assert_eq!(bytes.len(), HEADER + 64 * 8 + 16);
    bytes
}

fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Recomputes the header checksum, so that a changed field is what the
/// loader sees, not a damaged header.
fn reseal_header(b: &mut [u8]) {
    let sum = xxh3_64(&b[..HEADER_CHECKSUM]);
    set_u64(b, HEADER_CHECKSUM, sum);
}

/// Recomputes both checksums: the file is then intact as far as checksums
/// can tell, and only the content checks stand between it and a filter.
fn reseal_all(b: &mut [u8]) {
    reseal_header(b);
    let end = b.len() - 8;
    let sum = xxh3_64(&b[..end]);
    set_u64(b, end, sum);
}

/// `bytes` through all three readers: `read_from`, `load` of a file, and
/// `inspect`. Returns the errors of the two loaders (which must agree on
/// acceptance) after checking that nothing was accepted that should not be.
fn load_both(bytes: &[u8], path: &Path) -> (Result<(), LoadError>, Result<(), LoadError>) {
    load_both_as(FilterKind::Cuckoo, bytes, path)
}

/// `load_both` for a filter of `kind`.
fn load_both_as(
    kind: FilterKind,
    bytes: &[u8],
    path: &Path,
) -> (Result<(), LoadError>, Result<(), LoadError>) {
    std::fs::write(path, bytes).unwrap();
    let (a, b) = match kind {
        FilterKind::Cuckoo => (
            CuckooFilter::read_from(bytes).map(drop),
            CuckooFilter::load(path).map(drop),
        ),
        _ => (
            BloomFilter::read_from(bytes).map(drop),
            BloomFilter::load(path).map(drop),
        ),
    };
    let _ = koel::inspect(bytes);
    assert_eq!(a.is_ok(), b.is_ok(), "read_from and load disagree");
    (a, b)
}

/// A valid small Bloom filter file: 150 keys in the blocks sized for them.
fn small_bloom_file() -> Vec<u8> {
    let f = BloomFilter::builder()
        .capacity(150)
        .false_positive_rate(0.01)
        .seed(0x5EED)
        .build()
        .unwrap();
    for k in Keys(1).take(150) {
        f.insert(&k);
    }
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    assert_eq!(bytes.len() as u64, HEADER as u64 + f.blocks() * 64 + 16);
    bytes
}

/// The small valid files of every kind and layout.
fn small_files() -> Vec<(FilterKind, Vec<u8>)> {
    vec![
        (FilterKind::Cuckoo, small_file(16)),
        (FilterKind::Cuckoo, small_file(12)),
        (FilterKind::Bloom, small_bloom_file()),
    ]
}

fn err<T>(r: Result<T, LoadError>) -> LoadError {
    match r {
        Ok(_) => panic!("a hostile file was loaded"),
        Err(e) => e,
    }
}

// ---- Exhaustive: truncations and bit flips --------------------------------

#[test]
fn every_truncation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.koel");
    for (kind, file) in small_files() {
        let payload = file.len() - HEADER - 16;
        for len in 0..file.len() {
            let cut = &file[..len];
            let (a, b) = load_both_as(kind, cut, &path);
            match err(a) {
                LoadError::Truncated {
                    section,
                    expected,
                    found,
                } => {
                    let want = if len < HEADER {
                        ("header", HEADER, len)
                    } else if len < file.len() - 16 {
                        ("payload", payload, len - HEADER)
                    } else {
                        ("trailer", 16, len - HEADER - payload)
                    };
                    assert_eq!(
                        (section, expected, found),
                        (want.0, want.1 as u64, want.2 as u64)
                    );
                }
                e => panic!("len {len}: expected Truncated, got {e}"),
            }
            match err(b) {
                LoadError::Truncated {
                    section: "header", ..
                } if len < HEADER => {}
                LoadError::FileLengthMismatch { expected, actual } if len >= HEADER => {
                    assert_eq!((expected, actual), (file.len() as u64, len as u64));
                }
                e => panic!("load of {len} bytes: {e}"),
            }
            if len >= HEADER {
                let info = koel::inspect(cut).unwrap();
                assert_eq!(
                    info.checksum,
                    ChecksumStatus::Truncated {
                        expected: file.len() as u64,
                        found: len as u64
                    }
                );
            }
        }
    }
}

#[test]
fn every_single_bit_flip_is_refused_by_the_check_for_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.koel");
    for (kind, file) in small_files() {
        let payload_end = file.len() - 16;
        for bit in 0..file.len() * 8 {
            let mut b = file.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            let at = bit / 8;
            let (a, l) = load_both_as(kind, &b, &path);
            for e in [err(a), err(l)] {
                let ok = match at {
                    0..8 => matches!(e, LoadError::NotKoelFile { .. }),
                    // A flip to another version this build reads (3 to 2
                    // or 1) fails that version's header checksum.
                    8..10 => matches!(
                        e,
                        LoadError::UnsupportedVersion { .. }
                            | LoadError::HeaderChecksumMismatch { .. }
                    ),
                    10..HEADER => matches!(e, LoadError::HeaderChecksumMismatch { .. }),
                    // Payload, item count and checksum: the final checksum.
                    _ => matches!(e, LoadError::ChecksumMismatch { .. }),
                };
                assert!(ok, "flip of bit {bit} (byte {at}) gave: {e}");
            }
            if (HEADER..payload_end).contains(&at) {
                assert!(matches!(
                    koel::inspect(&b[..]).unwrap().checksum,
                    ChecksumStatus::Mismatch { .. }
                ));
            }
        }
    }
}

// ---- Each field wrong ------------------------------------------------------

/// The error for `file` with `edit` applied and the header re-sealed.
fn with_field(edit: impl FnOnce(&mut Vec<u8>)) -> LoadError {
    let mut b = small_file(16);
    edit(&mut b);
    reseal_header(&mut b);
    let dir = tempfile::tempdir().unwrap();
    let (a, l) = load_both(&b, &dir.path().join("x.koel"));
    let (a, l) = (err(a), err(l));
    assert_eq!(
        std::mem::discriminant(&a),
        std::mem::discriminant(&l),
        "read_from said {a}, load said {l}"
    );
    a
}

#[test]
fn wrong_magic_version_and_kind_are_named() {
    let e = with_field(|b| b[MAGIC..8].copy_from_slice(b"PK\x03\x04koel"));
    assert!(matches!(e, LoadError::NotKoelFile { found } if &found == b"PK\x03\x04koel"));
    assert!(e.to_string().contains("not a koel filter file"), "{e}");
    let e = with_field(|b| b[VERSION] = 5);
    assert!(matches!(
        e,
        LoadError::UnsupportedVersion {
            found: 5,
            supported: 4
        }
    ));
    assert!(e.to_string().contains("version 5"), "{e}");
    // Version 4 is a level of regions' record only, never a first level.
    let e = with_field(|b| b[VERSION] = 4);
    assert!(
        matches!(e, LoadError::InvalidLevel { level: 0, reason } if reason.contains("never the first")),
        "{e}"
    );
    for kind in [0u8, 3, 255] {
        let e = with_field(|b| b[KIND] = kind);
        assert!(matches!(e, LoadError::UnknownKind(k) if k == kind), "{e}");
    }
    // A version 3 file hashes with algorithm 3 only (`Fold`).
    for id in [0u8, 1, 2, 4, 255] {
        let e = with_field(|b| b[HASH_ALGORITHM] = id);
        assert!(
            matches!(e, LoadError::UnknownHashAlgorithm(i) if i == id),
            "{e}"
        );
    }
    let e = with_field(|b| b[FLAGS + 3] = 0x80);
    assert!(matches!(e, LoadError::UnknownFlags(0x8000_0000)));
    let e = with_field(|b| b[GROWTH + 1] = 1);
    assert!(matches!(e, LoadError::UnknownGrowth(0x100)), "{e}");
    let e = with_field(|b| b[GROWTH] = 2);
    assert!(matches!(e, LoadError::UnknownGrowth(2)), "{e}");
    for rate in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
        let e = with_field(|b| set_u64(b, PARAM64, rate.to_bits()));
        assert!(
            matches!(e, LoadError::InvalidMaxFalsePositiveRate { .. }),
            "{rate}: {e}"
        );
    }
    let e = with_field(|b| b[RESERVED + 7] = 2);
    assert!(matches!(
        e,
        LoadError::ReservedNotZero {
            offset: 80,
            value: 0x0200_0000_0000_0000
        }
    ));
}

#[test]
fn unsupported_layouts_are_refused() {
    for (t, b, w) in [
        (16, 5, 1),
        (12, 4, 1),
        (8, 8, 1),
        (16, 4, 2),
        (0, 0, 0),
        (255, 255, 255),
    ] {
        let e = with_field(|f| {
            f[TAG_BITS] = t;
            f[TAGS_PER_BUCKET] = b;
            f[WORDS_PER_BUCKET] = w;
        });
        assert!(
            matches!(e, LoadError::UnsupportedLayout { tag_bits, tags_per_bucket, words_per_bucket }
                if (tag_bits, tags_per_bucket, words_per_bucket) == (t, b, w)),
            "{e}"
        );
    }
}

#[test]
fn geometry_that_does_not_add_up_is_refused() {
    for m0 in [0, 1, 63, 65, 62, (1 << 32) + 2, u64::MAX] {
        let e = with_field(|b| set_u64(b, M0, m0));
        assert!(
            matches!(e, LoadError::InvalidM0 { m0: x } if x == m0),
            "m0 {m0}: {e}"
        );
    }
    for generation in [13, 14, 200, 255] {
        let e = with_field(|b| b[GENERATION] = generation);
        assert!(matches!(e, LoadError::InvalidGeneration { .. }), "{e}");
    }
    // A legal generation whose bucket count was not updated.
    assert_matches!(
        with_field(|b| b[GENERATION] = 1),
        LoadError::BucketCountMismatch {
            stored: 64,
            expected: 128
        }
    );
    let e = with_field(|b| set_u64(b, BUCKETS, 1 << 60));
    assert!(matches!(e, LoadError::BucketCountMismatch { .. }), "{e}");
    let e = with_field(|b| set_u64(b, PAYLOAD_LEN, 1 << 60));
    assert!(
        matches!(e, LoadError::PayloadLengthMismatch { stored, expected: 512 } if stored == 1 << 60)
    );
    let e = with_field(|b| set_u64(b, PAYLOAD_LEN, 511));
    assert!(matches!(e, LoadError::PayloadLengthMismatch { .. }), "{e}");
}

#[test]
fn absurd_sizes_in_a_short_input_are_refused_without_a_big_allocation() {
    // 2^44 buckets (2^47 bytes of payload, the largest geometry the format
    // allows) announced by a consistent header, in a 100-byte input.
    let mut b = small_file(16);
    set_u64(&mut b, M0, 1 << 32);
    b[GENERATION] = 12;
    set_u64(&mut b, BUCKETS, 1 << 44);
    set_u64(&mut b, PAYLOAD_LEN, 1 << 47);
    reseal_header(&mut b);
    b.truncate(100);

    let e = refused_cheaply(
        &b,
        |r: &[u8]| CuckooFilter::read_from(r),
        |p: &Path| CuckooFilter::load(p),
    );
    assert!(
        matches!(e, LoadError::Truncated { section: "payload", expected, found }
            if expected == 1 << 47 && found == (100 - HEADER) as u64),
        "{e}"
    );

    let (info, peak) = peak_allocation(|| koel::inspect(&b[..]).unwrap());
    assert_eq!(info.buckets, 1 << 44);
    assert!(matches!(
        info.checksum,
        ChecksumStatus::Truncated { found: 100, .. }
    ));
    assert!(peak <= 1 << 21, "inspect allocated {peak} bytes");
}

#[test]
fn a_foreign_hash_is_refused_but_inspected() {
    let e = with_field(|b| b[PROBE] ^= 1);
    assert!(matches!(e, LoadError::HashProbeMismatch { .. }), "{e}");
    assert!(e.to_string().contains("hashes keys differently"), "{e}");
    let mut b = small_file(16);
    b[PROBE] ^= 1;
    reseal_all(&mut b);
    let info = koel::inspect(&b[..]).unwrap();
    assert!(!info.hash_probe_matches);
    assert_eq!(info.checksum, ChecksumStatus::Valid);
}

// ---- Format versions and hash algorithms ------------------------------------

/// `file` with its format version and hash algorithm id set, the probe
/// left as it was, and both checksums re-sealed.
fn relabelled(file: &[u8], version: u16, id: u8) -> Vec<u8> {
    let mut b = file.to_vec();
    b[VERSION..VERSION + 2].copy_from_slice(&version.to_le_bytes());
    b[HASH_ALGORITHM] = id;
    reseal_all(&mut b);
    b
}

/// `docs/format.md`: a cuckoo filter's version 2 file names XXH3 (2) or
/// `ahash` (1), its version 3 file `Fold` (3); a Bloom filter hashes with
/// XXH3 (or `ahash`, from version 1) and is written as version 2 only.
/// Any other pair is refused by its id, whatever the probe says. (A Bloom
/// filter relabelled as version 3 with `Fold` keeps its probe, since the
/// probe input is not 8 bytes long, so only this check can refuse it; the
/// loaded filter would hash every 8-byte key differently from how its
/// bits were set.)
#[test]
fn each_kind_and_version_loads_only_its_own_hash_algorithms() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.koel");
    for (kind, file) in small_files() {
        for version in [2u16, 3] {
            for id in 0u8..=4 {
                let specified = match kind {
                    FilterKind::Cuckoo => matches!((version, id), (2, 1 | 2) | (3, 3)),
                    _ => matches!((version, id), (2, 1 | 2)),
                };
                if specified {
                    continue;
                }
                let b = relabelled(&file, version, id);
                let (a, l) = load_both_as(kind, &b, &path);
                for e in [a, l] {
                    match e {
                        Err(LoadError::UnknownHashAlgorithm(got)) if got == id => {}
                        Err(e) => panic!("{kind:?} version {version}, algorithm {id}: {e}"),
                        Ok(()) => panic!(
                            "{kind:?} version {version}, algorithm {id}: a pair no build \
                             writes was loaded"
                        ),
                    }
                }
            }
        }
    }
}

// ---- Bloom filter fields --------------------------------------------------

/// The error for the small Bloom file with `edit` applied and the header
/// re-sealed, loaded as a Bloom filter both ways.
fn with_bloom_field(edit: impl FnOnce(&mut Vec<u8>)) -> LoadError {
    let mut b = small_bloom_file();
    edit(&mut b);
    reseal_header(&mut b);
    let dir = tempfile::tempdir().unwrap();
    let (a, l) = load_both_as(FilterKind::Bloom, &b, &dir.path().join("b.koel"));
    let (a, l) = (err(a), err(l));
    assert_eq!(a.to_string(), l.to_string());
    a
}

#[test]
fn bloom_fields_that_no_filter_has_are_refused() {
    assert_matches!(
        with_bloom_field(|b| b[TAGS_PER_BUCKET] = 12),
        LoadError::UnsupportedBloomLayout {
            bits_per_key: 12,
            words_per_block: 8
        }
    );
    assert_matches!(
        with_bloom_field(|b| b[WORDS_PER_BUCKET] = 4),
        LoadError::UnsupportedBloomLayout {
            words_per_block: 4,
            ..
        }
    );
    assert_matches!(
        with_bloom_field(|b| b[TAG_BITS] = 16),
        LoadError::ReservedNotZero {
            offset: 16,
            value: 16
        }
    );
    assert_matches!(
        with_bloom_field(|b| b[GENERATION] = 1),
        LoadError::ReservedNotZero {
            offset: 19,
            value: 1
        }
    );
    let e = with_bloom_field(|b| b[BIT_MAPPING] = 2);
    assert!(
        matches!(
            e,
            LoadError::UnsupportedBitMapping {
                found: 2,
                supported: 1
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("would lose items"), "{e}");
    let e = with_bloom_field(|b| set_u64(b, M0, 0));
    assert!(
        matches!(e, LoadError::InvalidCapacity { capacity: 0 }),
        "{e}"
    );
    for rate in [0.0, 1.0, 2.5, -0.1, 1e-30, f64::NAN, f64::INFINITY] {
        let e = with_bloom_field(|b| set_u64(b, PARAM64, f64::to_bits(rate)));
        assert!(
            matches!(e, LoadError::InvalidFalsePositiveRate { .. }),
            "rate {rate}: {e}"
        );
    }
    assert_matches!(
        with_bloom_field(|b| b[MAX_MEMORY] = 1),
        LoadError::ReservedNotZero {
            offset: 72,
            value: 1
        }
    );
    for blocks in [0, 1 << 58, u64::MAX] {
        let e = with_bloom_field(|b| set_u64(b, BUCKETS, blocks));
        assert!(
            matches!(e, LoadError::InvalidBlockCount { blocks: x } if x == blocks),
            "{e}"
        );
    }
    let e = with_bloom_field(|b| set_u64(b, PAYLOAD_LEN, 64));
    assert!(
        matches!(e, LoadError::PayloadLengthMismatch { stored: 64, .. }),
        "{e}"
    );
}

#[test]
fn a_file_of_one_kind_is_refused_as_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.koel");
    let (a, l) = load_both_as(FilterKind::Bloom, &small_file(16), &path);
    for e in [err(a), err(l)] {
        assert!(
            matches!(
                e,
                LoadError::WrongKind {
                    expected: FilterKind::Bloom,
                    found: FilterKind::Cuckoo
                }
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "the file holds a cuckoo filter, not a bloom filter"
        );
    }
    let (a, l) = load_both(&small_bloom_file(), &path);
    for e in [err(a), err(l)] {
        assert!(
            matches!(
                e,
                LoadError::WrongKind {
                    expected: FilterKind::Cuckoo,
                    found: FilterKind::Bloom
                }
            ),
            "{e}"
        );
    }
}

#[test]
fn an_absurd_bloom_in_a_short_input_is_refused_without_a_big_allocation() {
    // 2^40 blocks (64 TiB) announced by a consistent header, in 100 bytes.
    let mut b = small_bloom_file();
    set_u64(&mut b, BUCKETS, 1 << 40);
    set_u64(&mut b, PAYLOAD_LEN, 1 << 46);
    reseal_header(&mut b);
    b.truncate(100);
    let e = refused_cheaply(
        &b,
        |r: &[u8]| BloomFilter::read_from(r),
        |p: &Path| BloomFilter::load(p),
    );
    assert!(
        matches!(
            e,
            LoadError::Truncated {
                section: "payload",
                ..
            }
        ),
        "{e}"
    );
}

/// `b`, a 100-byte input whose header announces a huge table, is refused
/// by `read` (from memory, with at most 1 MiB allocated) and by `load`
/// (as a file, for its length, with at most 64 KiB): `read`'s error, for
/// the caller to check.
fn refused_cheaply<F>(
    b: &[u8],
    read: impl FnOnce(&[u8]) -> Result<F, LoadError>,
    load: impl FnOnce(&Path) -> Result<F, LoadError>,
) -> LoadError {
    assert_eq!(b.len(), 100);
    let (e, peak) = peak_allocation(|| err(read(b)));
    assert!(
        peak <= 1 << 20,
        "read_from allocated {peak} bytes for a 100-byte input"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absurd.koel");
    std::fs::write(&path, b).unwrap();
    let (le, peak) = peak_allocation(|| err(load(&path)));
    assert!(
        matches!(le, LoadError::FileLengthMismatch { actual: 100, .. }),
        "{le}"
    );
    assert!(
        peak <= 1 << 16,
        "load allocated {peak} bytes for a 100-byte file"
    );
    e
}

#[test]
fn a_bloom_bit_count_that_disagrees_with_the_payload_is_refused() {
    let mut b = small_bloom_file();
    let at = b.len() - 16;
    let stored = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    set_u64(&mut b, at, stored + 1);
    reseal_all(&mut b);
    let dir = tempfile::tempdir().unwrap();
    let (a, l) = load_both_as(FilterKind::Bloom, &b, &dir.path().join("c.koel"));
    for e in [err(a), err(l)] {
        assert!(
            matches!(e, LoadError::ItemCountMismatch { stored: s, counted: c } if s == c + 1),
            "{e}"
        );
    }
}

/// Found by `cargo fuzz` (read_from_resealed): `inspect` computed the
/// announced file length from an unchecked payload length, which overflowed.
#[test]
fn all_ones_header_fields_are_refused_without_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ones.koel");
    for (kind, mut b) in small_files() {
        b[FLAGS..HEADER_CHECKSUM].fill(0xFF);
        b[FLAGS..FLAGS + 4].fill(0);
        reseal_header(&mut b);
        let (a, l) = load_both_as(kind, &b, &path);
        let (a, l) = (err(a), err(l));
        assert_eq!(a.to_string(), l.to_string());
        assert!(koel::inspect(&b[..]).is_err());
        for cut in [HEADER, HEADER + 8, b.len() - 1] {
            assert!(koel::inspect(&b[..cut]).is_err());
        }
    }
}

// ---- Intact checksums, impossible content ---------------------------------

/// A payload word of `bits`-layout `file` set to `w`, both checksums
/// re-sealed, then loaded both ways.
fn with_word(bits: u32, index: usize, w: u64, count: Option<u64>) -> LoadError {
    let mut b = small_file(bits);
    set_u64(&mut b, HEADER + 8 * index, w);
    if let Some(c) = count {
        let at = b.len() - 16;
        set_u64(&mut b, at, c);
    }
    reseal_all(&mut b);
    let dir = tempfile::tempdir().unwrap();
    let (a, l) = load_both(&b, &dir.path().join("w.koel"));
    let (a, l) = (err(a), err(l));
    assert_eq!(a.to_string(), l.to_string());
    a
}

#[test]
fn payloads_no_filter_writes_are_refused_even_with_valid_checksums() {
    let e = with_word(16, 5, 0xFFFF << 32, None);
    assert!(
        matches!(e, LoadError::CorruptPayload { word: 5, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("reserved"), "{e}");
    let e = with_word(12, 63, 0xFFF, None);
    assert!(
        matches!(e, LoadError::CorruptPayload { word: 63, .. }),
        "{e}"
    );
    let e = with_word(12, 0, 1 << 62, None);
    assert!(
        matches!(e, LoadError::CorruptPayload { word: 0, .. }),
        "{e}"
    );
    // A free lane filled with one more tag: a plausible word, but the item
    // count no longer matches.
    let file = small_file(16);
    let word =
        |i: usize| u64::from_le_bytes(file[HEADER + 8 * i..HEADER + 8 * i + 8].try_into().unwrap());
    let (i, lane) = (0..64)
        .flat_map(|i| (0..4).map(move |lane| (i, lane)))
        .find(|&(i, lane)| (word(i) >> (16 * lane)) & 0xFFFF == 0)
        .expect("a free lane at 150 items in 256 slots");
    assert_matches!(
        with_word(16, i, word(i) | 0x1234 << (16 * lane), None),
        LoadError::ItemCountMismatch {
            stored: 150,
            counted: 151
        }
    );
    assert_matches!(
        with_word(16, i, word(i), Some(7)),
        LoadError::ItemCountMismatch {
            stored: 7,
            counted: 150
        }
    );
}

// ---- Property tests ---------------------------------------------------------

/// Any accepted input must be exactly what `write_to` writes for the filter
/// it produced: a file that loads is a canonical, complete file, so no
/// damage can have slipped through into a different filter.
fn accepted_only_if_canonical(bytes: &[u8]) -> Result<(), TestCaseError> {
    let mut again = Vec::new();
    if let Ok(f) = CuckooFilter::read_from(bytes) {
        f.write_to(&mut again).unwrap();
    } else if let Ok(f) = BloomFilter::read_from(bytes) {
        f.write_to(&mut again).unwrap();
    } else {
        let _ = koel::inspect(bytes);
        return Ok(());
    }
    prop_assert_eq!(&again[..], &bytes[..again.len().min(bytes.len())]);
    let _ = koel::inspect(bytes);
    Ok(())
}

/// Whether either kind loads `bytes`.
fn loads_as_any(bytes: &[u8]) -> bool {
    CuckooFilter::read_from(bytes).is_ok() || BloomFilter::read_from(bytes).is_ok()
}

fn valid_files() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(small_file(16)),
        Just(small_file(12)),
        Just(small_bloom_file())
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 30_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_load(bytes in proptest::collection::vec(any::<u8>(), 0..700)) {
        prop_assert!(!loads_as_any(&bytes[..]));
        let _ = koel::inspect(&bytes[..]);
    }

    #[test]
    fn random_bytes_behind_a_valid_magic_never_load(
        version in prop_oneof![Just(1u16), any::<u16>()],
        rest in proptest::collection::vec(any::<u8>(), 0..700),
    ) {
        let mut bytes = b"\x89KOEL\r\n\x1a".to_vec();
        bytes.extend_from_slice(&version.to_le_bytes());
        bytes.extend_from_slice(&rest);
        prop_assert!(!loads_as_any(&bytes[..]));
        let _ = koel::inspect(&bytes[..]);
    }

    #[test]
    fn mutated_files_load_only_if_unchanged(
        file in valid_files(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut b = file.clone();
        for (at, v) in &edits {
            let i = at.index(b.len());
            b[i] = *v;
        }
        if truncate {
            b.truncate(cut.index(b.len()));
        }
        prop_assert_eq!(loads_as_any(&b[..]), b == file, "accepted a changed file, or refused the original");
    }

    #[test]
    fn mutated_and_resealed_files_load_only_if_canonical(
        file in valid_files(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut b = file;
        for (at, v) in &edits {
            let i = at.index(b.len());
            b[i] = *v;
        }
        reseal_all(&mut b);
        accepted_only_if_canonical(&b)?;
    }
}

// ---- Tags outside their region ---------------------------------------------

/// A filter of `bits`-bit tags that grew to `generation` from one region of
/// 64 buckets, and its file.
fn grown_filter(bits: u32, generation: u32) -> (CuckooFilter, Vec<u8>) {
    let f = CuckooFilter::builder()
        .capacity(150)
        .fingerprint_bits(bits)
        .seed(0x6E0)
        .build()
        .unwrap();
    let mut keys = Keys(7);
    while f.stats().generation < generation {
        f.insert(&keys.next().unwrap()).unwrap();
    }
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    assert_eq!(u32::from(bytes[GENERATION]), generation);
    (f, bytes)
}

/// The occupied tag lanes of `file`'s payload: (bucket, lane, tag).
fn occupied_lanes(file: &[u8], bits: u32) -> Vec<(usize, u32, u64)> {
    let lanes = 64 / bits;
    let mask = (1u64 << bits) - 1;
    let payload = &file[HEADER..file.len() - 16];
    let mut out = Vec::new();
    for (bucket, w) in payload.chunks_exact(8).enumerate() {
        let w = u64::from_le_bytes(w.try_into().unwrap());
        for lane in 0..lanes {
            let tag = (w >> (lane * bits)) & mask;
            if tag != 0 {
                out.push((bucket, lane, tag));
            }
        }
    }
    out
}

/// Inserts, removals and growth on `f`, which must neither panic nor lose
/// any of `keys`.
fn exercise(f: &CuckooFilter, keys: &[u64]) {
    for k in Keys(0xE4E).take(3000) {
        if f.insert(&k).is_err() {
            break;
        }
    }
    for k in Keys(0xE4E).take(500) {
        f.remove(&k);
    }
    assert!(keys.iter().all(|k| f.contains(k)), "a key was lost");
}

#[test]
fn a_relabelled_header_that_moves_tags_out_of_their_region_is_refused() {
    // One region of m0 buckets relabelled as two regions of m0 / 2 (same bucket
    // count, both checksums re-sealed): every tag with an odd low bit in the
    // first half, or an even one in the second, is where no key puts it.
    for bits in [16u32, 12] {
        // The smallest capacity whose single region halves into two legal
        // ones (an even m0 of at least 64 each).
        let (f, m0) = (400..)
            .map(|capacity| {
                let f = CuckooFilter::builder()
                    .capacity(capacity)
                    .fingerprint_bits(bits)
                    .seed(0xAB)
                    .build()
                    .unwrap();
                let m0 = f.stats().buckets as u64;
                (f, m0)
            })
            .find(|(_, m0)| m0 % 4 == 0 && *m0 >= 128)
            .unwrap();
        for k in Keys(3).take(300) {
            f.insert(&k).unwrap();
        }
        let mut b = Vec::new();
        f.write_to(&mut b).unwrap();
        assert_eq!(b[GENERATION], 0);
        set_u64(&mut b, M0, m0 / 2);
        b[GENERATION] = 1;
        reseal_all(&mut b);
        let dir = tempfile::tempdir().unwrap();
        let (a, l) = load_both(&b, &dir.path().join("relabelled.koel"));
        let (a, l) = (err(a), err(l));
        assert_matches!(&a, LoadError::CorruptPayload { .. });
        assert!(a.to_string().contains("region"), "{a}");
        assert_eq!(a.to_string(), l.to_string());
        let info = koel::inspect(&b[..]).unwrap();
        assert_eq!(info.checksum, ChecksumStatus::Valid);
    }
}

#[test]
fn every_region_bit_flip_of_a_grown_file_is_refused_even_resealed() {
    // Flipping any of a tag's `generation` low bits moves it to a region
    // its key never maps to. With the checksums re-sealed, only the region
    // check stands between the file and a filter that indexes out of
    // bounds on a later insert.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flip.koel");
    for (bits, generation) in [(16u32, 1u32), (16, 3), (12, 2)] {
        let (f, file) = grown_filter(bits, generation);
        // The valid grown file loads and stays usable.
        let back = CuckooFilter::read_from(&file[..]).unwrap();
        assert_eq!(back.generation(), generation);
        let present: Vec<u64> = Keys(7).take(f.len()).collect();
        exercise(&back, &present);

        let lanes = occupied_lanes(&file, bits);
        assert!(lanes.len() > 100);
        for (i, &(bucket, lane, tag)) in lanes.iter().enumerate() {
            // Every lane for the lowest region bit, a sample for the others.
            for bit in 0..generation {
                if bit > 0 && i % 7 != 0 {
                    continue;
                }
                let flipped = tag ^ (1 << bit);
                if flipped == 0 || flipped == (1 << bits) - 1 {
                    continue;
                }
                let mut b = file.clone();
                let at = HEADER + 8 * bucket;
                let w = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
                set_u64(&mut b, at, w ^ (1 << (lane * bits + bit)));
                reseal_all(&mut b);
                let (a, l) = load_both(&b, &path);
                let e = err(a);
                assert!(
                    matches!(e, LoadError::CorruptPayload { word, .. } if word == bucket as u64),
                    "bucket {bucket} lane {lane} bit {bit}: {e}"
                );
                err(l);
            }
        }
    }
}

#[test]
fn all_ones_tags_and_stray_bits_in_a_grown_file_are_refused() {
    for (bits, generation) in [(16u32, 2u32), (12, 1)] {
        let (_, file) = grown_filter(bits, generation);
        let buckets = (file.len() - HEADER - 16) / 8;
        let full = (1u64 << bits) - 1;
        for bucket in [0, buckets / 2, buckets - 1] {
            let mut b = file.clone();
            set_u64(&mut b, HEADER + 8 * bucket, full);
            reseal_all(&mut b);
            assert_matches!(
                err(CuckooFilter::read_from(&b[..])),
                LoadError::CorruptPayload { .. }
            );
        }
    }
}

// ---- Sparse files ------------------------------------------------------------

/// This process's peak resident memory in bytes (Linux: `VmHWM`).
#[cfg(target_os = "linux")]
fn peak_resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[cfg(target_os = "linux")]
#[test]
fn a_sparse_file_is_refused_before_its_table_is_committed() {
    // 8 KiB of data in a file whose length matches a header that claims a
    // 256 MiB table: the length check passes, the rest reads as zeros and
    // the checksum fails. Nothing may commit the table meanwhile.
    let mut b = small_file(16);
    let buckets: u64 = 1 << 25;
    set_u64(&mut b, M0, buckets >> 3);
    b[GENERATION] = 3;
    set_u64(&mut b, BUCKETS, buckets);
    set_u64(&mut b, PAYLOAD_LEN, 8 * buckets);
    reseal_header(&mut b);
    b.resize(8 << 10, 0xA5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sparse.koel");
    let file = std::fs::File::create(&path).unwrap();
    std::io::Write::write_all(&mut &file, &b).unwrap();
    file.set_len(HEADER as u64 + 8 * buckets + 16).unwrap();
    drop(file);

    let before = peak_resident();
    let e = err(CuckooFilter::load(&path));
    let grew = peak_resident() - before;
    assert_matches!(e, LoadError::ChecksumMismatch { .. });
    assert!(
        grew < 64 << 20,
        "loading an 8 KiB sparse file raised peak memory by {grew} bytes"
    );
}

#[test]
fn a_valid_sparse_file_still_loads() {
    // An empty filter whose zero payload is a hole (as `cp --sparse=always`
    // leaves it): verified first, then loaded like any other file.
    let f = CuckooFilter::builder()
        .capacity(1_000_000)
        .seed(0x5A)
        .build()
        .unwrap();
    let mut b = Vec::new();
    f.write_to(&mut b).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("holes.koel");
    let file = std::fs::File::create(&path).unwrap();
    std::io::Write::write_all(&mut &file, &b[..HEADER]).unwrap();
    let trailer = b.len() - 16;
    std::io::Seek::seek(&mut &file, std::io::SeekFrom::Start(trailer as u64)).unwrap();
    std::io::Write::write_all(&mut &file, &b[trailer..]).unwrap();
    drop(file);
    assert_eq!(std::fs::read(&path).unwrap(), b);
    let g = CuckooFilter::load(&path).unwrap();
    assert_eq!((g.len(), g.capacity(), g.seed()), (0, f.capacity(), 0x5A));
    g.insert("after").unwrap();
    assert!(g.contains("after"));
}
