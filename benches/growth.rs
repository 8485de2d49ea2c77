//! The cost of online growth: inserting 1M -> 64M items into a filter that
//! starts at 1M and doubles six times, against the same inserts into a
//! filter pre-sized for 64M, and against `scalable_cuckoo_filter` (single
//! threaded, growable) on the same growth.
//!
//! Not a criterion bench: it measures the latency of every single insert
//! (an HDR histogram of nanoseconds) because the question is the tail while
//! a doubling migrates, which a mean hides. Prints a Markdown table.
//!
//! `cargo bench --bench growth` (about a minute and a half; set
//! `KOEL_GROWTH_ITEMS` for a smaller run, e.g. 4000000).
//!
//! `cargo bench --bench growth -- refused` measures instead what an insert
//! refused at the growth cap costs: a 1M-item filter whose
//! `max_false_positive_rate` forbids a doubling is filled until the first
//! refusal, then fresh keys are inserted, and the latency of each refused
//! one is recorded (`KOEL_REFUSED_CAPACITY`, `KOEL_REFUSED_TRIES` change
//! the sizes; under callgrind, `refused_inserts` is the function to read).

use hdrhistogram::Histogram;
use koel::CuckooFilter;
use scalable_cuckoo_filter::ScalableCuckooFilterBuilder;
use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

#[path = "../tests/common/splitmix.rs"]
mod splitmix64;

/// SplitMix64 keys: distinct, well mixed.
fn key(i: u64) -> u64 {
    splitmix64::at(0x5EED, i)
}

struct Run {
    name: String,
    elapsed: Duration,
    items: u64,
    latency: Option<Histogram<u64>>,
    note: String,
}

impl Run {
    fn row(&self) -> String {
        let ns_per = self.elapsed.as_nanos() as f64 / self.items as f64;
        let pct = |q: f64| {
            self.latency
                .as_ref()
                .map_or("-".to_string(), |h| format!("{}", h.value_at_quantile(q)))
        };
        let max = self
            .latency
            .as_ref()
            .map_or("-".to_string(), |h| format!("{}", h.max()));
        format!(
            "| {} | {:.1} | {:.1} | {} | {} | {} | {} | {} |",
            self.name,
            ns_per,
            1e3 / ns_per,
            pct(0.5),
            pct(0.99),
            pct(0.999),
            max,
            self.note
        )
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

/// One thread inserts `items` keys into `f`, timing each insert.
fn timed_koel(name: &str, f: &CuckooFilter, items: u64) -> Run {
    let mut h = histogram();
    let start = Instant::now();
    for i in 0..items {
        let k = key(i);
        let t0 = Instant::now();
        f.insert(&k).expect("sized or growing");
        h.saturating_record(t0.elapsed().as_nanos() as u64);
    }
    let elapsed = start.elapsed();
    let s = f.stats();
    Run {
        name: name.to_string(),
        elapsed,
        items,
        latency: Some(h),
        note: format!(
            "gen {}, load {:.3}, {:.1} MB",
            s.generation,
            s.load_factor,
            s.memory_bytes as f64 / 1e6
        ),
    }
}

/// Two threads insert `items` keys (half each) into `f`, untimed per op.
fn two_threads(name: &str, f: &CuckooFilter, items: u64) -> Run {
    let start = Instant::now();
    thread::scope(|s| {
        for t in 0..2u64 {
            s.spawn(move || {
                for i in (t..items).step_by(2) {
                    f.insert(&key(i)).expect("sized or growing");
                }
            });
        }
    });
    let elapsed = start.elapsed();
    let s = f.stats();
    Run {
        name: name.to_string(),
        elapsed,
        items,
        latency: None,
        note: format!("gen {}, load {:.3}", s.generation, s.load_factor),
    }
}

/// Inserts `keys`, timing each; returns the latencies of the refused ones
/// and how many were accepted (a free lane in one of their buckets).
#[inline(never)]
fn refused_inserts(f: &CuckooFilter, keys: &[u64]) -> (Histogram<u64>, usize) {
    let mut h = histogram();
    let mut accepted = 0;
    for k in keys {
        let t0 = Instant::now();
        let refused = f.insert(black_box(k)).is_err();
        let ns = t0.elapsed().as_nanos() as u64;
        if refused {
            h.saturating_record(ns);
        } else {
            accepted += 1;
        }
    }
    (h, accepted)
}

/// The cost of an insert refused at the growth cap (see the module docs).
fn refused_at_cap() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let capacity = env("KOEL_REFUSED_CAPACITY", 1_000_000);
    let tries = env("KOEL_REFUSED_TRIES", 200_000) as u64;
    let f = CuckooFilter::builder()
        .capacity(capacity)
        .seed(1)
        .max_false_positive_rate(2e-4)
        .build()
        .unwrap();
    let mut i = 0;
    let first = loop {
        if let Err(e) = f.insert(&key(i)) {
            break e;
        }
        i += 1;
    };
    let keys: Vec<u64> = (i + 1..i + 1 + tries).map(key).collect();
    let start = Instant::now();
    let (h, accepted) = refused_inserts(&f, &keys);
    let elapsed = start.elapsed();
    let s = f.stats();
    println!(
        "\nrefused inserts at the cap: capacity {capacity}, first refusal at load {:.4} ({first})",
        i as f64 / s.capacity as f64
    );
    println!("| tries | refused | accepted | p50 ns | p90 ns | p99 ns | max ns | total |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    println!(
        "| {tries} | {} | {accepted} | {} | {} | {} | {} | {:.2?} |",
        h.len(),
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.9),
        h.value_at_quantile(0.99),
        h.max(),
        elapsed
    );
}

