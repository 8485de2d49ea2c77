//! Starts `redis-server` processes with the module loaded, on free
//! loopback ports, each in its own temporary directory.
//!
//! Without `redis-server` on PATH a test prints a one-line notice and
//! passes, unless `KOEL_REQUIRE_REDIS=1` (CI), which makes it fail.

#![allow(dead_code)] // each test file uses part of this

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Whether the tests can run; `false` after printing the skip notice.
pub fn redis_available(test: &str) -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        if std::env::var("KOEL_REQUIRE_REDIS").as_deref() == Ok("1") {
            panic!("{test}: redis-server not found on PATH and KOEL_REQUIRE_REDIS=1");
        }
        eprintln!("{test}: skipped, redis-server not found on PATH");
    }
    found
}

/// The module built with this test's profile. The package is also an
/// rlib, so `cargo test` builds the library (both kinds) before the
/// integration tests, into `target/<profile>/deps/`, next to the test
/// binary; `cargo build` puts it in `target/<profile>/`.
pub fn module() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        let deps = exe.parent().expect("target/<profile>/deps");
        let candidates = [
            deps.join("libkoel_redis.so"),
            deps.join("../libkoel_redis.so"),
        ];
        candidates
            .iter()
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("libkoel_redis.so not found in {}", deps.display()))
            .clone()
    })
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

pub struct Server {
    pub port: u16,
    pub dir: tempfile::TempDir,
    child: Option<Child>,
    args: Vec<String>,
}

impl Server {
    /// A server with the module and `extra` configuration (`--name value`
    /// pairs), persistence off unless `extra` turns it on.
    pub fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut args: Vec<String> = [
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--enable-debug-command",
            "yes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut s = Server {
            port: free_port(),
            dir,
            child: None,
            args,
        };
        // Another process may take the free port before the server binds
        // it: then try another.
        for _ in 0..3 {
            match s.try_launch() {
                Ok(()) => return s,
                Err(_) => s.port = free_port(),
            }
        }
        s.launch();
        s
    }

    fn launch(&mut self) {
        if let Err(log) = self.try_launch() {
            panic!("redis-server exited: {log}");
        }
    }

    /// Starts the server and waits for PING; the log if it exited.
    fn try_launch(&mut self) -> Result<(), String> {
        let log = std::fs::File::create(self.dir.path().join("redis.log")).expect("log file");
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--loadmodule")
            .arg(module())
            .args(&self.args)
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut c) = self.try_connection() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return Ok(());
                }
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!("({status}) {}", self.log()));
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start: {}",
                self.log()
            );
            sleep(Duration::from_millis(20));
        }
    }

    /// The server's resident memory (Linux: VmRSS), in bytes.
    pub fn rss_bytes(&self) -> u64 {
        let pid = self.child.as_ref().expect("running").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kib * 1024
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    fn try_connection(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?
            .get_connection_with_timeout(Duration::from_secs(5))
    }

    pub fn connection(&self) -> redis::Connection {
        self.try_connection().expect("connect")
    }

    /// Stops the server with SHUTDOWN (which saves if persistence is on)
    /// and starts it again on the same port and directory.
    pub fn restart(&mut self) {
        let mut c = self.connection();
        let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut c);
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
        self.launch();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs a command, panicking with the command on a Redis error.
pub fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&[u8]]) -> T {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| {
        panic!(
            "{:?}: {e}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
        )
    })
}

/// The error text a command replies with (panics if it succeeds).
pub fn error(c: &mut redis::Connection, args: &[&[u8]]) -> String {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => {
            // The reply's full text: code and detail.
            match (e.code(), e.detail()) {
                (Some(code), Some(detail)) => format!("{code} {detail}"),
                (Some(code), None) => code.to_string(),
                _ => e.to_string(),
            }
        }
    }
}

/// The whole saved form of a key: CF.SCANDUMP's (or BF.SCANDUMP's) chunks
/// with their iterators.
pub fn scandump(c: &mut redis::Connection, command: &str, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut chunks = Vec::new();
    let mut iter = 0i64;
    loop {
        let (next, data): (i64, Option<Vec<u8>>) = redis::cmd(command)
            .arg(key)
            .arg(iter)
            .query(c)
            .expect("SCANDUMP");
        if next == 0 {
            return chunks;
        }
        chunks.push((next, data.unwrap_or_default()));
        iter = next;
    }
}

/// Item `i` as bytes.
pub fn item(i: u64) -> Vec<u8> {
    format!("item:{i}").into_bytes()
}

/// What a filter key answers and is: its SCANDUMP bytes and, for items
/// `0..n` (inserted or not), `CF.COUNT` (cuckoo) or `BF.EXISTS` (Bloom).
#[derive(Debug, PartialEq)]
pub struct Answers {
    pub bytes: Vec<(i64, Vec<u8>)>,
    pub answers: Vec<i64>,
}

pub fn answers(c: &mut redis::Connection, bloom: bool, key: &str, n: u64) -> Answers {
    let (dump, ask) = if bloom {
        ("BF.SCANDUMP", "BF.EXISTS")
    } else {
        ("CF.SCANDUMP", "CF.COUNT")
    };
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd(ask).arg(key).arg(item(i));
    }
    Answers {
        bytes: scandump(c, dump, key),
        answers: pipe.query(c).expect("pipelined lookups"),
    }
}

/// Sends `command key item(i)` for each `i`, one at a time; returns the
/// replies, errors as -2 (a pipeline reply with an error element is an
/// error as a whole in this client).
pub fn each_checked(
    c: &mut redis::Connection,
    command: &str,
    key: &str,
    items: impl Iterator<Item = u64>,
) -> Vec<i64> {
    items
        .map(|i| {
            redis::cmd(command)
                .arg(key)
                .arg(item(i))
                .query::<i64>(c)
                .unwrap_or(-2)
        })
        .collect()
}

/// Sends `command key item(i)` for each `i`, pipelined; returns the
/// replies. Panics on an error reply.
pub fn each(
    c: &mut redis::Connection,
    command: &str,
    key: &str,
    items: impl Iterator<Item = u64>,
) -> Vec<i64> {
    let mut pipe = redis::pipe();
    for i in items {
        pipe.cmd(command).arg(key).arg(item(i));
    }
    match pipe.query(c) {
        Ok(v) => v,
        Err(e) => panic!("{command}: {e}"),
    }
}

/// Polls `INFO section` until it contains `needle`.
pub fn wait_for_info(c: &mut redis::Connection, section: &str, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO").arg(section).query(c).expect("INFO");
        if info.contains(needle) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "INFO {section} never showed {needle}: {info}"
        );
        sleep(Duration::from_millis(50));
    }
}

/// An integer field of CF.INFO.
pub fn cf_info(c: &mut redis::Connection, key: &str, name: &str) -> i64 {
    let info: Vec<redis::Value> = redis::cmd("CF.INFO").arg(key).query(c).expect("CF.INFO");
    let at = info
        .iter()
        .position(|v| matches!(v, redis::Value::SimpleString(s) if s == name))
        .unwrap_or_else(|| panic!("CF.INFO has no {name}: {info:?}"));
    redis::from_redis_value(&info[at + 1]).expect("an integer")
}
