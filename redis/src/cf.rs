//! The `CF.*` commands, with RedisBloom's arguments, replies and error
//! texts (see `redis/README.md` for where koel differs).
//!
//! Replication: a command that creates a filter first propagates a
//! `CF.RESERVE ... SEED <seed>` with the seed it drew, so replicas and the
//! AOF build the same filter; then the command itself, verbatim if every
//! item succeeded, or else a `CF.INSERT`/`CF.INSERTNX ... NOCREATE ITEMS`
//! of the items that changed the filter. A replica thus replays exactly
//! the successful writes on an identical filter, and koel's writes are
//! deterministic given the table words (see `CfKey::write`).

use crate::args::{self, err};
use crate::cfkey::{CfKey, Options};
use crate::datatype::CF_TYPE;
use crate::keys;
use koel::InsertError;
use redis_module::{
    key::RedisKeyWritable, Context, ContextFlags, RedisError, RedisResult, RedisString, RedisValue,
};

/// The largest capacity RedisBloom accepts.
const MAX_CAPACITY: i64 = 1 << 30;

fn writable<'a>(key: &RedisKeyWritable) -> Result<Option<&'a mut CfKey>, RedisError> {
    keys::writable(key, &CF_TYPE)
}

fn reading<R>(
    ctx: &Context,
    key: &RedisString,
    f: impl FnOnce(Option<&CfKey>) -> R,
) -> Result<R, RedisError> {
    keys::reading(ctx, key, &CF_TYPE, f)
}

fn resp3(ctx: &Context) -> bool {
    ctx.get_flags().contains(ContextFlags::FLAGS_RESP3)
}

/// CF.RESERVE key capacity [BUCKETSIZE n] [MAXITERATIONS n] [EXPANSION n]
/// [SEED n]
pub fn reserve(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 3 || args.len().is_multiple_of(2) {
        return Err(RedisError::WrongArity);
    }
    let capacity = args::integer(&args[2], "Bad capacity")?;
    let mut o = Options::default();
    let mut seed = None;
    for pair in args[3..].chunks(2) {
        let (name, value) = (&pair[0], &pair[1]);
        if args::is(name, "MAXITERATIONS") {
            let v = args::integer(value, "Couldn't parse MAXITERATIONS")?;
            o.max_iterations = args::in_range("MAXITERATIONS", v, 1, 65535)? as u64;
        } else if args::is(name, "BUCKETSIZE") {
            let v = args::integer(value, "Couldn't parse BUCKETSIZE")?;
            o.bucket_size = args::in_range("BUCKETSIZE", v, 1, 255)? as u64;
        } else if args::is(name, "EXPANSION") {
            let v = args::integer(value, "Couldn't parse EXPANSION")?;
            o.expansion = args::in_range("EXPANSION", v, 0, 32768)? as u64;
        } else if args::is(name, "SEED") {
            seed = Some(args::unsigned(value, "Couldn't parse SEED")?);
        } else {
            return Err(err("Unknown argument received"));
        }
    }
    if (o.bucket_size as i64) * 2 > capacity || capacity > MAX_CAPACITY {
        return Err(RedisError::String(format!(
            "Capacity must be in the range [2 * BUCKETSIZE, {MAX_CAPACITY}]"
        )));
    }
    o.capacity = capacity as u64;
    let key = ctx.open_key_writable(&args[1]);
    if writable(&key)?.is_some() {
        return Err(err("ERR item exists"));
    }
    let value = CfKey::create(o, seed).map_err(|_| err("ERR Could not create filter"))?;
    let seed = value.filter.seed();
    key.set_value(&CF_TYPE, value)?;
    replicate_reserve(ctx, &args[1], &o, seed);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// Propagates the creation of a filter with its seed.
fn replicate_reserve(ctx: &Context, key: &RedisString, o: &Options, seed: u64) {
    let strings = [
        o.capacity.to_string(),
        o.bucket_size.to_string(),
        o.max_iterations.to_string(),
        o.expansion.to_string(),
        seed.to_string(),
    ];
    let args: [&[u8]; 10] = [
        key.as_slice(),
        strings[0].as_bytes(),
        b"BUCKETSIZE",
        strings[1].as_bytes(),
        b"MAXITERATIONS",
        strings[2].as_bytes(),
        b"EXPANSION",
        strings[3].as_bytes(),
        b"SEED",
        strings[4].as_bytes(),
    ];
    ctx.replicate("CF.RESERVE", &args[..]);
}

struct Insert<'a> {
    key: &'a RedisString,
    items: &'a [RedisString],
    unique: bool,
    /// CF.INSERT / CF.INSERTNX (an array reply) rather than CF.ADD(NX).
    multi: bool,
    create: Option<i64>,
}

