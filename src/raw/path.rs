//! Displacement: make room in a key's full buckets by moving other tags.
//!
//! Following MemC3 and libcuckoo (`cuckoopath_search` / `cuckoopath_move`):
//!
//! 1. **Search** breadth-first from both candidate buckets, without locks,
//!    over the current bucket words, for the nearest bucket with an empty
//!    lane. Each edge moves one tag from a bucket to that tag's alternate.
//!    The search is bounded (`MAX_DEPTH` hops, `MAX_NODES` buckets), so a
//!    full table answers "no room" in bounded time.
//! 2. **Commit** the path from its far end (the empty lane) back towards the
//!    key, one hop at a time. Each hop takes the version stripe of its
//!    bucket pair, re-validates (destination still has room, source still
//!    holds the tag), **copies the tag into the destination, steps the
//!    stripe, then clears the tag from the source**, and releases the
//!    stripe. The stripe names the moving tag from the take to the release.
//!    A reader whose two loads straddle the copy and the clear sees the
//!    stripe changed and reads again (see `ops.rs`); one that reads while
//!    the hop is stopped anywhere else answers at once, except a `count` of
//!    the tag in flight.
//!
//! If any hop finds its buckets changed since the search, the path is stale:
//! the hops already done were valid moves (each tag still sits in one of its
//! two buckets), so the caller simply searches again. No tag is ever held
//! "in hand" outside the table, and a failed insert never evicts anything.

use super::bucket::{self, Layout};
use super::cas::take;
use super::counters::{Shard, PATH_HISTOGRAM};
use super::migrate::FORWARDED;
use super::pause;
use super::stripe::StripeLock;
use super::table::Table;
use crate::sync::{fence, Backoff, Ordering};

/// Most hops in one displacement path.
#[cfg(not(loom))]
pub(crate) const MAX_DEPTH: usize = 6;
#[cfg(loom)]
pub(crate) const MAX_DEPTH: usize = 2;

/// Buckets the first, cheap search visits: enough for almost every insert
/// below 90% load.
#[cfg(not(loom))]
const QUICK_NODES: usize = 64;
#[cfg(loom)]
const QUICK_NODES: usize = 4;

/// Buckets the full search visits (16 KiB of stack) before the table is
/// declared full. Measured on 4M keys: 256 nodes and 5 hops reach only 94%
/// load with 16-bit tags; 1024 nodes and 6 hops reach 96.7% (97.7% 12-bit).
#[cfg(not(loom))]
const MAX_NODES: usize = 1024;
#[cfg(loom)]
const MAX_NODES: usize = 16;

const _: () = assert!(MAX_DEPTH < PATH_HISTOGRAM && MAX_NODES <= u16::MAX as usize);
const _: () = assert!(QUICK_NODES <= MAX_NODES);
// `Node::tag` holds any layout's tag.
const _: () = assert!(super::bucket::L21x3::TAG_BITS <= u32::BITS);

/// A bucket reached by the search.
#[derive(Clone, Copy, Default)]
struct Node {
    bucket: usize,
    /// Index of the node this one was reached from (`NO_PARENT` for roots).
    parent: u16,
    /// The tag that moves from the parent's bucket into this one (tags
    /// have up to 21 bits).
    tag: u32,
    depth: u8,
}

const NO_PARENT: u16 = u16::MAX;

/// One move: `tag` from bucket `src` to bucket `dst == alt(src, tag)`.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Hop {
    pub(crate) src: usize,
    pub(crate) dst: usize,
    pub(crate) tag: u64,
}

/// What `make_room` achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// A lane in `i1` or `i2` is free (it may be taken again before the
    /// caller uses it; callers retry).
    Made,
    /// No path within the search bounds leads to an empty lane.
    NoPath,
    /// The table is being replaced by its successor (a sealed stripe or a
    /// forwarded bucket on the way): go on there.
    Sealed,
}

/// Why a hop did not happen.
enum HopFailure {
    /// A bucket changed since the search.
    Stale,
    /// The pair's stripe is sealed.
    Sealed,
}

