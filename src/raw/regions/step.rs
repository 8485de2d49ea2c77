//! A step: new regions, the slots they take, the bump, and the sweep that
//! moves the old regions' tags whose slots moved, in chunks that inserts
//! help with.

use super::{
    mark, new_region, slot_of, Entry, Hopped, NoStep, Regions, SlotMap, CHUNK, JOINING, SLOTS,
    STEP_DIVISOR,
};
#[cfg(loom)]
use crate::canary::RegionCanary;
use crate::raw::bucket::{self, L21x3, Layout};
use crate::raw::geometry::Located;
use crate::raw::pause;
use crate::sync::{fence, AtomicUsize, Backoff, Ordering};

/// The running step's sweep: its old buckets, in chunks.
pub(super) struct Sweep {
    /// The step's number (the counter's value after its bump).
    step: u64,
    /// Regions before the step: the sweep covers their buckets.
    regions: usize,
    chunks: usize,
    /// The next chunk to hand out.
    cursor: AtomicUsize,
    /// Chunks swept.
    done: AtomicUsize,
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
            let per = self.region(0).bytes();
            let held = self.bytes();
            let affordable = self.max_bytes.saturating_sub(held) / per;
            if affordable == 0 {
                // Release: as in `end_step`.
                self.claim.store(0, Ordering::Release);
                return Err(NoStep::Memory {
                    needed: held.saturating_add(per),
                });
            }
            k = k.min(affordable);
        }
        let mut added = Vec::new();
        let mut refused_bytes = None;
        for r in old..old + k {
            let made = new_region(
                self.geo,
                &self.map,
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
        let k = added.len();
        for (r, t) in (old..).zip(added) {
            // Release: pairs with the Acquire load in `region`.
            self.tables[r].store(Box::into_raw(Box::new(t)), Ordering::Release);
        }
        // Release: readers of the count (statistics) see the regions.
        self.count.store(old + k, Ordering::Release);
        Ok(old)
    }

    /// Assigns slots to the regions added after the `old` ones and writes
    /// their entries `new | old << 16`.
    pub(super) fn move_slots(&self, old: usize) {
        let mut plan = self.plan.lock().expect("no step panics holding the plan");
        plan.slots.resize_with(self.regions(), Vec::new);
        for (slot, from, to) in assign(&mut plan.slots, old, &self.map) {
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
            if self
                .map
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

    /// Sweeps one chunk of the running step, if any is left to claim;
    /// `false` if none was.
    pub(crate) fn help(&self) -> bool {
        // Acquire: pairs with the Release store in `open_sweep`.
        let p = self.sweep.load(Ordering::Acquire);
        // SAFETY: a non-null sweep is one of `self.sweeps`' boxes, which
        // are freed only when the level drops, which cannot happen while
        // `&self` lives.
        let Some(sweep) = (unsafe { p.as_ref() }) else {
            return false;
        };
        // Relaxed: a ticket; the chunk's work is ordered by its fence and
        // by `done` below.
        let chunk = sweep.cursor.fetch_add(1, Ordering::Relaxed);
        if chunk >= sweep.chunks {
            return false;
        }
        self.sweep_chunk(sweep, chunk);
        // AcqRel: the last chunk's finisher sees every chunk's hops (each
        // released here) before it ends the step.
        if sweep.done.fetch_add(1, Ordering::AcqRel) + 1 == sweep.chunks {
            self.end_step(sweep);
        }
        true
    }

    /// Hops every tag of chunk `chunk` whose region is not its slot's `cur`.
    fn sweep_chunk(&self, sweep: &Sweep, chunk: usize) {
        // SeqCst: the sweep's half of the Dekker pairs with inserts and
        // with displacements in old regions (see the module docs).
        fence(Ordering::SeqCst);
        let m0 = self.geo.m0() as usize;
        let end = ((chunk + 1) * CHUNK).min(sweep.regions * m0);
        for g in chunk * CHUNK..end {
            let (r, local) = (g / m0, g % m0);
            let t = self.region(r);
            // Acquire: pairs with the Release CAS that put each tag.
            let word = t.word(local).load(Ordering::Acquire);
            for lane in 0..L21x3::LANES {
                let tag = bucket::lane::<L21x3>(word, lane);
                if tag == 0 {
                    continue;
                }
                let alt = self.geo.alt(local, tag);
                let slot = slot_of(tag, local.min(alt));
                // Acquire: as in `contains`.
                let e = self.map.load(slot, Ordering::Acquire);
                if e.cur == r {
                    continue;
                }
                let at = Located {
                    tag,
                    i1: local,
                    i2: alt,
                };
                if self.hop(r, e.cur, at) == Hopped::NoRoom && e.prev == r {
                    // Relaxed: `end_step` runs after this chunk's `done`
                    // (AcqRel), which orders it.
                    self.failed[slot].fetch_max(mark(sweep.step), Ordering::Relaxed);
                }
            }
        }
    }

    /// Ends the step of `sweep`, whose chunks are all swept: joins every
    /// split slot whose hops all found room in this step, drops the claim.
    fn end_step(&self, sweep: &Sweep) {
        let step = mark(sweep.step);
        for slot in 0..SLOTS {
            let entry = self.map.at(slot);
            // Acquire: as in `contains` (this thread writes nothing it read).
            let v = entry.load(Ordering::Acquire);
            let e = Entry::unpack(v);
            // Relaxed: the sweep's marks are ordered by `done`; a stale
            // insert's by the fences below.
            if !e.is_split() || self.failed[slot].load(Ordering::Relaxed) >= step {
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
            let keep = self.failed[slot].load(Ordering::Relaxed) >= step;
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
        // Release: pairs with the Acquire claim in `claim_step`.
        self.claim.store(0, Ordering::Release);
    }

    /// Runs the running step's remaining chunks on this thread (for tests
    /// and a caller that must not leave a step open), then waits for its
    /// end.
    // Tests and loom models.
    #[cfg_attr(not(any(test, loom)), allow(dead_code))]
    pub(crate) fn finish_step(&self) {
        let mut backoff = Backoff::default();
        // Acquire: as in `claim_step`.
        while self.claim.load(Ordering::Acquire) != 0 {
            if !self.help() {
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
