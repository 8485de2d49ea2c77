//! The dedup pipeline: a reader cuts the input into chunks at line ends,
//! N workers decide which records are new, a writer emits them in order.
//!
//! Exactness of "first occurrence wins" with N threads: records are
//! partitioned by key hash, and worker `j` runs `insert_unique` for the
//! records of partition `j` only, chunk after chunk, in input order. Every
//! occurrence of a key goes to the same worker, which sees them in input
//! order, so the first one is the one kept. Workers still share one filter
//! (and write different keys into it concurrently). Memory is bounded: a
//! few chunks in flight per thread, plus the filter.

use super::exact::ExactSet;
use crate::filters::CliFilter;
use crate::human::HumanBytes;
use crate::input::KeySpec;
use anyhow::{anyhow, Context};
use koel::InsertError;
use std::io::{Read, Write};
use std::ops::Range;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Where the key is.
    pub key: KeySpec,
    /// Bytes per chunk (a line longer than this makes its chunk longer).
    pub chunk_bytes: usize,
    /// `dedup --exact`: every key the filter takes for a duplicate is
    /// confirmed against an exact set of key hashes seeded with this (see
    /// the `exact` module), so the output is exactly the first record of
    /// each key.
    pub exact: Option<u64>,
}

/// Counts of a finished run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    pub bytes_in: u64,
    pub records_in: u64,
    /// Records written.
    pub records_out: u64,
    /// Records without the key field, passed through unchanged.
    pub missing_field: u64,
    /// Records that `insert_unique` reported new (with
    /// [`Options::exact`], plus the filter's false positives that the exact set caught).
    pub new_keys: u64,
    /// With [`Options::exact`]: the exact sets' distinct keys and bytes,
    /// and the new keys the filter took for duplicates, caught and kept.
    pub exact_keys: u64,
    pub exact_bytes: u64,
    pub false_positives_caught: u64,
    /// New keys the filter is expected to have taken for duplicates: each
    /// chunk's new keys times the filter's false-positive rate after it
    /// (a grown filter reaches its final rate early, so the mean of the
    /// first and last rates would say about half).
    pub expected_false_positives: f64,
}

/// Buffers of finished chunks, reused for the next ones: allocating and
/// freeing megabytes per chunk costs page faults and, in a multi-threaded
/// process, TLB shootdowns on every unmap (measured: a tenth of the time).
#[derive(Default)]
struct Pool {
    data: Mutex<Vec<Vec<u8>>>,
    prepared: Mutex<Vec<Prepared>>,
}

/// At most this many buffers of each kind wait in the pool.
const POOL_MAX: usize = 64;

/// Puts `buffers` into `pool`, up to [`POOL_MAX`] waiting there.
fn give<T>(pool: &Mutex<Vec<T>>, buffers: impl IntoIterator<Item = T>) {
    let mut pool = lock(pool);
    let room = POOL_MAX.saturating_sub(pool.len());
    pool.extend(buffers.into_iter().take(room));
}

/// A pool's lock; a panic elsewhere cannot leave a pool inconsistent.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One piece of input, cut after a newline (the last one may lack it).
struct Chunk<'p> {
    pool: &'p Pool,
    data: Vec<u8>,
    /// One piece per worker, cut at newlines, so that the workers find the
    /// records and keys of a chunk in parallel.
    pieces: Vec<Piece>,
}

/// A part of a chunk and its records, found once by the first worker to
/// need them (worker `i` starts with piece `i`).
struct Piece {
    range: Range<usize>,
    prepared: OnceLock<Prepared>,
}

impl Drop for Chunk<'_> {
    fn drop(&mut self) {
        give(&self.pool.data, [std::mem::take(&mut self.data)]);
        let prepared = self.pieces.drain(..).map(|p| p.prepared.into_inner());
        give(&self.pool.prepared, prepared.flatten());
    }
}

