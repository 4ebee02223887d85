//! Copying a received item into Python once.
//!
//! An owned receive (`recv`, `try_recv`, `recv_async`, iteration) of a large item reads it
//! in place through the endpoint's zero-copy receive (a pinned topic sample, a stream record,
//! a pool job, a journal entry in its mailbox or file, a service response in its cell),
//! copies its bytes once, straight into a new `bytes` object, and gives the item back as the
//! copying receive would have left it.
//! The core's copying receive would copy into a `Vec` first, and Python then into `bytes`:
//! two passes over the message, the second into memory that is new for each message.
//!
//! `bytes` objects are made uninitialised and filled by the copy, which runs without the GIL
//! from [`WITHOUT_GIL`] bytes on (the object is not yet visible to any other thread).
//! Receives into a caller's buffer (`recv_into`) copy into that buffer instead.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// From this many bytes on, a copy into Python lets go of the GIL while it runs.
pub(crate) const WITHOUT_GIL: usize = 64 * 1024;

/// Topics whose messages (and services whose responses) may be this long or longer are
/// received through a pinned sample (a response in its cell): one copy; smaller ones through
/// the core's copying receive, which for a few hundred bytes costs less than a pin.
pub(crate) const ONE_COPY_FROM: usize = 4 * 1024;

/// Copies `src` into `dst`, without the GIL when large.
pub(crate) fn copy(py: Python<'_>, dst: &mut [u8], src: &[u8]) {
    if src.len() >= WITHOUT_GIL {
        py.detach(|| dst.copy_from_slice(src));
    } else {
        dst.copy_from_slice(src);
    }
}

/// `data` copied into a new `bytes` object: one pass, into memory no one wrote before.
pub(crate) fn bytes<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    if data.len() < WITHOUT_GIL {
        return Ok(PyBytes::new(py, data));
    }
    let mut fresh = Fresh::new(py, data.len())?;
    copy(py, fresh.bytes_mut(), data);
    Ok(fresh.into_bytes())
}

/// A `bytes` object made uninitialised, to be filled before anyone else sees it.
pub(crate) struct Fresh<'py>(Bound<'py, PyBytes>);

impl<'py> Fresh<'py> {
    /// A `bytes` object of `len` bytes, not yet written.
    pub(crate) fn new(py: Python<'py>, len: usize) -> PyResult<Fresh<'py>> {
        let n = ffi::Py_ssize_t::try_from(len).map_err(|_| pyo3::exceptions::PyMemoryError::new_err(()))?;
        // SAFETY: a NULL source makes an uninitialised `bytes` of `n` bytes (or NULL with
        // MemoryError set), which we own.
        let obj = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyBytes_FromStringAndSize(std::ptr::null(), n))? };
        // SAFETY: made as a `bytes` object just above.
        Ok(Fresh(unsafe { obj.cast_into_unchecked::<PyBytes>() }))
    }

    /// Its contents, to write.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.0.as_bytes().len();
        // SAFETY: the object is ours alone until `into_bytes` hands it out (no other code has
        // a reference to it), so writing its contents is how the C API fills a new `bytes`;
        // `&mut self` makes this the only slice of them.
        unsafe { std::slice::from_raw_parts_mut(ffi::PyBytes_AsString(self.0.as_ptr()).cast::<u8>(), len) }
    }

    /// The object, filled.
    pub(crate) fn into_bytes(self) -> Bound<'py, PyBytes> {
        self.0
    }
}

/// Copies the bytes `data` finds in a lent item into a new `bytes` object, then gives the item
/// back with `back` (drop, consume), also when the copy fails.
pub(crate) fn lent_bytes<'py, I>(
    py: Python<'py>,
    item: I,
    data: impl FnOnce(&I) -> &[u8],
    back: impl FnOnce(I),
) -> PyResult<Bound<'py, PyBytes>> {
    let r = bytes(py, data(&item));
    back(item);
    r
}

/// A receive into a caller's buffer (`f`), run without the GIL when the buffer is large
/// (the copy is most of its time), else with it.
pub(crate) fn into_buffer<R: Send>(py: Python<'_>, len: usize, f: impl FnOnce() -> R + Send) -> R {
    if len >= WITHOUT_GIL {
        py.detach(f)
    } else {
        f()
    }
}
