//! `advise`: each branch, and the numbers it reports against the filter it
//! recommends, built and filled.

mod common;

use common::Keys;
use koel::{advise, AdviseError, Configuration, FilterKind, Requirements, SetSize};

/// Builds what `rec` recommends, fills it with `items` keys, and checks
/// memory (within 10%) and measured FPR (within 1.3x) against the report.
fn check_built(req: Requirements, probes: usize) {
    let items = req.items;
    let rec = advise(req).unwrap();
    let filter = rec.build().unwrap().expect("a filter");
    for k in Keys(1).take(items) {
        filter
            .insert_hash(filter.hash_bytes(&k.to_le_bytes()))
            .unwrap();
    }
    let hits = Keys(2)
        .take(probes)
        .filter(|k| filter.contains_hash(filter.hash_bytes(&k.to_le_bytes())))
        .count();
    let fpr = hits as f64 / probes as f64;
    let mem = filter.memory_usage() as f64;
    println!(
        "{:?}: memory {} (reported {}), FPR {fpr:.3e} (reported {:.3e})",
        rec.configuration,
        filter.memory_usage(),
        rec.memory_bytes,
        rec.expected_fpr
    );
    let reported = rec.memory_bytes as f64;
    assert!(
        (mem - reported).abs() <= 0.1 * reported,
        "memory {mem} vs {reported}"
    );
    assert!(
        (rec.expected_fpr / 1.3..=rec.expected_fpr * 1.3).contains(&fpr),
        "FPR {fpr:.3e} vs reported {:.3e}",
        rec.expected_fpr
    );
}

#[test]
fn zero_false_positives_means_no_filter() {
    let rec = advise(Requirements::new(1_000_000, 0.0).deletes(true)).unwrap();
    assert_eq!(rec.kind, None);
    assert_eq!(rec.configuration, Configuration::ExactStore);
    assert_eq!((rec.memory_bytes, rec.expected_fpr), (0, 0.0));
    assert!(rec.meets_requirements);
    assert!(rec.reason.contains("exact store"), "{}", rec.reason);
    assert!(rec.build().unwrap().is_none());
}

#[test]
fn insert_only_fixed_size_is_a_bloom_filter_that_measures_as_reported() {
    let rec = advise(Requirements::new(1_000_000, 1e-3)).unwrap();
    assert_eq!(rec.kind, Some(FilterKind::Bloom));
    assert!(rec.meets_requirements);
    assert!(rec.expected_fpr <= 1e-3);
    assert!(matches!(
        rec.configuration,
        Configuration::Bloom {
            capacity: 1_000_000,
            hashes: 8,
            ..
        }
    ));
    check_built(Requirements::new(1_000_000, 1e-3), 4_000_000);
    check_built(Requirements::new(200_000, 1e-2), 2_000_000);
}

#[test]
fn a_known_growth_bound_is_sized_up_front() {
    let rec =
        advise(Requirements::new(100_000, 1e-2).growth(SetSize::Bounded { factor: 3.0 })).unwrap();
    assert!(matches!(
        rec.configuration,
        Configuration::Bloom {
            capacity: 300_000,
            ..
        }
    ));
    let rec = advise(
        Requirements::new(100_000, 1e-2)
            .deletes(true)
            .growth(SetSize::Bounded { factor: 3.0 }),
    )
    .unwrap();
    assert!(matches!(
        rec.configuration,
        Configuration::Cuckoo {
            capacity: 300_000,
            growth: None,
            ..
        }
    ));
}

#[test]
fn deletes_pick_the_smallest_cuckoo_layout_that_meets_the_rate() {
    // 12-bit tags give ~2.3e-3 at full load: enough for 5e-3, not for 1e-3.
    let rec = advise(Requirements::new(1_000_000, 5e-3).deletes(true)).unwrap();
    assert_eq!(rec.kind, Some(FilterKind::Cuckoo));
    assert!(matches!(
        rec.configuration,
        Configuration::Cuckoo {
            fingerprint_bits: 12,
            growth: None,
            ..
        }
    ));
    assert!(rec.meets_requirements && rec.expected_fpr <= 5e-3);
    let rec = advise(Requirements::new(1_000_000, 1e-3).deletes(true)).unwrap();
    assert!(matches!(
        rec.configuration,
        Configuration::Cuckoo {
            fingerprint_bits: 16,
            ..
        }
    ));
    assert!(rec.meets_requirements && rec.expected_fpr <= 1e-3);
    check_built(Requirements::new(1_000_000, 5e-3).deletes(true), 2_000_000);
    check_built(Requirements::new(1_000_000, 1e-3).deletes(true), 4_000_000);
}

#[test]
fn exact_dedup_is_a_cuckoo_filter() {
    let rec = advise(Requirements::new(10_000, 1e-2).exact_dedup(true)).unwrap();
    assert_eq!(rec.kind, Some(FilterKind::Cuckoo));
    assert!(rec.reason.contains("insert_unique"), "{}", rec.reason);
}