/// Frees a lane in bucket `i1` or `i2` by moving tags along a path through
/// buckets for which `usable` holds (during a migration, only successor
/// buckets whose old bucket is forwarded may be written).
pub(crate) fn make_room<L: Layout>(
    t: &Table,
    i1: usize,
    i2: usize,
    shard: &Shard,
    usable: impl Fn(usize) -> bool + Copy,
) -> Room {
    let mut backoff = Backoff::default();
    loop {
        let mut hops = [Hop::default(); MAX_DEPTH];
        // One branch here rather than one per tag in the search: asking
        // every tag whether it is pinned cost a default filter 10% of its
        // fill to 95% load.
        let found = if t.has_pin() {
            quick_then_full::<L, true>(t, i1, i2, &mut hops, usable)
        } else {
            quick_then_full::<L, false>(t, i1, i2, &mut hops, usable)
        };
        let len = match found {
            Found::No => return Room::NoPath,
            Found::Sealed => return Room::Sealed,
            Found::Path(len) => len,
        };
        if len == 0 {
            // A lane in a candidate bucket was freed since the caller looked.
            return Room::Made;
        }
        let mut outcome = Ok(());
        for hop in &hops[..len] {
            outcome = move_tag::<L>(t, *hop, shard);
            if outcome.is_err() {
                break;
            }
        }
        match outcome {
            Ok(()) => {
                shard.bump(&shard.paths[len]);
                return Room::Made;
            }
            Err(HopFailure::Sealed) => return Room::Sealed,
            Err(HopFailure::Stale) => {}
        }
        shard.bump(&shard.stale_paths);
        // Another writer changed a bucket on the path: let it finish.
        backoff.snooze();
    }
}

/// The cheap search, then the full one if it found nothing.
#[inline(always)]
fn quick_then_full<L: Layout, const PINNED: bool>(
    t: &Table,
    i1: usize,
    i2: usize,
    hops: &mut [Hop; MAX_DEPTH],
    usable: impl Fn(usize) -> bool + Copy,
) -> Found {
    match search::<L, QUICK_NODES, PINNED>(t, i1, i2, hops, usable) {
        Found::No => search::<L, MAX_NODES, PINNED>(t, i1, i2, hops, usable),
        other => other,
    }
}

/// What a search found.
pub(crate) enum Found {
    /// A path of this many hops (0: a candidate bucket has room).
    Path(usize),
    /// No room within the bounds.
    No,
    /// A forwarded bucket: the table is being replaced.
    Sealed,
}

/// Breadth-first search, over at most `N` buckets, for the nearest empty
/// lane from `i1`/`i2`, through `usable` buckets only, and with `PINNED`
/// (a region of a level that grows by regions) moving no pinned tag.
/// Writes the path into `hops` in commit order (far end first) and returns
/// its length.
pub(crate) fn search<L: Layout, const N: usize, const PINNED: bool>(
    t: &Table,
    i1: usize,
    i2: usize,
    hops: &mut [Hop; MAX_DEPTH],
    usable: impl Fn(usize) -> bool,
) -> Found {
    let geo = t.geometry();
    let mut nodes = [Node::default(); N];
    for (k, root) in [i1, i2].into_iter().enumerate() {
        nodes[k] = Node {
            bucket: root,
            parent: NO_PARENT,
            tag: 0,
            depth: 0,
        };
    }
    let mut len = 2;
    let mut head = 0;
    while head < len {
        let node = nodes[head];
        // Acquire: a snapshot for planning only; every hop re-validates
        // under its stripe before it writes.
        let word = t.word(node.bucket).load(Ordering::Acquire);
        if word == FORWARDED {
            return Found::Sealed;
        }
        if bucket::has_empty::<L>(word) {
            return Found::Path(trace(&nodes, head, hops));
        }
        if (node.depth as usize) < MAX_DEPTH {
            // Moving a tag straight back where it came from is never useful.
            let back = match node.parent {
                NO_PARENT => usize::MAX,
                p => nodes[p as usize].bucket,
            };
            for lane in 0..L::LANES {
                if len == N {
                    break;
                }
                let tag = bucket::lane::<L>(word, lane);
                let child = geo.alt(node.bucket, tag);
                // A pinned tag is leaving its region (`regions.rs`): moving
                // it could hide it from that step's sweep. (A hint here;
                // `move_tag` decides.)
                if child != back && usable(child) && !(PINNED && t.pinned(node.bucket, child, tag))
                {
                    // Its word is read when the node is dequeued; start the
                    // cache miss now so that siblings' misses overlap.
                    t.prefetch(child);
                    nodes[len] = Node {
                        bucket: child,
                        parent: head as u16,
                        tag: tag as u32,
                        depth: node.depth + 1,
                    };
                    len += 1;
                }
            }
        }
        head += 1;
    }
    Found::No
}

