//! The `serde` feature: both filters through a real serde format (JSON),
//! carrying the file bytes, refusing damaged input with a serde error.

#![cfg(all(feature = "serde", not(loom)))]

use koel::{BloomFilter, CuckooFilter, Growth};

#[test]
fn a_cuckoo_filter_round_trips_through_json_with_its_settings() {
    let f = CuckooFilter::builder()
        .capacity(2000)
        .growth(Growth::Fixed)
        .seed(3)
        .build()
        .unwrap();
    for k in 0..1500u64 {
        f.insert(&k).unwrap();
    }
    let json = serde_json::to_string(&f).unwrap();
    let g: CuckooFilter = serde_json::from_str(&json).unwrap();
    assert_eq!((g.len(), g.seed(), g.growth()), (1500, 3, Growth::Fixed));
    assert!((0..1500u64).all(|k| g.contains(&k)));
    for k in 1500..20_000u64 {
        assert_eq!(f.contains(&k), g.contains(&k), "key {k}");
    }
    // The same bytes as `write_to`.
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    assert_eq!(json, serde_json::to_string(&bytes).unwrap());
}

#[test]
fn a_filter_with_levels_round_trips_through_json() {
    // Grown past its tag bits: a record per level inside the one byte
    // string.
    let f = CuckooFilter::builder()
        .capacity(100)
        .max_false_positive_rate(1.5e-4)
        .seed(8)
        .build()
        .unwrap();
    let mut k = 0u64;
    while f.stats().levels < 3 {
        f.insert(&k).unwrap();
        k += 1;
    }
    let json = serde_json::to_string(&f).unwrap();
    let g: CuckooFilter = serde_json::from_str(&json).unwrap();
    assert_eq!((g.len(), g.stats().levels), (f.len(), 3));
    assert!((0..k).all(|k| g.contains(&k)));
    for k in k..k + 20_000 {
        assert_eq!(f.contains(&k), g.contains(&k), "key {k}");
    }
}

#[test]
fn a_bloom_filter_round_trips_through_json() {
    let f = BloomFilter::builder()
        .capacity(1000)
        .seed(4)
        .build()
        .unwrap();
    for k in 0..1000u32 {
        f.insert(&k);
    }
    let g: BloomFilter = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
    for k in 0..20_000u32 {
        assert_eq!(f.contains(&k), g.contains(&k), "key {k}");
    }
}

#[test]
fn damaged_or_foreign_input_is_a_serde_error_never_a_panic() {
    let f = CuckooFilter::builder()
        .capacity(500)
        .seed(5)
        .build()
        .unwrap();
    f.insert("x").unwrap();
    let mut bytes = Vec::new();
    f.write_to(&mut bytes).unwrap();
    // Every bit flip, every truncation, bytes after the end.
    for at in 0..bytes.len() {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        let e = serde_json::from_str::<CuckooFilter>(&serde_json::to_string(&b).unwrap());
        assert!(e.is_err(), "flip at {at} loaded");
    }
    for len in [0, 5, 10, 95, 96, bytes.len() - 1] {
        let e =
            serde_json::from_str::<CuckooFilter>(&serde_json::to_string(&bytes[..len]).unwrap())
                .unwrap_err();
        assert!(e.to_string().contains("invalid koel filter"), "{len}: {e}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    let e =
        serde_json::from_str::<CuckooFilter>(&serde_json::to_string(&longer).unwrap()).unwrap_err();
    assert!(e.to_string().contains("after the end"), "{e}");
    // A Bloom filter is not a cuckoo filter; JSON that is not bytes fails.
    let bloom = serde_json::to_string(&BloomFilter::new(100, 0.01)).unwrap();
    assert!(serde_json::from_str::<CuckooFilter>(&bloom).is_err());
    for junk in ["\"text\"", "[1, 2, 300]", "{}", "null", "[-1]"] {
        assert!(
            serde_json::from_str::<CuckooFilter>(junk).is_err(),
            "{junk}"
        );
        assert!(serde_json::from_str::<BloomFilter>(junk).is_err(), "{junk}");
    }
}
