//! Loom models of displacement: `contains` racing moves of the tag it looks
//! for (model 1), and a displacement path that goes stale (model 4).
#![cfg(loom)]

mod common;

use common::models::{contains_vs_displacement, stale_path, Moves, Spawned};
use koel::loom_support::Canary;

/// Model 1: no false negative while the key's tag moves once (3 -> 0).
#[test]
fn contains_during_one_move() {
    for (name, spawned) in [
        ("reader spawned", Spawned::B),
        ("writer spawned", Spawned::A),
    ] {
        contains_vs_displacement(
            &format!("contains_during_one_move ({name})"),
            Canary::None,
            Moves::One,
            spawned,
        );
    }
}

/// Model 1, bounced: no false negative while the key's tag moves 3 -> 0 ->
/// 3 -> 0 during one `contains`. Three moves are what it takes to defeat a
/// reader that re-reads once without checking the stripe (see the
/// `UnvalidatedNegative` canary).
#[test]
fn contains_during_three_moves() {
    for (name, spawned) in [
        ("reader spawned", Spawned::B),
        ("writer spawned", Spawned::A),
    ] {
        contains_vs_displacement(
            &format!("contains_during_three_moves ({name})"),
            Canary::None,
            Moves::Three,
            spawned,
        );
    }
}

/// Model 4: a racing insert takes the destination lane of a planned hop;
/// the path is aborted and searched again, nothing is lost, `len` is exact.
#[test]
fn stale_path_loses_nothing() {
    let mut stale = false;
    for (name, spawned) in [
        ("displacer spawned", Spawned::A),
        ("racer spawned", Spawned::B),
    ] {
        let reached = stale_path(
            &format!("stale_path_loses_nothing ({name})"),
            Canary::None,
            spawned,
        );
        eprintln!(
            "stale_path_loses_nothing ({name}): stale path {}",
            reached.stale()
        );
        stale |= reached.stale();
    }
    assert!(
        stale,
        "no execution aborted a stale path: the model does not test the abort"
    );
}
