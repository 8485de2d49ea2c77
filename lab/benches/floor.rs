//! The memory floor of this machine: what a random 8-byte load costs, by
//! working-set size, so every koel figure can be quoted as a ratio to it
//! (a cuckoo lookup reads two random cache lines, a blocked Bloom lookup
//! one).
//!
//! ```text
//! cargo bench -p koel-lab --bench floor                     # 256 KiB .. 4 GiB, ~3-4 min
//! KOEL_FLOOR_MAX=256M cargo bench -p koel-lab --bench floor # stop at 256 MiB
//! KOEL_FLOOR_SIZES=16M,32M cargo bench -p koel-lab --bench floor -- 2m/  # these sizes only
//! cargo bench -p koel-lab --bench floor -- --test           # smoke run
//! ```
//!
//! One buffer per size and page mode, sizes 256 KiB, 1, 4, 16, 64, 256 MiB,
//! 1 and 4 GiB (powers of 4). Every load reads the first word of a random
//! cache line. Ids read `{pages}/{size}/{variant}`; `time` is ns per load:
//!
//! | variant | what |
//! | --- | --- |
//! | `dependent` | pointer chase through one random cycle over all lines: each address comes from the previous load, so this is the full load-to-use latency |
//! | `independent` | addresses from a counter hash, the loads summed: the CPU overlaps as many misses as it can track |
//! | `independent_prefetch` | the same with a software prefetch 16 loads ahead |
//! | `pair` | two independent loads per op, summed (`time` per pair): one cuckoo lookup with no synchronisation and no work at all, the lower bound of any single-call lookup that reads two random lines |
//! | `pair_fenced` | two independent loads then a `SeqCst` fence, per op (`time` per pair): the shape of one single-call koel lookup, whose epoch pin is a full barrier that stops the next lookup's misses from overlapping |
//!
//! The floor of "two independent random cache lines" is twice the
//! `independent` time; `pair_fenced` is the floor of one non-batched
//! lookup.
//!
//! | pages | what |
//! | --- | --- |
//! | `4k` | `madvise(MADV_NOHUGEPAGE)`: 4 KiB pages even in THP `always` mode |
//! | `2m` | 2 MiB-aligned and `madvise(MADV_HUGEPAGE)`; stderr shows how much the kernel really backed with huge pages (`AnonHugePages`) |
//!
//! Off Linux there is one mode, `default`, from the global allocator.

// `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use std::hint::black_box;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

const LINE_WORDS: usize = 8;
const PREFETCH_AHEAD: usize = 16;

#[path = "../../tests/common/splitmix.rs"]
mod splitmix64;

/// Element `i` of one splitmix64 sequence: a bijection of `i` (the same
/// keys as the root benches' `common::splitmix`).
fn splitmix(i: u64) -> u64 {
    splitmix64::at(0x243F_6A88_85A3_08D3, i)
}

/// A zeroed buffer of `u64` words, touched page by page before use.
struct Buffer {
    ptr: *mut u64,
    words: usize,
    #[cfg(target_os = "linux")]
    map: (*mut libc::c_void, usize),
    #[cfg(not(target_os = "linux"))]
    vec: Vec<u64>,
}

impl Buffer {
    #[cfg(target_os = "linux")]
    fn new(bytes: usize, huge: bool) -> Buffer {
        const HUGE: usize = 2 << 20;
        let len = bytes + HUGE;
        // SAFETY: an anonymous private mapping at an address of the
        // kernel's choice aliases no existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(base != libc::MAP_FAILED, "mmap of {bytes} bytes failed");
        let skip = base.cast::<u8>().align_offset(HUGE);
        // SAFETY: `skip < HUGE`, so the `bytes` after it are mapped.
        let start = unsafe { base.cast::<u8>().add(skip) };
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: `start` is page-aligned and `bytes` from it are ours.
        if unsafe { libc::madvise(start.cast(), bytes, advice) } != 0 {
            eprintln!("madvise({advice}) refused; pages as the kernel chooses");
        }
        Buffer {
            ptr: start.cast(),
            words: bytes / 8,
            map: (base, len),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn new(bytes: usize, _huge: bool) -> Buffer {
        let mut vec = vec![0u64; bytes / 8];
        Buffer {
            ptr: vec.as_mut_ptr(),
            words: vec.len(),
            vec,
        }
    }

    fn words(&mut self) -> &mut [u64] {
        // SAFETY: `ptr` points to `words` zero-initialised, exclusively
        // owned words (a private mapping or the Vec), borrowed via `&mut`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.words) }
    }
}

#[cfg(target_os = "linux")]
impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: the mapping from `new`, unmapped once; no borrow of it
        // outlives `self`.
        unsafe { libc::munmap(self.map.0, self.map.1) };
    }
}

/// `AnonHugePages` of this process, for the stderr line.
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

/// Writes one random cycle through all lines (Sattolo's algorithm): the
/// first word of each line holds the word index of the next line.
fn build_cycle(buf: &mut [u64]) {
    let lines = buf.len() / LINE_WORDS;
    let mut perm: Vec<u32> = (0..lines as u32).collect();
    let mut rng = 0x5eed_u64;
    for i in (1..lines).rev() {
        rng = splitmix(rng);
        let j = ((rng as u128 * i as u128) >> 64) as usize; // 0..i
        perm.swap(i, j);
    }
    for w in 0..lines {
        let from = perm[w] as usize;
        let to = perm[(w + 1) % lines] as usize;
        buf[from * LINE_WORDS] = (to * LINE_WORDS) as u64;
    }
}

