//! Row 9: key distributions. One stream of `items` operations per
//! distribution, through `insert_unique` (so duplicates are answered "seen
//! before") into a 16-bit filter sized for the stream; then every key of
//! the stream is looked up (no false negative allowed) and as many
//! never-inserted keys of the same family measure the FPR.

use super::common::{
    measure_read, try_vec, uniform_key, FprCheck, Layout, OpMeasure, UNTIMED_PASSES,
};
use super::Config;
use koel::{CuckooFilter, Growth};
use koel_cli::keys::{FastRng, KeyDist, KeyGen};
use std::hash::Hash;
use std::time::Instant;

/// One distribution's results.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DistributionRow {
    /// The distribution's name.
    pub name: String,
    /// What its keys look like.
    pub description: String,
    /// Operations in the stream.
    pub stream: u64,
    /// Distinct keys in the stream.
    pub distinct: u64,
    /// `insert_unique` calls per second (wall time of the stream, best of a
    /// few runs on fresh filters).
    pub insert_unique_ops_per_sec: f64,
    /// `insert_unique` calls that answered "new".
    pub answered_new: u64,
    /// `len()` after the stream (`<= distinct`; lower only by keys whose
    /// tag collided with an earlier key's, about FPR x distinct).
    pub len: u64,
    /// Lookups of the stream's keys, in stream order.
    pub lookup: OpMeasure,
    /// Stream keys answered absent (must be 0).
    pub false_negatives: u64,
    /// Never-inserted keys of the same family.
    pub fpr: FprCheck,
}

/// Keys of one distribution: a stream, and negatives of the same family.
enum Keys {
    Ints {
        stream: Vec<u64>,
        negatives: Vec<u64>,
    },
    Bytes {
        stream: Strings,
        negatives: Strings,
    },
}

