//! A sequential model of an upper level that grows by about 1.1x instead of
//! 2x (issue 17's bits-per-key target; docs/design.md, "Growth beyond the
//! tag bits: levels"). Not koel's engine: a single-threaded table of 21-bit
//! tags, 3 per bucket, whose `R` regions are chosen by `tag mod R` (any
//! `R`, not only powers of two), so that a growth step re-inserts every
//! entry into a table of more regions.
//!
//! Level 0 is a real koel filter built for `n` keys: keys go into it until
//! it publishes its level above (at 64x with 16-bit tags and the 1% cap);
//! from then on they go into the model level, which starts with
//! `start` x the level below's items of room, one region, and grows to
//! `R + max(1, R / step)` regions whenever an insert finds no room. Printed
//! at each power of ten of growth: bits per key of both levels together
//! (against 16.87 for a filter built at the final size), the measured FPR
//! over 1M absent keys, the regions against what level 1's budget allows
//! (half of what level 0 left of the 1% cap, as koel's levels), and how
//! often each key was copied by growth steps.
//!
//! ```text
//! cargo run --release -p koel-lab --example fine_growth -- 1000 10000 0.4 10 [jump]
//! ```
//! (arguments: `n`, the growth to reach, `start`, `step`, and `jump` for
//! regions by jump consistent hash, where a step moves only the entries
//! whose region is new, instead of `tag mod R`, where it re-inserts all).

use koel::CuckooFilter;

#[path = "../../tests/common/splitmix.rs"]
mod splitmix64;

const TAG_BITS: u32 = 21;
const MAX_TAG: u64 = (1 << TAG_BITS) - 2;
const SLOTS: usize = 3;
const KICKS: usize = 500;
const CAP: f64 = 1e-2;
const RIGHT_SIZED_BITS: f64 = 16.87;

/// The modelled level: `regions * m0` buckets of `SLOTS` tags (0 = empty).
struct Level {
    m0: u64,
    regions: u64,
    slots: Vec<u32>,
    items: u64,
    rng: u64,
    /// Regions by jump consistent hash instead of `tag mod R`.
    jump: bool,
}

impl Level {
    fn new(m0: u64, regions: u64, jump: bool) -> Level {
        Level {
            m0,
            regions,
            slots: vec![0; (m0 * regions) as usize * SLOTS],
            items: 0,
            rng: 0x5eed,
            jump,
        }
    }

    fn tag(h: u64) -> u64 {
        1 + (((h >> (64 - TAG_BITS)) * MAX_TAG) >> TAG_BITS)
    }

    fn local(&self, h: u64) -> u64 {
        ((h & 0xFFFF_FFFF) * self.m0) >> 32
    }

    /// The other bucket of a tag at `local` in its region (koel's rule).
    fn alt(&self, tag: u64, local: u64) -> u64 {
        let h = ((((tag.wrapping_mul(0x9E37_79B9_7F4A_7C15)) >> 32) * self.m0) >> 32) | 1;
        (h + self.m0 - local) % self.m0
    }

    fn bucket(&self, tag: u64, local: u64) -> usize {
        (self.region(tag, local, self.regions) * self.m0 + local) as usize
    }

    /// The region of `tag` among `regions`: `tag mod regions`, or with
    /// `jump`, Lamping and Veach's jump consistent hash of the tag, under
    /// which going from `R` to `R'` regions moves only the tags whose
    /// region becomes one of the new ones (about `(R' - R) / R'` of them).
    ///
    /// The jump hash takes the tag and its bucket pair (the lower of its
    /// two local buckets, the same from either): 2^21 tag values alone
    /// split unevenly among hundreds of regions (about 1.5% apart at 443),
    /// and the fullest region decides when the level must grow.
    fn region(&self, tag: u64, local: u64, regions: u64) -> u64 {
        if !self.jump {
            return tag % regions;
        }
        let pair = local.min(self.alt(tag, local));
        let seed = (tag | pair << TAG_BITS).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let (mut key, mut b, mut j) = (seed ^ seed >> 29, -1i64, 0i64);
        while j < regions as i64 {
            b = j;
            key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
            j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
        }
        b as u64
    }

    fn free(&self, b: usize) -> Option<usize> {
        (0..SLOTS).find(|&s| self.slots[b * SLOTS + s] == 0)
    }

    fn holds(&self, h: u64) -> bool {
        let (tag, local) = (Self::tag(h), self.local(h));
        [local, self.alt(tag, local)].iter().any(|&l| {
            let b = self.bucket(tag, l);
            self.slots[b * SLOTS..b * SLOTS + SLOTS].contains(&(tag as u32))
        })
    }

    /// Puts `tag` at `local` or its alternate, displacing as cuckoo
    /// filters do; `false` (and the table as it was) if there is no room.
    fn place(&mut self, tag: u64, local: u64) -> bool {
        let (l1, l2) = (local, self.alt(tag, local));
        for l in [l1, l2] {
            let b = self.bucket(tag, l);
            if let Some(s) = self.free(b) {
                self.slots[b * SLOTS + s] = tag as u32;
                self.items += 1;
                return true;
            }
        }
        // Each kick's write, to undo a walk that finds no room.
        let mut undo: Vec<(usize, u32)> = Vec::new();
        let (mut tag, mut l) = (tag, l1);
        for _ in 0..KICKS {
            self.rng = splitmix64::mix64(self.rng);
            let at = self.bucket(tag, l) * SLOTS + (self.rng % SLOTS as u64) as usize;
            let victim = u64::from(self.slots[at]);
            undo.push((at, self.slots[at]));
            self.slots[at] = tag as u32;
            // The victim shares the bucket, so its region and position.
            tag = victim;
            l = self.alt(tag, l);
            let b = self.bucket(tag, l);
            if let Some(s) = self.free(b) {
                self.slots[b * SLOTS + s] = tag as u32;
                self.items += 1;
                return true;
            }
        }
        for (at, old) in undo.into_iter().rev() {
            self.slots[at] = old;
        }
        false
    }

