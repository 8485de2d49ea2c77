//! What the commands do to the files they write and to a closed stdout:
//! an output that is also an input, a device, a symbolic link, a reader
//! that went away; and the exit status of `info` and `verify`.

#![cfg(unix)]

mod common;

use common::{assert_one_line_error, build, koel};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;

/// `koel` as a plain `std` command, for custom standard streams.
fn std_koel() -> std::process::Command {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("koel"))
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn read(path: &Path) -> String {
    String::from_utf8(std::fs::read(path).unwrap()).unwrap()
}

/// A character device of our own (a twin of /dev/null), where we may make
/// one (as root); never a system device, which a broken build would
/// replace.
fn own_null_device(dir: &Path) -> Option<std::path::PathBuf> {
    let dev = dir.join("null");
    std::process::Command::new("mknod")
        .arg(&dev)
        .args(["c", "1", "3"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        .then_some(dev)
}

#[test]
fn dedup_can_write_over_its_own_input_as_sort_o_does() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    write(&f, "a\nb\na\nc\nb\n");
    let out = koel()
        .args(["dedup", "--seed", "1"])
        .arg(&f)
        .arg("-o")
        .arg(&f)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(read(&f), "a\nb\nc\n");
    assert!(stderr.contains("5 records in"), "{stderr}");

    // Through a symbolic link: the file it names is replaced, the link
    // stays a link.
    write(&f, "x\nx\ny\n");
    let link = dir.path().join("link.txt");
    std::os::unix::fs::symlink("f.txt", &link).unwrap();
    koel()
        .args(["dedup", "--seed", "1"])
        .arg(&f)
        .arg("-o")
        .arg(&link)
        .assert()
        .success();
    assert_eq!(read(&f), "x\ny\n");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 2, "a temporary file was left behind");
}

#[test]
fn dedup_output_keeps_the_old_file_on_error_and_its_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.txt");
    write(&out_path, "precious\n");
    std::fs::set_permissions(&out_path, std::fs::Permissions::from_mode(0o640)).unwrap();
    // A missing second input fails the run before anything is written.
    let input = dir.path().join("in.txt");
    write(&input, "a\n");
    assert_one_line_error(
        &[
            "dedup",
            input.to_str().unwrap(),
            dir.path().join("missing.txt").to_str().unwrap(),
            "-o",
            out_path.to_str().unwrap(),
        ],
        "missing.txt",
    );
    assert_eq!(read(&out_path), "precious\n");
    koel()
        .arg("dedup")
        .arg(&input)
        .arg("-o")
        .arg(&out_path)
        .assert()
        .success();
    assert_eq!(read(&out_path), "a\n");
    let mode = std::fs::metadata(&out_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

#[test]
fn dedup_refuses_a_stdout_that_is_one_of_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    write(&f, "a\nb\na\n");
    // `koel dedup f.txt >> f.txt`: reading what it appends.
    let append = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
    let out = std_koel()
        .arg("dedup")
        .arg(&f)
        .stdout(append)
        .output()
        .unwrap();
    let stderr = refused_in_one_line(&out);
    assert!(
        stderr.contains("f.txt") && stderr.contains("output"),
        "{stderr}"
    );
    assert_eq!(read(&f), "a\nb\na\n");
}

/// The stderr of `out`, asserting that the command was refused (exit 2)
/// with a one-line message.
fn refused_in_one_line(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

/// `-` is standard input, never a file of that name: with stdout
/// redirected into a file called `-`, `koel dedup -` reads its pipe.
#[test]
fn dedup_dash_reads_stdin_even_when_stdout_is_a_file_named_dash() {
    let dir = tempfile::tempdir().unwrap();
    let named_dash = dir.path().join("-");
    let out = std_koel()
        .current_dir(dir.path())
        .arg("dedup")
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::fs::File::create(&named_dash).unwrap())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(b"a\nb\na\n")?;
            child.wait_with_output()
        })
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(read(&named_dash), "a\nb\n");
}

/// `koel dedup < f.txt >> f.txt` reads what it appends, as `koel dedup
/// f.txt >> f.txt` would: refused the same way, with or without `-`.
#[cfg(unix)]
#[test]
fn dedup_refuses_a_stdout_that_is_its_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f.txt");
    write(&f, "a\nb\na\n");
    for dash in [&[][..], &["-"][..]] {
        let append = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
        let out = std_koel()
            .arg("dedup")
            .args(dash)
            .stdin(std::fs::File::open(&f).unwrap())
            .stdout(append)
            .output()
            .unwrap();
        let stderr = refused_in_one_line(&out);
        assert!(
            stderr.starts_with("koel: error: standard input is also the output (stdout)"),
            "{stderr}"
        );
        assert_eq!(read(&f), "a\nb\na\n");
    }
}

