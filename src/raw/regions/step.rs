//! A step: new regions, the slots they take, the bump, and the sweep that
//! moves the old regions' tags whose slots moved, in chunks that inserts
//! help with.

use super::{
    new_region, slots_wanted, Entry, Hopped, NoStep, Regions, SlotMap, Wait, CHUNK, JOINING,
    STEP_DIVISOR,
};
#[cfg(loom)]
use crate::canary::RegionCanary;
use crate::raw::bucket::{self, L21x3, Layout};
use crate::raw::geometry::Located;
use crate::raw::pause;
use crate::raw::slot_map::doublings_bytes;
use crate::raw::stripe::Patience;
use crate::sync::{fence, AtomicU32, AtomicUsize, Backoff, Ordering};

/// The running step's sweep: its old buckets, in chunks.
///
/// Each chunk is to do, claimed, crowded or done, with the bucket its next
/// sweep starts from (a byte of `states`, changed by CAS). Helpers take
/// tickets (`cursor`) modulo the chunk count, so chunks given back come
/// round again. One that may not wait (an insert with room) claims a chunk
/// to do and sweeps it until a held stripe or a full pair of the new
/// region, where it stops and gives the rest back: to do after a held
/// stripe, crowded after a full pair (only a sweeper that may displace can
/// go on). One that may wait (an insert that displaces anyway) claims a
/// chunk to do or crowded. An insert whose region is full, and
/// `finish_step`, also sweep a chunk that another claimed and did not
/// finish (sweeping is idempotent: a hop moves any copy of a tag, and
/// finds `Gone` what another moved). A sweep that may wait covers the rest
/// of its chunk and marks it done; the step ends when every chunk is. So
/// a stopped claimant holds up no step.
pub(super) struct Sweep {
    /// The step's number (the counter's value after its bump).
    step: u64,
    /// Regions before the step: the sweep covers their buckets.
    regions: usize,
    chunks: usize,
    /// Helpers' tickets: ticket `t` looks at chunk `t % chunks`.
    cursor: AtomicUsize,
    /// A byte per chunk: its state ([`TODO`], [`CLAIMED`], [`CROWDED`]
    /// or [`DONE`]) and where in it the next sweep starts (in [`UNIT`]s
    /// of buckets: a helper that skips something stops there).
    states: Box<[AtomicU32]>,
    /// Chunks done.
    done: AtomicUsize,
}

/// Bits of a chunk's byte, and its state's bits.
const FIELD_BITS: usize = 8;
const PER_WORD: usize = 32 / FIELD_BITS;
const FIELD_MASK: u32 = (1 << FIELD_BITS) - 1;
const STATE_MASK: u32 = 3;
/// Buckets per step of a chunk's start (six bits of it).
const UNIT: usize = if CHUNK >= 64 { CHUNK / 64 } else { 1 };
const _: () = assert!(CHUNK / UNIT <= 64);
/// A chunk nobody sweeps now, not yet swept whole.
const TODO: u32 = 0;
/// A chunk a helper is sweeping.
const CLAIMED: u32 = 1;
/// A chunk whose helper stopped at a full pair: left for a sweeper that
/// may displace.
const CROWDED: u32 = 2;
/// A chunk swept whole by someone.
const DONE: u32 = 3;

/// A chunk's byte: `state`, next sweep from bucket `start` of it.
fn chunk_byte(state: u32, start: usize) -> u32 {
    state | ((start / UNIT) as u32) << 2
}

/// The state of a chunk's byte.
fn state_of(mark: u32) -> u32 {
    mark & STATE_MASK
}

/// Where in its chunk the next sweep starts, from a chunk's byte.
fn start_of(mark: u32) -> usize {
    (mark >> 2) as usize * UNIT
}

/// How a chunk's sweep went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Swept {
    /// Every tag to hop was hopped (or found no room, marked).
    Whole,
    /// Stopped at a held stripe, in bucket (of the chunk) this or after.
    Busy(usize),
    /// Stopped at a full pair of the new region, likewise.
    Crowded(usize),
    /// Stopped: another sweeper marked the chunk done.
    Overtaken,
}

impl Sweep {
    /// The regions the step began with: the ones it empties.
    pub(super) fn regions(&self) -> usize {
        self.regions
    }

