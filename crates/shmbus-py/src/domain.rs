//! `shmbus.Domain`.

use std::path::PathBuf;

use pyo3::prelude::*;
use shmbus::Domain;

use crate::errors::OrRaise;

/// A namespace of channels: a directory `shmbus.<name>` under `root` (default: the
/// `SHMBUS_ROOT` environment variable, else `/dev/shm`).
#[pyclass(frozen, module = "shmbus", name = "Domain")]
#[derive(Debug)]
pub(crate) struct PyDomain {
    pub(crate) inner: Domain,
}

#[pymethods]
impl PyDomain {
    #[new]
    #[pyo3(signature = (name, root=None))]
    fn new(name: &str, root: Option<PathBuf>) -> PyResult<PyDomain> {
        let inner = match root {
            Some(r) => Domain::with_root(name, r),
            None => Domain::new(name),
        }
        .or_raise()?;
        Ok(PyDomain { inner })
    }

    /// The domain's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The root directory the domain lives under.
    #[getter]
    fn root(&self) -> PathBuf {
        self.inner.root().to_path_buf()
    }

    /// The directory holding the domain's channel files.
    #[getter]
    fn dir(&self) -> PathBuf {
        self.inner.dir()
    }

    /// The names of the channels in the domain (empty if its directory does not exist).
    fn channel_names(&self) -> PyResult<Vec<String>> {
        match self.inner.channel_names() {
            Ok(v) => Ok(v),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    /// What comes and goes in the domain from now on: a `DomainWatch` of `DomainEvent`s
    /// (channels created and removed, seen at once; participants joined and left, read every
    /// `participant_interval` seconds, 0.1 by default, a process killed by SIGKILL included).
    /// `channels_only=True` reads no participant table.
    #[pyo3(signature = (*, participant_interval=None, channels_only=false))]
    fn watch(&self, participant_interval: Option<f64>, channels_only: bool) -> PyResult<crate::watch::PyDomainWatch> {
        crate::watch::watch(&self.inner, participant_interval, channels_only)
    }

    fn __repr__(&self) -> String {
        format!("Domain({:?}, root={:?})", self.inner.name(), self.inner.root())
    }
}
