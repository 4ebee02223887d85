//! Blocking without the GIL, interruptibly; timeouts; reading a caller's buffer.

use std::time::{Duration, Instant};

use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::errors::Fail;

/// The longest a blocking call waits without the GIL before it takes the GIL back to run
/// signal handlers (so Ctrl-C raises `KeyboardInterrupt` within about this long).
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// A timeout argument: `None` waits for ever, else non-negative seconds.
pub(crate) fn timeout_arg(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    match timeout {
        None => Ok(None),
        Some(t) => Duration::try_from_secs_f64(t)
            .map(Some)
            .map_err(|_| PyValueError::new_err(format!("timeout must be a non-negative number of seconds, not {t}"))),
    }
}

/// Runs `attempt` without the GIL, each time with a wait of at most [`SLICE`], until it
/// returns something other than a timeout, or `timeout` (`None`: for ever) passes, in which
/// case the last attempt's `Timeout` is raised. Between attempts the GIL is taken back to
/// run signal handlers: a `KeyboardInterrupt` (or any exception a handler raises) ends the
/// wait.
pub(crate) fn blocking<R: Send>(
    py: Python<'_>,
    timeout: Option<Duration>,
    attempt: impl FnMut(Duration) -> Result<R, Fail> + Send,
) -> PyResult<R> {
    blocking_while(py, timeout, Fail::is_timeout, attempt)
}

/// [`blocking`] for a call whose wait ends with another failure than `Timeout` (a service
/// response's `Full`): `waited` says which failures are the end of a slice's wait, to try
/// again; the last one is raised when `timeout` passes.
pub(crate) fn blocking_while<R: Send>(
    py: Python<'_>,
    timeout: Option<Duration>,
    waited: impl Fn(&Fail) -> bool + Sync,
    mut attempt: impl FnMut(Duration) -> Result<R, Fail> + Send,
) -> PyResult<R> {
    let deadline = timeout.map(|t| Instant::now().checked_add(t).unwrap_or_else(far_future));
    loop {
        let slice = match deadline {
            None => SLICE,
            Some(d) => d.saturating_duration_since(Instant::now()).min(SLICE),
        };
        match py.detach(|| attempt(slice)) {
            Err(f) if waited(&f) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(f.into());
                }
            }
            other => return other.map_err(PyErr::from),
        }
        py.check_signals()?;
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

/// A caller's bytes-like object (bytes, bytearray, memoryview, a C-contiguous numpy array,
/// ...), read in place through the buffer protocol: no copy is made.
pub(crate) struct Bytes {
    view: ffi::Py_buffer,
}

impl Bytes {
    /// Exports `obj`'s buffer (read-only, C-contiguous, as bytes).
    pub(crate) fn get(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
        // SAFETY: a zeroed `Py_buffer` is what `PyObject_GetBuffer` expects to fill.
        let mut view: ffi::Py_buffer = unsafe { std::mem::zeroed() };
        // SAFETY: `obj` is a live object (we hold the GIL); on success the view holds a
        // reference to it, released in `Drop`.
        if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut view, ffi::PyBUF_C_CONTIGUOUS) } != 0 {
            // TypeError for a non-buffer, BufferError for a non-contiguous one.
            return Err(PyErr::take(obj.py()).unwrap_or_else(|| PyBufferError::new_err("cannot export a buffer")));
        }
        Ok(Bytes { view })
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        if self.view.len <= 0 || self.view.buf.is_null() {
            return &[];
        }
        // SAFETY: the exporter keeps `len` bytes at `buf` alive and unmoved until the view is
        // released (in `Drop`), and `PyBUF_C_CONTIGUOUS` makes them one contiguous run.
        unsafe { std::slice::from_raw_parts(self.view.buf as *const u8, self.view.len as usize) }
    }
}

// SAFETY: the view is a pointer and a length into memory its exporter keeps alive until
// `PyBuffer_Release` (done with the GIL held, in `Drop`); reading it from another thread
// while the GIL is released is what the buffer protocol allows.
unsafe impl Send for Bytes {}
// SAFETY: as above; `&Bytes` only reads.
unsafe impl Sync for Bytes {}

impl Drop for Bytes {
    fn drop(&mut self) {
        // Releasing needs the GIL: `Bytes` lives in a method that holds it, and is dropped
        // there, after any `detach` has returned.
        Python::attach(|_| {
            // SAFETY: the view was filled by a successful `PyObject_GetBuffer`, released once.
            unsafe { ffi::PyBuffer_Release(&mut self.view) }
        });
    }
}

/// A caller's writable buffer (bytearray, a writable memoryview, a C-contiguous numpy
/// array, ...), written in place through the buffer protocol: `recv_into`'s destination.
pub(crate) struct BytesMut {
    view: ffi::Py_buffer,
}

impl BytesMut {
    /// Exports `obj`'s buffer (writable, C-contiguous, as bytes).
    pub(crate) fn get(obj: &Bound<'_, PyAny>) -> PyResult<BytesMut> {
        // SAFETY: a zeroed `Py_buffer` is what `PyObject_GetBuffer` expects to fill.
        let mut view: ffi::Py_buffer = unsafe { std::mem::zeroed() };
        let flags = ffi::PyBUF_C_CONTIGUOUS | ffi::PyBUF_WRITABLE;
        // SAFETY: as in `Bytes::get`; a read-only object fails here (BufferError or TypeError).
        if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut view, flags) } != 0 {
            return Err(
                PyErr::take(obj.py()).unwrap_or_else(|| PyBufferError::new_err("cannot export a writable buffer"))
            );
        }
        Ok(BytesMut { view })
    }

    /// The bytes, to write.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.view.len <= 0 || self.view.buf.is_null() {
            return &mut [];
        }
        // SAFETY: the exporter keeps `len` writable bytes at `buf` alive and unmoved until the
        // view is released (in `Drop`; a bytearray cannot be resized meanwhile), and
        // `PyBUF_C_CONTIGUOUS` makes them one contiguous run. `&mut self` makes this the only
        // reference made through this view; Python code that writes the same object
        // meanwhile races with the receive as it would with `socket.recv_into`.
        unsafe { std::slice::from_raw_parts_mut(self.view.buf.cast::<u8>(), self.view.len as usize) }
    }

    /// The buffer's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.view.len.max(0) as usize
    }
}

// SAFETY: as for `Bytes`: a pointer and a length into memory its exporter keeps alive until
// `PyBuffer_Release` (done with the GIL held, in `Drop`).
unsafe impl Send for BytesMut {}

impl Drop for BytesMut {
    fn drop(&mut self) {
        Python::attach(|_| {
            // SAFETY: the view was filled by a successful `PyObject_GetBuffer`, released once.
            unsafe { ffi::PyBuffer_Release(&mut self.view) }
        });
    }
}
