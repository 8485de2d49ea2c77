//! A sequential model of a region level whose tags widen (issue 17;
//! docs/design.md, "Next: four lines at any size"), to check the design's
//! arithmetic before it is built. Not koel's engine: a single-threaded
//! level of regions of `m0` buckets, of two kinds: `21x3` (three 21-bit
//! tags in a 64-bit word, as koel's region levels) and the wide kind
//! (`wide=`: `32x2`, two 32-bit lanes in a 64-bit word, by default, or
//! lanes of 22 to 32 bits in a 128-bit bucket, two adjacent words of one
//! cache line: `32x4x128`, `28x4x128`, `25x5x128`), whose lanes hold
//! *wide* entries, the key's 21-bit tag with high bits from the hash above
//! it, never all zero, or *short* ones, a 21-bit tag moved from a `21x3`
//! region, high bits zero.
//!
//! Level 0 is a real koel filter built for `n` keys: keys go into it until
//! it publishes its level above (as `fine_growth`); from then on they go
//! into the model level, sized as koel's `Plan::above` sizes it (`m0` from
//! `START` 0.4 x the level below's items; `own` half of what level 0 left
//! of the 1% cap). Koel's rules where they matter: tags, local buckets and
//! alternates as region levels compute them (`Addressing::V3`), a slot map
//! of `slot_of(tag, lower bucket)` that doubles from 64 slots to 32 per
//! region, at most `2^14` slots (`slots_for`), and steps of `max(1, R/12)`
//! regions when an insert finds no room in its region (500 random kicks
//! inside it, as `fine_growth`; koel searches a bounded BFS path). A step
//! moves whole slots, greedily from the fullest region (by load: entries
//! over lanes) to the new region with the lowest load, until each new one
//! holds its weighted share of the entries. Entries move whole: a
//! slot's entries all go to its new region, keeping their kind.
//!
//! The switch: once level 1's estimated rate reaches `switch` x `own`,
//! every new region is of the wide kind, and new keys of its slots are
//! stored wide. A step's shares are weighted by a region's lanes at the
//! load its kind's displacement reaches (`room`: 0.94 for 3 lanes, 0.88
//! for 2, `FILL_4` and `FILL_5`; `lanes`, the design's rule, fills new
//! `32x2` regions to 0.88 at once, and every insert into one then steps). After the switch, `policy` `first` takes slots from `21x3`
//! regions first (but a `32x2` region above its share gives first: left
//! full, it refuses the next key too); `even` takes them by load alone;
//! `drain` fills the new regions to 12/13 of their room from `21x3` regions
//! whatever their load, to empty them; `reuse` is `drain`, and a `21x3`
//! region left without slots (hence empty) becomes one of the next step's
//! `32x2` regions instead of a new allocation; `close` is `reuse`, and a
//! `21x3` region refuses a new key once (a step follows), so draining
//! keeps pace with the keys. `switch` = `inf` never
//! switches: today's level, which stops at koel's `R_max`.
//!
//! Rate: an absent key matches a stored entry only if it has the entry's
//! tag (`1 / MAX_TAG`, `MAX_TAG = 2^21 - 2`) and the entry's pair (its
//! local bucket is one of the pair's two, `2 / m0`; the pair then fixes
//! its slot, hence its region), so a short entry costs
//! `2 / (m0 * MAX_TAG)` and a wide one `1 / (2^(bits - 21) - 1)` of that
//! (its high bits must match too: 1/2047 for 32-bit lanes). The level's estimate is the sum over its entries; the
//! level is out of budget (a third level would start) when it passes
//! `own`, or out of regions when a step finds `R_max` (no switch: koel's
//! `max_regions_for(own)`) or 16,384 regions.
//!
//! Printed at 10x, 100x, ... of `n`, at 270,000x, at the switch and where
//! the level runs out: regions of each kind (and `21x3` ones left without
//! slots), short and wide entries, bits per key of both levels (8 or 16
//! bytes a bucket, stripes and maps left out) against 16.87 for a 16-bit filter
//! built at that size, the loads, the FPR over 1M absent keys against the
//! estimate, level 1's rate against `own`, copies per key moved by steps,
//! inserts that found no room right after a step, and slots of the map
//! per region holding any (near 1-2, whole slots cannot even the loads).
//!
//! ```text
//! cargo run --release -p koel-lab --example widening -- 1000 10000 0.3333 [first|even|drain|reuse|close] [room|lanes] [wide=32x2] [slots=14]
//! ```
//! (arguments: `n`, the growth to reach, `switch` (`inf`: never), the
//! step's `policy` after the switch and its weights, the wide kind; `slots=BITS` lets the
//! map grow to `2^BITS` slots, not koel's `2^14`; `WIDENING_TRACE=1`
//! prints each step after the switch). A run to 10,000x from 1,000 keys
//! takes about 15 s and 50 MB; to 300,000x from 100, under 1 GB.

