//! Argument parsing: RedisBloom's keywords, numbers and range checks, each
//! failure a Redis error reply (never a panic).

use redis_module::{RedisError, RedisString};

/// An error reply with RedisBloom's text.
pub fn err(text: &str) -> RedisError {
    RedisError::String(text.to_owned())
}

/// Whether `arg` is `keyword`, ignoring ASCII case.
pub fn is(arg: &RedisString, keyword: &str) -> bool {
    arg.as_slice().eq_ignore_ascii_case(keyword.as_bytes())
}

/// A base-10 integer, or `error` as the reply.
pub fn integer(arg: &RedisString, error: &str) -> Result<i64, RedisError> {
    std::str::from_utf8(arg.as_slice())
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| err(error))
}

/// An unsigned 64-bit integer (koel's SEED), or `error` as the reply.
pub fn unsigned(arg: &RedisString, error: &str) -> Result<u64, RedisError> {
    std::str::from_utf8(arg.as_slice())
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| err(error))
}

/// A finite floating-point number, or `error` as the reply.
pub fn float(arg: &RedisString, error: &str) -> Result<f64, RedisError> {
    std::str::from_utf8(arg.as_slice())
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|x| x.is_finite())
        .ok_or_else(|| err(error))
}

/// `value` within `lo..=hi`, or the reply `"<name>: value must be in the
/// range [lo, hi]"` (RedisBloom's wording for CF.RESERVE's options).
pub fn in_range(name: &str, value: i64, lo: i64, hi: i64) -> Result<i64, RedisError> {
    if (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        Err(RedisError::String(format!(
            "{name}: value must be in the range [{lo}, {hi}]"
        )))
    }
}
