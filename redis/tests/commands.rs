//! The commands against a real redis-server: replies and error texts as
//! RedisBloom's, ADDNX retries, SCANDUMP/LOADCHUNK (corrupt chunks
//! refused), COPY, RENAME, MEMORY USAGE, and a corrupt RESTORE refused.

mod common;

use common::{error, item, q, scandump, Server};
use redis::Value;

#[test]
fn cf_commands_reply_as_redisbloom() {
    if !common::redis_available("cf_commands_reply_as_redisbloom") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    assert_eq!(q::<String>(c, &[b"CF.RESERVE", b"cf", b"1000"]), "OK");
    assert_eq!(q::<i64>(c, &[b"CF.ADD", b"cf", b"a"]), 1);
    assert_eq!(
        q::<i64>(c, &[b"CF.ADD", b"cf", b"a"]),
        1,
        "CF.ADD adds a copy"
    );
    assert_eq!(q::<i64>(c, &[b"CF.COUNT", b"cf", b"a"]), 2);
    assert_eq!(q::<i64>(c, &[b"CF.ADDNX", b"cf", b"b"]), 1);
    assert_eq!(q::<i64>(c, &[b"CF.EXISTS", b"cf", b"b"]), 1);
    assert_eq!(q::<i64>(c, &[b"CF.EXISTS", b"cf", b"never"]), 0);
    assert_eq!(q::<i64>(c, &[b"CF.EXISTS", b"missing", b"x"]), 0);
    assert_eq!(
        q::<Vec<i64>>(c, &[b"CF.MEXISTS", b"cf", b"a", b"never", b"b"]),
        [1, 0, 1]
    );
    assert_eq!(q::<i64>(c, &[b"CF.DEL", b"cf", b"a"]), 1);
    assert_eq!(q::<i64>(c, &[b"CF.COUNT", b"cf", b"a"]), 1);
    assert_eq!(q::<i64>(c, &[b"CF.DEL", b"cf", b"never"]), 0);
    // CF.INSERT creates with CAPACITY; CF.INSERTNX says 1 / 0 per item.
    assert_eq!(
        q::<Vec<i64>>(
            c,
            &[
                b"CF.INSERT",
                b"cf2",
                b"CAPACITY",
                b"100",
                b"ITEMS",
                b"x",
                b"y"
            ]
        ),
        [1, 1]
    );
    assert_eq!(
        q::<Vec<i64>>(
            c,
            &[b"CF.INSERTNX", b"cf2", b"NOCREATE", b"ITEMS", b"x", b"z"]
        ),
        [0, 1]
    );
    let info: Vec<Value> = q(c, &[b"CF.INFO", b"cf"]);
    let field = |name: &str| -> i64 {
        let at = info
            .iter()
            .position(|v| matches!(v, Value::SimpleString(s) if s == name))
            .unwrap_or_else(|| panic!("CF.INFO has no {name}: {info:?}"));
        redis::from_redis_value(&info[at + 1]).expect("an integer")
    };
    assert_eq!(field("Number of items inserted"), 2);
    assert_eq!(field("Number of items deleted"), 1);
    assert_eq!(field("Number of filters"), 1);
    assert_eq!(
        field("Bucket size"),
        4,
        "BUCKETSIZE 2 maps to koel's 4 tags"
    );
    assert_eq!(field("Max iterations"), 20);
    assert_eq!(field("Fingerprint bits"), 16);
    assert!(field("Size") > 0);
}

