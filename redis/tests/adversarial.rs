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
