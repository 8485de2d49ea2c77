//! `koel-lab`: the research harness's command line.

use clap::{Parser, Subcommand};
use koel_cli::{exit, usage_error};
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
        Err(e) => return usage_error("koel-lab", e),
    };
    let result = match cli.command {
        Command::Bench(args) => bench::main(args),
    };
    exit("koel-lab", result)
}