#[test]
fn cf_errors_are_redisbloom_texts_and_change_nothing() {
    if !common::redis_available("cf_errors_are_redisbloom_texts_and_change_nothing") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    let cases: &[(&[&[u8]], &str)] = &[
        (&[b"CF.RESERVE", b"k", b"abc"], "Bad capacity"),
        (
            &[b"CF.RESERVE", b"k", b"3"],
            "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]",
        ),
        (
            &[b"CF.RESERVE", b"k", b"100", b"BUCKETSIZE", b"0"],
            "BUCKETSIZE: value must be in the range [1, 255]",
        ),
        (
            &[b"CF.RESERVE", b"k", b"100", b"MAXITERATIONS", b"x"],
            "Couldn't parse MAXITERATIONS",
        ),
        (
            &[b"CF.RESERVE", b"k", b"100", b"EXPANSION", b"40000"],
            "EXPANSION: value must be in the range [0, 32768]",
        ),
        (
            &[b"CF.RESERVE", b"k", b"100", b"BOGUS", b"1"],
            "Unknown argument received",
        ),
        (&[b"CF.DEL", b"k", b"x"], "Not found"),
        (&[b"CF.INFO", b"k"], "ERR not found"),
        (
            &[b"CF.INSERT", b"k", b"NOCREATE", b"ITEMS", b"x"],
            "ERR not found",
        ),
        (
            &[b"CF.INSERT", b"k", b"WHAT", b"ITEMS", b"x"],
            "Unknown argument received",
        ),
        (&[b"CF.SCANDUMP", b"k", b"-1"], "Invalid position"),
    ];
    for (args, expected) in cases {
        assert_eq!(&error(c, args), expected, "{args:?}");
    }
    // Arity errors are Redis's own.
    assert!(error(c, &[b"CF.ADD", b"k"]).starts_with("ERR wrong number of arguments"));
    assert!(error(c, &[b"CF.RESERVE", b"k", b"100", b"BUCKETSIZE"])
        .starts_with("ERR wrong number of arguments"));
    assert!(error(c, &[b"CF.INSERT", b"k", b"ITEMS"]).starts_with("ERR wrong number of arguments"));
    // Nothing was created by any of them.
    assert_eq!(q::<i64>(c, &[b"EXISTS", b"k"]), 0);
    // Existing key and wrong type.
    q::<String>(c, &[b"CF.RESERVE", b"k", b"100"]);
    assert_eq!(error(c, &[b"CF.RESERVE", b"k", b"100"]), "ERR item exists");
    q::<String>(c, &[b"SET", b"str", b"1"]);
    for args in [
        &[&b"CF.ADD"[..], b"str", b"x"][..],
        &[b"CF.EXISTS", b"str", b"x"],
        &[b"CF.INFO", b"str"],
        &[b"BF.ADD", b"k", b"x"],
        &[b"CF.ADD", b"bf", b"x"],
    ] {
        if args[1] == b"bf" {
            q::<String>(c, &[b"BF.RESERVE", b"bf", b"0.01", b"100"]);
        }
        assert!(error(c, args).starts_with("WRONGTYPE"), "{args:?}");
    }
    assert_eq!(q::<String>(c, &[b"GET", b"str"]), "1");
}

#[test]
fn full_fixed_filter_says_filter_is_full_and_keeps_its_items() {
    if !common::redis_available("full_fixed_filter_says_filter_is_full_and_keeps_its_items") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    q::<String>(c, &[b"CF.RESERVE", b"k", b"64", b"EXPANSION", b"0"]);
    let mut added = Vec::new();
    let mut full = None;
    for i in 0..1000 {
        let mut cmd = redis::cmd("CF.ADD");
        cmd.arg("k").arg(item(i));
        match cmd.query::<i64>(c) {
            Ok(1) => added.push(i),
            Ok(other) => panic!("CF.ADD replied {other}"),
            Err(e) => {
                full = Some(format!(
                    "{} {}",
                    e.code().unwrap_or(""),
                    e.detail().unwrap_or("")
                ));
                break;
            }
        }
    }
    assert_eq!(full.as_deref(), Some("Filter is full"));
    assert!(added.len() >= 60, "only {} fit", added.len());
    for i in &added {
        assert_eq!(q::<i64>(c, &[b"CF.EXISTS", b"k", &item(*i)]), 1);
    }
    // CF.INSERT reports a refusal as -1 in its array. A full table may
    // still have room for some new items (both of an item's buckets must
    // be full for a refusal): of 20, some are refused.
    let items: Vec<Vec<u8>> = (5000..5020).map(item).collect();
    let mut args: Vec<&[u8]> = vec![b"CF.INSERT", b"k", b"ITEMS"];
    args.extend(items.iter().map(|i| &i[..]));
    let r: Vec<i64> = q(c, &args);
    assert!(
        r.iter().all(|&x| x == -1 || x == 1) && r.contains(&-1),
        "{r:?}"
    );
}

