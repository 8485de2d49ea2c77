//! How many blocks and bits per key a filter needs for `n` items at a
//! target false-positive rate `p`: the blocked layout's own FPR formula.
//!
//! The classic `(1 - e^{-kn/m})^k` assumes every key's bits are spread over
//! the whole array. In a blocked filter they are not: the `n` keys fall
//! into blocks unevenly (block loads are Poisson with mean
//! `λ = n / blocks`), and an over-full block answers "present" far more
//! often than an average one saves. Sized with the classic formula a
//! blocked filter misses its target (by 1.2x, 1.7x and 3.1x at 1e-2, 1e-3
//! and 1e-4). Here the rate is computed exactly for koel's layout:
//!
//! ```text
//! FPR(λ, R) = Σ_x Poisson(x; λ) · E[(S_{R·x} / 64)^R]^8
//! ```
//!
//! A block holding `x` keys has had `R·x` uniformly random bits thrown at
//! each of its 8 words; `S_t` is the number of distinct bits set after `t`
//! throws into 64 (its distribution is a short dynamic program), and an
//! absent key is a false positive when all `R` bits it probes in each word
//! are set. The words are independent given `x`. The result is exact for
//! an ideal hash; the tests measure it within a few percent.
//!
//! The builder picks `R` (1..=4, i.e. `k` = 8, 16, 24 or 32 bits per key)
//! and the largest `λ` that meets `p`, and takes the `R` that needs the
//! fewest blocks, unless fewer rounds need less than 5% more (each round
//! costs work on every call). `k` is a multiple of 8 because every key sets bits in
//! all 8 words; other `k` leave some words with fewer bits than others,
//! which costs memory at every rate (k = 8 is best down to about 1e-4).

use super::block::MAX_ROUNDS;
use super::storage::BLOCK_BYTES;
use crate::error::BuildError;
use std::sync::OnceLock;

/// Bits per block.
const BLOCK_BITS: f64 = (BLOCK_BYTES * 8) as f64;
/// Smallest false-positive rate the builder accepts. Memory per item grows
/// fast at low rates (about 81 bits at 1e-9, 1200 at 1e-20: a block must
/// then hold about one key); below this an exact set is the better tool.
pub(crate) const MIN_FALSE_POSITIVE_RATE: f64 = 1e-20;
/// Most items per block the search considers (1 bit per item).
const MAX_LOAD: f64 = BLOCK_BITS;
/// Fewest items per block the search considers (4096 bits per item).
const MIN_LOAD: f64 = BLOCK_BITS / 4096.0;
/// Memory a further round must save to be chosen: at 1e-4 two rounds
/// (k = 16) need 3% less memory than one (k = 8) but twice the bit
/// positions per key; one round wins. At 1e-5 two rounds save 14%.
const ROUND_SAVING: f64 = 0.05;
/// Block loads beyond `λ + 12√λ + 30` have negligible Poisson mass.
fn max_block_load(load: f64) -> usize {
    (load + 12.0 * load.sqrt() + 30.0).ceil() as usize
}

/// `moments()[t][r - 1] = E[(S_t / 64)^r]`: the chance that `r` random
/// probes of a 64-bit word all hit set bits, after `t` random bits were
/// thrown at it. Computed once, for every `t` the search can need.
fn moments() -> &'static [[f64; MAX_ROUNDS as usize]] {
    static MOMENTS: OnceLock<Vec<[f64; MAX_ROUNDS as usize]>> = OnceLock::new();
    MOMENTS.get_or_init(|| {
        let throws = MAX_ROUNDS as usize * max_block_load(MAX_LOAD);
        // dist[s] = P(S_t = s); one throw sets a new bit with chance (64-s)/64.
        let mut dist = [0.0f64; 65];
        dist[0] = 1.0;
        let mut out = Vec::with_capacity(throws + 1);
        for _ in 0..=throws {
            let mut row = [0.0; MAX_ROUNDS as usize];
            for (s, &ps) in dist.iter().enumerate() {
                let f = s as f64 / 64.0;
                let mut pow = 1.0;
                for m in row.iter_mut() {
                    pow *= f;
                    *m += ps * pow;
                }
            }
            out.push(row);
            let mut next = [0.0f64; 65];
            for s in 0..=64 {
                next[s] += dist[s] * s as f64 / 64.0;
                if s < 64 {
                    next[s + 1] += dist[s] * (64 - s) as f64 / 64.0;
                }
            }
            dist = next;
        }
        out
    })
}

/// Expected false-positive rate of a filter with `load` items per block on
/// average and `rounds` bits per word per key.
pub(crate) fn model_fpr(load: f64, rounds: u32) -> f64 {
    debug_assert!((1..=MAX_ROUNDS).contains(&rounds));
    if load <= 0.0 {
        return 0.0;
    }
    let load = load.min(MAX_LOAD);
    let m = moments();
    let r = rounds as usize;
    // Poisson pmf by recurrence: e^{-512} is still a normal f64.
    let mut pmf = (-load).exp();
    let mut sum = 0.0;
    for x in 0..=max_block_load(load) {
        let per_word = m[(r * x).min(m.len() - 1)][r - 1];
        sum += pmf * per_word.powi(8);
        pmf *= load / (x + 1) as f64;
    }
    sum.min(1.0)
}

/// A filter's shape: how many blocks, how many bits per word per key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Plan {
    pub(crate) blocks: u64,
    pub(crate) rounds: u32,
    /// `model_fpr` at the requested capacity (at most the target).
    pub(crate) expected_fpr: f64,
}

