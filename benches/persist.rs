//! Save and load speed of a 1 GiB cuckoo filter (2^27 buckets), to and
//! from a file in the page cache: the format's own cost (encoding,
//! checksum, payload checks), not the disk's.
//!
//! ```text
//! cargo bench --bench persist                                   # full run
//! cargo bench --bench persist -- --warm-up-time 0.5 --measurement-time 1 --sample-size 10
//! KOEL_PERSIST_BENCH_MIB=64 cargo bench --bench persist -- --test  # quick smoke run
//! ```
//!
//! `thrpt` is file bytes per second (GiB/s as criterion prints it).
//!
//! | id | what one iteration does |
//! | --- | --- |
//! | `write_to_file` | `write_to` into a truncated `File` (page cache, no sync) |
//! | `write_to_vec` | `write_to` into a pre-sized `Vec<u8>` (memory only) |
//! | `load` | `CuckooFilter::load(path)`: checks, allocates, reads into the table |
//! | `read_from_file` | `CuckooFilter::read_from(File)`: buffers the payload as it arrives, then copies |
//! | `inspect` | `koel::inspect(File)`: header and checksum, no filter |
//! | `save_synced` | `save(path)`: temp file, write, fsync, rename, fsync dir (disk speed) |
//! | `bloom_write_to_file` | a `BloomFilter` of about the same size, `write_to` a `File` |
//! | `bloom_load` | `BloomFilter::load(path)` |
//!
//! The filter holds 4M keys, a few in every 4 KiB page, so no page of the
//! table is the kernel's shared zero page (reading those would flatter the
//! save).

// `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use koel::{BloomFilter, CuckooFilter};
use std::fs::File;
use std::hint::black_box;

fn table_mib() -> usize {
    std::env::var("KOEL_PERSIST_BENCH_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024)
}

fn persist(c: &mut Criterion) {
    let mib = table_mib();
    let buckets = mib << 17; // 8-byte buckets
                             // The builder sizes for 95% of 4 tags per bucket.
    let f = CuckooFilter::builder()
        .capacity((buckets as f64 * 4.0 * 0.95) as usize)
        .seed(1)
        .build()
        .expect("the bench needs a table of KOEL_PERSIST_BENCH_MIB MiB");
    let keys = (mib << 12) as u64;
    let batch: Vec<u64> = (0..keys).collect();
    f.insert_many(&batch).expect("a 3% fill always fits");
    drop(batch);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.koel");
    f.save(&path).unwrap();
    let file_len = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "persist bench: {} MiB table, {} items, file {} bytes",
        f.memory_usage() >> 20,
        f.len(),
        file_len
    );

    let mut g = c.benchmark_group(format!("persist/{mib}MiB"));
    g.throughput(Throughput::Bytes(file_len));
    g.sample_size(10);

    g.bench_function("write_to_file", |b| {
        b.iter_batched(
            || File::create(&path).unwrap(),
            |file| f.write_to(file).unwrap(),
            BatchSize::PerIteration,
        )
    });
    let mut buf = Vec::with_capacity(file_len as usize);
    g.bench_function("write_to_vec", |b| {
        b.iter(|| {
            buf.clear();
            f.write_to(&mut buf).unwrap();
            black_box(buf.len())
        })
    });
    drop(buf);
    // The file in the page cache holds the filter again for the loads.
    f.write_to(File::create(&path).unwrap()).unwrap();
    g.bench_function("load", |b| {
        b.iter_with_large_drop(|| CuckooFilter::load(&path).unwrap())
    });
    g.bench_function("read_from_file", |b| {
        b.iter_with_large_drop(|| CuckooFilter::read_from(File::open(&path).unwrap()).unwrap())
    });
    g.bench_function("inspect", |b| {
        b.iter(|| koel::inspect(File::open(&path).unwrap()).unwrap())
    });
    g.bench_function("save_synced", |b| b.iter(|| f.save(&path).unwrap()));
    g.finish();

    let back = CuckooFilter::load(&path).unwrap();
    assert_eq!(back.len(), f.len(), "the bench's file loads back whole");
    drop((back, f));

    // A Bloom filter of about the same size (16 bits per item at 1e-3).
    let bloom = BloomFilter::builder()
        .capacity((mib << 20) / 2)
        .false_positive_rate(1e-3)
        .seed(2)
        .build()
        .expect("the bench needs a Bloom filter of KOEL_PERSIST_BENCH_MIB MiB");
    let batch: Vec<u64> = (0..keys).collect();
    bloom.insert_many(&batch);
    drop(batch);
    let path = dir.path().join("bench.bloom");
    bloom.save(&path).unwrap();
    let file_len = std::fs::metadata(&path).unwrap().len();
    eprintln!(
        "persist bench: Bloom filter of {} MiB, file {} bytes",
        bloom.memory_usage() >> 20,
        file_len
    );
    let mut g = c.benchmark_group(format!("persist/{mib}MiB"));
    g.throughput(Throughput::Bytes(file_len));
    g.sample_size(10);
    g.bench_function("bloom_write_to_file", |b| {
        b.iter_batched(
            || File::create(&path).unwrap(),
            |file| bloom.write_to(file).unwrap(),
            BatchSize::PerIteration,
        )
    });
    g.bench_function("bloom_load", |b| {
        b.iter_with_large_drop(|| BloomFilter::load(&path).unwrap())
    });
    g.finish();
}

criterion_group!(benches, persist);
criterion_main!(benches);
