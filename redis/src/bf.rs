//! The `BF.*` commands, with RedisBloom's arguments, replies and error
//! texts.
//!
//! Replication: a command that creates a filter first propagates a
//! `BF.RESERVE ... SEED <seed>` with the seed it drew, then itself
//! verbatim: Bloom adds are deterministic given the seed (a full
//! non-scaling filter refuses at the same item on every replica).

use crate::args::{self, err};
use crate::bfkey::{AddError, BfKey, Options};
use crate::datatype::BF_TYPE;
use crate::keys;
use redis_module::key::RedisKeyWritable;
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

const MAX_CAPACITY: i64 = 1 << 30;
const MAX_EXPANSION: i64 = 32768;
/// RedisBloom caps a requested error rate at 0.25.
const ERROR_RATE_CAP: f64 = 0.25;

fn writable<'a>(key: &RedisKeyWritable) -> Result<Option<&'a mut BfKey>, RedisError> {
    keys::writable(key, &BF_TYPE)
}

fn reading<R>(
    ctx: &Context,
    key: &RedisString,
    f: impl FnOnce(Option<&BfKey>) -> R,
) -> Result<R, RedisError> {
    keys::reading(ctx, key, &BF_TYPE, f)
}

/// BF.RESERVE key error_rate capacity [EXPANSION n] [NONSCALING] [SEED n]
pub fn reserve(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if !(4..=9).contains(&args.len()) {
        return Err(RedisError::WrongArity);
    }
    let rate = args::float(&args[2], "ERR bad error rate")?;
    if !(rate > 0.0 && rate < 1.0) {
        return Err(err(
            "ERR error rate must be in the range (0.000000, 1.000000)",
        ));
    }
    let capacity = args::integer(&args[3], "ERR bad capacity")?;
    if !(1..=MAX_CAPACITY).contains(&capacity) {
        return Err(RedisError::String(format!(
            "ERR capacity must be in the range [1, {MAX_CAPACITY}]"
        )));
    }
    let mut nonscaling = false;
    let mut expansion = None;
    let mut seed = None;
    let mut at = 4;
    while let Some(arg) = args.get(at) {
        if args::is(arg, "NONSCALING") {
            nonscaling = true;
            at += 1;
        } else if args::is(arg, "EXPANSION") {
            let v = args.get(at + 1).ok_or_else(|| err("ERR no expansion"))?;
            expansion = Some(args::integer(v, "ERR bad expansion")?);
            at += 2;
        } else if args::is(arg, "SEED") {
            let v = args.get(at + 1).ok_or(RedisError::WrongArity)?;
            seed = Some(args::unsigned(v, "ERR bad seed")?);
            at += 2;
        } else {
            return Err(err("Unknown argument received"));
        }
    }
    let expansion = match expansion {
        Some(0) => 0,
        Some(_) if nonscaling => return Err(err("Nonscaling filters cannot expand")),
        Some(e) if !(0..=MAX_EXPANSION).contains(&e) => {
            return Err(RedisError::String(format!(
                "ERR expansion must be in the range [0, {MAX_EXPANSION}]"
            )))
        }
        Some(e) => e as u64,
        None if nonscaling => 0,
        None => crate::bfkey::DEFAULT_EXPANSION as u64,
    };
    let o = Options {
        error_rate: rate.min(ERROR_RATE_CAP),
        capacity: capacity as u64,
        expansion,
    };
    let key = ctx.open_key_writable(&args[1]);
    if writable(&key)?.is_some() {
        return Err(err("ERR item exists"));
    }
    let value = BfKey::create(o, seed).map_err(|_| err("ERR could not create filter"))?;
    let seed = value.seed;
    key.set_value(&BF_TYPE, value)?;
    replicate_reserve(ctx, &args[1], &o, seed);
    Ok(RedisValue::SimpleStringStatic("OK"))
}

fn replicate_reserve(ctx: &Context, key: &RedisString, o: &Options, seed: u64) {
    let s = [
        // `{:e}` prints the shortest string that parses back exactly.
        format!("{:e}", o.error_rate),
        o.capacity.to_string(),
        o.expansion.to_string(),
        seed.to_string(),
    ];
    let args: [&[u8]; 7] = [
        key.as_slice(),
        s[0].as_bytes(),
        s[1].as_bytes(),
        b"EXPANSION",
        s[2].as_bytes(),
        b"SEED",
        s[3].as_bytes(),
    ];
    ctx.replicate("BF.RESERVE", &args[..]);
}

struct Insert<'a> {
    key: &'a RedisString,
    items: &'a [RedisString],
    multi: bool,
    create: Option<Options>,
}

/// BF.ADD key item
pub fn add(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    insert_common(
        ctx,
        Insert {
            key: &args[1],
            items: &args[2..],
            multi: false,
            create: Some(Options::default()),
        },
    )
}

/// BF.MADD key item...
pub fn madd(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    insert_common(
        ctx,
        Insert {
            key: &args[1],
            items: &args[2..],
            multi: true,
            create: Some(Options::default()),
        },
    )
}