    /// Chunk `c`'s byte. Relaxed: a hint (the claim, the give-back and the
    /// done mark are CASes; `done` orders the hops).
    fn mark(&self, c: usize) -> u32 {
        let w = self.states[c / PER_WORD].load(Ordering::Relaxed);
        (w >> (c % PER_WORD * FIELD_BITS)) & FIELD_MASK
    }

    /// Sets chunk `c`'s byte from `from` to `to`; `false` if it was not
    /// `from`.
    fn set_mark(&self, c: usize, from: u32, to: u32) -> bool {
        let word = &self.states[c / PER_WORD];
        let shift = c % PER_WORD * FIELD_BITS;
        // Relaxed, both: ownership of the chunk is all the byte decides;
        // the hops carry their own ordering, `done` orders the step's end.
        let mut w = word.load(Ordering::Relaxed);
        loop {
            if (w >> shift) & FIELD_MASK != from {
                return false;
            }
            let next = (w & !(FIELD_MASK << shift)) | to << shift;
            match word.compare_exchange_weak(w, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(seen) => w = seen,
            }
        }
    }

    /// Claims chunk `c` if its byte passes `takes`; where its sweep
    /// starts, or `None`.
    fn claim(&self, c: usize, takes: impl Fn(u32) -> bool) -> Option<usize> {
        let word = &self.states[c / PER_WORD];
        let shift = c % PER_WORD * FIELD_BITS;
        // Relaxed, both: as in `set_mark`.
        let mut w = word.load(Ordering::Relaxed);
        loop {
            let m = (w >> shift) & FIELD_MASK;
            if !takes(m) {
                return None;
            }
            let next = (w & !(FIELD_MASK << shift)) | chunk_byte(CLAIMED, start_of(m)) << shift;
            match word.compare_exchange_weak(w, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(start_of(m)),
                Err(seen) => w = seen,
            }
        }
    }

    /// The chunk among `chunks` a sweeper that may wait should take when
    /// it must make progress, and its byte: the first crowded one (only
    /// such a sweeper can finish it), else the first to do, else the first
    /// claimed (its claimant may have stopped); `None` if all are done.
    fn pick(&self, chunks: std::ops::Range<usize>) -> Option<(usize, u32)> {
        let mut best: Option<(usize, u32)> = None;
        let rank = |m: u32| match state_of(m) {
            CROWDED => 0,
            TODO => 1,
            _ => 2,
        };
        for c in chunks {
            let m = self.mark(c);
            if state_of(m) != DONE && best.is_none_or(|(_, b)| rank(m) < rank(b)) {
                best = Some((c, m));
                if state_of(m) == CROWDED {
                    break;
                }
            }
        }
        best
    }
}

/// What only the step's claimant touches: which slots each region holds.
pub(super) struct Plan {
    pub(super) slots: Vec<Vec<u16>>,
}

impl Regions {
    /// Claims and begins a step: new regions, the slots they take (their
    /// entries), then the bump, then the sweep's publication.
    pub(super) fn begin_step(&self) -> Result<(), NoStep> {
        let old = self.claim_step()?;
        #[cfg(loom)]
        if self.canary == RegionCanary::BumpBeforeEntries {
            self.begin_bumping_first(old);
            return Ok(());
        }
        self.move_slots(old);
        let step = self.bump();
        self.open_sweep(step, old);
        Ok(())
    }