fn main() {
    if std::env::args().any(|a| a == "refused") {
        refused_at_cap();
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // and expects a quick run.
    let bench = std::env::args().any(|a| a == "--bench");
    let items: u64 = std::env::var("KOEL_GROWTH_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench { 64_000_000 } else { 200_000 });
    let first = items / 64;
    let grow = || {
        CuckooFilter::builder()
            .capacity(first as usize)
            .seed(1)
            .build()
            .unwrap()
    };
    let presized = || {
        CuckooFilter::builder()
            .capacity(items as usize)
            .seed(1)
            .build()
            .unwrap()
    };

    let mut runs = Vec::new();
    runs.push(timed_koel("koel, grows 64x (1 thread)", &grow(), items));
    runs.push(timed_koel("koel, pre-sized (1 thread)", &presized(), items));
    {
        let mut f = ScalableCuckooFilterBuilder::new()
            .initial_capacity(first as usize)
            .false_positive_probability(0.001)
            .finish::<u64>();
        let mut h = histogram();
        let start = Instant::now();
        for i in 0..items {
            let k = key(i);
            let t0 = Instant::now();
            f.insert(&k);
            h.saturating_record(t0.elapsed().as_nanos() as u64);
        }
        let elapsed = start.elapsed();
        black_box(f.contains(&key(0)));
        runs.push(Run {
            name: "scalable_cuckoo_filter, grows (1 thread)".into(),
            elapsed,
            items,
            latency: Some(h),
            note: format!("{:.1} MB, FPR target 1e-3", f.bits() as f64 / 8e6),
        });
    }
    runs.push(two_threads("koel, grows 64x (2 threads)", &grow(), items));
    runs.push(two_threads(
        "koel, pre-sized (2 threads)",
        &presized(),
        items,
    ));

    println!(
        "\n{} inserts of distinct random u64 keys; latency in ns per insert\n",
        items
    );
    println!("| run | ns/insert | M inserts/s | p50 | p99 | p99.9 | max | after |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for r in &runs {
        println!("{}", r.row());
    }
    let ratio = |a: usize, b: usize| runs[a].elapsed.as_secs_f64() / runs[b].elapsed.as_secs_f64();
    println!(
        "\ngrowth cost (time with growth / time pre-sized): 1 thread {:.2}x, 2 threads {:.2}x",
        ratio(0, 1),
        ratio(3, 4)
    );
}
