//! The filter-file commands end to end: build, query, info, verify, and
//! dedup --state; damaged and foreign files are one error line.

mod common;

use common::{
    assert_check_fails, assert_one_line_error, assert_query_maybe, assert_state_holds_all, build,
    koel, query_maybes,
};
use std::path::Path;

/// Builds a filter file of `user-1..=n` in `dir`.
fn build_users(dir: &Path, n: u32) -> std::path::PathBuf {
    let keys: String = (1..=n).map(|i| format!("user-{i}\n")).collect();
    let input = dir.join("users.txt");
    std::fs::write(&input, keys).unwrap();
    let file = dir.join("users.koel");
    build(&input, &file).stdout(predicates::str::contains(format!(
        "{} keys read",
        koel_cli::human::HumanCount(u64::from(n))
    )));
    file
}

#[test]
fn every_built_key_is_found_and_absent_keys_mostly_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = build_users(dir.path(), 20_000);
    let present: String = (1..=20_000).map(|i| format!("user-{i}\n")).collect();
    let out = koel()
        .arg("query")
        .arg(&file)
        .write_stdin(present)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 20_000);
    assert!(
        text.lines().all(|l| l.starts_with("maybe\tuser-")),
        "a built key was reported absent"
    );
    let maybes = query_maybes(&file, 20_000);
    assert!(
        maybes < 20,
        "{maybes} false positives in 20,000 absent keys"
    );
}

#[test]
fn a_single_key_query_answers_with_its_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let file = build_users(dir.path(), 100);
    koel()
        .arg("query")
        .arg(&file)
        .arg("user-7")
        .assert()
        .code(0)
        .stdout("maybe\tuser-7\n");
    koel()
        .arg("query")
        .arg(&file)
        .arg("stranger")
        .assert()
        .code(1)
        .stdout("absent\tstranger\n");
    // Several keys: 0 whatever the answers.
    koel()
        .arg("query")
        .arg(&file)
        .args(["stranger", "user-1"])
        .assert()
        .code(0);
}

/// `koel info` and `koel verify` accept `file`, an intact cuckoo filter
/// of format `version` hashed with `hash`; info shows each of `more` too.
fn info_and_verify_accept(file: &Path, version: u16, hash: &str, more: &[&str]) {
    let info = koel().arg("info").arg(file).assert().success();
    let stdout = String::from_utf8_lossy(&info.get_output().stdout).into_owned();
    let kind = format!("kind         cuckoo, format version {version}");
    let hash = format!(", hash {hash}");
    for needle in [&kind[..], &hash, "growth       doubles when full"]
        .iter()
        .chain(more)
    {
        assert!(stdout.contains(needle), "{stdout} lacks {needle:?}");
    }
    koel()
        .arg("verify")
        .arg(file)
        .assert()
        .success()
        .stdout(predicates::str::contains(format!(
            "OK (cuckoo filter, format version {version},"
        )));
}

#[test]
fn info_and_verify_describe_an_intact_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = build_users(dir.path(), 5_000);
    let more = [
        "checksum     valid",
        "hash probe   matches this build",
        "fpr",
    ];
    info_and_verify_accept(&file, 3, "fold", &more);
}

#[test]
fn info_and_verify_name_a_version_1_file_and_its_hash() {
    // Written by the last format version 1 build (koel's golden files).
    let v1 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/v1_cuckoo12_fixed.koel");
    info_and_verify_accept(&v1, 1, "ahash", &[]);
}

/// A version 2 file (XXH3) is named as such, and a dedup run that carries
/// it on (through doublings) saves it as version 2 still, holding every
/// key: its filter kept its hash and addressing.
#[test]
fn a_version_2_file_is_named_and_stays_version_2() {
    let v2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/v2_cuckoo16.koel");
    info_and_verify_accept(&v2, 2, "xxh3", &["hash probe   matches this build"]);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("seen.koel");
    std::fs::copy(&v2, &state).unwrap();
    let input = dir.path().join("in.txt");
    let keys: String = (0..3_000).map(|i| format!("key-{i}\n")).collect();
    std::fs::write(&input, keys).unwrap();
    let out = koel()
        .args(["dedup", "--state"])
        .arg(&state)
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    // New keys, but for the few false positives of a filter growing
    // under a 1% bound.
    let new = String::from_utf8(out.stdout).unwrap().lines().count();
    assert!((2_900..=3_000).contains(&new), "{new} of 3,000 keys new");
    info_and_verify_accept(&state, 2, "xxh3", &["(generation 4)"]);
    assert_state_holds_all(&state, &input);
    assert_query_maybe(&state, &["key-0", "key-2999"]);
}

