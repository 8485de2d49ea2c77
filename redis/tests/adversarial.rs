//! Failing tests from an adversarial pass over the module as a RedisBloom
//! user would drive it (each names the README line or RedisBloom
//! behaviour it checks).

mod common;

use common::{cf_info, each, error, item, q, scandump, Server};

/// README: an item's copies live in its two buckets, so CF.ADD takes at
/// most 7 of them (16-bit tags; fewer where other items share the
/// buckets), also on a growable filter (a doubling keeps an item's copies
/// together; RedisBloom would add a sub-filter). The refused copy is
/// `Filter is full` and changes nothing.
#[test]
fn cf_add_refuses_an_eighth_copy_and_changes_nothing() {
    if !common::redis_available("cf_add_refuses_an_eighth_copy_and_changes_nothing") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    q::<String>(c, &[b"CF.RESERVE", b"k", b"1000", b"EXPANSION", b"1"]);
    let replies = common::each_checked(c, "CF.ADD", "k", std::iter::repeat_n(7, 7));
    assert_eq!(replies, [1; 7]);
    let before = cf_info(c, "k", "Number of items inserted");
    assert_eq!(error(c, &[b"CF.ADD", b"k", &item(7)]), "Filter is full");
    assert_eq!(q::<i64>(c, &[b"CF.COUNT", b"k", &item(7)]), 7);
    assert_eq!(cf_info(c, "k", "Number of items inserted"), before);
}

/// README: on a filter with levels, an item whose tag matches in two
/// levels is not removed by CF.DEL (removing either copy could take
/// another item's only copy); CF.DEL still answers 1, the item stays
/// counted, and so does "Number of items inserted". Whatever CF.DEL does,
/// no item that was not deleted goes missing.
#[test]
fn cf_del_on_a_filter_with_levels_never_takes_another_items_copy() {
    if !common::redis_available("cf_del_on_a_filter_with_levels_never_takes_another_items_copy") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    // 12-bit tags stop doubling at 4x; past that the filter gets levels.
    q::<String>(
        c,
        &[
            b"CF.RESERVE",
            b"k",
            b"200",
            b"BUCKETSIZE",
            b"5",
            b"SEED",
            b"1",
        ],
    );
    const N: u64 = 20_000;
    assert!(each(c, "CF.ADD", "k", 0..N).iter().all(|&r| r == 1));
    assert!(cf_info(c, "k", "Number of filters") >= 2, "levels");
    let gone: Vec<u64> = (0..N).step_by(2).collect();
    let deleted = each(c, "CF.DEL", "k", gone.iter().copied());
    assert!(deleted.iter().all(|&r| r == 1), "every item was added");
    // Deletes that removed nothing (ambiguous) keep counting: rare.
    let drift = cf_info(c, "k", "Number of items inserted") - (N - gone.len() as u64) as i64;
    assert!(
        (0..gone.len() as i64 / 20).contains(&drift),
        "items inserted minus deletes is off by {drift}"
    );
    let kept_items = each(c, "CF.EXISTS", "k", (1..N).step_by(2));
    assert!(
        kept_items.iter().all(|&r| r == 1),
        "an item not deleted went missing"
    );
}

/// README: a scaling BF key is a chain of layers, layer `i` at
/// `error_rate / 2^(i+1)` but at least 1e-20, "at most 64 layers". From
/// error_rate 1e-6 the halving passes the floor at layer 46, where the
/// chain used to stop (every later add failed); now it grows to 64
/// layers, and only then refuses.
#[test]
fn bf_scaling_chain_adds_layers_until_64() {
    if !common::redis_available("bf_scaling_chain_adds_layers_until_64") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    q::<String>(c, &[b"BF.RESERVE", b"k", b"1e-6", b"1", b"EXPANSION", b"1"]);
    // Capacity 1, expansion 1: one layer per item.
    let replies = common::each_checked(c, "BF.ADD", "k", 0..64);
    let first_error = replies.iter().position(|&r| r != 1);
    assert_eq!(
        first_error,
        None,
        "BF.ADD failed from item {first_error:?} on ({}), with {} layers",
        error(c, &[b"BF.ADD", b"k", b"one more"]),
        q::<Vec<i64>>(c, &[b"BF.INFO", b"k", b"FILTERS"])[0]
    );
    assert_eq!(q::<Vec<i64>>(c, &[b"BF.INFO", b"k", b"FILTERS"])[0], 64);
    assert!(!error(c, &[b"BF.ADD", b"k", b"the 65th"]).is_empty());
    assert_eq!(q::<Vec<i64>>(c, &[b"BF.INFO", b"k", b"FILTERS"])[0], 64);
    assert!(each(c, "BF.EXISTS", "k", 0..64).iter().all(|&r| r == 1));
}

/// RedisBloom sets NONSCALING as a flag whatever the order of BF.INSERT's
/// options; here `NONSCALING EXPANSION 4` gives a scaling filter (while
/// `EXPANSION 4 NONSCALING` gives a non-scaling one).
#[test]
fn bf_insert_nonscaling_is_not_undone_by_a_later_expansion() {
    if !common::redis_available("bf_insert_nonscaling_is_not_undone_by_a_later_expansion") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    let e = error(
        c,
        &[
            b"BF.INSERT",
            b"k",
            b"NONSCALING",
            b"EXPANSION",
            b"4",
            b"CAPACITY",
            b"1",
            b"ITEMS",
            b"a",
            b"b",
        ],
    );
    assert_eq!(e, "ERR non scaling filter is full");
}

/// README: "a corrupt or mismatched chunk is refused" and "Chunks from a
/// filter that changed between two SCANDUMP calls do not fit together,
/// and the last LOADCHUNK refuses them". The module header (with the
/// Bloom layers' item counts) and koel's files are checksummed apart, so
/// the header of one dump followed by the rest of another loads: a key
/// whose BF.CARD counts an item BF.EXISTS does not find.
#[test]
fn bf_loadchunk_refuses_a_header_from_another_dump() {
    if !common::redis_available("bf_loadchunk_refuses_a_header_from_another_dump") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    let whole = |c: &mut redis::Connection| -> Vec<u8> {
        scandump(c, "BF.SCANDUMP", "src")
            .into_iter()
            .flat_map(|(_, d)| d)
            .collect()
    };
    q::<i64>(c, &[b"BF.ADD", b"src", b"a"]);
    let older = whole(c);
    q::<i64>(c, &[b"BF.ADD", b"src", b"b"]);
    let newer = whole(c);
    assert_eq!(older.len(), newer.len());
    // The module header (encoding version 2): 24 bytes, the kind's
    // fields, the files' checksum, the header's checksum.
    assert_eq!(newer[9], 2, "encoding version");
    let fields = u32::from_le_bytes(newer[12..16].try_into().unwrap()) as usize;
    let header = 24 + fields + 16;
    q::<String>(
        c,
        &[
            b"BF.LOADCHUNK",
            b"dst",
            header.to_string().as_bytes(),
            &newer[..header],
        ],
    );
    let last: redis::RedisResult<String> = redis::cmd("BF.LOADCHUNK")
        .arg("dst")
        .arg(older.len())
        .arg(&older[header..])
        .query(c);
    if last.is_ok() {
        panic!(
            "the mixed chunks loaded: BF.CARD {}, BF.EXISTS b {}",
            q::<i64>(c, &[b"BF.CARD", b"dst"]),
            q::<i64>(c, &[b"BF.EXISTS", b"dst", b"b"])
        );
    }
}