/// BF.INSERT key [CAPACITY n] [ERROR rate] [EXPANSION n] [NOCREATE]
/// [NONSCALING] ITEMS item...
pub fn insert(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let mut o = Options::default();
    let mut create = true;
    let mut nonscaling = false;
    let mut at = 2;
    let items = loop {
        let Some(arg) = args.get(at) else {
            return Err(RedisError::WrongArity);
        };
        let value = || args.get(at + 1).ok_or(RedisError::WrongArity);
        if args::is(arg, "ITEMS") {
            break &args[at + 1..];
        } else if args::is(arg, "CAPACITY") {
            let c = args::integer(value()?, "Bad capacity")?;
            if !(1..=MAX_CAPACITY).contains(&c) {
                return Err(err("Bad capacity"));
            }
            o.capacity = c as u64;
            at += 2;
        } else if args::is(arg, "ERROR") {
            let r = args::float(value()?, "Bad error rate")?;
            if !(r > 0.0 && r < 1.0) {
                return Err(err("Bad error rate"));
            }
            o.error_rate = r.min(ERROR_RATE_CAP);
            at += 2;
        } else if args::is(arg, "EXPANSION") {
            let e = args::integer(value()?, "Bad expansion")?;
            if !(0..=MAX_EXPANSION).contains(&e) {
                return Err(err("Bad expansion"));
            }
            o.expansion = e as u64;
            at += 2;
        } else if args::is(arg, "NOCREATE") {
            create = false;
            at += 1;
        } else if args::is(arg, "NONSCALING") {
            nonscaling = true;
            at += 1;
        } else {
            return Err(err("Unknown argument received"));
        }
    };
    // A flag in any position, as in RedisBloom: a later EXPANSION does
    // not undo it.
    if nonscaling {
        o.expansion = 0;
    }
    if items.is_empty() {
        return Err(RedisError::WrongArity);
    }
    insert_common(
        ctx,
        Insert {
            key: &args[1],
            items,
            multi: true,
            create: create.then_some(o),
        },
    )
}

fn insert_common(ctx: &Context, ins: Insert<'_>) -> RedisResult {
    let key = ctx.open_key_writable(ins.key);
    let value = match writable(&key)? {
        Some(v) => v,
        None => {
            let Some(o) = ins.create else {
                return Err(err("ERR not found"));
            };
            let v = BfKey::create(o, None).map_err(|_| err("ERR could not create filter"))?;
            let seed = v.seed;
            key.set_value(&BF_TYPE, v)?;
            replicate_reserve(ctx, ins.key, &o, seed);
            writable(&key)?.ok_or_else(|| err("ERR could not create filter"))?
        }
    };
    // RedisBloom stops at a full non-scaling filter and goes on after
    // other errors; each error is an element of the array reply.
    let mut replies = Vec::with_capacity(ins.items.len());
    for item in ins.items {
        match value.add(item.as_slice()) {
            Ok(added) => replies.push(RedisValue::Bool(added)),
            Err(AddError::Full) => {
                replies.push(RedisValue::StaticError("ERR non scaling filter is full"));
                break;
            }
            Err(AddError::Layer(_)) => {
                replies.push(RedisValue::StaticError("ERR problem inserting into filter"))
            }
        }
    }
    ctx.replicate_verbatim();
    if ins.multi {
        return Ok(RedisValue::Array(replies));
    }
    match replies.pop() {
        Some(RedisValue::StaticError(e)) => Err(err(e)),
        Some(reply) => Ok(reply),
        None => Err(RedisError::WrongArity),
    }
}

/// BF.EXISTS key item
pub fn exists(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let found = reading(ctx, &args[1], |v| {
        v.is_some_and(|v| v.contains(args[2].as_slice()))
    })?;
    Ok(RedisValue::Bool(found))
}

/// BF.MEXISTS key item...
pub fn mexists(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    reading(ctx, &args[1], |v| {
        RedisValue::Array(
            args[2..]
                .iter()
                .map(|item| RedisValue::Bool(v.is_some_and(|v| v.contains(item.as_slice()))))
                .collect(),
        )
    })
}

/// BF.CARD key: items added; 0 for a missing key.
pub fn card(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let n = reading(ctx, &args[1], |v| v.map_or(0, BfKey::items))?;
    Ok(RedisValue::Integer(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]
pub fn info(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 2 && args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let fields = reading(ctx, &args[1], |v| {
        v.map(|v| {
            let int = |n: u64| RedisValue::Integer(i64::try_from(n).unwrap_or(i64::MAX));
            let expansion = match v.options.expansion {
                0 => RedisValue::Null,
                e => int(e),
            };
            [
                ("CAPACITY", "Capacity", int(v.capacity())),
                ("SIZE", "Size", int(v.memory() as u64)),
                ("FILTERS", "Number of filters", int(v.layers.len() as u64)),
                ("ITEMS", "Number of items inserted", int(v.items())),
                ("EXPANSION", "Expansion rate", expansion),
            ]
        })
    })?;
    let fields = fields.ok_or_else(|| err("ERR not found"))?;
    if let Some(which) = args.get(2) {
        let field = fields.into_iter().find(|(k, _, _)| args::is(which, k));
        return match field {
            Some((_, _, value)) => Ok(RedisValue::Array(vec![value])),
            None => Err(err("Invalid information value")),
        };
    }
    Ok(RedisValue::Array(
        fields
            .into_iter()
            .flat_map(|(_, name, value)| [RedisValue::SimpleStringStatic(name), value])
            .collect(),
    ))
}
