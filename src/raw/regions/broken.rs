//! The loom canaries' deliberately broken variants of the regions
//! protocol (`crate::canary::RegionCanary`). The real code calls one
//! only under `cfg(loom)`, when a model set its canary.

use super::{count_two, Hopped, Regions};
use crate::canary::RegionCanary;
use crate::raw::bucket::{self, L21x3, Layout};
use crate::raw::cas::take;
use crate::raw::geometry::Located;
use crate::raw::ops::{self, Search};
use crate::raw::stripe::StripeLock;
use crate::raw::table::Table;
use crate::sync::Ordering;

impl Regions {
    /// The `junk_new_regions` fixture: fills the new region `t` (not yet
    /// published) with tags of slot 0 in every bucket, which the models'
    /// first step leaves in region 0: no key of the moving slot matches
    /// them, and no sweep reads a new region.
    pub(super) fn fill_if_junk(&self, t: &Table) {
        if !self.junk_new_regions {
            return;
        }
        let mut junk = (1..=L21x3::MAX_TAG).filter(|&tag| {
            (0..t.buckets()).all(|b| self.map().slot_of(tag, b.min(self.geo.alt(b, tag))) == 0)
        });
        for b in 0..t.buckets() {
            let tags: Vec<u64> = junk.by_ref().take(3).collect();
            // Relaxed: `t` is published later, with Release.
            t.word(b)
                .store(tags[0] | tags[1] << 21 | tags[2] << 42, Ordering::Relaxed);
        }
    }

    /// `begin_step` with the `BumpBeforeEntries` canary: a reader that
    /// loads the new number and then an entry not yet moved reads only the
    /// old region, and trusts its miss once the sweep has emptied it.
    pub(super) fn begin_bumping_first(&self, old: usize) {
        let step = self.bump();
        self.move_slots(old);
        self.open_sweep(step, old);
    }

    /// `count_two`, or with the `UncheckedCount` canary a count that does
    /// not re-load `prev`'s stripe: a hop between its copy and its clear
    /// shows the tag on both sides.
    pub(super) fn count_two_as_canary(
        &self,
        prev: &Table,
        cur: &Table,
        at: Located,
    ) -> Option<usize> {
        if self.canary != RegionCanary::UncheckedCount {
            return count_two(prev, cur, at);
        }
        let w1 = prev.word(at.i1).load(Ordering::Acquire);
        let w2 = prev.word(at.i2).load(Ordering::Acquire);
        let in_prev = bucket::count::<L21x3>(w1, at.tag) + bucket::count::<L21x3>(w2, at.tag);
        let in_cur = ops::count::<L21x3>(cur, at).expect("regions are never sealed");
        Some(in_prev as usize + in_cur)
    }

    /// `remove` with the `RemoveCurFirst` canary: `cur` before `prev`, so a
    /// hop that copies after the first look and clears before the second
    /// hides the tag from both.
    pub(super) fn remove_cur_first(&self, h: u64) -> bool {
        let at = self.locate(h);
        let hash_in = |t: &Table| ops::remove::<L21x3>(t, h, &self.counters).unwrap();
        loop {
            let before = self.step.load(Ordering::Acquire);
            let (_, _, e) = self.entry_of(at);
            if hash_in(self.region(e.cur)) || (e.is_split() && hash_in(self.region(e.prev))) {
                return true;
            }
            if self.step.load(Ordering::Relaxed) == before {
                return false;
            }
        }
    }

    /// An eviction's hop with the `UnlockedEvict` canary: a put into the new
    /// region and a take from the old one, without the old pair's stripe,
    /// so a sweep hopping the same copy at once copies it too.
    pub(super) fn evict_unlocked(&self, from: usize, to: usize, at: Located) -> Hopped {
        let (a, b) = (self.region(from), self.region(to));
        let shard = self.counters.shard();
        if ops::insert::<L21x3>(b, at, false, ops::nowhere, Search::Always, &self.counters).is_err()
        {
            return Hopped::NoRoom;
        }
        if take::<L21x3>(a.word(at.i1), at.tag, shard)
            || take::<L21x3>(a.word(at.i2), at.tag, shard)
        {
            shard.add_len(-1);
            Hopped::Moved
        } else {
            Hopped::Gone
        }
    }

    /// `hop` with the `ClearBeforeCopy` canary: the tag is in neither
    /// region between the two CASes.
    pub(super) fn hop_clearing_first(&self, from: usize, to: usize, at: Located) -> Hopped {
        let (a, b) = (self.region(from), self.region(to));
        let Located { tag, i1, i2 } = at;
        let shard = self.counters.shard();
        let _lock =
            StripeLock::acquire_moving(a.stripe(i1, i2), tag).expect("regions are never sealed");
        if !(take::<L21x3>(a.word(i1), tag, shard) || take::<L21x3>(a.word(i2), tag, shard)) {
            return Hopped::Gone;
        }
        match ops::insert::<L21x3>(b, at, false, ops::nowhere, Search::Always, &self.counters) {
            Ok(_) => Hopped::Moved,
            Err(_) => Hopped::NoRoom,
        }
    }
}
