//! Golden files: small saved filters committed in `tests/golden/`, with
//! the answers they must give. Any change to key hashing, the tag and
//! bucket mapping or the file format makes a test here fail.
//!
//! `cargo test --test golden -- --ignored regenerate` rewrites the current
//! version's files (only do it for a deliberate format change, with a new
//! format version). The `v1_*` files were written by the last build of
//! format version 1 and cannot be regenerated: they must keep loading.

#![cfg(not(loom))]

use koel::{BloomFilter, ChecksumStatus, CuckooFilter, FilterKind, Growth};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hash::Hash;
use std::path::PathBuf;

/// Absent keys probed per filter: `absent-0` .. `absent-{ABSENT - 1}`.
const ABSENT: u64 = 4000;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// A key of one of the types the answers files name.
#[derive(Clone, Debug)]
enum Key {
    U64(u64),
    U32(u32),
    Usize(usize),
    I64(i64),
    Str(String),
    Bytes(Vec<u8>),
    /// `(&str, u64)`: a tuple, hashed field by field.
    Pair(String, u64),
}

impl Key {
    /// `f(key)` with the key as its own Rust type.
    fn with<R>(&self, f: &mut dyn FnMut(&dyn HashKey) -> R) -> R {
        match self {
            Key::U64(k) => f(k),
            Key::U32(k) => f(k),
            Key::Usize(k) => f(k),
            Key::I64(k) => f(k),
            Key::Str(k) => f(&k.as_str()),
            Key::Bytes(k) => f(&k.as_slice()),
            Key::Pair(s, n) => f(&(s.as_str(), *n)),
        }
    }

    fn encode(&self) -> String {
        match self {
            Key::U64(k) => format!("u64 {k}"),
            Key::U32(k) => format!("u32 {k}"),
            Key::Usize(k) => format!("usize {k}"),
            Key::I64(k) => format!("i64 {k}"),
            Key::Str(k) => format!("str {k}"),
            Key::Bytes(k) => format!(
                "bytes {}",
                k.iter().map(|b| format!("{b:02x}")).collect::<String>()
            ),
            Key::Pair(s, n) => format!("pair {s} {n}"),
        }
    }

    fn decode(words: &[&str]) -> Key {
        let num = |s: &str| -> u64 { s.parse().unwrap() };
        match words {
            ["u64", k] => Key::U64(num(k)),
            ["u32", k] => Key::U32(k.parse().unwrap()),
            ["usize", k] => Key::Usize(k.parse().unwrap()),
            ["i64", k] => Key::I64(k.parse().unwrap()),
            ["str", k] => Key::Str(k.to_string()),
            ["bytes", k] => Key::Bytes(
                (0..k.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&k[i..i + 2], 16).unwrap())
                    .collect(),
            ),
            ["pair", s, n] => Key::Pair(s.to_string(), num(n)),
            other => panic!("unknown key {other:?}"),
        }
    }
}

/// What both filter kinds offer the golden test.
trait Probe {
    fn hash_of(&self, key: &dyn HashKey) -> u64;
    fn holds(&self, key: &dyn HashKey) -> bool;
}

/// A key type that can be hashed by either filter (object-safe wrapper
/// over `Hash`).
trait HashKey {
    fn cuckoo_hash(&self, f: &CuckooFilter) -> u64;
    fn bloom_hash(&self, f: &BloomFilter) -> u64;
}

impl<T: Hash + ?Sized> HashKey for T {
    fn cuckoo_hash(&self, f: &CuckooFilter) -> u64 {
        f.hash(self)
    }
    fn bloom_hash(&self, f: &BloomFilter) -> u64 {
        f.hash(self)
    }
}

impl Probe for CuckooFilter {
    fn hash_of(&self, key: &dyn HashKey) -> u64 {
        key.cuckoo_hash(self)
    }
    fn holds(&self, key: &dyn HashKey) -> bool {
        self.contains_hash(key.cuckoo_hash(self))
    }
}

