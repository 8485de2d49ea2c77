//! How long single inserts take while a filter grows (issue 17: "migration
//! work per operation bounded"): one thread inserts `n * growth` keys into
//! a filter built for `n` and records each insert's time, beside a filter
//! built for all of them from the start. Prints percentiles and the
//! slowest insert of each; with `KOEL_SLOW` set, also which inserts took
//! over a millisecond (to match them with steps, doublings and page
//! faults).
//!
//! ```text
//! cargo run --release -p koel-lab --example insert_latency -- 1000 10000
//! ```

use hdrhistogram::Histogram;
use koel::CuckooFilter;
use std::time::Instant;

#[path = "../../tests/common/splitmix.rs"]
mod splitmix64;

/// Inserts `keys` keys into `f`, timing each.
fn fill(f: &CuckooFilter, keys: u64) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(3).expect("histogram");
    let mut slow = Vec::new();
    let key = |i: u64| splitmix64::at(0x243F_6A88_85A3_08D3, i);
    for i in 0..keys {
        let k = key(i);
        let t = Instant::now();
        f.insert(&k).expect("growth stops only at memory");
        let ns = t.elapsed().as_nanos() as u64;
        h.record(ns).expect("in range");
        if ns > 1_000_000 {
            slow.push((i, ns));
        }
    }
    if std::env::var_os("KOEL_SLOW").is_some() {
        eprintln!("slow inserts (index, ns): {slow:?}");
    }
    h
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).map_or(1000, |a| a.parse().expect("n"));
    let growth: u64 = args.get(2).map_or(10_000, |a| a.parse().expect("growth"));
    let keys = n * growth;
    println!(
        "| filter | keys | p50 ns | p99 ns | p99.9 ns | p99.99 ns | max us | inserts over 100 us |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, built_for) in [("grown", n), ("built for all", keys)] {
        let f = CuckooFilter::builder()
            .capacity(built_for as usize)
            .seed(7)
            .build()
            .expect("filter");
        let h = fill(&f, keys);
        let over = h.count_between(100_000, h.max());
        println!(
            "| {name} from {built_for} | {keys} | {} | {} | {} | {} | {:.1} | {over} |",
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99),
            h.value_at_quantile(0.999),
            h.value_at_quantile(0.9999),
            h.max() as f64 / 1000.0,
        );
    }
}
