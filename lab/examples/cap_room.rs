//! How far a filter built for 1,000 keys grows under each
//! `max_false_positive_rate`: keys until the first refusal (or 10M, that is
//! 10,000x), its levels, and its false-positive rate there: estimated
//! (`stats`) and measured over 1M absent keys (`KOEL_ABSENT` to change).
//!
//! ```text
//! cargo run --release -p koel-lab --example cap_room
//! ```

use koel::CuckooFilter;

#[path = "../../tests/common/splitmix.rs"]
mod splitmix64;

fn main() {
    println!("| cap | keys taken | growth | levels | FPR estimate | FPR measured | refusal |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for cap in [1.5e-4, 2e-4, 3e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2] {
        let f = CuckooFilter::builder()
            .capacity(1000)
            .max_false_positive_rate(cap)
            .seed(3)
            .build()
            .expect("filter");
        let mut refusal = String::from("none");
        for i in 0..10_000_000u64 {
            if let Err(e) = f.insert(&splitmix64::at(0x5eed, i)) {
                refusal = e.to_string();
                break;
            }
        }
        let s = f.stats();
        let absent: u64 =
            std::env::var("KOEL_ABSENT").map_or(1_000_000, |v| v.parse().expect("KOEL_ABSENT"));
        let hits = (0..absent)
            .filter(|&i| f.contains(&splitmix64::at(0xab5e, i)))
            .count();
        println!(
            "| {cap:e} | {} | {}x | {} | {:.2e} | {:.2e} | {refusal} |",
            f.len(),
            f.len() / 1000,
            s.levels,
            s.false_positive_rate,
            hits as f64 / absent as f64
        );
    }
}
