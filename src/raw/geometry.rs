//! Geometry: how a 64-bit hash becomes a tag and its two candidate buckets.
//!
//! A table has `m0 * 2^generation` buckets. From the key's hash `h`:
//!
//! * the tag is taken from the top bits of `h`, mapped onto `1..=MAX_TAG`
//!   (0 means empty, all-ones is reserved);
//! * the local index is `l1 = fastrange32(low 32 bits of h, m0)`, so `m0`
//!   needs no power-of-two rounding;
//! * the alternate local index is `l2 = (H(tag) - l1) mod m0`, an
//!   involution, so a tag alone finds its other bucket. `H(tag)` is forced
//!   odd and `m0` is even, so `2*l == H(tag) (mod m0)` has no solution: the
//!   two candidates are always distinct buckets;
//! * the region (used once the table has grown) is the low `generation` bits
//!   of the tag; bucket = `region * m0 + local`. Both buckets of a pair share
//!   a region, which is what lets a table double without the keys.
//!
//! Every geometry value an operation uses comes from the one `Table` it
//! loaded, never from a separately loaded size (the race libcuckoo fixed in
//! its PR #173).

use super::bucket::{self, Layout};

/// Buckets per region are capped so that `fastrange32` covers them.
pub(crate) const MAX_M0: u64 = 1 << 32;

/// Fewest buckets per region. A key's two buckets lie inside one region, so
/// a region must be big enough for displacement paths to find room. Under
/// loom a tiny table is what lets a model reach a displacement.
#[cfg(not(loom))]
pub(crate) const MIN_M0: u64 = 64;
#[cfg(loom)]
pub(crate) const MIN_M0: u64 = 4;

/// Tag bits that must keep telling keys apart: each generation spends one
/// tag bit on the region, so `w`-bit tags allow `w - 4` doublings.
pub(crate) const MIN_FREE_TAG_BITS: u32 = 4;

/// Most generations a table of `tag_bits`-bit tags may reach.
pub(crate) fn max_generation(tag_bits: u32) -> u32 {
    tag_bits.saturating_sub(MIN_FREE_TAG_BITS)
}

/// Why `(m0, generation)` is not a table the engine can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GeometryError {
    /// `m0` is odd or outside `MIN_M0..=MAX_M0`.
    M0(u64),
    /// The generation leaves fewer than [`MIN_FREE_TAG_BITS`] tag bits, or
    /// the table's words would not fit an address space.
    Generation(u32),
}

/// The two ways of this module's arithmetic a filter may use: format
/// versions 1 and 2 fixed one, version 3 (the default of new filters) the
/// other, which takes fewer instructions per key (`docs/format.md`, "Key
/// hashing", states both). A filter uses one for all its tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Addressing {
    /// Tag `1 + ((top w bits) * MAX >> w)`; `H(tag)` from a 64-bit multiply.
    V1,
    /// Tag `1 + (h * MAX) >> 64` (one widening multiply); `H(tag)` from a
    /// 32-bit multiply.
    V3,
}

/// Where a hash lives: its tag and its two candidate buckets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Located {
    pub(crate) tag: u64,
    pub(crate) i1: usize,
    pub(crate) i2: usize,
}

/// The hash-to-bucket mapping of one table. Plain data, no atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Buckets per region; even.
    m0: u64,
    /// Log2 of the number of regions.
    generation: u32,
    /// Low `generation` bits of a tag: its region.
    region_mask: u64,
    addressing: Addressing,
}

impl Geometry {
    /// A geometry the caller knows to be valid (see [`checked`](Self::checked)).
    ///
    /// # Panics
    ///
    /// If `m0` is odd or out of range, or `m0 << generation` overflows:
    /// `locate` keeps its buckets below [`buckets`](Self::buckets) only
    /// then, and tables read their words unchecked on that promise.
    pub(crate) fn new(m0: u64, generation: u32, addressing: Addressing) -> Self {
        assert!(
            m0 % 2 == 0 && (MIN_M0..=MAX_M0).contains(&m0) && m0.leading_zeros() >= generation,
            "invalid geometry: m0 {m0}, generation {generation}"
        );
        Geometry {
            m0,
            generation,
            region_mask: (1u64 << generation) - 1,
            addressing,
        }
    }

