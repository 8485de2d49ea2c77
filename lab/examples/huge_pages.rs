//! What transparent huge pages buy `contains_many` on a large filter.
//!
//! Builds two filters for `ITEMS` items (default 16M) in one process: the
//! first while the process has opted out of transparent huge pages
//! (`prctl(PR_SET_THP_DISABLE)`, so 4 KiB pages), the second after opting
//! back in (so koel's `madvise` applies). Both hold the same keys. Then it
//! times `contains_many` over random present and absent keys, alternating
//! between the two filters for `ROUNDS` rounds (default 7) so that both see
//! the same machine noise, and prints the median and the best round.
//!
//! ```text
//! cargo run --release -p koel-lab --example huge_pages -- [ITEMS] [ROUNDS]
//! ```
//!
//! It prints each filter's `stats().huge_pages` and the process's
//! `AnonHugePages` (from `/proc/self/smaps_rollup`): how much memory the
//! kernel really backed with huge pages. On systems without THP both
//! filters use the same pages.

use koel::CuckooFilter;
use std::time::Instant;

#[path = "../../tests/common/splitmix.rs"]
mod splitmix64;
use splitmix64::mix64 as mix;

/// Opts this process out of (`true`) or back into transparent huge pages.
#[cfg(target_os = "linux")]
fn disable_thp(off: bool) {
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and sets a
    // flag of this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, libc::c_ulong::from(off), 0, 0, 0) };
    if rc != 0 {
        eprintln!("prctl(PR_SET_THP_DISABLE, {off}) failed; pages are as the kernel chooses");
    }
}

#[cfg(not(target_os = "linux"))]
fn disable_thp(_off: bool) {}

/// The `AnonHugePages` line of `/proc/self/smaps_rollup`, if any.
fn anon_huge_pages() -> String {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("AnonHugePages"))
                .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "n/a".into())
}

/// ns per key of one `contains_many` pass over `keys`.
fn time_contains(f: &CuckooFilter, keys: &[u64], out: &mut [bool]) -> f64 {
    let t = Instant::now();
    f.contains_many(keys, out);
    t.elapsed().as_nanos() as f64 / keys.len() as f64
}

/// (median, min) of `xs`.
fn summary(xs: &mut [f64]) -> (f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[xs.len() / 2], xs[0])
}

fn build(items: usize, keys: &[u64]) -> Result<(CuckooFilter, f64), Box<dyn std::error::Error>> {
    let f = CuckooFilter::builder().capacity(items).seed(1).build()?;
    let t = Instant::now();
    f.insert_many(keys)?;
    Ok((f, t.elapsed().as_nanos() as f64 / keys.len() as f64))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let items: usize = args.next().map_or(Ok(16_000_000), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(7), |a| a.parse())?;
    let keys: Vec<u64> = (0..items as u64).map(mix).collect();

    disable_thp(true);
    let (small_pages, fill_4k) = build(items, &keys)?;
    disable_thp(false);
    let (huge_pages, fill_2m) = build(items, &keys)?;

    // Probe keys in a random order: a quarter of the filter, at least 1M.
    let probes = (items / 4).max(1 << 20);
    let present: Vec<u64> = (0..probes as u64)
        .map(|i| keys[(mix(i ^ 0xABCD) % items as u64) as usize])
        .collect();
    let absent: Vec<u64> = (0..probes as u64).map(|i| mix(i + (1 << 40))).collect();
    let mut out = vec![false; probes];
    let filters = [("4k", &small_pages), ("thp", &huge_pages)];
    let mut pos = [vec![], vec![]];
    let mut neg = [vec![], vec![]];
    for _ in 0..rounds.max(1) {
        for (i, (_, f)) in filters.iter().enumerate() {
            pos[i].push(time_contains(f, &present, &mut out));
            assert!(out.iter().all(|&b| b), "a present key was not found");
            neg[i].push(time_contains(f, &absent, &mut out));
        }
    }
    println!(
        "items {items}, table {:.0} MiB each, AnonHugePages {} (process), {rounds} rounds, ns per key (median / best):",
        huge_pages.memory_usage() as f64 / (1 << 20) as f64,
        anon_huge_pages(),
    );
    for (i, ((name, f), fill)) in filters.iter().zip([fill_4k, fill_2m]).enumerate() {
        let (pm, pb) = summary(&mut pos[i]);
        let (nm, nb) = summary(&mut neg[i]);
        println!(
            "{name:>4}: stats.huge_pages {:5}  fill {fill:5.1}  contains_many present {pm:5.1} / {pb:5.1}  absent {nm:5.1} / {nb:5.1}",
            f.stats().huge_pages
        );
    }
    Ok(())
}