use koel::CuckooFilter;
use std::collections::HashMap;

#[path = "../../tests/common/splitmix.rs"]
mod splitmix64;

const TAG_BITS: u32 = 21;
const TAG_MASK: u32 = (1 << TAG_BITS) - 1;
const MAX_TAG: u64 = (1 << TAG_BITS) - 2;
/// Hash bits a wide entry's high bits are drawn from (evenly over their
/// values but zero).
const HIGH_SOURCE_BITS: u32 = 11;
const KICKS: usize = 500;
const CAP: f64 = 1e-2;
const RIGHT_SIZED_BITS: f64 = 16.87;
/// Koel's `Plan::above`: a new level's room against the level below.
const START: f64 = 0.4;
/// Koel's `LOAD`: `R_max = own * MAX_TAG / (6 * LOAD)`.
const LOAD: f64 = 0.93;
/// Koel's `sizing_load` of 16x4 (the items a level above is sized for).
const LEVEL0_SIZING_LOAD: f64 = 0.95;
/// Koel's map: at most `2^14` slots (`slots=BITS` tries more), hence
/// regions.
const MAX_SLOT_BITS: u32 = 14;
const MAX_REGIONS: usize = 1 << MAX_SLOT_BITS;
const FIRST_SLOT_BITS: u32 = 6;
const MIN_SLOT_BITS: u32 = 10;
const GROWING_SLOTS_PER_REGION: usize = 32;
const SLOTS_PER_REGION: usize = 8;
const STEP_DIVISOR: usize = 12;
/// The load 4- and 5-lane buckets reach (see `Kind::fill`).
const FILL_4: f64 = 0.96;
const FILL_5: f64 = 0.97;

/// The wide kind's bucket: `lanes` lanes of `lane_bits` (a 21-bit tag and
/// `lane_bits - 21` high bits) in a bucket of `bucket_bits` (64, or 128:
/// two adjacent words of one cache line).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Geometry {
    lane_bits: u32,
    lanes: usize,
    bucket_bits: u64,
}

impl Geometry {
    /// `32x2` (64-bit bucket), or `BITSxLANESx128`.
    fn parse(s: &str) -> Geometry {
        let parts: Vec<u64> = s
            .split('x')
            .map(|p| p.parse().expect("wide=BITSxLANES[x128]"))
            .collect();
        let g = Geometry {
            lane_bits: parts[0] as u32,
            lanes: parts[1] as usize,
            bucket_bits: parts.get(2).copied().unwrap_or(64),
        };
        assert!(
            g.lane_bits > TAG_BITS
                && g.lane_bits <= 32
                && g.lanes as u64 * u64::from(g.lane_bits) <= g.bucket_bits,
            "wide={s}: lanes of 22 to 32 bits that fit the bucket"
        );
        g
    }

    /// Values of a wide entry's high bits (never all zero): a wide entry
    /// costs a short one's rate over this.
    fn values(self) -> f64 {
        f64::from((1u32 << (self.lane_bits - TAG_BITS)) - 1)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Three 21-bit tags a 64-bit bucket.
    Short3,
    /// The wide geometry's lanes, wide or short entries.
    Wide(Geometry),
}

impl Kind {
    fn lanes(self) -> usize {
        match self {
            Kind::Short3 => 3,
            Kind::Wide(g) => g.lanes,
        }
    }

    fn bucket_bits(self) -> u64 {
        match self {
            Kind::Short3 => 64,
            Kind::Wide(g) => g.bucket_bits,
        }
    }

    fn is_wide(self) -> bool {
        matches!(self, Kind::Wide(_))
    }