    /// Claims the step and allocates its regions; the regions there were
    /// before.
    pub(super) fn claim_step(&self) -> Result<usize, NoStep> {
        // Acquire: pairs with the Release in `end_step`, so this claimant
        // sees the last step's plan and entries.
        if self
            .claim
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(NoStep::Running);
        }
        // Relaxed: only claimants write the count, and this one holds the
        // claim (the Acquire above ordered it after the last write).
        let old = self.count.load(Ordering::Relaxed);
        let mut k = (old / STEP_DIVISOR).max(1).min(self.max_regions - old);
        if k > 0 {
            // The byte budget, checked before anything is allocated: the
            // step shrinks to what it can pay, and is refused if that is
            // not even one region.
            // The maps the step may add count too (at most the bytes of
            // the one the whole step wants).
            let per = self.region(0).bytes();
            let held = self.bytes();
            let maps = self.map_growth_bytes(old + k);
            let affordable = self.max_bytes.saturating_sub(held).saturating_sub(maps) / per;
            if affordable == 0 {
                // Release: as in `end_step`.
                self.claim.store(0, Ordering::Release);
                return Err(NoStep::Memory {
                    needed: held.saturating_add(per).saturating_add(maps),
                });
            }
            k = k.min(affordable);
        }
        let mut added = Vec::new();
        let mut refused_bytes = None;
        for r in old..old + k {
            let made = new_region(
                self.geo,
                &self.maps,
                r,
                #[cfg(loom)]
                self.canary,
            );
            match made {
                Ok(t) => {
                    #[cfg(loom)]
                    self.fill_if_junk(&t);
                    added.push(t)
                }
                Err(e) => {
                    refused_bytes = Some(e.bytes);
                    break;
                }
            }
        }
        if added.is_empty() {
            // Release: as in `end_step`.
            self.claim.store(0, Ordering::Release);
            return Err(match refused_bytes {
                Some(bytes) => NoStep::Alloc { bytes },
                None => NoStep::Refused,
            });
        }
        // The last step's failures were read by its end.
        self.map().failed.clear();
        let k = added.len();
        self.grow_map(old + k);
        // Pins on once the step is sure to run, before its regions and
        // entries are published (`end_step` turns them off): a refused
        // step never leaves them on (review, 2026-12-07).
        self.maps.set_pinning(true);
        for (r, t) in (old..).zip(added) {
            // Release: pairs with the Acquire load in `region`.
            self.tables[r].store(Box::into_raw(Box::new(t)), Ordering::Release);
        }
        // Release: readers of the count (statistics) see the regions.
        self.count.store(old + k, Ordering::Release);
        Ok(old)
    }

    /// Bytes of the maps that doubling the current one until a level of
    /// `regions` regions wants no more would add.
    fn map_growth_bytes(&self, regions: usize) -> usize {
        doublings_bytes(self.map().slots(), slots_wanted(regions, self.max_regions))
    }

    /// Doubles the map (the claimant's, before its step's pins, regions
    /// and entries) until a level of `regions` regions wants no more, and
    /// the plan with it: slot `s` becomes `2s` and `2s + 1`.
    fn grow_map(&self, regions: usize) {
        let want = slots_wanted(regions, self.max_regions);
        if self.map().slots() >= want {
            return;
        }
        let mut plan = self.plan.lock().expect("no step panics holding the plan");
        while self.map().slots() < want {
            self.maps.double(
                #[cfg(loom)]
                (self.canary == crate::canary::RegionCanary::UnfrozenDoubling),
            );
            for slots in plan.slots.iter_mut() {
                *slots = slots.iter().flat_map(|&s| [2 * s, 2 * s + 1]).collect();
            }
        }
    }

    /// Assigns slots to the regions added after the `old` ones and writes
    /// their entries `new | old << 16`.
    pub(super) fn move_slots(&self, old: usize) {
        let mut plan = self.plan.lock().expect("no step panics holding the plan");
        plan.slots.resize_with(self.regions(), Vec::new);
        let map = self.map();
        for (slot, from, to) in assign(&mut plan.slots, old, map) {
            let joined = Entry::whole(from).pack();
            let moving = Entry {
                cur: to,
                prev: from,
            }
            .pack();
            // A CAS, not a store: a stale insert may have split the slot
            // meanwhile (`keep_split`), and then it stays where it is.
            // Release: pairs with readers' Acquire entry loads, which then
            // see the new region published.
            if map
                .at(slot)
                .compare_exchange(joined, moving, Ordering::Release, Ordering::Relaxed)
                .is_err()
            {
                plan.slots[to].retain(|&s| s as usize != slot);
                plan.slots[from].push(slot as u16);
            }
        }
    }

    /// Bumps the step counter; the new step's number.
    pub(super) fn bump(&self) -> u64 {
        // SeqCst RMW, then a SeqCst fence: the step's half of the Dekker
        // pairs with inserts (`insert`) and with displacements in old
        // regions (`path::unpin_or_undo`). After the entries: a reader that
        // sees this number sees them.
        let step = self.step.fetch_add(1, Ordering::SeqCst) + 1;
        fence(Ordering::SeqCst);
        step
    }

    /// Publishes the sweep of step `step` over the `old` regions.
    pub(super) fn open_sweep(&self, step: u64, old: usize) {
        let chunks = (old * self.geo.m0() as usize).div_ceil(CHUNK);
        let sweep = Box::new(Sweep {
            step,
            regions: old,
            chunks,
            cursor: AtomicUsize::new(0),
            states: (0..chunks.div_ceil(PER_WORD))
                .map(|_| AtomicU32::new(0))
                .collect(),
            done: AtomicUsize::new(0),
        });
        let p = &*sweep as *const Sweep as *mut Sweep;
        self.sweeps
            .lock()
            .expect("no step panics holding the sweeps")
            .push(sweep);
        // Release: pairs with the Acquire load in `help`: a helper's hops
        // come after the bump and its fence.
        self.sweep.store(p, Ordering::Release);
    }

    /// The running step's sweep, if any.
    pub(super) fn running_sweep(&self) -> Option<&Sweep> {
        // Acquire: pairs with the Release store in `open_sweep`: a helper's
        // hops come after the bump and its fence.
        let p = self.sweep.load(Ordering::Acquire);
        // SAFETY: a non-null sweep is one of `self.sweeps`' boxes, which
        // are freed only when the level drops, which cannot happen while
        // `&self` lives.
        unsafe { p.as_ref() }
    }

    /// Helps the running step without waiting for anyone (see
    /// [`help_in`](Self::help_in)); `false` if it swept nothing.
    // Tests and loom models (inserts call `help_in`).
    #[cfg_attr(not(any(test, loom)), allow(dead_code))]
    pub(crate) fn help(&self) -> bool {
        match self.running_sweep() {
            Some(sweep) => self.help_in(sweep, Wait::No),
            None => false,
        }
    }

    /// The bounded help an insert gives `sweep`: the chunk of its ticket,
    /// if that is to do (or crowded, for a sweeper that may wait). With
    /// [`Wait::No`] it waits for no one: it stops at a held stripe or a
    /// full pair and gives the rest of the chunk back. `false` if it swept
    /// nothing.
    pub(super) fn help_in(&self, sweep: &Sweep, wait: Wait) -> bool {
        // Relaxed: a ticket; the claim CAS decides ownership.
        let c = sweep.cursor.fetch_add(1, Ordering::Relaxed) % sweep.chunks;
        let takes = |m: u32| match state_of(m) {
            TODO => true,
            CROWDED => wait == Wait::Yes,
            _ => false,
        };
        let Some(start) = sweep.claim(c, takes) else {
            return false;
        };
        let claimed = chunk_byte(CLAIMED, start);
        let swept = self.sweep_chunk(sweep, c, start, wait);
        #[cfg(loom)]
        let swept = match swept {
            Swept::Busy(_) | Swept::Crowded(_) if self.canary == RegionCanary::DoneWithSkips => {
                Swept::Whole
            }
            other => other,
        };
        // Each fails if a waiting sweeper marked the chunk done meanwhile,
        // which is as good.
        match swept {
            Swept::Whole => {
                self.chunk_done(sweep, c, claimed);
            }
            Swept::Busy(at) => {
                sweep.set_mark(c, claimed, chunk_byte(TODO, at));
            }
            Swept::Crowded(at) => {
                sweep.set_mark(c, claimed, chunk_byte(CROWDED, at));
            }
            Swept::Overtaken => {}
        }
        true
    }

    /// Helps the running step to its end, waiting where it must: sweeps
    /// the chunk [`Sweep::pick`] names, from where its last sweeper
    /// stopped (or, if claimed, started), and marks it done. A chunk of
    /// region `near` first, if it is one the sweep covers: an insert
    /// whose region is full gets room soonest from its own region's
    /// chunks (each retry of its search costs tens of chunks' reads).
    /// `false` if every chunk is done (or no step runs).
    pub(crate) fn help_waiting(&self, near: Option<usize>) -> bool {
        let Some(sweep) = self.running_sweep() else {
            return false;
        };
        let m0 = self.geo.m0() as usize;
        let own = near
            .filter(|&r| r < sweep.regions)
            .and_then(|r| sweep.pick(r * m0 / CHUNK..((r + 1) * m0).div_ceil(CHUNK)));
        let Some((c, seen)) = own.or_else(|| sweep.pick(0..sweep.chunks)) else {
            return false;
        };
        // A chunk to do or crowded is claimed first, so helpers keep off
        // it; a claimed one is swept beside its claimant. A lost race is
        // help too: the caller comes back.
        if state_of(seen) != CLAIMED
            && !sweep.set_mark(c, seen, chunk_byte(CLAIMED, start_of(seen)))
        {
            return true;
        }
        self.sweep_chunk(sweep, c, start_of(seen), Wait::Yes);
        // Done from whatever its byte is now: claimed by this thread or
        // another, or given back since.
        loop {
            let now = sweep.mark(c);
            if state_of(now) == DONE || self.chunk_done(sweep, c, now) {
                return true;
            }
        }
    }

    /// The tag in lane `lane` of `word`, bucket `b` of region `r`, if its
    /// slot's `cur` is another region (it leaves `r`): with its pair, its
    /// slot's entry (loaded now) and its slot. What a sweep and an
    /// eviction hop; `word` is read with [`bucket_word`](Self::bucket_word).
    #[inline(always)]
    fn leaving(&self, r: usize, b: usize, word: u64, lane: u32) -> Option<(Located, Entry, usize)> {
        let tag = bucket::lane::<L21x3>(word, lane);
        if tag == 0 {
            return None;
        }
        let at = Located {
            tag,
            i1: b,
            i2: self.geo.alt(b, tag),
        };
        // Acquire, both: as in `contains`. (The map is the step's: none
        // doubles it while the step runs. A sweeper that outlived its step
        // may read a later one; its hops are undone, its marks only keep a
        // slot split one step longer.)
        let (_, slot, e) = self.entry_of(at);
        (e.cur != r).then_some((at, e, slot))
    }

    /// Bucket `b` of region `r`, for a sweep or an eviction.
    #[inline(always)]
    fn bucket_word(&self, r: usize, b: usize) -> u64 {
        // Acquire: pairs with the Release CAS that put each tag.
        self.region(r).word(b).load(Ordering::Acquire)
    }

    /// Room for an insert whose search found no path from pair `at` in old
    /// region `r` while `sweep`'s step runs: hops out of those two buckets
    /// every tag whose slot moved on, as the sweep will, and if that moves
    /// none, out of
    /// the buckets holding the alternates of the pair's tags (so a
    /// displacement of one step then finds a free lane). At most eight
    /// buckets: the bounded work such an insert does for the step on its
    /// own behalf, beside its one chunk, where sweeping its region chunk
    /// by chunk until some path frees up took hundreds of chunks (a
    /// region of 948,156 buckets: up to 1,137 rounds, 49 ms, for one
    /// insert). Any thread may hop any moving tag (hops are idempotent);
    /// the chunks still cover every bucket. `true` if a tag moved.
    pub(super) fn evict_moving(&self, sweep: &Sweep, r: usize, at: Located) -> bool {
        debug_assert!(r < sweep.regions, "only old regions are swept");
        let Located { tag: _, i1, i2 } = at;
        let pair = [i1, i2];
        let mut moved = false;
        let mut patience = Patience::default();
        for b in pair {
            match self.evict_bucket(sweep, r, b, &mut patience) {
                Some(m) => moved |= m,
                None => return moved,
            }
        }
        if moved {
            return true;
        }
        let t = self.region(r);
        for b in pair {
            // Relaxed: which buckets to look at is a hint; each is read
            // again (Acquire) before anything hops.
            let word = t.word(b).load(Ordering::Relaxed);
            for lane in 0..L21x3::LANES {
                let tag = bucket::lane::<L21x3>(word, lane);
                if tag == 0 {
                    continue;
                }
                match self.evict_bucket(sweep, r, self.geo.alt(b, tag), &mut patience) {
                    Some(m) => moved |= m,
                    None => return moved,
                }
            }
        }
        moved
    }

    /// Hops out of bucket `b` of old region `r` every tag whose slot moved
    /// on, for [`evict_moving`](Self::evict_moving): whether one moved, or
    /// `None` once `sweep`'s step is over.
    fn evict_bucket(
        &self,
        sweep: &Sweep,
        r: usize,
        b: usize,
        patience: &mut Patience,
    ) -> Option<bool> {
        let mut moved = false;
        let word = self.bucket_word(r, b);
        for lane in 0..L21x3::LANES {
            let Some((at, e, _)) = self.leaving(r, b, word, lane) else {
                continue;
            };
            // Never by a later step's entry, whose bump this thread may not
            // have seen (a chunk's sweeper checks its chunk's mark for the
            // same reason): such an entry is written after this step's
            // end, which follows the last `done` increment, so this Acquire
            // load then sees every chunk done.
            if sweep.done.load(Ordering::Acquire) == sweep.chunks {
                return None;
            }
            pause::here(pause::Point::EvictChecked, at.into());
            #[cfg(loom)]
            let hopped = if self.canary == RegionCanary::UnlockedEvict {
                self.evict_unlocked(r, e.cur, at)
            } else {
                self.hop(r, e.cur, at, Wait::Yes, Some(sweep.step), Some(patience))
            };
            #[cfg(not(loom))]
            let hopped = self.hop(r, e.cur, at, Wait::Yes, Some(sweep.step), Some(patience));
            match hopped {
                Hopped::Moved => moved = true,
                // Another hop took it, or the new region has no room (or
                // the pair's stripe stayed held): the tag stays, for the
                // chunk's sweep (which marks the slot)
                // or, a stale insert's copy put after that sweep, for the
                // insert's own follow (which splits it).
                Hopped::Gone | Hopped::NoRoom | Hopped::Held => {}
                Hopped::Stale => return None,
                Hopped::Busy | Hopped::Crowded => unreachable!("a hop that may wait"),
            }
        }
        Some(moved)
    }

    /// Marks chunk `c`, swept whole, done if its byte was `from`; ends the
    /// step if it was the last. `false` if it was not `from`.
    fn chunk_done(&self, sweep: &Sweep, c: usize, from: u32) -> bool {
        if !sweep.set_mark(c, from, chunk_byte(DONE, 0)) {
            return false;
        }
        // AcqRel: the last chunk's finisher sees every chunk's hops and
        // failure marks (each released here) before it ends the step.
        if sweep.done.fetch_add(1, Ordering::AcqRel) + 1 == sweep.chunks {
            self.end_step();
        }
        true
    }

    /// Hops every tag of chunk `chunk`, from its bucket `start` on, whose
    /// region is not its slot's `cur`; without waiting, stops at a held
    /// stripe or a full pair.
    fn sweep_chunk(&self, sweep: &Sweep, chunk: usize, start: usize, wait: Wait) -> Swept {
        // SeqCst: the sweep's half of the Dekker pairs with inserts and
        // with displacements in old regions (see the module docs).
        fence(Ordering::SeqCst);
        let m0 = self.geo.m0() as usize;
        let end = ((chunk + 1) * CHUNK).min(sweep.regions * m0);
        let mut patience = Patience::default();
        for g in chunk * CHUNK + start..end {
            let (r, local) = (g / m0, g % m0);
            let word = self.bucket_word(r, local);
            for lane in 0..L21x3::LANES {
                let Some((at, e, slot)) = self.leaving(r, local, word, lane) else {
                    continue;
                };
                pause::here(pause::Point::SweepHopping, at.into());
                // Done by another sweeper (this one stopped a while): stop.
                // After the entry load: an entry a later step wrote was
                // written after this step's end, so this load sees the
                // chunk done and no hop follows an entry its bump has not
                // been seen for (module docs, "Orderings").
                if state_of(sweep.mark(chunk)) == DONE {
                    return Swept::Overtaken;
                }
                pause::here(pause::Point::SweepChecked, at.into());
                // Where the next sweeper starts if this one stops here.
                let here = (g - chunk * CHUNK) / UNIT * UNIT;
                let hopped = self.hop(r, e.cur, at, wait, Some(sweep.step), Some(&mut patience));
                #[cfg(loom)]
                if hopped == Hopped::Held && self.canary == RegionCanary::HeldUnmarked {
                    continue;
                }
                match hopped {
                    Hopped::Moved | Hopped::Gone => {}
                    // The step ended: every chunk is done.
                    Hopped::Stale => return Swept::Overtaken,
                    Hopped::Busy => return Swept::Busy(here),
                    Hopped::Crowded => return Swept::Crowded(here),
                    // Left where it is (no room in the new region, or the
                    // pair's stripe held too long): the slot stays split.
                    Hopped::NoRoom | Hopped::Held => {
                        if e.prev == r {
                            // Relaxed: if this thread marks the chunk
                            // done, `done`'s AcqRel orders the mark before
                            // `end_step`; if another does, that thread swept
                            // every bucket of the chunk and met this tag
                            // itself (module docs, "Progress").
                            self.map().failed.mark(slot);
                        }
                    }
                }
            }
        }
        Swept::Whole
    }

    /// Ends the running step, whose chunks are all swept: joins every
    /// split slot whose hops all found room in this step, drops the claim.
    fn end_step(&self) {
        // The step's map: only the next claimant doubles it.
        let map = self.map();
        for slot in 0..map.slots() {
            let entry = map.at(slot);
            // Acquire: as in `contains` (this thread writes nothing it read).
            let v = entry.load(Ordering::Acquire);
            let e = Entry::unpack(v);
            // Relaxed: the sweep's marks are ordered by `done`; a stale
            // insert's by the fences below.
            if !e.is_split() || map.failed.marked(slot) {
                continue;
            }
            let joined = Entry::whole(e.cur).pack();
            pause::here(
                pause::Point::EndStepJoining,
                pause::At {
                    a: slot,
                    b: e.cur,
                    tag: 0,
                },
            );
            // First mark the entry joining: readers still read both regions
            // while it is, so a stale insert that splits the slot in the
            // meantime (`keep_split`) is never hidden; it clears the mark,
            // and the join below fails. Release: the value names the same
            // regions as `v`; it keeps the entry's publication.
            let joining = v | JOINING;
            if entry
                .compare_exchange(v, joining, Ordering::Release, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            pause::here(
                pause::Point::EndStepJoined,
                pause::At {
                    a: slot,
                    b: e.cur,
                    tag: 0,
                },
            );
            #[cfg(loom)]
            if self.canary == RegionCanary::UncheckedJoin {
                let _ =
                    entry.compare_exchange(joining, joined, Ordering::Release, Ordering::Relaxed);
                continue;
            }
            // SeqCst: `keep_split`'s Dekker pair (see there): either this
            // load sees a stale insert's failure mark, or that insert's
            // load of the entry sees the joining mark and clears it.
            fence(Ordering::SeqCst);
            // Relaxed: ordered by the fence.
            let keep = map.failed.marked(slot);
            // Release: pairs with readers' Acquire entry loads, so a reader
            // of an entry naming `cur` alone sees every hop of this step
            // (ordered before this thread by `done`'s AcqRel). Either CAS
            // fails if a stale insert cleared the mark first: then the slot
            // stays split, as it must.
            let _ = entry.compare_exchange(
                joining,
                if keep { v } else { joined },
                Ordering::Release,
                Ordering::Relaxed,
            );
        }
        // Relaxed: the claim's Release below publishes it to the next
        // claimant; helpers see null or a swept-out sweep either way.
        self.sweep.store(std::ptr::null_mut(), Ordering::Relaxed);
        self.maps.set_pinning(false);
        // Release: pairs with the Acquire claim in `claim_step`.
        self.claim.store(0, Ordering::Release);
    }

    /// Runs the running step's remaining chunks on this thread (for
    /// `CuckooFilter::finish_growth`, tests, and a caller that must not
    /// leave a step open), then waits for its end.
    pub(crate) fn finish_step(&self) {
        let mut backoff = Backoff::default();
        // Acquire: as in `claim_step`.
        while self.claim.load(Ordering::Acquire) != 0 {
            if !self.help_waiting(None) {
                backoff.snooze();
            }
        }
    }

    /// Begins a step now (whether or not a region is full); `false` if one
    /// is running or the level may not grow.
    // Tests and loom models.
    #[cfg_attr(not(any(test, loom)), allow(dead_code))]
    pub(crate) fn grow(&self) -> bool {
        self.begin_step().is_ok()
    }
}