#[test]
fn damaged_truncated_and_foreign_files_are_reported_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = build_users(dir.path(), 5_000);
    let bytes = std::fs::read(&file).unwrap();

    let flipped = dir.path().join("flipped.koel");
    let mut b = bytes.clone();
    b[bytes.len() / 2] ^= 0x40;
    std::fs::write(&flipped, &b).unwrap();
    assert_check_fails(&["verify".as_ref(), flipped.as_os_str()], "checksum");
    assert_check_fails(&["info".as_ref(), flipped.as_os_str()], "checksum");
    assert_one_line_error(&["query", flipped.to_str().unwrap(), "user-1"], "damaged");
    assert_one_line_error(
        &["dedup", "--state", flipped.to_str().unwrap(), "/dev/null"],
        "flipped.koel",
    );

    let truncated = dir.path().join("truncated.koel");
    std::fs::write(&truncated, &bytes[..bytes.len() - 100]).unwrap();
    assert_check_fails(&["verify".as_ref(), truncated.as_os_str()], "truncated");
    assert_one_line_error(
        &["query", truncated.to_str().unwrap(), "x"],
        "truncated.koel",
    );

    let header_only = dir.path().join("short.koel");
    std::fs::write(&header_only, &bytes[..10]).unwrap();
    assert_check_fails(&["verify".as_ref(), header_only.as_os_str()], "short.koel");
    assert_check_fails(&["info".as_ref(), header_only.as_os_str()], "short.koel");

    let foreign = dir.path().join("notes.txt");
    std::fs::write(&foreign, "just some text, not a filter at all\n".repeat(10)).unwrap();
    assert_check_fails(
        &["verify".as_ref(), foreign.as_os_str()],
        "not a koel filter file",
    );
    assert_one_line_error(
        &["query", foreign.to_str().unwrap(), "x"],
        "not a koel filter file",
    );
    assert_check_fails(
        &["info".as_ref(), foreign.as_os_str()],
        "not a koel filter file",
    );

    let missing = dir.path().join("missing.koel");
    for cmd in ["verify", "info", "query"] {
        assert_one_line_error(&[cmd, missing.to_str().unwrap()], "missing.koel");
    }
}

#[test]
fn build_rejects_bad_input_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.koel");
    let out = out.to_str().unwrap();
    assert_one_line_error(
        &["build", "--input", "/no/such/keys.txt", "--output", out],
        "keys.txt",
    );
    assert_one_line_error(
        &[
            "build",
            "--input",
            "/dev/null",
            "--output",
            "/no/such/dir/x.koel",
        ],
        "/no/such/dir",
    );
    assert_one_line_error(&["build", "--input", "/dev/null"], "--output");
    assert_one_line_error(
        &[
            "build",
            "--input",
            "/dev/null",
            "--output",
            out,
            "--fpr",
            "0",
        ],
        "--fpr",
    );
    assert_one_line_error(
        &[
            "build",
            "--input",
            "/dev/null",
            "--output",
            out,
            "--expected",
            "1000G",
        ],
        "too large",
    );
    assert!(!Path::new(out).exists(), "a failed build leaves no file");
}

#[test]
fn dedup_state_carries_the_seen_keys_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("seen.koel");
    koel()
        .arg("dedup")
        .arg("--state")
        .arg(&state)
        .write_stdin("a\nb\na\n")
        .assert()
        .success()
        .stdout("a\nb\n");
    assert!(state.exists(), "the state is saved");
    koel()
        .arg("dedup")
        .arg("--state")
        .arg(&state)
        .write_stdin("b\nc\nc\na\nd\n")
        .assert()
        .success()
        .stdout("c\nd\n");
    // And the saved state answers queries for every key seen.
    for key in ["a", "b", "c", "d"] {
        koel().arg("query").arg(&state).arg(key).assert().code(0);
    }
}

#[test]
fn dedup_state_in_an_unwritable_place_fails_before_reading() {
    assert_one_line_error(
        &["dedup", "--state", "/no/such/dir/seen.koel", "/dev/null"],
        "/no/such/dir",
    );
}