impl Probe for BloomFilter {
    fn hash_of(&self, key: &dyn HashKey) -> u64 {
        key.bloom_hash(self)
    }
    fn holds(&self, key: &dyn HashKey) -> bool {
        self.contains_hash(key.bloom_hash(self))
    }
}

/// The keys inserted into every golden filter: every key type the format
/// specification describes, `n` keys in all.
fn present_keys(n: u64) -> Vec<Key> {
    (0..n)
        .map(|i| match i % 8 {
            0 => Key::U64(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            1 => Key::U32(i as u32 * 7919),
            2 => Key::Usize(i as usize * 31),
            3 => Key::I64(-(i as i64) * 1_000_003),
            4 => Key::Str(format!("golden-{i}")),
            5 => Key::Bytes((0..(i % 23) as u8).map(|b| b ^ i as u8).collect()),
            6 => Key::Pair(format!("pair-{i}"), i * 3),
            _ => Key::Str(format!("a-longer-golden-key-that-passes-sixteen-bytes-{i}")),
        })
        .collect()
}

fn absent_key(i: u64) -> Key {
    Key::Str(format!("absent-{i}"))
}

/// The answers file of `filter`, which holds `present`.
fn answers(name: &str, header: &[(&str, String)], f: &dyn Probe, present: &[Key]) -> String {
    let mut out = format!(
        "# koel golden answers for {name}: header fields, then per key its type, value and hash\n"
    );
    for (field, value) in header {
        writeln!(out, "{field} {value}").unwrap();
    }
    for k in present {
        let hash = k.with(&mut |key| f.hash_of(key));
        assert!(k.with(&mut |key| f.holds(key)), "{k:?} inserted");
        writeln!(out, "present {} = {hash:#018x}", k.encode()).unwrap();
    }
    let fps: Vec<String> = (0..ABSENT)
        .filter(|&i| absent_key(i).with(&mut |key| f.holds(key)))
        .map(|i| i.to_string())
        .collect();
    writeln!(out, "absent absent-0..{ABSENT} true at: {}", fps.join(" ")).unwrap();
    out
}

/// The header fields the answers file records for a cuckoo filter.
fn cuckoo_header(f: &CuckooFilter, bytes: &[u8]) -> Vec<(&'static str, String)> {
    let info = koel::inspect(bytes).unwrap();
    let mut fields = vec![
        ("kind", format!("{:?}", info.kind)),
        ("format_version", info.format_version.to_string()),
        ("fingerprint_bits", f.fingerprint_bits().to_string()),
        ("tags_per_bucket", f.tags_per_bucket().to_string()),
        ("m0", info.m0.to_string()),
        ("generation", f.generation().to_string()),
        ("seed", f.seed().to_string()),
        ("len", f.len().to_string()),
        ("growth", format!("{:?}", f.growth())),
        (
            "max_false_positive_rate",
            f.max_false_positive_rate().to_string(),
        ),
        ("max_memory", format!("{:?}", info.max_memory)),
        ("hash_algorithm", info.hash_algorithm_name().to_string()),
    ];
    // Files of one level have no such line.
    if info.levels > 1 {
        fields.push(("levels", f.stats().levels.to_string()));
        let uppers: Vec<String> = info
            .upper_levels
            .iter()
            .map(|up| {
                format!(
                    "{}x{} m0 {} generation {} rate {:e} items {:?}",
                    up.fingerprint_bits,
                    up.tags_per_bucket,
                    up.m0,
                    up.generation,
                    up.max_false_positive_rate.unwrap_or(0.0),
                    up.item_count
                )
            })
            .collect();
        fields.push(("upper_levels", uppers.join("; ")));
    }
    fields
}

fn bloom_header(f: &BloomFilter, bytes: &[u8]) -> Vec<(&'static str, String)> {
    let info = koel::inspect(bytes).unwrap();
    vec![
        ("kind", format!("{:?}", info.kind)),
        ("format_version", info.format_version.to_string()),
        ("bits_per_key", f.bits_per_key().to_string()),
        ("blocks", info.buckets.to_string()),
        ("seed", f.seed().to_string()),
        ("capacity", f.capacity().to_string()),
        ("hash_algorithm", info.hash_algorithm_name().to_string()),
    ]
}

/// The golden cuckoo filters of the current format (version 3; the same
/// filters saved by version 2 are the `v2_` files): name, builder, keys.
fn cuckoo_specs() -> Vec<(&'static str, CuckooFilter, u64)> {
    vec![
        (
            "cuckoo16.koel",
            CuckooFilter::builder()
                .capacity(200)
                .seed(0x6b6f_656c_0016)
                .build()
                .unwrap(),
            200,
        ),
        (
            "cuckoo12_fixed.koel",
            CuckooFilter::builder()
                .capacity(250)
                .fingerprint_bits(12)
                .growth(Growth::Fixed)
                .seed(0x6b6f_656c_0012)
                .build()
                .unwrap(),
            250,
        ),
        (
            "cuckoo16_grown.koel",
            CuckooFilter::builder()
                .capacity(100)
                .max_false_positive_rate(5e-3)
                .max_memory(1 << 20)
                .seed(0x6b6f_656c_6716)
                .build()
                .unwrap(),
            600,
        ),
    ]
}

/// Golden cuckoo filters grown past their tag bits (a record per level),
/// which format version 1 could not hold.
fn leveled_specs() -> Vec<(&'static str, CuckooFilter, u64)> {
    vec![(
        "cuckoo16_levels.koel",
        // 1.5e-4 forbids any doubling of the first table: the keys past
        // its 256 slots go to a level of 21-bit tags.
        CuckooFilter::builder()
            .capacity(100)
            .max_false_positive_rate(1.5e-4)
            .seed(0x6b6f_656c_1e7e)
            .build()
            .unwrap(),
        500,
    )]
}

fn bloom_spec() -> (&'static str, BloomFilter, u64) {
    (
        "bloom.koel",
        BloomFilter::builder()
            .capacity(300)
            .false_positive_rate(1e-2)
            .seed(0x6b6f_656c_b100)
            .build()
            .unwrap(),
        300,
    )
}

/// Writes the golden files of the current format version (and their
/// answers) into `tests/golden/`, under `prefix`.
fn write_golden(prefix: &str) {
    std::fs::create_dir_all(dir()).unwrap();
    for (name, f, n) in cuckoo_specs().into_iter().chain(leveled_specs()) {
        let keys = present_keys(n);
        for k in &keys {
            k.with(&mut |key| f.insert_hash(key.cuckoo_hash(&f)).unwrap());
        }
        let mut bytes = Vec::new();
        f.write_to(&mut bytes).unwrap();
        let name = format!("{prefix}{name}");
        std::fs::write(dir().join(&name), &bytes).unwrap();
        // The header fields are recorded as loading gives them.
        let loaded = CuckooFilter::read_from(&bytes[..]).unwrap();
        let text = answers(&name, &cuckoo_header(&loaded, &bytes), &f, &keys);
        std::fs::write(dir().join(format!("{name}.answers")), text).unwrap();
    }
    let (name, f, n) = bloom_spec();
    let keys = present_keys(n);
    for k in &keys {
        k.with(&mut |key| f.insert_hash(key.bloom_hash(&f)));
    }
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    let name = format!("{prefix}{name}");
    std::fs::write(dir().join(&name), &bytes).unwrap();
    let text = answers(&name, &bloom_header(&f, &bytes), &f, &keys);
    std::fs::write(dir().join(format!("{name}.answers")), text).unwrap();
}

#[test]
#[ignore = "rewrites tests/golden/: run only for a deliberate format change"]
fn regenerate() {
    write_golden("");
}

/// The parsed answers file of `name`.
struct Answers {
    header: BTreeMap<String, String>,
    present: Vec<(Key, u64)>,
    absent_true: Vec<u64>,
}

fn read_answers(name: &str) -> Answers {
    let text = std::fs::read_to_string(dir().join(format!("{name}.answers"))).unwrap();
    let mut a = Answers {
        header: BTreeMap::new(),
        present: Vec::new(),
        absent_true: Vec::new(),
    };
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let words: Vec<&str> = line.split(' ').collect();
        match words[0] {
            "present" => {
                let eq = words.iter().position(|w| *w == "=").unwrap();
                let hash = u64::from_str_radix(words[eq + 1].trim_start_matches("0x"), 16).unwrap();
                a.present.push((Key::decode(&words[1..eq]), hash));
            }
            "absent" => {
                assert_eq!(words[1], format!("absent-0..{ABSENT}"));
                a.absent_true = words[4..]
                    .iter()
                    .filter(|w| !w.is_empty())
                    .map(|w| w.parse().unwrap())
                    .collect();
            }
            field => {
                a.header.insert(field.to_string(), words[1..].join(" "));
            }
        }
    }
    assert!(!a.present.is_empty(), "{name}: no present keys");
    a
}