#[test]
fn retried_addnx_does_not_insert_twice() {
    if !common::redis_available("retried_addnx_does_not_insert_twice") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    // A client that lost the reply retries the same CF.ADDNX.
    assert_eq!(q::<i64>(c, &[b"CF.ADDNX", b"orders", b"order-17"]), 1);
    for _ in 0..5 {
        assert_eq!(q::<i64>(c, &[b"CF.ADDNX", b"orders", b"order-17"]), 0);
    }
    assert_eq!(q::<i64>(c, &[b"CF.COUNT", b"orders", b"order-17"]), 1);
    let r: Vec<i64> = q(
        c,
        &[
            b"CF.INSERTNX",
            b"orders",
            b"ITEMS",
            b"order-17",
            b"order-18",
            b"order-18",
        ],
    );
    assert_eq!(r, [0, 1, 0]);
    assert_eq!(q::<i64>(c, &[b"CF.COUNT", b"orders", b"order-18"]), 1);
}

#[test]
fn bf_commands_reply_as_redisbloom() {
    if !common::redis_available("bf_commands_reply_as_redisbloom") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    assert_eq!(
        q::<String>(c, &[b"BF.RESERVE", b"bf", b"0.001", b"1000"]),
        "OK"
    );
    assert_eq!(q::<i64>(c, &[b"BF.ADD", b"bf", b"a"]), 1);
    assert_eq!(q::<i64>(c, &[b"BF.ADD", b"bf", b"a"]), 0);
    assert_eq!(
        q::<Vec<i64>>(c, &[b"BF.MADD", b"bf", b"a", b"b", b"c"]),
        [0, 1, 1]
    );
    assert_eq!(q::<i64>(c, &[b"BF.EXISTS", b"bf", b"b"]), 1);
    assert_eq!(q::<i64>(c, &[b"BF.EXISTS", b"bf", b"never"]), 0);
    assert_eq!(
        q::<Vec<i64>>(c, &[b"BF.MEXISTS", b"bf", b"c", b"never"]),
        [1, 0]
    );
    assert_eq!(q::<i64>(c, &[b"BF.CARD", b"bf"]), 3);
    assert_eq!(q::<i64>(c, &[b"BF.CARD", b"missing"]), 0);
    assert_eq!(q::<Vec<i64>>(c, &[b"BF.INFO", b"bf", b"CAPACITY"]), [1000]);
    assert_eq!(q::<Vec<i64>>(c, &[b"BF.INFO", b"bf", b"ITEMS"]), [3]);
    assert_eq!(
        error(c, &[b"BF.INFO", b"bf", b"BOGUS"]),
        "Invalid information value"
    );
    // Scaling: a chain grows past its capacity and keeps every item.
    for i in 0..500 {
        q::<i64>(c, &[b"BF.ADD", b"small", &item(i)]);
    }
    assert!(q::<Vec<i64>>(c, &[b"BF.INFO", b"small", b"FILTERS"])[0] >= 3);
    assert!((0..500).all(|i| q::<i64>(c, &[b"BF.EXISTS", b"small", &item(i)]) == 1));
    // Non-scaling: refuses past its capacity, with RedisBloom's text.
    // (The client turns the array's error element into the reply's error.)
    let e = error(
        c,
        &[
            b"BF.INSERT",
            b"ns",
            b"CAPACITY",
            b"2",
            b"NONSCALING",
            b"ITEMS",
            b"1",
            b"2",
            b"3",
        ],
    );
    assert_eq!(e, "ERR non scaling filter is full");
    assert_eq!(q::<i64>(c, &[b"BF.CARD", b"ns"]), 2);
    assert_eq!(q::<i64>(c, &[b"BF.EXISTS", b"ns", b"3"]), 0);
    let cases: &[(&[&[u8]], &str)] = &[
        (&[b"BF.RESERVE", b"x", b"abc", b"100"], "ERR bad error rate"),
        (
            &[b"BF.RESERVE", b"x", b"1.5", b"100"],
            "ERR error rate must be in the range (0.000000, 1.000000)",
        ),
        (
            &[b"BF.RESERVE", b"x", b"0.01", b"0"],
            "ERR capacity must be in the range [1, 1073741824]",
        ),
        (
            &[b"BF.RESERVE", b"x", b"0.01", b"100", b"EXPANSION"],
            "ERR no expansion",
        ),
        (
            &[
                b"BF.RESERVE",
                b"x",
                b"0.01",
                b"100",
                b"NONSCALING",
                b"EXPANSION",
                b"2",
            ],
            "Nonscaling filters cannot expand",
        ),
        (&[b"BF.RESERVE", b"bf", b"0.01", b"100"], "ERR item exists"),
        (
            &[b"BF.INSERT", b"x", b"NOCREATE", b"ITEMS", b"a"],
            "ERR not found",
        ),
        (
            &[b"BF.INSERT", b"x", b"CAPACITY", b"0", b"ITEMS", b"a"],
            "Bad capacity",
        ),
        (&[b"BF.INFO", b"x"], "ERR not found"),
    ];
    for (args, expected) in cases {
        assert_eq!(&error(c, args), expected, "{args:?}");
    }
    assert_eq!(q::<i64>(c, &[b"EXISTS", b"x"]), 0);
}