impl Plan {
    /// Heap bytes of the filter's blocks.
    pub(crate) fn bytes(&self) -> u64 {
        self.blocks * BLOCK_BYTES as u64
    }
}

/// Whether `p` is a false-positive rate the builder can size for.
pub(crate) fn valid_rate(p: f64) -> bool {
    (MIN_FALSE_POSITIVE_RATE..1.0).contains(&p)
}

/// The largest block load that meets `p` with `rounds`, if any does.
fn max_load_for(p: f64, rounds: u32) -> Option<f64> {
    if model_fpr(MIN_LOAD, rounds) > p {
        return None;
    }
    if model_fpr(MAX_LOAD, rounds) <= p {
        return Some(MAX_LOAD);
    }
    // The rate grows with the load: bisect on a log scale.
    let (mut lo, mut hi) = (MIN_LOAD.ln(), MAX_LOAD.ln());
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if model_fpr(mid.exp(), rounds) <= p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo.exp())
}

/// The smallest filter for `capacity` items at rate `p`.
pub(crate) fn plan(capacity: usize, p: f64) -> Result<Plan, BuildError> {
    if capacity == 0 {
        return Err(BuildError::ZeroCapacity);
    }
    if !valid_rate(p) {
        return Err(BuildError::InvalidFalsePositiveRate(p));
    }
    let n = capacity as f64;
    // Blocks are addressed through `usize` byte offsets.
    let max_blocks = (isize::MAX as usize / BLOCK_BYTES) as f64;
    let mut best: Option<(f64, u32, f64)> = None;
    for rounds in 1..=MAX_ROUNDS {
        let Some(load) = max_load_for(p, rounds) else {
            continue;
        };
        let blocks = (n / load).ceil().max(1.0);
        // More rounds cost a mix and eight bit positions per key on every
        // call: take them only for a real memory saving.
        if best.is_none_or(|(b, _, _)| blocks < b * (1.0 - ROUND_SAVING)) {
            best = Some((blocks, rounds, load));
        }
    }
    // Every rate in the valid range is reachable (1e-20 needs ~170 bits per
    // item); keep the error path anyway rather than trusting that.
    let (blocks, rounds, load) = best.ok_or(BuildError::InvalidFalsePositiveRate(p))?;
    if blocks > max_blocks {
        return Err(BuildError::CapacityTooLarge {
            requested: capacity,
            max: (max_blocks * load) as usize,
        });
    }
    let blocks = blocks as u64;
    Ok(Plan {
        blocks,
        rounds,
        expected_fpr: model_fpr(n / blocks as f64, rounds),
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The classic formula with the same `k` and bits per item.
    fn classic(bits_per_item: f64, k: f64) -> f64 {
        (1.0 - (-k / bits_per_item).exp()).powf(k)
    }

    #[test]
    fn model_is_above_the_classic_formula_and_grows_with_load() {
        let mut last = 0.0;
        for load in [4.0, 16.0, 32.0, 51.2, 64.0, 128.0] {
            let f = model_fpr(load, 1);
            assert!(f > last, "FPR must grow with load");
            last = f;
            let c = classic(BLOCK_BITS / load, 8.0);
            assert!(f >= c, "blocked FPR {f} below classic {c} at load {load}");
        }
    }

    #[test]
    fn plans_meet_the_rate_within_bounded_memory() {
        for p in [1e-2, 1e-3, 1e-4, 1e-6, 1e-9, MIN_FALSE_POSITIVE_RATE] {
            let plan = plan(1_000_000, p).unwrap();
            assert!(plan.expected_fpr <= p, "{plan:?} misses {p}");
            let bits = plan.bytes() as f64 * 8.0 / 1e6;
            let classic = 1.44 * (1.0 / p).log2();
            // One cache line per key costs more the lower the rate: within
            // 1.5x of the unblocked optimum down to 1e-4 (the issue's
            // bound), about 2x at 1e-9.
            let bound = match p {
                p if p >= 1e-4 => 1.5 * classic,
                p if p >= 1e-9 => 2.5 * classic,
                // Near the floor a block must hold about one key.
                _ => 4096.0,
            };
            assert!(bits < bound, "p={p}: {bits} bits/item, classic {classic}");
        }
    }

    #[test]
    fn known_optima() {
        // k = 8 is chosen down to about 1e-4 (at 1e-4, k = 16 would save
        // only 3%); below it, k = 16.
        assert_eq!(plan(1 << 20, 1e-2).unwrap().rounds, 1);
        assert_eq!(plan(1 << 20, 1e-3).unwrap().rounds, 1);
        assert_eq!(plan(1 << 20, 1e-4).unwrap().rounds, 1);
        assert_eq!(plan(1 << 20, 1e-6).unwrap().rounds, 2);
    }

    #[test]
    fn bad_requests_are_errors() {
        for p in [0.0, -1.0, 1.0, 2.0, f64::NAN, f64::INFINITY, 1e-30] {
            assert!(matches!(
                plan(10, p),
                Err(BuildError::InvalidFalsePositiveRate(_))
            ));
        }
        assert_eq!(plan(0, 0.01), Err(BuildError::ZeroCapacity));
        assert!(matches!(
            plan(usize::MAX, 1e-9),
            Err(BuildError::CapacityTooLarge { .. })
        ));
        assert_eq!(plan(1, 0.5).unwrap().blocks, 1);
    }
}
