//! The operations for a key whose table is being migrated into its
//! successor (see `migrate.rs`).
//!
//! # Where a tag is
//!
//! Once the old pair `(i1, i2)` is sealed, an old-table writer never again
//! moves or removes a tag between those two buckets. A tag of the key is
//! then in an old bucket that is not forwarded, or, once that bucket is
//! forwarded, in the successor's bucket of the pair `(i1', i2')`
//! ([`successor_of`]). Successor buckets are written only after their old
//! bucket is forwarded, and every move or remove of the key's tag in the
//! successor, and every remove of it from an old bucket, holds the
//! successor pair's stripe.
//!
//! So a reader reads both old words and, for a forwarded one, the
//! successor's word, validating the whole read against the successor
//! pair's stripe, exactly as `ops::contains` and `ops::count` validate
//! against the old one: the stripe unchanged across the loads, and for a
//! count, no hop of the key's tag in flight. Forwarding is no move a
//! reader must detect: the successor halves are stored before the old
//! word becomes `FORWARDED` (Release), so each old bucket shows its tags
//! either in the old word or, once forwarded, in the successor's. A chunk
//! owner stopped between the two holds no stripe and makes no reader
//! wait.
//!
//! # Who seals
//!
//! The seal exists to hand the pair over from the old stripe to the
//! successor's: whoever takes the successor pair's stripe to *decide*
//! something about the key's copies (`insert_unique`: "no copy yet";
//! `remove`: "this copy") must first know that no old-table writer, holding
//! the old stripe, is deciding or moving the same copies. So those two seal
//! the old pair first, waiting for its holder.
//!
//! A plain insert decides nothing and moves nothing: it adds one tag with
//! one CAS into a free lane. It does **not** seal, and never waits:
//!
//! * into an old bucket that is not forwarded: exactly what a plain insert
//!   does in a table that is not migrating, which every old-table writer
//!   already tolerates (a hop whose destination lost its free lane goes
//!   stale; a remove or `insert_unique` decides on the words it reads under
//!   its stripe, and a copy added meanwhile is one more copy). The
//!   forwarding CAS compares against the word it copied, so it fails on a
//!   word the insert changed, and the migrator copies again: the tag goes
//!   to the successor with its bucket;
//! * into the successor bucket of a forwarded old bucket, and only after
//!   seeing it forwarded (Acquire): the forwarding happened after every old
//!   stripe was sealed, so the successor bucket already holds its copied
//!   tags and no old-table writer can touch the pair any more.
//!
//! A plain insert therefore never makes a tag absent from where readers
//! look, and it only ever adds: a reader can only see a miss turn into a
//! hit. When both buckets are full it needs room, which only the successor
//! can give once both old buckets are forwarded; then it may wait (for a
//! chunk another thread is migrating, for a stripe holder that keeps the
//! old table from being sealed, for a displacement hop's stripe), as any
//! displacement may.
use super::bucket::{self, Layout};
use super::cas::{put, take};
use super::counters::Counters;
use super::geometry::Located;
use super::migrate::{is_forwarded, source_of, successor_of, FORWARDED};
use super::ops::Sealed;
use super::path::{self, Room};
use super::stripe::{count_stands, miss_stands, seal, StripeLock, SEALED};
use super::table::{Migration, Table};
use crate::sync::{AtomicU64, Backoff, Ordering};

/// Why an operation cannot finish now; the caller backs off, reloads the
/// current table and tries again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// The successor is itself being replaced, or the key's old buckets
    /// are in a chunk another thread is migrating: wait for it.
    Wait,
    /// Both buckets are forwarded and full, and no displacement path
    /// through forwarded buckets frees one yet: more of the table must be
    /// migrated first.
    NeedRoom,
    /// One more copy would fill the key's pair with its tag
    /// (`bucket::would_lock`; `copies` seen): refused, as on a table that is
    /// not migrating.
    Saturated { copies: usize },
}

impl From<Sealed> for Retry {
    fn from(_: Sealed) -> Self {
        Retry::Wait
    }
}

/// The tag's copies visible in one old bucket and, if it is forwarded, in
/// its successor bucket.
#[inline(always)]
fn copies_in<L: Layout>(old: &Table, next: &Table, i: usize, i_next: usize, tag: u64) -> u32 {
    bucket::count::<L>(current_word(old, next, i, i_next), tag)
}

/// The word that holds old bucket `i`'s tags now: the old one, or once it
/// is forwarded, successor bucket `i_next`.
fn current_word(old: &Table, next: &Table, i: usize, i_next: usize) -> u64 {
    // Acquire: pairs with the CAS that put a tag there, or with the
    // forwarding CAS, whose Release publishes the successor's copy (read
    // next, also with Acquire for the successor writers' CASes).
    let w = old.word(i).load(Ordering::Acquire);
    if w == FORWARDED {
        next.word(i_next).load(Ordering::Acquire)
    } else {
        w
    }
}