#[test]
fn scandump_loadchunk_round_trip_and_corrupt_chunk_refused() {
    if !common::redis_available("scandump_loadchunk_round_trip_and_corrupt_chunk_refused") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    for i in 0..2000 {
        q::<i64>(c, &[b"CF.ADD", b"src", &item(i)]);
    }
    let chunks = scandump(c, "CF.SCANDUMP", "src");
    assert!(!chunks.is_empty());

    // Every single flipped bit in the chunk is refused, and the key is
    // left as it was (absent, or the partial load before the chunk).
    let (last_iter, last) = chunks.last().expect("a chunk").clone();
    for &at in &[0usize, 9, 20, 40, last.len() / 2, last.len() - 1] {
        if chunks.len() > 1 {
            for (iter, data) in &chunks[..chunks.len() - 1] {
                q::<String>(
                    c,
                    &[b"CF.LOADCHUNK", b"dst", iter.to_string().as_bytes(), data],
                );
            }
        }
        let mut bad = last.clone();
        bad[at] ^= 0x04;
        let e = error(
            c,
            &[
                b"CF.LOADCHUNK",
                b"dst",
                last_iter.to_string().as_bytes(),
                &bad,
            ],
        );
        assert!(
            e.starts_with("Couldn't load chunk!") || e.starts_with("Invalid header"),
            "byte {at}: {e}"
        );
        if chunks.len() > 1 {
            assert!(error(c, &[b"CF.EXISTS", b"dst", &item(1)]).starts_with("WRONGTYPE"));
        } else {
            assert_eq!(q::<i64>(c, &[b"EXISTS", b"dst"]), 0);
        }
        q::<i64>(c, &[b"DEL", b"dst"]);
    }
    // Out of order: a chunk that does not continue the bytes so far.
    assert_eq!(
        error(c, &[b"CF.LOADCHUNK", b"dst", b"999999", b"xyz"]),
        "Invalid position"
    );

    for (iter, data) in &chunks {
        q::<String>(
            c,
            &[b"CF.LOADCHUNK", b"dst", iter.to_string().as_bytes(), data],
        );
    }
    assert!((0..2000).all(|i| q::<i64>(c, &[b"CF.EXISTS", b"dst", &item(i)]) == 1));
    assert_eq!(scandump(c, "CF.SCANDUMP", "dst"), chunks, "the same bytes");
    // A loaded filter over an existing key is refused.
    assert_eq!(
        error(
            c,
            &[
                b"CF.LOADCHUNK",
                b"dst",
                chunks[0].0.to_string().as_bytes(),
                &chunks[0].1
            ]
        ),
        "ERR item exists"
    );

    // The Bloom twin.
    for i in 0..300 {
        q::<i64>(c, &[b"BF.ADD", b"bsrc", &item(i)]);
    }
    for (iter, data) in scandump(c, "BF.SCANDUMP", "bsrc") {
        q::<String>(
            c,
            &[b"BF.LOADCHUNK", b"bdst", iter.to_string().as_bytes(), &data],
        );
    }
    assert!((0..300).all(|i| q::<i64>(c, &[b"BF.EXISTS", b"bdst", &item(i)]) == 1));
    assert_eq!(
        q::<i64>(c, &[b"BF.CARD", b"bdst"]),
        q::<i64>(c, &[b"BF.CARD", b"bsrc"])
    );
}

