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
//!
//! **Read-only items and the legacy ABI.** The versioned ABI (DLPack 1.0, which numpy asks
//! for) carries a read-only item's `READ_ONLY` flag. The legacy one has no flags, and some
//! importers only speak it (JAX, which treats every import as immutable): to them a
//! read-only item is exported through a second mapping of its pages, made read-only
//! ([`ReadOnlyAlias`]), so an importer that writes faults instead of changing shared memory
//! that other processes read. The alias costs an `mremap` and an `mprotect` per export and
//! is unmapped by the tensor's deleter. An item in the process's own memory (a topic's
//! message of a few dozen bytes, a journal entry decoded into its tailer's buffer) is not in
//! a mapping to map twice, and nobody else reads it: the legacy ABI gets a copy of it.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;

use dlpark::ffi::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned};
use dlpark::metadata::Fixed;
use dlpark::python::{export_dlpack, DlpackExporter, ExportAbi, ExportRequest};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use shmbus::lend::ReadOnlyAlias;

/// `kDLCPU`, as `__dlpack_device__` reports it.
pub(crate) const CPU: (u32, i32) = (1, 0);

/// One counted view of a lent item, owned by the exported tensor: dropping it (the
/// importer's deleter, on any thread) gives the view back.
struct View {
    release: Option<Box<dyn FnOnce() + Send>>,
    /// What a legacy export of a read-only item points into instead of the item.
    legacy: Option<Legacy>,
}

/// The bytes a legacy export of a read-only item points into.
enum Legacy {
    /// A read-only second mapping of the item's pages.
    Alias(#[allow(dead_code)] ReadOnlyAlias),
    /// A copy, for an item in the process's own memory (nobody else reads it).
    Copy(#[allow(dead_code)] Box<[u8]>),
}

impl Drop for View {
    fn drop(&mut self) {
        // The importer is done with the alias (or copy): unmap it before the item may go.
        drop(self.legacy.take());
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
    /// Whether the tensor carries the `READ_ONLY` flag.
    read_only: bool,
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
        if self.read_only {
            DlpackFlags::READ_ONLY
        } else {
            DlpackFlags::empty()
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

/// The bytes of a held item.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bytes {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    /// Whether the importer may write them (a loan).
    pub(crate) writable: bool,
    /// Where they cross from one mapping into the next (a stream record over its ring's end).
    pub(crate) second_mapping_at: Option<usize>,
}

/// A DLPack capsule of `bytes`, whose view was counted by the caller: `release` gives it
/// back, when the importer is done or at once if no capsule is made.
///
/// # Safety
/// The bytes stay valid until `release` runs (the caller counted a view that keeps the item
/// held), are writable by others only if `bytes.writable`, and cross mappings where
/// `bytes.second_mapping_at` says.
pub(crate) unsafe fn export<'py>(
    py: Python<'py>,
    request: Request<'py>,
    bytes: Bytes,
    release: Box<dyn FnOnce() + Send>,
) -> PyResult<Py<PyAny>> {
    // Dropped unused (the view given back) if the request is refused before a tensor is made.
    let mut view = View { release: Some(release), legacy: None };
    let parsed = ExportRequest::parse(request.stream.as_ref(), request.max_version, request.dl_device, request.copy)?;
    let Bytes { mut ptr, len, writable, second_mapping_at } = bytes;
    let mut read_only = !writable;
    if read_only && parsed.abi() == ExportAbi::Legacy {
        // The request's own checks first (copy=True, another device): nothing is made for a
        // refusal.
        parsed.validate_zero_copy(DLDevice::CPU, DlpackFlags::empty())?;
        if len > 0 {
            let legacy = if ReadOnlyAlias::possible(ptr, len) {
                // SAFETY: the item's bytes, held (the caller's promise), in shmbus's mappings,
                // crossing from one into the next where the item says.
                let alias = unsafe { ReadOnlyAlias::new(ptr, len, second_mapping_at) }.map_err(|e| {
                    PyBufferError::new_err(format!(
                        "the legacy DLPack ABI cannot mark a tensor read-only, and this item's \
                         bytes could not be mapped again read-only ({e}); ask for DLPack 1.0 \
                         (max_version=(1, 0)), as numpy.from_dlpack does"
                    ))
                })?;
                ptr = alias.as_ptr().cast_mut();
                Legacy::Alias(alias)
            } else {
                // SAFETY: the item's bytes, held (the caller's promise).
                let mut copy: Box<[u8]> = unsafe { std::slice::from_raw_parts(ptr, len) }.into();
                ptr = copy.as_mut_ptr();
                Legacy::Copy(copy)
            };
            view.legacy = Some(legacy);
        }
        // No flag (the legacy ABI has none): a store through the alias faults, one into the
        // copy changes nobody's bytes, and an empty tensor has nothing to store into.
        read_only = false;
    }
    let exporter = Export { ptr, len, read_only, view: Cell::new(Some(view)) };
    export_dlpack(&exporter, py, parsed)
}
