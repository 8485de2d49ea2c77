//! Arbitrary bytes with both checksums recomputed, so the fuzzer gets past
//! them into the field and payload checks; the same properties as
//! `read_from`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xxhash_rust::xxh3::xxh3_64;

fuzz_target!(|data: &[u8]| {
    let mut b = data.to_vec();
    if b.len() >= 96 {
        let sum = xxh3_64(&b[..72]);
        b[72..80].copy_from_slice(&sum.to_le_bytes());
        let end = b.len() - 8;
        let sum = xxh3_64(&b[..end]);
        b[end..].copy_from_slice(&sum.to_le_bytes());
    }
    if let Ok(f) = koel::CuckooFilter::read_from(&b[..]) {
        let mut again = Vec::new();
        f.write_to(&mut again).unwrap();
        assert_eq!(
            &again[..],
            &b[..again.len()],
            "accepted a non-canonical file"
        );
    }
    let _ = koel::inspect(&b[..]);
});
