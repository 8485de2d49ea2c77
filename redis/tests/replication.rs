//! A real primary and replicas: after adds, deletes, growth and refused
//! inserts, each replica answers every CF.COUNT / BF.EXISTS as the
//! primary does and holds the same bytes (SCANDUMP), also for a filter
//! grown into a region level, both for a replica
//! fed the command stream from the start and for one that joined later
//! through a full resynchronisation (an RDB snapshot of a grown filter).

mod common;

use common::{answers, cf_info, each, q, wait_for_info, Server};

const N: u64 = 8000;

fn replica_of(primary: &Server) -> Server {
    let port = primary.port.to_string();
    let r = Server::start(&["--replicaof", "127.0.0.1", &port]);
    wait_for_info(&mut r.connection(), "replication", "master_link_status:up");
    r
}

/// Writes on the primary: auto-created filters (their seeds must travel),
/// growth, deletes, retried ADDNX, and a full fixed filter whose refused
/// inserts must not reach the replicas.
fn writes(c: &mut redis::Connection, from: u64, to: u64) {
    each(c, "CF.ADD", "grow", from..to);
    each(c, "CF.DEL", "grow", (from..to).step_by(3));
    each(c, "CF.ADD", "deep", from..to);
    each(c, "CF.ADDNX", "auto", from..to);
    each(c, "CF.ADDNX", "auto", from..to); // retries: all 0
    each(c, "BF.ADD", "bloom", from..to);
    let r = common::each_checked(c, "CF.ADD", "fixed", (from..to).step_by(10));
    assert!(from > 0 || r.contains(&-2), "the fixed filter filled up");
    let mut insert = redis::cmd("CF.INSERT");
    insert.arg("fixed").arg("ITEMS");
    for i in (from..to).step_by(5) {
        insert.arg(common::item(i + 1_000_000));
    }
    // Refused items are -1 in the array: only the others replicate.
    let r: Vec<i64> = insert.query(c).expect("CF.INSERT");
    assert!(r.contains(&-1), "{r:?}");
}

fn assert_agree(primary: &mut redis::Connection, replica: &mut redis::Connection, what: &str) {
    for (key, bloom) in [
        ("grow", false),
        ("deep", false),
        ("auto", false),
        ("fixed", false),
        ("bloom", true),
    ] {
        let p = answers(primary, bloom, key, 2 * N);
        let r = answers(replica, bloom, key, 2 * N);
        assert!(p.answers == r.answers, "{what}: {key} answers differ");
        assert!(p.bytes == r.bytes, "{what}: {key} bytes differ");
    }
}

#[test]
fn replicas_answer_exactly_as_their_primary() {
    if !common::redis_available("replicas_answer_exactly_as_their_primary") {
        return;
    }
    let primary = Server::start(&[]);
    let p = &mut primary.connection();
    let early = replica_of(&primary);
    q::<String>(p, &[b"CF.RESERVE", b"grow", b"300", b"BUCKETSIZE", b"3"]);
    q::<String>(p, &[b"CF.RESERVE", b"fixed", b"200", b"EXPANSION", b"0"]);
    // 12-bit tags stop doubling at 4x: the rest goes to a region level,
    // whose steps each add regions.
    q::<String>(p, &[b"CF.RESERVE", b"deep", b"100", b"BUCKETSIZE", b"5"]);
    writes(p, 0, N / 2);
    let acked: i64 = q(p, &[b"WAIT", b"1", b"10000"]);
    assert_eq!(acked, 1);
    assert!(cf_info(p, "grow", "Doublings") >= 3);
    assert!(cf_info(p, "deep", "Number of filters") >= 2);
    assert_agree(p, &mut early.connection(), "streamed replica");

    // A replica that starts from a snapshot of the grown filters.
    let late = replica_of(&primary);
    writes(p, N / 2, N);
    let acked: i64 = q(p, &[b"WAIT", b"2", b"10000"]);
    assert_eq!(acked, 2);
    assert_agree(p, &mut early.connection(), "streamed replica, later");
    assert_agree(p, &mut late.connection(), "resynchronised replica");
}
