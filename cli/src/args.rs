//! Options several commands share, defined once and flattened into each
//! command's own (`#[command(flatten)]`), so that they read alike
//! everywhere.

use crate::input::Inputs;
use crate::parse;
use std::path::PathBuf;

/// The filter file that `info` and `verify` read.
#[derive(clap::Args, Debug)]
pub struct FileArgs {
    /// The filter file.
    pub file: PathBuf,
}

/// How a command runs: `-j/--threads`, `-q/--quiet`, `--seed`
/// (`stress`, `dedup`, `build`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct RunArgs {
    /// Worker threads [default: the number of cores].
    #[arg(short = 'j', long = "threads", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: Option<u32>,
    /// Prints only errors and the output itself: no progress bar, no
    /// summary.
    #[arg(short, long)]
    pub quiet: bool,
    /// Hash seed [default: random].
    #[arg(long)]
    pub seed: Option<u64>,
}

impl RunArgs {
    /// `--threads`, or the number of cores.
    pub fn threads(&self) -> usize {
        let cores = || std::thread::available_parallelism().map_or(2, |n| n.get());
        self.threads.map_or_else(cores, |t| t as usize)
    }
}

/// How large a filter, at what false-positive rate (`dedup`, `build`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct SizeArgs {
    /// Distinct keys expected; sizes the filter [default: the input files' records, counted or sampled,
    /// plus 10M for stdin].
    #[arg(long, value_parser = parse::count, allow_negative_numbers = true)]
    pub expected: Option<u64>,
    /// Target false-positive rate: 1.2e-4 or more uses 16-bit tags,
    /// 5e-3 or more 12-bit tags [default: 16-bit tags].
    #[arg(long, value_parser = parse::probability, allow_negative_numbers = true)]
    pub fpr: Option<f64>,
}

impl SizeArgs {
    /// Tag width for `--fpr`: 16 (FPR ~1.2e-4 at full load) unless 12 bits
    /// are good enough with room to grow: their first table is at 2.44e-3
    /// full, and below 5e-3 that leaves the levels above too little to
    /// take 10,000 times the expected keys (`--fpr 2.5e-3` chained four
    /// filters from `--expected 1` and passed its bound); 16 without
    /// `--fpr`; an error below what a cuckoo filter reaches.
    pub fn fingerprint_bits(&self) -> anyhow::Result<u32> {
        // `parse::probability` took `--fpr` above 0 and below 1.
        let Some(fpr) = self.fpr else { return Ok(16) };
        if fpr >= 5e-3 {
            Ok(12)
        } else if fpr >= 1.2e-4 {
            Ok(16)
        } else {
            anyhow::bail!(
                "--fpr {fpr:e} is below what a cuckoo filter reaches (1.2e-4 with 16-bit tags at full load)"
            )
        }
    }

    /// `--expected`, or what `inputs` hold (see [`Inputs::expected_records`]).
    pub fn expected(&self, inputs: &Inputs) -> anyhow::Result<u64> {
        self.expected.map_or_else(|| inputs.expected_records(), Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fpr_picks_the_layout() {
        let bits = |fpr| {
            SizeArgs {
                expected: None,
                fpr: Some(fpr),
            }
            .fingerprint_bits()
        };
        assert_eq!(bits(0.01).unwrap(), 12);
        assert_eq!(bits(5e-3).unwrap(), 12);
        assert_eq!(bits(2.5e-3).unwrap(), 16);
        assert_eq!(bits(1e-3).unwrap(), 16);
        for bad in [1e-6, 0.0, f64::NAN] {
            assert!(bits(bad).is_err(), "{bad}");
        }
    }
}
