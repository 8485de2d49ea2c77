//! A file that loads must be a filter every later operation can run on.
//!
//! Input: 8 bytes of operation seed, then a file. When the seed's low bit
//! is set, both checksums of the file are recomputed (so mutations reach
//! the field and payload checks). Whatever loads is then used: every
//! stored tag gets a hash that maps to it, then inserts (which displace
//! and grow), removes of inserted keys, `insert_unique`, a save and a
//! reload. Oracle: no panic, and every hash that answered "present" in
//! the original file, and every inserted key not removed, still does.
#![no_main]

use koel::{BloomFilter, CuckooFilter};
use libfuzzer_sys::fuzz_target;
use xxhash_rust::xxh3::xxh3_64;

/// The header's length: 80 bytes in format version 1, 96 in versions 2 to 4.
fn header_len(file: &[u8]) -> usize {
    if file[8..10] == [1, 0] {
        80
    } else {
        96
    }
}

#[path = "../../tests/common/splitmix.rs"]
mod splitmix64;

/// SplitMix64: the operations' random source, from the input's seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(splitmix64::GAMMA);
        splitmix64::finalize(self.0)
    }
}

fn le(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().unwrap())
}

/// A hash whose tag is `tag` and one of whose buckets is `bucket`, found
/// by inverting the documented mapping (the tags of versions 2 and 3 differ
/// by at most one step of `top`: the candidates around it cover both) and
/// checked with `placement`.
fn hash_for(f: &CuckooFilter, m0: u64, bits: u32, bucket: usize, tag: u64) -> Option<u64> {
    let local = bucket as u64 % m0;
    let low = ((local << 32) + m0 - 1) / m0;
    let max_tag = (1u64 << bits) - 2;
    let top0 = ((tag - 1) << bits).div_ceil(max_tag);
    (top0.saturating_sub(1)..top0 + 2)
        .filter(|&top| top < 1 << bits)
        .map(|top| (top << (64 - bits)) | low)
        .find(|&h| {
            let (t, i1, i2) = f.placement(h);
            t == tag && (i1 == bucket || i2 == bucket)
        })
}

/// Hashes that answer "present" because of the tags stored in `file`'s
/// first record (a filter with levels has more records after it, of other
/// layouts: a level of regions' payload starts with its level block).
fn stored_keys(f: &CuckooFilter, file: &[u8]) -> Vec<u64> {
    let bits = u32::from(file[16]);
    let m0 = le(&file[24..]);
    let mask = (1u64 << bits) - 1;
    // The payload length at offset 56, in every version: the file loaded.
    let start = header_len(file);
    let payload = &file[start..start + le(&file[56..]) as usize];
    let mut keys = Vec::new();
    for (bucket, w) in payload.chunks_exact(8).enumerate() {
        let w = le(w);
        for lane in 0..64 / bits {
            let tag = (w >> (lane * bits)) & mask;
            if tag != 0 && keys.len() < 4096 {
                // Every stored tag sits where some key could put it, or the
                // file would not have loaded.
                let h = hash_for(f, m0, bits, bucket, tag).expect("a stored tag no key maps to");
                keys.push(h);
            }
        }
    }
    keys
}

fn use_cuckoo(f: CuckooFilter, file: &[u8], rng: &mut Rng) {
    let stored = stored_keys(&f, file);
    assert!(stored.iter().all(|&h| f.contains_hash(h)));
    let mut inserted: Vec<u64> = Vec::new();
    let ops = 200 + rng.next() % 1800;
    for _ in 0..ops {
        let h = rng.next();
        match rng.next() % 10 {
            0..=5 => {
                if f.insert_hash(h).is_ok() {
                    inserted.push(h);
                }
            }
            6 | 7 if !inserted.is_empty() => {
                let i = (rng.next() % inserted.len() as u64) as usize;
                let gone = inserted.swap_remove(i);
                assert!(f.remove_hash(gone), "an inserted key could not be removed");
            }
            8 => {
                if let Ok(true) = f.insert_unique_hash(h) {
                    inserted.push(h);
                }
            }
            _ => {
                let _ = f.contains_hash(h);
                let _ = f.count_hash(h);
            }
        }
    }
    // Grow until the policy stops it (or a bounded number of inserts).
    let generation = f.generation();
    for _ in 0..4000 {
        let h = rng.next();
        match f.insert_hash(h) {
            Ok(()) => inserted.push(h),
            Err(_) => break,
        }
        if f.generation() > generation + 1 {
            break;
        }
    }
    let _ = f.stats();
    let lost = |g: &CuckooFilter| stored.iter().chain(&inserted).any(|&h| !g.contains_hash(h));
    assert!(!lost(&f), "a key was lost after operations");
    let mut again = Vec::new();
    f.write_to(&mut again).unwrap();
    let g = CuckooFilter::read_from(&again[..]).expect("a saved filter must load");
    assert!(!lost(&g), "a key was lost by save and load");
    let mut third = Vec::new();
    g.write_to(&mut third).unwrap();
    assert!(again == third, "save, load, save changed the file");
}

fn use_bloom(f: BloomFilter, rng: &mut Rng) {
    let inserted: Vec<u64> = (0..500).map(|_| rng.next()).collect();
    for &h in &inserted {
        f.insert_hash(h);
    }
    let _ = (f.len_estimate(), f.false_positive_rate(), f.bits_per_item());
    let _ = f.expected_false_positive_rate(f.capacity());
    assert!(inserted.iter().all(|&h| f.contains_hash(h)));
    let mut again = Vec::new();
    f.write_to(&mut again).unwrap();
    let g = BloomFilter::read_from(&again[..]).expect("a saved filter must load");
    assert!(inserted.iter().all(|&h| g.contains_hash(h)));
    g.union(&f).unwrap();
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let mut rng = Rng(le(data));
    let mut b = data[8..].to_vec();
    if data[0] & 1 == 1 && b.len() >= 112 {
        // The header checksum's place depends on the format version.
        let at = if b[8..10] == [1, 0] { 72 } else { 88 };
        let sum = xxh3_64(&b[..at]);
        b[at..at + 8].copy_from_slice(&sum.to_le_bytes());
        let end = b.len() - 8;
        let sum = xxh3_64(&b[..end]);
        b[end..].copy_from_slice(&sum.to_le_bytes());
    }
    if let Ok(f) = CuckooFilter::read_from(&b[..]) {
        use_cuckoo(f, &b, &mut rng);
    } else if let Ok(f) = BloomFilter::read_from(&b[..]) {
        use_bloom(f, &mut rng);
    }
});
