//! Arbitrary bytes into both kinds' `read_from` and `inspect`: never a panic, and a
//! file that loads is exactly what `write_to` writes for the loaded filter
//! (a format version 1 file is saved as version 2: that one must then be).
#![no_main]

use libfuzzer_sys::fuzz_target;

/// `write_to` of what `bytes` load as, if they load.
fn resaved(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut again = Vec::new();
    if let Ok(f) = koel::CuckooFilter::read_from(bytes) {
        f.write_to(&mut again).unwrap();
    } else if let Ok(f) = koel::BloomFilter::read_from(bytes) {
        f.write_to(&mut again).unwrap();
    } else {
        return None;
    }
    Some(again)
}

fuzz_target!(|data: &[u8]| {
    if let Some(mut again) = resaved(data) {
        let version_1 = data.get(8..10) == Some(&[1, 0][..]);
        let input: Vec<u8> = if version_1 {
            // Saved as version 2, which must load and save as itself.
            let input = again;
            again = resaved(&input).expect("a saved filter must load");
            input
        } else {
            data.to_vec()
        };
        // Whatever loads is exactly what `write_to` writes for it.
        assert_eq!(&again[..], &input[..again.len().min(input.len())]);
    }
    let _ = koel::inspect(data);
});