/// `f` answers as recorded: the same hash and `true` for every present
/// key, exactly the recorded false positives among the absent keys.
fn check_answers(name: &str, f: &dyn Probe, a: &Answers) {
    for (k, hash) in &a.present {
        assert_eq!(
            k.with(&mut |key| f.hash_of(key)),
            *hash,
            "{name}: hash of {k:?}"
        );
        assert!(k.with(&mut |key| f.holds(key)), "{name}: {k:?} is present");
    }
    let fps: Vec<u64> = (0..ABSENT)
        .filter(|&i| absent_key(i).with(&mut |key| f.holds(key)))
        .collect();
    assert_eq!(
        fps, a.absent_true,
        "{name}: false positives among absent keys"
    );
}

fn check_cuckoo(name: &str, resave_identical: bool) -> CuckooFilter {
    let bytes = std::fs::read(dir().join(name)).unwrap();
    let a = read_answers(name);
    let info = koel::inspect(&bytes[..]).unwrap();
    assert_eq!(info.checksum, ChecksumStatus::Valid);
    assert_eq!(info.kind, FilterKind::Cuckoo);
    let f = CuckooFilter::load(dir().join(name)).unwrap();
    let header = cuckoo_header(&f, &bytes);
    for (field, value) in &header {
        assert_eq!(
            Some(value),
            a.header.get(*field),
            "{name}: header field {field}"
        );
    }
    check_answers(name, &f, &a);
    let mut again = Vec::new();
    f.write_to(&mut again).unwrap();
    if resave_identical {
        assert!(again == bytes, "{name}: re-saved bytes differ");
    }
    f
}