#[test]
fn dedup_writes_through_a_device_or_fifo_output() {
    let dir = tempfile::tempdir().unwrap();
    let Some(dev) = own_null_device(dir.path()) else {
        eprintln!("skipped: cannot mknod (not root)");
        return;
    };
    let input = dir.path().join("in.txt");
    write(&input, "a\nb\n");
    koel()
        .arg("dedup")
        .arg(&input)
        .arg("-o")
        .arg(&dev)
        .assert()
        .success();
    assert!(std::fs::symlink_metadata(&dev)
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn build_refuses_to_save_over_a_device_a_socket_or_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    write(&keys, "a\nb\n");
    let socket = dir.path().join("sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let mut refused = vec![socket.clone(), dir.path().to_path_buf()];
    if let Some(dev) = own_null_device(dir.path()) {
        refused.push(dev);
    }
    for out in &refused {
        assert_one_line_error(
            &[
                "build",
                "--input",
                keys.to_str().unwrap(),
                "--output",
                out.to_str().unwrap(),
            ],
            "not a regular file",
        );
    }
    assert!(std::fs::symlink_metadata(&socket)
        .unwrap()
        .file_type()
        .is_socket());
    if let Some(dev) = refused.get(2) {
        let t = std::fs::symlink_metadata(dev).unwrap().file_type();
        assert!(t.is_char_device(), "the device node was replaced");
    }
    // `stress --plot` and `dedup --state` follow the same rule.
    assert_one_line_error(
        &[
            "stress",
            "--duration",
            "10ms",
            "--items",
            "1000",
            "--plot",
            socket.to_str().unwrap(),
        ],
        "not a regular file",
    );
    assert_one_line_error(
        &[
            "dedup",
            "--state",
            dir.path().to_str().unwrap(),
            keys.to_str().unwrap(),
        ],
        "directory",
    );
}

#[test]
fn build_writes_through_a_symbolic_link() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    write(&keys, "a\nb\n");
    let real = dir.path().join("v1.koel");
    let link = dir.path().join("current.koel");
    std::os::unix::fs::symlink("v1.koel", &link).unwrap();
    build(&keys, &link);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        koel_cli::filter_file::open(&real).unwrap().snapshot().len,
        2
    );
}

/// Runs `koel args` with a stdout pipe whose reader has already gone
/// away, as `koel ... | head -0`.
fn run_with_closed_stdout(args: &[&str]) -> std::process::Output {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors `pipe` writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just created and are owned here only.
    let (reader, writer) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    drop(reader);
    let out = std_koel()
        .args(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    out
}

#[test]
fn a_closed_stdout_ends_every_command_quietly_as_sigpipe() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    write(&keys, "a\nb\nc\n");
    let file = dir.path().join("f.koel");
    build(&keys, &file);
    let (keys_s, file_s) = (keys.to_str().unwrap(), file.to_str().unwrap());
    let built = dir.path().join("g.koel");
    let built_s = built.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["info", file_s],
        vec!["verify", file_s],
        vec!["query", file_s, "a"],
        vec!["query", file_s, "nobody"],
        vec!["advise", "--items", "1M", "--fpr", "1e-3"],
        vec!["build", "--input", keys_s, "--output", built_s],
        vec!["dedup", keys_s],
        vec![
            "stress",
            "--json",
            "--duration",
            "50ms",
            "--items",
            "10000",
            "--threads",
            "2",
        ],
    ];
    for args in commands {
        let out = run_with_closed_stdout(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "koel {args:?}: {:?}, stderr {stderr}",
            out.status
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("error"),
            "koel {args:?}: {stderr}"
        );
    }
    // `build` saved its file before it printed anything.
    assert!(koel_cli::filter_file::open(&built).is_ok());
}

#[test]
fn info_and_verify_exit_1_for_a_file_that_is_not_an_intact_filter_2_for_one_they_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("notes.txt");
    write(&foreign, &"not a filter at all\n".repeat(10));
    let keys = dir.path().join("keys.txt");
    write(&keys, "a\nb\n");
    let good = dir.path().join("good.koel");
    build(&keys, &good);
    let short = dir.path().join("short.koel");
    std::fs::write(&short, &std::fs::read(&good).unwrap()[..10]).unwrap();
    for cmd in ["info", "verify"] {
        for (path, needle) in [(&foreign, "not a koel filter file"), (&short, "truncated")] {
            let out = koel().arg(cmd).arg(path).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{cmd} {path:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.contains(needle), "{cmd}: {stderr}");
        }
        // Unreadable: a directory, a missing file.
        assert_one_line_error(&[cmd, dir.path().to_str().unwrap()], "directory");
        let missing = dir.path().join("missing.koel");
        assert_one_line_error(&[cmd, missing.to_str().unwrap()], "missing.koel");
    }
}

