//! The `koel` command-line tool, as a library so that its commands can be
//! tested directly (e.g. the stress checker against a filter that loses
//! keys). The binary in `main.rs` only parses arguments and reports errors.
//!
//! Every command returns an [`Outcome`]; errors are `anyhow` chains printed
//! as one line.

pub mod advise;
pub mod build;
pub mod dedup;
pub mod filter_file;
pub mod filters;
pub mod human;
pub mod info;
pub mod keys;
pub mod latency;
pub mod output;
pub mod parse;
pub mod plot;
pub mod progress;
pub mod query;
pub mod stress;
pub mod verify;

/// How a command ended, as the process exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the command ran, and its check failed (stress saw a false
    /// negative).
    CheckFailed,
}

/// Fails early, before long work, if `path` cannot be written as an
/// output file (see [`output`]); creates and changes nothing.
///
/// # Errors
///
/// `path` is not a regular file, or its directory is not writable (one
/// line, naming it).
pub fn check_writable(path: &std::path::Path) -> anyhow::Result<()> {
    output::check(path)
}

/// `--threads`, or the number of cores.
pub fn threads(arg: Option<u32>) -> usize {
    match arg {
        Some(t) => t as usize,
        None => std::thread::available_parallelism().map_or(2, |n| n.get()),
    }
}

/// Exit status of a usage or runtime error (bad flag, missing file, ...).
pub const EXIT_ERROR: u8 = 2;

impl Outcome {
    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Outcome::Success => 0,
            Outcome::CheckFailed => 1,
        }
    }
}