    /// The load its regions' displacement reaches (500 random kicks): the
    /// mean load at which this model's regions refused inserts (3 lanes:
    /// 0.941, 2 lanes: 0.883, from 1,000 keys to 10,000x; 4 and 5 lanes:
    /// see the commit that measured them).
    fn fill(self) -> f64 {
        match self.lanes() {
            2 => 0.88,
            3 => 0.94,
            4 => FILL_4,
            _ => FILL_5,
        }
    }

    fn index(self) -> usize {
        usize::from(self.is_wide())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Each new region's share from the 21x3 regions first.
    First,
    /// By load alone.
    Even,
    /// New regions filled from the 21x3 regions until those have none.
    Drain,
    /// `Drain`, and a 21x3 region left without slots becomes one of the
    /// next step's 32x2 regions.
    Reuse,
    /// `Reuse`, and a 21x3 region holding a key's slot refuses it once
    /// (a step follows, then the key goes where its slot is): draining
    /// keeps pace with the keys, whatever each kind's room.
    Close,
}

struct Region {
    kind: Kind,
    /// `m0 * lanes` entries, 0 = empty.
    cells: Vec<u32>,
    entries: u64,
    /// Slots (of the current map) whose region this is.
    slots: Vec<u32>,
}

impl Region {
    fn new(kind: Kind, m0: u64) -> Region {
        Region {
            kind,
            cells: vec![0; m0 as usize * kind.lanes()],
            entries: 0,
            slots: Vec::new(),
        }
    }

    fn lanes(&self) -> u64 {
        self.cells.len() as u64
    }

    fn load(&self) -> f64 {
        self.entries as f64 / self.lanes() as f64
    }

    /// What a step weighs the region by: its lanes, or with `room` its
    /// lanes at the load its kind reaches.
    fn weight(&self, room: bool) -> f64 {
        let fill = if room { self.kind.fill() } else { 1.0 };
        self.lanes() as f64 * fill
    }
}

/// Koel's `slot_of` (src/raw/slot_map.rs).
fn slot_of(tag: u64, low: u64, slot_bits: u32) -> usize {
    let mut x = (low << 21) ^ tag;
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> (64 - slot_bits)) as usize
}

/// Koel's `slots_for`: the most slots a level of `max_regions` gets.
fn slots_for(max_regions: usize, max_slot_bits: u32) -> usize {
    (max_regions * SLOTS_PER_REGION)
        .min(1 << max_slot_bits)
        .next_power_of_two()
        .max(1 << MIN_SLOT_BITS)
}

/// The level-1 tag of hash `h` (`Addressing::V3`, 21 bits).
fn tag_of(h: u64) -> u64 {
    1 + ((u128::from(h) * u128::from(MAX_TAG)) >> 64) as u64
}

/// A key's wide entry: its tag, and above it high bits from the hash's
/// next 11 bits, spread evenly over `1..=values`.
fn wide_of(h: u64, tag: u64, g: Geometry) -> u32 {
    let x = (h >> 32) & ((1 << HIGH_SOURCE_BITS) - 1);
    let high = 1 + ((x * g.values() as u64) >> HIGH_SOURCE_BITS) as u32;
    tag as u32 | high << TAG_BITS
}

/// Why the level stopped growing: a third level would start.
#[derive(Clone, Copy, Debug)]
enum Out {
    /// Its estimated rate would pass `own`.
    Budget,
    /// A step found its most regions.
    Regions,
}

struct Level {
    m0: u64,
    /// The wide kind.
    geometry: Geometry,
    regions: Vec<Region>,
    /// Slot -> region, `2^slot_bits` slots.
    map: Vec<u32>,
    slot_bits: u32,
    max_slots: usize,
    max_regions: usize,
    /// Entries per slot of a map of `2^fine_bits` slots, its most (a slot
    /// of the current map is a run of them: `slot_of` takes the top bits).
    fine: Vec<u32>,
    fine_bits: u32,
    /// Fine slots a step could not move whole: the region their
    /// unmoved entries stayed in.
    split: HashMap<u32, u32>,
    short: u64,
    wide: u64,
    rng: u64,
    copies: u64,
    failed_hops: u64,
    steps: u64,
    /// Loads at which each kind's regions refused an insert (sum, count,
    /// least), for the load their displacement reaches.
    refusals: [(f64, u64, f64); 2],
}

impl Level {
    fn new(m0: u64, max_regions: usize, geometry: Geometry, fine_bits: u32) -> Level {
        let max_slots = slots_for(max_regions, fine_bits);
        let slot_bits = FIRST_SLOT_BITS.min(max_slots.trailing_zeros());
        let mut first = Region::new(Kind::Short3, m0);
        first.slots = (0..1u32 << slot_bits).collect();
        Level {
            m0,
            geometry,
            regions: vec![first],
            map: vec![0; 1 << slot_bits],
            slot_bits,
            max_slots,
            max_regions,
            fine: vec![0; 1 << fine_bits],
            fine_bits,
            split: HashMap::new(),
            short: 0,
            wide: 0,
            rng: 0x5eed,
            copies: 0,
            failed_hops: 0,
            steps: 0,
            refusals: [(0.0, 0, f64::MAX); 2],
        }
    }

