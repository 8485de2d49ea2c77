//! The bucket word: `LANES` tags of `TAG_BITS` bits packed into one `u64`.
//!
//! Every function here is a pure, branch-free SWAR ("SIMD within a register")
//! operation on a plain `u64`; the atomics live in `table.rs`. A tag value of
//! 0 marks an empty lane; the all-ones tag is reserved (never produced by the
//! hash) so that a future "forwarded" marker word cannot collide with data.
//!
//! Lane `k` occupies bits `k*TAG_BITS .. (k+1)*TAG_BITS`. Unused high bits
//! (4 of them in the 12x5 layout) are always zero.

/// A bucket layout: how many tags of how many bits share one 64-bit word.
///
/// Implemented by zero-sized marker types so that every operation is
/// monomorphised with its masks as constants.
pub(crate) trait Layout: Copy + Send + Sync + 'static {
    /// Bits per tag (`w`).
    const TAG_BITS: u32;
    /// Tags per bucket word (`b`).
    const LANES: u32;

    /// Mask of one tag.
    const TAG_MASK: u64 = (1u64 << Self::TAG_BITS) - 1;
    /// The lowest bit of every lane.
    const LOW: u64 = repeat(1, Self::TAG_BITS, Self::LANES);
    /// The highest bit of every lane.
    const HIGH: u64 = Self::LOW << (Self::TAG_BITS - 1);
    /// The low `TAG_BITS - 1` bits of every lane.
    const BELOW_HIGH: u64 = Self::HIGH - Self::LOW;
    /// Largest tag value the hash may produce (all-ones is reserved).
    const MAX_TAG: u64 = Self::TAG_MASK - 1;
    /// Every bit of every lane; a bucket word never sets a bit outside it.
    const LANES_MASK: u64 = u64::MAX >> (64 - Self::TAG_BITS * Self::LANES);

    /// Whether `tag` is in some lane of `w1` or of `w2` (see [`in_either`]).
    #[inline(always)]
    fn in_either(w1: u64, w2: u64, tag: u64) -> bool {
        in_either_swar::<Self>(w1, w2, tag)
    }
}

/// `lanes` copies of `value`, one every `bits` bits.
const fn repeat(value: u64, bits: u32, lanes: u32) -> u64 {
    let mut out = 0u64;
    let mut lane = 0;
    while lane < lanes {
        out |= value << (lane * bits);
        lane += 1;
    }
    out
}

/// 16-bit tags, 4 per bucket: the default layout (FPR about 1.2e-4).
#[derive(Clone, Copy, Debug)]
pub(crate) struct L16x4;
impl Layout for L16x4 {
    const TAG_BITS: u32 = 16;
    const LANES: u32 = 4;

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn in_either(w1: u64, w2: u64, tag: u64) -> bool {
        in_either_16_sse2(w1, w2, tag)
    }
}

/// 12-bit tags, 5 per bucket: the compact layout (FPR about 2.4e-3).
#[derive(Clone, Copy, Debug)]
pub(crate) struct L12x5;
impl Layout for L12x5 {
    const TAG_BITS: u32 = 12;
    const LANES: u32 = 5;
}

/// 21-bit tags, 3 per bucket: the layout of the levels a filter adds once
/// its first table may not double again (`cuckoo/levels.rs`). Never chosen
/// by a user: five more tag bits buy eight more doublings at a fraction of
/// the false-positive budget. The top bit of the word is always zero.
#[derive(Clone, Copy, Debug)]
pub(crate) struct L21x3;
impl Layout for L21x3 {
    const TAG_BITS: u32 = 21;
    const LANES: u32 = 3;
}

// Every layout fits one word, and lanes are wide enough for the SWAR tricks.
const _: () = assert!(L16x4::TAG_BITS * L16x4::LANES <= 64);
const _: () = assert!(L12x5::TAG_BITS * L12x5::LANES <= 64);
const _: () = assert!(L21x3::TAG_BITS * L21x3::LANES <= 64);
const _: () = assert!(L12x5::TAG_BITS >= 2 && L16x4::TAG_BITS >= 2);