/// Walks from node `end` back to its root, writing hops far end first.
fn trace(nodes: &[Node], end: usize, hops: &mut [Hop; MAX_DEPTH]) -> usize {
    let mut len = 0;
    let mut at = end;
    while nodes[at].parent != NO_PARENT {
        let parent = nodes[at].parent as usize;
        hops[len] = Hop {
            src: nodes[parent].bucket,
            dst: nodes[at].bucket,
            tag: u64::from(nodes[at].tag),
        };
        len += 1;
        at = parent;
    }
    len
}

/// Commits one hop under the pair's stripe: copy into `dst`, then clear
/// from `src`. Fails, having changed nothing, if the hop is stale or the
/// stripe sealed.
fn move_tag<L: Layout>(t: &Table, hop: Hop, shard: &Shard) -> Result<(), HopFailure> {
    #[cfg(loom)]
    if t.canary.breaks_hops() {
        return broken::move_tag::<L>(t, hop, shard);
    }
    let Hop { src, dst, tag } = hop;
    debug_assert_eq!(t.geometry().alt(src, tag), dst);
    // The tag is in flight from here (before anything is copied) to the
    // release: a `count` of it reads again meanwhile.
    let Some(mut lock) = StripeLock::acquire_moving(t.stripe(src, dst), tag) else {
        return Err(HopFailure::Sealed);
    };
    let here = pause::At {
        a: src,
        b: dst,
        tag,
    };
    pause::here(pause::Point::HopHeld, here);

    // Copy first, then step the stripe, then clear the source.
    copy::<L>(t, src, dst, tag, shard)?;
    if t.has_pin() {
        unpin_or_undo::<L>(t, hop, shard)?;
    }
    // The step: between the copy and the clear, so a reader that loaded
    // the destination before the copy and sees the clear below reads a
    // changed stripe.
    lock.copied();
    pause::here(pause::Point::HopCopied, here);
    clear_source::<L>(t, src, tag, shard)
}

/// In a region of a level that grows by regions (`regions.rs`), after the
/// copy: `Ok` if the tag is not pinned, else the copy is taken back and the
/// hop is stale (the tag stays in `src`, where the step's sweep finds it).
///
/// The sweep moving a step's tags reads buckets in chunks, so a hop that
/// moved a pinned tag from a bucket it has not reached into one it has
/// would hide the tag from it. `SeqCst` fence: pairs with the fence that
/// follows the step's counter bump (`regions.rs`, `bump`), which the
/// step's map entries precede, and with the fence that opens each sweep
/// chunk. If this fence comes first in their total order, the chunk that
/// reads `dst` sees the copy (made before this fence); if the step's comes
/// first, the entry load below sees the tag pinned, and the copy goes.
#[cold]
#[inline(never)]
fn unpin_or_undo<L: Layout>(t: &Table, hop: Hop, shard: &Shard) -> Result<(), HopFailure> {
    let Hop { src, dst, tag } = hop;
    fence(Ordering::SeqCst);
    if !t.pinned(src, dst, tag) {
        return Ok(());
    }
    // Under the stripe, `src` still holds the tag: taking the copy from
    // `dst` back leaves it where it was, and no reader misses it.
    let undone = take::<L>(t.word(dst), tag, shard);
    debug_assert!(undone, "a hop's copy left its destination under the stripe");
    Err(HopFailure::Stale)
}

/// The last step of a hop, after the copy and the stripe's step: clear
/// the source. Its Release half is what a validating reader synchronises
/// with when it sees the tag gone, and program order puts the stripe's
/// step before it.
#[inline(always)]
fn clear_source<L: Layout>(
    t: &Table,
    src: usize,
    tag: u64,
    shard: &Shard,
) -> Result<(), HopFailure> {
    let cleared = take::<L>(t.word(src), tag, shard);
    // Under the stripe nothing can take the tag from `src`: removes and
    // moves of it hold this stripe, `clear` holds every stripe, and a
    // migration forwards `src` only once every stripe is sealed, which
    // cannot happen to this one before this hold ends.
    debug_assert!(
        cleared,
        "a tag left its source while its pair's stripe was held"
    );
    shard.bump(&shard.displacements);
    Ok(())
}

