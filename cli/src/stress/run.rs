//! The stress run: prefill, the timed mix on N threads, a sampler for the
//! timeline, and the final sweep.

use super::check::{CheckReport, Truth};
use super::mix::Mix;
use super::report::{GrowthEvent, OpReport, StressReport, TimelinePoint};
use crate::filters::CliFilter;
use crate::keys::{key_bytes, mix64, FastRng, KeyDist, KeyGen};
use crate::latency::Latency;
use crate::progress;
use anyhow::{bail, Context};
use koel::InsertError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One operation in `SAMPLE_EVERY` is timed: reading the clock twice costs
/// about as much as a lookup, so timing every one would halve throughput.
pub const SAMPLE_EVERY: u64 = 16;

/// How often the sampler records throughput.
const TICK: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct Config {
    pub threads: usize,
    /// Distinct keys.
    pub items: u64,
    /// Capacity the filter was built with (for the report).
    pub capacity: u64,
    pub mix: Mix,
    /// Timed run length.
    pub duration: Duration,
    /// Key distribution.
    pub keys: KeyDist,
    /// Fraction of keys inserted before the run.
    pub prefill: f64,
    /// Seed of the key streams.
    pub seed: u64,
}

#[derive(Clone, Copy)]
enum Op {
    Read = 0,
    Insert = 1,
    Remove = 2,
}

const OP_NAMES: [&str; 3] = ["read", "insert", "remove"];

/// A per-thread counter on its own cache line, so the sampler's reads do not
/// slow the workers' writes.
#[repr(align(128))]
#[derive(Default)]
struct Padded(AtomicU64);

struct Shared<'a> {
    filter: &'a dyn CliFilter,
    truth: Truth,
    stop: AtomicBool,
    done: Vec<Padded>,
    config: &'a Config,
}

#[derive(Default)]
struct WorkerResult {
    ops: [u64; 3],
    latency: [Latency; 3],
    check: CheckReport,
}

impl WorkerResult {
    fn merge(mut self, other: &WorkerResult) -> WorkerResult {
        for op in 0..3 {
            self.ops[op] += other.ops[op];
            self.latency[op].merge(&other.latency[op]);
        }
        self.check.merge(&other.check);
        self
    }

    /// Runs `call`, counts it as `op`, and records its latency if `timed`.
    #[inline(always)]
    fn op<R>(&mut self, op: Op, timed: bool, call: impl FnOnce() -> R) -> R {
        let t0 = timed.then(Instant::now);
        let out = call();
        if let Some(t0) = t0 {
            self.latency[op as usize].record(t0.elapsed().as_nanos() as u64);
        }
        self.ops[op as usize] += 1;
        out
    }
}

