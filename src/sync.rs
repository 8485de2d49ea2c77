//! The one place koel takes its atomics, fences, mutexes and spin hints from.
//!
//! Under `cfg(loom)` everything comes from `loom`; otherwise from `std`. No other module of the library imports
//! `std::sync::atomic`. Clippy's `disallowed-types` and `disallowed-methods`
//! (clippy.toml) enforce it in the loom build, where a std atomic is a
//! different type from the facade's: the lint is on there (lib.rs) and
//! `.ci/run` lints that build. Two exceptions allow it: this module, and
//! `raw::counters`, whose statistics counters below stay std under loom.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    compiler_fence, fence, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
/// Under loom writers always fence (`raw::writers`): never called.
#[cfg(loom)]
pub(crate) fn compiler_fence(_: Ordering) {}
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

/// A flag no protocol reads (whether a table's pages were released).
#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) use std::sync::atomic::AtomicBool as StatBool;
/// Statistics counters that no protocol reads: always `std` atomics, so loom
/// does not spend its interleavings on them.
#[allow(clippy::disallowed_types)]
pub(crate) use std::sync::atomic::{AtomicI64 as StatI64, AtomicU64 as StatU64};

/// Backs off inside a retry loop: a CPU spin hint at first, then yielding
/// the time slice so an oversubscribed lock holder can run. Under loom every
/// call yields, so the model checker can schedule the thread we wait on.
#[derive(Default)]
pub(crate) struct Backoff {
    step: u32,
}

impl Backoff {
    /// Spins below this many steps, yields at and above it.
    #[cfg(not(loom))]
    const YIELD_AFTER: u32 = 6;

    #[inline]
    pub(crate) fn snooze(&mut self) {
        #[cfg(loom)]
        {
            self.step += 1;
            loom::thread::yield_now();
        }
        #[cfg(not(loom))]
        {
            if self.step < Self::YIELD_AFTER {
                for _ in 0..(1u32 << self.step) {
                    std::hint::spin_loop();
                }
                self.step += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}
