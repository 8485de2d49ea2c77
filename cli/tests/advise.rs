//! `koel advise`: the recommendation follows the requirements, its exit
//! status says whether they are met, bad values are one error line.

mod common;

use common::{assert_one_line_error, koel};
use predicates::str::contains;

#[test]
fn insert_only_gets_a_bloom_filter_and_deletes_a_cuckoo_filter() {
    koel()
        .args(["advise", "--items", "10M", "--fpr", "1e-3"])
        .assert()
        .success()
        .stdout(contains("use          Bloom filter for 10,000,000 items"))
        .stdout(contains("meets all    yes"));
    koel()
        .args(["advise", "--items", "10M", "--fpr", "1e-3", "--deletes"])
        .assert()
        .success()
        .stdout(contains("use          cuckoo filter"))
        .stdout(contains("fingerprint_bits(16)"));
    koel()
        .args([
            "advise",
            "--items",
            "1M",
            "--fpr",
            "1e-2",
            "--growth",
            "unknown:8",
        ])
        .assert()
        .success()
        .stdout(contains("growing online"));
    koel()
        .args(["advise", "--items", "1M", "--fpr", "0"])
        .assert()
        .success()
        .stdout(contains("no filter"));
}

#[test]
fn unmet_requirements_exit_1_with_the_reason() {
    koel()
        .args(["advise", "--items", "1M", "--fpr", "1e-6", "--deletes"])
        .assert()
        .code(1)
        .stdout(contains("meets all    NO"))
        .stdout(contains("why"));
}

#[test]
fn bad_values_are_one_error_line() {
    assert_one_line_error(&["advise", "--items", "0", "--fpr", "1e-3"], "--items");
    assert_one_line_error(&["advise", "--items", "1M", "--fpr", "1"], "--fpr");
    assert_one_line_error(&["advise", "--items", "1M", "--fpr", "-0.1"], "--fpr");
    assert_one_line_error(
        &[
            "advise", "--items", "1M", "--fpr", "1e-3", "--growth", "0.5",
        ],
        "--growth",
    );
    assert_one_line_error(
        &[
            "advise",
            "--items",
            "1M",
            "--fpr",
            "1e-3",
            "--growth",
            "unknown:x",
        ],
        "--growth",
    );
    assert_one_line_error(&["advise", "--fpr", "1e-3"], "--items");
}

#[test]
fn a_recommendation_beyond_any_address_space_says_what_is_not_met() {
    koel()
        .args([
            "advise", "--items", "1M", "--fpr", "1e-3", "--growth", "1e9",
        ])
        .assert()
        .code(1)
        .stdout(contains("meets all    NO"))
        .stdout(contains("address"));
}

#[test]
fn a_zero_rate_for_a_filter_says_why_it_cannot_be_and_tiny_rates_stay_short() {
    for cmd in ["build", "dedup"] {
        let out = koel().args([cmd, "--fpr", "0"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(!stderr.contains("not a probability"), "{stderr}");
        assert!(stderr.contains("above 0"), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    // A rate no filter is built for: the message prints it in few digits.
    let dir = tempfile::tempdir().unwrap();
    let out = koel()
        .args([
            "build",
            "--kind",
            "bloom",
            "--expected",
            "10",
            "--fpr",
            "1e-300",
            "-o",
        ])
        .arg(dir.path().join("x.koel"))
        .write_stdin("a\n")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("1e-300") && stderr.len() < 300, "{stderr}");
}