#[test]
fn bloom_files_build_query_info_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("keys.txt");
    std::fs::write(
        &input,
        (0..10_000).map(|i| format!("k{i}\n")).collect::<String>(),
    )
    .unwrap();
    let file = dir.path().join("keys.koel");
    koel()
        .args(["build", "--kind", "bloom", "--fpr", "1e-3", "--input"])
        .arg(&input)
        .arg("-o")
        .arg(&file)
        .assert()
        .success();
    let all: String = (0..10_000).map(|i| format!("k{i}\n")).collect();
    let out = koel()
        .arg("query")
        .arg(&file)
        .write_stdin(all)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().all(|l| l.starts_with("maybe\t")),
        "a built key was reported absent"
    );
    koel()
        .arg("info")
        .arg(&file)
        .assert()
        .success()
        .stdout(predicates::str::contains("kind         bloom"));
    koel().arg("verify").arg(&file).assert().success();
    // A Bloom file is not a dedup state (that needs a cuckoo filter).
    assert_one_line_error(
        &["dedup", "--state", file.to_str().unwrap(), "/dev/null"],
        "bloom",
    );
}

#[test]
fn keys_with_crlf_line_endings_are_found_by_build_and_query_alike() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("keys.txt");
    std::fs::write(&input, "alice\r\nbob\r\ncarol\r\n").unwrap();
    let file = dir.path().join("k.koel");
    koel()
        .args(["build", "--seed", "1", "--input"])
        .arg(&input)
        .arg("--output")
        .arg(&file)
        .assert()
        .success();
    // A key on the command line, as typed.
    koel()
        .arg("query")
        .arg(&file)
        .arg("bob")
        .assert()
        .success()
        .stdout("maybe\tbob\n");
    // Keys on stdin with CRLF endings: one trailing CR is stripped.
    koel()
        .arg("query")
        .arg(&file)
        .write_stdin("alice\r\ncarol\r\n")
        .assert()
        .success()
        .stdout("maybe\talice\nmaybe\tcarol\n");
}

#[test]
fn build_takes_its_input_as_dedup_does_files_then_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    std::fs::write(&a, "alice\nbob\n").unwrap();
    std::fs::write(&b, "carol\n").unwrap();
    let file = dir.path().join("k.koel");
    // FILE... as `dedup` takes them, "-" for stdin among them.
    koel()
        .arg("build")
        .arg(&a)
        .arg("-")
        .arg(&b)
        .arg("-o")
        .arg(&file)
        .write_stdin("dave\n")
        .assert()
        .success()
        .stdout(predicates::str::contains("4 keys read"));
    koel()
        .arg("query")
        .arg(&file)
        .args(["alice", "bob", "carol", "dave"])
        .assert()
        .success()
        .stdout("maybe\talice\nmaybe\tbob\nmaybe\tcarol\nmaybe\tdave\n");
    // The older spelling still works, repeated; mixed with FILE it is
    // ambiguous (which comes first?) and refused.
    koel()
        .arg("build")
        .arg("--input")
        .arg(&a)
        .arg("-i")
        .arg(&b)
        .arg("-o")
        .arg(&file)
        .assert()
        .success()
        .stdout(predicates::str::contains("3 keys read"));
    assert_one_line_error(
        &[
            "build",
            a.to_str().unwrap(),
            "--input",
            b.to_str().unwrap(),
            "-o",
            file.to_str().unwrap(),
        ],
        "--input",
    );
}

#[test]
fn quiet_build_prints_nothing_and_writes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("k.koel");
    let out = koel()
        .args(["build", "-q", "-j", "2", "-o"])
        .arg(&file)
        .write_stdin("a\nb\n")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    koel().arg("query").arg(&file).arg("b").assert().success();
}

/// A filter grown past its tag bits (three levels): `info` shows each
/// level, `verify` counts them and every item, `query` finds every key.
#[test]
fn info_verify_and_query_read_a_filter_with_levels() {
    use koel::Filter;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("levels.koel");
    // Doubling levels: files hold region levels only from format version
    // 4 on.
    let f = koel::CuckooFilter::builder()
        .capacity(100)
        .max_false_positive_rate(1.5e-4)
        .seed(17)
        .doubling_levels()
        .build()
        .unwrap();
    let mut n = 0u32;
    while f.stats().levels < 3 {
        n += 1;
        f.insert_hash(f.hash_bytes(format!("user-{n}").as_bytes()))
            .unwrap();
    }
    f.save(&file).unwrap();
    let items = koel_cli::human::HumanCount(n as u64).to_string();
    info_and_verify_accept(
        &file,
        3,
        "fold",
        &[
            "levels       3: grown past its tag bits, 2 levels of 21-bit tags above the first",
            "level 1      21-bit tags x 3",
            "level 2      21-bit tags x 3",
            &format!("items        {items} "),
            "checksum     valid",
        ],
    );
    koel()
        .arg("verify")
        .arg(&file)
        .assert()
        .success()
        .stdout(predicates::str::contains(format!(
            "OK (cuckoo filter, format version 3, {items} items in 3 levels, checksums valid, hash probes match)"
        )));
    let present: String = (1..=n).map(|i| format!("user-{i}\n")).collect();
    let out = koel()
        .arg("query")
        .arg(&file)
        .write_stdin(present)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), n as usize);
    assert!(
        text.lines().all(|l| l.starts_with("maybe\t")),
        "a key was lost"
    );
    // A damaged upper level fails both checks.
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() - 100;
    bytes[at] ^= 0x10;
    let damaged = dir.path().join("damaged.koel");
    std::fs::write(&damaged, &bytes).unwrap();
    assert_check_fails(&["verify".as_ref(), damaged.as_os_str()], "checksum");
    assert_check_fails(&["info".as_ref(), damaged.as_os_str()], "checksum");
}

