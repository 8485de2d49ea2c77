//! A local cluster of three primaries (`redis-cli --cluster create`),
//! used through the client's cluster connection: filter keys live in hash
//! slots on different nodes, and every command is routed by its key.

mod common;

use common::{item, q, Server};
use std::process::Command;

#[test]
fn three_primary_cluster_routes_filter_commands_by_key() {
    if !common::redis_available("three_primary_cluster_routes_filter_commands_by_key") {
        return;
    }
    let nodes: Vec<Server> = (0..3)
        .map(|_| {
            // The bus port by default is the port + 10000, past 65535 for
            // a quarter of the ephemeral ports: name a free one.
            let bus = common::free_port().to_string();
            Server::start(&[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
                "--cluster-port",
                &bus,
            ])
        })
        .collect();
    let addresses: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let out = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addresses)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("run redis-cli --cluster create");
    assert!(
        out.status.success(),
        "redis-cli --cluster create: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for n in &nodes {
        wait_for_info_cluster_ok(&mut n.connection());
    }

    let urls: Vec<String> = addresses.iter().map(|a| format!("redis://{a}/")).collect();
    let client = redis::cluster::ClusterClient::new(urls).expect("cluster client");
    let mut c = client.get_connection().expect("cluster connection");
    const KEYS: u64 = 60;
    for k in 0..KEYS {
        let cf = format!("cf:{k}");
        let bf = format!("bf:{k}");
        for i in 0..50 {
            let added: i64 = redis::cmd("CF.ADD")
                .arg(&cf)
                .arg(item(i))
                .query(&mut c)
                .expect("CF.ADD");
            assert_eq!(added, 1);
            let _: i64 = redis::cmd("BF.ADD")
                .arg(&bf)
                .arg(item(i))
                .query(&mut c)
                .expect("BF.ADD");
        }
        let _: i64 = redis::cmd("CF.DEL")
            .arg(&cf)
            .arg(item(0))
            .query(&mut c)
            .expect("CF.DEL");
    }
    for k in 0..KEYS {
        let cf = format!("cf:{k}");
        let bf = format!("bf:{k}");
        let found: Vec<i64> = redis::cmd("CF.MEXISTS")
            .arg(&cf)
            .arg(item(1))
            .arg(item(49))
            .query(&mut c)
            .expect("CF.MEXISTS");
        assert_eq!(found, [1, 1]);
        let count: i64 = redis::cmd("CF.COUNT")
            .arg(&cf)
            .arg(item(0))
            .query(&mut c)
            .expect("CF.COUNT");
        assert_eq!(count, 0, "the delete reached {cf}'s node");
        let card: i64 = redis::cmd("BF.CARD")
            .arg(&bf)
            .query(&mut c)
            .expect("BF.CARD");
        assert!(card >= 49, "{bf}: {card}");
    }
    // The keys are spread over all three primaries.
    let sizes: Vec<i64> = nodes
        .iter()
        .map(|n| q(&mut n.connection(), &[b"DBSIZE"]))
        .collect();
    assert_eq!(sizes.iter().sum::<i64>(), 2 * KEYS as i64);
    assert!(sizes.iter().all(|&s| s > 0), "{sizes:?}");
    // A node answers a key outside its slots with a redirection.
    let mut direct = nodes[0].connection();
    let moved = (0..KEYS).find_map(|k| {
        redis::cmd("CF.EXISTS")
            .arg(format!("cf:{k}"))
            .arg(item(1))
            .query::<i64>(&mut direct)
            .err()
    });
    assert!(moved.is_some_and(|e| e.kind() == redis::ErrorKind::Moved));
}

fn wait_for_info_cluster_ok(c: &mut redis::Connection) {
    // CLUSTER INFO is not an INFO section: poll it directly.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(c)
            .expect("CLUSTER INFO");
        if info.contains("cluster_state:ok") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "cluster never ok: {info}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