/// Bit mask with the high bit of every lane that is zero, exactly (no
/// borrow leaks between lanes, unlike the classic `(x - LOW) & !x & HIGH`).
#[inline(always)]
pub(crate) fn zero_lanes<L: Layout>(word: u64) -> u64 {
    // Per lane: the low bits plus all-ones-below-high carry into the high bit
    // iff any low bit is set; OR-ing the lane itself adds its high bit.
    let nonzero = ((word & L::BELOW_HIGH) + L::BELOW_HIGH) | word;
    !nonzero & L::HIGH
}

/// High-bit mask of the lanes holding exactly `tag`.
#[inline(always)]
fn matching_lanes<L: Layout>(word: u64, tag: u64) -> u64 {
    zero_lanes::<L>(word ^ (tag * L::LOW))
}

/// Shift of the lane whose high bit is the lowest bit set in `mask`.
#[inline(always)]
fn lowest_lane_shift<L: Layout>(mask: u64) -> u32 {
    mask.trailing_zeros() + 1 - L::TAG_BITS
}

/// Whether `tag` is in some lane of `word`.
#[inline(always)]
pub(crate) fn contains<L: Layout>(word: u64, tag: u64) -> bool {
    matching_lanes::<L>(word, tag) != 0
}

/// Whether `tag` is in some lane of `w1` or of `w2`, with one test for
/// both words (no short-circuit branch): the lookup's match.
#[inline(always)]
pub(crate) fn in_either<L: Layout>(w1: u64, w2: u64, tag: u64) -> bool {
    L::in_either(w1, w2, tag)
}

/// [`in_either`] for any layout, in SWAR. The classic zero-lane test
/// `(x - LOW) & !x & HIGH` misreports *which* lanes are zero (a borrow
/// out of a zero lane can flag the lane above it), but never *whether*
/// one is: without a zero lane no lane borrows, and the lowest zero lane
/// always sets its high bit. Whether is all a lookup asks, and the test
/// is two instructions per word shorter than [`zero_lanes`].
#[inline(always)]
fn in_either_swar<L: Layout>(w1: u64, w2: u64, tag: u64) -> bool {
    let tags = tag * L::LOW;
    let (x1, x2) = (w1 ^ tags, w2 ^ tags);
    ((x1.wrapping_sub(L::LOW) & !x1) | (x2.wrapping_sub(L::LOW) & !x2)) & L::HIGH != 0
}

/// [`in_either`] for 16-bit lanes in SSE2 (part of every x86-64): both
/// words side by side in one vector, compared with the tag in every lane
/// at once. Nine instructions against the SWAR test's sixteen.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn in_either_16_sse2(w1: u64, w2: u64, tag: u64) -> bool {
    use std::arch::x86_64::{_mm_cmpeq_epi16, _mm_movemask_epi8, _mm_set1_epi16, _mm_set_epi64x};
    // SAFETY: these intrinsics need only SSE2, which every x86-64 CPU has
    // (they are safe functions from Rust 1.87 on; `unsafe` keeps the
    // crate's minimum Rust version).
    #[allow(unused_unsafe)]
    unsafe {
        let words = _mm_set_epi64x(w2 as i64, w1 as i64);
        // `tag < 2^16`: the cast keeps every bit.
        let tags = _mm_set1_epi16(tag as u16 as i16);
        _mm_movemask_epi8(_mm_cmpeq_epi16(words, tags)) != 0
    }
}

/// How many lanes have their high bit set in `high`, a mask of lane high
/// bits (from `zero_lanes`): one multiply sums the lanes' bits into the top
/// lane. `count_ones` needs `popcnt`, which the baseline x86-64 target lacks
/// (it compiles to about a dozen SIMD instructions per word instead of 4).
#[inline(always)]
fn lanes_in<L: Layout>(high: u64) -> u32 {
    let ones = high >> (L::TAG_BITS - 1);
    // Lane `LANES - 1` of the product is the sum of all lanes' bits (at most
    // `LANES`, which fits a lane); higher products wrap out or land above it.
    ((ones.wrapping_mul(L::LOW) >> (L::TAG_BITS * (L::LANES - 1))) & L::TAG_MASK) as u32
}

/// How many lanes of `word` hold `tag`.
#[inline(always)]
pub(crate) fn count<L: Layout>(word: u64, tag: u64) -> u32 {
    lanes_in::<L>(matching_lanes::<L>(word, tag))
}