#[test]
fn copy_rename_memory_usage_and_delete() {
    if !common::redis_available("copy_rename_memory_usage_and_delete") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    for i in 0..1000 {
        q::<i64>(c, &[b"CF.ADD", b"a", &item(i)]);
        q::<i64>(c, &[b"BF.ADD", b"b", &item(i)]);
    }
    for key in [&b"a"[..], b"b"] {
        let bytes: i64 = q(c, &[b"MEMORY", b"USAGE", key]);
        assert!(bytes > 1000, "MEMORY USAGE {bytes}");
    }
    assert_eq!(q::<i64>(c, &[b"COPY", b"a", b"a2"]), 1);
    assert_eq!(q::<i64>(c, &[b"COPY", b"b", b"b2"]), 1);
    // The copy is independent of the original.
    q::<i64>(c, &[b"CF.DEL", b"a2", &item(1)]);
    assert_eq!(q::<i64>(c, &[b"CF.COUNT", b"a", &item(1)]), 1);
    assert_eq!(q::<i64>(c, &[b"CF.COUNT", b"a2", &item(1)]), 0);
    q::<String>(c, &[b"RENAME", b"a", b"a3"]);
    assert_eq!(q::<i64>(c, &[b"EXISTS", b"a"]), 0);
    assert!((0..1000).all(|i| q::<i64>(c, &[b"CF.EXISTS", b"a3", &item(i)]) == 1));
    assert!((0..1000).all(|i| q::<i64>(c, &[b"BF.EXISTS", b"b2", &item(i)]) == 1));
    assert_eq!(q::<i64>(c, &[b"DEL", b"a3", b"a2", b"b", b"b2"]), 4);
    assert_eq!(q::<i64>(c, &[b"DBSIZE"]), 0);
}