    /// This geometry after one more doubling: its regions split in two.
    pub(crate) fn doubled(&self, tag_bits: u32) -> Result<Geometry, GeometryError> {
        Geometry::checked(self.m0, self.generation + 1, tag_bits, self.addressing)
    }

    /// The geometry of `m0` buckets per region after `generation`
    /// doublings of a table of `tag_bits`-bit tags, if the engine can run
    /// it: every index and size it computes then fits its type. The one
    /// definition of a valid table shape: growth and the loader both ask
    /// it.
    pub(crate) fn checked(
        m0: u64,
        generation: u32,
        tag_bits: u32,
        addressing: Addressing,
    ) -> Result<Geometry, GeometryError> {
        if m0 % 2 != 0 || !(MIN_M0..=MAX_M0).contains(&m0) {
            return Err(GeometryError::M0(m0));
        }
        // The shift runs only for `generation < 64`: no bits of the u128
        // are lost.
        let fits = generation <= max_generation(tag_bits)
            && generation < 64
            && (u128::from(m0) << generation) * 8 <= isize::MAX as u128;
        if !fits {
            return Err(GeometryError::Generation(generation));
        }
        Ok(Geometry::new(m0, generation, addressing))
    }

    /// Non-zero exactly when `word`, stored in a bucket of region `region`
    /// (`bucket / m0`), is not one a filter could have put there: a
    /// reserved tag, bits outside the lanes, or a tag of another region (a
    /// tag lives only in the buckets of its region, its low `generation`
    /// bits; a table that breaks this sends `alt` outside the table or
    /// into another region). See [`bucket::flaws`].
    #[inline(always)]
    pub(crate) fn flaws<L: Layout>(&self, region: u64, word: u64) -> u64 {
        bucket::flaws::<L>(word, self.region_mask, region)
    }

    /// Low `generation` bits of a tag: its region.
    // Only the file format's word scan asks, and loom builds leave it out.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn region_mask(&self) -> u64 {
        self.region_mask
    }

    /// Buckets per region.
    pub(crate) fn m0(&self) -> u64 {
        self.m0
    }

    pub(crate) fn generation(&self) -> u32 {
        self.generation
    }

    pub(crate) fn addressing(&self) -> Addressing {
        self.addressing
    }

    /// Total buckets: `m0 << generation`.
    pub(crate) fn buckets(&self) -> u64 {
        self.m0 << self.generation
    }

    /// The tag of hash `h`: its top bits mapped onto `1..=MAX_TAG`.
    #[inline(always)]
    pub(crate) fn tag_of<L: Layout>(h: u64, addressing: Addressing) -> u64 {
        match addressing {
            Addressing::V1 => {
                let top = h >> (64 - L::TAG_BITS);
                1 + ((top * L::MAX_TAG) >> L::TAG_BITS)
            }
            Addressing::V3 => 1 + ((u128::from(h) * u128::from(L::MAX_TAG)) >> 64) as u64,
        }
    }

    /// The tag and both candidate buckets of hash `h`.
    #[inline(always)]
    pub(crate) fn locate<L: Layout>(&self, h: u64) -> Located {
        self.locate_as::<L>(h, self.addressing)
    }

    /// [`locate`](Self::locate) for a caller that knows this geometry's
    /// addressing (a filter's fast route): `addressing` is a constant
    /// there, and the choice compiles away.
    #[inline(always)]
    pub(crate) fn locate_as<L: Layout>(&self, h: u64, addressing: Addressing) -> Located {
        debug_assert_eq!(addressing, self.addressing);
        let tag = Self::tag_of::<L>(h, addressing);
        let local = ((h & 0xFFFF_FFFF) * self.m0) >> 32;
        let base = (tag & self.region_mask) * self.m0;
        let alt = self.alt_local(local, tag, addressing);
        Located {
            tag,
            i1: (base + local) as usize,
            i2: (base + alt) as usize,
        }
    }

    /// The other candidate bucket of `tag` stored in `bucket`.
    #[inline(always)]
    pub(crate) fn alt(&self, bucket: usize, tag: u64) -> usize {
        let base = (tag & self.region_mask) * self.m0;
        let local = bucket as u64 - base;
        (base + self.alt_local(local, tag, self.addressing)) as usize
    }

    /// `(H(tag) - local) mod m0` with `H(tag)` odd and below `m0`.
    #[inline(always)]
    fn alt_local(&self, local: u64, tag: u64, addressing: Addressing) -> u64 {
        // `tag` spread over 32 bits, then onto `0..m0`.
        let mixed = match addressing {
            Addressing::V1 => tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32,
            // A multiplier below 2^31: one `imul` with an immediate.
            Addressing::V3 => u64::from((tag as u32).wrapping_mul(0x7FEB_352D)),
        };
        let h = ((mixed * self.m0) >> 32) | 1;
        let wrap = if h < local { self.m0 } else { 0 };
        h.wrapping_sub(local).wrapping_add(wrap)
    }
}

