//! Shared pieces of the loom models: picking hashes that land in chosen
//! buckets, building the tiny filter, and running a model with a default
//! preemption bound.
//!
//! Under `cfg(loom)` a filter built with `capacity(4)` has `m0 = 4` buckets
//! of four 16-bit tags, two version stripes, and a displacement search of 4
//! then 8 nodes. With 8 nodes the search only ever reaches the children of
//! the two roots, so every displacement path in these models is one hop.
//!
//! In a 4-bucket table the alternate of a tag is `(H(tag) - i) mod 4` with
//! `H(tag)` odd, so a key's pair is `{0,1}`, `{2,3}` (`H = 1`) or `{0,3}`,
//! `{1,2}` (`H = 3`). A pre-fill puts a key into its first bucket `i1`
//! unless that is full, and into the lowest empty lane of a bucket; the
//! models rely on this to place tags in known lanes.

#![allow(dead_code)]

pub mod models;
#[path = "../../../tests/common/splitmix.rs"]
mod splitmix;

use koel::loom_support::{locate, Canary, MIN_BUCKETS};
use koel::CuckooFilter;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc as StdArc, Mutex};

/// Buckets of every model's table.
pub const M0: u64 = 4;
/// Tag width of every model's table.
pub const BITS: u32 = 16;

/// Picks hashes with a chosen bucket pair and a tag no other picked hash
/// has, so that `contains`/`count` of one key never sees another key's tag.
/// Runs outside the model: `locate` touches no loom atomics.
pub struct Picker {
    state: u64,
    tags: HashSet<u64>,
}

impl Picker {
    pub fn new() -> Self {
        assert_eq!(
            MIN_BUCKETS, M0,
            "the models assume a 4-bucket table under loom"
        );
        Picker {
            state: 0x5EED,
            tags: HashSet::new(),
        }
    }

    /// A hash whose first bucket is `i1`, second `i2`, with a fresh tag.
    pub fn key(&mut self, i1: usize, i2: usize) -> u64 {
        self.key_where(i1, i2, |_| true)
    }

    /// [`key`](Self::key), of a hash that also passes `also` (a pair in a
    /// level above, say).
    pub fn key_where(&mut self, i1: usize, i2: usize, also: impl Fn(u64) -> bool) -> u64 {
        assert!(
            (i1 + i2) % 2 == 1,
            "{{{i1},{i2}}} is not a bucket pair in a 4-bucket table"
        );
        for _ in 0..1_000_000 {
            let h = splitmix::mix64(self.state);
            self.state = self.state.wrapping_add(splitmix::GAMMA);
            let (tag, a, b) = locate(BITS, M0, h);
            if (a, b) == (i1, i2) && also(h) && self.tags.insert(tag) {
                return h;
            }
        }
        panic!("no hash with buckets ({i1}, {i2}) found");
    }

    /// `n` such hashes.
    pub fn keys(&mut self, n: usize, i1: usize, i2: usize) -> Vec<u64> {
        (0..n).map(|_| self.key(i1, i2)).collect()
    }
}

/// The 4-bucket, 16-bit filter of every model, with `canary`.
pub fn filter(canary: Canary) -> CuckooFilter {
    let f = CuckooFilter::builder()
        .capacity(4)
        .fingerprint_bits(BITS)
        .seed(0)
        .canary(canary)
        .build()
        .expect("tiny filter");
    debug_assert_eq!(f.stats().buckets as u64, M0);
    f
}

/// Inserts `keys` in order, single-threaded (before any thread is spawned).
///
/// Uses `insert_unique`, which tries the key's first bucket before its
/// second (plain `insert` picks the emptier one), so the layouts the models
/// describe are the ones they get.
pub fn fill(f: &CuckooFilter, keys: &[u64]) -> Result<(), String> {
    for &h in keys {
        match f.insert_unique_hash(h) {
            Ok(true) => {}
            other => return Err(format!("pre-fill insert of {h:#x}: {other:?}")),
        }
    }
    Ok(())
}

/// Returns `Err` from the enclosing model body unless `cond` holds.
///
/// Model bodies report failures as values instead of panicking: a panic
/// unwinding out of `loom::model` drops loom's threads outside the model,
/// and a thread-local that touches loom state in its destructor (as
/// crossbeam-epoch's handle did) then aborts the process instead of
/// failing the test.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// `Err` unless the 4-bucket table holds exactly 16 tags, by both the item
/// count and a scan of its slots.
pub fn holds_sixteen(f: &CuckooFilter, s: &koel::Stats) -> Result<(), String> {
    ensure!(
        f.len() == 16 && s.occupied_slots == 16,
        "len {} occupied {}",
        f.len(),
        s.occupied_slots
    );
    Ok(())
}

