//! Pause points for unit tests: a test can stop a writer inside its
//! critical section (between two of its steps) for as long as it likes, and
//! show which operations of other threads still complete meanwhile.
//!
//! Outside `cfg(test)` (and under loom) [`here`] is an empty inline
//! function: the engine pays nothing for its pause points.

/// Where a writer can be stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Point {
    /// A displacement hop has taken its pair's stripe and copied nothing.
    HopHeld,
    /// A displacement hop has copied its tag into the destination and has
    /// not yet cleared the source.
    HopCopied,
    /// `remove` holds its pair's stripe and has taken nothing yet.
    RemoveHeld,
    /// An insert into a level of regions (`regions.rs`) has loaded its
    /// slot's entry and put nothing yet.
    RegionInsertLoaded,
    /// An insert into a level of regions has put its tag and not yet
    /// re-loaded the step counter.
    RegionInsertPut,
    /// A hop between two regions (`regions.rs`) has copied its tag into
    /// the new region and not yet cleared it from the old one.
    RegionHopCopied,
    /// A sweep chunk's sweeper (`regions.rs`) has read a bucket and its
    /// tag's entry, and is about to hop the tag (holding no stripe).
    SweepHopping,
    /// A sweep chunk's sweeper has found its chunk not done and is about
    /// to take the hop's source stripe.
    SweepChecked,
    /// An insert's eviction (`evict_moving`) has found its step not over
    /// and is about to take the hop's source stripe.
    EvictChecked,
    /// A sweep's hop between regions has copied its tag, seen a later
    /// step begun, and not yet taken its copy back.
    SweepUndoing,
    /// A step's end (`regions.rs`) is about to join a split slot's entry.
    EndStepJoining,
    /// A step's end has marked a split slot's entry joining and not yet
    /// checked the slot's failure mark.
    EndStepJoined,
    /// A stale insert into a level of regions found no room for its own
    /// hop and no way to keep its slot split, and is about to take its
    /// copy back.
    FollowRefusing,
    /// A step's claimant doubling a level's slot map (`SlotMaps::double`)
    /// has frozen and copied every entry and not yet published the new
    /// map.
    MapDoubled,
    /// A migration chunk's owner has stored an old bucket's successor
    /// halves and not yet forwarded the old bucket.
    ForwardCopied,
}

/// What a pause point reports: the two buckets it works on (`src` and
/// `dst` of a hop, the key's pair for `remove`, the old bucket and its
/// low successor bucket for a forward, the pair of a hop between regions)
/// and the tag (0 for a forward).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct At {
    pub(crate) a: usize,
    pub(crate) b: usize,
    pub(crate) tag: u64,
}

impl From<super::geometry::Located> for At {
    /// A key's pair and tag, as a hop between regions reports them.
    fn from(at: super::geometry::Located) -> At {
        At {
            a: at.i1,
            b: at.i2,
            tag: at.tag,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod armed {
    use super::{At, Point};
    use std::cell::RefCell;

    type Hook = Box<dyn FnOnce(At)>;

    std::thread_local! {
        /// The pause armed on this thread, if any: one point, one call.
        static ARMED: RefCell<Option<(Point, Hook)>> = const { RefCell::new(None) };
    }

    /// Arms `hook` to run the first time this thread reaches `point`.
    pub(crate) fn arm(point: Point, hook: impl FnOnce(At) + 'static) {
        ARMED.with(|a| *a.borrow_mut() = Some((point, Box::new(hook))));
    }

    /// Runs the hook armed for `point` on this thread, once.
    pub(crate) fn here(point: Point, at: At) {
        let hook = ARMED.with(|a| {
            let mut a = a.borrow_mut();
            match a.take() {
                Some((p, hook)) if p == point => Some(hook),
                other => {
                    *a = other;
                    None
                }
            }
        });
        if let Some(hook) = hook {
            hook(at);
        }
    }
}

#[cfg(all(test, not(loom)))]
pub(crate) use armed::{arm, here};

/// What the tests of stopped threads share (`cuckoo/progress_tests.rs`,
/// `raw/regions/stopped_tests.rs`): a thread held at a pause point, and a
/// call that must not wait for it.
#[cfg(all(test, not(loom)))]
pub(crate) mod stopped {
    use super::{arm, At, Point};
    use std::sync::mpsc::{channel, Sender};
    use std::thread;
    use std::time::Duration;

    /// How long a call that must not wait for the stopped thread may take
    /// before the test calls it stuck (no speed is measured).
    pub(crate) const MUST_FINISH: Duration = Duration::from_secs(10);

    /// A thread stopped at a pause point until [`thaw`](Frozen::thaw)ed.
    pub(crate) struct Frozen {
        /// What the pause point reported.
        pub(crate) at: At,
        release: Sender<()>,
        thread: thread::JoinHandle<()>,
    }

    impl Frozen {
        /// Runs `work` on a new thread that stops the first time it
        /// reaches `point`; returns once it is stopped there.
        pub(crate) fn at(point: Point, work: impl FnOnce() + Send + 'static) -> Frozen {
            let (at_tx, at_rx) = channel();
            let (release, release_rx) = channel::<()>();
            let thread = thread::spawn(move || {
                arm(point, move |at| {
                    at_tx.send(at).unwrap();
                    // Stopped until thawed (or until the test gave up and
                    // dropped its sender).
                    let _ = release_rx.recv_timeout(6 * MUST_FINISH);
                });
                work();
            });
            let at = at_rx
                .recv_timeout(MUST_FINISH)
                .unwrap_or_else(|_| panic!("the thread never reached {point:?}"));
            Frozen {
                at,
                release,
                thread,
            }
        }

        /// Lets the thread go on, and waits for it to end.
        pub(crate) fn thaw(self) {
            let _ = self.release.send(());
            self.thread.join().unwrap();
        }
    }

    /// Runs `work` on a new thread; `Err` if it has not returned within
    /// [`MUST_FINISH`] (the thread is then left to finish when it can).
    pub(crate) fn finishes<T: Send + 'static>(
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ()> {
        let (tx, rx) = channel();
        thread::spawn(move || {
            let _ = tx.send(work());
        });
        rx.recv_timeout(MUST_FINISH).map_err(|_| ())
    }
}

/// No pause points outside unit tests.
#[cfg(not(all(test, not(loom))))]
#[inline(always)]
pub(crate) fn here(_point: Point, _at: At) {}
