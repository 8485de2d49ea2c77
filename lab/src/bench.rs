//! `koel-lab bench`: the design study's test matrix in one command, written as
//! a Markdown report with SVG plots (and the raw numbers as JSON).
//!
//! Each part of the matrix is a module: [`lookups`] (positive and negative
//! lookups, FPR), [`inserts`], [`deletes`] (with the same-tag collision
//! case), [`load_curve`] (insert failures from 0 to 100% load),
//! [`concurrency`] (throughput and CAS retries by thread count), [`restart`]
//! (save and load: time, checksum, identical answers), [`growth`]
//! (the doubling window) and [`distributions`] (key shapes). [`markdown`]
//! writes the report and [`charts`] the plots.

pub mod charts;
pub mod common;
pub mod concurrency;
pub mod deletes;
pub mod distributions;
pub mod growth;
pub mod inserts;
pub mod load_curve;
pub mod lookups;
pub mod markdown;
pub mod restart;

use anyhow::{bail, Context};
use koel_cli::{parse, progress, Outcome};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const EXAMPLES: &str = "\
Examples:
  koel-lab bench                      # the full matrix, 1M items, a few minutes; writes koel-bench/report.md
  koel-lab bench --quick --out /tmp/b # a small run (seconds), same report and plots
  koel-lab bench --items 4M --threads 1,2,4,8

Exit status: 0 if every correctness check held (no false negative, FPR
within bounds of the estimate, deletes exact), 1 if one failed (the report
says which), 2 on a usage or runtime error.";

/// Options of `koel-lab bench`.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    /// Directory for report.md, results.json and the SVG plots (created if
    /// missing; files of an earlier run are overwritten).
    #[arg(long, default_value = "koel-bench", value_name = "DIR")]
    pub out: PathBuf,
    /// Items per filter (k, M suffixes allowed) [default: 1M, or 20k with
    /// --quick].
    #[arg(long, value_parser = parse::count, allow_negative_numbers = true)]
    pub items: Option<u64>,
    /// A small, fast run (seconds): fewer items, shorter concurrency runs.
    #[arg(long)]
    pub quick: bool,
    /// Thread counts of the concurrency runs, comma-separated.
    #[arg(long, default_value = "1,2,4", value_name = "LIST")]
    pub threads: ThreadList,
    /// Seed of the keys and hashes, for a reproducible run.
    #[arg(long)]
    pub seed: Option<u64>,
}

/// Thread counts from `--threads 1,2,4`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadList(pub Vec<usize>);

impl std::str::FromStr for ThreadList {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let mut list = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let n: usize = part
                .parse()
                .ok()
                .filter(|n| (1..=256).contains(n))
                .with_context(|| format!("thread count {part:?} is not a number from 1 to 256"))?;
            if !list.contains(&n) {
                list.push(n);
            }
        }
        if list.is_empty() {
            bail!("--threads {s:?} lists no thread count (e.g. 1,2,4)");
        }
        list.sort_unstable();
        Ok(ThreadList(list))
    }
}

/// Most items a run may use: the key-distribution part keeps string keys
/// of up to 72 bytes, plus a slice per key, for this many items and as many
/// absent keys (about 2.5 GiB at this bound).
pub const MAX_ITEMS: u64 = 16_000_000;

/// Sizes and lengths of one run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Config {
    /// Items per filter.
    pub items: u64,
    /// Never-inserted keys looked up for each FPR measurement.
    pub negatives: u64,
    /// Same-tag key pairs tested.
    pub same_tag_pairs: u64,
    /// Thread counts of the concurrency runs.
    pub threads: Vec<usize>,
    /// Length of each concurrency run.
    #[serde(serialize_with = "secs")]
    pub concurrency_duration: Duration,
    /// Key and hash seed.
    pub seed: u64,
    /// Whether this is a `--quick` run.
    pub quick: bool,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl Config {
    /// The configuration `args` ask for.
    ///
    /// # Errors
    ///
    /// Too many or too few items.
    pub fn from_args(args: &Args) -> anyhow::Result<Self> {
        let items = args
            .items
            .unwrap_or(if args.quick { 20_000 } else { 1_000_000 });
        if items > MAX_ITEMS {
            bail!("--items {items} is too many for koel-lab bench: at most {MAX_ITEMS}");
        }
        if items < 1000 {
            bail!("--items {items} is too few to measure anything: at least 1000");
        }
        Ok(Config {
            items,
            negatives: if args.quick {
                100_000
            } else {
                items.max(1_000_000)
            },
            same_tag_pairs: if args.quick { 100 } else { 1000 },
            threads: args.threads.0.clone(),
            concurrency_duration: Duration::from_millis(if args.quick { 150 } else { 1000 }),
            seed: args.seed.unwrap_or_else(koel_cli::keys::random_seed),
            quick: args.quick,
        })
    }
}

