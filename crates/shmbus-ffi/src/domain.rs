//! `shmbus_domain`: the directory channels live in.

use std::ffi::c_char;

use shmbus::Domain;

use crate::handle::{free, into_c, str_arg, wrapper, Handle};
use crate::status::*;

/// A domain: a directory of channels (`/dev/shm/shmbus.<name>`, or under `SHMBUS_ROOT`).
/// Made by `shmbus_domain_new` or `shmbus_domain_with_root`, freed by `shmbus_domain_free`.
/// Channel handles do not borrow it: it may be freed once they are made.
#[derive(Debug)]
pub struct shmbus_domain {
    h: Handle<Domain>,
}
wrapper!(shmbus_domain => Domain);

/// Makes the domain `name` under the default root (`/dev/shm`, or `$SHMBUS_ROOT`) and stores
/// it in `*out`. Nothing is created on disk until a channel is.
/// Codes: `SHMBUS_INVALID_ARGUMENT` (NULL, not UTF-8), `SHMBUS_INVALID_NAME`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_domain_new(name: *const c_char, out: *mut *mut shmbus_domain) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe { into_c(out, Domain::new(str_arg(name, "name")?)?) }
    })
}

/// Makes the domain `name` under the directory `root` (instead of `/dev/shm`), e.g. a scratch
/// directory for tests, and stores it in `*out`.
///
/// # Safety
/// `name` and `root` are NULL or NUL-terminated strings; `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_domain_with_root(
    name: *const c_char,
    root: *const c_char,
    out: *mut *mut shmbus_domain,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe { into_c(out, Domain::with_root(str_arg(name, "name")?, str_arg(root, "root")?)?) }
    })
}

/// Frees a domain (NULL: nothing).
///
/// # Safety
/// `domain` is NULL or a live domain, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_domain_free(domain: *mut shmbus_domain) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(domain) })
}
