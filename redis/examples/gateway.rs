//! The design study's request path (section 12): a gateway that checks an
//! in-process koel filter before it reads the store (Redis), with a small
//! cache in between.
//!
//! Each request records the filter version and hash seed it used, the
//! result, its latency and its source (`filter`: the filter said absent,
//! no store read; `cache`; `store`). A store read for a key the filter
//! passed but the store lacks is a false positive met, and is counted.
//! The filter is a fixed-size one on purpose: when an insert fails, a
//! background thread rebuilds a filter twice as large from the store
//! (SCAN) and swaps it in; requests go on meanwhile against the old one,
//! whose "absent" they do not trust until the swap (a key whose insert
//! failed is not in it), so no request ever misses a stored key.
//!
//! ```sh
//! cargo run --release -p koel-redis --example gateway            # starts its own redis-server
//! cargo run --release -p koel-redis --example gateway -- redis://127.0.0.1:6379/
//! ```

use koel::{CuckooFilter, Growth};
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

const KEYS: u64 = 20_000;
const REQUESTS: u64 = 50_000;
const FIRST_CAPACITY: usize = 4_000;
const CACHE_ENTRIES: usize = 1_000;

/// The filter in use and its version (1, then +1 per rebuild).
struct Current {
    filter: Arc<CuckooFilter>,
    version: u32,
}

struct Gateway {
    current: RwLock<Current>,
    /// `Some` while a rebuild runs: the writes since it began, which it
    /// replays into its filter before the swap.
    pending: Mutex<Option<Vec<String>>>,
    redis: redis::Client,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Source {
    Filter,
    Cache,
    Store,
}

struct Record {
    version: u32,
    seed: u64,
    found: bool,
    latency: Duration,
    source: Source,
}

fn fixed_filter(capacity: usize) -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(capacity)
        .growth(Growth::Fixed)
        .build()
        .expect("a filter of this size")
}

impl Gateway {
    /// The filter, its version, and whether its "absent" holds: not while
    /// a rebuild runs, since the keys whose inserts failed (and any written
    /// since) are missing from it until the swap. Read under one lock, so
    /// the three agree.
    fn filter(&self) -> (Arc<CuckooFilter>, u32, bool) {
        let c = self.current.read().unwrap_or_else(|e| e.into_inner());
        let rebuilding = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        (Arc::clone(&c.filter), c.version, !rebuilding)
    }

    /// Stores `key` and adds it to the filter; a failed add starts a
    /// rebuild in the background and returns at once.
    fn write(self: &Arc<Self>, con: &mut redis::Connection, key: &str, value: &str) {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query(con)
            .expect("SET");
        // The read lock spans the add and the pending log, so the swap
        // (write lock) cannot fall between them and lose the key.
        let c = self.current.read().unwrap_or_else(|e| e.into_inner());
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(log) = pending.as_mut() {
            log.push(key.to_owned());
        }
        if c.filter.insert(key).is_err() && pending.is_none() {
            *pending = Some(vec![key.to_owned()]);
            let me = Arc::clone(self);
            let capacity = c.filter.capacity() * 2;
            std::thread::spawn(move || me.rebuild(capacity));
        }
    }

    /// Builds a larger filter from the store, replays the writes logged
    /// meanwhile, and swaps it in.
    fn rebuild(&self, capacity: usize) {
        let next = fixed_filter(capacity);
        let mut con = self.redis.get_connection().expect("connect");
        let keys: Vec<String> = redis::cmd("SCAN")
            .cursor_arg(0)
            .arg("MATCH")
            .arg("user:*")
            .arg("COUNT")
            .arg(1000)
            .clone()
            .iter(&mut con)
            .expect("SCAN")
            .collect();
        // `insert_unique`: a key both scanned and logged goes in once.
        for k in &keys {
            let _ = next.insert_unique(k.as_str());
        }
        let mut c = self.current.write().unwrap_or_else(|e| e.into_inner());
        let log = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        for k in log.unwrap_or_default() {
            let _ = next.insert_unique(k.as_str());
        }
        c.filter = Arc::new(next);
        c.version += 1;
        eprintln!(
            "rebuild: version {} with {} slots from {} stored keys",
            c.version,
            c.filter.capacity(),
            keys.len()
        );
    }

