//! The Redis data types and their callbacks: RDB save and load (also
//! DUMP / RESTORE and full resynchronisation), AOF rewrite, MEMORY
//! USAGE, COPY, and free on delete.
//!
//! Every callback catches panics (none is expected: a panic must not
//! unwind into Redis) and every load checks the bytes completely (module
//! header checksum, then koel's own header, payload and checksum): a
//! corrupt value makes the load return NULL, which Redis turns into an
//! error (RESTORE: "Bad data format"), never a half-loaded filter.

use crate::bfkey::BfKey;
use crate::cfkey::CfKey;
use crate::encoding::{self, Kind};
use redis_module::native_types::RedisType;
use redis_module::raw;
use std::ffi::{c_int, c_longlong, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The encoding version passed to `rdb_load` (the bytes carry their own).
const ENCODING_VERSION: i32 = 0;
/// AOF rewrite and CF.SCANDUMP cut the bytes into chunks of this size
/// (RedisBloom's largest SCANDUMP chunk).
pub const CHUNK: usize = 16 << 20;

/// A value saved as bytes: what the callbacks need of each type.
pub trait Saved: Sized {
    /// The command that re-creates it from chunks, for AOF rewrite.
    const LOADCHUNK: &'static CStr;
    /// Its bytes (for a partial load: the bytes received so far).
    fn encode(&self) -> std::io::Result<Vec<u8>>;
    fn decode(bytes: &[u8]) -> Result<Self, String>;
    fn memory(&self) -> usize;
    fn duplicate(&self) -> Self;
    /// The LOADCHUNK command and bytes that AOF rewrite emits for
    /// `encoded` (this value's `encode`).
    fn rewrite<'a>(&self, encoded: &'a [u8]) -> (&'static CStr, &'a [u8]) {
        (Self::LOADCHUNK, encoded)
    }
}

impl Saved for CfKey {
    const LOADCHUNK: &'static CStr = c"CF.LOADCHUNK";
    fn encode(&self) -> std::io::Result<Vec<u8>> {
        CfKey::encode(self)
    }
    fn decode(bytes: &[u8]) -> Result<Self, String> {
        CfKey::decode(bytes)
    }
    fn memory(&self) -> usize {
        CfKey::memory(self)
    }
    fn duplicate(&self) -> Self {
        CfKey {
            filter: self.filter.clone(),
            options: self.options,
            deleted: self.deleted,
        }
    }
}

impl Saved for BfKey {
    const LOADCHUNK: &'static CStr = c"BF.LOADCHUNK";
    fn encode(&self) -> std::io::Result<Vec<u8>> {
        BfKey::encode(self)
    }
    fn decode(bytes: &[u8]) -> Result<Self, String> {
        BfKey::decode(bytes)
    }
    fn memory(&self) -> usize {
        BfKey::memory(self)
    }
    fn duplicate(&self) -> Self {
        BfKey {
            options: self.options,
            seed: self.seed,
            layers: self
                .layers
                .iter()
                .map(|l| crate::bfkey::Layer {
                    filter: l.filter.clone(),
                    items: l.items,
                })
                .collect(),
        }
    }
}

/// A filter arriving in CF.LOADCHUNK / BF.LOADCHUNK chunks: the bytes so
/// far. A key in this state answers the filter commands with WRONGTYPE
/// until its last chunk arrives.
pub struct Partial {
    pub kind: Kind,
    pub total: u64,
    pub bytes: Vec<u8>,
}

impl Saved for Partial {
    // Unused: `rewrite` names the command of the partial's kind.
    const LOADCHUNK: &'static CStr = c"CF.LOADCHUNK";
    fn encode(&self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.bytes.len() + 1);
        out.push(self.kind as u8);
        out.extend_from_slice(&self.bytes);
        Ok(out)
    }
    fn decode(bytes: &[u8]) -> Result<Self, String> {
        let kind = match bytes.first() {
            Some(1) => Kind::Cuckoo,
            Some(2) => Kind::Bloom,
            _ => return Err("unknown partial kind".into()),
        };
        let (total, _) = encoding::header(kind, &bytes[1..])?;
        if bytes.len() as u64 > total {
            return Err("a partial load longer than its filter".into());
        }
        Ok(Partial {
            kind,
            total,
            bytes: bytes[1..].to_vec(),
        })
    }
    fn memory(&self) -> usize {
        std::mem::size_of::<Partial>() + self.bytes.capacity()
    }
    /// Its own kind's LOADCHUNK of the bytes received, without the kind
    /// byte `encode` puts first.
    fn rewrite<'a>(&self, encoded: &'a [u8]) -> (&'static CStr, &'a [u8]) {
        let command = match self.kind {
            Kind::Cuckoo => CfKey::LOADCHUNK,
            Kind::Bloom => BfKey::LOADCHUNK,
        };
        (command, &encoded[1..])
    }
    fn duplicate(&self) -> Self {
        Partial {
            kind: self.kind,
            total: self.total,
            bytes: self.bytes.clone(),
        }
    }
}