/// The copy half of a hop: `tag` into a free lane of `dst`, while `src`
/// still holds it. Copy first: under the stripe no other writer can move
/// or remove this tag, so "src holds it" stays true once checked; only
/// room in `dst` can be lost to a racing plain insert.
#[inline(always)]
fn copy<L: Layout>(
    t: &Table,
    src: usize,
    dst: usize,
    tag: u64,
    shard: &Shard,
) -> Result<(), HopFailure> {
    // Relaxed: the value the CAS compares against; the stripe's Acquire
    // already ordered this hold after earlier moves.
    let mut dst_word = t.word(dst).load(Ordering::Relaxed);
    loop {
        // A forwarded `dst` has no free lane: the hop is stale, and the
        // search that follows finds the migration.
        let Some(next) = bucket::with_tag::<L>(dst_word, tag) else {
            return Err(HopFailure::Stale);
        };
        // Relaxed: every remove or move of this tag happened under this
        // stripe, so the stripe's Acquire (paired with the previous
        // holder's Release) already makes it visible here.
        if !bucket::contains::<L>(t.word(src).load(Ordering::Relaxed), tag) {
            return Err(HopFailure::Stale);
        }
        // Release: a `count` whose bucket load sees this copy synchronises
        // with it, so its last stripe load sees the take that marked this
        // tag in flight (or later), and it reads again rather than count
        // the copy twice. (A reader that sees the source cleared sees this
        // copy through the clearing CAS's Release.) No Acquire, on success
        // or failure: the value replaced or seen only feeds the next try.
        match t.word(dst).compare_exchange_weak(
            dst_word,
            next,
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return Ok(()),
            Err(seen) => {
                shard.bump(&shard.cas_retries);
                dst_word = seen;
            }
        }
    }
}

/// `move_tag` with the loom canaries' deliberately broken hops: a hop that
/// does not mark its tag in flight (`UnmarkedHop`), clears before it
/// copies (`RemoveBeforeCopy`), does not step the stripe between copy
/// and clear (`UnsteppedHop`), or checks its region's pins before the copy
/// (`PinCheckedBeforeCopy`). A model must fail with each.
#[cfg(loom)]
mod broken {
    use super::super::cas::put;
    use super::*;
    use crate::canary::Canary;

    pub(super) fn move_tag<L: Layout>(
        t: &Table,
        hop: Hop,
        shard: &Shard,
    ) -> Result<(), HopFailure> {
        let Hop { src, dst, tag } = hop;
        debug_assert_eq!(t.geometry().alt(src, tag), dst);
        // The tag is in flight from here (before anything is copied) to the
        // release: a `count` of it reads again meanwhile.
        let marked = if t.canary == Canary::UnmarkedHop {
            0
        } else {
            tag
        };
        let Some(mut lock) = StripeLock::acquire_moving(t.stripe(src, dst), marked) else {
            return Err(HopFailure::Sealed);
        };
        let here = pause::At {
            a: src,
            b: dst,
            tag,
        };
        pause::here(pause::Point::HopHeld, here);

        if t.canary == Canary::RemoveBeforeCopy {
            // Deliberately broken order, for the loom canary: the tag is in
            // neither bucket between these two CASes.
            if !take::<L>(t.word(src), tag, shard) {
                return Err(HopFailure::Stale);
            }
            return if put::<L>(t.word(dst), tag, shard) {
                Ok(())
            } else {
                Err(HopFailure::Stale)
            };
        }

        if t.canary == Canary::PinCheckedBeforeCopy {
            // Deliberately early: the check `unpin_or_undo` makes after
            // the copy, made before it.
            fence(Ordering::SeqCst);
            if t.pinned(src, dst, tag) {
                return Err(HopFailure::Stale);
            }
        }
        copy::<L>(t, src, dst, tag, shard)?;
        if t.has_pin() && t.canary != Canary::PinCheckedBeforeCopy {
            unpin_or_undo::<L>(t, hop, shard)?;
        }
        // The step: between the copy and the clear, so a reader that loaded
        // the destination before the copy and sees the clear below reads a
        // changed stripe.
        let step = t.canary != Canary::UnsteppedHop;
        if step {
            lock.copied();
        }
        pause::here(pause::Point::HopCopied, here);
        clear_source::<L>(t, src, tag, shard)
    }
}
