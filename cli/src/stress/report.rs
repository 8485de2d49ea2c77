//! The results of a stress run, as text or JSON.

use super::check::CheckReport;
use crate::filters::Snapshot;
use crate::human::{self, HumanBytes, HumanCount};
use crate::latency::LatencySummary;
use std::fmt;

/// Everything a stress run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct StressReport {
    pub filter: String,
    pub threads: usize,
    /// Distinct keys.
    pub items: u64,
    pub capacity: u64,
    pub keys: String,
    pub mix: String,
    /// Seed of the key streams (rerun with `--seed` to repeat them).
    pub seed: u64,
    pub prefilled: u64,
    pub prefill_secs: f64,
    /// Table generation when the timed run started (after the prefill).
    pub start_generation: u32,
    pub duration_secs: f64,
    /// Filter operations in the timed run.
    pub ops: u64,
    pub ops_per_sec: f64,
    pub per_op: Vec<OpReport>,
    /// One operation in this many was timed.
    pub latency_sample_every: u64,
    pub latency: Vec<LatencySummary>,
    pub snapshot: Snapshot,
    /// Table doublings seen during the run.
    pub growth_events: Vec<GrowthEvent>,
    /// Throughput (and load, where sampled) every 100 ms.
    pub timeline: Vec<TimelinePoint>,
    pub check: CheckReport,
}

/// Count and rate of one operation.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OpReport {
    pub op: String,
    pub count: u64,
    pub per_sec: f64,
}

/// A table doubling, as seen by the sampler.
#[derive(Clone, Debug, serde::Serialize)]
pub struct GrowthEvent {
    /// Seconds into the run when the sampler saw the new generation
    /// (within 100 ms after the doubling).
    pub t_secs: f64,
    pub generation: u32,
    /// Items then (doublings seen in one tick share the count).
    pub len: u64,
}

/// Throughput over one sampling interval.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TimelinePoint {
    /// Seconds into the run at the end of the interval.
    pub t_secs: f64,
    pub ops_per_sec: f64,
    /// Load factor, on the ticks where it was sampled.
    pub load_factor: Option<f64>,
}

impl fmt::Display for StressReport {
    fn fmt(&self, s: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            s,
            "koel stress: {}; {} threads; {} keys ({}); mix {}",
            self.filter,
            self.threads,
            HumanCount(self.items),
            self.keys,
            self.mix
        )?;
        write!(
            s,
            "prefill      {} keys in {:.2} s",
            HumanCount(self.prefilled),
            self.prefill_secs
        )?;
        if self.start_generation > 0 {
            write!(s, " (the table doubled {} times)", self.start_generation)?;
        }
        writeln!(s)?;
        writeln!(
            s,
            "throughput   {} ops in {:.2} s: {}ops/s",
            HumanCount(self.ops),
            self.duration_secs,
            human::rate(self.ops_per_sec)
        )?;
        for op in &self.per_op {
            writeln!(
                s,
                "  {:<10} {:>14} {:>10}ops/s",
                op.op,
                HumanCount(op.count).to_string(),
                human::rate(op.per_sec)
            )?;
        }
        write!(s, "latency     ")?;
        for (name, _) in crate::latency::PERCENTILES {
            write!(s, " {name:>9}")?;
        }
        writeln!(
            s,
            " {:>9}   (1 op in {} timed)",
            "max", self.latency_sample_every
        )?;
        for l in &self.latency {
            write!(s, "  {:<10}", l.op)?;
            for (_, v) in &l.percentiles_ns {
                write!(s, " {:>9}", human::nanos(*v))?;
            }
            writeln!(s, " {:>9}", human::nanos(l.max_ns))?;
        }
        let snap = &self.snapshot;
        writeln!(
            s,
            "filter       {} items{}, {}",
            HumanCount(snap.len as u64),
            snap.load_text(),
            HumanBytes(snap.memory_bytes as u64)
        )?;
        write!(
            s,
            "             generation {}, growth events {}",
            snap.generation,
            self.growth_events.len()
        )?;
        if let Some(d) = snap.displacements {
            write!(s, ", displacements {}", HumanCount(d))?;
        }
        writeln!(
            s,
            ", inserts refused {}",
            HumanCount(self.check.inserts_refused_full)
        )?;
        // The sampler sees growth once per tick: doublings seen in one tick
        // are one line, with the items counted then (not at each doubling).
        for seen in self.growth_events.chunk_by(|a, b| a.t_secs == b.t_secs) {
            let (first, last) = (&seen[0], &seen[seen.len() - 1]);
            let generations = if seen.len() == 1 {
                format!("generation {}", last.generation)
            } else {
                format!("generations {} to {}", first.generation, last.generation)
            };
            writeln!(
                s,
                "             grew to {generations} by {:.1} s ({} items then)",
                last.t_secs,
                HumanCount(last.len)
            )?;
        }
        let c = &self.check;
        write!(s, "fpr          expected {:.1e}", snap.false_positive_rate)?;
        match c.measured_fpr() {
            Some(m) => writeln!(
                s,
                ", measured {:.1e} ({} of {} never-inserted keys)",
                m,
                HumanCount(c.fpr_probe_hits),
                HumanCount(c.fpr_probes)
            )?,
            None => writeln!(s, ", not measured")?,
        }
        let verdict = if c.false_negatives() == 0 {
            "OK: 0 false negatives".to_string()
        } else {
            format!(
                "FAILED: {} false negatives ({} in reads, {} in inserts/removes, {} in the final sweep)",
                HumanCount(c.false_negatives()),
                HumanCount(c.live_false_negatives),
                HumanCount(c.write_false_negatives),
                HumanCount(c.final_false_negatives)
            )
        };
        writeln!(
            s,
            "check        {verdict}; {} reads of present keys checked, {} present keys swept at the end",
            HumanCount(c.checked_reads),
            HumanCount(c.final_present_keys)
        )?;
        Ok(())
    }
}