#[test]
fn cuckoo_golden_files_load_and_answer_as_recorded() {
    for (name, _, _) in cuckoo_specs() {
        check_cuckoo(name, true);
    }
    for (name, _, _) in leveled_specs() {
        let f = check_cuckoo(name, true);
        assert_eq!(f.stats().levels, 2, "{name}");
    }
}

#[test]
fn bloom_golden_file_loads_and_answers_as_recorded() {
    let name = bloom_spec().0;
    let bytes = std::fs::read(dir().join(name)).unwrap();
    let a = read_answers(name);
    let f = BloomFilter::load(dir().join(name)).unwrap();
    for (field, value) in bloom_header(&f, &bytes) {
        assert_eq!(Some(&value), a.header.get(field), "{name}: {field}");
    }
    check_answers(name, &f, &a);
    let mut again = Vec::new();
    f.write_to(&mut again).unwrap();
    assert!(again == bytes, "{name}: re-saved bytes differ");
}

/// Format version 2 files (XXH3, and the addressing versions 1 and 2
/// share) load, answer as recorded and save back to the same bytes; new
/// keys go in under the file's hash and addressing, through doublings and
/// levels, and the filter stays version 2. The 8-byte keys below are the
/// ones version 3 would hash differently (`Fold`): a filter that mixed the
/// two would miss them once saved and loaded.
#[test]
fn version_2_golden_files_still_load_and_grow() {
    for (name, _, _) in cuckoo_specs().into_iter().chain(leveled_specs()) {
        let name = format!("v2_{name}");
        let f = check_cuckoo(&name, true);
        let levels_before = f.stats().levels;
        let mut added = Vec::new();
        for i in 0..3_000u64 {
            let key = i | 1 << 62;
            if f.insert(&key).is_err() {
                break; // a `Fixed` filter fills up
            }
            added.push(key);
        }
        assert!(added.len() > 50, "{name}: took {}", added.len());
        let mut again = Vec::new();
        f.write_to(&mut again).unwrap();
        assert_eq!(
            koel::inspect(&again[..]).unwrap().format_version,
            2,
            "{name}"
        );
        let g = CuckooFilter::read_from(&again[..]).unwrap();
        for key in &added {
            assert!(f.contains(key) && g.contains(key), "{name}: {key}");
            assert!(g.count(key) >= 1, "{name}: {key} under the file's hash");
        }
        let a = read_answers(&name);
        for (k, _) in &a.present {
            assert!(k.with(&mut |key| g.holds(key)), "{name}: {k:?}");
        }
        // A filter built `hash_like` it hashes and saves as version 2 too.
        let like = CuckooFilter::builder()
            .capacity(100)
            .hash_like(&f)
            .build()
            .unwrap();
        assert!(like.hashes_like(&f) && !like.hashes_like(&CuckooFilter::with_capacity(100)));
        assert_eq!(like.hash_algorithm_name(), "xxh3", "{name}");
        for key in &added[..50] {
            like.insert_hash(f.hash(key)).unwrap();
        }
        let mut bytes = Vec::new();
        like.write_to(&mut bytes).unwrap();
        assert_eq!(
            koel::inspect(&bytes[..]).unwrap().format_version,
            2,
            "{name}"
        );
        let like = CuckooFilter::read_from(&bytes[..]).unwrap();
        assert!(added[..50].iter().all(|key| like.contains(key)), "{name}");
        if f.growth() == Growth::Double {
            assert!(
                f.generation() > 0 || f.stats().levels > levels_before,
                "{name}: grew while taking the new keys"
            );
        }
    }
}