    fn local(&self, h: u64) -> u64 {
        ((h & 0xFFFF_FFFF) * self.m0) >> 32
    }

    /// Koel's alternate bucket (`alt_local`, V3).
    fn alt(&self, tag: u64, local: u64) -> u64 {
        let mixed = u64::from((tag as u32).wrapping_mul(0x7FEB_352D));
        let h = ((mixed * self.m0) >> 32) | 1;
        (h + self.m0 - local) % self.m0
    }

    /// The fine slot of a tag in bucket `local` of its pair.
    fn fine_slot(&self, tag: u64, local: u64) -> usize {
        slot_of(tag, local.min(self.alt(tag, local)), self.fine_bits)
    }

    fn slot(&self, fine: usize) -> usize {
        fine >> (self.fine_bits - self.slot_bits)
    }

    /// Entries of a slot of the current map.
    fn slot_entries(&self, slot: usize) -> u64 {
        let d = self.fine_bits - self.slot_bits;
        self.fine[slot << d..(slot + 1) << d]
            .iter()
            .map(|&e| u64::from(e))
            .sum()
    }

    fn slot_split(&self, slot: usize) -> bool {
        let d = self.fine_bits - self.slot_bits;
        !self.split.is_empty()
            && (slot << d..(slot + 1) << d).any(|f| self.split.contains_key(&(f as u32)))
    }

    /// The level's rate now: the sum of its entries' match probabilities.
    fn rate(&self) -> f64 {
        let short = 2.0 / (self.m0 as f64 * MAX_TAG as f64);
        short * (self.short as f64 + self.wide as f64 / self.geometry.values())
    }

    fn holds(&self, h: u64) -> bool {
        let tag = tag_of(h);
        let local = self.local(h);
        let alt = self.alt(tag, local);
        let fine = slot_of(tag, local.min(alt), self.fine_bits);
        let wide = wide_of(h, tag, self.geometry);
        let found = |r: usize| {
            let reg = &self.regions[r];
            let lanes = reg.kind.lanes();
            [local, alt].iter().any(|&l| {
                let b = l as usize * lanes;
                reg.cells[b..b + lanes]
                    .iter()
                    .any(|&v| v == tag as u32 || (reg.kind.is_wide() && v == wide))
            })
        };
        found(self.map[self.slot(fine)] as usize)
            || self
                .split
                .get(&(fine as u32))
                .is_some_and(|&r| found(r as usize))
    }

    /// Puts `value` at `local` or its alternate in region `r`, displacing
    /// as cuckoo filters do; `false` (and the region as it was) if there
    /// is no room.
    fn place(&mut self, r: usize, value: u32, local: u64) -> bool {
        let m0 = self.m0;
        let alt = |v: u32, l: u64| {
            let mixed = u64::from((v & TAG_MASK).wrapping_mul(0x7FEB_352D));
            let h = ((mixed * m0) >> 32) | 1;
            (h + m0 - l) % m0
        };
        let reg = &mut self.regions[r];
        let lanes = reg.kind.lanes();
        let free = |cells: &[u32], l: u64| {
            let b = l as usize * lanes;
            (b..b + lanes).find(|&i| cells[i] == 0)
        };
        for l in [local, alt(value, local)] {
            if let Some(i) = free(&reg.cells, l) {
                reg.cells[i] = value;
                reg.entries += 1;
                return true;
            }
        }
        let mut undo: Vec<(usize, u32)> = Vec::new();
        let (mut v, mut l) = (value, local);
        for _ in 0..KICKS {
            self.rng = splitmix64::mix64(self.rng);
            let at = l as usize * lanes + (self.rng % lanes as u64) as usize;
            let victim = reg.cells[at];
            undo.push((at, victim));
            reg.cells[at] = v;
            v = victim;
            l = alt(v, l);
            if let Some(i) = free(&reg.cells, l) {
                reg.cells[i] = v;
                reg.entries += 1;
                return true;
            }
        }
        for (at, old) in undo.into_iter().rev() {
            reg.cells[at] = old;
        }
        false
    }