/// Everything one run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchResults {
    /// The run's configuration.
    pub config: Config,
    /// Cores the OS reports.
    pub cores: usize,
    /// The 1-minute load average when the run started (Linux only): above
    /// the core count, other processes took CPU time from the run.
    pub load_average: Option<f64>,
    /// Median cost of the clock read pair around each timed operation.
    pub clock_overhead_ns: u64,
    /// Rows 1 and 2.
    pub lookups: Vec<lookups::LookupRow>,
    /// Row 3.
    pub inserts: Vec<inserts::InsertRow>,
    /// Row 4.
    pub deletes: Vec<deletes::DeleteRow>,
    /// Row 5.
    pub load_curves: Vec<load_curve::LoadCurve>,
    /// Row 6.
    pub concurrency: Vec<concurrency::ConcurrencyRow>,
    /// Row 7.
    pub restart: Vec<restart::RestartRow>,
    /// Row 8.
    pub growth: Vec<growth::GrowthRow>,
    /// Row 9.
    pub distributions: Vec<distributions::DistributionRow>,
    /// Seconds each part took, in run order.
    pub section_secs: Vec<(String, f64)>,
}

impl BenchResults {
    /// Every correctness check that failed, as a sentence each (empty: all
    /// held).
    pub fn failed_checks(&self) -> Vec<String> {
        let mut failed = Vec::new();
        for r in &self.lookups {
            if r.false_negatives > 0 {
                failed.push(format!(
                    "lookups {}: {} false negatives",
                    r.layout, r.false_negatives
                ));
            }
            if !r.fpr.within_bound {
                failed.push(format!(
                    "lookups {}: measured FPR {:.2e} is outside the bound of the estimate {:.2e}",
                    r.layout, r.fpr.measured, r.fpr.estimate
                ));
            }
        }
        for r in &self.inserts {
            if r.failed > 0 {
                failed.push(format!(
                    "inserts {}: {} inserts failed below rated capacity",
                    r.layout, r.failed
                ));
            }
        }
        for r in &self.deletes {
            let st = &r.same_tag;
            if r.success_rate < 1.0 || r.false_negatives > 0 || !r.len_matches {
                failed.push(format!(
                    "deletes {}: success rate {}, {} false negatives, len matches: {}",
                    r.layout, r.success_rate, r.false_negatives, r.len_matches
                ));
            }
            if st.pairs == 0
                || st.first_remove_ok != st.pairs
                || st.other_still_visible != st.pairs
                || st.both_gone_after_second_remove != st.pairs
            {
                failed.push(format!(
                    "deletes {}: same-tag case failed: {st:?}",
                    r.layout
                ));
            }
        }
        for r in &self.concurrency {
            if r.false_negatives > 0 {
                failed.push(format!(
                    "concurrency {} {} x{}: {} false negatives",
                    r.layout, r.mix, r.threads, r.false_negatives
                ));
            }
        }
        for r in &self.restart {
            if r.mismatches > 0 || !r.checksum_valid || !r.corruption_refused {
                failed.push(format!(
                    "restart {}: {} answers changed, checksum valid: {}, corrupted copy refused: {}",
                    r.layout, r.mismatches, r.checksum_valid, r.corruption_refused
                ));
            }
        }
        for r in &self.growth {
            if r.false_negatives > 0 || r.failed_inserts > 0 {
                failed.push(format!(
                    "growth {}: {} false negatives, {} failed inserts",
                    r.layout, r.false_negatives, r.failed_inserts
                ));
            }
        }
        for r in &self.distributions {
            if r.false_negatives > 0 || !r.fpr.within_bound {
                failed.push(format!(
                    "distribution {}: {} false negatives, FPR {:.2e} vs estimate {:.2e}",
                    r.name, r.false_negatives, r.fpr.measured, r.fpr.estimate
                ));
            }
        }
        failed
    }
}