#[test]
fn a_rate_below_16_bit_tags_is_reported_as_not_met() {
    let rec = advise(Requirements::new(1_000_000, 1e-5).deletes(true)).unwrap();
    assert_eq!(rec.kind, Some(FilterKind::Cuckoo));
    assert!(!rec.meets_requirements);
    assert!(
        rec.expected_fpr > 1e-5,
        "must not claim {}",
        rec.expected_fpr
    );
    assert!(rec.reason.contains("NOT"), "{}", rec.reason);
}

fn growth_plan(rec: &koel::Recommendation) -> (u32, koel::GrowthPlan) {
    match rec.configuration {
        Configuration::Cuckoo {
            fingerprint_bits,
            growth: Some(plan),
            ..
        } => (fingerprint_bits, plan),
        ref other => panic!("expected a growing cuckoo filter, got {other:?}"),
    }
}

/// Asserts that `items` fill the table `plan` builds, after its planned
/// doublings, to a load within `range`.
fn assert_fills_last_table_to(
    plan: &koel::GrowthPlan,
    bits: u32,
    items: usize,
    range: std::ops::RangeInclusive<f64>,
) {
    let first = koel::CuckooFilter::builder()
        .capacity(plan.initial_capacity)
        .fingerprint_bits(bits)
        .build()
        .unwrap();
    let load = items as f64 / (first.capacity() << plan.doublings) as f64;
    assert!(range.contains(&load), "{plan:?}: load {load} after growth");
}

#[test]
fn unknown_growth_is_a_growing_cuckoo_filter_with_its_fpr_cost() {
    // 4x at 1e-2: 12-bit tags (2.3e-3) doubled twice stay below 1e-2.
    let rec = advise(Requirements::new(100_000, 1e-2).growth(SetSize::Unknown {
        expected_factor: 4.0,
    }))
    .unwrap();
    assert!(rec.meets_requirements);
    let (bits, plan) = growth_plan(&rec);
    assert_eq!((bits, plan.doublings), (12, 2));
    // Sized so that the 400,000 items fill the twice-doubled table to 0.88
    // at most (not the 0.96 a new 12-bit table is sized for): doubled
    // tables fill less before an insert fails.
    assert_fills_last_table_to(&plan, bits, 400_000, 0.86..=0.88);
    // Two tag bits spent: 4x the initial rate, times the lower load (0.88
    // against 0.96 full).
    let ratio = plan.false_positive_rate_after / plan.initial_false_positive_rate;
    assert!(
        (3.5..3.8).contains(&ratio),
        "rate grew {ratio}x in 2 doublings"
    );
    assert_eq!(rec.expected_fpr, plan.false_positive_rate_after);
    assert!(plan.false_positive_rate_after <= 1e-2);
    assert_eq!(plan.max_false_positive_rate, 1e-2);
    // (Memory after growth is checked against a grown filter in
    // `a_growing_recommendation_grows_as_planned_when_built_and_filled`.)
    assert!(rec.memory_bytes > 3 * plan.initial_memory_bytes);
    let initial = koel::CuckooFilter::builder()
        .capacity(plan.initial_capacity)
        .fingerprint_bits(12)
        .build()
        .unwrap();
    assert_eq!(plan.initial_memory_bytes, initial.memory_usage());

    // 64x at 1e-3: 12-bit tags never meet it; 16-bit (1.2e-4 full) may
    // double twice: a third doubling (9.8e-4) would leave levels above too
    // little to grow on, so the initial table is sized for 64/4 = 16x.
    let rec = advise(Requirements::new(100_000, 1e-3).growth(SetSize::Unknown {
        expected_factor: 64.0,
    }))
    .unwrap();
    assert!(rec.meets_requirements);
    let (bits, plan) = growth_plan(&rec);
    assert_eq!((bits, plan.doublings), (16, 2));
    assert_fills_last_table_to(&plan, bits, 6_400_000, 0.86..=0.88);
    assert!(plan.false_positive_rate_after <= 1e-3);
    assert!(plan.false_positive_rate_after > 1e-3 / 4.0);

    // Unknown growth that does not happen (factor 1) costs nothing.
    let rec = advise(Requirements::new(100_000, 1e-2).growth(SetSize::Unknown {
        expected_factor: 1.0,
    }))
    .unwrap();
    assert_eq!(growth_plan(&rec).1.doublings, 0);
}

#[test]
fn unknown_growth_below_16_bit_tags_is_reported_as_not_met() {
    let rec = advise(Requirements::new(1000, 1e-5).growth(SetSize::Unknown {
        expected_factor: 2.0,
    }))
    .unwrap();
    assert!(!rec.meets_requirements);
    assert!(rec.expected_fpr > 1e-5);
    assert!(rec.reason.contains("NOT"), "{}", rec.reason);
}