/// Redis's CRC-64 (Jones, reflected), which ends a DUMP payload.
fn crc64(data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    let mut crc = 0u64;
    for &b in data {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    crc
}

#[test]
fn restore_of_a_corrupt_payload_is_refused_and_the_server_lives() {
    if !common::redis_available("restore_of_a_corrupt_payload_is_refused_and_the_server_lives") {
        return;
    }
    // Uncompressed, so that each flipped bit lands in the module's bytes
    // (a flip inside an LZF back-reference can decode to the same bytes).
    let s = Server::start(&["--rdbcompression", "no"]);
    let c = &mut s.connection();
    for i in 0..500 {
        q::<i64>(c, &[b"CF.ADD", b"k", &item(i)]);
    }
    let dump: Vec<u8> = q(c, &[b"DUMP", b"k"]);
    let body = dump.len() - 8;
    assert_eq!(
        crc64(&dump[..body]).to_le_bytes(),
        dump[body..],
        "the test's CRC is Redis's"
    );
    // The intact payload restores.
    q::<String>(c, &[b"RESTORE", b"k2", b"0", &dump]);
    assert!((0..500).all(|i| q::<i64>(c, &[b"CF.EXISTS", b"k2", &item(i)]) == 1));
    // Flip a bit of the filter (its table, its checksum, the module
    // header) and fix Redis's CRC, so only the module can notice.
    for at in [30, 60, body - 40, body - 11, body / 2] {
        let mut bad = dump.clone();
        bad[at] ^= 0x01;
        let sum = crc64(&bad[..body]);
        bad[body..].copy_from_slice(&sum.to_le_bytes());
        let e = error(c, &[b"RESTORE", b"k3", b"0", &bad]);
        assert!(e.contains("Bad data format"), "byte {at}: {e}");
        assert_eq!(q::<i64>(c, &[b"EXISTS", b"k3"]), 0);
    }
    assert_eq!(q::<String>(c, &[b"PING"]), "PONG");
}

#[cfg(target_os = "linux")]
#[test]
fn deleting_a_large_filter_returns_its_memory() {
    if !common::redis_available("deleting_a_large_filter_returns_its_memory") {
        return;
    }
    let s = Server::start(&[]);
    let c = &mut s.connection();
    // 8M items: a 16 MiB table, which koel maps itself (mmap), outside
    // Redis's allocator; 400k adds touch every page of it.
    q::<String>(c, &[b"CF.RESERVE", b"big", b"8000000"]);
    common::each(c, "CF.ADD", "big", 0..400_000);
    let usage: i64 = q(c, &[b"MEMORY", b"USAGE", b"big"]);
    assert!(usage > 16_000_000, "MEMORY USAGE {usage}");
    let before = s.rss_bytes();
    assert_eq!(q::<i64>(c, &[b"DEL", b"big"]), 1);
    let after = s.rss_bytes();
    assert!(
        before - after.min(before) > 14 << 20,
        "RSS {before} -> {after} after DEL"
    );
}

#[test]
fn resp3_replies_are_booleans_where_redisbloom_gives_booleans() {
    if !common::redis_available("resp3_replies_are_booleans_where_redisbloom_gives_booleans") {
        return;
    }
    let s = Server::start(&[]);
    let url = format!("redis://127.0.0.1:{}/?protocol=resp3", s.port);
    let c = &mut redis::Client::open(url)
        .and_then(|cl| cl.get_connection())
        .expect("RESP3 connection");
    let v = |c: &mut redis::Connection, args: &[&str]| -> Value {
        redis::cmd(args[0]).arg(&args[1..]).query(c).expect("reply")
    };
    assert_eq!(v(c, &["CF.ADD", "k", "a"]), Value::Boolean(true));
    assert_eq!(v(c, &["CF.ADDNX", "k", "a"]), Value::Boolean(false));
    assert_eq!(v(c, &["CF.EXISTS", "k", "a"]), Value::Boolean(true));
    assert_eq!(
        v(c, &["CF.MEXISTS", "k", "a", "zz"]),
        Value::Array(vec![Value::Boolean(true), Value::Boolean(false)])
    );
    assert_eq!(v(c, &["CF.COUNT", "k", "a"]), Value::Int(1));
    assert_eq!(v(c, &["CF.DEL", "k", "a"]), Value::Boolean(true));
    // CF.INSERTNX stays integers (RedisBloom: 1, 0, -1).
    assert_eq!(
        v(c, &["CF.INSERTNX", "k", "ITEMS", "b", "b"]),
        Value::Array(vec![Value::Int(1), Value::Int(0)])
    );
    // CF.INSERT: true, and false for a refused item.
    q::<String>(c, &[b"CF.RESERVE", b"f", b"8", b"EXPANSION", b"0"]);
    // (koel's smallest table holds a few hundred items.)
    let items: Vec<String> = (0..2000).map(|i| format!("x{i}")).collect();
    let mut args = vec!["CF.INSERT", "f", "ITEMS"];
    args.extend(items.iter().map(String::as_str));
    let Value::Array(r) = v(c, &args) else {
        panic!("an array")
    };
    assert!(
        r.contains(&Value::Boolean(true)) && r.contains(&Value::Boolean(false)),
        "{r:?}"
    );
    assert_eq!(v(c, &["BF.ADD", "b", "a"]), Value::Boolean(true));
    assert_eq!(v(c, &["BF.EXISTS", "b", "a"]), Value::Boolean(true));
}