#[cfg(test)]
mod tests {
    use super::super::bucket::{L12x5, L16x4};
    use super::*;

    const BOTH: [Addressing; 2] = [Addressing::V1, Addressing::V3];

    fn check<L: Layout>(m0: u64, generation: u32) {
        for a in BOTH {
            check_one::<L>(Geometry::new(m0, generation, a));
        }
    }

    fn check_one<L: Layout>(g: Geometry) {
        let (m0, generation) = (g.m0(), g.generation());
        let mut h = 0x0123_4567_89AB_CDEFu64;
        for _ in 0..200_000 {
            h = h
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let Located { tag, i1, i2 } = g.locate::<L>(h);
            assert!((1..=L::MAX_TAG).contains(&tag), "tag {tag} out of range");
            assert!((i1 as u64) < g.buckets() && (i2 as u64) < g.buckets());
            assert_ne!(i1, i2, "a key's two buckets must differ");
            assert_eq!(g.alt(i1, tag), i2, "alt is an involution");
            assert_eq!(g.alt(i2, tag), i1, "alt is an involution");
            let region = tag & ((1 << generation) - 1);
            assert_eq!(
                i1 as u64 / m0,
                region,
                "both candidates in the tag's region"
            );
            assert_eq!(
                i2 as u64 / m0,
                region,
                "both candidates in the tag's region"
            );
        }
    }

    #[test]
    fn locate_gives_two_distinct_buckets_linked_by_alt() {
        check::<L16x4>(64, 0);
        check::<L16x4>(1_000_002, 0);
        check::<L12x5>(66, 0);
        check::<L16x4>(64, 3);
        check::<L12x5>(130, 2);
        check::<L16x4>(MAX_M0, 0);
    }

    /// `Table::candidates` reads words unchecked on `new`'s promise, so
    /// `new` itself refuses every shape `locate` could leave.
    #[test]
    fn new_refuses_shapes_whose_buckets_locate_could_leave() {
        for (m0, g) in [
            (MIN_M0 + 1, 0),
            (MIN_M0 - 2, 0),
            (MAX_M0 + 2, 0),
            (64, 59),
            (64, 64),
        ] {
            let made = std::panic::catch_unwind(|| Geometry::new(m0, g, Addressing::V3));
            assert!(made.is_err(), "m0 {m0}, generation {g} was accepted");
        }
        assert_eq!(Geometry::new(64, 57, Addressing::V1).buckets(), 1 << 63);
    }