/// The greedy assignment of a step adding regions `old..slots.len()`:
/// repeatedly one slot from the old region with the most slots to the new
/// region with the fewest, while that evens them. Split slots never move.
/// Returns the moves, `(slot, from, to)`, already applied to `slots`.
fn assign(slots: &mut [Vec<u16>], old: usize, map: &SlotMap) -> Vec<(usize, usize, usize)> {
    let mut moves = Vec::new();
    let mut heap: std::collections::BinaryHeap<(usize, usize)> =
        (0..old).map(|r| (slots[r].len(), r)).collect();
    while let Some((most, from)) = heap.pop() {
        let to = (old..slots.len())
            .min_by_key(|&r| slots[r].len())
            .expect("a step adds a region");
        if most <= slots[to].len() + 1 {
            break;
        }
        // The last slot of `from` that is not split.
        // Relaxed: the claim's Acquire ordered this after every entry write
        // but stale inserts' splits, which the caller's CAS catches.
        let pick = slots[from]
            .iter()
            .rposition(|&s| !map.load(s as usize, Ordering::Relaxed).is_split());
        let Some(i) = pick else {
            continue;
        };
        let slot = slots[from].swap_remove(i);
        slots[to].push(slot);
        moves.push((slot as usize, from, to));
        heap.push((slots[from].len(), from));
    }
    moves
}