/// Runs the stress test on `filter` (which must be empty).
pub fn run(filter: &dyn CliFilter, config: &Config) -> anyhow::Result<StressReport> {
    let threads = config.threads;
    if threads == 0 || config.items < threads as u64 {
        bail!(
            "--items {} is fewer than --threads {threads}: every thread needs keys of its own",
            config.items
        );
    }
    if config.mix.remove > 0
        && filter
            .remove_hash(filter.hash_bytes(b"koel-probe"))
            .is_none()
    {
        bail!(
            "a {} filter cannot remove: give a --mix without remove",
            filter.kind().name()
        );
    }
    let gens = (0..threads)
        .map(|t| KeyGen::new(config.keys, config.items, t, threads, config.seed))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let shared = Shared {
        filter,
        truth: Truth::new(config.items)?,
        stop: AtomicBool::new(false),
        done: (0..threads).map(|_| Padded::default()).collect(),
        config,
    };

    let prefill_started = Instant::now();
    let prefilled = prefill(&shared)?;
    let prefill_secs = prefill_started.elapsed().as_secs_f64();

    let bar = progress::bar(
        Some(config.duration.as_millis() as u64),
        "{spinner} stress [{bar:30}] {elapsed}/{duration} {msg}",
    );
    // Read before any worker starts, so no doubling of the run is missed.
    let start_generation = filter.generation();
    let (results, elapsed, timeline, growth) = std::thread::scope(|scope| {
        let workers: Vec<_> = gens
            .into_iter()
            .enumerate()
            .map(|(t, gen)| {
                let shared = &shared;
                scope.spawn(move || worker(shared, t, gen))
            })
            .collect();
        let start = Instant::now();
        let (timeline, growth) = sample(&shared, start, start_generation, &bar);
        // Relaxed: a stop flag; the joins below synchronise the results.
        shared.stop.store(true, Ordering::Relaxed);
        let results: Option<Vec<WorkerResult>> =
            workers.into_iter().map(|w| w.join().ok()).collect();
        (results, start.elapsed(), timeline, growth)
    });
    bar.finish_and_clear();

    let results = results.context("a worker thread panicked")?;
    let mut all = results
        .iter()
        .fold(WorkerResult::default(), WorkerResult::merge);
    final_sweep(&shared, &mut all.check);
    let (ops, latency) = (all.ops, all.latency);

    let secs = elapsed.as_secs_f64();
    let total: u64 = ops.iter().sum();
    let snapshot = filter.snapshot();
    Ok(StressReport {
        filter: filter.describe(),
        threads,
        items: config.items,
        capacity: config.capacity,
        keys: config.keys.to_string(),
        mix: config.mix.to_string(),
        seed: config.seed,
        prefilled,
        prefill_secs,
        start_generation,
        duration_secs: secs,
        ops: total,
        ops_per_sec: total as f64 / secs,
        per_op: (0..3)
            .filter(|&op| ops[op] > 0)
            .map(|op| OpReport {
                op: OP_NAMES[op].to_string(),
                count: ops[op],
                per_sec: ops[op] as f64 / secs,
            })
            .collect(),
        latency_sample_every: SAMPLE_EVERY,
        latency: (0..3)
            .filter(|&op| latency[op].count() > 0)
            .map(|op| latency[op].summary(OP_NAMES[op]))
            .collect(),
        snapshot,
        growth_events: growth,
        timeline,
        check: all.check,
    })
}

/// Whether key `k` starts present: a fixed pseudo-random `fraction` of keys.
fn starts_present(k: u64, fraction: f64, seed: u64) -> bool {
    (mix64(k ^ seed) >> 11) as f64 * (1.0 / (1u64 << 53) as f64) < fraction
}

/// Inserts the prefill keys, each by its owner thread. Returns how many.
fn prefill(shared: &Shared<'_>) -> anyhow::Result<u64> {
    let config = shared.config;
    if config.prefill <= 0.0 {
        return Ok(0);
    }
    let threads = config.threads as u64;
    let bar = progress::bar(
        Some(config.items),
        "{spinner} prefill [{bar:30}] {pos}/{len} keys",
    );
    let outcome = on_threads(config.threads, |t| -> Result<u64, InsertError> {
        let t = t as u64;
        let mut buf = [0u8; 32];
        let mut n = 0;
        for k in (t..config.items).step_by(threads as usize) {
            if k % 65_536 == t {
                bar.inc(65_536);
            }
            if !starts_present(k, config.prefill, config.seed) {
                continue;
            }
            let f = shared.filter;
            let h = f.hash_bytes(key_bytes(config.keys, k, &mut buf));
            let before = shared.truth.own(k);
            if f.insert_unique_hash(h)? {
                shared.truth.set(k, before, true);
                n += 1;
            }
        }
        Ok(n)
    })
    .into_iter()
    .map(|r| r.unwrap_or(Err(InsertError::Full)))
    .sum::<Result<u64, _>>();
    bar.finish_and_clear();
    outcome.or_else(|e| {
        bail!(
            "prefill of {:.0}% of {} keys failed: {e} (raise --capacity or lower --prefill)",
            config.prefill * 100.0,
            config.items
        )
    })
}

/// `f(t)` for `t` in `0..threads`, each on a thread of its own; `None`
/// where `f` panicked.
fn on_threads<R: Send>(threads: usize, f: impl Fn(usize) -> R + Sync) -> Vec<Option<R>> {
    std::thread::scope(|scope| {
        let f = &f;
        let workers: Vec<_> = (0..threads).map(|t| scope.spawn(move || f(t))).collect();
        workers.into_iter().map(|w| w.join().ok()).collect()
    })
}

