//! `koel dedup` end to end: output equals an exact first-occurrence dedup
//! of generated input with planted duplicates (except the false positives
//! the summary estimates), across chunk boundaries, files and stdin; bad
//! input is one error line.

mod common;

use common::{assert_one_line_error, assert_state_holds_all, estimated_fp, koel, lost};
use koel::{Filter, FilterKind, InsertError};
use koel_cli::dedup::{self, Options};
use koel_cli::filters::CliFilter;
use koel_cli::input::KeySpec;
use koel_cli::keys::mix64 as mix;
use std::collections::HashSet;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `n` records `key,payload`; about one in three repeats an earlier key
/// (with a different payload), and record lengths vary from ~10 to ~90
/// bytes.
fn generate(n: u64) -> Vec<String> {
    let mut distinct = 0u64;
    (0..n)
        .map(|i| {
            let r = mix(i);
            let id = if r.is_multiple_of(3) && distinct > 0 {
                mix(r) % distinct
            } else {
                distinct += 1;
                distinct - 1
            };
            let pad = "x".repeat((mix(id) % 60) as usize);
            format!("k{:x}{pad},payload-{i}", mix(id ^ 0xabc))
        })
        .collect()
}

/// The exact reference: first occurrence of each key, in input order.
fn reference(lines: &[String], key: impl Fn(&str) -> &str) -> Vec<&str> {
    let mut seen = HashSet::new();
    lines
        .iter()
        .map(String::as_str)
        .filter(|l| seen.insert(key(l).to_string()))
        .collect()
}

/// Asserts `got` is `want` with at most `tolerance` records missing (false
/// positives), in the same order, and nothing else.
fn assert_reference_order(got: &str, want: &[&str], tolerance: usize) {
    let got: Vec<&str> = got.lines().collect();
    let mut w = want.iter();
    let mut missing = 0;
    for g in &got {
        loop {
            match w.next() {
                Some(x) if x == g => break,
                Some(_) => missing += 1,
                None => panic!("output record {g:?} is not in the reference, or out of order"),
            }
        }
    }
    missing += w.count();
    assert_eq!(got.len() + missing, want.len());
    assert!(
        missing <= tolerance,
        "{missing} records lost, more than the {tolerance} false positives allowed"
    );
}

#[test]
fn whole_line_dedup_equals_the_exact_reference() {
    let lines = generate(200_000);
    // Whole-line keys: plant exact duplicate lines.
    let mut input: Vec<String> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        input.push(l.clone());
        if i % 5 == 0 {
            input.push(lines[(mix(i as u64) % (i as u64 + 1)) as usize].clone());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.txt");
    std::fs::write(&path, input.join("\n") + "\n").unwrap();
    // Small chunks: many chunk boundaries, records cut at every position.
    let out = koel()
        .args([
            "dedup",
            "--threads",
            "3",
            "--chunk-bytes",
            "4093",
            "--seed",
            "5",
        ])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let want = reference(&input, |l| l);
    let fp = estimated_fp(&stderr);
    assert_reference_order(
        &String::from_utf8(out.stdout).unwrap(),
        &want,
        (fp * 4.0) as usize + 4,
    );
    assert!(
        stderr.contains(&format!("{} records in", thousands(input.len()))),
        "{stderr}"
    );
}

#[test]
fn field_dedup_keeps_the_first_record_of_each_key() {
    let lines = generate(100_000);
    let input = lines.join("\n"); // no trailing newline: the last record gets one
    let out = koel()
        .args([
            "dedup",
            "--field",
            "1",
            "--delimiter",
            ",",
            "--threads",
            "2",
            "--chunk-bytes",
            "65536",
        ])
        .write_stdin(input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let want = reference(&lines, |l| l.split(',').next().unwrap());
    let got = String::from_utf8(out.stdout).unwrap();
    assert!(got.ends_with('\n'));
    assert_reference_order(&got, &want, (estimated_fp(&stderr) * 4.0) as usize + 4);
}

#[test]
fn records_without_the_field_pass_through() {
    let input = "a,1\nno-delimiter\nb,2\na,3\nno-delimiter\n";
    koel()
        .args(["dedup", "--field", "2", "--delimiter", ","])
        .write_stdin("x,1\nlonely\ny,1\nlonely\n")
        .assert()
        .success()
        .stdout("x,1\nlonely\nlonely\n")
        .stderr(predicates::str::contains(
            "2 records without the key field passed through",
        ));
    koel()
        .args(["dedup", "--field", "1", "--delimiter", ","])
        .write_stdin(input)
        .assert()
        .success()
        .stdout("a,1\nno-delimiter\nb,2\n");
}

#[test]
fn files_and_stdin_are_read_in_order_as_one_stream() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::write(&a, "1\n2\n3").unwrap(); // no newline before the next file
    std::fs::write(&b, "\n2\n4\n").unwrap();
    koel()
        .arg("dedup")
        .arg(&a)
        .arg("-")
        .arg(&b)
        .write_stdin("5\n1\n")
        .assert()
        .success()
        .stdout("1\n2\n3\n5\n\n4\n");
}

#[test]
fn a_record_longer_than_a_chunk_is_kept_whole() {
    let long = "L".repeat(100_000);
    let input = format!("a\n{long}\nb\n{long}\na\n");
    koel()
        .args(["dedup", "--chunk-bytes", "1000"])
        .write_stdin(input)
        .assert()
        .success()
        .stdout(format!("a\n{long}\nb\n"));
}

/// Adversarial: `--chunk-bytes` accepts 1, 2 and 3, but the reader then
/// asks for `max(chunk - len, chunk / 4)` = 0 more bytes once a chunk is
/// full without a newline, reads nothing, takes that for the end of the
/// input and stops: the rest of the input is silently dropped, exit 0.
#[test]
fn a_chunk_size_below_four_bytes_keeps_every_record() {
    for chunk in ["1", "2", "3"] {
        koel()
            .args(["dedup", "-q", "--chunk-bytes", chunk])
            .write_stdin("abcdef\nxyz\nabcdef\nq\n")
            .assert()
            .success()
            .stdout("abcdef\nxyz\nq\n");
    }
}

#[test]
fn output_file_gets_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.txt");
    koel()
        .args(["dedup", "-o"])
        .arg(&out)
        .write_stdin("q\nq\nr\n")
        .assert()
        .success()
        .stdout("");
    assert_eq!(std::fs::read_to_string(out).unwrap(), "q\nr\n");
}

