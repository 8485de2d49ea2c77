//! Loom model 2: `remove` racing a displacement of the same entry.
#![cfg(loom)]

mod common;

use common::models::{remove_vs_displacement, Spawned};
use koel::loom_support::Canary;

/// Exactly one copy is removed and it does not come back; everything else
/// stays; `len` is exact. Some execution must really displace the entry and
/// some must invalidate the displacer's planned hop, or the model tests no
/// race.
#[test]
fn remove_during_displacement() {
    let (mut displaced, mut stale) = (false, false);
    for (name, spawned) in [
        ("displacer spawned", Spawned::A),
        ("remover spawned", Spawned::B),
    ] {
        let reached = remove_vs_displacement(
            &format!("remove_during_displacement ({name})"),
            Canary::None,
            spawned,
        );
        eprintln!(
            "remove_during_displacement ({name}): displaced {}, stale path {}",
            reached.displaced(),
            reached.stale()
        );
        displaced |= reached.displaced();
        stale |= reached.stale();
    }
    assert!(displaced, "no execution displaced the removed key");
    assert!(
        stale,
        "no execution saw the remove invalidate a planned hop"
    );
}