    /// Inserts hash `h`; `false` if its region has no room.
    fn insert(&mut self, h: u64, close: bool) -> bool {
        let tag = tag_of(h);
        let local = self.local(h);
        let fine = self.fine_slot(tag, local);
        let slot = self.slot(fine);
        let r = self.map[slot] as usize;
        let kind = self.regions[r].kind;
        // (A slot split by a hop that found no room cannot move: a step
        // would not drain it.)
        if close && kind == Kind::Short3 && !self.slot_split(slot) {
            return false;
        }
        let value = match kind {
            Kind::Short3 => tag as u32,
            Kind::Wide(g) => wide_of(h, tag, g),
        };
        if !self.place(r, value, local) {
            let k = kind.index();
            let load = self.regions[r].load();
            self.refusals[k].0 += load;
            self.refusals[k].1 += 1;
            self.refusals[k].2 = self.refusals[k].2.min(load);
            return false;
        }
        self.fine[fine] += 1;
        match kind {
            Kind::Short3 => self.short += 1,
            Kind::Wide(_) => self.wide += 1,
        }
        true
    }

    /// Doubles the map: slot `s` becomes `2s` and `2s + 1`, in its region.
    fn double_map(&mut self) {
        self.map = self.map.iter().flat_map(|&r| [r, r]).collect();
        self.slot_bits += 1;
        for reg in &mut self.regions {
            reg.slots = reg.slots.iter().flat_map(|&s| [2 * s, 2 * s + 1]).collect();
        }
    }

