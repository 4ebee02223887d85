//! `Held<I>`: a lent zero-copy item inside its Python object, exporting its bytes through
//! the buffer protocol and counting the views, so that it is not given back (unpinned,
//! sent, consumed) while a `memoryview` or numpy array still points into it.

use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::cell::Lent;

#[derive(Debug)]
struct State<I> {
    item: Option<Lent<I>>,
    /// Buffer views exported and not yet released.
    views: usize,
}

/// A lent item, its bytes (`ptr`, `len`) and whether views of them may write.
#[derive(Debug)]
pub(crate) struct Held<I> {
    state: Mutex<State<I>>,
    ptr: *mut u8,
    len: usize,
    writable: bool,
    /// What it is, for messages: "sample", "loan", ...
    what: &'static str,
}

// SAFETY: `ptr` points into a mapping the item keeps alive and in place (the item is
// `Lent`, itself Send and Sync); the item is only reached through the mutex.
unsafe impl<I> Send for Held<I> {}
// SAFETY: as above.
unsafe impl<I> Sync for Held<I> {}

impl<I> Held<I> {
    /// Holds `item`, whose bytes are the `len` bytes at `ptr` (valid while it lives).
    pub(crate) fn new(item: Lent<I>, ptr: *mut u8, len: usize, writable: bool, what: &'static str) -> Held<I> {
        Held { state: Mutex::new(State { item: Some(item), views: 0 }), ptr, len, writable, what }
    }

    fn lock(&self) -> MutexGuard<'_, State<I>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The length of the bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the item is still held (not released, sent or consumed).
    pub(crate) fn is_live(&self) -> bool {
        self.lock().item.is_some()
    }

    /// The bytes, copied (for `bytes(x)`-free access and `repr`); `None` once given back.
    pub(crate) fn to_vec(&self) -> Option<Vec<u8>> {
        let st = self.lock();
        st.item.as_ref()?;
        // SAFETY: the item is held (checked under the lock, which a give-back needs), so its
        // `len` bytes at `ptr` are valid.
        Some(unsafe { std::slice::from_raw_parts(self.ptr, self.len) }.to_vec())
    }

    /// `bf_getbuffer`: fills `view` with the item's bytes and counts the view.
    ///
    /// # Safety
    /// `view` is the `Py_buffer` Python passed to `bf_getbuffer`, and `owner` the object
    /// whose slot it is (the object holding this `Held`).
    pub(crate) unsafe fn export(
        &self,
        owner: &Bound<'_, PyAny>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let mut st = self.lock();
        if st.item.is_none() {
            return Err(PyBufferError::new_err(format!("this {} was already released", self.what)));
        }
        let readonly = c_int::from(!self.writable);
        // SAFETY: `ptr`/`len` stay valid while the item is held, and it is held until
        // `views` is back to 0 (`take` refuses before); the view keeps `owner` alive (the
        // call takes a reference), so the item is not dropped under it either. A writable
        // request on a read-only item fails inside (BufferError).
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(view, owner.as_ptr(), self.ptr.cast(), self.len as ffi::Py_ssize_t, readonly, flags)
        };
        if rc != 0 {
            return Err(PyErr::fetch(owner.py()));
        }
        st.views += 1;
        Ok(())
    }

    /// `bf_releasebuffer`: a view went away.
    pub(crate) fn unexport(&self) {
        let mut st = self.lock();
        st.views = st.views.saturating_sub(1);
    }

    /// Takes the item out to give it back, unless views of it live (`BufferError`) or it is
    /// gone already (`None`).
    pub(crate) fn take(&self) -> PyResult<Option<Lent<I>>> {
        let mut st = self.lock();
        if st.views > 0 {
            return Err(PyBufferError::new_err(format!(
                "{} view(s) of this {} are alive (memoryview, numpy array, ...); delete them before releasing or sending it",
                st.views, self.what
            )));
        }
        Ok(st.item.take())
    }

    /// Takes the item out whatever the views (the object is being deallocated, so none).
    pub(crate) fn take_at_drop(&mut self) -> Option<Lent<I>> {
        self.state.get_mut().unwrap_or_else(|p| p.into_inner()).item.take()
    }
}
