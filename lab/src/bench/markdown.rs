//! The Markdown report of a bench run: a section per part of the matrix,
//! each with a table, the plot that goes with it, and what to read from it.

use super::charts::{millions, Plots};
use super::common::{FprCheck, OpMeasure};
use super::BenchResults;
use koel_cli::human::{self, HumanBytes, HumanCount};
use std::fmt::Write as _;

fn ns(v: u64) -> String {
    human::nanos(v)
}

fn rate(v: f64) -> String {
    format!("{} M/s", millions(v))
}

fn sci(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else {
        format!("{v:.2e}")
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "**NO**"
    }
}

fn fpr_cells(f: &FprCheck) -> String {
    format!(
        "{} / {} = {} | {} | {}",
        HumanCount(f.false_positives),
        HumanCount(f.trials),
        sci(f.measured),
        sci(f.estimate),
        yes(f.within_bound)
    )
}

fn latency_cells(m: &OpMeasure) -> String {
    format!(
        "{} | {} | {} | {} | {}",
        ns(m.pct("p50")),
        ns(m.pct("p95")),
        ns(m.pct("p99")),
        ns(m.pct("p99.9")),
        ns(m.latency.max_ns)
    )
}

/// The whole report.
pub fn report(r: &BenchResults, plots: &Plots, total_secs: f64) -> String {
    let mut s = String::new();
    let c = &r.config;
    let failed = r.failed_checks();
    let _ = writeln!(s, "# koel bench report\n");
    let _ = writeln!(
        s,
        "`koel-lab bench{}` — {} items per filter, {} never-inserted keys per FPR probe, seed {}, {} cores{}, {:.0} s in all.\n",
        if c.quick { " --quick" } else { "" },
        HumanCount(c.items),
        HumanCount(c.negatives),
        c.seed,
        r.cores,
        r.load_average
            .map_or(String::new(), |l| format!(" (load average {l:.1} at the start)")),
        total_secs
    );
    if failed.is_empty() {
        let _ = writeln!(
            s,
            "**All correctness checks held**: no false negative anywhere, every measured FPR within 4 sigma of the filter's estimate, every delete exact, every answer the same after save and load.\n"
        );
    } else {
        let _ = writeln!(s, "**Failed checks:**\n");
        for f in &failed {
            let _ = writeln!(s, "- {f}");
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "How to read it: per-operation latencies come from timing each call with `Instant::now()` (HdrHistogram, 3 significant digits) and include one clock read pair, about **{} ns** here; throughputs come from separate untimed loops unless a row says otherwise. The machine is shared, so expect noise of 10-30% between runs. A filter \"at rated capacity\" holds the number of items it was built for (`capacity(N)`), close to its load limit.\n",
        r.clock_overhead_ns
    );
    if c.quick {
        let _ = writeln!(
            s,
            "This is a `--quick` run: small filters that fit in cache, short concurrency runs. Its numbers show the shape, not the speed of large filters.\n"
        );
    }

    // 1 + 2
    let _ = writeln!(s, "## 1. Positive lookups\n");
    let _ = writeln!(
        s,
        "Both cuckoo layouts, and koel's blocked Bloom filter sized for the same items at each layout's false-positive rate (the Bloom filter cannot delete or grow, so the later rows leave it out; its load is its rated capacity).\n"
    );
    let _ = writeln!(
        s,
        "| filter | load | bits/item | p50 | p95 | p99 | p99.9 | max | throughput | batch (`contains_many`) | false negatives |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for l in &r.lookups {
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {} | {} | {} | {} |",
            l.layout,
            l.load_factor
                .map_or("rated".to_string(), |f| format!("{:.1}%", f * 100.0)),
            l.bits_per_item,
            latency_cells(&l.positive),
            rate(l.positive.ops_per_sec),
            rate(l.positive_batch_ops_per_sec),
            l.false_negatives
        );
    }
    let _ = writeln!(s, "\n![latency percentiles]({})\n", plots.latency);
    let _ = writeln!(s, "![throughput]({})\n", plots.throughput);

    let _ = writeln!(s, "## 2. Negative lookups and false-positive rate\n");
    let _ = writeln!(
        s,
        "| filter | p50 | p95 | p99 | p99.9 | max | throughput | batch | false positives | estimate (`false_positive_rate()`) | within 4 sigma |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for l in &r.lookups {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            l.layout,
            latency_cells(&l.negative),
            rate(l.negative.ops_per_sec),
            rate(l.negative_batch_ops_per_sec),
            fpr_cells(&l.fpr)
        );
    }
    s.push('\n');

    // 3
    let _ = writeln!(
        s,
        "## 3. Inserts (Growth::Fixed filter, up to rated capacity)\n"
    );
    let _ = writeln!(
        s,
        "| layout | inserts | mean (timed) | p50 | p99 | p99.9 | throughput | batch (`insert_many`) | displacements | per insert | failed | failure rate | load reached |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for i in &r.inserts {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} ns | {} | {} | {} | {} | {} | {} | {:.3} | {} | {} | {:.1}% |",
            i.layout,
            HumanCount(i.attempted),
            i.insert.mean_ns,
            ns(i.insert.pct("p50")),
            ns(i.insert.pct("p99")),
            ns(i.insert.pct("p99.9")),
            rate(i.ops_per_sec),
            rate(i.batch_ops_per_sec),
            HumanCount(i.displacements),
            i.displacements_per_insert,
            i.failed,
            sci(i.failure_rate),
            i.load_factor * 100.0
        );
    }
    s.push('\n');

    for l in r.lookups.iter().filter(|l| l.insert_ops_per_sec.is_some()) {
        let _ = writeln!(
            s,
            "{} (same keys, for comparison): `insert` {}, `insert_many` {}; it never fails or displaces.\n",
            l.layout,
            rate(l.insert_ops_per_sec.unwrap_or(0.0)),
            rate(l.insert_batch_ops_per_sec.unwrap_or(0.0))
        );
    }

    // 4
    let _ = writeln!(s, "## 4. Deletes\n");
    let _ = writeln!(
        s,
        "Half of the inserted keys are removed; the other half must all stay visible. A removed key can still answer `true` when another key's tag matches it: that is a false positive, checked against the estimate.\n"
    );
    let _ = writeln!(
        s,
        "| layout | removes | success rate | p50 | p99 | kept keys lost | removed keys still `true` | estimate | within 4 sigma | `len()` exact |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for d in &r.deletes {
        let _ = writeln!(
            s,
            "| {} | {} | {:.4}% | {} | {} | {} | {} | {} |",
            d.layout,
            HumanCount(d.remove.ops),
            d.success_rate * 100.0,
            ns(d.remove.pct("p50")),
            ns(d.remove.pct("p99")),
            d.false_negatives,
            fpr_cells(&d.removed_still_present),
            yes(d.len_matches)
        );
    }
    let _ = writeln!(
        s,
        "\n**Same-tag collision case.** Keys `a` and `b` with equal tag and equal bucket pair (found with `placement(hash(key))` on a {}-item filter) are one value to the filter. For each pair, on a fresh filter: insert both, `remove(a)`, then look both up; then `remove(b)`.\n",
        200
    );
    let _ = writeln!(
        s,
        "| layout | pairs (keys searched) | `remove(a)` true | `b` still visible | `a` still answers `true` | both gone after `remove(b)` |\n| --- | --- | --- | --- | --- | --- |"
    );
    for d in &r.deletes {
        let t = &d.same_tag;
        let _ = writeln!(
            s,
            "| {} | {} ({}) | {} | {} | {} | {} |",
            d.layout,
            t.pairs,
            HumanCount(t.keys_searched),
            t.first_remove_ok,
            t.other_still_visible,
            t.removed_still_visible,
            t.both_gone_after_second_remove
        );
    }
    let _ = writeln!(
        s,
        "\nRemoving either key removes one copy of the shared tag, so the other key stays visible (no false negative) and the removed key keeps answering `true` until the second copy goes: deletion is exact on the multiset of tags, not on keys. Removing a key that was never inserted can therefore delete another key's tag; callers must only remove keys they inserted.\n"
    );

    // 5
    let _ = writeln!(s, "## 5. Load factor vs insert failures\n");
    let _ = writeln!(
        s,
        "| layout | slots | first failure at load | failing at 90% offered | at 95% | at 97% | at 100% | highest load |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for curve in &r.load_curves {
        let at = |x: f64| {
            curve.at(x).map_or("-".to_string(), |p| {
                format!("{:.2}%", p.step_failure_rate * 100.0)
            })
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {:.2}% |",
            curve.layout,
            HumanCount(curve.slots),
            curve
                .first_failure_load
                .map_or("none".into(), |l| format!("{:.2}%", l * 100.0)),
            at(0.90),
            at(0.95),
            at(0.97),
            at(1.0),
            curve.max_load * 100.0
        );
    }
    let _ = writeln!(
        s,
        "\n\"failing at X% offered\" is the share of failed inserts in the step (1% of the slots, 0.25% above 90%) ending at X% of the slots offered.\n\n![load curve]({})\n",
        plots.load_curve
    );

    // 6
    let _ = writeln!(s, "## 6. Concurrency\n");
    let _ = writeln!(
        s,
        "Each point is a `koel stress` run of {:.2} s on one shared filter of {} keys (half inserted first), uniform keys; its ground-truth checker counts false negatives. CAS retries (a bucket's compare-and-swap that lost a race) are `stats()` deltas over the run (prefill included); lookups count none, since they never write shared memory. Read latency: 1 op in 64 timed.\n",
        c.concurrency_duration.as_secs_f64(),
        HumanCount(c.items)
    );
    let _ = writeln!(
        s,
        "| layout | mix | threads | throughput | vs fewest threads | read p50 | read p99 | CAS retries | CAS retries / M ops | false negatives |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for x in &r.concurrency {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2}x | {} | {} | {} | {:.1} | {} |",
            x.layout,
            x.mix,
            x.threads,
            rate(x.ops_per_sec),
            x.speedup,
            ns(x.read_p50_ns),
            ns(x.read_p99_ns),
            HumanCount(x.cas_retries),
            x.retries_per_million_ops,
            x.false_negatives
        );
    }
    let _ = writeln!(
        s,
        "\nOn a machine with {} cores, runs with more threads than cores measure oversubscription, not scaling.{}\n\n![concurrency]({})\n",
        r.cores,
        match r.load_average {
            Some(l) if l > r.cores as f64 => format!(
                " The load average was {l:.1} when this run started, above the core count: other processes competed for the cores, so these rates understate what the threads reach on an idle machine."
            ),
            _ => String::new(),
        },
        plots.concurrency
    );

    // 7
    let _ = writeln!(s, "## 7. Restart (save / load)\n");
    let _ = writeln!(
        s,
        "Each filter at rated capacity is saved to a file (`save`: temporary file, fsync, rename, fsync of the directory) and loaded back (`load`, from the page cache), written to and read from memory (`write_to` / `read_from`), checked with `inspect`, and asked every inserted key and {} never-inserted ones, like the original. A copy with one payload byte flipped must be refused.\n",
        HumanCount(c.negatives)
    );
    let _ = writeln!(
        s,
        "| layout | file | save | load | write_to (memory) | read_from (memory) | checksum valid | header items | corrupted copy refused | probes | answers changed |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for x in &r.restart {
        let ms = |secs: f64| human::nanos((secs * 1e9) as u64);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            x.layout,
            HumanBytes(x.file_bytes),
            ms(x.save_secs),
            ms(x.load_secs),
            ms(x.write_to_secs),
            ms(x.read_from_secs),
            yes(x.checksum_valid),
            x.header_items
                .map_or("-".to_string(), |n| HumanCount(n).to_string()),
            yes(x.corruption_refused),
            HumanCount(x.probes),
            x.mismatches
        );
    }
    s.push('\n');

    // 8
    let _ = writeln!(s, "## 8. Growth\n");
    let _ = writeln!(
        s,
        "A filter built for 1/{} of the items takes all of them on one thread and doubles online; after each insert the same thread looks up an earlier key. A doubling window lasts from the insert that finds the table full until the successor is installed; `memory_usage()` (sampled after every insert) counts both tables meanwhile.\n",
        super::growth::START_DIVISOR
    );
    let _ = writeln!(
        s,
        "| layout | start capacity | doublings | inserts in windows | insert p50 / p99 / max, steady | in windows | insert rate steady / windows | lookup p50 / p99, steady | in windows | memory peak | final | peak / final | final FPR estimate | failed / lost |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for g in &r.growth {
        let p = |l: &koel_cli::latency::LatencySummary, name: &str| {
            l.percentiles_ns
                .iter()
                .find(|x| x.0 == name)
                .map_or(0, |x| x.1)
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} / {} / {} | {} / {} / {} | {} / {} | {} / {} | {} / {} | {} | {} | {:.2} | {} | {} / {} |",
            g.layout,
            HumanCount(g.start_capacity),
            g.generations,
            HumanCount(g.window_inserts),
            ns(p(&g.insert_steady, "p50")),
            ns(p(&g.insert_steady, "p99")),
            ns(g.insert_steady.max_ns),
            ns(p(&g.insert_window, "p50")),
            ns(p(&g.insert_window, "p99")),
            ns(g.insert_window.max_ns),
            rate(g.insert_rate_steady),
            rate(g.insert_rate_window),
            ns(p(&g.lookup_steady, "p50")),
            ns(p(&g.lookup_steady, "p99")),
            ns(p(&g.lookup_window, "p50")),
            ns(p(&g.lookup_window, "p99")),
            HumanBytes(g.memory_peak),
            HumanBytes(g.memory_final),
            g.memory_peak as f64 / g.memory_final.max(1) as f64,
            sci(g.final_false_positive_rate),
            g.failed_inserts,
            g.false_negatives
        );
    }
    let _ = writeln!(
        s,
        "\nThe 12-bit layout is allowed `max_false_positive_rate(0.1)` here so that it can double 5 times like the 16-bit one (under the default 1e-2 it stops at 4x). The maximum insert latency inside a window includes allocating the doubled table.\n"
    );
    for g in &plots.growth {
        let _ = writeln!(s, "![growth]({g})\n");
    }

    // 9
    let _ = writeln!(s, "## 9. Key distributions\n");
    let _ = writeln!(
        s,
        "One stream of {} operations per distribution through `insert_unique` into a 16-bit filter sized for the stream (so filters of duplicate-rich streams are lightly loaded), then every stream key looked up, then {} never-inserted keys of the same family.\n",
        HumanCount(c.items),
        HumanCount(c.negatives)
    );
    let _ = writeln!(
        s,
        "| distribution | keys | distinct | answered new | `len()` | insert_unique | contains | p50 | p99 | false negatives | false positives | estimate | within 4 sigma |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for d in &r.distributions {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            d.name,
            d.description,
            HumanCount(d.distinct),
            HumanCount(d.answered_new),
            HumanCount(d.len),
            rate(d.insert_unique_ops_per_sec),
            rate(d.lookup.ops_per_sec),
            ns(d.lookup.pct("p50")),
            ns(d.lookup.pct("p99")),
            d.false_negatives,
            fpr_cells(&d.fpr)
        );
    }
    let _ = writeln!(
        s,
        "\n`answered new` and `len()` can fall short of `distinct` by the keys whose tag and buckets matched an earlier key (about FPR x distinct): `insert_unique` then says \"seen\". Hot (zipf) and duplicate-heavy streams hit the same buckets again and again, so they run from cache.\n\n![distributions]({})\n",
        plots.distributions
    );

    let _ = writeln!(s, "## Run time per part\n");
    let _ = writeln!(s, "| part | seconds |\n| --- | --- |");
    for (name, secs) in &r.section_secs {
        let _ = writeln!(s, "| {name} | {secs:.1} |");
    }
    let _ = writeln!(s, "\nRaw numbers: `results.json` next to this file.");
    s
}