/// Whether one more copy of `tag` would fill the pair of bucket words
/// `a` and `b` with nothing but `tag` (or it already does). Such a
/// pair is full for good: its copies cannot leave it, at any generation,
/// and a key whose two buckets both sit in such pairs doubles the table at
/// any load, so the last lane stays for other keys (`TooManyCopies` one
/// copy early). Read from words seen without a lock: two racing inserts
/// may still fill a pair, which costs room, never a key.
#[cold]
#[inline(never)]
pub(crate) fn would_lock<L: Layout>(a: u64, b: u64, tag: u64) -> bool {
    count::<L>(a, tag) + count::<L>(b, tag) >= 2 * L::LANES - 1
}

/// Whether one more `tag` in `word`'s last empty lane would leave it
/// nothing but `tag`: a plain insert's fast path leaves that lane to the
/// slow path, which allows it unless the pair's other bucket is full of
/// `tag` too ([`would_lock`]). Word-local, so the fast path carries no
/// second word. Branch-free: whether a word's last lane is being taken is
/// a coin toss at high load, and a branch on it cost a fill to 95% about
/// 20% of its time in mispredictions (1M keys, 2026-12-06).
#[inline(always)]
pub(crate) fn fills_with<L: Layout>(word: u64, tag: u64) -> bool {
    let empty = zero_lanes::<L>(word);
    // Zero iff every lane is empty or `tag` and at most one is empty (a
    // full word of `tag` counts too: it takes no copy anyway).
    let not_last_of_tag =
        ((matching_lanes::<L>(word, tag) | empty) ^ L::HIGH) | (empty & empty.wrapping_sub(1));
    not_last_of_tag == 0
}

/// Whether `word` has an empty lane.
#[inline(always)]
pub(crate) fn has_empty<L: Layout>(word: u64) -> bool {
    zero_lanes::<L>(word) != 0
}

/// Number of empty lanes.
#[inline(always)]
pub(crate) fn empty<L: Layout>(word: u64) -> u32 {
    lanes_in::<L>(zero_lanes::<L>(word))
}

/// Number of occupied lanes.
#[inline(always)]
pub(crate) fn occupied<L: Layout>(word: u64) -> u32 {
    L::LANES - empty::<L>(word)
}

/// `word` with `tag` written into its lowest empty lane, or `None` if full.
#[inline(always)]
pub(crate) fn with_tag<L: Layout>(word: u64, tag: u64) -> Option<u64> {
    let empty = zero_lanes::<L>(word);
    if empty == 0 {
        return None;
    }
    Some(word | (tag << lowest_lane_shift::<L>(empty)))
}

/// `word` with one copy of `tag` (its lowest lane) cleared, or `None` if
/// `tag` is absent.
#[inline(always)]
pub(crate) fn without_tag<L: Layout>(word: u64, tag: u64) -> Option<u64> {
    let found = matching_lanes::<L>(word, tag);
    if found == 0 {
        return None;
    }
    Some(word & !(L::TAG_MASK << lowest_lane_shift::<L>(found)))
}

/// Whether `word` is a bucket this layout can produce: no lane holds the
/// reserved all-ones tag (which also rules out the migration's forwarded
/// marker) and no bit outside the lanes is set. Loaded data is checked
/// with [`flaws`]; the tests state the rule through this.
#[cfg(test)]
pub(crate) fn is_valid<L: Layout>(word: u64) -> bool {
    invalid_bits::<L>(word) == 0
}

/// Non-zero exactly when `word` is not [`is_valid`]: the high bits of its
/// all-ones lanes and its bits outside the lanes. Branch-free, for
/// checking a whole table at memory speed.
#[inline(always)]
pub(crate) fn invalid_bits<L: Layout>(word: u64) -> u64 {
    zero_lanes::<L>(!word) | (word & !L::LANES_MASK)
}

/// High-bit mask of the occupied lanes of `word` whose tag's bits under
/// `mask` are not `value` (both below one lane). Branch-free, so a whole
/// table is checked at memory speed.
#[inline(always)]
pub(crate) fn lanes_not_matching<L: Layout>(word: u64, mask: u64, value: u64) -> u64 {
    let occupied = !zero_lanes::<L>(word) & L::HIGH;
    let differ = !zero_lanes::<L>((word & (mask * L::LOW)) ^ (value * L::LOW)) & L::HIGH;
    occupied & differ
}

