//! The `koel` command-line tool, as a library so that its commands can be
//! tested directly (e.g. the stress checker against a filter that loses
//! keys). The binary in `main.rs` only parses arguments and reports errors.
//!
//! Every command returns an [`Outcome`]; errors are `anyhow` chains printed
//! as one line.

pub mod advise;
pub mod args;
pub mod build;
pub mod chain;
pub mod dedup;
pub mod filter_file;
pub mod filters;
pub mod human;
pub mod info;
pub mod input;
pub mod keys;
pub mod latency;
pub mod output;
pub mod parse;
pub mod progress;
pub mod query;
pub mod stress;
pub mod verify;

/// How a command ended: its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success = 0,
    /// The command ran, and its check failed (e.g. stress saw a false
    /// negative).
    CheckFailed = 1,
}

/// Exit status of a usage or runtime error (bad flag, missing file, ...).
pub const EXIT_ERROR: u8 = 2;

/// A `/proc/meminfo` field (`MemTotal`, `MemAvailable`) in bytes, where
/// Linux says.
fn meminfo(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.split(':').next() == Some(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// How `program` (`koel`, `koel-lab`) ends with a command's `result`:
/// the outcome's status, or the error on one line of stderr (`{:#}`: its
/// whole context chain) and [`EXIT_ERROR`].
pub fn exit(program: &str, result: anyhow::Result<Outcome>) -> std::process::ExitCode {
    match result {
        Ok(outcome) => std::process::ExitCode::from(outcome as u8),
        Err(e) => {
            errln!("{program}: error: {e:#}");
            std::process::ExitCode::from(EXIT_ERROR)
        }
    }
}

/// How `program` (`koel`, `koel-lab`) reports a clap error: help and
/// version go to stdout as usual; a usage error becomes one line on
/// stderr (clap's first line, which names the flag and the problem).
pub fn usage_error(program: &str, e: clap::Error) -> std::process::ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // Help that cannot be written (`koel --help > /dev/full`) is
            // an error, as any other failed output.
            let printed = e.print().is_ok();
            std::process::ExitCode::from(if e.use_stderr() || !printed {
                EXIT_ERROR
            } else {
                0
            })
        }
        _ => {
            errln!(
                "{program}: error: {} (see {program} --help)",
                one_line(&e.to_string())
            );
            std::process::ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Clap's message on one line: its first line, plus the indented list that
/// follows a line ending in ':' (e.g. the missing required arguments).
fn one_line(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let mut out = first.strip_prefix("error: ").unwrap_or(first).to_string();
    if out.ends_with(':') {
        let listed: Vec<&str> = lines
            .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more"))
            .collect();
        out = format!("{} {}", out, listed.join(", "));
    }
    out
}
