//! Chain files (what earlier versions of `koel dedup --state` saved when a
//! state filter had no room for a run) read by `info`, `verify` and `query`
//! like plain filter files, and continued by `dedup --state`; a damaged or
//! hostile chain is one line and exit status 1 (`info`, `verify`) or 2
//! (`query`, `dedup`), never a panic.

mod common;

use common::{
    assert_check_fails, assert_one_line_error, assert_query_maybe, assert_state_holds_all, koel,
    query_maybes,
};
use std::path::{Path, PathBuf};

const SMALL: u32 = 2_000;
const BIG: u32 = 30_000;

fn keys(tag: &str, n: u32) -> String {
    (0..n).map(|i| format!("{tag}-{i}\n")).collect()
}

/// A chain of two filters that hash alike: `SMALL` keys `a-i`, then `BIG`
/// keys `b-i`, each built by `koel build` and framed as koel framed them.
fn chain_state(dir: &Path) -> PathBuf {
    let parts: Vec<PathBuf> = [("a", SMALL), ("b", BIG)]
        .iter()
        .map(|&(tag, n)| {
            let input = dir.join(format!("{tag}.txt"));
            std::fs::write(&input, keys(tag, n)).unwrap();
            let part = dir.join(format!("{tag}.koel"));
            koel()
                .args(["build", "--seed", "11", "--output"])
                .arg(&part)
                .arg(&input)
                .assert()
                .success();
            part
        })
        .collect();
    let state = dir.join("seen.koel");
    std::fs::write(&state, frame(&[&parts[0], &parts[1]])).unwrap();
    state
}

/// The number after `label` on each line that starts with it.
fn value_after(text: &str, label: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix(label))
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .and_then(|n| n.replace(',', "").parse::<f64>().ok())
                .unwrap_or_else(|| panic!("no number after {label:?} in {rest:?}"))
        })
        .collect()
}

#[test]
fn info_shows_each_filter_of_a_chain_and_the_summed_rate() {
    let dir = tempfile::tempdir().unwrap();
    let state = chain_state(dir.path());
    let out = koel().arg("info").arg(&state).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("chain        2 cuckoo filters"), "{stdout}");
    assert!(stdout.contains("filter 1 of 2"), "{stdout}");
    assert!(stdout.contains("filter 2 of 2"), "{stdout}");
    assert_eq!(stdout.matches("kind         cuckoo").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("checksum     valid").count(), 2, "{stdout}");
    assert_eq!(
        stdout.matches("hash probe   matches this build").count(),
        2,
        "{stdout}"
    );
    let rates = value_after(&stdout, "fpr ");
    assert_eq!(rates.len(), 2, "{stdout}");
    let total = value_after(&stdout, "total fpr");
    assert_eq!(total.len(), 1, "{stdout}");
    let sum: f64 = rates.iter().sum();
    assert!(
        (total[0] - sum).abs() <= sum * 0.02,
        "{total:?} vs {rates:?}"
    );
    let items: f64 = value_after(&stdout, "items ").iter().sum();
    assert!(
        items >= f64::from(SMALL + BIG) * 0.99,
        "{items} items: {stdout}"
    );
}

#[test]
fn verify_checks_every_filter_of_a_chain() {
    let dir = tempfile::tempdir().unwrap();
    let state = chain_state(dir.path());
    koel()
        .arg("verify")
        .arg(&state)
        .assert()
        .code(0)
        .stdout(predicates::str::contains("OK (chain of 2 cuckoo filters"));
}

#[test]
fn query_finds_the_keys_of_every_filter_of_a_chain() {
    let dir = tempfile::tempdir().unwrap();
    let state = chain_state(dir.path());
    let all = keys("a", SMALL) + &keys("b", BIG);
    let out = koel()
        .arg("query")
        .arg(&state)
        .write_stdin(all)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), (SMALL + BIG) as usize);
    assert!(
        text.lines().all(|l| l.starts_with("maybe\t")),
        "a key of the chain was reported absent"
    );
    assert_query_maybe(&state, &["a-0", "b-29999"]);
    let maybes = query_maybes(&state, 20_000);
    assert!(
        maybes < 30,
        "{maybes} false positives in 20,000 absent keys"
    );
}

