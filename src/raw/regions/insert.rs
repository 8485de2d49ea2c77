//! Inserts into a level of regions, and the hop that moves one copy of a
//! tag from an old region to its slot's new one (the sweep's and a stale
//! insert's).

use super::{Entry, Hopped, NoStep, Refused, Regions, SlotMap, Wait, FROZEN, JOINING};
#[cfg(loom)]
use crate::canary::RegionCanary;
use crate::raw::bucket::{self, L21x3};
use crate::raw::cas::{put, take};
use crate::raw::geometry::Located;
use crate::raw::ops::{self, InsertFailure, Search};
use crate::raw::pause;
use crate::raw::stripe::{Patience, StripeLock};
use crate::sync::{fence, Backoff, Ordering};

impl Regions {
    /// Inserts hash `h`.
    ///
    /// First helps a running step with at most one sweep chunk (without
    /// waiting, if the key's pair has a free lane). Then puts the tag
    /// into its slot's `cur` region; if that is full, begins a step (or,
    /// while one runs, moves on the leaving tags near its pair,
    /// [`evict_moving`](Self::evict_moving), else helps the step with one
    /// more chunk) and tries again.
    ///
    /// After the CAS a `SeqCst` fence, then the counter: a Dekker pair with
    /// the step (bump, fence) and its sweep chunks (fence, word loads).
    /// Either a chunk that reads the tag's bucket sees the tag, or this
    /// load sees the bump; then the insert follows its tag to its slot's
    /// new region ([`follow`](Self::follow)) before it returns.
    pub(crate) fn insert(&self, h: u64) -> Result<(), Refused> {
        let at = self.locate(h);
        let mut backoff = Backoff::default();
        // The step counter at a refused step, if one was refused.
        let mut refused = None;
        loop {
            // Acquire, all: as in `contains`.
            let before = self.step.load(Ordering::Acquire);
            let (map, _, e) = self.entry_of(at);
            let region = self.region(e.cur);
            // The switch first: a model whose inserts help no sweep must
            // not load the sweep either (a load that races the step's
            // store of it multiplied model R7's executions by 3.7).
            let helping = if self.inserts_help() {
                self.running_sweep()
            } else {
                None
            };
            if let Some(sweep) = helping {
                // An insert with room helps without waiting (it would wait
                // for no one); one that displaces may wait, and may take
                // a chunk that needs displacing.
                let wait = if has_room(region, at) {
                    Wait::No
                } else {
                    Wait::Yes
                };
                self.help_in(sweep, wait);
            }
            pause::here(pause::Point::RegionInsertLoaded, at.into());
            match ops::insert::<L21x3>(
                region,
                at,
                false,
                ops::nowhere,
                Search::Always,
                &self.counters,
            ) {
                Ok(_) => {}
                Err(InsertFailure::Full { .. }) => {
                    match self.begin_step() {
                        Ok(()) => {}
                        // No path: while a step runs, the tags near the
                        // pair that move on make room (`evict_moving`).
                        Err(NoStep::Running) if self.evicted(e.cur, at) => {}
                        Err(NoStep::Running) => {
                            if !self.help_waiting(Some(e.cur)) {
                                // Every chunk is done: let the step's end
                                // finish.
                                backoff.snooze();
                            }
                        }
                        // The step that ended since this insert looked
                        // (the failed claim saw its end) may have made
                        // room: refuse only when a second look, after the
                        // claim, finds none either.
                        Err(no) if refused == Some(before) => return Err(no.refusal()),
                        Err(_) => refused = Some(before),
                    }
                    continue;
                }
                Err(InsertFailure::Saturated { copies }) => {
                    return Err(Refused::Saturated { copies })
                }
                Err(InsertFailure::Sealed) => unreachable!("regions are never sealed"),
            }
            pause::here(pause::Point::RegionInsertPut, at.into());
            self.fence_after_put();
            // Acquire: a bump seen here happens-before this insert's own
            // hops (module docs, last point).
            let now = self.step.load(Ordering::Acquire);
            if now == before {
                return Ok(());
            }
            #[cfg(loom)]
            if self.canary == RegionCanary::UnfollowedInsert {
                return Ok(());
            }
            return self.follow(at, e.cur, now, map);
        }
    }