/// Runs every part of the matrix.
///
/// # Errors
///
/// A filter or key buffer cannot be allocated, or a part cannot start.
/// Save/load files go to `scratch` (and are removed).
pub fn run(config: Config, scratch: &Path) -> anyhow::Result<BenchResults> {
    let load_average = load_average();
    let bar = progress::bar(Some(8), "{spinner} bench [{bar:20}] {pos}/{len} {msg}");
    let mut section_secs = Vec::new();
    let mut section = |name: &str| {
        bar.set_message(name.to_string());
        section_secs.push((name.to_string(), Instant::now()));
    };
    section("lookups");
    let lookups = lookups::run(&config)?;
    bar.inc(1);
    section("inserts");
    let inserts = inserts::run(&config)?;
    bar.inc(1);
    section("deletes");
    let deletes = deletes::run(&config)?;
    bar.inc(1);
    section("load curve");
    let load_curves = load_curve::run(&config)?;
    bar.inc(1);
    section("concurrency");
    let concurrency = concurrency::run(&config)?;
    bar.inc(1);
    section("restart");
    let restart = restart::run(&config, scratch)?;
    bar.inc(1);
    section("growth");
    let growth = growth::run(&config)?;
    bar.inc(1);
    section("distributions");
    let distributions = distributions::run(&config)?;
    bar.inc(1);
    let end = Instant::now();
    bar.finish_and_clear();
    let section_secs = section_secs
        .iter()
        .enumerate()
        .map(|(i, (name, start))| {
            let stop = section_secs.get(i + 1).map_or(end, |next| next.1);
            (name.clone(), stop.duration_since(*start).as_secs_f64())
        })
        .collect();
    Ok(BenchResults {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average,
        clock_overhead_ns: common::clock_overhead_ns(),
        config,
        lookups,
        inserts,
        deletes,
        load_curves,
        concurrency,
        restart,
        growth,
        distributions,
        section_secs,
    })
}

/// The 1-minute load average from `/proc/loadavg`, where there is one.
fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Runs `koel-lab bench`.
///
/// # Errors
///
/// Bad options, an unwritable output directory, a part that cannot run.
pub fn main(args: Args) -> anyhow::Result<Outcome> {
    let config = Config::from_args(&args)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create the output directory {}", args.out.display()))?;
    // Fail before a run of minutes, not after it.
    koel_cli::output::check(&args.out.join("report.md"))?;
    let started = Instant::now();
    let results = run(config, &args.out)?;
    let total_secs = started.elapsed().as_secs_f64();
    write_all(&args.out, &results, total_secs)?;
    println!(
        "koel-lab bench: {} written in {total_secs:.1} s",
        args.out.join("report.md").display()
    );
    let failed = results.failed_checks();
    if failed.is_empty() {
        return Ok(Outcome::Success);
    }
    for f in &failed {
        eprintln!("koel-lab bench: FAILED: {f}");
    }
    Ok(Outcome::CheckFailed)
}

/// Writes the plots, `report.md` and `results.json` into `dir`.
///
/// # Errors
///
/// A file cannot be written or a plot cannot be drawn.
pub fn write_all(dir: &Path, results: &BenchResults, total_secs: f64) -> anyhow::Result<()> {
    let plots = charts::write_all(dir, results)?;
    let report = markdown::report(results, &plots, total_secs);
    let path = dir.join("report.md");
    koel_cli::output::write_file(&path, report.as_bytes())?;
    let path = dir.join("results.json");
    let json =
        serde_json::to_string_pretty(results).context("cannot encode the results as JSON")?;
    koel_cli::output::write_file(&path, json.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Config {
        Config {
            items: 2000,
            negatives: 20_000,
            same_tag_pairs: 20,
            threads: vec![1, 2],
            concurrency_duration: Duration::from_millis(30),
            seed: 11,
            quick: true,
        }
    }

    #[test]
    fn the_checker_passes_a_real_run_and_flags_each_kind_of_failure() {
        let scratch = tempfile::tempdir().unwrap();
        let clean = run(tiny(), scratch.path()).unwrap();
        assert_eq!(clean.failed_checks(), Vec::<String>::new());

        let mut r = clean.clone();
        r.lookups[1].false_negatives = 1;
        assert!(r.failed_checks()[0].contains("false negatives"));

        let mut r = clean.clone();
        r.lookups[0].fpr = common::FprCheck::new(500, 20_000, 1e-4);
        assert!(r.failed_checks()[0].contains("outside the bound"));

        let mut r = clean.clone();
        r.deletes[0].same_tag.other_still_visible -= 1;
        assert!(r.failed_checks()[0].contains("same-tag"));

        let mut r = clean.clone();
        r.concurrency[0].false_negatives = 3;
        assert!(r.failed_checks()[0].contains("concurrency"));

        let mut r = clean.clone();
        r.restart[0].mismatches = 1;
        assert!(r.failed_checks()[0].contains("restart"));

        let mut r = clean;
        r.growth[1].false_negatives = 1;
        assert!(r.failed_checks()[0].contains("growth"));
    }

    #[test]
    fn thread_lists_parse_sorted_and_deduplicated() {
        assert_eq!("4,1,2,2".parse::<ThreadList>().unwrap().0, vec![1, 2, 4]);
        for bad in ["", "0", "1,x", "-1", "1000", ","] {
            assert!(bad.parse::<ThreadList>().is_err(), "{bad:?}");
        }
    }
}