    #[test]
    fn checked_refuses_what_the_engine_cannot_run() {
        use GeometryError::*;
        let v3 = Addressing::V3;
        assert_eq!(
            Geometry::checked(64, 0, 16, v3),
            Ok(Geometry::new(64, 0, v3))
        );
        assert_eq!(
            Geometry::checked(MAX_M0, 12, 16, v3).unwrap().buckets(),
            1 << 44
        );
        assert_eq!(
            Geometry::checked(MAX_M0, 8, 12, v3).unwrap().generation(),
            8
        );
        for m0 in [0, MIN_M0 - 2, MIN_M0 + 1, MAX_M0 + 2, u64::MAX] {
            assert_eq!(Geometry::checked(m0, 0, 16, v3), Err(M0(m0)));
        }
        for (g, bits) in [(13, 16), (9, 12), (64, 16), (u32::MAX, 16), (61, 200)] {
            assert_eq!(Geometry::checked(64, g, bits, v3), Err(Generation(g)));
        }
    }

    #[test]
    fn flaws_are_tags_outside_the_buckets_region_and_invalid_words() {
        let g = Geometry::new(64, 2, Addressing::V3);
        // Lanes: tags 0b01 and 0b101 (region 1), one empty lane.
        let w = 0b01 | (0b101 << 32);
        assert_eq!(g.flaws::<L16x4>(1, w), 0);
        assert_ne!(g.flaws::<L16x4>(0, w), 0);
        assert_ne!(g.flaws::<L16x4>(1, w | (0b10 << 16)), 0);
        assert_eq!(g.flaws::<L16x4>(3, 0), 0, "an empty bucket fits any region");
        assert_ne!(g.flaws::<L16x4>(1, w | (0xFFFF << 16)), 0, "reserved tag");
        let flat = Geometry::new(64, 0, Addressing::V3);
        assert_eq!(flat.flaws::<L12x5>(0, 0xFFE_FFE_FFE), 0);
        assert_ne!(flat.flaws::<L12x5>(0, 1 << 62), 0, "bits outside the lanes");
    }

    #[test]
    fn tags_cover_their_range_evenly() {
        // 2^w top-bit patterns onto 2^w - 2 tags: each tag is hit once or
        // twice, never 0 or the reserved all-ones value.
        for a in BOTH {
            let mut hits = vec![0u32; 1 << 12];
            for top in 0..(1u64 << 12) {
                hits[Geometry::tag_of::<L12x5>(top << 52, a) as usize] += 1;
            }
            assert_eq!(hits[0], 0);
            assert_eq!(hits[0xFFF], 0);
            assert!(hits[1..0xFFF].iter().all(|&n| (1..=2).contains(&n)));
        }
        // The extremes of `h` map to the first and the last tag.
        let v3 = Addressing::V3;
        assert_eq!(Geometry::tag_of::<L16x4>(0, v3), 1);
        assert_eq!(Geometry::tag_of::<L16x4>(u64::MAX, v3), L16x4::MAX_TAG);
    }

    #[test]
    fn the_documented_version_3_example_holds() {
        // docs/format.md, "Key hashing": computed there by hand.
        let g = Geometry::new(1000, 0, Addressing::V3);
        let at = g.locate::<L16x4>(0x9f7c_1c75_ae29_10ec);
        assert_eq!((at.tag, at.i1, at.i2), (40827, 680, 867));
    }

    #[test]
    fn alternate_buckets_spread_over_the_region() {
        // Alternates of one bucket must not cluster: over all tags they
        // should reach a large share of a 4096-bucket region.
        for a in BOTH {
            let g = Geometry::new(4096, 0, a);
            let mut seen = std::collections::HashSet::new();
            for tag in 1..=L16x4::MAX_TAG {
                seen.insert(g.alt(100, tag));
            }
            assert!(seen.len() > 2000, "{a:?}: only {} alternates", seen.len());
        }
    }
}
