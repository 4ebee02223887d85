//! Plain-old-data payloads: the [`Pod`] trait, the [`PayloadType`] a typed endpoint asks for,
//! and the [`StoredPayloadType`] a channel's header records.
//!
//! A typed endpoint (`topic.publisher_of::<T>()`, `queue.consumer_of::<T>()`, …) is a thin
//! wrapper over the byte endpoint of its kind: it sends the bytes of a `T` and reads a `T`
//! (or a `&T` in place) back, after checking at open time that the channel was made for `T`
//! (or is an untyped channel whose messages can hold one) and, on every receive, that the
//! message is exactly `size_of::<T>()` bytes.

// The kinds that use the helpers below are not built for the loom models.
#![cfg_attr(loom, allow(dead_code))]

use std::fmt;
use std::path::Path;

use crate::error::OpenError;

/// A type whose values can travel through shared memory as their bytes.
///
/// # Safety
/// Implement it only for a type that is, for every value:
/// * valid for **every bit pattern** of its size (shared memory is untrusted: a peer may
///   write anything), so no `bool`, `char`, enums, `NonZero*`, references;
/// * free of **padding** bytes (every byte is part of a field, so sending one never reads
///   uninitialized memory): add explicit padding fields where needed;
/// * free of **pointers and references** (an address means nothing in another process);
/// * `#[repr(C)]` or `#[repr(transparent)]` (a layout every process and a C peer agree on).
///
/// ```
/// #[derive(Clone, Copy)]
/// #[repr(C)]
/// struct Pose {
///     t_ns: u64,
///     xyz: [f32; 3],
///     _pad: u32, // no implicit padding: 8 + 12 + 4 = 24, a multiple of the alignment 8
/// }
/// // SAFETY: repr(C), only integers and floats, no padding, no pointers.
/// unsafe impl shmbus::Pod for Pose {}
/// ```
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

macro_rules! pod_impls {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive integer or float: any bit pattern is a value, no padding.
        unsafe impl Pod for $t {}
    )* };
}
pod_impls!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);

// SAFETY: an array of Pod has no padding between elements (size is a multiple of alignment)
// and every bit pattern of each element is valid.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// The payload type a typed endpoint asks for: its Rust name, size and alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PayloadType {
    /// `std::any::type_name::<T>()`.
    pub name: &'static str,
    /// `size_of::<T>()`.
    pub size: usize,
    /// `align_of::<T>()`.
    pub align: usize,
}

impl PayloadType {
    /// The payload type of `T`.
    pub fn of<T: Pod>() -> PayloadType {
        PayloadType {
            name: std::any::type_name::<T>(),
            size: std::mem::size_of::<T>(),
            align: std::mem::align_of::<T>(),
        }
    }
}

impl fmt::Display for PayloadType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} bytes, align {})", self.name, self.size, self.align)
    }
}

/// Bytes of a type name a header keeps (longer names are cut at a character boundary).
pub const TYPE_NAME_LEN: usize = 64;

/// The payload type a channel's header records (see [`HeaderInfo::payload`]): what
/// [`PayloadType`] a typed `create_or_open` made it for. The name is stored as at most
/// [`TYPE_NAME_LEN`] bytes, cut at a character boundary, and compared as stored.
///
/// [`HeaderInfo::payload`]: crate::HeaderInfo::payload
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoredPayloadType {
    name: [u8; TYPE_NAME_LEN],
    name_len: u8,
    size: u64,
    align: u32,
}

impl StoredPayloadType {
    /// How `t` is stored in a header.
    pub(crate) fn from_type(t: &PayloadType) -> StoredPayloadType {
        let stored = truncated_name(t.name);
        let mut name = [0u8; TYPE_NAME_LEN];
        name[..stored.len()].copy_from_slice(stored.as_bytes());
        StoredPayloadType { name, name_len: stored.len() as u8, size: t.size as u64, align: t.align as u32 }
    }