/// Non-zero exactly when `word`, stored in a bucket of region `region`,
/// is not one a filter writes there: [`invalid_bits`], or a tag whose
/// bits under `region_mask` are not `region` (`Geometry::holds`). The one
/// check loaded words pass, whether streamed from a file or in a table.
#[inline(always)]
pub(crate) fn flaws<L: Layout>(word: u64, region_mask: u64, region: u64) -> u64 {
    invalid_bits::<L>(word) | lanes_not_matching::<L>(word, region_mask, region)
}

/// The tag in lane `lane` (0 if empty).
#[inline(always)]
pub(crate) fn lane<L: Layout>(word: u64, lane: u32) -> u64 {
    (word >> (lane * L::TAG_BITS)) & L::TAG_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subset of lane high bits, for both layouts: the multiply sum
    /// equals the bit count.
    #[test]
    fn lanes_in_counts_every_mask() {
        fn check<L: Layout>() {
            for subset in 0u64..1 << L::LANES {
                let high = (0..L::LANES)
                    .filter(|k| subset >> k & 1 == 1)
                    .fold(0, |m, k| m | 1 << ((k + 1) * L::TAG_BITS - 1));
                assert_eq!(lanes_in::<L>(high), high.count_ones(), "{high:#x}");
            }
        }
        check::<L16x4>();
        check::<L12x5>();
        check::<L21x3>();
    }

    /// Build a word from explicit lane values.
    fn word<L: Layout>(lanes: &[u64]) -> u64 {
        assert_eq!(lanes.len(), L::LANES as usize);
        lanes
            .iter()
            .enumerate()
            .fold(0, |w, (k, &t)| w | (t << (k as u32 * L::TAG_BITS)))
    }

    /// Reference implementations, lane by lane.
    fn lanes_of<L: Layout>(w: u64) -> Vec<u64> {
        (0..L::LANES).map(|k| lane::<L>(w, k)).collect()
    }

    /// Edge tag values: the smallest and largest legal tags, and values with
    /// single high or low bits that stress carries between lanes.
    fn edge_tags<L: Layout>() -> Vec<u64> {
        let mut tags = vec![1, 2, 3, L::MAX_TAG, L::MAX_TAG - 1, 1 << (L::TAG_BITS - 1)];
        tags.push((1 << (L::TAG_BITS - 1)) + 1);
        tags.push((1 << (L::TAG_BITS - 1)) - 1);
        tags.push(0x5555 & L::TAG_MASK);
        tags.push(0xAAAA & L::TAG_MASK);
        tags
    }

    /// Every assignment of {empty, a few edge tags} to every lane, checked
    /// against the lane-by-lane reference for every query tag.
    fn exhaustive<L: Layout>() {
        let tags = edge_tags::<L>();
        let mut palette = vec![0u64];
        palette.extend_from_slice(&tags[..5]);
        let n = palette.len();
        let combos = n.pow(L::LANES);
        // The word of the previous combination: the second word for
        // `in_either`.
        let mut prev = 0u64;
        for c in 0..combos {
            let mut rest = c;
            let lanes: Vec<u64> = (0..L::LANES)
                .map(|_| {
                    let v = palette[rest % n];
                    rest /= n;
                    v
                })
                .collect();
            let w = word::<L>(&lanes);
            assert_eq!(lanes_of::<L>(w), lanes);
            let empties = lanes.iter().filter(|&&t| t == 0).count() as u32;
            assert_eq!(has_empty::<L>(w), empties > 0, "{lanes:?}");
            assert_eq!(occupied::<L>(w), L::LANES - empties, "{lanes:?}");
            assert_eq!(empty::<L>(w), empties, "{lanes:?}");
            for &q in &tags {
                let expect = lanes.iter().filter(|&&t| t == q).count() as u32;
                assert_eq!(count::<L>(w, q), expect, "count {q:#x} in {lanes:?}");
                assert_eq!(contains::<L>(w, q), expect > 0);
                let in_prev = lanes_of::<L>(prev).contains(&q);
                assert_eq!(in_either::<L>(w, prev, q), expect > 0 || in_prev);
                assert_eq!(in_either::<L>(prev, w, q), expect > 0 || in_prev);
                // The portable test too, where a layout overrides it.
                assert_eq!(in_either_swar::<L>(w, prev, q), expect > 0 || in_prev);
                // Insert into the lowest empty lane, nothing else changes.
                match with_tag::<L>(w, q) {
                    None => assert_eq!(empties, 0),
                    Some(w2) => {
                        let first = lanes.iter().position(|&t| t == 0).unwrap();
                        let mut want = lanes.clone();
                        want[first] = q;
                        assert_eq!(lanes_of::<L>(w2), want);
                    }
                }
                // Remove the lowest matching lane, nothing else changes.
                match without_tag::<L>(w, q) {
                    None => assert_eq!(expect, 0),
                    Some(w2) => {
                        let first = lanes.iter().position(|&t| t == q).unwrap();
                        let mut want = lanes.clone();
                        want[first] = 0;
                        assert_eq!(lanes_of::<L>(w2), want);
                    }
                }
            }
            prev = w;
        }
    }

    #[test]
    fn lanes_16x4_exhaustive_over_edge_values() {
        exhaustive::<L16x4>();
    }

    #[test]
    fn lanes_12x5_exhaustive_over_edge_values() {
        exhaustive::<L12x5>();
    }

    #[test]
    fn lanes_21x3_exhaustive_over_edge_values() {
        exhaustive::<L21x3>();
    }

    /// Every single tag value in every lane, alone and next to full lanes.
    fn every_tag_every_lane<L: Layout>() {
        for k in 0..L::LANES {
            for t in 1..=L::MAX_TAG {
                let alone = t << (k * L::TAG_BITS);
                assert!(contains::<L>(alone, t));
                assert_eq!(count::<L>(alone, t), 1);
                assert_eq!(occupied::<L>(alone), 1);
                assert_eq!(without_tag::<L>(alone, t), Some(0));
                // The neighbours hold the reserved all-ones pattern, the
                // value most likely to leak a carry into lane k.
                let mut crowded = 0;
                for j in 0..L::LANES {
                    if j != k {
                        crowded |= L::TAG_MASK << (j * L::TAG_BITS);
                    }
                }
                assert!(!contains::<L>(crowded, t));
                assert_eq!(with_tag::<L>(crowded, t), Some(crowded | alone));
                assert!(with_tag::<L>(crowded | alone, t).is_none());
            }
        }
    }

    #[test]
    fn every_tag_in_every_lane_16x4() {
        every_tag_every_lane::<L16x4>();
    }

    #[test]
    fn every_tag_in_every_lane_12x5() {
        every_tag_every_lane::<L12x5>();
    }

    #[test]
    fn every_tag_in_every_lane_21x3() {
        every_tag_every_lane::<L21x3>();
    }

    fn validity<L: Layout>() {
        assert!(is_valid::<L>(0));
        for t in edge_tags::<L>() {
            for lane in 0..L::LANES {
                let w = t << (lane * L::TAG_BITS);
                assert!(is_valid::<L>(w), "tag {t:#x} lane {lane}");
                let reserved = L::TAG_MASK << (lane * L::TAG_BITS);
                assert!(!is_valid::<L>(w | reserved), "reserved tag in lane {lane}");
            }
        }
        assert!(
            !is_valid::<L>(u64::MAX),
            "the forwarded marker is not a bucket"
        );
        if L::TAG_BITS * L::LANES < 64 {
            assert!(!is_valid::<L>(1 << 63), "bits outside the lanes");
        }
    }

    #[test]
    fn only_producible_words_are_valid() {
        validity::<L16x4>();
        validity::<L12x5>();
        validity::<L21x3>();
    }

    #[test]
    fn masks_are_what_they_say() {
        assert_eq!(L16x4::LOW, 0x0001_0001_0001_0001);
        assert_eq!(L16x4::HIGH, 0x8000_8000_8000_8000);
        assert_eq!(L12x5::LOW, 0x0001_0010_0100_1001);
        assert_eq!(L12x5::HIGH.count_ones(), 5);
        assert_eq!(L12x5::HIGH >> 60, 0, "12x5 leaves the top 4 bits unused");
        assert_eq!(L16x4::MAX_TAG, 0xFFFE);
        assert_eq!(L12x5::MAX_TAG, 0xFFE);
        assert_eq!(L16x4::LANES_MASK, u64::MAX);
        assert_eq!(L12x5::LANES_MASK, (1 << 60) - 1);
    }
}