const fn methods<T: Saved>() -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load::<T>),
        rdb_save: Some(rdb_save::<T>),
        aof_rewrite: Some(aof_rewrite::<T>),
        mem_usage: Some(mem_usage::<T>),
        digest: None,
        free: Some(free::<T>),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy::<T>),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    }
}

// Type names are exactly 9 characters. RedisBloom's are MBbloomCF and
// MBbloom--: an RDB file holding RedisBloom's values names a type this
// module does not register, so Redis refuses it instead of misreading it.
pub static CF_TYPE: RedisType = RedisType::new("koel---CF", ENCODING_VERSION, methods::<CfKey>());
pub static BF_TYPE: RedisType = RedisType::new("koel---BF", ENCODING_VERSION, methods::<BfKey>());
pub static PARTIAL_TYPE: RedisType =
    RedisType::new("koel-part", ENCODING_VERSION, methods::<Partial>());

/// Runs a callback body; a panic becomes `fallback`.
fn shielded<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

unsafe extern "C" fn rdb_load<T: Saved>(
    rdb: *mut raw::RedisModuleIO,
    encver: c_int,
) -> *mut c_void {
    shielded(std::ptr::null_mut(), || {
        if encver != ENCODING_VERSION {
            return std::ptr::null_mut();
        }
        // An I/O error (truncated input) is an `Err` here: the module
        // handles I/O errors (`lib.rs`), so Redis does not abort.
        let Ok(buffer) = raw::load_string_buffer(rdb) else {
            return std::ptr::null_mut();
        };
        match T::decode(buffer.as_ref()) {
            Ok(v) => Box::into_raw(Box::new(v)).cast(),
            Err(reason) => {
                log_refusal(&reason);
                std::ptr::null_mut()
            }
        }
    })
}

fn log_refusal(reason: &str) {
    redis_module::logging::log_warning(format!("koel: refused a saved filter: {reason}"));
}

unsafe extern "C" fn rdb_save<T: Saved>(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    shielded((), || {
        // SAFETY: Redis passes a value this type's callbacks created.
        let v = unsafe { &*value.cast::<T>() };
        // An error (impossible into a Vec) saves no bytes, which a load
        // refuses: never a wrong filter.
        let bytes = v.encode().unwrap_or_default();
        raw::save_slice(rdb, &bytes);
    })
}

unsafe extern "C" fn aof_rewrite<T: Saved>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    shielded((), || {
        // SAFETY: as in `rdb_save`.
        let v = unsafe { &*value.cast::<T>() };
        let Ok(bytes) = v.encode() else { return };
        let (command, bytes) = v.rewrite(&bytes);
        // One LOADCHUNK per chunk, each with the offset its chunk ends at.
        let mut end = 0usize;
        for chunk in bytes.chunks(CHUNK) {
            end += chunk.len();
            // SAFETY: EmitAOF is set once the module is loaded; format
            // "slb" takes a RedisModuleString, a long long, and a buffer
            // as pointer plus length, which are the arguments passed.
            unsafe {
                raw::RedisModule_EmitAOF.unwrap()(
                    aof,
                    command.as_ptr(),
                    c"slb".as_ptr(),
                    key,
                    end as c_longlong,
                    chunk.as_ptr(),
                    chunk.len(),
                );
            }
        }
    })
}

unsafe extern "C" fn mem_usage<T: Saved>(value: *const c_void) -> usize {
    // SAFETY: as in `rdb_save`.
    shielded(0, || unsafe { &*value.cast::<T>() }.memory())
}

unsafe extern "C" fn free<T: Saved>(value: *mut c_void) {
    // SAFETY: Redis frees each value once, and it came from `Box::new`.
    shielded((), || drop(unsafe { Box::from_raw(value.cast::<T>()) }))
}

unsafe extern "C" fn copy<T: Saved>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // A failed copy (allocation) returns NULL, which COPY reports as an
    // error.
    shielded(std::ptr::null_mut(), || {
        // SAFETY: as in `rdb_save`.
        let v = unsafe { &*value.cast::<T>() };
        Box::into_raw(Box::new(v.duplicate())).cast()
    })
}