    /// Hops the moving tags near `at`'s pair out of region `region`, if a
    /// step runs and empties it ([`evict_moving`](Self::evict_moving));
    /// whether one moved.
    fn evicted(&self, region: usize, at: Located) -> bool {
        // The switch first: a model whose inserts do not evict must not
        // load the sweep either (that load doubled models R3's and R6's
        // executions).
        if !self.inserts_evict() {
            return false;
        }
        match self.running_sweep() {
            Some(sweep) if region < sweep.regions() => self.evict_moving(sweep, region, at),
            _ => false,
        }
    }

    /// The insert's half of the Dekker pair with the step (see `insert`),
    /// between its CAS and its load of the counter.
    #[inline(always)]
    fn fence_after_put(&self) {
        #[cfg(loom)]
        if self.canary == RegionCanary::UnfencedInsert {
            return;
        }
        // SeqCst: pairs with the fences in `bump` and `sweep_chunk`: if
        // this one comes first in their total order, the chunk that reads
        // the tag's bucket sees the tag; otherwise the counter load that
        // follows sees the bump.
        fence(Ordering::SeqCst);
    }

    /// The rest of an insert that put its tag into region `region` and then
    /// saw the counter at `seen`, past the value it started from: moves a
    /// copy of its tag to its slot's `cur` until no step begins meanwhile.
    /// Moving any copy is the same as moving its own: copies of one tag in
    /// one pair are the same to every query. A hop that finds no copy left
    /// (`Gone`) may return: every stale insert moves at most one copy out
    /// of the old pair, so if all left and this one moved none, the sweep
    /// moved one, and lookups find that one (docs/design.md, "An insert's
    /// own hop that finds no copy left"). A hop that finds no room, or the
    /// old pair's stripe held past its patience, leaves the copy and
    /// splits the slot.
    ///
    /// Each round reads the current map: the step it follows may have
    /// doubled it (`first` is the map the insert put by, which only the
    /// `FollowOnOldMap` canary reads again).
    #[cold]
    fn follow(
        &self,
        at: Located,
        mut region: usize,
        mut seen: u64,
        #[cfg_attr(not(loom), allow(unused_variables))] first: &SlotMap,
    ) -> Result<(), Refused> {
        // A holder of the old pair's stripe stopped for good holds up no
        // follow: after its patience the hop leaves the copy where it is
        // and splits the slot, as when the new region has no room. Only if
        // the slot cannot be split (it names two other regions) does the
        // follow wait, to move or give back its copy.
        let mut patience = Patience::default();
        let mut patient = true;
        loop {
            // Acquire, both: as in `contains`.
            let (_, slot, e) = self.entry_of(at);
            #[cfg(loom)]
            let (slot, e) = if self.canary == RegionCanary::FollowOnOldMap {
                let slot = first.slot_of(at.tag, at.i1.min(at.i2));
                (slot, first.load(slot, Ordering::Acquire))
            } else {
                (slot, e)
            };
            if e.cur != region {
                let hopped = self.hop(
                    region,
                    e.cur,
                    at,
                    Wait::Yes,
                    None,
                    patient.then_some(&mut patience),
                );
                match hopped {
                    Hopped::Moved | Hopped::Gone => region = e.cur,
                    Hopped::Busy | Hopped::Crowded | Hopped::Stale => {
                        unreachable!("a follow's hop may wait, and belongs to no sweep")
                    }
                    Hopped::Held => {
                        #[cfg(loom)]
                        if self.canary == RegionCanary::FollowHeldUnsplit {
                            return Ok(());
                        }
                        if !self.keep_split(at, region) {
                            patient = false;
                            continue;
                        }
                    }
                    Hopped::NoRoom => {
                        if !self.keep_split(at, region) {
                            // Its slot has another split region already:
                            // give the copy back and refuse (rare: a third
                            // region, only for an insert that ran across
                            // two steps).
                            pause::here(
                                pause::Point::FollowRefusing,
                                pause::At {
                                    a: slot,
                                    b: region,
                                    tag: at.tag,
                                },
                            );
                            if self.take_back(region, at) {
                                return Err(Refused::Full);
                            }
                            // No copy left to give back: the sweep moved it
                            // on to the slot's `cur`, where lookups find it;
                            // the key is stored. Follow it as after `Gone`.
                            region = e.cur;
                        }
                    }
                }
            }
            // As in `insert`, for the copy this loop just made.
            self.fence_after_put();
            // Acquire: as in `insert`.
            let now = self.step.load(Ordering::Acquire);
            if now == seen {
                return Ok(());
            }
            seen = now;
        }
    }