/// CF.ADD key item
pub fn add(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    add_one(ctx, args, false)
}

/// CF.ADDNX key item
pub fn addnx(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    add_one(ctx, args, true)
}

fn add_one(ctx: &Context, args: Vec<RedisString>, unique: bool) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    insert_common(
        ctx,
        Insert {
            key: &args[1],
            items: &args[2..],
            unique,
            multi: false,
            create: Some(crate::cfkey::DEFAULT_CAPACITY),
        },
    )
}

/// CF.INSERT key [CAPACITY n] [NOCREATE] ITEMS item...
pub fn insert(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    insert_many(ctx, args, false)
}

/// CF.INSERTNX key [CAPACITY n] [NOCREATE] ITEMS item...
pub fn insertnx(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    insert_many(ctx, args, true)
}

fn insert_many(ctx: &Context, args: Vec<RedisString>, unique: bool) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let mut capacity = crate::cfkey::DEFAULT_CAPACITY;
    let mut create = true;
    let mut at = 2;
    let items = loop {
        let Some(arg) = args.get(at) else {
            return Err(RedisError::WrongArity);
        };
        if args::is(arg, "ITEMS") {
            break &args[at + 1..];
        } else if args::is(arg, "CAPACITY") {
            let v = args.get(at + 1).ok_or(RedisError::WrongArity)?;
            capacity = args::integer(v, "Bad capacity")?;
            if !(4..=MAX_CAPACITY).contains(&capacity) {
                return Err(RedisError::String(format!(
                    "Capacity must be in the range [BUCKETSIZE * 2, {MAX_CAPACITY}]"
                )));
            }
            at += 2;
        } else if args::is(arg, "NOCREATE") {
            create = false;
            at += 1;
        } else {
            return Err(err("Unknown argument received"));
        }
    };
    if items.is_empty() {
        return Err(RedisError::WrongArity);
    }
    insert_common(
        ctx,
        Insert {
            key: &args[1],
            items,
            unique,
            multi: true,
            create: create.then_some(capacity),
        },
    )
}

fn insert_common(ctx: &Context, ins: Insert<'_>) -> RedisResult {
    let key = ctx.open_key_writable(ins.key);
    let mut created = None;
    let value = match writable(&key)? {
        Some(v) => v,
        None => {
            let Some(capacity) = ins.create else {
                return Err(err("ERR not found"));
            };
            let o = Options {
                capacity: capacity as u64,
                ..Options::default()
            };
            let v = CfKey::create(o, None).map_err(|_| err("ERR Could not create filter"))?;
            created = Some((o, v.filter.seed()));
            key.set_value(&CF_TYPE, v)?;
            writable(&key)?.ok_or_else(|| err("ERR Could not create filter"))?
        }
    };
    let results: Vec<Result<bool, InsertError>> = ins
        .items
        .iter()
        .map(|item| value.insert(item.as_slice(), ins.unique))
        .collect();

    if let Some((o, seed)) = created {
        replicate_reserve(ctx, ins.key, &o, seed);
    }
    if results.iter().all(Result::is_ok) {
        ctx.replicate_verbatim();
    } else {
        let done: Vec<&[u8]> = ins
            .items
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .map(|(item, _)| item.as_slice())
            .collect();
        if !done.is_empty() {
            let mut rargs: Vec<&[u8]> = vec![ins.key.as_slice(), b"NOCREATE", b"ITEMS"];
            rargs.extend(done);
            let command = if ins.unique {
                "CF.INSERTNX"
            } else {
                "CF.INSERT"
            };
            ctx.replicate(command, &rargs[..]);
        }
    }

    if !ins.multi {
        return match results.into_iter().next() {
            Some(Ok(added)) => Ok(RedisValue::Bool(added)),
            Some(Err(e)) => Err(insert_error(&e)),
            None => Err(RedisError::WrongArity),
        };
    }
    let resp3 = resp3(ctx);
    Ok(RedisValue::Array(
        results
            .into_iter()
            .map(|r| match (r, ins.unique, resp3) {
                (Ok(added), true, _) => RedisValue::Integer(added as i64),
                (Ok(_), false, _) => RedisValue::Bool(true),
                (Err(_), false, true) => RedisValue::Bool(false),
                (Err(_), _, _) => RedisValue::Integer(-1),
            })
            .collect(),
    ))
}

