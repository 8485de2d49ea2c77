//! Parallel deduplication of a record stream with one shared `CuckooFilter`.
//!
//! Generates newline-style records with planted duplicates, splits them over
//! worker threads that call `insert_unique` on a shared `Arc<CuckooFilter>`,
//! and reports throughput, load, duplicates dropped, and the false-positive
//! rate measured on keys that were never inserted. Exits non-zero if a
//! duplicate slipped through (two threads both "won" one record) or a kept
//! record is missing from the filter afterwards: both would be bugs.
//!
//! ```text
//! cargo run --release --example dedup -- [RECORDS] [THREADS]
//! ```

use koel::CuckooFilter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

// Deterministic, well-mixed record ids: SplitMix64, shared with the tests.
#[path = "../tests/common/splitmix.rs"]
mod splitmix64;
use splitmix64::mix64 as mix;

/// `records` lines; one in four repeats an earlier line. Returns the lines
/// and the exact number of distinct ones.
fn generate(records: usize) -> (Vec<String>, usize) {
    let mut lines = Vec::with_capacity(records);
    let mut distinct = 0usize;
    for r in 0..records as u64 {
        let id = if r % 4 == 3 && distinct > 0 {
            mix(r) % distinct as u64 // a duplicate of an earlier record
        } else {
            distinct += 1;
            distinct as u64 - 1
        };
        lines.push(format!("{:016x},user-{},event", mix(id), id % 100_000));
    }
    (lines, distinct)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let records: usize = args.next().map_or(Ok(4_000_000), |s| s.parse())?;
    let threads: usize = match args.next() {
        Some(s) => s.parse()?,
        None => std::thread::available_parallelism()?.get(),
    };
    if records == 0 || threads == 0 {
        return Err("RECORDS and THREADS must be at least 1".into());
    }

    let (lines, distinct) = generate(records);
    let filter = Arc::new(CuckooFilter::builder().capacity(distinct).build()?);
    let kept = Arc::new(AtomicU64::new(0));
    let lines = Arc::new(lines);

    let start = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (filter, kept, lines) =
                (Arc::clone(&filter), Arc::clone(&kept), Arc::clone(&lines));
            std::thread::spawn(move || -> Result<(), koel::InsertError> {
                // Interleaved slices: every thread sees duplicates of records
                // other threads are inserting at the same moment.
                let mut mine = 0;
                for line in lines.iter().skip(t).step_by(threads) {
                    if filter.insert_unique(line.as_bytes())? {
                        mine += 1;
                    }
                }
                kept.fetch_add(mine, Ordering::Relaxed);
                Ok(())
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker panicked")?;
    }
    let elapsed = start.elapsed();
    let kept = kept.load(Ordering::Relaxed) as usize;

    // False positives: probe keys that were never inserted.
    let probes = 1_000_000u64;
    let fp = (0..probes)
        .filter(|i| filter.contains(format!("absent-{i}").as_bytes()))
        .count();
    let missing = lines
        .iter()
        .filter(|l| !filter.contains(l.as_bytes()))
        .count();
    let stats = filter.stats();

    println!("records          {records}");
    println!("threads          {threads}");
    println!("distinct (exact) {distinct}");
    println!("kept             {kept}");
    println!("duplicates drop  {}", records - kept);
    println!(
        "false-pos drops  {} (distinct records wrongly taken for duplicates)",
        distinct.saturating_sub(kept)
    );
    println!(
        "throughput       {:.1} M records/s ({:.0} ns/record/thread)",
        records as f64 / elapsed.as_secs_f64() / 1e6,
        elapsed.as_nanos() as f64 * threads as f64 / records as f64
    );
    println!(
        "load             {:.1}% of {} slots",
        stats.load_factor * 100.0,
        stats.capacity
    );
    println!(
        "memory           {:.1} MiB ({:.1} bits/item)",
        stats.memory_bytes as f64 / (1 << 20) as f64,
        stats.bits_per_item()
    );
    println!("displacements    {}", stats.displacements);
    println!(
        "measured FPR     {:.2e} ({fp} of {probes} absent keys; expected {:.2e})",
        fp as f64 / probes as f64,
        stats.false_positive_rate
    );

    if kept > distinct {
        return Err(format!("{} duplicates slipped through", kept - distinct).into());
    }
    if missing > 0 {
        return Err(
            format!("{missing} records are missing from the filter (false negatives)").into(),
        );
    }
    Ok(())
}