/// The key of thread `t` nearest to `k`: keys are owned round-robin.
#[inline(always)]
fn own_key(k: u64, t: u64, threads: u64, items: u64) -> u64 {
    let mine = k - k % threads + t;
    if mine < items {
        mine
    } else {
        mine - threads
    }
}

/// How many of its keys a remove looks at for a present one.
const REMOVE_PROBES: u64 = 16;

/// One worker: the mix until `stop`.
fn worker(shared: &Shared<'_>, t: usize, mut gen: KeyGen) -> WorkerResult {
    let config = shared.config;
    let (f, truth) = (shared.filter, &shared.truth);
    let (threads, items) = (config.threads as u64, config.items);
    let mut rng = FastRng::new(config.seed ^ mix64(t as u64 + 1));
    let mix = config.mix;
    let (read_below, insert_below) = (u64::from(mix.read), u64::from(mix.read + mix.insert));
    let total = u64::from(mix.total());
    let mut r = WorkerResult::default();
    let mut buf = [0u8; 32];
    let mut n: u64 = 0;
    loop {
        if n.is_multiple_of(256) {
            // Relaxed: progress for the sampler; only this thread writes it.
            shared.done[t].0.store(n, Ordering::Relaxed);
            // Relaxed: a stop request; nothing is published through it.
            if shared.stop.load(Ordering::Relaxed) {
                break;
            }
        }
        let timed = n.is_multiple_of(SAMPLE_EVERY);
        n += 1;
        let pick = rng.below(total);
        let k = gen.next(&mut rng);
        match pick {
            _ if pick < read_below => {
                let h = f.hash_bytes(key_bytes(config.keys, k, &mut buf));
                let before = truth.before(k);
                let hit = r.op(Op::Read, timed, || f.contains_hash(h));
                if before.present() {
                    r.check.checked_reads += 1;
                    if !hit && truth.unchanged(k, before) {
                        r.check.live_false_negatives += 1;
                        r.check.example(k);
                    }
                } else if truth.unchanged(k, before) {
                    r.check.absent_reads += 1;
                    r.check.absent_read_hits += u64::from(hit);
                }
            }
            _ if pick < insert_below => {
                let k = own_key(k, t as u64, threads, items);
                let h = f.hash_bytes(key_bytes(config.keys, k, &mut buf));
                let before = truth.own(k);
                let result = r.op(Op::Insert, timed, || f.insert_unique_hash(h));
                match result {
                    Ok(true) if before.present() => {
                        // It was in, and the filter did not find it.
                        r.check.write_false_negatives += 1;
                        r.check.example(k);
                    }
                    Ok(true) => truth.set(k, before, true),
                    Ok(false) if !before.present() => r.check.insert_false_positives += 1,
                    Ok(false) => {}
                    Err(_) => r.check.inserts_refused_full += 1,
                }
            }
            _ => {
                let mut k = own_key(k, t as u64, threads, items);
                let mut found = false;
                for _ in 0..REMOVE_PROBES {
                    if truth.own(k).present() {
                        found = true;
                        break;
                    }
                    k = own_key((k + threads) % items, t as u64, threads, items);
                }
                if !found {
                    r.check.removes_skipped += 1;
                    continue;
                }
                let h = f.hash_bytes(key_bytes(config.keys, k, &mut buf));
                // The truth says absent before the remove starts, so that
                // readers never blame the filter for a key being removed.
                truth.set(k, truth.own(k), false);
                let removed = r.op(Op::Remove, timed, || f.remove_hash(h));
                if removed == Some(false) {
                    r.check.write_false_negatives += 1;
                    r.check.example(k);
                }
            }
        }
    }
    r
}

