//! The two hooks persistence needs: a consistent view of the table while
//! writers run, and a filter rebuilt from saved words.
//!
//! Not public API: `crate::persist` owns the file format.

// Used by persistence, which lands next; until then only the tests call it.
#![allow(dead_code)]

use super::{with_layout_kind, CuckooFilter, LayoutKind};
use crate::hash::{HashAlgorithm, KeyHasher};
use crate::raw::geometry::Geometry;
use crate::raw::ops;
use crate::raw::table::Table;
use crate::sync::AtomicU64;

/// What a saved cuckoo filter is made of. `words` stay atomics: plain
/// inserts may still fill empty slots while the view is held, so read them
/// with `Relaxed` loads.
pub(crate) struct SnapshotView<'a> {
    pub(crate) layout: LayoutKind,
    pub(crate) seed: u64,
    pub(crate) hash_algorithm: HashAlgorithm,
    pub(crate) policy: super::GrowthPolicy,
    pub(crate) m0: u64,
    pub(crate) generation: u32,
    pub(crate) words: &'a [AtomicU64],
}

/// Why saved parts cannot make a filter. (The geometry is no reason: the
/// caller passes a [`Geometry`], which only `Geometry::checked` makes from
/// untrusted numbers.)
#[derive(Debug)]
pub(crate) enum FromPartsError {
    /// The allocator refused `bytes`.
    Allocation { bytes: usize },
    /// Bucket `bucket` holds a word this layout never writes (a reserved
    /// tag, bits outside the lanes) or a tag outside its region: the data
    /// is corrupt.
    BadWord { bucket: usize },
    /// `fill` failed.
    Fill(std::io::Error),
}

