//! Batches: locate keys a few positions ahead and prefetch both of their
//! buckets, so that the memory latency of one key overlaps the work on the
//! keys before it.
//!
//! A single operation cannot overlap its misses with the next one: every
//! pin, and every bucket CAS, is a full barrier on x86. In a batch the
//! prefetch of key `i + AHEAD` is issued before the barriers of key `i`, and
//! a prefetch is a hint that no barrier waits for.

use super::bucket::Layout;
use super::geometry::Located;
use super::table::Table;

/// How many keys ahead the buckets are prefetched. At ~25 ns of work per
/// key that is about one DRAM latency of this class of machine.
const AHEAD: usize = 8;

/// Calls `op(i, located(hash(i)))` for `i` in `start..n`, in order, with
/// both buckets of key `i + AHEAD` prefetched first. Stops at the first
/// `Err`.
#[inline(always)]
pub(crate) fn for_each<L: Layout, E>(
    t: &Table,
    start: usize,
    n: usize,
    hash: impl Fn(usize) -> u64,
    mut op: impl FnMut(usize, Located) -> Result<(), E>,
) -> Result<(), E> {
    let geo = t.geometry();
    let locate = |i: usize| {
        let at = geo.locate::<L>(hash(i));
        t.prefetch(at.i1);
        t.prefetch(at.i2);
        at
    };
    let mut ring = [Located::default(); AHEAD];
    for i in start..n.min(start + AHEAD) {
        ring[i % AHEAD] = locate(i);
    }
    for i in start..n {
        let at = ring[i % AHEAD];
        if i + AHEAD < n {
            ring[i % AHEAD] = locate(i + AHEAD);
        }
        op(i, at)?;
    }
    Ok(())
}
