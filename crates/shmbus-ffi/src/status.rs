//! Status codes, the thread-local last error, and the one guard every exported function runs
//! its body in (`catch_unwind` + recording the error), so no panic crosses the boundary.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, CStr, CString};
use std::fmt::Display;
use std::panic::{self, AssertUnwindSafe};

/// What every function of the C ABI returns: `SHMBUS_OK` (0) or a negative `SHMBUS_*` code.
/// The list is stable: codes are only ever added.
pub type shmbus_status = i32;

/// Success.
pub const SHMBUS_OK: shmbus_status = 0;
/// Nothing to receive now (a `try` receive).
pub const SHMBUS_EMPTY: shmbus_status = -1;
/// No room now (a `try` send).
pub const SHMBUS_FULL: shmbus_status = -2;
/// The timeout of a `_timeout` call passed first.
pub const SHMBUS_TIMEOUT: shmbus_status = -3;
/// A topic subscriber fell behind: `shmbus_last_error_value()` is the number of messages
/// skipped; the next receive returns the oldest message still kept.
pub const SHMBUS_LAGGED: shmbus_status = -4;
/// The peer is gone (a stream without reader or writer, a pool worker whose dispatcher is gone).
pub const SHMBUS_DISCONNECTED: shmbus_status = -5;
/// The payload is larger than the channel's largest message: `shmbus_last_error_value()` is
/// that largest size.
pub const SHMBUS_TOO_LARGE: shmbus_status = -6;
/// No channel (or journal) of that name exists; or, from a `_schema` getter, the channel has
/// no schema.
pub const SHMBUS_NOT_FOUND: shmbus_status = -7;
/// The operating system refused access to the channel's file or directory.
pub const SHMBUS_PERMISSION_DENIED: shmbus_status = -8;
/// An exclusive endpoint (stream writer or reader, pool dispatcher, named journal reader) is
/// held by a live process, or a handle is lent out (a loan or sample not yet given back).
pub const SHMBUS_BUSY: shmbus_status = -9;
/// The channel's participant table is full of live processes.
pub const SHMBUS_TOO_MANY_PARTICIPANTS: shmbus_status = -10;
/// The channel exists with other layout values than the config sets.
pub const SHMBUS_LAYOUT_MISMATCH: shmbus_status = -11;
/// The channel carries another payload type.
pub const SHMBUS_TYPE_MISMATCH: shmbus_status = -12;
/// A NULL pointer, a name that is not UTF-8, or a value out of range was passed.
pub const SHMBUS_INVALID_ARGUMENT: shmbus_status = -13;
/// A config value is out of range (zero history, a slot too large, ...).
pub const SHMBUS_INVALID_CONFIG: shmbus_status = -14;
/// The channel's memory or files hold impossible values (a hostile or broken peer); the
/// message says what and whether it was repaired.
pub const SHMBUS_CORRUPT: shmbus_status = -15;
/// A directory or file owned by a user this process does not trust.
pub const SHMBUS_UNTRUSTED: shmbus_status = -16;
/// Any other operating-system error.
pub const SHMBUS_IO: shmbus_status = -17;
/// The caller's buffer is smaller than the message: the needed length is in `*len_out` (and
/// `shmbus_last_error_value()`), and the message is kept for the next receive call.
pub const SHMBUS_BUFFER_TOO_SMALL: shmbus_status = -18;
/// The channel's file was truncated by another process while mapped; recreate the channel.
pub const SHMBUS_TRUNCATED: shmbus_status = -19;
/// The name is not a valid channel, domain or reader name.
pub const SHMBUS_INVALID_NAME: shmbus_status = -20;
/// The file is not a shmbus channel of this kind or format version.
pub const SHMBUS_INCOMPATIBLE: shmbus_status = -21;
/// Every topic slot is pinned by zero-copy samples, or a subscriber's pin budget is spent.
pub const SHMBUS_PINNED: shmbus_status = -22;
/// Every pool worker is busy (the job is handed back to the caller).
pub const SHMBUS_ALL_BUSY: shmbus_status = -23;
/// The pool has no worker attached.
pub const SHMBUS_NO_WORKERS: shmbus_status = -24;
/// Journal entries are missing or damaged (a gap, a damaged range, an abandoned or encrypted
/// entry, a reset position): the message says which; reading goes on after them.
pub const SHMBUS_DAMAGED: shmbus_status = -25;
/// A reliable topic subscriber was evicted (it stood still longer than the topic's reliable
/// timeout) and reads on as a lossy subscriber; reported once.
pub const SHMBUS_EVICTED: shmbus_status = -26;
/// The channel carries another schema than the config set (or none): open it with the same
/// schema or with none. The message names both.
pub const SHMBUS_SCHEMA_MISMATCH: shmbus_status = -27;
/// A service's server failed the request (it could not answer it).
pub const SHMBUS_FAILED: shmbus_status = -28;
/// A Rust panic was caught at the boundary (a bug in shmbus: please report the message).
pub const SHMBUS_PANIC: shmbus_status = -98;
/// An error this version of the C ABI does not name; the message says what it is.
pub const SHMBUS_UNKNOWN: shmbus_status = -99;