/// Byte-string keys in one buffer.
struct Strings {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Strings {
    fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    fn slices(&self) -> anyhow::Result<Vec<&[u8]>> {
        let mut v = try_vec(self.ends.len() as u64)?;
        let mut start = 0;
        v.extend(self.ends.iter().map(|&end| {
            let s = &self.bytes[start..end];
            start = end;
            s
        }));
        Ok(v)
    }
}

/// `f(i)` for `i` in `range`, in a fallibly allocated vector.
fn ints(range: std::ops::Range<u64>, f: impl FnMut(u64) -> u64) -> anyhow::Result<Vec<u64>> {
    let mut v = try_vec(range.end - range.start)?;
    v.extend(range.map(f));
    Ok(v)
}

/// `make(i)` for `i` in `range`, in one fallibly allocated buffer.
fn strings<B: AsRef<[u8]>>(
    range: std::ops::Range<u64>,
    mut make: impl FnMut(u64) -> B,
) -> anyhow::Result<Strings> {
    let count = range.end - range.start;
    let mut s = Strings {
        // About 40 bytes per key; the buffer grows if they are longer.
        bytes: try_vec(count.saturating_mul(40))?,
        ends: try_vec(count)?,
    };
    for i in range {
        s.push(make(i).as_ref());
    }
    Ok(s)
}

/// Runs every distribution.
///
/// # Errors
///
/// A filter or key buffer cannot be allocated.
pub fn run(cfg: &Config) -> anyhow::Result<Vec<DistributionRow>> {
    let n = cfg.items;
    let neg = cfg.negatives;
    let seed = cfg.seed ^ 0xd157;
    let mut rows = Vec::new();

    // Uniform random 64-bit keys, each once.
    let stream = ints(0..n, |i| uniform_key(seed, i))?;
    let negatives = ints(n..n + neg, |i| uniform_key(seed, i))?;
    rows.push(measure(
        cfg,
        "uniform",
        "random 64-bit integers, each once",
        Keys::Ints { stream, negatives },
    )?);

    // Sequential integers: neighbouring keys differ in a bit or two.
    let stream = ints(0..n, |i| i)?;
    let negatives = ints(n..n + neg, |i| i)?;
    rows.push(measure(
        cfg,
        "sequential",
        "integers 0, 1, 2, ... (absent: the next ones)",
        Keys::Ints { stream, negatives },
    )?);

    // Similar strings: one prefix, a counter at the end.
    let url = |i: u64| format!("https://koel.test/item/{i}");
    let stream = strings(0..n, url)?;
    let negatives = strings(n..n + neg, url)?;
    rows.push(measure(
        cfg,
        "similar strings",
        "\"https://koel.test/item/N\", N counting up (24-30 bytes)",
        Keys::Bytes { stream, negatives },
    )?);

    // Variable-length random strings: 1 to 64 bytes. A leading counter
    // makes them distinct; the rest is random.
    let var = |i: u64| {
        let mut rng = FastRng::new(seed ^ i);
        let len = 1 + rng.below(64) as usize;
        let mut key = i.to_le_bytes().to_vec();
        while key.len() < len + 8 {
            key.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        key.truncate(len + 8);
        key
    };
    let stream = strings(0..n, var)?;
    let negatives = strings(n..n + neg, var)?;
    rows.push(measure(
        cfg,
        "variable-length",
        "random bytes, 9 to 72 bytes long",
        Keys::Bytes { stream, negatives },
    )?);

    // Hot keys: a Zipf(0.99) stream over n keys.
    let mut gen = KeyGen::new(KeyDist::Zipf(0.99), n, 0, 1, seed)?;
    let mut rng = FastRng::new(seed);
    let stream = ints(0..n, |_| uniform_key(seed, gen.next(&mut rng)))?;
    let negatives = ints(n..n + neg, |i| uniform_key(seed, i))?;
    rows.push(measure(
        cfg,
        "zipf 0.99",
        "hot keys: Zipf(0.99) draws over N keys",
        Keys::Ints { stream, negatives },
    )?);

    // Duplicate-heavy: every key about 16 times, in random order.
    let distinct = (n / 16).max(1);
    let mut rng = FastRng::new(seed ^ 16);
    let stream = ints(0..n, |_| uniform_key(seed, rng.below(distinct)))?;
    let negatives = ints(n..n + neg, |i| uniform_key(seed, i))?;
    rows.push(measure(
        cfg,
        "duplicate-heavy",
        "N/16 keys, each about 16 times, random order",
        Keys::Ints { stream, negatives },
    )?);
    Ok(rows)
}

fn measure(
    cfg: &Config,
    name: &str,
    description: &str,
    keys: Keys,
) -> anyhow::Result<DistributionRow> {
    let new_filter = || Layout::ALL[0].build(cfg.items as usize, Growth::Double, cfg.seed);
    match keys {
        Keys::Ints { stream, negatives } => {
            let distinct = count_distinct(&stream)?;
            run_stream(new_filter, name, description, &stream, &negatives, distinct)
        }
        Keys::Bytes { stream, negatives } => {
            let (stream, negatives) = (stream.slices()?, negatives.slices()?);
            // Byte keys of the streams built above are distinct by construction.
            let distinct = stream.len() as u64;
            run_stream(new_filter, name, description, &stream, &negatives, distinct)
        }
    }
}

fn count_distinct(keys: &[u64]) -> anyhow::Result<u64> {
    let mut v: Vec<u64> = try_vec(keys.len() as u64)?;
    v.extend_from_slice(keys);
    v.sort_unstable();
    v.dedup();
    Ok(v.len() as u64)
}

/// Streams `stream` through `insert_unique` of fresh filters (best of a few
/// runs for the rate), then measures lookups on the last one.
fn run_stream<K: Hash>(
    new_filter: impl Fn() -> anyhow::Result<CuckooFilter>,
    name: &str,
    description: &str,
    stream: &[K],
    negatives: &[K],
    distinct: u64,
) -> anyhow::Result<DistributionRow> {
    let mut insert_secs = f64::INFINITY;
    let mut answered_new = 0u64;
    let mut filter = new_filter()?;
    for pass in 0..UNTIMED_PASSES {
        if pass > 0 {
            filter = new_filter()?;
        }
        answered_new = 0;
        let start = Instant::now();
        for key in stream {
            // The filter grows if needed, so an error is not expected; a
            // failed insert shows up as a false negative below.
            answered_new += u64::from(filter.insert_unique(key).unwrap_or(false));
        }
        insert_secs = insert_secs.min(start.elapsed().as_secs_f64().max(1e-9));
    }
    let lookup = measure_read("contains (stream)", stream, |k| filter.contains(k));
    let negative = measure_read("contains (absent)", negatives, |k| filter.contains(k));
    Ok(DistributionRow {
        name: name.to_string(),
        description: description.to_string(),
        stream: stream.len() as u64,
        distinct,
        insert_unique_ops_per_sec: stream.len() as f64 / insert_secs,
        answered_new,
        len: filter.len() as u64,
        false_negatives: lookup.ops - lookup.hits,
        lookup,
        fpr: FprCheck::new(negative.hits, negative.ops, filter.false_positive_rate()),
    })
}
