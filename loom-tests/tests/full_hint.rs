//! Loom model 9: at the growth cap, the full hint that lets inserts skip
//! the displacement search never outlives a remove that freed room.
#![cfg(loom)]

mod common;

use common::models::{full_hint_vs_remove, Spawned};
use koel::loom_support::Canary;

/// An insert refused by the full hint was refused because a search that
/// saw every earlier remove found no room: if the remover's next insert is
/// refused, the racing insert took the lane it freed.
#[test]
fn full_hint_never_outlives_a_remove() {
    for (name, spawned) in [
        ("inserter spawned", Spawned::A),
        ("remover spawned", Spawned::B),
    ] {
        full_hint_vs_remove(
            &format!("full_hint_never_outlives_a_remove ({name})"),
            Canary::None,
            spawned,
        );
    }
}