/// An error on its way to C: its code, an optional number and its message.
#[derive(Debug)]
pub(crate) struct Error {
    pub(crate) code: shmbus_status,
    pub(crate) value: u64,
    text: Text,
}

#[derive(Debug)]
enum Text {
    Static(&'static CStr),
    Owned(CString),
}

impl Error {
    /// An error with a fixed message: records nothing on the heap (the `try` calls' hot path).
    pub(crate) const fn fixed(code: shmbus_status, text: &'static CStr) -> Error {
        Error { code, value: 0, text: Text::Static(text) }
    }

    /// An error with a formatted message.
    pub(crate) fn new(code: shmbus_status, text: impl Display) -> Error {
        Error::with_value(code, 0, text)
    }

    /// An error with a formatted message and a number (`shmbus_last_error_value`).
    pub(crate) fn with_value(code: shmbus_status, value: u64, text: impl Display) -> Error {
        let text = text.to_string().replace('\0', " ");
        // No NUL byte is left in `text`, so this cannot fail.
        Error { code, value, text: Text::Owned(CString::new(text).unwrap_or_default()) }
    }

    /// A Rust error mapped to `code`: the fixed message for the "nothing now" outcomes, whose
    /// Display would be formatted on every empty poll, else the error's own message.
    pub(crate) fn from_rust(code: shmbus_status, value: u64, e: &dyn Display) -> Error {
        match code {
            SHMBUS_EMPTY => Error { value, ..Error::fixed(code, c"nothing to receive now") },
            SHMBUS_FULL => Error { value, ..Error::fixed(code, c"no room to send now") },
            SHMBUS_TIMEOUT => Error { value, ..Error::fixed(code, c"the timeout passed") },
            SHMBUS_ALL_BUSY => Error { value, ..Error::fixed(code, c"every worker is busy; the job was not sent") },
            _ => Error::with_value(code, value, e),
        }
    }

    /// A NULL pointer where a value is needed.
    pub(crate) fn null(what: &str) -> Error {
        Error::new(SHMBUS_INVALID_ARGUMENT, format_args!("{what} is NULL"))
    }
}

/// The last failure on this thread: plain values, so that recording an empty poll (a fixed
/// message) touches no `RefCell` and drops nothing. `text` is the fixed message, or `None`
/// for a formatted one, which is in [`LAST_TEXT`].
#[derive(Clone, Copy)]
struct Last {
    code: shmbus_status,
    value: u64,
    text: Option<&'static CStr>,
}

thread_local! {
    static LAST: Cell<Last> = const { Cell::new(Last { code: SHMBUS_OK, value: 0, text: Some(c"") }) };
    /// The last formatted message; replaced only by the next formatted one, so a pointer
    /// `shmbus_last_error` gave stays valid at least until the next failing call.
    static LAST_TEXT: RefCell<Option<CString>> = const { RefCell::new(None) };
}

#[inline]
fn record(e: Error) -> shmbus_status {
    let code = e.code;
    let text = match e.text {
        Text::Static(s) => Some(s),
        Text::Owned(s) => {
            // `try_with`: a call made while this thread's locals are being destroyed records
            // no message.
            let stored = LAST_TEXT.try_with(|t| t.try_borrow_mut().map(|mut t| *t = Some(s)).is_ok()).unwrap_or(false);
            if stored {
                None
            } else {
                Some(c"")
            }
        }
    };
    LAST.set(Last { code, value: e.value, text });
    code
}

/// Runs the body of an exported function: a panic becomes `SHMBUS_PANIC`, an error is recorded
/// as this thread's last error and its code returned.
#[inline]
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Error>) -> shmbus_status {
    match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SHMBUS_OK,
        Ok(Err(e)) => record(e),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            record(Error::new(SHMBUS_PANIC, format_args!("internal error (a Rust panic was caught): {what}")))
        }
    }
}

/// Runs the body of an exported function that returns no status (the `_free` functions and
/// getters): a panic is caught and recorded, and `fallback` returned.
pub(crate) fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    let mut out = None;
    guard(|| {
        out = Some(body());
        Ok(())
    });
    out.unwrap_or(fallback)
}

/// The message of the last call that failed on this thread, as a NUL-terminated UTF-8
/// string; "" if none has failed. Owned by the library: valid until the next failing call on
/// this thread. Never NULL.
#[no_mangle]
pub extern "C" fn shmbus_last_error() -> *const c_char {
    match LAST.get().text {
        Some(s) => s.as_ptr(),
        // The pointer stays valid after the borrow ends: the CString is replaced only by the
        // next failing call on this thread with a formatted message.
        None => LAST_TEXT
            .try_with(|t| t.try_borrow().ok().and_then(|t| t.as_ref().map(|s| s.as_ptr())).unwrap_or(c"".as_ptr()))
            .unwrap_or(c"".as_ptr()),
    }
}

