//! The exception classes and the mapping of every Rust error onto them.
//!
//! Every error of the library answers its [`ErrorKind`]; the kind picks the class (a kind
//! added later raises the base `shmbus.Error`), the number the error carries becomes the
//! class's attribute (`Lagged.missed`, `BufferTooSmall.needed`). The message is always the
//! Rust error's `Display` text.

use shmbus::{ErrorKind, Failure};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// The classes, in creation order: `(name, parent in this list, builtin base, doc)`.
const CLASSES: &[(&str, Option<&str>, Option<&str>, &str)] = &[
    ("Error", None, None, "Base class of every shmbus error; its message is the library's."),
    ("Empty", Some("Error"), None, "A non-blocking receive found nothing."),
    ("Full", Some("Error"), None, "A non-blocking send found no room (or every pool worker busy)."),
    ("Timeout", Some("Error"), Some("TimeoutError"), "A blocking call's timeout passed first."),
    ("Lagged", Some("Error"), None, "A topic subscriber fell behind; `.missed` messages were skipped."),
    ("Disconnected", Some("Error"), None, "The peer is gone: stream peer, pool dispatcher, or no pool worker."),
    ("TooLarge", Some("Error"), Some("ValueError"), "The message is larger than the channel allows."),
    ("AllPinned", Some("Full"), None, "Every topic slot is pinned by subscribers holding samples."),
    ("TopicFull", Some("Full"), None, "A reliable topic subscriber has not read the message a send would overwrite."),
    ("Evicted", Some("Error"), None, "A reliable topic subscriber stood still too long; it is lossy from now on."),
    ("PinLimit", Some("Error"), None, "The subscriber holds as many samples as its pin budget allows."),
    ("Corrupt", Some("Error"), None, "Shared memory or a file holds what cannot be true."),
    ("Truncated", Some("Corrupt"), None, "The channel's file was truncated under this process."),
    ("Incompatible", Some("Error"), None, "A file this library cannot use as asked: not a shmbus file, another format version, another kind of channel, not a regular file."),
    ("NoKey", Some("Error"), None, "A journal entry is encrypted with a key this tailer does not hold; it is skipped."),
    ("NotFound", Some("Error"), Some("FileNotFoundError"), "No such channel, journal or directory."),
    ("PermissionDenied", Some("Error"), Some("PermissionError"), "The file's owner or mode excludes this user."),
    ("Busy", Some("Error"), None, "An exclusive endpoint is held, or this endpoint lends an item."),
    ("TooManyParticipants", Some("Error"), None, "Every participant entry is in use."),
    ("LayoutMismatch", Some("Error"), None, "The channel exists with another configuration."),
    ("TypeMismatch", Some("Error"), None, "The channel carries another payload type."),
    ("SchemaMismatch", Some("Error"), None, "The channel carries another schema than `schema=` asked for (or none)."),
    ("InvalidConfig", Some("Error"), Some("ValueError"), "The configuration cannot work."),
    ("InvalidName", Some("Error"), Some("ValueError"), "The name is not a valid channel, domain or reader name."),
    ("Closed", Some("Error"), None, "The handle or endpoint was closed."),
    ("RequestFailed", Some("Error"), None, "A service's server failed the request: it could not answer it."),
    ("BufferTooSmall", Some("Error"), Some("ValueError"), "The buffer given to `recv_into` cannot hold the next message (`.needed` bytes); the message is kept for the next receive."),
];

/// The class a kind of error raises: one `match` (a kind added later raises `Error`).
fn class_of(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Empty => "Empty",
        ErrorKind::Full | ErrorKind::AllBusy => "Full",
        ErrorKind::AllPinned => "AllPinned",
        ErrorKind::Timeout => "Timeout",
        ErrorKind::Lagged => "Lagged",
        ErrorKind::Evicted => "Evicted",
        ErrorKind::Disconnected | ErrorKind::NoWorkers => "Disconnected",
        ErrorKind::TooLarge => "TooLarge",
        ErrorKind::BufferTooSmall => "BufferTooSmall",
        ErrorKind::PinLimit => "PinLimit",
        ErrorKind::Corrupt | ErrorKind::Damaged => "Corrupt",
        ErrorKind::Truncated => "Truncated",
        ErrorKind::NoKey => "NoKey",
        ErrorKind::Incompatible => "Incompatible",
        ErrorKind::NotFound => "NotFound",
        ErrorKind::PermissionDenied | ErrorKind::Untrusted => "PermissionDenied",
        ErrorKind::Busy => "Busy",
        ErrorKind::Closed => "Closed",
        ErrorKind::Failed => "RequestFailed",
        ErrorKind::TooManyParticipants => "TooManyParticipants",
        ErrorKind::LayoutMismatch => "LayoutMismatch",
        ErrorKind::TypeMismatch => "TypeMismatch",
        ErrorKind::SchemaMismatch => "SchemaMismatch",
        ErrorKind::InvalidConfig => "InvalidConfig",
        ErrorKind::InvalidName => "InvalidName",
        _ => "Error",
    }
}

