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
