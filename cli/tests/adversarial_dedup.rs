//! `koel dedup` under issue 17 ("growth without a ceiling"), tested from
//! outside: a filter sized for one record takes a stream of 2.5M distinct
//! short records (and 500,000 repeats) without giving up, and its output
//! is what `--help` and cli/README.md promise.

mod common;

use common::{estimated_fp, koel, lost};
use std::collections::HashSet;

/// 2.5M distinct short records (hex numbers), with 500,000 repeats of
/// earlier ones spread among them.
fn stream() -> (String, Vec<String>) {
    let mut z = 7u64;
    let mut rand = move || {
        z = z
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        z >> 16
    };
    let mut input = String::new();
    let mut firsts = Vec::new();
    for i in 0..2_500_000u64 {
        let rec = format!("{i:x}");
        input.push_str(&rec);
        input.push('\n');
        firsts.push(rec);
        if i % 5 == 4 {
            input.push_str(&format!("{:x}\n", rand() % (i + 1)));
        }
    }
    (input, firsts)
}

/// `koel dedup --expected 1` with `extra` options on `input`: its stdout
/// and stderr, after asserting it succeeded.
fn dedup(input: &str, extra: &[&str]) -> (String, String) {
    let out = koel()
        .args(["dedup", "--threads", "2", "--expected", "1", "--seed", "3"])
        .args(extra)
        .write_stdin(input.to_owned())
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

/// New records the lossy run dropped (taken for duplicates): `got` must
/// be `firsts` in order with some left out, each at most once.
fn dropped(got: &str, firsts: &[String]) -> usize {
    let mut seen = HashSet::new();
    assert!(
        got.lines().all(|g| seen.insert(g)),
        "a record written twice"
    );
    lost(got, firsts)
}

/// `--exact` with the smallest `--expected`: the filter grows from one
/// record to 2.5M (past its tag bits), never gives up, and the output is
/// every first occurrence in input order, byte for byte.
#[test]
fn exact_dedup_from_expected_one_keeps_every_first_occurrence() {
    let (input, firsts) = stream();
    let (got, stderr) = dedup(&input, &["--exact"]);
    assert!(
        got == firsts.join("\n") + "\n",
        "output differs from the first occurrences"
    );
    assert!(
        stderr.contains("levels"),
        "meant to grow past its tag bits: {stderr}"
    );
}

/// Without `--exact`, new records are dropped only as false positives of
/// a filter whose rate stays within `--fpr` (default 1e-2): at most 1% of
/// the distinct records, every record written once, in input order.
#[test]
fn lossy_dedup_from_expected_one_drops_at_most_its_bound() {
    let (input, firsts) = stream();
    let (got, stderr) = dedup(&input, &[]);
    let lost = dropped(&got, &firsts);
    assert!(
        lost <= firsts.len() / 100,
        "{lost} new records dropped: {stderr}"
    );
}

/// The summary's estimate of the new records dropped as false positives
/// averages the rate at the start and the end of the run ("the FPR grows
/// about linearly with the load"), but a filter that outgrew `--expected`
/// reaches its last rate early and stays there: the estimate is about
/// half the true count. This stream, `--expected 1`, seed 3: estimate
/// 10,913, dropped 21,031 (on a shuffled stream of the same size an
/// `--exact` run counted 20,596 false positives, the estimate said
/// 10,915). Sized right (`--expected 2500000`) the estimate is right (145
/// for 135 to 155 drops). The tests of cli/tests/dedup.rs allow 4
/// times the estimate, which hides it.
#[test]
fn the_estimate_of_false_positive_drops_holds_after_growth() {
    let (input, firsts) = stream();
    let (got, stderr) = dedup(&input, &[]);
    let lost = dropped(&got, &firsts) as f64;
    let estimate = estimated_fp(&stderr);
    assert!(
        (lost / 1.5..=lost * 1.5).contains(&estimate),
        "estimated {estimate}, dropped {lost}"
    );
}

/// cli/README.md: "A filter for 1,000 keys took 10,000 times as many at
/// every bound from 3e-4 up"; `--help`: 2.5e-3 or more uses 12-bit tags.
/// With `--fpr 2.5e-3` the 12-bit table (2.44e-3 full) leaves its levels
/// almost nothing, so `--expected 1` chains four filters and ends at an
/// estimated rate of 8.5e-3 (a warning says the bound was passed), while
/// `--fpr 2.4e-3` (16-bit tags) stays within its bound on the same input.
#[test]
fn a_bound_of_2_5e_3_grows_within_it() {
    let (input, _) = stream();
    let (_, stderr) = dedup(&input, &["--fpr", "2.5e-3"]);
    assert!(
        !stderr.contains("chained") && !stderr.contains("warning"),
        "{stderr}"
    );
}