static TYPES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

fn types(py: Python<'_>) -> &Vec<Py<PyType>> {
    TYPES.get_or_init(py, || make_types(py).expect("creating the shmbus exception classes"))
}

fn make_types(py: Python<'_>) -> PyResult<Vec<Py<PyType>>> {
    let builtins = py.import("builtins")?;
    let type_ = builtins.getattr("type")?;
    let mut made: Vec<Py<PyType>> = Vec::new();
    for (name, parent, builtin, doc) in CLASSES {
        let mut bases = Vec::new();
        match parent {
            Some(p) => bases.push(made[index(p)].bind(py).clone().into_any()),
            None => bases.push(builtins.getattr("Exception")?),
        }
        if let Some(b) = builtin {
            bases.push(builtins.getattr(*b)?);
        }
        let dict = PyDict::new(py);
        dict.set_item("__module__", "shmbus")?;
        dict.set_item("__doc__", *doc)?;
        let class = type_.call1((*name, PyTuple::new(py, bases)?, dict))?;
        made.push(class.cast_into::<PyType>()?.unbind());
    }
    Ok(made)
}

fn index(name: &str) -> usize {
    CLASSES.iter().position(|c| c.0 == name).expect("a listed class")
}

/// Adds every exception class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    for (i, (name, ..)) in CLASSES.iter().enumerate() {
        m.add(*name, types(py)[i].bind(py))?;
    }
    Ok(())
}

/// The shmbus exception class `class` (one of `CLASSES`).
pub(crate) fn class<'py>(py: Python<'py>, class: &str) -> Bound<'py, PyType> {
    types(py)[index(class)].bind(py).clone()
}

/// Whether `e` is an instance of the shmbus exception class `class`.
pub(crate) fn is_class(py: Python<'_>, e: &PyErr, class: &str) -> bool {
    e.is_instance(py, types(py)[index(class)].bind(py))
}

/// A failure on its way to Python: the class and the message, built without the GIL.
#[derive(Debug)]
pub(crate) struct Fail {
    class: &'static str,
    msg: String,
    /// An integer attribute of the exception (`Lagged.missed`, `BufferTooSmall.needed`).
    attr: Option<(&'static str, u64)>,
}

impl Fail {
    /// A failure of class `class` (one of `CLASSES`) with message `msg`.
    pub(crate) fn new(class: &'static str, msg: impl Into<String>) -> Fail {
        debug_assert!(CLASSES.iter().any(|c| c.0 == class));
        Fail { class, msg: msg.into(), attr: None }
    }

    /// The failure a Rust error maps to.
    pub(crate) fn of<E: Failure>(e: E) -> Fail {
        let kind = e.kind();
        let attr = match (kind, e.value()) {
            (ErrorKind::Lagged, Some(v)) => Some(("missed", v)),
            (ErrorKind::BufferTooSmall, Some(v)) => Some(("needed", v)),
            _ => None,
        };
        Fail { class: class_of(kind), msg: e.to_string(), attr }
    }

    /// The same failure raised as `class` (a subclass of its own) when its class is `from`.
    pub(crate) fn narrowed(mut self, from: &'static str, class: &'static str) -> Fail {
        debug_assert!(CLASSES.iter().any(|c| c.0 == class));
        if self.class == from {
            self.class = class;
        }
        self
    }

    /// Whether this is a timeout (a blocking call's slice ended).
    pub(crate) fn is_timeout(&self) -> bool {
        self.is(ErrorKind::Timeout)
    }

    /// Whether this is a failure of `kind`'s class.
    pub(crate) fn is(&self, kind: ErrorKind) -> bool {
        self.class == class_of(kind)
    }

    fn into_pyerr(self, py: Python<'_>) -> PyErr {
        let class = types(py)[index(self.class)].bind(py);
        match class.call1((self.msg,)) {
            Ok(value) => {
                if let Some((name, v)) = self.attr {
                    if let Err(e) = value.setattr(name, v) {
                        return e;
                    }
                }
                PyErr::from_value(value)
            }
            Err(e) => e,
        }
    }
}

impl From<Fail> for PyErr {
    fn from(f: Fail) -> PyErr {
        Python::attach(|py| f.into_pyerr(py))
    }
}

/// `?` on any shmbus error inside a binding: maps it to its exception.
pub(crate) trait OrRaise<T> {
    /// The value, or the error's exception.
    fn or_raise(self) -> Result<T, Fail>;
}

impl<T, E: Failure> OrRaise<T> for Result<T, E> {
    fn or_raise(self) -> Result<T, Fail> {
        self.map_err(Fail::of)
    }
}