#[test]
fn impossible_requirements_are_errors() {
    assert_eq!(
        advise(Requirements::new(0, 0.01)),
        Err(AdviseError::ZeroItems)
    );
    for p in [-0.1, 1.0, f64::NAN] {
        assert_eq!(
            advise(Requirements::new(10, p)),
            Err(AdviseError::InvalidFalsePositiveRate)
        );
    }
    for factor in [0.5, f64::NAN, f64::INFINITY] {
        assert_eq!(
            advise(Requirements::new(10, 0.01).growth(SetSize::Bounded { factor })),
            Err(AdviseError::InvalidGrowth)
        );
    }
    assert_eq!(
        advise(Requirements::new(usize::MAX, 0.01).deletes(true)),
        Err(AdviseError::TooManyItems)
    );
    assert_eq!(
        advise(Requirements::new(usize::MAX / 4, 1e-9)),
        Err(AdviseError::TooManyItems)
    );
    // A rate no filter is built for: the exact store, honestly.
    let rec = advise(Requirements::new(10, 1e-25)).unwrap();
    assert_eq!(rec.kind, None);
}

/// Builds a growing recommendation, fills it to the expected size, and
/// checks doublings, memory and FPR against the plan.
fn check_grown(items: usize, p: f64, factor: f64, probes: usize) {
    let req = Requirements::new(items, p).growth(SetSize::Unknown {
        expected_factor: factor,
    });
    let rec = advise(req).unwrap();
    let (bits, plan) = growth_plan(&rec);
    let f = koel::CuckooFilter::builder()
        .capacity(plan.initial_capacity)
        .fingerprint_bits(bits)
        .growth(koel::Growth::Double)
        .max_false_positive_rate(plan.max_false_positive_rate)
        .build()
        .unwrap();
    assert_eq!(f.memory_usage(), plan.initial_memory_bytes);
    let total = (items as f64 * factor) as usize;
    for k in Keys(3).take(total) {
        f.insert(&k).expect("growth within the plan");
    }
    let hits = Keys(4).take(probes).filter(|k| f.contains(k)).count();
    let fpr = hits as f64 / probes as f64;
    println!(
        "{bits}-bit {factor}x: generation {} (plan {}), memory {} (plan {}), FPR {fpr:.3e} (plan {:.3e})",
        f.generation(),
        plan.doublings,
        f.memory_usage(),
        rec.memory_bytes,
        rec.expected_fpr
    );
    assert_eq!(f.generation(), plan.doublings);
    let mem = f.memory_usage() as f64;
    assert!((mem - rec.memory_bytes as f64).abs() <= 0.1 * rec.memory_bytes as f64);
    assert!(
        (rec.expected_fpr / 1.3..=rec.expected_fpr * 1.3).contains(&fpr),
        "FPR {fpr:.3e} vs plan {:.3e}",
        rec.expected_fpr
    );
}

#[test]
fn a_growing_recommendation_grows_as_planned_when_built_and_filled() {
    check_grown(100_000, 1e-2, 4.0, 2_000_000);
    check_grown(50_000, 1e-3, 16.0, 4_000_000);
}

#[test]
fn a_filter_no_process_can_address_does_not_meet_the_requirements() {
    // 1M items growing to 1e15: a 1,788 TiB Bloom filter, more than any
    // 64-bit process can address.
    let rec = advise(Requirements::new(1_000_000, 1e-3).growth(SetSize::Bounded { factor: 1e9 }))
        .unwrap();
    assert!(rec.memory_bytes > 1 << 47, "{}", rec.memory_bytes);
    assert!(!rec.meets_requirements, "{}", rec.reason);
    assert!(
        rec.reason.contains("NOT") && rec.reason.contains("address"),
        "{}",
        rec.reason
    );
    // The same kind of set, 1,000 times smaller (1.8 TiB), is buildable
    // in principle and meets them.
    let rec = advise(Requirements::new(1_000_000, 1e-3).growth(SetSize::Bounded { factor: 1e6 }))
        .unwrap();
    assert!(rec.meets_requirements, "{}", rec.reason);
}

/// When the rate allows fewer doublings than the growth needs, the plan
/// starts larger and its last allowed generation must hold the expected
/// items: a plan without headroom (before 2026-12-06) filled its last table
/// to the sizing load, which a table whose tags have spent bits on doublings
/// no longer reaches, and the filter added an unplanned level (12-bit,
/// 10,000 items at 5% growing 100x: 4,695,584 bytes against the reported
/// 1,699,584).
#[test]
fn a_plan_capped_by_its_rate_holds_the_expected_items_in_its_last_generation() {
    for (items, p, factor, bits, few_free_bits) in [
        (10_000, 0.05, 100.0, 12, false),
        (2_000, 1e-3, 1000.0, 16, false),
        (2_000, 0.4, 256.0, 12, true),
    ] {
        let rec = advise(Requirements::new(items, p).growth(SetSize::Unknown {
            expected_factor: factor,
        }))
        .unwrap();
        let (plan_bits, plan) = growth_plan(&rec);
        assert_eq!(plan_bits, bits, "{}", rec.reason);
        let needed = factor.log2().ceil() as u32;
        assert!(
            plan.doublings < needed,
            "{plan:?} is not capped by its rate"
        );
        assert_eq!(bits - plan.doublings <= 5, few_free_bits, "{plan:?}");
        check_grown(items, p, factor, 400_000);
    }
}
