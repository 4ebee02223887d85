//! `Held<O, I>`: a lent zero-copy item (one of the core's owned items) inside its Python
//! object, exporting its bytes through the buffer protocol and counting the views, so that
//! it is not given back (unpinned, sent, consumed) while a `memoryview` or numpy array still
//! points into it. It holds the lending endpoint's object `O` too, so that the endpoint's
//! Python object outlives it.

use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pyclass::boolean_struct::True;
use pyo3::types::PyBytes;
use pyo3::PyClass;

use crate::errors::Fail;

/// A Python class owning an endpoint whose endpoint (in its [`Cell`](crate::cell::Cell)) lent an item.
pub(crate) trait Owner: PyClass<Frozen = True> + Sync {}

impl<T: PyClass<Frozen = True> + Sync> Owner for T {}

#[derive(Debug)]
struct State<I> {
    item: Option<I>,
    /// Buffer views exported and not yet released.
    views: usize,
    /// A use that ends the item is under way ([`Held::settle`]): no view may start.
    settling: bool,
}

/// A lent item, the endpoint object `owner` it was lent by, its bytes (`ptr`, `len`) and
/// whether views of them may write.
#[derive(Debug)]
pub(crate) struct Held<O: Owner, I> {
    owner: Py<O>,
    state: Mutex<State<I>>,
    /// Where the bytes are, whether views may write them, and whether they cross mappings.
    bytes: crate::dlpack::Bytes,
    names: Names,
}

// SAFETY: `bytes.ptr` points into memory the item keeps alive and in place; the item (`Send`) is
// only reached through the mutex; `Py<O>` is Send and Sync.
unsafe impl<O: Owner, I: Send> Send for Held<O, I> {}
// SAFETY: as above.
unsafe impl<O: Owner, I: Send> Sync for Held<O, I> {}

/// How a lent item is described in messages: what it is and what has become of it once
/// given back ("this {what} was already {gone}").
#[derive(Debug, Clone, Copy)]
pub(crate) struct Names {
    /// "sample", "loan", ...
    pub(crate) what: &'static str,
    /// "released", "sent or released", ...
    pub(crate) gone: &'static str,
}

/// What a loan (a topic, stream or journal one) is called in messages.
pub(crate) const LOAN: Names = Names { what: "loan", gone: "sent or released" };

impl<O: Owner, I> Held<O, I> {
    /// Holds `item`, lent by `owner`'s endpoint, whose bytes are the `len` bytes at `ptr`
    /// (valid while it lives).
    pub(crate) fn new(owner: Py<O>, item: I, ptr: *mut u8, len: usize, writable: bool, names: Names) -> Self {
        let state = Mutex::new(State { item: Some(item), views: 0, settling: false });
        let bytes = crate::dlpack::Bytes { ptr, len, writable, second_mapping_at: None };
        Held { owner, state, bytes, names }
    }

    /// Says where the bytes cross from one mapping into the next (a stream record running
    /// over the end of its ring), for the read-only alias of a legacy DLPack export.
    pub(crate) fn second_mapping_at(mut self, at: Option<usize>) -> Self {
        self.bytes.second_mapping_at = at;
        self
    }

    /// The endpoint object the item was lent by.
    pub(crate) fn owner(&self) -> &O {
        self.owner.get()
    }

    fn closed(&self) -> Fail {
        Fail::new("Closed", format!("this {} was already {}", self.names.what, self.names.gone))
    }