impl CuckooFilter {
    /// Runs `f` on a view of the table in which no tag moves and none is
    /// removed: every item whose insert completed before this call and
    /// that no remove took is in `view.words`. Writers that must move or
    /// remove a tag (and `insert_unique`) wait until `f` returns; plain
    /// inserts into free slots and all reads go on (a holder that changes
    /// nothing leaves the stripe words as they are, and validating readers
    /// ask no more). A migration running when it is called is finished
    /// first.
    pub(crate) fn with_snapshot<R>(&self, f: impl FnOnce(&SnapshotView<'_>) -> R) -> R {
        let _pin = self.writer_pin();
        #[cfg(loom)]
        if self.table().canary == crate::canary::Canary::UnfinishedSnapshot {
            // Deliberately broken: no migration finished, no stripe held.
            return f(&self.view(self.table()));
        }
        // Holding every stripe excludes each displacement hop and each
        // remove, which are the only ways a tag leaves a bucket. A
        // migrating table is finished first, so one table holds every tag.
        let (t, _all) = loop {
            self.finish_migration();
            let t = self.table();
            if let Ok(all) = ops::hold_all(t) {
                break (t, all);
            }
        };
        // Lookups (also inside `f`) go on: the holds do not change the
        // stripe words again until they end, so readers' checks pass.
        f(&self.view(t))
    }

    /// What `with_snapshot` hands out for table `t`.
    fn view<'t>(&self, t: &'t Table) -> SnapshotView<'t> {
        let geo = t.geometry();
        SnapshotView {
            layout: self.layout,
            seed: self.hasher.seed(),
            hash_algorithm: self.hasher.algorithm(),
            policy: self.policy,
            m0: geo.m0(),
            generation: geo.generation(),
            words: t.words(),
        }
    }

    /// A filter from saved parts: `fill` receives the zeroed table of
    /// `geo` as little-endian bytes (`8 * geo.buckets()` of them) and
    /// writes the saved words into it. `len` becomes the item count;
    /// `hasher` and `policy` are the saved filter's.
    ///
    /// `geo` comes from `Geometry::checked` (the loader's header check), so
    /// nothing here validates it again.
    pub(crate) fn from_parts(
        layout: LayoutKind,
        hasher: KeyHasher,
        policy: super::GrowthPolicy,
        geo: Geometry,
        len: u64,
        fill: impl FnOnce(&mut [u8]) -> std::io::Result<()>,
    ) -> Result<CuckooFilter, FromPartsError> {
        let mut table =
            Table::new(geo).map_err(|e| FromPartsError::Allocation { bytes: e.bytes })?;
        fill(table.words_as_bytes_mut()).map_err(FromPartsError::Fill)?;
        // A reserved tag would read as a forwarded bucket or a tag no key
        // has, and a tag outside its region sends `alt` out of the table:
        // refuse both rather than run on a table the protocol never made.
        let region_len = geo.m0() as usize;
        // Native-endian words of a table no other thread sees yet: read as
        // plain bytes, so the pass vectorises (atomic loads would not).
        let bytes: &[u8] = table.words_as_bytes_mut();
        let bad = with_layout_kind!(layout, L => bytes
        .chunks(region_len * 8)
        .enumerate()
        .find_map(|(region, run)| {
            let region = region as u64;
            let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().expect("8 bytes"));
            let flawed = |w| geo.flaws::<L>(region, w);
            if run.chunks_exact(8).map(word).fold(0, |acc, w| acc | flawed(w)) == 0 {
                return None;
            }
            run.chunks_exact(8)
                .map(word)
                .position(|w| flawed(w) != 0)
                .map(|i| region as usize * region_len + i)
        }));
        if let Some(bucket) = bad {
            return Err(FromPartsError::BadWord { bucket });
        }
        let upper = super::levels::Upper::first(&policy, false);
        Ok(CuckooFilter::assemble(
            table, layout, hasher, policy, upper, len,
        ))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::hash::HashAlgorithm;
    use crate::raw::geometry::Addressing;
    use crate::sync::Ordering;

    #[test]
    fn parts_round_trip_gives_identical_answers() {
        let f = CuckooFilter::builder()
            .capacity(5000)
            .seed(9)
            .build()
            .unwrap();
        for k in 0..4000u32 {
            f.insert(&k).unwrap();
        }
        let (m0, generation, bytes) = f.with_snapshot(|v| {
            let bytes: Vec<u8> = v
                .words
                .iter()
                .flat_map(|w| w.load(Ordering::Relaxed).to_ne_bytes())
                .collect();
            (v.m0, v.generation, bytes)
        });
        let g = CuckooFilter::from_parts(
            f.layout,
            f.hasher.clone(),
            f.policy,
            Geometry::new(m0, generation, f.addressing()),
            f.len() as u64,
            |dst| {
                dst.copy_from_slice(&bytes);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(g.len(), 4000);
        for k in 0..20_000u32 {
            assert_eq!(f.contains(&k), g.contains(&k), "key {k}");
        }
    }

    #[test]
    fn lookups_go_on_during_a_snapshot() {
        let f = CuckooFilter::builder()
            .capacity(1000)
            .seed(3)
            .build()
            .unwrap();
        f.insert(&1u32).unwrap();
        let answers = f.with_snapshot(|_| {
            // Negative and positive reads inside the snapshot do not wait
            // for its held stripes (this would hang otherwise).
            (
                f.contains(&1u32),
                f.contains(&2u32),
                f.count(&2u32),
                f.insert(&3u32),
            )
        });
        assert_eq!(answers, (true, false, 0, Ok(())));
        assert!(f.contains(&3u32));
        assert_eq!(f.insert_unique(&4u32), Ok(true), "stripes released after");
    }

    #[test]
    fn tags_outside_their_region_are_refused() {
        // Generation 2, m0 = 64: buckets 64..128 are region 1, whose tags
        // have low bits 0b01.
        let put = |bucket: usize, word: u64| {
            move |dst: &mut [u8]| -> std::io::Result<()> {
                dst[8 * bucket..8 * bucket + 8].copy_from_slice(&word.to_ne_bytes());
                Ok(())
            }
        };
        let l = LayoutKind::Tags16x4;
        let own = 0x0005 | (0x0101 << 16);
        assert!(CuckooFilter::from_parts(
            l,
            KeyHasher::with_algorithm(0, HashAlgorithm::Fold),
            Default::default(),
            Geometry::new(64, 2, Addressing::V3),
            2,
            put(70, own)
        )
        .is_ok());
        assert!(matches!(
            CuckooFilter::from_parts(
                l,
                KeyHasher::with_algorithm(0, HashAlgorithm::Fold),
                Default::default(),
                Geometry::new(64, 2, Addressing::V3),
                2,
                put(69, own | (0x0006 << 32))
            ),
            Err(FromPartsError::BadWord { bucket: 69 })
        ));
        assert!(matches!(
            CuckooFilter::from_parts(
                l,
                KeyHasher::with_algorithm(0, HashAlgorithm::Fold),
                Default::default(),
                Geometry::new(64, 2, Addressing::V3),
                2,
                put(3, own)
            ),
            Err(FromPartsError::BadWord { bucket: 3 })
        ));
        assert!(matches!(
            CuckooFilter::from_parts(
                LayoutKind::Tags12x5,
                KeyHasher::with_algorithm(0, HashAlgorithm::Fold),
                Default::default(),
                Geometry::new(64, 1, Addressing::V3),
                1,
                put(10, 0x001 << 48)
            ),
            Err(FromPartsError::BadWord { bucket: 10 })
        ));
    }

    #[test]
    fn words_the_layout_never_writes_are_refused() {
        let l = LayoutKind::Tags16x4;
        let forwarded = |dst: &mut [u8]| -> std::io::Result<()> {
            dst[8..16].copy_from_slice(&u64::MAX.to_ne_bytes());
            Ok(())
        };
        assert!(matches!(
            CuckooFilter::from_parts(
                l,
                KeyHasher::with_algorithm(0, HashAlgorithm::Fold),
                Default::default(),
                Geometry::new(64, 0, Addressing::V3),
                0,
                forwarded
            ),
            Err(FromPartsError::BadWord { bucket: 1 })
        ));
        let high_bits = |dst: &mut [u8]| -> std::io::Result<()> {
            dst[0..8].copy_from_slice(&(1u64 << 62).to_ne_bytes());
            Ok(())
        };
        assert!(matches!(
            CuckooFilter::from_parts(
                LayoutKind::Tags12x5,
                KeyHasher::with_algorithm(0, HashAlgorithm::Fold),
                Default::default(),
                Geometry::new(64, 0, Addressing::V3),
                0,
                high_bits
            ),
            Err(FromPartsError::BadWord { bucket: 0 })
        ));
    }

    #[test]
    fn a_table_the_allocator_refuses_is_an_error() {
        // 2^44 buckets pass `Geometry::checked`, and the allocator refuses
        // them before `fill` runs.
        let never = |_: &mut [u8]| -> std::io::Result<()> { panic!("must not fill") };
        let geo = Geometry::checked(1 << 32, 12, 16, Addressing::V3).unwrap();
        assert!(matches!(
            CuckooFilter::from_parts(
                LayoutKind::Tags16x4,
                KeyHasher::with_algorithm(0, HashAlgorithm::Fold),
                Default::default(),
                geo,
                0,
                never
            ),
            Err(FromPartsError::Allocation { .. })
        ));
    }
}