    /// Keeps `region` readable for `at`'s slot after a hop out of it found
    /// no room: marks the slot failed for the running step, then makes
    /// sure its entry names `region` (as `cur` or `prev`). `false` if the
    /// entry already names two other regions.
    ///
    /// The mark and the entry load are a Dekker pair with `end_step`'s
    /// entry CAS and mark load: either the step's end sees the mark and
    /// keeps the slot split, or this load sees the entry joined and splits
    /// it again.
    ///
    /// If the entry is [`FROZEN`] (the next step's claimant is doubling
    /// the map), it goes on in the next map: the doubling's copy of the
    /// entry came before any change this could still make to it.
    fn keep_split(&self, at: Located, region: usize) -> bool {
        #[cfg(loom)]
        if self.canary == RegionCanary::UnsplitStaleInsert {
            return true;
        }
        let mut map = self.map();
        'maps: loop {
            let slot = map.slot_of(at.tag, at.i1.min(at.i2));
            // Relaxed: the fence below orders it.
            map.failed.mark(slot);
            // SeqCst: pairs with the fence in `end_step` between its joining
            // CAS and its load of the mark. If this fence comes first in their
            // total order, that load sees the mark; otherwise the load below
            // sees the joined entry.
            fence(Ordering::SeqCst);
            let entry = map.at(slot);
            // Relaxed: ordered by the fence above (and by coherence for the
            // CAS below, which fails on a stale value).
            let mut v = entry.load(Ordering::Relaxed);
            loop {
                if v & FROZEN != 0 {
                    map = map.successor(slot, v);
                    continue 'maps;
                }
                let e = Entry::unpack(v);
                if e.prev == region && e.cur != region && v & JOINING != 0 {
                    // The step's end is joining the slot: clear its mark so
                    // the join fails and the slot stays split. Release: as
                    // below.
                    match entry.compare_exchange(
                        v,
                        v & !JOINING,
                        Ordering::Release,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return true,
                        Err(seen) => {
                            v = seen;
                            continue;
                        }
                    }
                }
                if e.cur == region || e.prev == region {
                    return true;
                }
                if e.is_split() {
                    return false;
                }
                let split = Entry {
                    cur: e.cur,
                    prev: region,
                };
                // Release: pairs with readers' Acquire entry loads (the
                // entry names regions published long before; Release keeps
                // the rule that entries are published). Relaxed on failure:
                // the value seen only feeds the next try (a doubling's
                // freeze included: `successor` fences).
                match entry.compare_exchange(v, split.pack(), Ordering::Release, Ordering::Relaxed)
                {
                    Ok(_) => return true,
                    Err(seen) => v = seen,
                }
            }
        }
    }

    /// [`keep_split`](Self::keep_split) for hash `h` (loom models).
    #[cfg(loom)]
    pub(crate) fn keep_split_of(&self, h: u64, region: usize) -> bool {
        self.keep_split(self.locate(h), region)
    }

    /// Takes one copy of `at`'s tag from `region` (an insert giving back
    /// what it put there); `false` if none was left there.
    fn take_back(&self, region: usize, at: Located) -> bool {
        let t = self.region(region);
        let shard = self.counters.shard();
        let _lock = StripeLock::acquire(t.stripe(at.i1, at.i2)).expect("regions are never sealed");
        let took = take::<L21x3>(t.word(at.i1), at.tag, shard)
            || take::<L21x3>(t.word(at.i2), at.tag, shard);
        if took {
            shard.add_len(-1);
        }
        took
    }

    /// Moves one copy of `at`'s tag from region `from` to region `to`
    /// (`from < to`), same pair. With [`Wait::No`], takes the source
    /// stripe only if it is free now and puts only into a free lane (no
    /// displacement): `Busy` or `Crowded` otherwise.
    ///
    /// With [`Wait::Yes`] and a `patience`, waits for the source stripe
    /// only as long as it allows (`Held`); [`Wait::No`] never waits, so it
    /// leaves `patience` as it is. `step` is the step of the sweep
    /// hopping, if a sweep is: after its copy such a hop checks that no
    /// later step began, or else takes the copy back (`Stale`, see
    /// [`undo_if_stale`](Self::undo_if_stale)).
    pub(super) fn hop(
        &self,
        from: usize,
        to: usize,
        at: Located,
        wait: Wait,
        step: Option<u64>,
        patience: Option<&mut Patience>,
    ) -> Hopped {
        #[cfg(loom)]
        if self.canary == RegionCanary::ClearBeforeCopy {
            return self.hop_clearing_first(from, to, at);
        }
        debug_assert!(from < to, "hops go to newer regions (the lock order)");
        let (a, b) = (self.region(from), self.region(to));
        let Located { tag, i1, i2 } = at;
        // Marked moving: a count of this tag reads again until the release.
        let stripe = a.stripe(i1, i2);
        let _lock = match (wait, patience) {
            // A sweep's: a holder stopped in the middle of a remove or a
            // hop of this pair (a plain insert's help included) must not
            // hold up the step's end, so it waits as long as the sweep's
            // patience allows (1 ms for all its hops), then leaves the
            // tag where it is, as when the new region has no room.
            (Wait::Yes, Some(patience)) => {
                match StripeLock::acquire_moving_within(stripe, tag, patience) {
                    Some(lock) => lock,
                    None => return Hopped::Held,
                }
            }
            // An insert's follow of its own copy: waits.
            (Wait::Yes, None) => {
                StripeLock::acquire_moving(stripe, tag).expect("regions are never sealed")
            }
            (Wait::No, _) => match StripeLock::try_acquire_moving(stripe, tag) {
                Some(lock) => lock,
                None => return Hopped::Busy,
            },
        };
        // Relaxed: under the stripe, whose Acquire take ordered these loads
        // after every remove and hop of this pair in `a`.
        let held = |i: usize| bucket::contains::<L21x3>(a.word(i).load(Ordering::Relaxed), tag);
        #[cfg(loom)]
        let held = |i: usize| held(i) || self.canary == RegionCanary::UncheckedResweep;
        if !held(i1) && !held(i2) {
            return Hopped::Gone;
        }
        let shard = self.counters.shard();
        // The copy: an ordinary insert into `b`, displacing under `b`'s
        // stripes (after `a`'s: the lock order); without waiting, a put
        // into a free lane of the emptier bucket (as a plain insert's).
        let copied = match wait {
            Wait::Yes => match ops::insert::<L21x3>(
                b,
                at,
                false,
                ops::nowhere,
                Search::Always,
                &self.counters,
            ) {
                Ok(_) => true,
                Err(InsertFailure::Full { .. } | InsertFailure::Saturated { .. }) => false,
                Err(InsertFailure::Sealed) => unreachable!("regions are never sealed"),
            },
            Wait::No => {
                let (w1, w2) = (b.word(i1), b.word(i2));
                // Relaxed: a placement hint, as in `ops::insert`.
                let fuller1 = bucket::empty::<L21x3>(w1.load(Ordering::Relaxed))
                    < bucket::empty::<L21x3>(w2.load(Ordering::Relaxed));
                let (w1, w2) = if fuller1 { (w2, w1) } else { (w1, w2) };
                let put = put::<L21x3>(w1, tag, shard) || put::<L21x3>(w2, tag, shard);
                if put {
                    shard.add_len(1);
                }
                put
            }
        };
        if !copied {
            return match wait {
                Wait::Yes => Hopped::NoRoom,
                Wait::No => Hopped::Crowded,
            };
        }
        pause::here(
            pause::Point::RegionHopCopied,
            pause::At { a: i1, b: i2, tag },
        );
        if let Some(step) = step {
            if self.undo_if_stale(step, to, at) {
                return Hopped::Stale;
            }
        }
        // The clear, after the copy: a reader of `prev` then `cur` that
        // sees the clear (Release) sees the copy.
        let cleared =
            take::<L21x3>(a.word(i1), tag, shard) || take::<L21x3>(a.word(i2), tag, shard);
        #[cfg(loom)]
        let cleared = cleared || self.canary == RegionCanary::UncheckedResweep;
        debug_assert!(cleared, "a tag left its pair while its stripe was held");
        shard.add_len(-1);
        // Relaxed: a statistic.
        self.copies.fetch_add(1, Ordering::Relaxed);
        Hopped::Moved
    }
}

