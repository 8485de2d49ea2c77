//! Opening a key as one of the module's types: an empty key is `None`, a
//! key of any other type is a WRONGTYPE error reply.

use redis_module::key::RedisKeyWritable;
use redis_module::native_types::RedisType;
use redis_module::{Context, RedisError, RedisString};

/// The value at a key opened for writing.
pub fn writable<'a, T>(
    key: &RedisKeyWritable,
    ty: &RedisType,
) -> Result<Option<&'a mut T>, RedisError> {
    key.get_value::<T>(ty).map_err(|_| RedisError::WrongType)
}

/// Runs `f` on the value at `key`, opened for reading.
pub fn reading<T, R>(
    ctx: &Context,
    key: &RedisString,
    ty: &RedisType,
    f: impl FnOnce(Option<&T>) -> R,
) -> Result<R, RedisError> {
    let k = ctx.open_key(key);
    let v = k.get_value::<T>(ty).map_err(|_| RedisError::WrongType)?;
    Ok(f(v))
}
