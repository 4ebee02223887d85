//! The error types: one per operation ([`CodecError`] for [`Codec::new`](crate::Codec::new),
//! [`DecodeError`] for decode, [`EncodeError`] for encode). Each variant is a class a caller
//! can act on; messages name the field path (`linear_acceleration.x`, `covariance[3]`).

use std::fmt;

/// Why a [`Codec`](crate::Codec) could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CodecError {
    /// No codec for this `message_encoding` / `schema_encoding` pair (see
    /// [`supported`](crate::supported)), or a part of a schema language this crate does not
    /// implement.
    Unsupported {
        /// The message encoding asked for.
        message_encoding: String,
        /// The schema encoding asked for.
        schema_encoding: String,
        /// What exactly is not supported.
        reason: String,
    },
    /// The schema data does not parse, or does not describe `schema_name`.
    BadSchema {
        /// What is wrong, with the place (line, type or field) where known.
        reason: String,
    },
}

impl CodecError {
    pub(crate) fn bad(reason: impl Into<String>) -> Self {
        CodecError::BadSchema { reason: reason.into() }
    }
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Unsupported { message_encoding, schema_encoding, reason } => write!(
                f,
                "no codec for message encoding {message_encoding:?} with schema encoding \
                 {schema_encoding:?}: {reason}"
            ),
            CodecError::BadSchema { reason } => write!(f, "bad schema: {reason}"),
        }
    }
}

impl std::error::Error for CodecError {}

fn with_path(f: &mut fmt::Formatter<'_>, path: &str) -> fmt::Result {
    if path.is_empty() {
        Ok(())
    } else {
        write!(f, "{path}: ")
    }
}

/// Why message bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes end inside the field at `path`.
    Truncated {
        /// The field being read (empty: the message itself).
        path: String,
    },
    /// The bytes at `path` are not a valid value (bad UTF-8, a bool that is neither 0 nor 1,
    /// an unknown encapsulation header, a length over its bound, ...).
    Invalid {
        /// The field being read (empty: the message itself).
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The message is longer than its schema accounts for.
    TrailingBytes {
        /// How many bytes are left over.
        count: usize,
    },
    /// The message has a size other than the fixed size its schema says (`shmbus-pod`).
    WrongSize {
        /// The size the schema gives.
        expected: usize,
        /// The message's size.
        actual: usize,
    },
    /// Nesting deeper than [`MAX_DEPTH`](crate::MAX_DEPTH).
    TooDeep {
        /// Where the limit was hit.
        path: String,
    },
    /// The decoded form would exceed [`MAX_OUTPUT_NODES`](crate::MAX_OUTPUT_NODES) values.
    TooLarge,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { path } => {
                with_path(f, path)?;
                write!(f, "message ends early")
            }
            DecodeError::Invalid { path, reason } => {
                with_path(f, path)?;
                write!(f, "{reason}")
            }
            DecodeError::TrailingBytes { count } => {
                write!(f, "{count} bytes after the end of the message")
            }
            DecodeError::WrongSize { expected, actual } => {
                write!(f, "message is {actual} bytes, its schema says {expected}")
            }
            DecodeError::TooDeep { path } => {
                with_path(f, path)?;
                write!(f, "nested more than {} levels deep", crate::MAX_DEPTH)
            }
            DecodeError::TooLarge => write!(f, "decoded form would have more than {} values", crate::MAX_OUTPUT_NODES),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why a JSON value could not be encoded; no bytes are produced.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The value has a field the schema does not have.
    UnknownField {
        /// The unknown field.
        path: String,
    },
    /// A value of the wrong JSON type (a string where a number is expected, ...).
    WrongType {
        /// The field.
        path: String,
        /// What the schema wants (`a number`, `an object`, ...).
        expected: String,
        /// The JSON value found, abbreviated.
        found: String,
    },
    /// A value of the right type but outside its range: 300 for a uint8, a string or
    /// sequence over its bound.
    OutOfRange {
        /// The field.
        path: String,
        /// What is out of range.
        reason: String,
    },
    /// A fixed-size array given with another number of elements.
    WrongLength {
        /// The field.
        path: String,
        /// The schema's length.
        expected: usize,
        /// The number given.
        found: usize,
    },
    /// Nesting deeper than [`MAX_DEPTH`](crate::MAX_DEPTH).
    TooDeep {
        /// Where the limit was hit.
        path: String,
    },
    /// Another error reported by an underlying encoder.
    Invalid {
        /// The field, where known.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

impl EncodeError {
    pub(crate) fn wrong_type(path: &str, expected: &str, found: &serde_json::Value) -> Self {
        EncodeError::WrongType { path: path.to_owned(), expected: expected.to_owned(), found: abbreviate(found) }
    }
}

/// A JSON value as an error message shows it: its text, cut to 40 characters.
pub(crate) fn abbreviate(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        let cut: String = s.chars().take(37).collect();
        format!("{cut}...")
    } else {
        s
    }
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::UnknownField { path } => write!(f, "{path}: no such field in the schema"),
            EncodeError::WrongType { path, expected, found } => {
                with_path(f, path)?;
                write!(f, "expected {expected}, found {found}")
            }
            EncodeError::OutOfRange { path, reason } => {
                with_path(f, path)?;
                write!(f, "{reason}")
            }
            EncodeError::WrongLength { path, expected, found } => {
                with_path(f, path)?;
                write!(f, "expected exactly {expected} elements, found {found}")
            }
            EncodeError::TooDeep { path } => {
                with_path(f, path)?;
                write!(f, "nested more than {} levels deep", crate::MAX_DEPTH)
            }
            EncodeError::Invalid { path, reason } => {
                with_path(f, path)?;
                write!(f, "{reason}")
            }
        }
    }
}

impl std::error::Error for EncodeError {}

/// Joins a path and a field name: `a` + `b` = `a.b`.
pub(crate) fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}
