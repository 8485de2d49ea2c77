//! SplitMix64 (Steele, Lea, Flood 2014): the one key generator of koel's
//! tests, benches, examples, lab, loom models and fuzz targets.
//!
//! Every crate of the workspace that is not published includes this file
//! with `#[path = ".../tests/common/splitmix.rs"] mod splitmix;`: a file,
//! not a `#[doc(hidden)]` module of the library (it is no part of koel's
//! API) nor a dev crate of its own (one function does not pay for a
//! workspace member). The published CLI keeps its own `keys::mix64`, since
//! a published crate cannot include files from outside its package.
#![allow(dead_code)]

/// The golden-ratio increment of the SplitMix64 state.
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a bijective, well-mixed function of `z`.
pub fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One SplitMix64 step from state `z`: the output after advancing `z` once.
pub fn mix64(z: u64) -> u64 {
    finalize(z.wrapping_add(GAMMA))
}

/// The stream seeded with `seed`, at index `i`: `finalize(seed + i * GAMMA)`.
/// A bijection of `i`, so disjoint index ranges give disjoint keys.
pub fn at(seed: u64, i: u64) -> u64 {
    finalize(seed.wrapping_add(i.wrapping_mul(GAMMA)))
}

/// SplitMix64 as an iterator: a fast, seedable stream of well-mixed keys
/// (the first one is `mix64(state)`).
pub struct Keys(pub u64);

impl Iterator for Keys {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        self.0 = self.0.wrapping_add(GAMMA);
        Some(finalize(self.0))
    }
}
