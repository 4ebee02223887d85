//! `shmbus.Schema`: what a channel's messages are, in MCAP's vocabulary (message encoding,
//! schema name, schema encoding, schema data), set with the `schema=` keyword of every
//! `create_or_open` and read back as each channel's `.schema`.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use shmbus::Schema;

use crate::block::Bytes;
use crate::errors::Fail;

/// A channel's schema: `message_encoding` (how each message is encoded: 'cdr', 'protobuf',
/// 'json', ...; never empty), `name` ('sensor_msgs/msg/Imu'), `encoding` (the schema's
/// encoding: 'ros2msg', 'protobuf', ...; '' for none) and `data` (the schema's bytes, any
/// bytes-like object, at most 1 MiB). An invalid one raises `InvalidConfig`.
#[pyclass(frozen, eq, hash, module = "shmbus", name = "Schema")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PySchema {
    pub(crate) inner: Schema,
}

impl From<Schema> for PySchema {
    fn from(inner: Schema) -> PySchema {
        PySchema { inner }
    }
}

#[pymethods]
impl PySchema {
    #[new]
    #[pyo3(signature = (message_encoding, name="", encoding="", data=None))]
    fn new(message_encoding: &str, name: &str, encoding: &str, data: Option<&Bound<'_, PyAny>>) -> PyResult<PySchema> {
        // Any contiguous bytes-like object, copied once.
        let data = data.map(Bytes::get).transpose()?;
        let data = data.as_ref().map_or(&[][..], Bytes::as_slice);
        let inner = Schema::new(message_encoding, name, encoding, data)
            .map_err(|e| Fail::new("InvalidConfig", e.to_string()))?;
        Ok(PySchema { inner })
    }

    /// How each message's bytes are encoded ('cdr', 'protobuf', 'json', ...).
    #[getter]
    fn message_encoding(&self) -> &str {
        self.inner.message_encoding()
    }

    /// The schema's name ('sensor_msgs/msg/Imu'); may be ''.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The schema's encoding ('ros2msg', 'protobuf', ...); '' when there is no data.
    #[getter]
    fn encoding(&self) -> &str {
        self.inner.encoding()
    }

    /// The schema's bytes.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.data())
    }

    fn __repr__(&self) -> String {
        let s = &self.inner;
        format!(
            "Schema({:?}, name={:?}, encoding={:?}, data=<{} bytes>)",
            s.message_encoding(),
            s.name(),
            s.encoding(),
            s.data().len()
        )
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }
}

/// A `schema=` keyword's value as the Rust schema (a clone: configs own theirs).
pub(crate) fn schema_arg(s: Option<PyRef<'_, PySchema>>) -> Option<Schema> {
    s.map(|s| s.inner.clone())
}

/// A channel's `.schema`: a `Schema`, or None.
pub(crate) fn schema_of(s: Option<&Schema>) -> Option<PySchema> {
    s.cloned().map(PySchema::from)
}
