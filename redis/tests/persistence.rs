//! Snapshots plus an incremental log: DEBUG RELOAD, a restart from an
//! RDB file, and restarts from an AOF (rewritten base plus the commands
//! after it, with and without an RDB preamble) give back the same filter,
//! byte for byte, with the same answers.

mod common;

use common::{answers, cf_info, each, q, wait_for_info, Answers, Server};

const N: u64 = 6000;

/// Fills a growing cuckoo filter (several doublings, some deletes) and a
/// scaling Bloom chain.
fn fill(c: &mut redis::Connection, from: u64, to: u64) {
    let added = each(c, "CF.ADD", "cf", from..to);
    assert!(added.iter().all(|&r| r == 1));
    let removed = each(c, "CF.DEL", "cf", (from..to).step_by(7));
    assert!(removed.iter().all(|&r| r == 1));
    each(c, "BF.ADD", "bf", from..to);
}

fn state(c: &mut redis::Connection) -> (Answers, Answers) {
    assert!(cf_info(c, "cf", "Doublings") >= 1, "the filter grew");
    (
        answers(c, false, "cf", 2 * N),
        answers(c, true, "bf", 2 * N),
    )
}

#[test]
fn debug_reload_and_rdb_restart_restore_the_same_filters() {
    if !common::redis_available("debug_reload_and_rdb_restart_restore_the_same_filters") {
        return;
    }
    let mut s = Server::start(&[]);
    let c = &mut s.connection();
    // 12-bit tags: more false positives to compare; their growth stops at
    // 4x (the FPR cap), so the table starts at a third of the items.
    q::<String>(c, &[b"CF.RESERVE", b"cf", b"2000", b"BUCKETSIZE", b"5"]);
    fill(c, 0, N);
    let before = state(c);
    q::<String>(c, &[b"DEBUG", b"RELOAD"]);
    assert_eq!(state(c), before, "after DEBUG RELOAD");
    q::<String>(c, &[b"SAVE"]);
    s.restart();
    let c = &mut s.connection();
    assert_eq!(state(c), before, "after a restart from the RDB file");
}

/// A filter grown past its tag bits (levels above its first table) comes
/// back from DEBUG RELOAD and an RDB restart byte for byte.
#[test]
fn a_filter_with_levels_survives_reload_and_restart() {
    if !common::redis_available("a_filter_with_levels_survives_reload_and_restart") {
        return;
    }
    let mut s = Server::start(&[]);
    let c = &mut s.connection();
    // 12-bit tags stop doubling at 4x: 200 slots become 3 levels.
    q::<String>(c, &[b"CF.RESERVE", b"cf", b"200", b"BUCKETSIZE", b"5"]);
    let added = each(c, "CF.ADD", "cf", 0..N);
    assert!(added.iter().all(|&r| r == 1));
    let levels = cf_info(c, "cf", "Number of filters");
    assert!(levels >= 2, "{levels} levels");
    let before = answers(c, false, "cf", 2 * N);
    assert!(before.answers[..N as usize].iter().all(|&a| a >= 1));
    q::<String>(c, &[b"DEBUG", b"RELOAD"]);
    assert_eq!(answers(c, false, "cf", 2 * N), before, "after DEBUG RELOAD");
    assert_eq!(cf_info(c, "cf", "Number of filters"), levels);
    q::<String>(c, &[b"SAVE"]);
    s.restart();
    let c = &mut s.connection();
    assert_eq!(
        answers(c, false, "cf", 2 * N),
        before,
        "after an RDB restart"
    );
    // It goes on growing.
    let added = each(c, "CF.ADD", "cf", N..2 * N);
    assert!(added.iter().all(|&r| r == 1));
}

fn aof_restart(preamble: &str) {
    let mut s = Server::start(&["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
    let c = &mut s.connection();
    q::<String>(c, &[b"CF.RESERVE", b"cf", b"500"]);
    fill(c, 0, N / 2);
    // The snapshot: a rewritten AOF base (RDB, or CF.LOADCHUNK and
    // BF.LOADCHUNK commands without the preamble) ...
    q::<String>(c, &[b"BGREWRITEAOF"]);
    wait_for_info(c, "persistence", "aof_rewrite_in_progress:0");
    wait_for_info(c, "persistence", "aof_rewrite_scheduled:0");
    // ... then the incremental log: more adds (and doublings), deletes.
    fill(c, N / 2, N);
    let before = state(c);
    s.restart();
    let c = &mut s.connection();
    assert_eq!(
        state(c),
        before,
        "after a restart from the AOF (preamble {preamble})"
    );
    assert!(s.log().contains("DB loaded from"), "{}", s.log());
}

#[test]
fn aof_restart_without_rdb_preamble_restores_the_same_filters() {
    if !common::redis_available("aof_restart_without_rdb_preamble_restores_the_same_filters") {
        return;
    }
    aof_restart("no");
}

#[test]
fn aof_restart_with_rdb_preamble_restores_the_same_filters() {
    if !common::redis_available("aof_restart_with_rdb_preamble_restores_the_same_filters") {
        return;
    }
    aof_restart("yes");
}

#[test]
fn a_half_loaded_filter_survives_reload_and_aof_restart_then_completes() {
    if !common::redis_available(
        "a_half_loaded_filter_survives_reload_and_aof_restart_then_completes",
    ) {
        return;
    }
    let mut s = Server::start(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let c = &mut s.connection();
    each(c, "CF.ADD", "src", 0..3000);
    let chunks = common::scandump(c, "CF.SCANDUMP", "src");
    let bytes: Vec<u8> = chunks.into_iter().flat_map(|(_, d)| d).collect();
    // Any contiguous split is a valid chunk sequence: send the first 300
    // bytes, then restart twice with the key half loaded.
    let (head, tail) = bytes.split_at(300);
    q::<String>(c, &[b"CF.LOADCHUNK", b"dst", b"300", head]);
    q::<String>(c, &[b"DEBUG", b"RELOAD"]);
    q::<String>(c, &[b"BGREWRITEAOF"]);
    wait_for_info(c, "persistence", "aof_rewrite_in_progress:0");
    wait_for_info(c, "persistence", "aof_rewrite_scheduled:0");
    s.restart();
    let c = &mut s.connection();
    assert!(common::error(c, &[b"CF.EXISTS", b"dst", &common::item(1)]).starts_with("WRONGTYPE"));
    let end = bytes.len().to_string();
    q::<String>(c, &[b"CF.LOADCHUNK", b"dst", end.as_bytes(), tail]);
    assert_eq!(
        answers(c, false, "dst", 6000),
        answers(c, false, "src", 6000)
    );
}