/// `Err` naming the first key of `keys` that is missing.
pub fn all_present(f: &CuckooFilter, keys: &[u64], what: &str) -> Result<(), String> {
    for &h in keys {
        ensure!(
            f.contains_hash(h),
            "false negative after join: {what} key {h:#x} (tag {:#x}) is missing",
            locate(BITS, M0, h).0
        );
    }
    Ok(())
}

/// Runs `body` under loom with `LOOM_MAX_PREEMPTIONS` (2 if unset, so a
/// forgotten variable does not turn a model into an hours-long search).
/// Prints how many executions it explored; panics after the search if any
/// execution returned `Err`, with the first error and the failure count.
pub fn model<F>(name: &str, body: F)
where
    F: Fn() -> Result<(), String> + Sync + Send + 'static,
{
    model_bounded(name, None, body)
}

/// [`model`] with a preemption bound of its own (`Some`) instead of
/// `LOOM_MAX_PREEMPTIONS`: for the few races that take more preemptions to
/// reach than the suite's default allows.
pub fn model_bounded<F>(name: &str, bound: Option<usize>, body: F)
where
    F: Fn() -> Result<(), String> + Sync + Send + 'static,
{
    search(name, bound, None, false, body)
}

/// [`model`] whose executions may take up to `branches` of loom's branches
/// (atomic accesses and switches, the single-threaded pre-fill's too)
/// instead of the suite's 2000: for pre-fills that build levels.
pub fn model_branching<F>(name: &str, branches: usize, body: F)
where
    F: Fn() -> Result<(), String> + Sync + Send + 'static,
{
    search(name, None, Some(branches), false, body)
}

/// [`model`] for a canary, which must fail: stops at the first execution
/// that returns `Err` and panics with its error, instead of exploring the
/// rest (a canary's whole search costs as much as its model's, and shows
/// nothing more than that one execution fails).
pub fn canary_model<F>(name: &str, body: F)
where
    F: Fn() -> Result<(), String> + Sync + Send + 'static,
{
    search(name, None, None, true, body)
}

/// The search behind [`model_bounded`] and [`canary_model`].
fn search<F>(
    name: &str,
    bound: Option<usize>,
    branches: Option<usize>,
    stop_at_failure: bool,
    body: F,
) where
    F: Fn() -> Result<(), String> + Sync + Send + 'static,
{
    let runs = StdArc::new(AtomicUsize::new(0));
    let failures = StdArc::new(AtomicUsize::new(0));
    let first = StdArc::new(Mutex::new(None::<(usize, String)>));
    let (runs_in, failures_in, first_in) = (
        StdArc::clone(&runs),
        StdArc::clone(&failures),
        StdArc::clone(&first),
    );
    let mut builder = loom::model::Builder::new();
    if bound.is_some() {
        builder.preemption_bound = bound;
    }
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    // Model 9 runs up to four displacement searches in one execution,
    // which passes loom's default of 1000 branches.
    if std::env::var_os("LOOM_MAX_BRANCHES").is_none() {
        builder.max_branches = builder.max_branches.max(branches.unwrap_or(2000));
    }
    let started = std::time::Instant::now();
    let name_in = name.to_string();
    builder.check(move || {
        let run = runs_in.fetch_add(1, Relaxed) + 1;
        if let Err(msg) = body() {
            if stop_at_failure {
                panic!(
                    "{name_in}: execution {run} failed (after {:.2?}): {msg}",
                    started.elapsed()
                );
            }
            failures_in.fetch_add(1, Relaxed);
            first_in.lock().unwrap().get_or_insert((run, msg));
        }
    });
    let (runs, failures) = (runs.load(Relaxed), failures.load(Relaxed));
    eprintln!(
        "{name}: {runs} executions in {:.2?} (preemption bound {:?}), {failures} failed",
        started.elapsed(),
        builder.preemption_bound
    );
    let first = first.lock().unwrap().take();
    if let Some((run, msg)) = first {
        panic!("{name}: {failures} of {runs} executions failed; first (execution {run}): {msg}");
    }
}
