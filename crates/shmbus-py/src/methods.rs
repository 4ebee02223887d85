//! The methods every handle, endpoint and lent item class shares, and the copied items'
//! classes, written once.
//!
//! PyO3 takes one `#[pymethods]` block per class, so the shared methods cannot live in a
//! block of their own: each macro here takes a class's `impl` block, adds the shared
//! methods to it and makes it the class's `#[pymethods]`.

/// The `#[pymethods]` of a class owning a [`Cell`](crate::cell::Cell) as its `cell` field (a
/// handle or an endpoint): the methods given, plus `close()` (documented by the comment
/// before `fn close;`), the context manager (`with x:` closes `x` at its end), and the
/// methods declared after `fn close;` as `fn name -> Type;` (with their comment and
/// attributes, `#[getter]` for a property): each calls the endpoint's method of the same
/// name, which takes no argument and cannot fail, and returns what it does (or `Closed`,
/// `Busy`). One declared `fn name -> Type, without_gil;` lets go of the GIL while the
/// endpoint's method runs (for work that can take milliseconds, such as `prefault`).
///
/// ```ignore
/// closing_pymethods! {
/// impl PyTopic {
///     // the class's own methods
/// }
///
/// /// Unmaps the topic (endpoints made from it keep working).
/// fn close;
///
/// /// The guaranteed history depth.
/// #[getter]
/// fn history -> usize;
/// }
/// ```
macro_rules! closing_pymethods {
    (
        impl $ty:ident { $($methods:tt)* }
        $(#[$close_doc:meta])* fn close;
        $($(#[$attr:meta])* fn $name:ident -> $ret:ty $(, $gil:ident)?;)*
    ) => {
        #[pyo3::pymethods]
        impl $ty {
            $($methods)*

            $(#[$close_doc])*
            fn close(&self) {
                self.cell.close()
            }

            fn __enter__(slf: pyo3::Py<Self>) -> pyo3::Py<Self> {
                slf
            }

            #[pyo3(signature = (*_args))]
            fn __exit__(&self, _args: &pyo3::Bound<'_, pyo3::types::PyTuple>) -> bool {
                self.cell.close();
                false
            }

            $(
                $(#[$attr])*
                fn $name(&self, _py: pyo3::Python<'_>) -> pyo3::PyResult<$ret> {
                    closing_pymethods!(@call self, _py, $name $(, $gil)?)
                }
            )*
        }
    };
    (@call $self:ident, $py:ident, $name:ident) => {
        Ok($self.cell.with_ref(|ep| ep.$name())?)
    };
    (@call $self:ident, $py:ident, $name:ident, without_gil) => {
        Ok($py.detach(|| $self.cell.with_ref(|ep| ep.$name()))?)
    };
}
pub(crate) use closing_pymethods;

/// The `#[pymethods]` of a lent item's class (a sample, record, job or loan, held in its
/// `held` field, a [`Held`](crate::held::Held)): the methods given, plus `release()`
/// (documented by the comment before `fn release;`), `len()`, the context manager (`with
/// x:` releases `x` at its end), and, if `fn tobytes;` follows, `tobytes()` (a copy of the
/// bytes).
///
/// The buffer protocol's `unsafe` methods stay in each class's own methods (two lines that
/// call `Held::export` and `Held::unexport`): PyO3 calls them from its generated wrapper,
/// which the `unsafe_op_in_unsafe_fn` lint flags when the methods come out of a
/// `macro_rules!` expansion.
macro_rules! lent_pymethods {
    (
        impl $ty:ident { $($methods:tt)* }
        $(#[$release_doc:meta])* fn release $(= $release:path)?;
        $(fn $tobytes:ident;)?
    ) => {
        #[pyo3::pymethods]
        impl $ty {
            $($methods)*

            $(#[$release_doc])*
            fn release(&self, py: pyo3::Python<'_>) -> pyo3::PyResult<()> {
                $crate::methods::lent_release!(self, py $(, $release)?)
            }

            $(
                /// The payload, copied into `bytes`.
                fn $tobytes<'py>(&self, py: pyo3::Python<'py>) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::types::PyBytes>> {
                    self.held.tobytes(py)
                }
            )?

            /// A DLPack capsule of the bytes, for `numpy.from_dlpack`, `torch.from_dlpack`,
            /// `jax.numpy.from_dlpack`: a one-dimensional `uint8` CPU tensor viewing the item
            /// in place (read-only unless it is a loan), which keeps it held as a buffer
            /// view does, until the importer lets go of it. Without `max_version` (DLPack's
            /// legacy interface, which has no read-only flag) a received item is viewed
            /// through a read-only second mapping of its pages.
            #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
            fn __dlpack__<'py>(
                slf: pyo3::Bound<'py, Self>,
                stream: Option<pyo3::Bound<'py, pyo3::PyAny>>,
                max_version: Option<(u32, u32)>,
                dl_device: Option<(u32, i32)>,
                copy: Option<bool>,
            ) -> pyo3::PyResult<pyo3::Py<pyo3::PyAny>> {
                let owner: pyo3::Py<Self> = slf.clone().unbind();
                let request = crate::dlpack::Request { stream, max_version, dl_device, copy };
                slf.get().held.dlpack(slf.py(), request, Box::new(move || owner.get().held.unexport()))
            }

            /// `(1, 0)`: the CPU (`kDLCPU`), device 0.
            fn __dlpack_device__(&self) -> (u32, i32) {
                crate::dlpack::CPU
            }

            fn __len__(&self) -> usize {
                self.held.len()
            }

            fn __enter__(slf: pyo3::Py<Self>) -> pyo3::Py<Self> {
                slf
            }

            #[pyo3(signature = (*_args))]
            fn __exit__(&self, py: pyo3::Python<'_>, _args: &pyo3::Bound<'_, pyo3::types::PyTuple>) -> pyo3::PyResult<bool> {
                $crate::methods::lent_release!(self, py $(, $release)?)?;
                Ok(false)
            }
        }
    };
}
pub(crate) use lent_pymethods;

/// What `release()` of a lent item does: give it back unused ([`Held::release`]), or what
/// the class names after `fn release =` (a request's, which ends it).
///
/// [`Held::release`]: crate::held::Held::release
macro_rules! lent_release {
    ($item:expr, $py:expr) => {{
        let _ = $py;
        $item.held.release()
    }};
    ($item:expr, $py:expr, $release:path) => {
        $release($item, $py)
    };
}
pub(crate) use lent_release;

/// A channel config: `$config` with each keyword argument given (`Some`) applied through the
/// setter of the same name; the others left at what the config has.
macro_rules! config_from_args {
    ($config:expr; $($arg:ident),* $(,)?) => {{
        let mut config = $config;
        $(
            if let Some(v) = $arg {
                config = config.$arg(v);
            }
        )*
        config
    }};
}
pub(crate) use config_from_args;

/// A `dict` of `"key" => value` pairs (a `status()` result), or the error of the first
/// value that does not convert.
macro_rules! py_dict {
    ($py:expr, { $($key:literal => $value:expr),* $(,)? }) => {{
        let d = pyo3::types::PyDict::new($py);
        $(pyo3::types::PyDictMethods::set_item(&d, $key, $value)?;)*
        d
    }};
}
pub(crate) use py_dict;

/// A class of copied items (`Message`, `Entry`): the payload as `data` (bytes) and the
/// `u64` fields listed, each read from the Rust item's method of the same name; `len()`,
/// `bytes()` and a `repr` naming the fields.
macro_rules! copied_item {
    ($(#[$doc:meta])* $name:literal: $ty:ident from $item:ty { $($field:ident),* $(,)? }) => {
        $(#[$doc])*
        #[pyo3::pyclass(frozen, module = "shmbus", name = $name, get_all)]
        #[derive(Debug)]
        pub(crate) struct $ty {
            data: pyo3::Py<pyo3::types::PyBytes>,
            $($field: u64,)*
        }

        impl $ty {
            fn new(py: pyo3::Python<'_>, item: $item) -> $ty {
                $ty { data: pyo3::types::PyBytes::new(py, item.data()).unbind(), $($field: item.$field(),)* }
            }

            /// From bytes already copied into Python, and the fields.
            fn with_bytes(data: pyo3::Bound<'_, pyo3::types::PyBytes>, $($field: u64),*) -> $ty {
                $ty { data: data.unbind(), $($field,)* }
            }
        }

        #[pyo3::pymethods]
        impl $ty {
            fn __len__(&self, py: pyo3::Python<'_>) -> usize {
                pyo3::types::PyBytesMethods::as_bytes(self.data.bind(py)).len()
            }

            fn __bytes__(&self, py: pyo3::Python<'_>) -> pyo3::Py<pyo3::types::PyBytes> {
                self.data.clone_ref(py)
            }

            fn __repr__(&self, py: pyo3::Python<'_>) -> String {
                let fields = [$(format!("{}={}", stringify!($field), self.$field)),*];
                format!("{}({}, len={})", $name, fields.join(", "), self.__len__(py))
            }
        }
    };
}
pub(crate) use copied_item;
