//! What transparent huge pages buy `contains_many` on a large filter.
//!
//! Builds a filter for `ITEMS` items (default 16M), fills it to that many,
//! and times `contains_many` over random present and absent keys (the
//! median of five passes). With `--no-thp` the process first opts out of
//! transparent huge pages (`prctl(PR_SET_THP_DISABLE)`, Linux), so two runs
//! compare 2 MiB against 4 KiB pages on the same machine:
//!
//! ```text
//! cargo run --release --example huge_pages -- [ITEMS]
//! cargo run --release --example huge_pages -- [ITEMS] --no-thp
//! ```
//!
//! It prints `stats().huge_pages` and the process's `AnonHugePages` (from
//! `/proc/self/smaps_rollup`), i.e. how much memory the kernel really backed
//! with huge pages.

use koel::CuckooFilter;
use std::time::Instant;

/// SplitMix64 step: deterministic, well-mixed keys.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Opts this process out of transparent huge pages.
#[cfg(target_os = "linux")]
fn disable_thp() {
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and sets a
    // flag of this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc != 0 {
        eprintln!("prctl(PR_SET_THP_DISABLE) failed; pages are as the kernel chooses");
    }
}

#[cfg(not(target_os = "linux"))]
fn disable_thp() {
    eprintln!("--no-thp: only Linux has transparent huge pages");
}

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

/// Median ns per key of `contains_many` over `keys`, five passes.
fn time_contains(f: &CuckooFilter, keys: &[u64], out: &mut [bool]) -> f64 {
    let mut ns: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            f.contains_many(keys, out);
            t.elapsed().as_nanos() as f64 / keys.len() as f64
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    ns[2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let no_thp = args.iter().any(|a| a == "--no-thp");
    let items: usize = match args.iter().find(|a| !a.starts_with("--")) {
        Some(a) => a.parse()?,
        None => 16_000_000,
    };
    if no_thp {
        disable_thp();
    }
    let f = CuckooFilter::builder().capacity(items).seed(1).build()?;
    let keys: Vec<u64> = (0..items as u64).map(mix).collect();
    let t = Instant::now();
    f.insert_many(&keys)?;
    let fill = t.elapsed();

    // Probe keys in a random order: a quarter of the filter, at least 1M.
    let probes = (items / 4).max(1 << 20);
    let present: Vec<u64> = (0..probes as u64)
        .map(|i| keys[(mix(i ^ 0xABCD) % items as u64) as usize])
        .collect();
    let absent: Vec<u64> = (0..probes as u64).map(|i| mix(i + (1 << 40))).collect();
    let mut out = vec![false; probes];
    let pos = time_contains(&f, &present, &mut out);
    assert!(out.iter().all(|&b| b), "a present key was not found");
    let neg = time_contains(&f, &absent, &mut out);
    let stats = f.stats();
    println!(
        "items {items}  table {:.0} MiB  thp {}  stats.huge_pages {}  AnonHugePages {}",
        stats.memory_bytes as f64 / (1 << 20) as f64,
        if no_thp { "disabled" } else { "default" },
        stats.huge_pages,
        anon_huge_pages(),
    );
    println!(
        "fill {:.1} ns/key  contains_many present {pos:.1} ns/key  absent {neg:.1} ns/key",
        fill.as_nanos() as f64 / items as f64
    );
    Ok(())
}