#[test]
fn an_os_error_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.koel");
    let missing = missing.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["info", missing],
        vec!["verify", missing],
        vec!["query", missing, "x"],
        vec!["dedup", missing],
        vec!["build", "--input", missing, "--output", "x.koel"],
    ];
    let cause = std::io::Error::from(std::io::ErrorKind::NotFound).to_string();
    let os = std::io::Error::from_raw_os_error(libc::ENOENT).to_string();
    for args in cases {
        let out = koel().current_dir(dir.path()).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let times = stderr.matches(&os).count() + stderr.matches(&cause).count();
        assert_eq!(times, 1, "koel {args:?}: {stderr}");
    }
    // A directory given where a filter file is expected.
    let d = dir.path().to_str().unwrap();
    let out = koel().args(["query", d, "x"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let os = std::io::Error::from_raw_os_error(libc::EISDIR).to_string();
    assert!(stderr.matches(&os).count() <= 1, "{stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
}

/// Adversarial: a stdout that fails with an error other than a closed
/// pipe (a full disk: `koel info f.koel > report.txt`, here /dev/full)
/// must be the documented one-line `koel: error: ...` and exit status 2.
/// `query` and `dedup` do that; `info`, `verify`, `advise`, `build` and
/// `stress` panic in `println!` (exit 101, a panic message and backtrace).
#[test]
fn a_failing_stdout_is_one_error_line_and_exit_2_for_every_command() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // no /dev/full here
    };
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    write(&keys, "a\nb\nc\n");
    let file = dir.path().join("f.koel");
    build(&keys, &file);
    let (keys_s, file_s) = (keys.to_str().unwrap(), file.to_str().unwrap());
    let built = dir.path().join("g.koel");
    let built_s = built.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["query", file_s, "a"],
        vec!["dedup", keys_s],
        vec!["info", file_s],
        vec!["verify", file_s],
        vec!["advise", "--items", "1M", "--fpr", "1e-3"],
        vec!["build", keys_s, "--output", built_s],
        vec!["stress", "--duration", "0.1", "--items", "1000", "-j", "1"],
    ];
    let mut wrong = Vec::new();
    for args in &commands {
        let out = std_koel()
            .args(args)
            .stdout(full.try_clone().unwrap())
            .stderr(Stdio::piped())
            .env_remove("RUST_BACKTRACE")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let one_line = stderr.lines().count() == 1 && stderr.starts_with("koel: error: ");
        if out.status.code() != Some(2) || !one_line {
            wrong.push(format!(
                "{}: status {:?}, stderr {:?}",
                args[0],
                out.status.code(),
                stderr.lines().next()
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Adversarial: a write-protected output (mode 0444, the user's own file)
/// is replaced: `koel dedup in.txt -o ro.txt` and `koel build in.txt -o
/// ro.koel` succeed where `sort -o`, `cp` and a shell redirection refuse
/// with "Permission denied" (the temporary file is renamed over it, which
/// only needs the directory to be writable). Expected: a one-line error,
/// exit 2, the file unchanged. Runs as an unprivileged user (nobody, via
/// setpriv) when the tests run as root, since root may write any file.
#[test]
fn a_read_only_output_file_is_refused_not_replaced() {
    let Some((_, root)) = common::unprivileged_koel() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    write(&d.join("in.txt"), "a\nb\n");
    let mut unchanged = Vec::new();
    for (cmd, out) in [("dedup", "ro.txt"), ("build", "ro.koel")] {
        let target = d.join(out);
        write(&target, "protected\n");
        if root {
            std::os::unix::fs::chown(&target, Some(65534), Some(65534)).unwrap();
        }
        std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o444))
            .unwrap();
        let (mut c, _) = common::unprivileged_koel().unwrap();
        let o = c
            .current_dir(d)
            .args([cmd, "-q", "in.txt", "-o", out])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        if read_bytes(&target) != b"protected\n" || o.status.code() != Some(2) {
            unchanged.push(format!(
                "{cmd}: status {:?}, stderr {stderr:?}, file replaced: {}",
                o.status.code(),
                read_bytes(&target) != b"protected\n"
            ));
        }
    }
    assert!(unchanged.is_empty(), "{unchanged:#?}");
}

fn read_bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// A stderr that fails (`2>/dev/full`) leaves the exit status as it would
/// be: `eprintln!` panicked there (status 101) while reporting the error.
#[test]
fn a_failing_stderr_keeps_the_exit_status() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // no /dev/full here
    };
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.koel");
    let junk = dir.path().join("junk.koel");
    write(&junk, "not a filter\n");
    for (args, status) in [
        (vec!["query", missing.to_str().unwrap(), "a"], 2),
        (vec!["info", junk.to_str().unwrap()], 1),
        (vec!["dedup", "--no-such-flag"], 2),
    ] {
        let out = std_koel()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(full.try_clone().unwrap())
            .env_remove("RUST_BACKTRACE")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(status), "koel {args:?}");
    }
}

/// Help or version text that cannot be written is a failure (status 2),
/// not a silent success.
#[test]
fn help_into_a_full_stdout_fails() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // no /dev/full here
    };
    for flag in ["--help", "--version"] {
        let out = std_koel()
            .arg(flag)
            .stdout(full.try_clone().unwrap())
            .stderr(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "koel {flag}");
    }
}
