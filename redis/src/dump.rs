//! CF.SCANDUMP / CF.LOADCHUNK and their BF twins: a filter's saved bytes
//! (`encoding.rs`) in chunks, as RedisBloom's clients loop over them:
//!
//! ```text
//! iter = 0
//! loop { (iter, data) = CF.SCANDUMP key iter; if iter == 0 break; store (iter, data) }
//! for (iter, data) in stored { CF.LOADCHUNK key iter data }
//! ```
//!
//! An iterator is the offset at which its chunk ends. The chunks must be
//! loaded in order; until the last one arrives the key holds a partial
//! load (other commands answer WRONGTYPE). The complete bytes are checked
//! as a whole (module header checksum, koel's header, payload and
//! checksum): a corrupt or mismatched chunk is refused with an error and
//! changes nothing. Chunks of a filter that changed between two SCANDUMP
//! calls do not fit together, and the last LOADCHUNK refuses them.

use crate::args::{self, err};
use crate::bfkey::BfKey;
use crate::cfkey::CfKey;
use crate::datatype::{Partial, Saved, BF_TYPE, CF_TYPE, CHUNK, PARTIAL_TYPE};
use crate::encoding::{self, Kind};
use crate::keys;
use redis_module::native_types::RedisType;
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

/// CF.SCANDUMP key iter
pub fn cf_scandump(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    scandump::<CfKey>(ctx, args, &CF_TYPE)
}

/// BF.SCANDUMP key iter
pub fn bf_scandump(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    scandump::<BfKey>(ctx, args, &BF_TYPE)
}

/// CF.LOADCHUNK key iter data
pub fn cf_loadchunk(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    loadchunk::<CfKey>(ctx, args, &CF_TYPE, Kind::Cuckoo)
}

/// BF.LOADCHUNK key iter data
pub fn bf_loadchunk(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    loadchunk::<BfKey>(ctx, args, &BF_TYPE, Kind::Bloom)
}

fn scandump<T: Saved>(ctx: &Context, args: Vec<RedisString>, ty: &RedisType) -> RedisResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let pos = args::integer(&args[2], "Invalid position")?;
    let Ok(start) = usize::try_from(pos) else {
        return Err(err("Invalid position"));
    };
    // Re-encoded on every call: O(filter) per chunk, no state between
    // calls (a chunk size of 16 MiB keeps the calls few).
    let bytes = keys::reading(ctx, &args[1], ty, |v: Option<&T>| v.map(T::encode))?
        .ok_or_else(|| err("ERR not found"))?
        .map_err(|_| err("ERR could not encode the filter"))?;
    if start >= bytes.len() {
        return Ok(RedisValue::Array(vec![
            RedisValue::Integer(0),
            RedisValue::Null,
        ]));
    }
    let end = bytes.len().min(start + CHUNK);
    Ok(RedisValue::Array(vec![
        RedisValue::Integer(end as i64),
        RedisValue::StringBuffer(bytes[start..end].to_vec()),
    ]))
}

fn loadchunk<T: Saved>(
    ctx: &Context,
    args: Vec<RedisString>,
    ty: &'static RedisType,
    kind: Kind,
) -> RedisResult {
    if args.len() != 4 {
        return Err(RedisError::WrongArity);
    }
    let pos = args::integer(&args[2], "Invalid position")?;
    let data = args[3].as_slice();
    let end = usize::try_from(pos)
        .ok()
        .filter(|&end| end >= data.len() && end > 0)
        .ok_or_else(|| err("Invalid position"))?;
    let start = end - data.len();
    let key = ctx.open_key_writable(&args[1]);
    // The bytes so far, from the key (a partial load) or none.
    let mut bytes = if start == 0 {
        if !key.is_empty() {
            return Err(err("ERR item exists"));
        }
        Vec::new()
    } else {
        let partial = key
            .get_value::<Partial>(&PARTIAL_TYPE)
            .map_err(|_| err("Invalid position"))?
            .filter(|p| p.kind == kind && p.bytes.len() == start)
            .ok_or_else(|| err("Invalid position"))?;
        partial.bytes.clone()
    };
    bytes.extend_from_slice(data);
    let (total, _) = encoding::header(kind, &bytes)
        .map_err(|reason| RedisError::String(format!("Invalid header: {reason}")))?;
    if (bytes.len() as u64) < total {
        // Not complete: keep what arrived (replacing any earlier partial).
        key.delete()?;
        key.set_value(&PARTIAL_TYPE, Partial { kind, total, bytes })?;
    } else {
        let value = T::decode(&bytes)
            .map_err(|reason| RedisError::String(format!("Couldn't load chunk! {reason}")))?;
        key.delete()?;
        key.set_value(ty, value)?;
    }
    ctx.replicate_verbatim();
    Ok(RedisValue::SimpleStringStatic("OK"))
}
