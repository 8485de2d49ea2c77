//! Failing tests from an adversarial pass over the module as a RedisBloom
//! user would drive it (each names the README line or RedisBloom
//! behaviour it checks).

mod common;

use common::{cf_info, each, error, item, q, scandump, Server};

/// RedisBloom: "Cuckoo filters can contain the same item multiple times,
/// and consider each addition as separate"; with EXPANSION >= 1 a copy
/// that finds its two buckets full goes to a new sub-filter. The README
/// documents `Filter is full` only for EXPANSION 0 and past the FPR cap;
/// here a growable filter holding 8 items refuses the 9th copy.
#[test]
fn cf_add_ninth_copy_on_a_growing_filter_is_accepted() {
    if !common::redis_available("cf_add_ninth_copy_on_a_growing_filter_is_accepted") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    q::<String>(c, &[b"CF.RESERVE", b"k", b"1000", b"EXPANSION", b"1"]);
    let replies = common::each_checked(c, "CF.ADD", "k", std::iter::repeat_n(7, 9));
    assert_eq!(
        replies,
        [1; 9],
        "CF.ADD of one item 9 times (-2: an error reply): {}",
        error(c, &[b"CF.ADD", b"k", &item(7)])
    );
    assert_eq!(q::<i64>(c, &[b"CF.COUNT", b"k", &item(7)]), 9);
}

/// On a filter grown past its tag bits (levels), a CF.DEL that answers 1
/// sometimes removes nothing (koel's "ambiguous remove"): the item is
/// still counted and CF.INFO's "Number of items inserted" is no longer
/// inserts minus deletes. Neither is in the README.
#[test]
fn cf_del_answering_1_removes_a_copy_on_a_filter_with_levels() {
    if !common::redis_available("cf_del_answering_1_removes_a_copy_on_a_filter_with_levels") {
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
    let before = each(c, "CF.COUNT", "k", gone.iter().copied());
    let deleted = each(c, "CF.DEL", "k", gone.iter().copied());
    let after = each(c, "CF.COUNT", "k", gone.iter().copied());
    let said_deleted = deleted.iter().filter(|&&r| r == 1).count() as i64;
    let not_removed: Vec<u64> = gone
        .iter()
        .zip(before.iter().zip(&deleted).zip(&after))
        .filter(|(_, ((b, d), a))| **d == 1 && **a != **b - 1)
        .map(|(i, _)| *i)
        .collect();
    let inserted = cf_info(c, "k", "Number of items inserted");
    assert!(
        not_removed.is_empty() && inserted == N as i64 - said_deleted,
        "CF.DEL answered 1 for {said_deleted} items but left {} of them counted \
         (e.g. item {:?}); Number of items inserted {inserted}, expected {}",
        not_removed.len(),
        not_removed.first(),
        N as i64 - said_deleted
    );
}

/// README: a scaling BF key is a chain of layers, layer `i` at
/// `error_rate / 2^(i+1)`, "at most 64 layers". koel's Bloom filter
/// refuses rates below 1e-20, so with error_rate 1e-6 the 47th layer
/// cannot be built and every later add fails (RedisBloom keeps scaling).
#[test]
fn bf_scaling_chain_adds_layers_until_64() {
    if !common::redis_available("bf_scaling_chain_adds_layers_until_64") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    q::<String>(c, &[b"BF.RESERVE", b"k", b"1e-6", b"1", b"EXPANSION", b"1"]);
    // Capacity 1, expansion 1: one layer per item.
    let replies = common::each_checked(c, "BF.ADD", "k", 0..60);
    let first_error = replies.iter().position(|&r| r != 1);
    assert_eq!(
        first_error,
        None,
        "BF.ADD failed from item {first_error:?} on ({}), with {} layers",
        error(c, &[b"BF.ADD", b"k", b"one more"]),
        q::<Vec<i64>>(c, &[b"BF.INFO", b"k", b"FILTERS"])[0]
    );
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
    // The module header: 24 bytes, the kind's fields, their checksum.
    let fields = u32::from_le_bytes(newer[12..16].try_into().unwrap()) as usize;
    let header = 24 + fields + 8;
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
