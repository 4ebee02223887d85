//! Channel schemas (`shmbus_schema`): what a channel's messages are, in MCAP's vocabulary
//! (message encoding, schema name, schema encoding, schema data). Each kind's config has a
//! `_set_schema` setter and each open channel a `_schema` getter; both are written out in
//! the kind's file and call the bodies here.

use std::ffi::{c_char, c_void};

use shmbus::Schema;

use crate::handle::*;
use crate::status::*;

/// A channel's schema as read by `shmbus_<kind>_schema`: pointers into the open channel
/// handle, valid until that handle is freed. The texts are UTF-8 without a terminating NUL
/// (print them with `"%.*s"`, (int)len, ptr); `data` may hold any bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmbus_schema {
    /// How each message's bytes are encoded (`cdr`, `protobuf`, `json`, ...); never empty.
    pub message_encoding: *const c_char,
    /// Its length in bytes.
    pub message_encoding_len: usize,
    /// The schema's name (`sensor_msgs/msg/Imu`); may be empty.
    pub name: *const c_char,
    /// Its length in bytes.
    pub name_len: usize,
    /// The schema's encoding (`ros2msg`, `protobuf`, ...); empty when there is no data.
    pub encoding: *const c_char,
    /// Its length in bytes.
    pub encoding_len: usize,
    /// The schema data (a message definition, a `FileDescriptorSet`, a JSON schema, ...).
    pub data: *const u8,
    /// Its length in bytes (at most `SHMBUS_SCHEMA_MAX_DATA`).
    pub data_len: usize,
}

/// Largest schema data, in bytes (1 MiB).
pub const SHMBUS_SCHEMA_MAX_DATA: usize = 1048576;
/// Largest message encoding, schema name or schema encoding, in bytes.
pub const SHMBUS_SCHEMA_MAX_TEXT: usize = 1024;

// Written out for cbindgen; the core's limits are the truth.
const _: () = assert!(SHMBUS_SCHEMA_MAX_DATA == Schema::MAX_DATA && SHMBUS_SCHEMA_MAX_TEXT == Schema::MAX_TEXT);

impl shmbus_schema {
    /// Nothing: NULL pointers and zero lengths.
    const NONE: shmbus_schema = shmbus_schema {
        message_encoding: std::ptr::null(),
        message_encoding_len: 0,
        name: std::ptr::null(),
        name_len: 0,
        encoding: std::ptr::null(),
        encoding_len: 0,
        data: std::ptr::null(),
        data_len: 0,
    };

    fn of(s: &Schema) -> shmbus_schema {
        shmbus_schema {
            message_encoding: s.message_encoding().as_ptr().cast(),
            message_encoding_len: s.message_encoding().len(),
            name: s.name().as_ptr().cast(),
            name_len: s.name().len(),
            encoding: s.encoding().as_ptr().cast(),
            encoding_len: s.encoding().len(),
            data: s.data().as_ptr(),
            data_len: s.data().len(),
        }
    }
}

/// The body of the `_set_schema` config setters: builds the schema from the C arguments
/// (`name` and `encoding` NULL: empty; `data` NULL with `data_len` 0: none) and sets it with
/// `apply`. An invalid schema is `SHMBUS_INVALID_CONFIG` and leaves the config as it was.
///
/// # Safety
/// `config` is NULL or live; each text NULL or NUL-terminated; `data` valid for `data_len`
/// bytes (or NULL with 0).
pub(crate) unsafe fn set_schema<W: Wrapper>(
    config: *mut W,
    message_encoding: *const c_char,
    name: *const c_char,
    encoding: *const c_char,
    data: *const c_void,
    data_len: usize,
    apply: impl FnOnce(W::Inner, Schema) -> W::Inner,
) -> shmbus_status
where
    W::Inner: Clone,
{
    guard(|| {
        // SAFETY: per the caller's contract.
        let schema = unsafe {
            let optional = |p: *const c_char, what| if p.is_null() { Ok("") } else { str_arg(p, what) };
            let message_encoding = str_arg(message_encoding, "message_encoding")?;
            let (name, encoding) = (optional(name, "schema_name")?, optional(encoding, "schema_encoding")?);
            let data = bytes_arg(data, data_len)?;
            Schema::new(message_encoding, name, encoding, data)
                .map_err(|e| Error::new(SHMBUS_INVALID_CONFIG, format_args!("invalid schema: {e}")))?
        };
        // SAFETY: per the caller's contract.
        unsafe { update(config, |c| apply(c, schema)) }
    })
}

/// The body of the `_schema` getters: `*out` is the schema `get` finds on the channel behind
/// `p` (`SHMBUS_OK`), or all NULL and zero with `SHMBUS_NOT_FOUND` when it has none.
///
/// # Safety
/// `p` is NULL or live; `out` NULL or valid for a write.
pub(crate) unsafe fn schema_of<W: Wrapper>(
    p: *const W,
    out: *mut shmbus_schema,
    kind: &str,
    get: impl FnOnce(&W::Inner) -> Option<&Schema>,
) -> shmbus_status {
    guard(|| {
        out_arg(out)?;
        // SAFETY: per the caller's contract. The pointers point into the schema the channel
        // handle owns (boxed behind `p`, never replaced while the handle lives), so they stay
        // valid until the handle is freed.
        unsafe {
            let found = with_ref(p, |c| Ok(get(c).map(shmbus_schema::of)))?;
            out.write(found.unwrap_or(shmbus_schema::NONE));
            match found {
                Some(_) => Ok(()),
                None => Err(Error::new(SHMBUS_NOT_FOUND, format_args!("the {kind} has no schema"))),
            }
        }
    })
}
