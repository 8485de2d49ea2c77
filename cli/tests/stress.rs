//! `koel stress`: the checker catches a filter that loses keys, passes a
//! correct one, and every bad option is one clear error line.

mod common;

use common::{assert_one_line_error, koel};
use koel::{Filter, FilterKind, InsertError};
use koel_cli::filters::CliFilter;
use koel_cli::keys::KeyDist;
use koel_cli::stress::{self, Config, Mix};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// An exact multiset behind a mutex, optionally forgetting one insert in
/// `lose_every`: the reference filter for the checker itself.
struct ExactDouble {
    set: Mutex<HashMap<u64, u32>>,
    lose_every: u64,
    inserts: AtomicU64,
}

impl ExactDouble {
    fn new(lose_every: u64) -> Self {
        ExactDouble {
            set: Mutex::new(HashMap::new()),
            lose_every,
            inserts: AtomicU64::new(0),
        }
    }

    fn loses_this_one(&self) -> bool {
        self.lose_every > 0
            && (self.inserts.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(self.lose_every)
    }
}

impl Filter for ExactDouble {
    fn kind(&self) -> FilterKind {
        FilterKind::Cuckoo
    }
    fn hash_bytes(&self, bytes: &[u8]) -> u64 {
        // FNV-1a: exact enough for distinct 8-byte keys in a test.
        bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
    }
    fn insert_hash(&self, hash: u64) -> Result<(), InsertError> {
        if !self.loses_this_one() {
            *self.set.lock().unwrap().entry(hash).or_default() += 1;
        }
        Ok(())
    }
    fn insert_unique_hash(&self, hash: u64) -> Result<bool, InsertError> {
        let mut set = self.set.lock().unwrap();
        if set.contains_key(&hash) {
            return Ok(false);
        }
        if !self.loses_this_one() {
            set.insert(hash, 1);
        }
        Ok(true)
    }
    fn contains_hash(&self, hash: u64) -> bool {
        self.set.lock().unwrap().contains_key(&hash)
    }
    fn remove_hash(&self, hash: u64) -> Option<bool> {
        let mut set = self.set.lock().unwrap();
        Some(match set.get_mut(&hash) {
            Some(1) => {
                set.remove(&hash);
                true
            }
            Some(n) => {
                *n -= 1;
                true
            }
            None => false,
        })
    }
    fn len(&self) -> usize {
        self.set.lock().unwrap().values().map(|&n| n as usize).sum()
    }
    fn memory_usage(&self) -> usize {
        0
    }
    fn false_positive_rate(&self) -> f64 {
        0.0
    }
    fn clear(&self) {
        self.set.lock().unwrap().clear()
    }
}

impl CliFilter for ExactDouble {}

fn config(keys: KeyDist) -> Config {
    Config {
        threads: 2,
        items: 20_000,
        capacity: 20_000,
        mix: "read=80,insert=15,remove=5".parse::<Mix>().unwrap(),
        duration: Duration::from_millis(300),
        keys,
        prefill: 0.5,
        seed: 7,
    }
}

#[test]
fn checker_finds_no_false_negative_in_an_exact_filter() {
    for keys in [
        KeyDist::Uniform,
        KeyDist::Zipf(1.1),
        KeyDist::Sequential,
        KeyDist::Strings,
    ] {
        let report = stress::run(&ExactDouble::new(0), &config(keys)).unwrap();
        assert_eq!(
            report.check.false_negatives(),
            0,
            "{keys}: {:?}",
            report.check
        );
        assert!(
            report.ops > 0 && report.check.checked_reads > 0,
            "{keys}: {:?}",
            report.check
        );
        assert_eq!(
            report.check.fpr_probe_hits, 0,
            "an exact set has no false positive"
        );
    }
}

#[test]
fn checker_reports_the_misses_of_a_filter_that_loses_inserts() {
    let report = stress::run(&ExactDouble::new(50), &config(KeyDist::Uniform)).unwrap();
    let c = &report.check;
    assert!(c.final_false_negatives > 0, "{c:?}");
    assert!(
        c.live_false_negatives + c.write_false_negatives > 0,
        "{c:?}"
    );
    assert!(!c.examples.is_empty());
}

#[test]
fn binary_exits_1_and_names_the_misses_for_the_lossy_test_double() {
    let out = koel()
        .args([
            "stress",
            "--kind",
            "lossy-test-double",
            "--duration",
            "0.5",
            "--items",
            "20000",
            "--threads",
            "2",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout {stdout} stderr {stderr}"
    );
    assert!(stdout.contains("check        FAILED:"), "{stdout}");
    assert!(stderr.contains("false negatives"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn binary_passes_on_the_cuckoo_filter_and_reports_every_section() {
    let out = koel()
        .args([
            "stress",
            "--duration",
            "0.5",
            "--items",
            "50k",
            "--keys",
            "strings",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for section in [
        "throughput",
        "latency",
        "p99.9",
        "filter",
        "fpr",
        "check        OK: 0 false negatives",
    ] {
        assert!(stdout.contains(section), "no {section:?} in {stdout}");
    }
}

#[test]
fn json_output_parses_and_carries_the_results() {
    let out = koel()
        .args([
            "stress",
            "--duration",
            "0.3",
            "--items",
            "10k",
            "--json",
            "--mix",
            "read=50,insert=50",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert!(v["ops"].as_u64().unwrap() > 0);
    assert_eq!(v["check"]["live_false_negatives"], 0);
    assert_eq!(v["mix"], "read=50,insert=50,remove=0");
    assert!(v["latency"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["op"] == "insert"));
    assert!(!v["timeline"].as_array().unwrap().is_empty());
}

#[test]
fn plot_is_an_svg_with_both_charts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stress.svg");
    koel()
        .args(["stress", "--duration", "0.4", "--items", "10k", "--plot"])
        .arg(&path)
        .assert()
        .success();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(
        svg.starts_with("<svg") || svg.contains("<svg"),
        "not an SVG"
    );
    assert!(svg.contains("Throughput") && svg.contains("Latency percentiles"));
}

#[test]
fn bad_options_are_one_line_errors() {
    assert_one_line_error(&["stress", "--threads", "0"], "--threads");
    assert_one_line_error(&["stress", "--items", "0"], "--items");
    assert_one_line_error(&["stress", "--items", "lots"], "--items");
    assert_one_line_error(&["stress", "--mix", "read=90,write=10"], "write");
    assert_one_line_error(&["stress", "--mix", "read=0"], "--mix");
    assert_one_line_error(&["stress", "--keys", "zipf:x"], "zipf");
    assert_one_line_error(&["stress", "--keys", "gaussian"], "gaussian");
    assert_one_line_error(&["stress", "--duration", "-1"], "--duration");
    assert_one_line_error(&["stress", "--prefill", "2"], "--prefill");
    assert_one_line_error(&["stress", "--fingerprint-bits", "13"], "13");
    assert_one_line_error(&["stress", "--kind", "nope"], "nope");
    assert_one_line_error(&["stress", "--no-such-flag"], "--no-such-flag");
    assert_one_line_error(&["stress", "--threads", "4", "--items", "3"], "--items");
    assert_one_line_error(
        &["stress", "--plot", "/nonexistent-dir/x.svg"],
        "/nonexistent-dir/x.svg",
    );
    // (A prefill of 1M keys into `--capacity 1k` no longer fails: the
    // filter grows past its tag bits with levels; the run below shows it.)
    assert_one_line_error(&["frobnicate"], "frobnicate");
}

/// A prefill 1000x the capacity succeeds: the filter doubles, then adds a
/// level of wider tags.
#[test]
fn a_prefill_far_past_the_capacity_grows_instead_of_failing() {
    let out = koel()
        .args([
            "stress",
            "--items",
            "1M",
            "--capacity",
            "1k",
            "--prefill",
            "1",
            "--duration",
            "0.1",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
}

#[test]
fn growth_events_are_reported_when_the_filter_doubles() {
    let out = koel()
        .args([
            "stress",
            "--duration",
            "0.5",
            "--items",
            "100k",
            "--capacity",
            "2k",
            "--prefill",
            "0",
            "--mix",
            "read=50,insert=50",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let generation = v["snapshot"]["generation"].as_u64().unwrap();
    let events = v["growth_events"].as_array().unwrap();
    assert!(generation >= 1, "a 2k filter given 50k keys must double");
    assert_eq!(
        events.len() as u64,
        generation,
        "one event per doubling: {events:?}"
    );
    assert_eq!(v["check"]["final_false_negatives"], 0);
}

#[test]
fn bloom_kind_passes_the_check_and_refuses_removes() {
    koel()
        .args([
            "stress",
            "--kind",
            "bloom",
            "--duration",
            "0.4",
            "--items",
            "50k",
        ])
        .assert()
        .success()
        .stdout(predicates::str::contains("koel stress: bloom"))
        .stdout(predicates::str::contains(
            "check        OK: 0 false negatives",
        ));
    assert_one_line_error(
        &[
            "stress",
            "--kind",
            "bloom",
            "--duration",
            "0.2",
            "--mix",
            "read=90,remove=10",
        ],
        "cannot remove",
    );
}

#[test]
fn short_flags_run_stress_quietly_with_its_report() {
    let out = koel()
        .args([
            "stress",
            "-q",
            "-j",
            "1",
            "--duration",
            "0.2",
            "--items",
            "5000",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains("; 1 threads;"), "{stdout}");
    assert!(stdout.contains("check        OK"), "{stdout}");
    assert!(out.stderr.is_empty(), "{out:?}");
}

/// The sampler sees growth once per tick: doublings it saw in one tick are
/// one line with the items counted then (each used to get a line of its
/// own, all with that same count, as if six doublings had happened at one
/// size). A filter for 1k keys that takes 50k inserts at once doubles
/// several times within the first tick.
#[test]
fn growth_lines_name_each_tick_once() {
    let out = koel()
        .args([
            "stress",
            "--duration",
            "0.3",
            "--capacity",
            "1k",
            "--prefill",
            "0",
        ])
        .args(["--mix", "insert=100", "--items", "50k", "-j", "1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("grew to"))
        .collect();
    let events: usize = text
        .lines()
        .find_map(|l| l.split("growth events ").nth(1))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .expect("a growth events count");
    assert!(events >= 2, "{text}");
    let times: Vec<&str> = lines
        .iter()
        .map(|l| l.split(" by ").nth(1).unwrap().split(" s ").next().unwrap())
        .collect();
    let mut distinct = times.clone();
    distinct.dedup();
    assert_eq!(distinct, times, "a tick named twice:\n{text}");
    // Every event is in some line: "generation g" counts one,
    // "generations a to b" counts b - a + 1.
    let covered: usize = lines
        .iter()
        .map(|l| match l.split("generations ").nth(1) {
            Some(range) => {
                let n: Vec<usize> = range
                    .split(" by ")
                    .next()
                    .unwrap()
                    .split(" to ")
                    .map(|x| x.parse().unwrap())
                    .collect();
                n[1] - n[0] + 1
            }
            None => 1,
        })
        .sum();
    assert_eq!(covered, events, "{text}");
}