/// Until the duration is over: records throughput and growth events
/// (generation changes) every tick, and drives the progress bar.
fn sample(
    shared: &Shared<'_>,
    start: Instant,
    start_generation: u32,
    bar: &indicatif::ProgressBar,
) -> (Vec<TimelinePoint>, Vec<GrowthEvent>) {
    let (mut timeline, mut growth) = (Vec::new(), Vec::new());
    let duration = shared.config.duration;
    let done = || -> u64 {
        // Relaxed: approximate progress counts.
        shared
            .done
            .iter()
            .map(|d| d.0.load(Ordering::Relaxed))
            .sum()
    };
    let mut generation = start_generation;
    let (mut last_t, mut last_ops) = (0.0, 0);
    let mut tick = 0u32;
    loop {
        let elapsed = start.elapsed();
        if elapsed >= duration {
            break;
        }
        std::thread::sleep(TICK.min(duration - elapsed));
        tick += 1;
        let t = start.elapsed().as_secs_f64();
        let ops = done();
        let rate = (ops - last_ops) as f64 / (t - last_t);
        let now = shared.filter.generation();
        // Two doublings within one tick are two events at the same time.
        let len = shared.filter.len() as u64;
        for g in generation + 1..=now {
            growth.push(GrowthEvent {
                t_secs: t,
                generation: g,
                len,
            });
        }
        generation = generation.max(now);
        // The snapshot scans the table: the load every fifth tick is enough.
        let load = tick
            .is_multiple_of(5)
            .then(|| shared.filter.snapshot().load_factor)
            .flatten();
        timeline.push(TimelinePoint {
            t_secs: t,
            ops_per_sec: rate,
            load_factor: load,
        });
        bar.set_position(start.elapsed().as_millis() as u64);
        bar.set_message(format!("{}ops/s", crate::human::rate(rate)));
        (last_t, last_ops) = (t, ops);
    }
    (timeline, growth)
}

/// Keys outside the key space looked up after the run to measure the
/// false-positive rate.
const FPR_PROBES: u64 = 1 << 20;

/// Keys per slice of the final sweep.
const SWEEP_SLICE: u64 = 1 << 22;

/// Looks up every key the truth says is present, and `FPR_PROBES` keys that
/// were never inserted, on all threads.
fn final_sweep(shared: &Shared<'_>, check: &mut CheckReport) {
    let items = shared.config.items;
    let probes: Vec<u64> = (items..items + FPR_PROBES).collect();
    check.fpr_probes = FPR_PROBES;
    check.fpr_probe_hits = lookups(shared, &probes, true).len() as u64;
    // In slices: a list of every present key would take 8 bytes per key
    // on top of the ground truth's 4.
    let mut from = 0;
    while from < items {
        let to = items.min(from + SWEEP_SLICE);
        let present: Vec<u64> = shared.truth.present_keys(from..to).collect();
        check.final_present_keys += present.len() as u64;
        for k in lookups(shared, &present, false) {
            check.final_false_negatives += 1;
            check.example(k);
        }
        from = to;
    }
}

/// The keys of `keys` whose lookup answers `found`, looked up on all
/// threads.
fn lookups(shared: &Shared<'_>, keys: &[u64], found: bool) -> Vec<u64> {
    let (config, f) = (shared.config, shared.filter);
    let chunk = keys.len().div_ceil(config.threads).max(1);
    let found_in = |keys: &[u64]| -> Vec<u64> {
        let mut buf = [0u8; 32];
        keys.iter()
            .copied()
            .filter(|&k| {
                f.contains_hash(f.hash_bytes(key_bytes(config.keys, k, &mut buf))) == found
            })
            .collect()
    };
    on_threads(config.threads, |t| keys.chunks(chunk).nth(t).map(found_in))
        .into_iter()
        .flat_map(|r| r.flatten().unwrap_or_default())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_key_belongs_to_the_thread_and_stays_in_range() {
        for items in [3u64, 4, 10, 11] {
            for threads in 1..=3u64 {
                for k in 0..items {
                    for t in 0..threads {
                        let m = own_key(k, t, threads, items);
                        assert!(m < items);
                        assert_eq!(m % threads, t, "items {items} k {k} t {t}");
                    }
                }
            }
        }
    }
}