    /// A step: `max(1, R / 12)` new regions of `kind` (drained `21x3`
    /// ones turned `32x2` first, with `Reuse`), their share of slots, and
    /// the sweep that moves those slots' entries.
    fn step(&mut self, kind: Kind, switched: bool, policy: Policy, room: bool) -> Result<(), Out> {
        let old = self.regions.len();
        let k = (old / STEP_DIVISOR).max(1).min(self.max_regions - old);
        if k == 0 {
            return Err(Out::Regions);
        }
        self.steps += 1;
        let mut new: Vec<usize> = Vec::new();
        if matches!(policy, Policy::Reuse | Policy::Close) && switched {
            for (r, reg) in self.regions.iter_mut().enumerate() {
                // (Entries whose hop found no room keep a region without
                // slots in use.)
                if new.len() < k
                    && reg.kind == Kind::Short3
                    && reg.slots.is_empty()
                    && reg.entries == 0
                {
                    *reg = Region::new(Kind::Wide(self.geometry), self.m0);
                    new.push(r);
                }
            }
        }
        let fresh = k - new.len();
        new.extend(old..old + fresh);
        self.regions
            .extend((0..fresh).map(|_| Region::new(kind, self.m0)));
        let regions = self.regions.len();
        let wanted = (regions * GROWING_SLOTS_PER_REGION)
            .next_power_of_two()
            .min(self.max_slots);
        while self.map.len() < wanted {
            self.double_map();
        }
        let mut fresh_marks = vec![false; regions];
        for &r in &new {
            fresh_marks[r] = true;
        }
        let is_new = |r: usize| fresh_marks[r];
        // Each new region's share: the mean load of the regions that will
        // hold slots (those without any hold nothing).
        let entries: u64 = self.regions.iter().map(|r| r.entries).sum();
        let weight: f64 = (0..regions)
            .filter(|&r| is_new(r) || !self.regions[r].slots.is_empty())
            .map(|r| self.regions[r].weight(room))
            .sum();
        let mut mean = entries as f64 / weight;
        let drain = switched && matches!(policy, Policy::Drain | Policy::Reuse | Policy::Close);
        if drain {
            // The share as if the 21x3 regions were gone, at most the load
            // a step of today's leaves (12/13 of the room).
            let wide: f64 = (0..regions)
                .filter(|&r| self.regions[r].kind.is_wide())
                .map(|r| self.regions[r].weight(room))
                .sum();
            let most = STEP_DIVISOR as f64 / (STEP_DIVISOR + 1) as f64;
            mean = (entries as f64 / wide).min(most);
        }
        let mut planned: Vec<f64> = self.regions.iter().map(|r| r.entries as f64).collect();
        let mut moves: HashMap<u32, usize> = HashMap::new();
        loop {
            let to = *new
                .iter()
                .min_by(|&&a, &&b| {
                    let la = planned[a] / self.regions[a].weight(room);
                    let lb = planned[b] / self.regions[b].weight(room);
                    la.total_cmp(&lb)
                })
                .expect("a step adds a region");
            let to_weight = self.regions[to].weight(room);
            let movable = |r: usize| {
                !is_new(r)
                    && self.regions[r]
                        .slots
                        .iter()
                        .any(|&s| !self.slot_split(s as usize))
            };
            let load = |r: usize| planned[r] / self.regions[r].weight(room);
            let fullest = |short_only: bool| {
                (0..regions)
                    .filter(|&r| !short_only || self.regions[r].kind == Kind::Short3)
                    .filter(|&r| movable(r))
                    .max_by(|&a, &b| load(a).total_cmp(&load(b)))
            };
            // Taking 21x3 slots first, a 32x2 region above the share
            // still gives first: it may be the region that refused, and
            // left full it refuses the next key too (a step per insert
            // until the 21x3 regions are drained: 148 -> 607 regions at
            // once from 1,000 keys at 3,984x).
            let first = switched && policy != Policy::Even;
            // Closing, the 21x3 regions give before all: each key of
            // their slots steps, so the step must take their slots.
            let over = fullest(false)
                .filter(|&r| self.regions[r].kind.is_wide() && load(r) > mean)
                .filter(|_| !(switched && policy == Policy::Close && fullest(true).is_some()));
            let (from, priority) = match (over, fullest(first)) {
                (Some(r), _) => (r, false),
                (None, Some(r)) => (r, first),
                (None, None) => break,
            };
            let i = self.regions[from]
                .slots
                .iter()
                .rposition(|&s| !self.slot_split(s as usize))
                .expect("movable");
            let slot = self.regions[from].slots[i] as usize;
            let e = self.slot_entries(slot) as f64;
            // Stop at the share (to within half a slot), and, taking by
            // load, when the move would not even the two regions.
            if planned[to] + e / 2.0 > mean * to_weight {
                break;
            }
            let from_weight = self.regions[from].weight(room);
            if drain && !priority && load(from) <= mean {
                break;
            }
            if !priority && (planned[from] - e) / from_weight < (planned[to] + e) / to_weight {
                break;
            }
            self.regions[from].slots.swap_remove(i);
            self.regions[to].slots.push(slot as u32);
            self.map[slot] = to as u32;
            planned[from] -= e;
            planned[to] += e;
            moves.insert(slot as u32, from);
        }
        if std::env::var_os("WIDENING_TRACE").is_some() && switched {
            let (r3, e3, l3) = self.kind_stats(Kind::Short3);
            let (r2, _, l2) = self.kind_stats(Kind::Wide(self.geometry));
            eprintln!(
                "step {}: {old} -> {regions} regions, {} slots moved, mean {mean:.3}, 21x3 {r3} ({e3} without slots) load {l3:.3}, wide {r2} load {l2:.3}",
                self.steps,
                moves.len()
            );
        }
        // The sweep: each donor's entries whose slot moved hop to its new
        // region, at the same local bucket, keeping their kind.
        let mut donors: Vec<usize> = moves.values().copied().collect();
        donors.sort_unstable();
        donors.dedup();
        for from in donors {
            let lanes = self.regions[from].kind.lanes();
            for i in 0..self.regions[from].cells.len() {
                let v = self.regions[from].cells[i];
                if v == 0 {
                    continue;
                }
                let local = (i / lanes) as u64;
                let fine = self.fine_slot(u64::from(v & TAG_MASK), local);
                let slot = self.slot(fine);
                if !moves.contains_key(&(slot as u32)) {
                    continue;
                }
                let to = self.map[slot] as usize;
                self.regions[from].cells[i] = 0;
                self.regions[from].entries -= 1;
                if self.place(to, v, local) {
                    self.copies += 1;
                } else {
                    // Left where it was; the slot reads both regions.
                    self.regions[from].cells[i] = v;
                    self.regions[from].entries += 1;
                    self.split.insert(fine as u32, from as u32);
                    self.failed_hops += 1;
                }
            }
        }
        Ok(())
    }

