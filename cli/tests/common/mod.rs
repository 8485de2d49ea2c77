//! Helpers shared by the end-to-end tests.

#![allow(dead_code)]

use assert_cmd::Command;

/// The `koel` binary of this build.
pub fn koel() -> Command {
    Command::cargo_bin("koel").expect("the koel binary is built for tests")
}

/// The summary's estimate of false-positive drops.
pub fn estimated_fp(stderr: &str) -> f64 {
    let line = stderr
        .lines()
        .find(|l| l.contains("estimated false-positive drops:"))
        .unwrap_or_else(|| panic!("no estimate in {stderr}"));
    line.split(':')
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Records of `want` missing from `got` (which must be an in-order
/// subsequence of `want`).
pub fn lost<W: AsRef<str>>(got: &str, want: &[W]) -> usize {
    let got: Vec<&str> = got.lines().collect();
    let mut w = want.iter();
    for g in &got {
        assert!(
            w.by_ref().any(|x| x.as_ref() == *g),
            "output record {g:?} is not in the reference, or out of order"
        );
    }
    want.len() - got.len()
}

/// Runs `koel args` and asserts it failed the way bad input must: exit
/// status 2, exactly one line on stderr starting with `koel: error:` and
/// containing `needle`, and no panic.
pub fn assert_one_line_error(args: &[&str], needle: &str) {
    let out = koel().args(args).output().expect("koel runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "koel {args:?}: exit {:?}, stderr {stderr}",
        out.status.code()
    );
    assert_eq!(
        stderr.lines().count(),
        1,
        "koel {args:?}: stderr is not one line: {stderr}"
    );
    assert!(
        stderr.starts_with("koel: error:"),
        "koel {args:?}: {stderr}"
    );
    assert!(
        stderr.contains(needle),
        "koel {args:?}: stderr {stderr:?} does not mention {needle:?}"
    );
    assert!(!stderr.contains("panicked"), "koel {args:?}: {stderr}");
}

/// Runs `koel build --input KEYS --output OUT` and asserts it succeeded.
pub fn build(keys: &std::path::Path, out: &std::path::Path) -> assert_cmd::assert::Assert {
    koel()
        .args(["build", "--input"])
        .arg(keys)
        .arg("--output")
        .arg(out)
        .assert()
        .success()
}

/// Runs `koel args` and asserts a failed check: exit status 1, one line
/// on stderr containing `needle`, and no panic.
pub fn assert_check_fails(args: &[&std::ffi::OsStr], needle: &str) {
    let out = koel().args(args).output().expect("koel runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// How many of `n` keys never inserted (`nobody-0`, `nobody-1`, ...) `koel
/// query FILE` answers "maybe" for, given on stdin.
pub fn query_maybes(file: &std::path::Path, n: usize) -> usize {
    let absent: String = (0..n).map(|i| format!("nobody-{i}\n")).collect();
    let out = koel()
        .arg("query")
        .arg(file)
        .write_stdin(absent)
        .output()
        .expect("koel runs");
    String::from_utf8(out.stdout)
        .expect("query prints UTF-8")
        .lines()
        .filter(|l| l.starts_with("maybe"))
        .count()
}

/// `koel dedup --state STATE INPUT` prints nothing: the state already
/// holds every key of `input` (no false negative across runs).
pub fn assert_state_holds_all(state: &std::path::Path, input: &std::path::Path) {
    koel()
        .args(["dedup", "--state"])
        .arg(state)
        .arg(input)
        .assert()
        .success()
        .stdout("");
}

/// `koel query FILE KEY` answers "maybe" for each of `keys`.
pub fn assert_query_maybe(file: &std::path::Path, keys: &[&str]) {
    for key in keys {
        koel()
            .arg("query")
            .arg(file)
            .arg(key)
            .assert()
            .code(0)
            .stdout(format!("maybe\t{key}\n"));
    }
}

/// A `koel` command that runs unprivileged, with whether it runs as
/// `nobody` (uid and gid 65534): through setpriv when the tests run as root,
/// since root may write any file; as this user otherwise. `None` as root
/// without setpriv.
#[cfg(unix)]
pub fn unprivileged_koel() -> Option<(std::process::Command, bool)> {
    let bin = assert_cmd::cargo::cargo_bin("koel");
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Some((std::process::Command::new(bin), false));
    }
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    if !setpriv.exists() {
        return None;
    }
    let mut c = std::process::Command::new(setpriv);
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(bin);
    Some((c, true))
}
