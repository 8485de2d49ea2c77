//! Loom model 3: two `insert_unique` of one absent key.
#![cfg(loom)]

mod common;

use common::models::unique_pair;
use koel::loom_support::Canary;

/// Empty table: exactly one winner, one copy stored.
#[test]
fn insert_unique_one_winner() {
    unique_pair("insert_unique_one_winner", Canary::None, false);
}

/// Both candidate buckets full: each call releases its stripe, displaces,
/// and retries; still exactly one winner and one copy.
#[test]
fn insert_unique_one_winner_through_displacement() {
    let reached = unique_pair(
        "insert_unique_one_winner_through_displacement",
        Canary::None,
        true,
    );
    assert!(
        reached.displaced(),
        "no execution displaced: the model does not reach the retry"
    );
    eprintln!(
        "insert_unique_one_winner_through_displacement: some loser got Err(Full): {}",
        reached.full()
    );
}
