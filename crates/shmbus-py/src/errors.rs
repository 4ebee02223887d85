//! The exception classes and the mapping of every Rust error onto them.
//!
//! Each Rust error enum is `#[non_exhaustive]`; its variant's name (the derived `Debug`
//! output starts with it; for a journal error wrapping an `OpenError`, the inner one) picks
//! the class, and an unknown variant falls back to the base `shmbus.Error`. The message is always the Rust error's `Display` text.

use std::fmt::{Debug, Display};

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
    ("BufferTooSmall", Some("Error"), Some("ValueError"), "The buffer given to `recv_into` cannot hold the next message (`.needed` bytes); the message is kept for the next receive."),
];

/// A Rust variant name → the class it raises; names not listed raise `Error`.
const VARIANTS: &[(&str, &str)] = &[
    ("Empty", "Empty"),
    ("Full", "Full"),
    ("AllBusy", "Full"),
    ("AllPinned", "AllPinned"),
    ("Timeout", "Timeout"),
    ("Lagged", "Lagged"),
    ("Disconnected", "Disconnected"),
    ("Orphaned", "Disconnected"),
    ("NoWorkers", "Disconnected"),
    ("TooLarge", "TooLarge"),
    ("PinLimit", "PinLimit"),
    ("Corrupt", "Corrupt"),
    ("Damaged", "Corrupt"),
    ("Gap", "Corrupt"),
    ("NotASegment", "Corrupt"),
    ("Truncated", "Truncated"),
    ("NotFound", "NotFound"),
    ("PermissionDenied", "PermissionDenied"),
    ("Untrusted", "PermissionDenied"),
    ("Busy", "Busy"),
    ("TooManyParticipants", "TooManyParticipants"),
    ("LayoutMismatch", "LayoutMismatch"),
    ("TypeMismatch", "TypeMismatch"),
    ("SchemaMismatch", "SchemaMismatch"),
    ("InvalidConfig", "InvalidConfig"),
    ("InvalidName", "InvalidName"),
];

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
    pub(crate) fn of<E: Debug + Display>(e: E) -> Fail {
        let debug = format!("{e:?}");
        let mut names = debug.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty());
        let mut variant = names.next().unwrap_or("");
        if variant == "Open" {
            // A journal error wrapping an `OpenError`: the inner variant says what happened.
            variant = names.next().unwrap_or("");
        }
        let class = VARIANTS.iter().find(|v| v.0 == variant).map_or("Error", |v| v.1);
        Fail { class, msg: e.to_string(), attr: None }
    }

    /// Sets the `missed` attribute (topic `Lagged`).
    pub(crate) fn missed(mut self, missed: u64) -> Fail {
        self.attr = Some(("missed", missed));
        self
    }

    /// A `BufferTooSmall`: the next message of `needed` bytes does not fit a buffer of
    /// `capacity`.
    pub(crate) fn too_small(needed: usize, capacity: usize) -> Fail {
        let msg = format!(
            "the next message is {needed} bytes but the buffer holds {capacity}; it is kept for the next receive: give a buffer of at least {needed} bytes"
        );
        Fail { class: "BufferTooSmall", msg, attr: Some(("needed", needed as u64)) }
    }

    /// Whether this is a timeout (a blocking call's slice ended).
    pub(crate) fn is_timeout(&self) -> bool {
        self.class == "Timeout"
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

impl<T, E: Debug + Display> OrRaise<T> for Result<T, E> {
    fn or_raise(self) -> Result<T, Fail> {
        self.map_err(Fail::of)
    }
}