#[test]
fn bad_input_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.txt");
    let missing = missing.to_str().unwrap();
    assert_one_line_error(&["dedup", missing], "missing.txt");
    assert_one_line_error(&["dedup", dir.path().to_str().unwrap()], "directory");
    assert_one_line_error(&["dedup", "--field", "0"], "--field");
    assert_one_line_error(&["dedup", "--delimiter", ",,"], "delimiter");
    assert_one_line_error(&["dedup", "--fpr", "2"], "--fpr");
    assert_one_line_error(&["dedup", "--fpr", "1e-9"], "1e-9");
    assert_one_line_error(&["dedup", "--expected", "0"], "--expected");
    assert_one_line_error(&["dedup", "--threads", "many"], "--threads");
    let unwritable = dir.path().join("no-such-dir").join("out.txt");
    assert_one_line_error(
        &["dedup", "-o", unwritable.to_str().unwrap(), "/dev/null"],
        "no-such-dir",
    );
}

#[test]
fn a_full_disk_is_one_error_line() {
    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.txt");
    let mut f = std::fs::File::create(&path).unwrap();
    for i in 0..300_000 {
        writeln!(f, "record-{i}").unwrap();
    }
    drop(f);
    assert_one_line_error(
        &["dedup", "-o", "/dev/full", path.to_str().unwrap()],
        "No space left on device",
    );
}

/// A filter that takes `room` keys and then reports `Full`.
struct Cramped {
    room: usize,
    taken: AtomicUsize,
}

impl Filter for Cramped {
    fn kind(&self) -> FilterKind {
        FilterKind::Cuckoo
    }
    fn hash_bytes(&self, bytes: &[u8]) -> u64 {
        bytes.iter().fold(0, |h, &b| mix(h ^ u64::from(b)))
    }
    fn insert_hash(&self, _: u64) -> Result<(), InsertError> {
        self.insert_unique_hash(0).map(|_| ())
    }
    fn insert_unique_hash(&self, _: u64) -> Result<bool, InsertError> {
        if self.taken.fetch_add(1, Ordering::Relaxed) < self.room {
            Ok(true)
        } else {
            Err(InsertError::Full)
        }
    }
    fn contains_hash(&self, _: u64) -> bool {
        false
    }
    fn remove_hash(&self, _: u64) -> Option<bool> {
        None
    }
    fn len(&self) -> usize {
        self.taken.load(Ordering::Relaxed).min(self.room)
    }
    fn memory_usage(&self) -> usize {
        0
    }
    fn false_positive_rate(&self) -> f64 {
        0.0
    }
    fn clear(&self) {}
}

