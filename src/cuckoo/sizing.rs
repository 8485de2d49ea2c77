//! How many buckets a table for a number of items gets, and what it
//! costs: shared by the builder, the levels (each sized for the items
//! below it) and `advise`.

use super::LayoutKind;
use crate::error::BuildError;
use crate::raw::geometry::{MAX_M0, MIN_M0};
use crate::raw::table::Table;

/// Buckets and bytes of the table `build` allocates for `capacity` items in
/// `layout`, after `doublings` doublings: the memory estimate `advise`
/// reports. `None` where `build` would refuse the capacity.
pub(crate) fn table_memory(
    capacity: usize,
    layout: LayoutKind,
    doublings: u32,
) -> Option<(usize, usize)> {
    let buckets = buckets_for(capacity, layout).ok()?.checked_shl(doublings)?;
    let buckets = usize::try_from(buckets).ok()?;
    Some((buckets, Table::bytes_for(buckets)))
}

/// Buckets (even, at least `MIN_M0`) so that `capacity` items fit at the
/// layout's sizing load.
pub(crate) fn buckets_for(capacity: usize, layout: LayoutKind) -> Result<u64, BuildError> {
    if capacity == 0 {
        return Err(BuildError::ZeroCapacity);
    }
    let per_bucket = layout.lanes() as f64 * layout.sizing_load();
    let max = (MAX_M0 as f64 * per_bucket) as usize;
    if capacity > max {
        return Err(BuildError::CapacityTooLarge {
            requested: capacity,
            max,
        });
    }
    let buckets = (capacity as f64 / per_bucket).ceil() as u64;
    let even = buckets + (buckets & 1);
    Ok(even.clamp(MIN_M0, MAX_M0))
}