/// Adversarial: `koel build keys.txt -o keys.txt` (a typo for keys.koel)
/// replaces the user's key list with a binary filter, exit 0: the keys are
/// gone for good. A filter is no refinement of its input (unlike `dedup -o
/// f f`, which is `sort -o`), and `dedup` already refuses `-o` naming its
/// `--state`; `build` should refuse an output that is one of its inputs,
/// with one error line, and leave the file as it was.
#[test]
fn build_refuses_to_write_its_filter_over_one_of_its_input_files() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, "alice\nbob\n").unwrap();
    let out = koel()
        .arg("build")
        .arg(&keys)
        .arg("-o")
        .arg(&keys)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        std::fs::read(&keys).unwrap() == b"alice\nbob\n",
        "the key list was replaced (status {:?}, stderr {stderr:?})",
        out.status.code()
    );
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("koel: error: ") && stderr.lines().count() == 1,
        "{stderr}"
    );
}

/// Adversarial: a `--state` that does not exist yet in an unwritable
/// directory is refused before any record is written; one that exists
/// there (readable, but the directory refuses the atomic replacement) is
/// not checked: every new record goes to stdout, then the save fails
/// (exit 2) and the state stays old, so the next run emits the same
/// records again. Expected: refused up front, as for a new state.
/// Runs as nobody (via setpriv) when the tests run as root.
#[cfg(unix)]
#[test]
fn dedup_with_an_existing_state_it_cannot_save_fails_before_writing_records() {
    use std::os::unix::fs::PermissionsExt;
    let Some((mut c, root)) = common::unprivileged_koel() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = d.join("seen.koel");
    koel()
        .args(["dedup", "-q", "--state"])
        .arg(&state)
        .write_stdin("old\n")
        .assert()
        .success();
    let before = std::fs::read(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o644)).unwrap();
    // The directory: writable by root (the owner) only; as a non-root
    // user, not writable by us.
    if !root {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let mut child = c
        .args(["dedup", "-q", "--state"])
        .arg(&state)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        // A refusal may come before koel reads stdin: then the pipe is
        // closed, and the write fails (which is fine).
        let _ = child.stdin.take().unwrap().write_all(b"old\nnew1\nnew2\n");
    }
    let out = child.wait_with_output().unwrap();
    if !root {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(std::fs::read(&state).unwrap(), before, "the state changed");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "records were written although the state cannot be saved ({stderr})"
    );
}

/// A key line of `build` may be any bytes; the same key on `query`'s
/// command line is found (it was refused as invalid UTF-8).
#[cfg(unix)]
#[test]
fn a_non_utf8_key_on_the_command_line_is_found() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.bin");
    std::fs::write(&keys, b"caf\xe9\nplain\n").unwrap();
    let file = dir.path().join("f.koel");
    build(&keys, &file);
    koel()
        .arg("query")
        .arg(&file)
        .arg(std::ffi::OsStr::from_bytes(b"caf\xe9"))
        .assert()
        .success()
        .stdout(predicates::ord::eq(&b"maybe\tcaf\xe9\n"[..]));
}

/// The same with the key list on stdin (no input path, or `-`).
#[cfg(unix)]
#[test]
fn build_refuses_to_write_its_filter_over_its_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, "alice\nbob\n").unwrap();
    for dash in [&[][..], &["-"][..]] {
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("koel"))
            .arg("build")
            .args(dash)
            .arg("-o")
            .arg(&keys)
            .stdin(std::fs::File::open(&keys).unwrap())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(std::fs::read(&keys).unwrap(), b"alice\nbob\n", "{stderr}");
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.starts_with("koel: error: standard input is also the output"),
            "{stderr}"
        );
    }
}
