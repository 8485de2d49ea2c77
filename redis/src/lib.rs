//! koel as a Redis module: RedisBloom's `CF.*` and `BF.*` commands over
//! koel's cuckoo and Bloom filters. Build with `cargo build --release -p
//! koel-redis`, load with `redis-server --loadmodule
//! target/release/libkoel_redis.so`; `redis/README.md` has the command
//! table against RedisBloom and the guarantees.
//!
//! One file per concept: `args` (parsing), `encoding` (the saved bytes),
//! `cfkey` / `bfkey` (the values), `keys` (opening them), `datatype` (RDB, AOF, COPY, MEMORY
//! callbacks), `cf` / `bf` (commands), `dump` (SCANDUMP / LOADCHUNK).

// Unit tests build without the module registration, so the command
// functions are unused there.
#![cfg_attr(test, allow(dead_code))]

mod args;
mod bf;
mod bfkey;
mod cf;
mod cfkey;
mod datatype;
mod dump;
mod encoding;
mod keys;

#[cfg(not(test))]
use datatype::{BF_TYPE, CF_TYPE, PARTIAL_TYPE};
use redis_module::{Context, RedisError, RedisResult, RedisString, Status};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs a command; a panic (none is expected) becomes an error reply
/// instead of unwinding into Redis.
fn guarded(
    ctx: &Context,
    args: Vec<RedisString>,
    command: fn(&Context, Vec<RedisString>) -> RedisResult,
) -> RedisResult {
    catch_unwind(AssertUnwindSafe(|| command(ctx, args)))
        .unwrap_or_else(|_| Err(RedisError::Str("ERR koel: internal error")))
}

macro_rules! commands {
    ($($name:ident => $path:path),* $(,)?) => {
        $(fn $name(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
            guarded(ctx, args, $path)
        })*
    };
}

commands! {
    cf_reserve => cf::reserve,
    cf_add => cf::add,
    cf_addnx => cf::addnx,
    cf_insert => cf::insert,
    cf_insertnx => cf::insertnx,
    cf_exists => cf::exists,
    cf_mexists => cf::mexists,
    cf_count => cf::count,
    cf_del => cf::del,
    cf_info => cf::info,
    cf_scandump => dump::cf_scandump,
    cf_loadchunk => dump::cf_loadchunk,
    bf_reserve => bf::reserve,
    bf_add => bf::add,
    bf_madd => bf::madd,
    bf_insert => bf::insert,
    bf_exists => bf::exists,
    bf_mexists => bf::mexists,
    bf_card => bf::card,
    bf_info => bf::info,
    bf_scandump => dump::bf_scandump,
    bf_loadchunk => dump::bf_loadchunk,
}

/// A truncated or unreadable RDB value becomes a failed load (the load
/// functions see an error) instead of Redis aborting the process.
fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    ctx.set_module_options(redis_module::ModuleOptions::HANDLE_IO_ERRORS);
    Status::Ok
}

// Not in unit tests: the module's allocator is Redis's, which exists only
// inside redis-server.
#[cfg(not(test))]
redis_module::redis_module! {
    name: "koel",
    version: 1,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [CF_TYPE, BF_TYPE, PARTIAL_TYPE],
    init: init,
    commands: [
        ["CF.RESERVE", cf_reserve, "write deny-oom", 1, 1, 1, ""],
        ["CF.ADD", cf_add, "write deny-oom", 1, 1, 1, ""],
        ["CF.ADDNX", cf_addnx, "write deny-oom", 1, 1, 1, ""],
        ["CF.INSERT", cf_insert, "write deny-oom", 1, 1, 1, ""],
        ["CF.INSERTNX", cf_insertnx, "write deny-oom", 1, 1, 1, ""],
        ["CF.EXISTS", cf_exists, "readonly fast", 1, 1, 1, ""],
        ["CF.MEXISTS", cf_mexists, "readonly fast", 1, 1, 1, ""],
        ["CF.COUNT", cf_count, "readonly fast", 1, 1, 1, ""],
        ["CF.DEL", cf_del, "write fast", 1, 1, 1, ""],
        ["CF.INFO", cf_info, "readonly fast", 1, 1, 1, ""],
        ["CF.SCANDUMP", cf_scandump, "readonly", 1, 1, 1, ""],
        ["CF.LOADCHUNK", cf_loadchunk, "write deny-oom", 1, 1, 1, ""],
        ["BF.RESERVE", bf_reserve, "write deny-oom", 1, 1, 1, ""],
        ["BF.ADD", bf_add, "write deny-oom", 1, 1, 1, ""],
        ["BF.MADD", bf_madd, "write deny-oom", 1, 1, 1, ""],
        ["BF.INSERT", bf_insert, "write deny-oom", 1, 1, 1, ""],
        ["BF.EXISTS", bf_exists, "readonly fast", 1, 1, 1, ""],
        ["BF.MEXISTS", bf_mexists, "readonly fast", 1, 1, 1, ""],
        ["BF.CARD", bf_card, "readonly fast", 1, 1, 1, ""],
        ["BF.INFO", bf_info, "readonly fast", 1, 1, 1, ""],
        ["BF.SCANDUMP", bf_scandump, "readonly", 1, 1, 1, ""],
        ["BF.LOADCHUNK", bf_loadchunk, "write deny-oom", 1, 1, 1, ""],
    ],
}