/// Word index of the first word of random line `i`.
#[inline(always)]
fn line_of(i: u64, lines: u64) -> usize {
    ((splitmix(i) as u128 * lines as u128) >> 64) as usize * LINE_WORDS
}

#[inline(always)]
fn prefetch(buf: &[u64], word: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = buf[word..].as_ptr();
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch of a
        // valid address has no architectural effect.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (buf, word);
}

fn chase(buf: &[u64], at: &mut usize, n: u64) {
    let mut p = *at;
    for _ in 0..n {
        p = buf[p] as usize;
    }
    *at = black_box(p);
}

fn independent(buf: &[u64], counter: &mut u64, n: u64) {
    let lines = (buf.len() / LINE_WORDS) as u64;
    let mut sum = 0u64;
    let c0 = *counter;
    for i in c0..c0 + n {
        sum = sum.wrapping_add(buf[line_of(i, lines)]);
    }
    *counter = c0 + n;
    black_box(sum);
}

fn independent_prefetch(buf: &[u64], counter: &mut u64, n: u64) {
    let lines = (buf.len() / LINE_WORDS) as u64;
    let mut sum = 0u64;
    let c0 = *counter;
    for i in c0..c0 + n {
        prefetch(buf, line_of(i + PREFETCH_AHEAD as u64, lines));
        sum = sum.wrapping_add(buf[line_of(i, lines)]);
    }
    *counter = c0 + n;
    black_box(sum);
}

/// Two independent loads per step; with `FENCED`, then a `SeqCst` fence.
fn pairs<const FENCED: bool>(buf: &[u64], counter: &mut u64, n: u64) {
    let lines = (buf.len() / LINE_WORDS) as u64;
    let mut sum = 0u64;
    let c0 = *counter;
    for i in c0..c0 + n {
        let a = buf[line_of(2 * i, lines)];
        let b = buf[line_of(2 * i + 1, lines)];
        sum = sum.wrapping_add(a ^ b);
        if FENCED {
            // SeqCst: the full barrier the epoch pin of one koel call
            // costs; nothing is published, only the overlap of misses is
            // stopped.
            fence(Ordering::SeqCst);
        }
    }
    *counter = c0 + n;
    black_box(sum);
}

/// `v` in bytes: a number, or with a `K`/`M`/`G` suffix.
fn parse_bytes(v: &str) -> Option<usize> {
    let v = v.trim();
    let (d, m) = match v.chars().last()? {
        'K' => (&v[..v.len() - 1], 1usize << 10),
        'M' => (&v[..v.len() - 1], 1 << 20),
        'G' => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    d.parse::<usize>().ok().map(|d| d * m)
}

/// Sizes to measure: those listed in `KOEL_FLOOR_SIZES` (comma-separated,
/// e.g. `16M,32M`), else 256 KiB times powers of 4 up to `KOEL_FLOOR_MAX`
/// (default 4G).
fn sizes() -> Vec<(String, usize)> {
    if let Ok(list) = std::env::var("KOEL_FLOOR_SIZES") {
        return list
            .split(',')
            .map(|s| {
                let bytes = parse_bytes(s)
                    .filter(|&b| b >= 4096)
                    .unwrap_or_else(|| panic!("KOEL_FLOOR_SIZES: bad size {s:?}"));
                (s.trim().to_string(), bytes)
            })
            .collect();
    }
    let max = std::env::var("KOEL_FLOOR_MAX")
        .ok()
        .and_then(|v| parse_bytes(&v))
        .unwrap_or(4 << 30);
    let mut out = Vec::new();
    let mut bytes = 256usize << 10;
    while bytes <= max {
        let name = if bytes >= 1 << 30 {
            format!("{}G", bytes >> 30)
        } else if bytes >= 1 << 20 {
            format!("{}M", bytes >> 20)
        } else {
            format!("{}K", bytes >> 10)
        };
        out.push((name, bytes));
        bytes *= 4;
    }
    out
}

fn floor(c: &mut Criterion) {
    #[cfg(target_os = "linux")]
    let modes = [("4k", false), ("2m", true)];
    #[cfg(not(target_os = "linux"))]
    let modes = [("default", false)];
    for (size, bytes) in sizes() {
        for (pages, huge) in modes {
            let mut buffer = Buffer::new(bytes, huge);
            let t = Instant::now();
            build_cycle(buffer.words());
            eprintln!(
                "\n[floor] {size} {pages}: cycle built in {:.1} s, AnonHugePages {}",
                t.elapsed().as_secs_f64(),
                anon_huge_pages()
            );
            let buf: &[u64] = buffer.words();
            let mut g = c.benchmark_group(format!("{pages}/{size}"));
            g.sample_size(10)
                .sampling_mode(SamplingMode::Flat)
                .warm_up_time(Duration::from_millis(200))
                .measurement_time(Duration::from_millis(800))
                .throughput(Throughput::Elements(1));
            let mut at = 0usize;
            g.bench_function("dependent", |b| {
                b.iter_custom(|n| {
                    let t = Instant::now();
                    chase(buf, &mut at, n);
                    t.elapsed()
                })
            });
            let mut counter = 0u64;
            type Loop = fn(&[u64], &mut u64, u64);
            let loops: [(&str, Loop); 4] = [
                ("independent", independent),
                ("independent_prefetch", independent_prefetch),
                ("pair", pairs::<false>),
                ("pair_fenced", pairs::<true>),
            ];
            for (name, run) in loops {
                g.bench_function(name, |b| {
                    b.iter_custom(|n| {
                        let t = Instant::now();
                        run(buf, &mut counter, n);
                        t.elapsed()
                    })
                });
            }
            g.finish();
        }
    }
}

criterion_group!(benches, floor);
criterion_main!(benches);