impl CliFilter for Cramped {}

#[test]
fn a_full_filter_stops_the_run_with_an_error_naming_the_fix() {
    let filter = Cramped {
        room: 1000,
        taken: AtomicUsize::new(0),
    };
    let input: String = (0..10_000).map(|i| format!("{i}\n")).collect();
    let mut out = Vec::new();
    let options = Options {
        threads: 2,
        key: KeySpec {
            field: None,
            delimiter: b'\t',
            strip_cr: false,
        },
        chunk_bytes: 1024,
        exact: None,
    };
    let err = dedup::run(&filter, &mut input.as_bytes(), &mut out, options, &|_| {}).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("full") && msg.contains("--expected"), "{msg}");
    assert!(!msg.contains('\n'));
}

fn thousands(n: usize) -> String {
    koel_cli::human::HumanCount(n as u64).to_string()
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let input: String = (0..400_000).map(|i| format!("line-{i}\n")).collect();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("koel"))
        .arg("dedup")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    // Read one line, then close our end: like `koel dedup | head -1`.
    let mut first = [0u8; 7];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    assert_eq!(&first, b"line-0\n");
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // As `cat` ends: SIGPIPE, status 141 in a shell (see main.rs).
    #[cfg(unix)]
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(13),
        "{stderr}"
    );
    assert!(
        !stderr.contains("error") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

#[test]
fn an_absurd_expected_size_is_one_error_line() {
    assert_one_line_error(&["dedup", "--expected", "1000G", "/dev/null"], "too large");
}

#[test]
fn a_decimal_expected_size_is_taken_exactly_and_a_fraction_refused() {
    // 8.2 x 10^6 is not whole in floating point.
    koel()
        .args(["dedup", "--expected", "8.2M"])
        .write_stdin("a\nb\na\n")
        .assert()
        .success()
        .stdout("a\nb\n");
    assert_one_line_error(
        &["dedup", "--expected", "1.5", "/dev/null"],
        "not a whole number",
    );
}

/// `n` distinct short lines `tag-i`, each followed by a repeat of an
/// earlier one every third line.
fn distinct_with_repeats(tag: &str, n: u64) -> Vec<String> {
    let mut lines = Vec::new();
    for i in 0..n {
        lines.push(format!("{tag}-{i}"));
        if i % 3 == 2 {
            lines.push(format!("{tag}-{}", mix(i) % i));
        }
    }
    lines
}

#[test]
fn a_long_first_line_does_not_undersize_the_filter() {
    // The first megabyte is one line: sizing from it once gave a filter
    // for ~1000 records, which gave up (exit 2) halfway through. Large
    // enough (> 8 MiB) to be sampled rather than counted.
    let mut lines = vec!["L".repeat(9 << 20)];
    lines.extend(distinct_with_repeats("r", 300_000));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.txt");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let out = koel()
        .args(["dedup", "--threads", "2", "--seed", "1"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("growth events 0"),
        "sized from the count: {stderr}"
    );
    let want = reference(&lines, |l| l);
    let got = String::from_utf8(out.stdout).unwrap();
    assert_reference_order(&got, &want, (estimated_fp(&stderr) * 4.0) as usize + 4);
}

#[test]
fn a_too_small_expected_grows_past_its_tag_bits_instead_of_stopping_halfway() {
    let lines = distinct_with_repeats("s", 300_000);
    let out = koel()
        .args([
            "dedup",
            "--threads",
            "2",
            "--expected",
            "1000",
            "--seed",
            "2",
        ])
        .write_stdin(lines.join("\n") + "\n")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // 300x the expected count: past what one table's tag bits allow, so the
    // filter added a level.
    assert!(stderr.contains("levels"), "{stderr}");
    let want = reference(&lines, |l| l);
    let got = String::from_utf8(out.stdout).unwrap();
    assert_reference_order(&got, &want, (estimated_fp(&stderr) * 4.0) as usize + 8);
}

/// `n` lines `tag-i`.
fn numbered(tag: &str, n: u64) -> String {
    (0..n).map(|i| format!("{tag}-{i}\n")).collect()
}

#[test]
fn a_state_that_outgrew_its_expected_is_one_filter_file_that_forgets_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("seen.koel");
    let (first, second) = (dir.path().join("first.txt"), dir.path().join("second.txt"));
    std::fs::write(&first, numbered("first", 200_000)).unwrap();
    // The first run's keys again, then as many new ones.
    let new_keys = 100_000u64;
    std::fs::write(
        &second,
        numbered("first", 200_000) + &numbered("new", new_keys),
    )
    .unwrap();
    let run = |input: &std::path::Path, expected: &str| {
        let out = koel()
            .args(["dedup", "--threads", "2", "--expected", expected, "--state"])
            .arg(&state)
            .arg(input)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let magic = std::fs::read(&state).unwrap()[..8].to_vec();
        assert_ne!(&magic, b"KOELCHN1", "the state became a chain: {stderr}");
        (String::from_utf8(out.stdout).unwrap(), stderr)
    };
    // 200 times its --expected: the filter doubles while its rate allows,
    // then adds levels.
    let (out, stderr) = run(&first, "1000");
    assert!(stderr.contains("levels"), "{stderr}");
    assert!(out.lines().count() >= 198_000, "{stderr}");
    // A library file: it loads as one filter, with its levels.
    let info = koel().arg("info").arg(&state).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.contains("levels ") && !info.contains("chain"),
        "{info}"
    );

    let (out, stderr) = run(&second, "300000");
    assert!(
        out.lines().all(|l| l.starts_with("new-")),
        "a key of the first run was reported new: {stderr}"
    );
    let lost = new_keys - out.lines().count() as u64;
    // The false-positive bound the state was made with (the default).
    assert!(
        (lost as f64) / (new_keys as f64) < 1e-2,
        "{lost} of {new_keys} new keys taken for duplicates: {stderr}"
    );
    // And the state remembers both runs.
    assert_state_holds_all(&state, &second);
}