impl<'p> Chunk<'p> {
    /// `data` cut into about `n` pieces at newlines.
    fn new(pool: &'p Pool, data: Vec<u8>, n: usize) -> Chunk<'p> {
        let mut pieces = Vec::with_capacity(n);
        let mut start = 0;
        for i in 1..=n {
            let target = data.len() * i / n;
            let end = if i == n {
                data.len()
            } else if target <= start {
                continue;
            } else {
                memchr::memchr(b'\n', &data[target..]).map_or(data.len(), |p| target + p + 1)
            };
            if end > start {
                pieces.push(Piece {
                    range: start..end,
                    prepared: OnceLock::new(),
                });
                start = end;
            }
        }
        Chunk { pool, data, pieces }
    }

    /// The records and keys of piece `i`.
    fn prepared<F: CliFilter + ?Sized>(
        &self,
        i: usize,
        key: KeySpec,
        threads: usize,
        filter: &F,
    ) -> &Prepared {
        let piece = &self.pieces[i];
        piece.prepared.get_or_init(|| {
            let reuse = lock(&self.pool.prepared).pop();
            prepare(reuse, &self.data[piece.range.clone()], key, threads, filter)
        })
    }
}

/// A piece cut into records and keys (offsets relative to the piece).
#[derive(Default)]
struct Prepared {
    /// Where each record ends (exclusive, before its newline); the next
    /// record starts one byte later.
    ends: Vec<usize>,
    /// Keys of each worker's partition, in input order.
    parts: Vec<Vec<KeyRef>>,
    /// Records without the key field (passed through).
    passthrough: Vec<u32>,
}

/// A record's key: its record number and byte range in the chunk.
struct KeyRef {
    line: u32,
    range: Range<usize>,
}

/// Cuts `data` into records and their keys, partitioned by key hash.
fn prepare<F: CliFilter + ?Sized>(
    reuse: Option<Prepared>,
    data: &[u8],
    key: KeySpec,
    threads: usize,
    filter: &F,
) -> Prepared {
    let mut p = reuse.unwrap_or_default();
    p.ends.clear();
    p.passthrough.clear();
    p.parts.resize_with(threads, Vec::new);
    p.parts.iter_mut().for_each(Vec::clear);
    let mut start = 0;
    let mut line = 0u32;
    while start < data.len() {
        let end = memchr::memchr(b'\n', &data[start..]).map_or(data.len(), |i| start + i);
        p.ends.push(end);
        match key.key(&data[start..end]) {
            Some(k) => {
                let part = if threads == 1 {
                    0
                } else {
                    filter.owner(filter.hash_bytes(k), threads)
                };
                // `k` is a subslice of `data`: its offset locates it.
                let at = k.as_ptr() as usize - data.as_ptr() as usize;
                let range = at..at + k.len();
                p.parts[part].push(KeyRef { line, range });
            }
            None => p.passthrough.push(line),
        }
        line += 1;
        start = end + 1;
    }
    p
}

/// A worker's decision for one chunk: per piece, bit `i` set if record `i`
/// is kept.
struct Verdict {
    keep: Vec<Vec<u64>>,
    missing_field: u64,
    new_keys: u64,
    expected_false_positives: f64,
}

/// Chunks in flight per channel: enough to keep every thread busy.
const DEPTH: usize = 4;

/// Dedups `input` into `output` with `filter`. `progress` is called with
/// the bytes of each chunk read.
pub fn run<F: CliFilter + ?Sized>(
    filter: &F,
    input: &mut (dyn Read + Send),
    output: &mut (dyn Write + Send),
    options: Options,
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<Totals> {
    let threads = options.threads.max(1);
    let pool = Pool::default();
    std::thread::scope(|scope| {
        let mut to_workers = Vec::with_capacity(threads);
        let mut verdicts = Vec::with_capacity(threads);
        let mut workers = Vec::with_capacity(threads);
        for j in 0..threads {
            let (chunk_tx, chunk_rx) = sync_channel::<Arc<Chunk<'_>>>(DEPTH);
            let (verdict_tx, verdict_rx) = sync_channel::<Verdict>(DEPTH);
            to_workers.push(chunk_tx);
            verdicts.push(verdict_rx);
            workers.push(scope.spawn(move || {
                let exact = options.exact.map(ExactSet::new);
                work(filter, j, threads, options.key, exact, chunk_rx, verdict_tx)
            }));
        }
        let (to_writer, writer_rx) = sync_channel::<Arc<Chunk<'_>>>(DEPTH);
        let writer = scope.spawn(move || write(output, writer_rx, verdicts));

        let read_result = read(
            &pool,
            input,
            options.chunk_bytes,
            &to_workers,
            &to_writer,
            progress,
        );
        drop(to_workers);
        drop(to_writer);

        let mut exact = [0u64; 3];
        let mut worker_error = None;
        for w in workers {
            match w.join() {
                Ok(Ok(of_worker)) => (0..3).for_each(|i| exact[i] += of_worker[i]),
                Ok(Err(e)) => worker_error = worker_error.or(Some(e)),
                Err(_) => worker_error = worker_error.or(Some(anyhow!("a dedup worker panicked"))),
            }
        }
        let write_result = writer
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the output writer panicked")));
        // The root cause first: a full filter or a write error stops the
        // reader too, whose own error would only say "stopped".
        if let Some(e) = worker_error {
            return Err(e);
        }
        let mut totals = write_result?;
        totals.bytes_in = read_result?;
        [
            totals.exact_keys,
            totals.exact_bytes,
            totals.false_positives_caught,
        ] = exact;
        Ok(totals)
    })
}

/// Room for `more` bytes in `buf`, or an error naming the record that
/// does not fit: input without line ends grows one record (and chunk)
/// until memory runs out.
fn reserve(buf: &mut Vec<u8>, more: usize) -> anyhow::Result<()> {
    buf.try_reserve(more).map_err(|_| {
        anyhow!(
            "out of memory reading the input ({} more bytes for a buffer of {}: a record without line ends?)",
            HumanBytes(more as u64),
            HumanBytes(buf.len() as u64)
        )
    })
}

/// Reads chunks and hands each to every worker and to the writer. Returns
/// the bytes read; stops early (Ok) if a consumer has gone.
fn read<'p>(
    pool: &'p Pool,
    input: &mut (dyn Read + Send),
    chunk_bytes: usize,
    to_workers: &[SyncSender<Arc<Chunk<'p>>>],
    to_writer: &SyncSender<Arc<Chunk<'p>>>,
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<u64> {
    let mut total = 0u64;
    let mut carry: Vec<u8> = Vec::new();
    let mut eof = false;
    while !eof {
        // A buffer of the pool, with room for the chunk (an error, not an
        // abort, if there is no memory for it: a record longer than memory).
        let mut data = lock(&pool.data).pop().unwrap_or_default();
        data.clear();
        reserve(&mut data, chunk_bytes.max(carry.len().saturating_mul(2)))?;
        data.append(&mut carry);
        // Fill the chunk; if it holds no newline yet, keep reading (a line
        // longer than a chunk makes a longer chunk). The carried tail of
        // the previous chunk holds no newline.
        let mut has_newline = false;
        loop {
            // At least one byte: a read of none ends the input (`got == 0`
            // below), and a chunk of fewer than 4 bytes asked for none
            // once full, which dropped the rest of the input.
            let want = chunk_bytes
                .saturating_sub(data.len())
                .max(chunk_bytes / 4)
                .max(1);
            // Room first: `read_to_end` grows its buffer infallibly (an
            // abort) once it has none.
            reserve(&mut data, want)?;
            let before = data.len();
            (&mut *input).take(want as u64).read_to_end(&mut data)?;
            let got = data.len() - before;
            total += got as u64;
            progress(got as u64);
            if got == 0 {
                eof = true;
                break;
            }
            has_newline = has_newline || memchr::memchr(b'\n', &data[before..]).is_some();
            if data.len() >= chunk_bytes && has_newline {
                break;
            }
        }
        if !eof {
            if let Some(last) = memchr::memrchr(b'\n', &data) {
                reserve(&mut carry, data.len() - last - 1)?;
                carry.extend_from_slice(&data[last + 1..]);
                data.truncate(last + 1);
            }
        }
        if data.is_empty() {
            continue;
        }
        let chunk = Arc::new(Chunk::new(pool, data, to_workers.len()));
        for tx in to_workers {
            if tx.send(Arc::clone(&chunk)).is_err() {
                return Ok(total);
            }
        }
        if to_writer.send(chunk).is_err() {
            return Ok(total);
        }
    }
    Ok(total)
}

/// Worker `j`: `insert_unique` of partition `j`'s keys, chunk by chunk;
/// with `exact`, the keys the filter takes for duplicates are confirmed
/// (returns its keys, bytes and false positives caught).
fn work<F: CliFilter + ?Sized>(
    filter: &F,
    j: usize,
    threads: usize,
    key: KeySpec,
    mut exact: Option<ExactSet>,
    chunks: Receiver<Arc<Chunk<'_>>>,
    verdicts: SyncSender<Verdict>,
) -> anyhow::Result<[u64; 3]> {
    let mut caught = 0;
    let mut new: Vec<bool> = Vec::new();
    let mut at: Vec<(u32, u32)> = Vec::new();
    let mut spare_keys: Vec<&[u8]> = Vec::new();
    for chunk in chunks {
        // Cut our own piece first, in parallel with the other workers; the
        // others are cut by whoever gets there first (the rest wait).
        let prepared = |p: usize| chunk.prepared(p, key, threads, filter);
        if j < chunk.pieces.len() {
            prepared(j);
        }
        let mut keys_here = recycle(std::mem::take(&mut spare_keys));
        at.clear();
        for (p, piece) in chunk.pieces.iter().enumerate() {
            let data = &chunk.data[piece.range.clone()];
            for r in &prepared(p).parts[j] {
                keys_here.push(&data[r.range.clone()]);
                at.push((p as u32, r.line));
            }
        }
        new.clear();
        new.resize(keys_here.len(), false);
        filter
            .insert_unique_batch(&keys_here, &mut new)
            .map_err(|e| full_error(e, filter))?;
        if let Some(exact) = &mut exact {
            caught += confirm(filter, exact, &keys_here, &mut new)?;
        }
        let mut keep: Vec<Vec<u64>> = (0..chunk.pieces.len())
            .map(|p| vec![0u64; prepared(p).ends.len().div_ceil(64)])
            .collect();
        let mut new_keys = 0;
        for (&(p, line), _) in at.iter().zip(&new).filter(|(_, &is_new)| is_new) {
            keep[p as usize][line as usize / 64] |= 1 << (line % 64);
            new_keys += 1;
        }
        let mut missing_field = 0;
        if j == 0 {
            for (p, bits) in keep.iter_mut().enumerate() {
                let passthrough = &prepared(p).passthrough;
                for &line in passthrough {
                    bits[line as usize / 64] |= 1 << (line % 64);
                }
                missing_field += passthrough.len() as u64;
            }
        }
        spare_keys = recycle(keys_here);
        let verdict = Verdict {
            keep,
            missing_field,
            new_keys,
            expected_false_positives: new_keys as f64 * filter.false_positive_rate(),
        };
        if verdicts.send(verdict).is_err() {
            break; // the writer stopped; it reports why
        }
    }
    Ok(exact.map_or([0; 3], |e| {
        [e.len() as u64, e.memory_bytes() as u64, caught]
    }))
}

/// `--exact`: every key goes into the exact set; a key the filter took
/// for a duplicate (`new[i] == false`) that the set did not hold is a
/// false positive: it is kept, and inserted into the filter, so that the
/// filter never answers "new" for a key of the set. A key the filter
/// reports new is new (a filter has no false negatives). Returns the
/// false positives caught.
fn confirm<F: CliFilter + ?Sized>(
    filter: &F,
    exact: &mut ExactSet,
    keys: &[&[u8]],
    new: &mut [bool],
) -> anyhow::Result<u64> {
    let mut caught = 0;
    for (key, is_new) in keys.iter().zip(new.iter_mut()) {
        let first = exact.insert(key).map_err(|e| {
            anyhow!(
                "--exact: {e} (the exact set holds {} records); rerun without --exact to keep the filter alone",
                exact.len()
            )
        })?;
        if first && !*is_new {
            *is_new = true;
            caught += 1;
            filter
                .insert_hash(filter.hash_bytes(key))
                .map_err(|e| full_error(e, filter))?;
        }
    }
    Ok(caught)
}

/// An empty vector of slices with `v`'s allocation, for slices of another
/// lifetime (the collect of an emptied vector reuses its buffer in place).
fn recycle<'b>(mut v: Vec<&[u8]>) -> Vec<&'b [u8]> {
    v.clear();
    v.into_iter().map(|_| &[][..]).collect()
}

fn full_error<F: CliFilter + ?Sized>(e: InsertError, filter: &F) -> anyhow::Error {
    anyhow!(
        "{e}: the filter holds {} records; rerun with a larger --expected or --fpr (a --state keeps the bound it was made with)",
        filter.len()
    )
}

/// Writes the kept records of every chunk, in input order; counts all
/// but the bytes read.
fn write(
    output: &mut (dyn Write + Send),
    chunks: Receiver<Arc<Chunk<'_>>>,
    verdicts: Vec<Receiver<Verdict>>,
) -> anyhow::Result<Totals> {
    let mut w = Totals::default();
    let mut keep: Vec<Vec<u64>> = Vec::new();
    for chunk in chunks {
        keep.clear();
        for rx in &verdicts {
            // A worker that stopped has an error the caller reports.
            let Ok(v) = rx.recv() else {
                return Ok(w);
            };
            if keep.is_empty() {
                keep = v.keep;
            } else {
                for (mine, theirs) in keep.iter_mut().zip(&v.keep) {
                    for (a, b) in mine.iter_mut().zip(theirs) {
                        *a |= b;
                    }
                }
            }
            w.missing_field += v.missing_field;
            w.new_keys += v.new_keys;
            w.expected_false_positives += v.expected_false_positives;
        }
        // Contiguous kept records go out as one slice. Every worker sent
        // its verdict, so every piece was prepared.
        let data = &chunk.data[..];
        let (mut run_start, mut run_end) = (0usize, 0usize);
        for (piece, bits) in chunk.pieces.iter().zip(&keep) {
            let Some(prepared) = piece.prepared.get() else {
                return Ok(w);
            };
            let base = piece.range.start;
            let mut start = base;
            for (i, &end) in prepared.ends.iter().enumerate() {
                let next = (base + end + 1).min(data.len());
                if bits[i / 64] >> (i % 64) & 1 == 1 {
                    w.records_out += 1;
                    if run_end != start {
                        output
                            .write_all(&data[run_start..run_end])
                            .context("cannot write output")?;
                        run_start = start;
                    }
                    run_end = next;
                }
                start = next;
            }
            w.records_in += prepared.ends.len() as u64;
        }
        output
            .write_all(&data[run_start..run_end])
            .context("cannot write output")?;
        if run_end == data.len() && data.last().is_some_and(|&b| b != b'\n') {
            // The input's last record had no newline; every output record
            // gets one.
            output.write_all(b"\n").context("cannot write output")?;
        }
    }
    output.flush().context("cannot write output")?;
    Ok(w)
}
