//! DLPack export of lent items (`__dlpack__`, `__dlpack_device__`), so that
//! `numpy.from_dlpack(sample)`, `torch.from_dlpack(sample)` and `jax.numpy.from_dlpack` view
//! a sample, record, job, entry or loan in place: a one-dimensional `uint8` tensor on the
//! CPU, read-only where the item is.
//!
//! An export counts as a view of its [`Held`](crate::held::Held) item, exactly as a
//! `memoryview` does: the item stays pinned (not unpinned, consumed or sent) until the
//! importer calls the tensor's deleter, whether or not the item's own Python object is still
//! alive, and `release()` meanwhile raises `BufferError`.
//!
//! The capsule, the managed-tensor structs and the protocol's argument checks (`copy`,
//! `dl_device`, `max_version`, the legacy and versioned ABIs) come from the `dlpark` crate.
//! A read-only item is exported with the versioned ABI only (its `READ_ONLY` flag): the
//! legacy ABI has no flags, and an importer of it would write into shared memory that other
//! processes read, so a consumer that asks for it gets `BufferError`.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;

use dlpark::ffi::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned};
use dlpark::metadata::Fixed;
use dlpark::python::{export_dlpack, DlpackExporter, ExportRequest};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;

/// `kDLCPU`, as `__dlpack_device__` reports it.
pub(crate) const CPU: (u32, i32) = (1, 0);

/// One counted view of a lent item, owned by the exported tensor: dropping it (the
/// importer's deleter, on any thread) gives the view back.
struct View {
    release: Option<Box<dyn FnOnce() + Send>>,
}

impl Drop for View {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            // The release drops a reference to the item's Python object: with the GIL. A
            // deleter must not unwind (it is called from C).
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| Python::attach(|_| release())));
        }
    }
}

/// The bytes of one export and the view it hands to the tensor it makes.
struct Export {
    ptr: *mut u8,
    len: usize,
    writable: bool,
    view: Cell<Option<View>>,
}

impl Export {
    fn tensor<M: ManagedTensorBase>(&self) -> PyResult<Managed<M>> {
        let view = self.view.take().ok_or_else(|| PyBufferError::new_err("this export was already made"))?;
        let len = i64::try_from(self.len).map_err(|_| PyBufferError::new_err("item too large for DLPack"))?;
        let prepared = Fixed::new([len], [1]).prepare_as::<M>().map_err(|e| PyBufferError::new_err(e.to_string()))?;
        let mut t = prepared.initialize(Box::new(view));
        t.set_data(self.ptr.cast());
        t.set_dtype(DLDataType::of::<u8>());
        t.set_device(DLDevice::CPU);
        t.set_flags(self.flags()).map_err(|e| PyBufferError::new_err(e.to_string()))?;
        // SAFETY: `ptr`/`len` are the item's bytes, valid while it is held; it is held until
        // the view inside the tensor's context is dropped (by the deleter), since the view
        // is counted in its `Held`, which refuses to give the item back before. Shape and
        // strides come from the safe builder; the flags say read-only unless the item is
        // writable (a loan).
        Ok(unsafe { t.finish() })
    }
}

impl DlpackExporter for Export {
    fn device(&self) -> DLDevice {
        DLDevice::CPU
    }

    fn flags(&self) -> DlpackFlags {
        if self.writable {
            DlpackFlags::empty()
        } else {
            DlpackFlags::READ_ONLY
        }
    }

    fn prepare_export(&self, _py: Python<'_>, _request: &ExportRequest<'_>) -> PyResult<()> {
        Ok(())
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.tensor()
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.tensor()
    }
}

/// The arguments of a `__dlpack__` call, as the protocol names them.
pub(crate) struct Request<'py> {
    pub(crate) stream: Option<Bound<'py, PyAny>>,
    pub(crate) max_version: Option<(u32, u32)>,
    pub(crate) dl_device: Option<(u32, i32)>,
    pub(crate) copy: Option<bool>,
}

/// A DLPack capsule of the `len` bytes at `ptr`, whose view was counted by the caller:
/// `release` gives it back, when the importer is done or at once if no capsule is made.
///
/// # Safety
/// `ptr`/`len` stay valid until `release` runs (the caller counted a view that keeps the item
/// held), and are writable by others only if `writable`.
pub(crate) unsafe fn export<'py>(
    py: Python<'py>,
    request: Request<'py>,
    ptr: *mut u8,
    len: usize,
    writable: bool,
    release: Box<dyn FnOnce() + Send>,
) -> PyResult<Py<PyAny>> {
    // Dropped unused (the view given back) if the request is refused before a tensor is made.
    let view = View { release: Some(release) };
    let parsed = ExportRequest::parse(request.stream.as_ref(), request.max_version, request.dl_device, request.copy)?;
    let exporter = Export { ptr, len, writable, view: Cell::new(Some(view)) };
    export_dlpack(&exporter, py, parsed)
}
