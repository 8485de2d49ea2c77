//! Saving and loading filters: a versioned, checksummed little-endian
//! format that never loads wrong.
//!
//! * [`CuckooFilter::write_to`](crate::CuckooFilter::write_to) /
//!   [`read_from`](crate::CuckooFilter::read_from): any `io::Write` /
//!   `io::Read`;
//! * [`save`](crate::CuckooFilter::save) / [`load`](crate::CuckooFilter::load):
//!   a path, saved atomically (temporary file, sync, rename, sync);
//! * [`inspect`](crate::inspect): the header and the payload's checksum
//!   status, without building a filter.
//!
//! The byte layout is documented field by field in `format.rs` and in the
//! README ("Saving and loading"). Loading checks, in order: magic, version,
//! header checksum, every header field (kind, hash algorithm, flags,
//! layout, geometry, lengths), the hash probe, then streams the payload
//! through the checksum and a per-word check (no reserved tag, no bits
//! outside the lanes, every tag in its region's buckets, occupied slots
//! counted), and compares the checksum and the item count. The geometry
//! and the per-word rules are the engine's own (`Geometry::checked`,
//! `Geometry::holds`, `BloomParts::check`), so whatever loads is a filter
//! every later operation, growth included, can run on. Nothing is
//! allocated for the table before the header is valid, a reader buffers
//! the payload only as fast as it arrives, and `load` verifies a file
//! that occupies less storage than its length (sparse) before allocating.
//!
//! Split by concern: `format` (layout, header codec), `error`
//! ([`LoadError`]), `stream` (reading parts from any reader), `saved` (the
//! write and load steps every kind shares), `cuckoo` (the cuckoo filter's
//! header checks, payload check and API), `file` (atomic replace), `inspect`.

mod bloom;
mod cuckoo;
mod error;
mod file;
mod format;
mod inspect;
mod saved;
mod stream;

pub use error::LoadError;
pub use inspect::{inspect, ChecksumStatus, FileInfo};