    fn bits(&self) -> f64 {
        let bucket_bits: u64 = self.regions.iter().map(|r| r.kind.bucket_bits()).sum();
        (bucket_bits * self.m0) as f64
    }

    /// Regions of `kind`, those of them without slots, and their load
    /// (entries over lanes, those without slots too).
    fn kind_stats(&self, kind: Kind) -> (usize, usize, f64) {
        let of: Vec<&Region> = self.regions.iter().filter(|r| r.kind == kind).collect();
        let empty = of.iter().filter(|r| r.slots.is_empty()).count();
        let entries: u64 = of.iter().map(|r| r.entries).sum();
        let lanes: u64 = of.iter().map(|r| r.lanes()).sum();
        (of.len(), empty, entries as f64 / lanes.max(1) as f64)
    }
}

fn main() {
    let all: Vec<String> = std::env::args().collect();
    let wide_arg = all
        .iter()
        .find_map(|a| a.strip_prefix("wide="))
        .unwrap_or("32x2");
    let geometry = Geometry::parse(wide_arg);
    let wide = Kind::Wide(geometry);
    let slot_bits: u32 = all
        .iter()
        .find_map(|a| a.strip_prefix("slots="))
        .map_or(MAX_SLOT_BITS, |b| b.parse().expect("slots=BITS"));
    let args: Vec<&String> = all.iter().filter(|a| !a.contains('=')).collect();
    let n: u64 = args.get(1).map_or(1000, |a| a.parse().expect("n"));
    let growth: u64 = args.get(2).map_or(10_000, |a| a.parse().expect("growth"));
    let switch: f64 = args
        .get(3)
        .map_or(1.0 / 3.0, |a| a.parse().expect("switch"));
    let policy = match args.get(4).map_or("first", |a| a.as_str()) {
        "first" => Policy::First,
        "even" => Policy::Even,
        "drain" => Policy::Drain,
        "reuse" => Policy::Reuse,
        "close" => Policy::Close,
        p => panic!("policy {p}: first, even, drain, reuse or close"),
    };
    let room = match args.get(5).map_or("room", |a| a.as_str()) {
        "room" => true,
        "lanes" => false,
        w => panic!("weight {w}: room or lanes"),
    };
    let f = CuckooFilter::builder()
        .capacity(n as usize)
        .seed(7)
        .build()
        .expect("filter");
    let first_capacity = f.capacity();
    let key = |i: u64| splitmix64::at(0x243F_6A88_85A3_08D3, i);
    let mut i = 0;
    let (level0_slots, level0_buckets);
    loop {
        // Level 0's slots, before the insert that publishes a level.
        let (before, buckets) = (f.capacity(), f.stats().buckets);
        f.insert(&key(i)).expect("room");
        if f.stats().levels > 1 {
            (level0_slots, level0_buckets) = (before, buckets);
            break;
        }
        i += 1;
    }
    let level0_items = i;
    let level0_bits = level0_slots as f64 * 16.0;
    // Koel's Plan::above: level 0's bound at its last generation (16x4),
    // half of what it leaves, and m0 for START x its sized items.
    let generation = (level0_slots / first_capacity).trailing_zeros();
    let bound0 = 8.0 * f64::from(1u32 << generation) / 65_534.0;
    let own = (CAP - bound0) / 2.0;
    let items = (level0_slots as f64 * LEVEL0_SIZING_LOAD) as usize;
    let m0 = (START * items as f64 / 2.7).ceil() as u64;
    let m0 = (m0 + (m0 & 1)).max(64);
    let real_m0 = f.stats().buckets - level0_buckets;
    assert_eq!(m0 as usize, real_m0, "m0 as koel's Plan::above gives it");
    let budget_regions = ((own * MAX_TAG as f64 / (6.0 * LOAD)) as usize).min(MAX_REGIONS);
    let max_regions = if switch.is_finite() {
        MAX_REGIONS
    } else {
        budget_regions
    };
    let mut level = Level::new(m0, max_regions, geometry, slot_bits);
    println!(
        "n {n}: level 0 holds {level0_items} (generation {generation}, bound {bound0:.3e}, {:.2} bits/key); \
         level 1: m0 {m0}, own {own:.3e}, R_max {budget_regions} by the budget, {max_regions} here; \
         switch at {switch} x own to {wide_arg} (fill {:.2}), policy {}, weight {}",
        level0_bits / level0_items as f64,
        wide.fill(),
        args.get(4).map_or("first", |a| a.as_str()),
        if room { "room" } else { "lanes" },
    );
    println!(
        "| keys | growth | 21x3 (no slots) | wide (no slots) | short | wide | bits/key | x right-sized | load 21x3 | load wide | FPR measured | FPR estimate | L1 rate / own | copies/key | retries | slots/region |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let report = |level: &Level, inserted: u64, retries: u64, note: &str| {
        let absent = 1_000_000u64;
        let hits = (0..absent)
            .filter(|&a| {
                let h = f.hash(&(a | 1 << 63));
                f.contains_hash(h) || level.holds(h)
            })
            .count();
        let bits = (level0_bits + level.bits()) / inserted as f64;
        let (r3, e3, l3) = level.kind_stats(Kind::Short3);
        let (r2, e2, l2) = level.kind_stats(wide);
        // Slots per region holding any: near 1-2 the map's slots are too
        // coarse to balance the regions.
        let holding = level.regions.iter().filter(|r| !r.slots.is_empty()).count();
        let held = (level.short + level.wide).max(1) as f64;
        println!(
            "| {inserted} | {}x{note} | {r3} ({e3}) | {r2} ({e2}) | {:.1}% | {:.1}% | {bits:.2} | {:.2} | {l3:.3} | {l2:.3} | {:.3e} | {:.3e} | {:.3} | {:.2} | {retries} | {:.1} |",
            inserted / n,
            100.0 * level.short as f64 / held,
            100.0 * level.wide as f64 / held,
            bits / RIGHT_SIZED_BITS,
            hits as f64 / absent as f64,
            f.stats().false_positive_rate + level.rate(),
            level.rate() / own,
            level.copies as f64 / held,
            level.map.len() as f64 / holding as f64,
        );
    };
    let mut points: Vec<u64> = (1..=9).map(|e| 10u64.pow(e) * n).collect();
    points.push(270_000 * n);
    points.push(growth * n);
    points.retain(|&p| p <= growth * n);
    points.sort_unstable();
    points.dedup();
    let mut inserted = level0_items + 1;
    points.retain(|&p| p > inserted);
    let (mut retries, mut switched) = (0u64, false);
    let mut worst = (0.0, 0);
    let mut j = level0_items + 1;
    let mut out = None;
    'grow: while inserted < growth * n {
        let h = f.hash(&key(j));
        j += 1;
        let mut stepped = false;
        while !level.insert(h, switched && policy == Policy::Close && !stepped) {
            if stepped {
                retries += 1;
            }
            if !switched && level.rate() >= switch * own {
                switched = true;
                report(&level, inserted, retries, " (switch)");
            }
            let kind = if switched { wide } else { Kind::Short3 };
            if let Err(o) = level.step(kind, switched, policy, room) {
                out = Some(o);
                break 'grow;
            }
            stepped = true;
        }
        inserted += 1;
        if level.rate() > own {
            out = Some(Out::Budget);
            break;
        }
        let ratio = (level0_bits + level.bits()) / inserted as f64 / RIGHT_SIZED_BITS;
        if inserted >= 100 * n && ratio > worst.0 {
            worst = (ratio, inserted);
        }
        if points.first() == Some(&inserted) {
            points.remove(0);
            report(&level, inserted, retries, "");
        }
    }
    if let Some(o) = out {
        report(&level, inserted, retries, &format!(" (out: {o:?})"));
        println!(
            "level 1 out of {o:?} at {inserted} keys ({}x): a third level would start there",
            inserted / n
        );
    }
    for (kind, (sum, count, least)) in [Kind::Short3, wide].iter().zip(level.refusals) {
        if count > 0 {
            println!(
                "{kind:?} regions refused an insert {count} times, at mean load {:.3} (least {least:.3})",
                sum / count as f64
            );
        }
    }
    println!(
        "steps {}, hops that found no room {}, slots {}; most bits per key against right-sized from 100x on: {:.2}x at {} keys ({}x)",
        level.steps,
        level.failed_hops,
        level.map.len(),
        worst.0,
        worst.1,
        worst.1 / n
    );
}
