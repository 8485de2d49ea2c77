//! `koel`: concurrent approximate set membership from the command line.

use clap::{Parser, Subcommand};
use koel_cli::{advise, build, dedup, exit, info, query, stress, usage_error, verify};
use std::process::ExitCode;

const EXAMPLES: &str = "\
Examples:
  koel stress                         # 10-second concurrency stress test with a correctness check
  koel dedup events.log > unique.log  # drop repeated records, keep input order
  koel advise --items 10M --fpr 1e-3 --deletes   # which filter, how big
  koel build keys.txt -o keys.koel && koel query keys.koel some-key
  koel help stress                    # the options of one command

Exit status: 0 on success, 1 when a check fails (stress saw a false negative;
info or verify found a file that is not an intact filter; advise cannot meet
the requirements; query of one key: absent), 2 on a usage or runtime error
(bad option, missing or unreadable file, unwritable output). A reader that
goes away (| head) ends a command quietly, as SIGPIPE ends cat (141 in sh).

Output files are replaced atomically (temporary file, rename): dedup -o may
name one of its inputs (as sort -o), build -o may not (the filter would
replace the key list), a failed command leaves the old file, and anything but
a regular file is refused (dedup -o also writes into a FIFO or device).";

/// Concurrent approximate set membership (cuckoo filter) from the command line.
#[derive(Parser, Debug)]
#[command(name = "koel", version, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs an operation mix on N threads against one shared filter, checks
    /// for false negatives, reports throughput and latency percentiles.
    Stress(stress::Args),
    /// Writes each record the first time its key is seen, in input order,
    /// on N threads sharing one cuckoo filter.
    Dedup(dedup::Args),
    /// Builds a filter file from a list of keys.
    Build(build::Args),
    /// Looks keys up in a filter file: maybe (present) or absent.
    Query(query::Args),
    /// Shows what a filter file holds: format version, hash, growth settings, items, load, memory, FPR.
    #[command(after_help = info::EXAMPLES)]
    Info(koel_cli::args::FileArgs),
    /// Checks a filter file's checksum and invariants.
    #[command(after_help = verify::EXAMPLES)]
    Verify(koel_cli::args::FileArgs),
    /// Recommends a filter (kind, size, layout) for a set's requirements.
    Advise(advise::Args),
}

fn main() -> ExitCode {
    end_quietly_when_stdout_closes();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error("koel", e),
    };
    let result = match cli.command {
        Command::Stress(args) => stress::main(args),
        Command::Dedup(args) => dedup::main(args),
        Command::Build(args) => build::main(args),
        Command::Query(args) => query::main(args),
        Command::Info(args) => info::main(args),
        Command::Verify(args) => verify::main(args),
        Command::Advise(args) => advise::main(args),
    };
    exit("koel", result)
}

/// A reader that goes away (`koel info f.koel | head -1`) ends every
/// command the way it ends `cat` or `grep`: killed by SIGPIPE at the next
/// write, with no message (status 141 in a shell). Rust ignores SIGPIPE by
/// default, which turns that write into an error and `println!` into a
/// panic. Files are always written before stdout, and only by an atomic
/// rename, so this never leaves a half-written output file.
#[cfg(unix)]
fn end_quietly_when_stdout_closes() {
    // SAFETY: restoring a signal's default disposition at the start of
    // `main`, before any thread is spawned; no handler runs our code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn end_quietly_when_stdout_closes() {}
