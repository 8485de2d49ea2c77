//! Arbitrary bytes with both checksums of every record recomputed (a
//! leveled filter chains one record per level), so the fuzzer gets past
//! them into the field and payload checks; the same properties as
//! `read_from`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xxhash_rust::xxh3::xxh3_64;

/// Header bytes of a record before its payload (version 2), and the
/// offset of its payload length.
const HEADER: usize = 96;
const PAYLOAD_LEN: usize = 56;

fuzz_target!(|data: &[u8]| {
    let mut b = data.to_vec();
    let mut at = 0;
    while b.len() - at >= 112 {
        // The header checksum's place depends on the format version;
        // version 1 files hold one record, which runs to the end.
        let v1 = b[at + 8..at + 10] == [1, 0];
        let sum_at = at + if v1 { 72 } else { 88 };
        let sum = xxh3_64(&b[at..sum_at]);
        b[sum_at..sum_at + 8].copy_from_slice(&sum.to_le_bytes());
        let payload = u64::from_le_bytes(
            b[at + PAYLOAD_LEN..at + PAYLOAD_LEN + 8]
                .try_into()
                .unwrap(),
        );
        let end = match usize::try_from(payload)
            .ok()
            .and_then(|p| (at + HEADER + 16).checked_add(p))
        {
            Some(end) if !v1 && end <= b.len() => end,
            _ => b.len(),
        };
        let sum = xxh3_64(&b[at..end - 8]);
        b[end - 8..end].copy_from_slice(&sum.to_le_bytes());
        at = end;
    }
    let mut again = Vec::new();
    if let Ok(f) = koel::CuckooFilter::read_from(&b[..]) {
        f.write_to(&mut again).unwrap();
    } else if let Ok(f) = koel::BloomFilter::read_from(&b[..]) {
        f.write_to(&mut again).unwrap();
    }
    // Whatever loads is exactly what `write_to` writes for it (a version 1
    // file is saved as version 2: the payload and trailer count match).
    let input: &[u8] = &b[..];
    if !again.is_empty() && input[8..10] == [1, 0] {
        let (old, new) = (&input[80..], &again[96..]);
        assert_eq!(&new[..new.len() - 8], &old[..new.len() - 8]);
    } else {
        assert_eq!(&again[..], &input[..again.len().min(input.len())]);
    }
    let _ = koel::inspect(&b[..]);
});