    /// A table of `regions` regions holding every entry of this one, each
    /// at its own position in its new region, and how many entries changed
    /// region (were copied); `None` if one finds no room. With `jump`, only
    /// those entries move: the others keep their words.
    fn regrown(&self, regions: u64) -> Option<(Level, u64)> {
        let mut next = Level::new(self.m0, regions, self.jump);
        next.rng = self.rng;
        let mut moved = 0;
        if self.jump {
            next.slots[..self.slots.len()].copy_from_slice(&self.slots);
            next.items = self.items;
        }
        for (i, &tag) in self.slots.iter().enumerate() {
            let tag = u64::from(tag);
            if tag == 0 {
                continue;
            }
            let local = (i / SLOTS) as u64 % self.m0;
            if self.jump {
                if self.region(tag, local, self.regions) == self.region(tag, local, regions) {
                    continue;
                }
                next.slots[i] = 0;
                next.items -= 1;
            }
            moved += 1;
            if !next.place(tag, local) {
                return None;
            }
        }
        Some((next, moved))
    }

    fn bits(&self) -> f64 {
        (self.slots.len() / SLOTS * 64) as f64
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args.get(1).map_or(1000, |a| a.parse().expect("n"));
    let growth: u64 = args.get(2).map_or(10_000, |a| a.parse().expect("growth"));
    let start: f64 = args.get(3).map_or(0.4, |a| a.parse().expect("start"));
    let step: u64 = args.get(4).map_or(10, |a| a.parse().expect("step"));
    let jump = args.get(5).is_some_and(|a| a == "jump");
    let f = CuckooFilter::builder()
        .capacity(n as usize)
        .seed(7)
        .build()
        .expect("filter");
    let key = |i: u64| splitmix64::at(0x243F_6A88_85A3_08D3, i);
    let mut i = 0;
    let level0_bits;
    loop {
        // Slots of 16 bits, before the insert that publishes a level.
        let before = f.capacity();
        f.insert(&key(i)).expect("room");
        if f.stats().levels > 1 {
            level0_bits = before as f64 * 16.0;
            break;
        }
        i += 1;
    }
    let level0_items = i;
    let level0_rate = f.stats().false_positive_rate;
    // Level 0's bound at its last generation (16-bit tags, gen 6, full:
    // docs/design.md), of which level 1 may spend half what is left.
    let budget = (CAP - 7.79e-3) / 2.0;
    let max_regions = budget * MAX_TAG as f64 / (2.0 * SLOTS as f64 * 0.93);
    let m0 = ((start * level0_items as f64 / (SLOTS as f64 * 0.9)).ceil() as u64).max(64);
    let mut level = Level::new(m0, 1, jump);
    println!(
        "n {n}: level 0 holds {level0_items} (rate {level0_rate:.2e}, {:.2} bits/key); \
         level 1: m0 {m0}, budget {budget:.2e}, at most {max_regions:.0} regions",
        level0_bits / level0_items as f64
    );
    println!(
        "| keys | growth | regions | bits/key | x right-sized | FPR | copies/key | refused steps |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let (mut copies, mut refused) = (0u64, 0u64);
    // The highest bits per key against a right-sized filter, and where.
    let (mut worst, mut worst_from_100x) = ((0.0, 0), (0.0, 0));
    let mut inserted = level0_items + 1;
    let mut next_report = n;
    while next_report <= inserted {
        next_report *= 10;
    }
    let mut j = level0_items + 1;
    while inserted <= growth * n {
        let h = f.hash(&key(j));
        j += 1;
        while !level.place(Level::tag(h), level.local(h)) {
            let mut regions = level.regions + (level.regions / step).max(1);
            loop {
                if let Some((next, moved)) = level.regrown(regions) {
                    copies += moved;
                    level = next;
                    break;
                }
                refused += 1;
                regions += (regions / step).max(1);
            }
        }
        inserted += 1;
        let ratio = (level0_bits + level.bits()) / inserted as f64 / RIGHT_SIZED_BITS;
        if ratio > worst.0 {
            worst = (ratio, inserted);
        }
        if inserted >= 100 * n && ratio > worst_from_100x.0 {
            worst_from_100x = (ratio, inserted);
        }
        if inserted == next_report || inserted == growth * n {
            let absent = 1_000_000u64;
            let hits = (0..absent)
                .filter(|&a| {
                    let h = f.hash(&(a | 1 << 63));
                    f.contains_hash(h) || level.holds(h)
                })
                .count();
            let bits = (level0_bits + level.bits()) / inserted as f64;
            println!(
                "| {inserted} | {}x | {} | {bits:.2} | {:.2} | {:.2e} | {:.2} | {refused} |",
                inserted / n,
                level.regions,
                bits / RIGHT_SIZED_BITS,
                hits as f64 / absent as f64,
                copies as f64 / level.items as f64
            );
            next_report *= 10;
        }
    }
    println!(
        "most bits per key against right-sized: {:.2}x at {} keys ({:.0}x); from 100x on: {:.2}x at {} keys",
        worst.0,
        worst.1,
        worst.1 as f64 / n as f64,
        worst_from_100x.0,
        worst_from_100x.1
    );
}
