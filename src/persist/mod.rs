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
//! The byte layout, the loader's checks (in order) and what save and load
//! guarantee are specified once, in `docs/format.md` (also the `format`
//! module's documentation).
//!
//! Split by concern: `format` (layout, header codec), `error`
//! ([`LoadError`]), `stream` (reading parts from any reader), `saved` (the
//! write and load steps every kind shares), `cuckoo` (the cuckoo filter's
//! header checks, payload check and API; its child `regions`, a region
//! level's record), `file` (atomic replace), `inspect`.

mod bloom;
mod cuckoo;
mod error;
mod file;
mod format;
mod inspect;
mod saved;
#[cfg(feature = "serde")]
mod serde;
mod stream;

pub use cuckoo::RegionsInfo;
pub use error::LoadError;
pub use file::AtomicFile;
pub use inspect::{inspect, ChecksumStatus, FileInfo};