impl Regions {
    /// The check a sweep's hop makes after its copy into region `to`:
    /// if a step later than `step` (the sweep's) began, takes a copy of
    /// `at`'s tag back from `to` and says `true`; the hop then leaves its
    /// source as it was. `false` (clear the source) if no later step
    /// began, or if no copy is left in `to` to take back.
    ///
    /// Why: a sweeper can outlive its step. Stopped between its chunk's
    /// done check and its hop, across the step's end and the next step's
    /// sweep of `to`, it may copy into a region that sweep has passed, a
    /// copy a stale insert put into the source after the step's own sweep
    /// of it; the insert's hop then finds it gone and returns, and the
    /// copy is stranded (a false negative; test
    /// `a_sweeper_that_outlived_its_step_never_strands_a_stale_insert`).
    /// Every chunk of a step that ended is done, so the hop was not
    /// needed: undone, it never happened, and the stale insert follows
    /// its own copy. If no later step began, the next step's sweep sees
    /// the copy (the fences below), as it sees an insert's put.
    ///
    /// Waits for `to`'s stripe (after `from`'s: the lock order), also for
    /// a sweeper that may not wait: only one stopped across a whole step
    /// gets here.
    #[inline(always)]
    fn undo_if_stale(&self, step: u64, to: usize, at: Located) -> bool {
        // SeqCst: the insert's Dekker pair with the bump, for this copy
        // (as `fence_after_put`): if this fence comes before a later
        // step's bump fence, that step's sweep chunks (fenced after the
        // bump) read the copy; otherwise the load below sees the bump.
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence.
        if self.step.load(Ordering::Relaxed) == step {
            return false;
        }
        pause::here(pause::Point::SweepUndoing, at.into());
        // Any copy of the tag in the pair is as good as the one put: if
        // none is left (a later sweep, a follow or a remove took one),
        // the copy went on as any hop's copy goes, and the source is
        // cleared as usual.
        self.take_back(to, at)
    }
}

/// Whether `at`'s pair has a free lane in region `t` (a hint: a plain
/// insert of `at` would likely not displace).
#[inline(always)]
fn has_room(t: &crate::raw::table::Table, at: Located) -> bool {
    // Relaxed: a hint; the insert's own CAS decides.
    let free = |i: usize| bucket::has_empty::<L21x3>(t.word(i).load(Ordering::Relaxed));
    free(at.i1) || free(at.i2)
}