    /// Builds it from header fields read from an untrusted file: `Ok(None)` for an untyped
    /// channel (all zero), `Err` with what is wrong for anything inconsistent.
    pub(crate) fn from_raw(size: u64, align: u32, name: &[u8; TYPE_NAME_LEN]) -> Result<Option<Self>, String> {
        if size == 0 {
            if align != 0 || name.iter().any(|&b| b != 0) {
                return Err("payload type fields are set but its size is zero".into());
            }
            return Ok(None);
        }
        if !align.is_power_of_two() {
            return Err(format!("payload type alignment {align} is not a power of two"));
        }
        let len = name.iter().position(|&b| b == 0).unwrap_or(TYPE_NAME_LEN);
        if len == 0 || name[len..].iter().any(|&b| b != 0) || std::str::from_utf8(&name[..len]).is_err() {
            return Err("payload type name is not a zero-padded UTF-8 name".into());
        }
        Ok(Some(StoredPayloadType { name: *name, name_len: len as u8, size, align }))
    }

    /// The type's name, as stored (at most [`TYPE_NAME_LEN`] bytes).
    pub fn name(&self) -> &str {
        // Validated UTF-8 (or copied from a `&str` at a character boundary).
        std::str::from_utf8(&self.name[..self.name_len as usize]).unwrap_or("")
    }

    /// The type's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The type's alignment in bytes.
    pub fn align(&self) -> u32 {
        self.align
    }

    /// Whether `t` is the type recorded here (name as stored, size and alignment).
    pub fn matches(&self, t: &PayloadType) -> bool {
        self.name() == truncated_name(t.name) && self.size == t.size as u64 && self.align as usize == t.align
    }

    /// The raw header fields: size, alignment, zero-padded name.
    pub(crate) fn raw(&self) -> (u64, u32, [u8; TYPE_NAME_LEN]) {
        (self.size, self.align, self.name)
    }
}

impl fmt::Display for StoredPayloadType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} bytes, align {})", self.name(), self.size, self.align)
    }
}

impl fmt::Debug for StoredPayloadType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredPayloadType")
            .field("name", &self.name())
            .field("size", &self.size)
            .field("align", &self.align)
            .finish()
    }
}

/// `name` cut to at most [`TYPE_NAME_LEN`] bytes at a character boundary.
fn truncated_name(name: &str) -> &str {
    let mut end = name.len().min(TYPE_NAME_LEN);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Checks that a typed endpoint (or typed config) for `wanted` may use the channel at
/// `path`, which records `recorded`, carries messages of at most `max_len` bytes and places
/// them at addresses aligned to `align` (`usize::MAX`: the kind never lends its memory as a
/// `&T`, so any alignment goes).
pub(crate) fn check_payload(
    path: &Path,
    recorded: Option<&StoredPayloadType>,
    wanted: &PayloadType,
    max_len: usize,
    align: usize,
) -> Result<(), OpenError> {
    if wanted.size == 0 {
        return Err(OpenError::InvalidConfig {
            what: format!("payload type {wanted} is zero-sized: a message must have at least one byte"),
        });
    }
    let mismatch =
        |found: String| OpenError::TypeMismatch { path: path.to_owned(), expected: wanted.to_string(), found };
    match recorded {
        Some(r) if !r.matches(wanted) => return Err(mismatch(r.to_string())),
        Some(r) if max_len < wanted.size => {
            return Err(OpenError::corrupt(
                path,
                format!("records payload type {r} but carries at most {max_len} bytes"),
            ))
        }
        Some(_) => {}
        None if max_len < wanted.size => return Err(mismatch(format!("bytes (at most {max_len} per message)"))),
        None => {}
    }
    if align < wanted.align {
        return Err(match recorded {
            None => mismatch(format!("bytes (placed at {align}-byte aligned addresses)")),
            Some(_) => OpenError::InvalidConfig {
                what: format!("payload type {wanted} needs {}-byte alignment; this kind places messages at {align}-byte aligned addresses", wanted.align),
            },
        });
    }
    Ok(())
}

/// Checks, before creating anything, that a channel made from a typed config for `t`, whose
/// messages are at most `max_len` bytes placed at `align`-byte aligned addresses, can carry
/// `t`: [`OpenError::InvalidConfig`] with the reason if not.
pub(crate) fn check_creatable(t: &PayloadType, max_len: usize, align: usize) -> Result<(), OpenError> {
    let what = if t.size == 0 {
        format!("payload type {t} is zero-sized: a message must have at least one byte")
    } else if max_len < t.size {
        format!("payload type {t} does not fit in messages of at most {max_len} bytes")
    } else if align < t.align {
        format!(
            "payload type {t} needs {}-byte alignment; this kind places messages at {align}-byte aligned addresses",
            t.align
        )
    } else {
        return Ok(());
    };
    Err(OpenError::InvalidConfig { what })
}

/// The bytes of `value`.
pub(crate) fn bytes_of<T: Pod>(value: &T) -> &[u8] {
    // SAFETY: T: Pod has no padding, so all size_of::<T>() bytes are initialized.
    unsafe { std::slice::from_raw_parts(value as *const T as *const u8, std::mem::size_of::<T>()) }
}

/// A `T` copied out of `bytes`, which must be exactly `size_of::<T>()` long (else `None`).
pub(crate) fn read_from<T: Pod>(bytes: &[u8]) -> Option<T> {
    (bytes.len() == std::mem::size_of::<T>())
        // SAFETY: the length matches, and every bit pattern is a valid T (Pod).
        .then(|| unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const T) })
}

