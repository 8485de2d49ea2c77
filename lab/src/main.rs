//! `koel-lab`: the research harness's command line.

use clap::{Parser, Subcommand};
use koel_cli::EXIT_ERROR;
use koel_lab::bench;
use std::process::ExitCode;

/// koel's research harness: measurements for the design study.
#[derive(Parser, Debug)]
#[command(name = "koel-lab", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs the design study's test matrix (lookups, FPR, inserts, deletes,
    /// load curve, threads, save/load, growth, key distributions) and writes a
    /// Markdown report with SVG plots.
    Bench(bench::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let result = match cli.command {
        Command::Bench(args) => bench::main(args),
    };
    match result {
        Ok(outcome) => ExitCode::from(outcome.code()),
        Err(e) => {
            // `{:#}` prints the whole context chain on one line.
            eprintln!("koel-lab: error: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Help and version go to stdout as usual; a usage error becomes one line on
/// stderr (clap's first line, which names the flag and the problem).
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(if e.use_stderr() { EXIT_ERROR } else { 0 })
        }
        _ => {
            let text = e.to_string();
            let first = text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("koel-lab: error: {first} (see koel-lab --help)");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
