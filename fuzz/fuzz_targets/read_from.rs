//! Arbitrary bytes into `read_from` and `inspect`: never a panic, and a
//! file that loads is exactly what `write_to` writes for the loaded filter.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = koel::CuckooFilter::read_from(data) {
        let mut again = Vec::new();
        f.write_to(&mut again).unwrap();
        assert_eq!(
            &again[..],
            &data[..again.len()],
            "accepted a non-canonical file"
        );
    }
    let _ = koel::inspect(data);
});