fn insert_error(e: &InsertError) -> RedisError {
    match e {
        InsertError::AllocationFailed { .. } => err("ERR Insufficient memory"),
        _ => err("Filter is full"),
    }
}

/// CF.EXISTS key item
pub fn exists(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let found = reading(ctx, &args[1], |v| {
        v.is_some_and(|v| v.filter.contains(args[2].as_slice()))
    })?;
    Ok(RedisValue::Bool(found))
}

/// CF.MEXISTS key item...
pub fn mexists(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    reading(ctx, &args[1], |v| {
        RedisValue::Array(
            args[2..]
                .iter()
                .map(|item| RedisValue::Bool(v.is_some_and(|v| v.filter.contains(item.as_slice()))))
                .collect(),
        )
    })
}

/// CF.COUNT key item
pub fn count(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let n = reading(ctx, &args[1], |v| {
        v.map_or(0, |v| v.filter.count(args[2].as_slice()))
    })?;
    Ok(RedisValue::Integer(n as i64))
}

/// CF.DEL key item
pub fn del(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let key = ctx.open_key_writable(&args[1]);
    let Some(value) = writable(&key)? else {
        return Err(err("Not found"));
    };
    let removed = value.remove(args[2].as_slice());
    if removed {
        ctx.replicate_verbatim();
    }
    Ok(RedisValue::Bool(removed))
}

/// CF.INFO key: RedisBloom's eight fields, then koel's own.
pub fn info(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let fields = reading(ctx, &args[1], |v| {
        v.map(|v| {
            let f = &v.filter;
            let int = |n: u64| RedisValue::Integer(i64::try_from(n).unwrap_or(i64::MAX));
            vec![
                ("Size", int(v.memory() as u64)),
                (
                    "Number of buckets",
                    int((f.capacity() / f.tags_per_bucket() as usize) as u64),
                ),
                // A filter grown past its tag bits has levels above its
                // first table, as a scaling filter has sub-filters.
                ("Number of filters", int(f.levels_count() as u64)),
                ("Number of items inserted", int(f.len() as u64)),
                ("Number of items deleted", int(v.deleted)),
                ("Bucket size", int(f.tags_per_bucket().into())),
                ("Expansion rate", int(v.options.expansion)),
                ("Max iterations", int(v.options.max_iterations)),
                ("Fingerprint bits", int(f.fingerprint_bits().into())),
                ("Doublings", int(f.generation().into())),
                ("Seed", RedisValue::BulkString(f.seed().to_string())),
                (
                    "Expected false positive rate",
                    RedisValue::BulkString(format!("{:.3e}", f.false_positive_rate())),
                ),
            ]
        })
    })?;
    let fields = fields.ok_or_else(|| err("ERR not found"))?;
    Ok(RedisValue::Array(
        fields
            .into_iter()
            .flat_map(|(name, value)| [RedisValue::SimpleStringStatic(name), value])
            .collect(),
    ))
}