    fn read(
        &self,
        con: &mut redis::Connection,
        cache: &mut HashMap<String, String>,
        key: &str,
    ) -> Record {
        let start = Instant::now();
        let (filter, version, absent_holds) = self.filter();
        let (found, source) = if absent_holds && !filter.contains(key) {
            (false, Source::Filter)
        } else if cache.contains_key(key) {
            (true, Source::Cache)
        } else {
            let value: Option<String> = redis::cmd("GET").arg(key).query(con).expect("GET");
            if let Some(v) = &value {
                if cache.len() >= CACHE_ENTRIES {
                    cache.clear();
                }
                cache.insert(key.to_owned(), v.clone());
            }
            (value.is_some(), Source::Store)
        };
        Record {
            version,
            seed: filter.seed(),
            found,
            latency: start.elapsed(),
            source,
        }
    }
}

/// A redis-server of our own on a free loopback port, if no URL is given.
fn own_server() -> (String, Child) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .expect("start redis-server (or pass a redis:// URL)");
    (format!("redis://127.0.0.1:{port}/"), child)
}

fn main() {
    let (url, mut server) = match std::env::args().nth(1) {
        Some(url) => (url, None),
        None => {
            let (url, child) = own_server();
            (url, Some(child))
        }
    };
    let client = redis::Client::open(url.as_str()).expect("a redis:// URL");
    let mut con = (0..100)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            client.get_connection().ok()
        })
        .expect("connect to Redis");
    let gw = Arc::new(Gateway {
        current: RwLock::new(Current {
            filter: Arc::new(fixed_filter(FIRST_CAPACITY)),
            version: 1,
        }),
        pending: Mutex::new(None),
        redis: client,
    });

    // Writes and reads interleaved: each key is written once, spread over
    // the requests; half of the reads ask for keys never written.
    let mut cache = HashMap::new();
    let mut records = Vec::with_capacity(REQUESTS as usize);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut written = 0;
    // Reads of stored keys answered "absent": must stay 0, rebuilds included.
    let mut stored_missed = 0u64;
    for r in 0..REQUESTS {
        while written <= r * KEYS / REQUESTS {
            gw.write(&mut con, &format!("user:{written}"), "profile");
            written += 1;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let stored = rng.is_multiple_of(2);
        let key = if stored {
            format!("user:{}", rng / 2 % written)
        } else {
            format!("absent:{}", rng / 2)
        };
        let record = gw.read(&mut con, &mut cache, &key);
        stored_missed += u64::from(stored && !record.found);
        records.push(record);
    }

    println!(
        "{:>6} {:>8} {:>20} {:>6} {:>10}  (first requests, then one in 10,000)",
        "source", "version", "seed", "found", "latency"
    );
    for rec in records.iter().take(3).chain(records.iter().step_by(10_000)) {
        println!(
            "{:>6} {:>8} {:>20} {:>6} {:>10?}",
            format!("{:?}", rec.source).to_lowercase(),
            rec.version,
            rec.seed,
            rec.found,
            rec.latency
        );
    }
    let false_positives = records
        .iter()
        .filter(|r| r.source == Source::Store && !r.found)
        .count();
    for source in [Source::Filter, Source::Cache, Source::Store] {
        let mut l: Vec<Duration> = records
            .iter()
            .filter(|r| r.source == source)
            .map(|r| r.latency)
            .collect();
        l.sort();
        let p = |q: f64| l.get(((l.len() as f64 * q) as usize).min(l.len().saturating_sub(1)));
        println!(
            "{:<7} {:>7} requests  p50 {:>10?}  p99 {:>10?}",
            format!("{source:?}").to_lowercase(),
            l.len(),
            p(0.5).copied().unwrap_or_default(),
            p(0.99).copied().unwrap_or_default()
        );
    }
    let (filter, version, _) = gw.filter();
    println!(
        "filter version {version}, {} items in {} slots; false positives met: {false_positives} store reads of absent keys",
        filter.len(),
        filter.capacity()
    );
    // No false negatives: every written key passes the filter in use.
    let missed = (0..KEYS)
        .filter(|i| !filter.contains(format!("user:{i}").as_str()))
        .count();
    println!("written keys the filter misses: {missed}; reads of stored keys answered absent: {stored_missed}");
    if let Some(child) = server.as_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
    if missed + stored_missed as usize > 0 {
        eprintln!("gateway: a stored key was answered absent");
        std::process::exit(1);
    }
}
