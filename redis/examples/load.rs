//! Throughput, latency, memory per item and false-positive rate of the
//! module through a pipelined client: fills a cuckoo key (CF.RESERVE for
//! the item count, then pipelined CF.ADD), looks the items up (CF.EXISTS,
//! CF.MEXISTS), counts positives among never-added items, reads MEMORY
//! USAGE; then the same for a Bloom key at 1% (BF.MADD, BF.MEXISTS).
//!
//! ```sh
//! cargo build --release -p koel-redis
//! cargo run --release -p koel-redis --example load -- 1000000 [redis://...]
//! ```
//!
//! Without a URL it starts its own redis-server with the module from
//! this build's target directory.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BATCH: u64 = 1000;
const ABSENT: u64 = 1_000_000;

fn own_server() -> (String, Child) {
    let exe = std::env::current_exe().expect("example path");
    let dir = exe
        .parent()
        .and_then(|p| p.parent())
        .expect("target/release");
    let module = [
        dir.join("libkoel_redis.so"),
        dir.join("deps/libkoel_redis.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("libkoel_redis.so: cargo build --release -p koel-redis");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--loadmodule")
        .arg(module)
        .stdout(Stdio::null())
        .spawn()
        .expect("start redis-server");
    (format!("redis://127.0.0.1:{port}/"), child)
}

/// Runs `make(i)` for `i` in `range`, `per` items per command and BATCH
/// commands per pipeline round trip; returns items per second, the
/// round trips' p50 / p99, and the sum of the integer replies.
fn run(
    con: &mut redis::Connection,
    range: std::ops::Range<u64>,
    per: u64,
    command: &str,
    key: &str,
) -> (f64, Duration, Duration, i64) {
    let start = Instant::now();
    let mut trips = Vec::new();
    let mut sum = 0i64;
    let mut i = range.start;
    while i < range.end {
        let mut pipe = redis::pipe();
        for _ in 0..BATCH {
            if i >= range.end {
                break;
            }
            let cmd = pipe.cmd(command).arg(key);
            for j in i..(i + per).min(range.end) {
                cmd.arg(&j.to_le_bytes()[..]);
            }
            i += per;
        }
        let t = Instant::now();
        let replies: Vec<redis::Value> = pipe.query(con).expect("pipeline");
        trips.push(t.elapsed());
        for v in replies {
            sum += match v {
                redis::Value::Array(a) => a
                    .iter()
                    .map(|x| redis::from_redis_value::<i64>(x).unwrap_or(0))
                    .sum(),
                v => redis::from_redis_value::<i64>(&v).unwrap_or(0),
            };
        }
    }
    let secs = start.elapsed().as_secs_f64();
    trips.sort();
    let p = |q: f64| trips[((trips.len() as f64 * q) as usize).min(trips.len() - 1)];
    (
        (range.end - range.start) as f64 / secs,
        p(0.5),
        p(0.99),
        sum,
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .map_or(1_000_000, |s| s.parse().expect("item count"));
    let (url, mut server) = match args.next() {
        Some(url) => (url, None),
        None => {
            let (url, child) = own_server();
            (url, Some(child))
        }
    };
    let client = redis::Client::open(url.as_str()).expect("a redis:// URL");
    let mut con = (0..200)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            client.get_connection().ok()
        })
        .expect("connect");
    let c = &mut con;
    let _: () = redis::cmd("DEL").arg("cf").arg("bf").query(c).expect("DEL");
    let _: () = redis::cmd("CF.RESERVE")
        .arg("cf")
        .arg(n)
        .query(c)
        .expect("CF.RESERVE");
    let _: () = redis::cmd("BF.RESERVE")
        .arg("bf")
        .arg(0.01)
        .arg(n)
        .query(c)
        .expect("BF.RESERVE");
    println!("{n} items; {BATCH} commands per pipelined round trip; items/s, round trip p50 / p99");
    let row = |name: &str, (rate, p50, p99, _): (f64, Duration, Duration, i64)| {
        println!(
            "{name:<28} {:>12.0} items/s  p50 {p50:>10.2?}  p99 {p99:>10.2?}",
            rate
        );
    };
    row("CF.ADD", run(c, 0..n, 1, "CF.ADD", "cf"));
    let hits = run(c, 0..n, 1, "CF.EXISTS", "cf");
    assert_eq!(hits.3 as u64, n, "every added item is found");
    row("CF.EXISTS (present)", hits);
    row(
        "CF.MEXISTS x100 (present)",
        run(c, 0..n, 100, "CF.MEXISTS", "cf"),
    );
    let fp = run(c, n..n + ABSENT, 100, "CF.MEXISTS", "cf");
    row("CF.MEXISTS x100 (absent)", fp);
    let mem: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("cf")
        .query(c)
        .expect("MEMORY");
    println!(
        "cuckoo: {:.2} bytes/item ({:.1} bits), FPR {:.2e} ({} of {ABSENT} absent)",
        mem as f64 / n as f64,
        mem as f64 * 8.0 / n as f64,
        fp.3 as f64 / ABSENT as f64,
        fp.3
    );
    row("BF.MADD x100", run(c, 0..n, 100, "BF.MADD", "bf"));
    row(
        "BF.MEXISTS x100 (present)",
        run(c, 0..n, 100, "BF.MEXISTS", "bf"),
    );
    let fp = run(c, n..n + ABSENT, 100, "BF.MEXISTS", "bf");
    row("BF.MEXISTS x100 (absent)", fp);
    let mem: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("bf")
        .query(c)
        .expect("MEMORY");
    println!(
        "bloom 1%: {:.2} bytes/item ({:.1} bits), FPR {:.2e} ({} of {ABSENT} absent)",
        mem as f64 / n as f64,
        mem as f64 * 8.0 / n as f64,
        fp.3 as f64 / ABSENT as f64,
        fp.3
    );
    if let Some(child) = server.as_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}