/// `bytes` viewed as a `&T`, if it is exactly `size_of::<T>()` long and aligned for `T`.
pub(crate) fn ref_from<T: Pod>(bytes: &[u8]) -> Option<&T> {
    (bytes.len() == std::mem::size_of::<T>() && (bytes.as_ptr() as usize) % std::mem::align_of::<T>() == 0)
        // SAFETY: length and alignment checked; every bit pattern is a valid T (Pod).
        .then(|| unsafe { &*(bytes.as_ptr() as *const T) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_at_a_char_boundary_and_compared_as_stored() {
        let name: &'static str = Box::leak(format!("{}é", "a".repeat(TYPE_NAME_LEN - 1)).into_boxed_str());
        let t = PayloadType { name, size: 8, align: 8 };
        let stored = StoredPayloadType::from_type(&t);
        assert_eq!(stored.name(), "a".repeat(TYPE_NAME_LEN - 1));
        assert!(stored.matches(&t));
        assert!(!stored.matches(&PayloadType { size: 16, ..t }));
        assert!(!stored.matches(&PayloadType { align: 4, ..t }));
        let (size, align, raw) = stored.raw();
        assert_eq!(StoredPayloadType::from_raw(size, align, &raw), Ok(Some(stored)));
    }

    #[test]
    fn header_fields_from_an_untrusted_file_are_validated() {
        let zero = [0u8; TYPE_NAME_LEN];
        assert_eq!(StoredPayloadType::from_raw(0, 0, &zero), Ok(None));
        assert!(StoredPayloadType::from_raw(0, 8, &zero).is_err(), "fields set with size 0");
        let mut name = zero;
        name[..3].copy_from_slice(b"u64");
        assert!(StoredPayloadType::from_raw(8, 3, &name).is_err(), "alignment not a power of two");
        assert!(StoredPayloadType::from_raw(8, 8, &zero).is_err(), "empty name");
        let mut gap = name;
        gap[5] = b'x';
        assert!(StoredPayloadType::from_raw(8, 8, &gap).is_err(), "bytes after the terminator");
        let mut bad = zero;
        bad[0] = 0xff;
        assert!(StoredPayloadType::from_raw(8, 8, &bad).is_err(), "not UTF-8");
        let ok = StoredPayloadType::from_raw(8, 8, &name).unwrap().unwrap();
        assert!(ok.matches(&PayloadType::of::<u64>()));
        assert_eq!(ok.to_string(), "u64 (8 bytes, align 8)");
    }

    #[test]
    fn bytes_round_trip_and_views_check_length_and_alignment() {
        let v: [u32; 2] = [1, 2];
        let b = bytes_of(&v);
        assert_eq!(b.len(), 8);
        assert_eq!(read_from::<[u32; 2]>(b), Some(v));
        assert_eq!(read_from::<[u32; 2]>(&b[..7]), None);
        let words = [0u64; 2];
        let aligned = bytes_of(&words);
        assert!(ref_from::<u64>(&aligned[..8]).is_some());
        assert!(ref_from::<u64>(&aligned[1..9]).is_none(), "misaligned");
        assert!(ref_from::<u64>(&aligned[..9]).is_none(), "wrong length");
    }
}
