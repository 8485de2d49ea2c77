//! The value of a `CF.*` key: a koel cuckoo filter plus the RedisBloom
//! options it was reserved with, and how it is saved.

use crate::encoding::{self, Fields, Kind};
use koel::{CuckooFilter, Growth, InsertError};
use std::io;

/// RedisBloom's defaults for CF.RESERVE's options.
pub const DEFAULT_CAPACITY: i64 = 1024;
pub const DEFAULT_BUCKET_SIZE: i64 = 2;
pub const DEFAULT_MAX_ITERATIONS: i64 = 20;
pub const DEFAULT_EXPANSION: i64 = 1;

/// What CF.RESERVE (or an auto-creating add) asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    pub capacity: u64,
    /// 1..=4 maps to koel's 16-bit x 4 layout, 5..=255 to 12-bit x 5.
    pub bucket_size: u64,
    /// Kept for CF.INFO; koel's displacement is a bounded breadth-first
    /// search (at most 6 hops) with no iteration count.
    pub max_iterations: u64,
    /// 0: never grows (`Growth::Fixed`); otherwise the table doubles in
    /// place (`Growth::Double`) whatever the factor.
    pub expansion: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            capacity: DEFAULT_CAPACITY as u64,
            bucket_size: DEFAULT_BUCKET_SIZE as u64,
            max_iterations: DEFAULT_MAX_ITERATIONS as u64,
            expansion: DEFAULT_EXPANSION as u64,
        }
    }
}

impl Options {
    pub fn fingerprint_bits(&self) -> u32 {
        if self.bucket_size <= 4 {
            16
        } else {
            12
        }
    }
}

pub struct CfKey {
    pub filter: CuckooFilter,
    pub options: Options,
    /// Successful CF.DEL calls (RedisBloom's "Number of items deleted").
    pub deleted: u64,
}

impl CfKey {
    /// A new filter; `seed` None draws a random one (the caller replicates
    /// the seed it got, so that every replica builds the same filter).
    pub fn create(options: Options, seed: Option<u64>) -> Result<CfKey, String> {
        let capacity = usize::try_from(options.capacity).map_err(|_| "capacity too large")?;
        let mut b = CuckooFilter::builder()
            .capacity(capacity)
            .fingerprint_bits(options.fingerprint_bits())
            .growth(if options.expansion == 0 {
                Growth::Fixed
            } else {
                Growth::Double
            });
        if let Some(seed) = seed {
            b = b.seed(seed);
        }
        let filter = b.build().map_err(|e| e.to_string())?;
        Ok(CfKey {
            filter,
            options,
            deleted: 0,
        })
    }

    /// Runs a write and leaves no growth running: a doubling, or a region
    /// level's step, that the write started is finished before the command
    /// returns. koel would carry either on a chunk per later write (and a
    /// save in a forked child would finish it in the child's copy alone);
    /// finishing it here makes the in-memory filter exactly what a save of
    /// it loads as, so a replica fed from an RDB snapshot and its primary
    /// stay word for word equal.
    pub fn write<R>(&mut self, op: impl FnOnce(&CuckooFilter) -> R) -> R {
        let before = self.filter.memory_usage();
        let r = op(&self.filter);
        if self.filter.memory_usage() != before {
            // Both growths allocate when they begin. `write_to` finishes a
            // running migration, and a running step, before it reads the
            // words; the bytes go nowhere. Once per doubling or step.
            let _ = self.filter.write_to(io::sink());
        }
        r
    }

    pub fn insert(&mut self, item: &[u8], unique: bool) -> Result<bool, InsertError> {
        self.write(|f| {
            if unique {
                f.insert_unique(item)
            } else {
                f.insert(item).map(|()| true)
            }
        })
    }

    pub fn remove(&mut self, item: &[u8]) -> bool {
        let removed = self.write(|f| f.remove(item));
        if removed {
            self.deleted += 1;
        }
        removed
    }

    pub fn memory(&self) -> usize {
        std::mem::size_of::<CfKey>() + self.filter.memory_usage()
    }

    pub fn encode(&self) -> io::Result<Vec<u8>> {
        let o = &self.options;
        let mut fields = Vec::with_capacity(40);
        for v in [
            o.capacity,
            o.bucket_size,
            o.max_iterations,
            o.expansion,
            self.deleted,
        ] {
            fields.extend_from_slice(&v.to_le_bytes());
        }
        encoding::encode(Kind::Cuckoo, &fields, |out| self.filter.write_to(out))
    }