#[test]
fn a_bound_at_its_floor_chains_filters_and_never_stops_halfway() {
    // 16-bit tags full at 1.16e-4: 1.2e-4 allows no doubling and leaves
    // no level the rate of its 21-bit tags, so the run chains filters
    // (past the bound, which the summary says) instead of stopping.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, numbered("k", 20_000)).unwrap();
    let state = dir.path().join("seen.koel");
    let out = koel()
        .args(["dedup", "--fpr", "1.2e-4", "--expected", "1000", "--state"])
        .arg(&state)
        .arg(&input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("passed its bound"), "{stderr}");
    let kept = String::from_utf8_lossy(&out.stdout).lines().count();
    assert!(kept > 19_900, "{kept} of 20,000 distinct records kept");
    let bytes = std::fs::read(&state).unwrap();
    assert_eq!(&bytes[..8], b"KOELCHN1", "the state is a chain");
    // No key the chain took is new to it in a second run.
    assert_state_holds_all(&state, &input);
}

#[test]
fn a_state_that_cannot_meet_the_fpr_or_seed_asked_is_refused_before_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("seen.koel");
    let out_file = dir.path().join("out.txt");
    koel()
        .args(["dedup", "--fpr", "0.01", "--seed", "4", "--state"])
        .arg(&state)
        .write_stdin("a\nb\n")
        .assert()
        .success();
    let state_arg = state.to_str().unwrap();
    let out_arg = out_file.to_str().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "c\nd\n").unwrap();
    let input_arg = input.to_str().unwrap();
    // 12-bit tags cannot meet 2e-4.
    assert_one_line_error(
        &[
            "dedup", "--fpr", "2e-4", "--state", state_arg, "-o", out_arg, input_arg,
        ],
        "--fpr",
    );
    assert!(!out_file.exists(), "nothing may be written");
    assert_one_line_error(
        &[
            "dedup", "--seed", "5", "--state", state_arg, "-o", out_arg, input_arg,
        ],
        "--seed",
    );
    assert!(!out_file.exists(), "nothing may be written");
    assert_one_line_error(
        &["dedup", "--exact", "--state", state_arg, input_arg],
        "--state",
    );
}