/// Format version 1 files (hashed with `ahash`) still load and answer as
/// they did, with the growth settings version 1 did not save at their
/// defaults; saved again they become the current version, same answers.
#[test]
fn version_1_golden_files_still_load() {
    for (name, _, _) in cuckoo_specs() {
        let name = format!("v1_{name}");
        let f = check_cuckoo(&name, false);
        assert_eq!(f.growth(), Growth::Double, "{name}: version 1 default");
        assert_eq!(
            f.max_false_positive_rate(),
            koel::DEFAULT_MAX_FALSE_POSITIVE_RATE,
            "{name}: version 1 default"
        );
        let mut again = Vec::new();
        f.write_to(&mut again).unwrap();
        let g = CuckooFilter::read_from(&again[..]).unwrap();
        check_answers(&name, &g, &read_answers(&name));
        // New keys go in under the file's own hash (`ahash`), whichever
        // path the call takes: `count` asks the hasher which it is.
        for i in 0..100u64 {
            let key = (i, "added after loading");
            f.insert(&key).unwrap();
            assert_eq!(f.insert_unique(&key), Ok(false), "{name}: {key:?}");
            assert!(f.contains(&key), "{name}: {key:?}");
            assert!(f.count(&key) >= 1, "{name}: {key:?} under the file's hash");
        }
    }
    let name = "v1_bloom.koel";
    let f = BloomFilter::load(dir().join(name)).unwrap();
    let a = read_answers(name);
    let bytes = std::fs::read(dir().join(name)).unwrap();
    for (field, value) in bloom_header(&f, &bytes) {
        assert_eq!(Some(&value), a.header.get(field), "{name}: {field}");
    }
    check_answers(name, &f, &a);
    let mut again = Vec::new();
    f.write_to(&mut again).unwrap();
    let g = BloomFilter::read_from(&again[..]).unwrap();
    check_answers(name, &g, &read_answers(name));
}
