//! The engine under [`CuckooFilter`](crate::CuckooFilter): plain functions
//! over one table (or a table and its successor while it migrates),
//! generic over the bucket layout, with no knowledge of keys or errors.
//! Split by concern:
//!
//! * `batch`: prefetching loops over many keys;
//! * `bucket`: the packed bucket word and its SWAR lane functions;
//! * `geometry`: hash to tag and candidate buckets;
//! * `words`: fallible zeroed allocation of the bucket array;
//! * `table`: buckets, version stripes, the stripe lock;
//! * `ops`: contains / count / insert / remove;
//! * `path`: displacement (bounded BFS search, then commit from the far end);
//! * `room`: the full hint that spares a table at its growth cap the search;
//! * `migrate`: online doubling: sealing, chunked copying, forwarding;
//! * `migrating`: the operations for a key whose table is migrating;
//! * `counters`: sharded item count and statistics.

pub(crate) mod batch;
pub(crate) mod bucket;
pub(crate) mod counters;
pub(crate) mod geometry;
pub(crate) mod migrate;
pub(crate) mod migrating;
pub(crate) mod ops;
pub(crate) mod path;
pub(crate) mod room;
pub(crate) mod table;
pub(crate) mod words;