/// `info` and `verify` fail with `needle` (exit 1); `query` and `dedup
/// --state` are one-line errors naming the file (exit 2).
fn assert_refused(dir: &Path, name: &str, bytes: &[u8], needle: &str) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    for cmd in ["verify", "info"] {
        assert_check_fails(&[cmd.as_ref(), path.as_os_str()], needle);
    }
    let p = path.to_str().unwrap();
    assert_one_line_error(&["query", p, "a-1"], needle);
    assert_one_line_error(&["dedup", "--state", p, "/dev/null"], needle);
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name} was changed");
}

fn with_count(bytes: &[u8], count: u32) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[8..12].copy_from_slice(&count.to_le_bytes());
    b
}

#[test]
fn damaged_and_hostile_chains_are_one_line_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = chain_state(dir.path());
    let bytes = std::fs::read(&state).unwrap();
    let d = dir.path();

    assert_refused(d, "cut.koel", &bytes[..bytes.len() - 100], "truncated");
    assert_refused(d, "header.koel", &bytes[..10], "truncated");
    assert_refused(d, "magic-only.koel", &bytes[..8], "truncated");
    // The count says 3; two filters follow.
    assert_refused(d, "three.koel", &with_count(&bytes, 3), "3 filters");
    // The count says 1; a second filter follows.
    assert_refused(d, "one.koel", &with_count(&bytes, 1), "after the last");
    assert_refused(d, "zero.koel", &with_count(&bytes, 0), "0 filters");
    // A hostile count: checked against the file's length before anything
    // is allocated for it.
    assert_refused(d, "huge.koel", &with_count(&bytes, u32::MAX), "4294967295");
    assert_refused(d, "big.koel", &with_count(&bytes, 60), "60 filters");
    let mut trailing = bytes.clone();
    trailing.extend_from_slice(b"junk");
    assert_refused(d, "trailing.koel", &trailing, "after the last");
    let mut flipped = bytes.clone();
    let at = bytes.len() - 5_000;
    flipped[at] ^= 0x40;
    assert_refused(d, "flipped.koel", &flipped, "damaged");
}

/// A chain file of `files`' filters, framed as koel frames them.
fn frame(files: &[&Path]) -> Vec<u8> {
    let mut b = b"KOELCHN1".to_vec();
    b.extend_from_slice(&(files.len() as u32).to_le_bytes());
    for f in files {
        b.extend_from_slice(&std::fs::read(f).unwrap());
    }
    b
}

fn build(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let input = dir.join("k.txt");
    std::fs::write(&input, keys("k", 100)).unwrap();
    let out = dir.join(name);
    koel()
        .arg("build")
        .args(extra)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(&out)
        .assert()
        .success();
    out
}

#[test]
fn a_chain_of_filters_that_hash_differently_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let seed1 = build(d, "s1.koel", &["--seed", "1"]);
    let seed2 = build(d, "s2.koel", &["--seed", "2"]);
    let narrow = build(d, "n1.koel", &["--seed", "1", "--fpr", "0.01"]);
    let bloom = build(d, "b1.koel", &["--seed", "1", "--kind", "bloom"]);
    // A well-framed chain of two alike filters is fine.
    let alike = d.join("alike.koel");
    std::fs::write(&alike, frame(&[&seed1, &seed1])).unwrap();
    koel().arg("verify").arg(&alike).assert().code(0);
    koel().arg("query").arg(&alike).arg("k-5").assert().code(0);

    assert_refused(d, "seeds.koel", &frame(&[&seed1, &seed2]), "seed");
    assert_refused(d, "widths.koel", &frame(&[&seed1, &narrow]), "tag");
    assert_refused(d, "bloom.koel", &frame(&[&seed1, &bloom]), "bloom");
}

