//! Loom models of displacement: `contains` and `count` racing moves of the
//! tag they look for (model 1), and a displacement path that goes stale
//! (model 4).
#![cfg(loom)]

mod common;

use common::models::{
    contains_vs_displacement, contains_vs_displacement_bounded, count_vs_displacement, stale_path,
    Moves, Spawned,
};
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

/// Model 1 at a preemption bound of 3, reader spawned: reaches a reader that
/// reads the stripe while the hop holds it and whose two bucket loads
/// straddle the hop's copy and clear (see `contains_vs_displacement_bounded`);
/// the step between them makes it read again.
#[test]
fn contains_during_one_move_three_preemptions() {
    contains_vs_displacement_bounded(
        "contains_during_one_move_three_preemptions",
        Canary::None,
        Moves::One,
        Spawned::B,
        Some(3),
    );
}

/// Model 1c: `count` of the moving key is exactly 1, whatever the
/// interleaving.
#[test]
fn count_during_one_move() {
    for (name, spawned) in [
        ("reader spawned", Spawned::B),
        ("writer spawned", Spawned::A),
    ] {
        count_vs_displacement(
            &format!("count_during_one_move ({name})"),
            Canary::None,
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