    pub fn decode(bytes: &[u8]) -> Result<CfKey, String> {
        let (fields, mut payload) = encoding::decode(Kind::Cuckoo, bytes)?;
        let mut f = Fields::new(fields);
        let options = Options {
            capacity: f.u64()?,
            bucket_size: f.u64()?,
            max_iterations: f.u64()?,
            expansion: f.u64()?,
        };
        let deleted = f.u64()?;
        f.end()?;
        // Levels saved as doubling ones (by versions before region levels)
        // keep doubling; the levels it adds grow by regions.
        let filter = CuckooFilter::read_from(&mut payload).map_err(|e| e.to_string())?;
        if !payload.is_empty() {
            return Err("bytes after the filter".into());
        }
        Ok(CfKey {
            filter,
            options,
            deleted,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_a_flipped_payload_byte_is_refused() {
        let mut k = CfKey::create(Options::default(), Some(7)).unwrap();
        for i in 0..500u32 {
            k.insert(&i.to_le_bytes(), false).unwrap();
        }
        assert!(k.remove(&3u32.to_le_bytes()));
        let bytes = k.encode().unwrap();
        let back = CfKey::decode(&bytes).unwrap();
        assert_eq!((back.deleted, back.options), (1, k.options));
        assert_eq!(back.filter.seed(), 7);
        assert!((4..500u32).all(|i| back.filter.contains(&i.to_le_bytes()[..])));
        // A byte of the table (well past both headers).
        let mut bad = bytes.clone();
        let at = bytes.len() - 200;
        bad[at] ^= 0x01;
        assert!(CfKey::decode(&bad).is_err());
    }

    #[test]
    fn a_filter_grown_past_its_tag_bits_round_trips() {
        let mut k = CfKey::create(
            Options {
                capacity: 100,
                ..Options::default()
            },
            Some(3),
        )
        .unwrap();
        let mut n = 0u32;
        while k.filter.stats().levels < 2 || !n.is_multiple_of(1000) {
            k.insert(&n.to_le_bytes(), false).unwrap();
            n += 1;
        }
        let bytes = k.encode().unwrap();
        let back = CfKey::decode(&bytes).unwrap();
        assert_eq!(back.filter.stats().levels, k.filter.stats().levels);
        assert_eq!(back.filter.len(), n as usize);
        assert!((0..n).all(|i| back.filter.contains(&i.to_le_bytes()[..])));
        assert_eq!(
            back.encode().unwrap(),
            bytes,
            "encoded again, the same bytes"
        );
        // A byte of the level above (the last record) damaged.
        let mut bad = bytes.clone();
        let at = bytes.len() - 100;
        bad[at] ^= 0x01;
        assert!(CfKey::decode(&bad).is_err());
    }

    #[test]
    fn growth_is_finished_by_the_write_that_started_it() {
        let mut k = CfKey::create(
            Options {
                capacity: 64,
                ..Options::default()
            },
            Some(1),
        )
        .unwrap();
        for i in 0..5_000u32 {
            k.insert(&i.to_le_bytes(), false).unwrap();
            assert!(!k.filter.stats().migrating, "after insert {i}");
        }
        assert!(k.filter.generation() >= 4);
    }

    /// The same for the region levels a filter adds past its tag bits: no
    /// step is left running between commands, so a save (in a forked
    /// child) never has one to finish, and a filter decoded from any save
    /// goes on word for word as the one that was saved.
    #[test]
    fn region_steps_are_finished_by_the_write_that_started_them() {
        let options = Options {
            capacity: 64,
            ..Options::default()
        };
        let mut k = CfKey::create(options, Some(1)).unwrap();
        let mut memory = k.memory();
        let mut saved = None;
        for i in 0..60_000u32 {
            k.insert(&i.to_le_bytes(), false).unwrap();
            // Steps and doublings begin only where memory grows.
            if k.memory() != memory {
                memory = k.memory();
                assert!(!k.filter.stats().migrating, "after insert {i}");
                if k.filter.stats().region_steps == 3 && saved.is_none() {
                    saved = Some((i, CfKey::decode(&k.encode().unwrap()).unwrap()));
                }
            }
        }
        let s = k.filter.stats();
        assert!(s.levels >= 2 && s.region_steps >= 5, "{s:?}");
        // A replica resynchronised at the third step, fed the rest.
        let (at, mut replica) = saved.expect("a third step");
        for i in at + 1..60_000u32 {
            replica.insert(&i.to_le_bytes(), false).unwrap();
        }
        assert!(
            replica.encode().unwrap() == k.encode().unwrap(),
            "the replica's bytes differ"
        );
    }
}