/// Copies of the key's tag across the old pair and the successor pair,
/// validated against the successor pair's stripe. The caller has seen the
/// old pair sealed.
fn read_copies<L: Layout>(
    old: &Table,
    next: &Table,
    at: Located,
    stop_at_first: bool,
) -> Result<u32, Sealed> {
    let s = successor_of(old, at);
    let stripe = next.stripe(s.i1, s.i2);
    let mut backoff = Backoff::default();
    loop {
        // Acquire: pairs with the Release store that ended the successor
        // pair's last hold, as in `ops::contains`.
        let before = stripe.load(Ordering::Acquire);
        if before == SEALED {
            // The successor is being replaced in turn: start over from the
            // filter's current table.
            return Err(Sealed);
        }
        let first = copies_in::<L>(old, next, at.i1, s.i1, at.tag);
        if first > 0 && stop_at_first {
            return Ok(first);
        }
        let copies = first + copies_in::<L>(old, next, at.i2, s.i2, at.tag);
        if copies > 0 && stop_at_first {
            return Ok(copies);
        }
        #[cfg(loom)]
        if broken::trusts_unvalidated(old) {
            return Ok(copies);
        }
        // Relaxed: ordered after the bucket loads by their Acquire. A hop
        // of this tag (successor stripe held, stepped between its copy and
        // its clear) whose clear one of the loads saw makes this load see
        // the stripe changed; so does a remove that one of them saw, having
        // taken the stripe (a write) after `before`.
        let after = stripe.load(Ordering::Relaxed);
        // A count also waits out a hop of this very tag (its copy may show
        // twice); a lookup that stops at the first copy only gets here
        // with no copy found.
        let stands = if stop_at_first {
            miss_stands(before, after)
        } else {
            count_stands(before, after, at.tag)
        };
        if stands {
            return Ok(copies);
        }
        backoff.snooze();
    }
}

/// `contains` for a key whose old pair is sealed. Never writes shared
/// memory.
pub(crate) fn contains<L: Layout>(old: &Table, next: &Table, at: Located) -> Result<bool, Sealed> {
    read_copies::<L>(old, next, at, true).map(|n| n > 0)
}

/// `count` for a key whose old pair is sealed. Never writes shared memory.
pub(crate) fn count<L: Layout>(old: &Table, next: &Table, at: Located) -> Result<usize, Sealed> {
    read_copies::<L>(old, next, at, false).map(|n| n as usize)
}

/// Applies a bucket change (`put` or `take`) to old bucket `i`, or, if
/// `i` is forwarded, to successor bucket `i_next`. A forwarded word has no
/// free lane and matches no tag, so the change fails on it (a CAS that
/// loses to the forwarding CAS retries, then fails) and goes on in the
/// successor.
fn on_either(
    old: &Table,
    next: &Table,
    i: usize,
    i_next: usize,
    change: impl Fn(&AtomicU64) -> bool,
) -> bool {
    change(old.word(i)) || (is_forwarded(old, i) && change(next.word(i_next)))
}

/// `insert` (plain or unique) for a key of a table with migration `m`.
pub(crate) fn insert<L: Layout>(
    old: &Table,
    m: &Migration,
    at: Located,
    unique: bool,
    elsewhere: impl Fn() -> bool + Copy,
    c: &Counters,
) -> Result<bool, Retry> {
    let next = m.next();
    let s = successor_of(old, at);
    let shard = c.shard();
    // `insert_unique` decides "no copy yet" under the successor pair's
    // stripe, so first no old-table writer may decide or move this key's
    // copies (see "Who seals"). A plain insert only adds: it does not seal.
    let seal_pair = unique;
    #[cfg(loom)]
    let seal_pair = broken::seal_pair(old, seal_pair);
    if seal_pair {
        seal(old.stripe(at.i1, at.i2));
    }
    loop {
        {
            let _lock = if unique {
                let lock = StripeLock::acquire(next.stripe(s.i1, s.i2)).ok_or(Retry::Wait)?;
                if read_copies_locked::<L>(old, next, at, s) > 0 || elsewhere() {
                    return Ok(false);
                }
                Some(lock)
            } else {
                let w1 = current_word(old, next, at.i1, s.i1);
                let w2 = current_word(old, next, at.i2, s.i2);
                if bucket::would_lock::<L>(w1, w2, at.tag) {
                    let copies = bucket::count::<L>(w1, at.tag) + bucket::count::<L>(w2, at.tag);
                    return Err(Retry::Saturated {
                        copies: copies as usize,
                    });
                }
                None
            };
            let put_tag = |w: &AtomicU64| put::<L>(w, at.tag, shard);
            #[cfg(loom)]
            if broken::put_successor_first(old, next, s, put_tag) {
                shard.add_len(1);
                return Ok(true);
            }
            if on_either(old, next, at.i1, s.i1, put_tag)
                || on_either(old, next, at.i2, s.i2, put_tag)
            {
                shard.add_len(1);
                return Ok(true);
            }
        }
        // Both buckets full. Room can be made only in the successor, once
        // both old buckets are forwarded: migrate their chunks if nobody
        // has claimed them.
        m.ensure::<L>(old, at.i1);
        m.ensure::<L>(old, at.i2);
        if !(is_forwarded(old, at.i1) && is_forwarded(old, at.i2)) {
            return Err(Retry::Wait);
        }
        let usable = |x: usize| is_forwarded(old, source_of(old, x));
        match path::make_room::<L>(next, s.i1, s.i2, shard, usable) {
            Room::Made => {}
            Room::NoPath => return Err(Retry::NeedRoom),
            Room::Sealed => return Err(Retry::Wait),
        }
    }
}

