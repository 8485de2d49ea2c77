//! The engine under [`CuckooFilter`](crate::CuckooFilter): plain functions
//! over one table (or a table and its successor while it migrates),
//! generic over the bucket layout, with no knowledge of keys or errors.
//! Split by concern:
//!
//! * `batch`: prefetching loops over many keys;
//! * `bucket`: the packed bucket word and its SWAR lane functions;
//! * `geometry`: hash to tag and candidate buckets;
//! * `table`'s words come from `crate::memory` (shared with the Bloom filter);
//! * `table`: buckets, their version stripes, and the link to the
//!   successor while the table is replaced;
//! * `stripe`: what a version stripe word means, the stripe lock, seals;
//! * `cas`: a tag into or out of one bucket word (below `ops` and `path`);
//! * `tables`: the chain of a filter's tables, kept until it drops (why
//!   lookups need no epoch pin);
//! * `ops`: contains / count / insert / remove;
//! * `path`: displacement (bounded BFS search, then commit from the far end);
//! * `room`: the full hint that spares a table at its growth cap the search;
//! * `migrate`: online doubling: sealing, chunked copying, forwarding;
//! * `migrating`: the operations for a key whose table is migrating;
//! * `counters`: sharded item count and statistics, and each thread's slot;
//! * `writers`: which threads are writing, so a replaced table's pages are
//!   returned only when no writer can reach them (no epoch pin per write);
//! * `pause`: pause points that let unit tests stop a writer mid-step;
//! * `regions`: a level that grows by consistent regions (inserts, steps,
//!   sweeps, snapshots);
//! * `slot_map`: which region holds each of a level's virtual slots, and
//!   the pin a region's displacements ask (below `regions` and `table`).
//!
//! # Progress: which operation may wait for which
//!
//! The only thing a thread ever waits for is a version stripe held by
//! another thread (a seal waits for its holder too), or a migration chunk
//! another thread has claimed. Who may hold a stripe: `remove`,
//! `insert_unique`, a displacement hop (each for a few CASes), `clear` and
//! a save (`with_snapshot`, for the whole write). Readers do not wait for
//! holders: they re-read only when the stripe *changed* during their read,
//! that is when a writer completed a step (see `ops.rs`).
//!
//! | operation | waits for | guarantee |
//! | --- | --- | --- |
//! | `contains` (positive) | nothing | wait-free: a few loads |
//! | `contains`, `count` | nothing: re-reads only after another thread took, stepped or released the pair's stripe during the read; a `count` also while a hop of its own tag is in flight | lock-free (a `count` of a tag in flight waits for that hop); writes no shared memory |
//! | `insert` into a free lane (also during a migration, also behind a save) | nothing | lock-free: CAS retries only when another CAS succeeded |
//! | `insert` helping a migration | nothing: it seals only free stripes and skips the chunk otherwise | bounded work, no waiting |
//! | `insert` into two full buckets | hop stripes; during a migration the chunk owner or a stripe holder that delays the seal | blocking |
//! | `insert_unique`, `remove` | the pair's stripe; during a migration the seal of the old pair, then the successor pair's stripe | blocking |
//! | `clear`, save | every stripe, and the end of a running migration | blocking |
//!
//! No thread waits for a stripe while holding one (`clear` and a save take
//! all in ascending order), so waiting cannot deadlock. A plain insert does
//! not seal the old pair during a migration: see "Who seals" in
//! `migrating.rs` for why that is safe. How the writers that still wait
//! could instead finish each other's steps is sketched in docs/design.md
//! ("Helping").

pub(crate) mod batch;
pub(crate) mod bucket;
pub(crate) mod cas;
pub(crate) mod counters;
pub(crate) mod geometry;
pub(crate) mod migrate;
pub(crate) mod migrating;
pub(crate) mod ops;
pub(crate) mod path;
pub(crate) mod pause;
pub(crate) mod regions;
pub(crate) mod room;
pub(crate) mod slot_map;
pub(crate) mod stripe;
pub(crate) mod table;
pub(crate) mod tables;
pub(crate) mod writers;