/// A run where the filter is certain to take new records for duplicates:
/// 12-bit tags, sized for `expected` records.
fn lossy_run(expected: &str, extra: &[&str], input: &str) -> (String, String) {
    let out = koel()
        .args([
            "dedup",
            "--fpr",
            "0.01",
            "--seed",
            "11",
            "--expected",
            expected,
        ])
        .args(extra)
        .write_stdin(input.to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

#[test]
fn exact_output_is_the_exact_first_occurrence_dedup_byte_for_byte() {
    let lines = generate(200_000);
    let mut input: Vec<String> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        input.push(l.clone());
        if i % 2 == 0 {
            input.push(lines[(mix(i as u64) % (i as u64 + 1)) as usize].clone());
        }
    }
    let text = input.join("\n") + "\n";
    let want = reference(&input, |l| l).join("\n") + "\n";
    let (lossy, _) = lossy_run("2000", &["--threads", "3"], &text);
    assert!(
        lossy.len() < want.len(),
        "the filter alone must lose records here, or this test proves nothing"
    );
    for threads in ["1", "3", "4"] {
        let (got, stderr) = lossy_run(
            "2000",
            &["--exact", "--threads", threads, "--chunk-bytes", "8191"],
            &text,
        );
        assert!(
            got == want,
            "--exact on {threads} threads differs from the reference"
        );
        assert!(
            stderr.contains("false positives of the filter caught"),
            "{stderr}"
        );
    }
    // Keyed on a field: the first record of each key, whatever follows it.
    let keyed = reference(&input, |l| l.split(',').next().unwrap()).join("\n") + "\n";
    let (got, _) = lossy_run(
        "2000",
        &[
            "--exact",
            "--threads",
            "3",
            "--field",
            "1",
            "--delimiter",
            ",",
        ],
        &text,
    );
    assert!(got == keyed, "--exact --field differs from the reference");
}

#[test]
fn a_seeded_lossy_run_is_reproducible_on_any_number_of_threads() {
    let lines = generate(100_000);
    let text = lines.join("\n") + "\n";
    // Sized about right: no levels (which keys land in one depends on timing).
    let (first, _) = lossy_run("60k", &["--threads", "1"], &text);
    let want = reference(&lines, |l| l);
    assert!(
        lost(&first, &want) > 0,
        "no record lost: the test proves nothing"
    );
    for threads in ["1", "2", "3"] {
        let (again, _) = lossy_run(
            "60k",
            &["--threads", threads, "--chunk-bytes", "5000"],
            &text,
        );
        assert!(again == first, "seeded run on {threads} threads differs");
    }
}

#[test]
fn quiet_dedup_prints_the_records_and_nothing_else() {
    let run = |extra: &[&str]| {
        koel()
            .arg("dedup")
            .args(extra)
            .write_stdin("a\nb\na\n")
            .output()
            .unwrap()
    };
    let quiet = run(&["-q", "-j", "2"]);
    assert!(quiet.status.success());
    assert_eq!(quiet.stdout, b"a\nb\n");
    assert!(quiet.stderr.is_empty(), "{quiet:?}");
    let loud = run(&["--quiet", "--threads", "2"]);
    assert_eq!(loud.stdout, b"a\nb\n");
    assert!(loud.stderr.is_empty(), "{loud:?}");
    let summary = run(&["-j", "1"]);
    assert_eq!(summary.stdout, b"a\nb\n");
    assert!(String::from_utf8_lossy(&summary.stderr).starts_with("koel dedup: 3 records in"));
}

/// Adversarial: memory is promised bounded ("a few 1 MiB chunks per
/// thread plus the filter") and out of memory is an error with exit
/// status 2, but a record longer than memory (an input without a newline:
/// a binary file, a one-line JSON dump, /dev/zero) grows one chunk until
/// the allocator fails, and the process aborts (SIGABRT, status 134 from
/// the shell) with "memory allocation of N bytes failed". Here under a
/// 1 GB address-space limit. Expected: one error line and exit 2.
// Linux only: the limit must hold (macOS does not enforce RLIMIT_AS, and
// the test would then take the machine's memory).
#[cfg(target_os = "linux")]
#[test]
fn a_record_longer_than_memory_is_one_error_line_not_an_abort() {
    let bin = assert_cmd::cargo::cargo_bin("koel");
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("never.koel");
    let build = format!("build -q /dev/zero -o {}", built.display());
    for cmd in ["dedup -q /dev/zero", build.as_str()] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -v 1000000 && exec \"$0\" {cmd}"))
            .arg(&bin)
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "koel {cmd}: {:?}, stderr {stderr:?}",
            out.status
        );
        assert!(
            stderr.starts_with("koel: error: out of memory reading the input")
                && stderr.lines().count() == 1,
            "koel {cmd}: {stderr:?}"
        );
    }
}
