//! End-to-end tests of `koel-lab bench`: a quick run writes a report whose
//! plots all exist, and whose numbers are sane.

mod common;

use common::{assert_one_line_error, koel_lab};
use serde_json::Value;
use std::path::Path;

/// Every `](file)` link target in a Markdown text.
fn linked_files(markdown: &str) -> Vec<String> {
    markdown
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(str::to_string)
        .collect()
}

fn run_quick(dir: &Path) -> (String, Value) {
    let out = koel_lab()
        .args([
            "bench",
            "--quick",
            "--threads",
            "1,2",
            "--seed",
            "7",
            "--out",
        ])
        .arg(dir)
        .output()
        .expect("koel-lab runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "koel-lab bench --quick failed: {stderr}"
    );
    let report = std::fs::read_to_string(dir.join("report.md")).expect("report.md written");
    let json = std::fs::read_to_string(dir.join("results.json")).expect("results.json written");
    (
        report,
        serde_json::from_str(&json).expect("results.json is JSON"),
    )
}

fn rows<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("results.{key} is not a list"))
}

/// The number at `path` (object keys or array indices) inside `v`.
fn num(v: &Value, path: &[&str]) -> f64 {
    v.pointer(&format!("/{}", path.join("/")))
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

#[test]
fn quick_run_writes_a_sane_report_with_every_plot() {
    let dir = tempfile::tempdir().unwrap();
    let (report, results) = run_quick(dir.path());

    // Every plot the report links exists and is a non-empty SVG; every
    // part of the matrix has its plot.
    let links = linked_files(&report);
    for name in [
        "latency.svg",
        "throughput.svg",
        "load-curve.svg",
        "concurrency.svg",
        "growth-16bit.svg",
        "growth-12bit.svg",
        "distributions.svg",
    ] {
        assert!(
            links.iter().any(|l| l == name),
            "report does not link {name}"
        );
    }
    for link in &links {
        let text = std::fs::read_to_string(dir.path().join(link))
            .unwrap_or_else(|e| panic!("linked file {link}: {e}"));
        assert!(text.len() > 1000, "{link} is (nearly) empty");
        assert!(text.contains("<svg"), "{link} is not an SVG");
    }
    for section in [
        "## 1. Positive lookups",
        "## 2. Negative lookups",
        "## 3. Inserts",
        "## 4. Deletes",
        "## 5. Load factor",
        "## 6. Concurrency",
        "## 7. Restart",
        "## 8. Growth",
        "## 9. Key distributions",
    ] {
        assert!(report.contains(section), "report lacks {section}");
    }
    assert!(report.contains("All correctness checks held"), "{report}");

    // Lookups: no false negative, FPR near the estimate, sane latencies.
    let lookups = rows(&results, "lookups");
    assert_eq!(lookups.len(), 4, "both cuckoo layouts, Bloom at both rates");
    for l in lookups {
        assert_eq!(num(l, &["false_negatives"]), 0.0, "{l}");
        let (measured, estimate) = (num(l, &["fpr", "measured"]), num(l, &["fpr", "estimate"]));
        assert!(estimate > 0.0 && estimate < 0.01, "estimate {estimate}");
        assert!(
            measured <= 2.0 * estimate + 2e-4,
            "measured FPR {measured} far above the estimate {estimate}"
        );
        if l["layout"].as_str().unwrap_or("").starts_with("Bloom") {
            assert!(l["load_factor"].is_null(), "{l}");
            assert!(num(l, &["insert_ops_per_sec"]) > 1e5, "{l}");
        } else {
            assert!(
                num(l, &["load_factor"]) > 0.9,
                "filled to rated capacity: {l}"
            );
        }
        let p50 = num(l, &["positive", "latency", "percentiles_ns", "0", "1"]);
        assert!(p50 > 0.0 && p50 < 100_000.0, "p50 {p50} ns");
        assert!(num(l, &["positive", "ops_per_sec"]) > 1e5);
    }

    // Inserts up to rated capacity never fail.
    for i in rows(&results, "inserts") {
        assert_eq!(num(i, &["failed"]), 0.0, "{i}");
        assert!(num(i, &["insert", "mean_ns"]) > 0.0);
    }

    // Deletes are exact; the same-tag case keeps the other key visible.
    for d in rows(&results, "deletes") {
        assert_eq!(num(d, &["success_rate"]), 1.0, "{d}");
        assert_eq!(num(d, &["false_negatives"]), 0.0, "{d}");
        let pairs = num(d, &["same_tag", "pairs"]);
        assert!(pairs >= 100.0, "{d}");
        assert_eq!(num(d, &["same_tag", "other_still_visible"]), pairs, "{d}");
        assert_eq!(num(d, &["same_tag", "removed_still_visible"]), pairs, "{d}");
        assert_eq!(
            num(d, &["same_tag", "both_gone_after_second_remove"]),
            pairs,
            "{d}"
        );
    }

    // The load curve: no failure below 90% load, never above 100%.
    for c in rows(&results, "load_curves") {
        let first = num(c, &["first_failure_load"]);
        assert!(first > 0.9 && first <= 1.0, "first failure at {first}");
        assert!(num(c, &["max_load"]) <= 1.0);
        assert_eq!(rows(c, "points").len(), 131, "90 steps of 1% + 40 of 0.25%");
    }

    // Concurrency: every layout x mix x thread count, no false negative.
    let conc = rows(&results, "concurrency");
    assert_eq!(conc.len(), 2 * 2 * 2, "2 layouts x 2 mixes x threads 1,2");
    for x in conc {
        assert_eq!(num(x, &["false_negatives"]), 0.0, "{x}");
        assert!(num(x, &["ops_per_sec"]) > 1e4, "{x}");
        // Lookups no longer count re-reads (`Stats::validation_retries`
        // is always 0): no column or field may suggest they do.
        assert!(x.get("validation_retries").is_none(), "{x}");
        num(x, &["cas_retries"]);
    }
    assert!(
        !report.to_lowercase().contains("validation retries"),
        "the report still shows validation retries"
    );

    // Restart: same answers, valid checksum, corruption refused.
    let restart = rows(&results, "restart");
    assert_eq!(restart.len(), 2);
    for x in restart {
        assert_eq!(num(x, &["mismatches"]), 0.0, "{x}");
        assert_eq!(x["checksum_valid"], Value::Bool(true), "{x}");
        assert_eq!(x["corruption_refused"], Value::Bool(true), "{x}");
        assert!(num(x, &["file_bytes"]) > 0.0, "{x}");
    }
    assert!(
        !dir.path().join("restart-16bit.koel").exists(),
        "the save/load file is removed"
    );

    // Growth: 16x or more, nothing lost, the peak while doubling above the
    // final size.
    for g in rows(&results, "growth") {
        assert!(num(g, &["generations"]) >= 4.0, "{g}");
        assert_eq!(num(g, &["false_negatives"]), 0.0, "{g}");
        assert_eq!(num(g, &["failed_inserts"]), 0.0, "{g}");
        assert!(num(g, &["memory_peak"]) > num(g, &["memory_final"]), "{g}");
        assert!(num(g, &["window_inserts"]) >= 1.0, "{g}");
    }

    // Key distributions: all of them, no false negative, FPR in bounds.
    let dists = rows(&results, "distributions");
    assert_eq!(dists.len(), 6);
    for d in dists {
        assert_eq!(num(d, &["false_negatives"]), 0.0, "{d}");
        assert_eq!(d["fpr"]["within_bound"], Value::Bool(true), "{d}");
        assert!(num(d, &["len"]) <= num(d, &["distinct"]), "{d}");
    }
}

#[test]
fn bad_options_are_one_line_errors() {
    assert_one_line_error(&["bench", "--threads", "0"], "thread count");
    assert_one_line_error(&["bench", "--threads", "1,x"], "thread count");
    assert_one_line_error(&["bench", "--items", "10"], "too few");
    assert_one_line_error(&["bench", "--items", "1G"], "too many");
    // An output path under a regular file cannot be a directory.
    let file = tempfile::NamedTempFile::new().unwrap();
    let out = file.path().join("sub");
    assert_one_line_error(
        &["bench", "--quick", "--out", out.to_str().unwrap()],
        "cannot create the output directory",
    );
}