    fn lock(&self) -> MutexGuard<'_, State<I>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The length of the bytes.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len
    }

    /// What a loan's `send(len)` sends: `len` bytes, or all of them (`None`); `ValueError`
    /// past the loan's room.
    pub(crate) fn fits(&self, len: Option<usize>) -> PyResult<usize> {
        match len {
            Some(l) if l > self.bytes.len => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "len {l} exceeds the {}'s {} bytes",
                self.names.what, self.bytes.len
            ))),
            l => Ok(l.unwrap_or(self.bytes.len)),
        }
    }

    /// Whether the item is still held (not released, sent or consumed).
    pub(crate) fn is_live(&self) -> bool {
        self.lock().item.is_some()
    }

    /// The bytes, copied into `bytes` (`Closed` once given back).
    pub(crate) fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let st = self.lock();
        if st.item.is_none() {
            return Err(self.closed().into());
        }
        // SAFETY: the item is held (checked under the lock, which a give-back needs), so its
        // `len` bytes at `ptr` are valid.
        Ok(PyBytes::new(py, unsafe { std::slice::from_raw_parts(self.bytes.ptr, self.bytes.len) }))
    }

    /// `BufferError` unless a view of the item may start (the lock `st` held): not once it is
    /// given back, nor while a use that ends it is under way.
    fn exportable(&self, st: &State<I>) -> PyResult<()> {
        if st.item.is_none() {
            return Err(PyBufferError::new_err(format!("this {} was already {}", self.names.what, self.names.gone)));
        }
        if st.settling {
            return Err(PyBufferError::new_err(format!("this {} is being {}", self.names.what, self.names.gone)));
        }
        Ok(())
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
        self.exportable(&st)?;
        let readonly = c_int::from(!self.bytes.writable);
        // SAFETY: `ptr`/`len` stay valid while the item is held, and it is held until
        // `views` is back to 0 (`take` refuses before); the view keeps `owner` alive (the
        // call takes a reference), so the item is not dropped under it either. A writable
        // request on a read-only item fails inside (BufferError).
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                owner.as_ptr(),
                self.bytes.ptr.cast(),
                self.bytes.len as ffi::Py_ssize_t,
                readonly,
                flags,
            )
        };
        if rc != 0 {
            return Err(PyErr::fetch(owner.py()));
        }
        st.views += 1;
        Ok(())
    }

    /// `__dlpack__`: a DLPack capsule of the item's bytes (read-only unless the item is
    /// writable), counted as a view until the importer's deleter runs; `unexport` is what
    /// gives that view back (it calls [`Held::unexport`] on this item, through its Python
    /// object, which it keeps alive).
    pub(crate) fn dlpack<'py>(
        &self,
        py: Python<'py>,
        request: crate::dlpack::Request<'py>,
        unexport: Box<dyn FnOnce() + Send>,
    ) -> PyResult<Py<PyAny>> {
        {
            let mut st = self.lock();
            self.exportable(&st)?;
            st.views += 1;
        }
        // SAFETY: the view just counted keeps the item held (`take` refuses while views
        // live), so the bytes stay valid until `unexport` runs; only a loan is writable, and
        // the item says where its bytes cross mappings.
        unsafe { crate::dlpack::export(py, request, self.bytes, unexport) }
    }

    /// `bf_releasebuffer`: a view went away.
    pub(crate) fn unexport(&self) {
        let mut st = self.lock();
        st.views = st.views.saturating_sub(1);
    }

    /// `BufferError` while views of the item live (the lock `st` held).
    fn unviewed(&self, st: &State<I>) -> PyResult<()> {
        if st.views == 0 {
            return Ok(());
        }
        Err(PyBufferError::new_err(format!(
            "{} view(s) of this {} are alive (memoryview, numpy array, ...); delete them before releasing, sending or finishing it",
            st.views, self.names.what
        )))
    }

    /// Takes the item out to give it back, unless views of it live (`BufferError`) or it is
    /// gone already (`None`).
    fn take(&self) -> PyResult<Option<I>> {
        let mut st = self.lock();
        self.unviewed(&st)?;
        Ok(st.item.take())
    }

    /// Runs `f` on the item, which stays held (`Closed` once given back). The lock is held
    /// meanwhile: `f` must not wait.
    pub(crate) fn with_item<R>(&self, f: impl FnOnce(&I) -> R) -> PyResult<R> {
        let st = self.lock();
        Ok(f(st.item.as_ref().ok_or_else(|| self.closed())?))
    }

    /// Begins a use that may end the item (a request's last response, its end): refused
    /// while views of it live (`BufferError`) or while another such use is under way
    /// (`Busy`); `None` once it is given back. Until the returned guard is dropped no view
    /// may start, and nothing is locked: the use may wait, without the GIL, on a copy of
    /// the item (`I` is a handle, as a `Lender` is). The item is let go if the guard was
    /// marked [`Settling::done`].
    pub(crate) fn settle(&self) -> PyResult<Option<Settling<'_, O, I>>>
    where
        I: Clone,
    {
        let mut st = self.lock();
        self.unviewed(&st)?;
        if st.settling {
            let msg = format!("this {} is being {} by another call", self.names.what, self.names.gone);
            return Err(Fail::new("Busy", msg).into());
        }
        let Some(item) = st.item.clone() else { return Ok(None) };
        st.settling = true;
        Ok(Some(Settling { held: self, item, done: false }))
    }

    /// Gives the item back to its endpoint with `f` (which sends or consumes it; dropping
    /// it releases), unless views of it live (`BufferError`) or it is gone already
    /// (`Closed`).
    pub(crate) fn give_back<R>(&self, f: impl FnOnce(I) -> R) -> PyResult<R> {
        let item = self.take()?.ok_or_else(|| self.closed())?;
        Ok(f(item))
    }

    /// Gives the item back unused, unless views of it live (`BufferError`); nothing if it is
    /// gone already.
    pub(crate) fn release(&self) -> PyResult<()> {
        drop(self.take()?);
        Ok(())
    }
}

/// A use that may end a held item, under way ([`Held::settle`]).
#[derive(Debug)]
pub(crate) struct Settling<'a, O: Owner, I> {
    held: &'a Held<O, I>,
    item: I,
    done: bool,
}

impl<O: Owner, I> Settling<'_, O, I> {
    /// The item (a copy of the handle held).
    pub(crate) fn item(&self) -> &I {
        &self.item
    }

    /// The item is ended: let go of it when this guard drops.
    pub(crate) fn done(&mut self) {
        self.done = true;
    }
}

impl<O: Owner, I> Drop for Settling<'_, O, I> {
    fn drop(&mut self) {
        let mut st = self.held.lock();
        st.settling = false;
        if self.done {
            st.item = None;
        }
    }
}