/// A count more than the file's length can hold (at 96 bytes or more a
/// filter) is refused before any filter is read, naming the most it holds.
#[test]
fn a_count_the_file_cannot_hold_is_refused_before_any_filter_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = frame(&[&build(dir.path(), "one.koel", &[])]);
    let room = (bytes.len() as u32 - 12) / 96;
    assert!(room < 64, "{room}: the filter is too large for this test");
    let needle = format!("hold at most {room} ");
    assert_refused(
        dir.path(),
        "room.koel",
        &with_count(&bytes, room + 1),
        &needle,
    );
}

/// Filters of the same seed and tag width but of format versions 3
/// (`Fold`) and 2 (XXH3) do not hash every key alike: a key whose `Hash`
/// bytes are 8 long (here the empty line, which is its length as a `u64`)
/// has two hashes, and a chain that hashes with the first filter's misses
/// it in the other. Such a chain must be refused or still find the key;
/// today `verify` calls it OK and `query` answers "absent" for a key it
/// holds.
#[test]
fn a_chain_of_filters_of_format_versions_3_and_2_misses_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A version 2 filter that holds the empty key.
    let v2 = d.join("v2.koel");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/v2_cuckoo16.koel"),
        &v2,
    )
    .unwrap();
    koel()
        .args(["dedup", "--state"])
        .arg(&v2)
        .write_stdin("\nv2-key\n")
        .assert()
        .success();
    koel().arg("query").arg(&v2).arg("").assert().code(0);
    // A version 3 filter of the same seed and tag width, first.
    let seed = 0x6b6f_656c_0016u64.to_string();
    let v3 = build(d, "v3.koel", &["--seed", &seed]);
    let chain = d.join("mixed.koel");
    std::fs::write(&chain, frame(&[&v3, &v2])).unwrap();
    let out = koel()
        .arg("query")
        .arg(&chain)
        .args(["", "v2-key", "k-1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() || !stdout.contains("absent"),
        "a key of the chain reported absent:\n{stdout}"
    );
}

/// A chain as koel saved it before dedup kept one filter: two runs of
/// `koel dedup --seed 11 -j 2 --state`, of `old-a-0..99` then of
/// `old-b-0..1999` (the second had no room in the first filter).
const OLD_CHAIN: &[u8] = include_bytes!("data/old-chain.koel");

fn old_keys() -> String {
    keys("old-a", 100) + &keys("old-b", 2_000)
}

#[test]
fn dedup_continues_an_old_chain_without_losing_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("seen.koel");
    std::fs::write(&state, OLD_CHAIN).unwrap();
    let input = dir.path().join("in.txt");
    // Far more new keys than the newest filter was sized for: it grows,
    // by doublings and then levels, under the bound it was saved with.
    let new_keys = 100_000;
    std::fs::write(&input, old_keys() + &keys("new", new_keys)).unwrap();
    let out = koel()
        .args(["dedup", "--threads", "2", "--state"])
        .arg(&state)
        .arg(&input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().all(|l| l.starts_with("new-")),
        "a key of the old chain was reported new: {stderr}"
    );
    assert!(
        text.lines().count() as f64 >= f64::from(new_keys) * 0.99,
        "{stderr}"
    );
    // Saved back as a chain of as many filters, the newest grown.
    let bytes = std::fs::read(&state).unwrap();
    assert_eq!(&bytes[..12], &OLD_CHAIN[..12], "not a chain of 2 filters");
    let info = koel().arg("info").arg(&state).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("levels "), "{info}");
    koel().arg("verify").arg(&state).assert().code(0);
    // Nothing of either run is forgotten, by dedup or by query.
    assert_state_holds_all(&state, &input);
    assert_query_maybe(&state, &["old-a-0", "old-b-1999", "new-99999"]);
}
