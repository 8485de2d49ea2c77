//! Helpers shared by the end-to-end tests of `koel-lab`.

#![allow(dead_code)]

use assert_cmd::Command;

/// The `koel-lab` binary of this build.
pub fn koel_lab() -> Command {
    Command::cargo_bin("koel-lab").expect("the koel-lab binary is built for tests")
}

/// Runs `koel-lab args` and asserts it failed the way bad input must: exit
/// status 2, exactly one line on stderr starting with `koel-lab: error:`
/// and containing `needle`, and no panic.
pub fn assert_one_line_error(args: &[&str], needle: &str) {
    let out = koel_lab().args(args).output().expect("koel-lab runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "koel-lab {args:?}: exit {:?}, stderr {stderr}",
        out.status.code()
    );
    assert_eq!(
        stderr.lines().count(),
        1,
        "koel-lab {args:?}: stderr is not one line: {stderr}"
    );
    assert!(
        stderr.starts_with("koel-lab: error:"),
        "koel-lab {args:?}: {stderr}"
    );
    assert!(
        stderr.contains(needle),
        "koel-lab {args:?}: stderr {stderr:?} does not mention {needle:?}"
    );
    assert!(!stderr.contains("panicked"), "koel-lab {args:?}: {stderr}");
}