/// The code of the last call that failed on this thread (`SHMBUS_OK` if none has).
#[no_mangle]
pub extern "C" fn shmbus_last_error_code() -> shmbus_status {
    LAST.get().code
}

/// The number that goes with the last error on this thread, 0 if it has none: the messages
/// skipped for `SHMBUS_LAGGED`, the largest size for `SHMBUS_TOO_LARGE`, the needed length
/// for `SHMBUS_BUFFER_TOO_SMALL`, the oldest message still needed for a topic's `SHMBUS_FULL`.
#[no_mangle]
pub extern "C" fn shmbus_last_error_value() -> u64 {
    LAST.get().value
}

/// The version of the library, `"MAJOR.MINOR.PATCH"` (a static string).
#[no_mangle]
pub extern "C" fn shmbus_version() -> *const c_char {
    const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("the package version has no NUL byte"),
    };
    VERSION.as_ptr()
}

/// The name of a status code (`"SHMBUS_EMPTY"`, ...), a static string; `"SHMBUS_UNKNOWN"` for
/// a code this version does not know.
#[no_mangle]
pub extern "C" fn shmbus_status_name(code: shmbus_status) -> *const c_char {
    status_name(code).as_ptr()
}

fn status_name(code: shmbus_status) -> &'static CStr {
    match code {
        SHMBUS_OK => c"SHMBUS_OK",
        SHMBUS_EMPTY => c"SHMBUS_EMPTY",
        SHMBUS_FULL => c"SHMBUS_FULL",
        SHMBUS_TIMEOUT => c"SHMBUS_TIMEOUT",
        SHMBUS_LAGGED => c"SHMBUS_LAGGED",
        SHMBUS_DISCONNECTED => c"SHMBUS_DISCONNECTED",
        SHMBUS_TOO_LARGE => c"SHMBUS_TOO_LARGE",
        SHMBUS_NOT_FOUND => c"SHMBUS_NOT_FOUND",
        SHMBUS_PERMISSION_DENIED => c"SHMBUS_PERMISSION_DENIED",
        SHMBUS_BUSY => c"SHMBUS_BUSY",
        SHMBUS_TOO_MANY_PARTICIPANTS => c"SHMBUS_TOO_MANY_PARTICIPANTS",
        SHMBUS_LAYOUT_MISMATCH => c"SHMBUS_LAYOUT_MISMATCH",
        SHMBUS_TYPE_MISMATCH => c"SHMBUS_TYPE_MISMATCH",
        SHMBUS_INVALID_ARGUMENT => c"SHMBUS_INVALID_ARGUMENT",
        SHMBUS_INVALID_CONFIG => c"SHMBUS_INVALID_CONFIG",
        SHMBUS_CORRUPT => c"SHMBUS_CORRUPT",
        SHMBUS_UNTRUSTED => c"SHMBUS_UNTRUSTED",
        SHMBUS_IO => c"SHMBUS_IO",
        SHMBUS_BUFFER_TOO_SMALL => c"SHMBUS_BUFFER_TOO_SMALL",
        SHMBUS_TRUNCATED => c"SHMBUS_TRUNCATED",
        SHMBUS_INVALID_NAME => c"SHMBUS_INVALID_NAME",
        SHMBUS_INCOMPATIBLE => c"SHMBUS_INCOMPATIBLE",
        SHMBUS_PINNED => c"SHMBUS_PINNED",
        SHMBUS_ALL_BUSY => c"SHMBUS_ALL_BUSY",
        SHMBUS_NO_WORKERS => c"SHMBUS_NO_WORKERS",
        SHMBUS_DAMAGED => c"SHMBUS_DAMAGED",
        SHMBUS_EVICTED => c"SHMBUS_EVICTED",
        SHMBUS_SCHEMA_MISMATCH => c"SHMBUS_SCHEMA_MISMATCH",
        SHMBUS_FAILED => c"SHMBUS_FAILED",
        SHMBUS_PANIC => c"SHMBUS_PANIC",
        _ => c"SHMBUS_UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let code = guard(|| panic!("boom"));
        assert_eq!(code, SHMBUS_PANIC);
        // SAFETY: shmbus_last_error returns a NUL-terminated string valid until the next
        // failing call on this thread.
        let text = unsafe { CStr::from_ptr(shmbus_last_error()) }.to_str().unwrap().to_string();
        assert!(text.contains("boom"), "{text}");
        assert_eq!(shmbus_last_error_code(), SHMBUS_PANIC);
    }

    #[test]
    fn every_named_code_has_its_own_name() {
        let codes = (-99..=0).filter(|&c| status_name(c) != c"SHMBUS_UNKNOWN").count();
        assert_eq!(codes, 30);
    }
}