/// The copies of the key's tag, read while holding the successor pair's
/// stripe (so no move or remove of it runs) after the old pair was sealed.
fn read_copies_locked<L: Layout>(old: &Table, next: &Table, at: Located, s: Located) -> u32 {
    copies_in::<L>(old, next, at.i1, s.i1, at.tag) + copies_in::<L>(old, next, at.i2, s.i2, at.tag)
}

/// `remove` for a key of a table with migration `m`.
pub(crate) fn remove<L: Layout>(
    old: &Table,
    m: &Migration,
    at: Located,
    c: &Counters,
) -> Result<bool, Retry> {
    let next = m.next();
    let s = successor_of(old, at);
    let shard = c.shard();
    seal(old.stripe(at.i1, at.i2));
    // Holding the successor pair's stripe excludes every other move or
    // remove of this tag, in either table.
    let _lock = StripeLock::acquire(next.stripe(s.i1, s.i2)).ok_or(Retry::Wait)?;
    let take_tag = |w: &AtomicU64| take::<L>(w, at.tag, shard);
    let removed =
        on_either(old, next, at.i1, s.i1, take_tag) || on_either(old, next, at.i2, s.i2, take_tag);
    if removed {
        shard.add_len(-1);
        // The successor becomes the current table: an insert searching it
        // once it is installed must not be refused by a search that missed
        // this freed lane (see `room.rs`). The old table's hint no longer
        // matters: no insert searches a migrating table.
        next.room().note_freed();
    }
    Ok(removed)
}

/// Occupied lanes across a migrating table: old buckets not yet forwarded,
/// and the successor's pair of each forwarded one (a scan, for `stats`).
pub(crate) fn occupied<L: Layout>(old: &Table, next: &Table) -> usize {
    let n = old.buckets();
    (0..n)
        .map(|j| {
            // Relaxed: a diagnostic count, not a snapshot; orders nothing.
            let w = old.word(j).load(Ordering::Relaxed);
            let used = if w == FORWARDED {
                bucket::occupied::<L>(next.word(j).load(Ordering::Relaxed))
                    + bucket::occupied::<L>(next.word(j + n).load(Ordering::Relaxed))
            } else {
                bucket::occupied::<L>(w)
            };
            used as usize
        })
        .sum()
}

/// The loom canaries' deliberately broken variants of the rules above.
#[cfg(loom)]
mod broken {
    use super::*;
    use crate::canary::Canary;

    /// `UnvalidatedNegative`: the read across both tables is trusted
    /// without validation.
    pub(super) fn trusts_unvalidated(old: &Table) -> bool {
        old.canary == Canary::UnvalidatedNegative
    }

    /// `UnsealedUnique` does not seal the old pair for `insert_unique`;
    /// `SealedPlainInsert` seals it for every insert.
    pub(super) fn seal_pair(old: &Table, seal: bool) -> bool {
        match old.canary {
            Canary::UnsealedUnique => false,
            Canary::SealedPlainInsert => true,
            _ => seal,
        }
    }

    /// `SuccessorFirst`: the successor bucket is written before its old
    /// bucket is forwarded, so the forwarding copy overwrites the tag.
    /// `true` if the tag was put there.
    pub(super) fn put_successor_first(
        old: &Table,
        next: &Table,
        s: Located,
        put_tag: impl Fn(&AtomicU64) -> bool,
    ) -> bool {
        old.canary == Canary::SuccessorFirst
            && (put_tag(next.word(s.i1)) || put_tag(next.word(s.i2)))
    }
}
