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
/// Derive it: `#[derive(shmbus::Pod)]` (feature `derive`, on by default) checks the rules
/// below at compile time and describes the struct's layout for the channel schema
/// ([`pod_schema`]):
///
/// ```
/// #[derive(Debug, Clone, Copy, PartialEq, shmbus::Pod)]
/// #[repr(C)]
/// struct Imu {
///     t_ns: u64,
///     accel: [f32; 3],
///     gyro: [f32; 3], // 8 + 12 + 12 = 32: no padding
/// }
///
/// let (name, json) = shmbus::pod::pod_schema::<Imu>().unwrap();
/// assert!(name.ends_with("::Imu"));
/// assert!(json.starts_with(r#"{"name":""#));
/// ```
///
/// The integers (`u8` to `u128`, `i8` to `i128`, `usize`, `isize`), `f32`, `f64` and arrays
/// `[T; N]` of a `Pod` `T` are `Pod`.
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
/// The derive checks all four. By hand (a type the derive cannot see, or a layout described
/// some other way), say why each holds:
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
///
/// A hand-written impl has no schema ([`Pod::pod_layout`] is `None`) unless it overrides
/// `pod_layout` too.
///
/// # What the derive refuses
///
/// Padding (here 4 bytes after `id`, to align `t_ns`):
///
/// ```compile_fail,E0080
/// #[derive(Clone, Copy, shmbus::Pod)]
/// #[repr(C)]
/// struct Padded {
///     id: u32,
///     t_ns: u64,
/// }
/// ```
///
/// A struct without `#[repr(C)]` (Rust may reorder its fields):
///
/// ```compile_fail
/// #[derive(Clone, Copy, shmbus::Pod)]
/// struct NotC {
///     t_ns: u64,
///     id: u64,
/// }
/// ```
///
/// A pointer (or a reference: any field that is not `Pod`):
///
/// ```compile_fail,E0277
/// #[derive(Clone, Copy, shmbus::Pod)]
/// #[repr(C)]
/// struct WithPointer {
///     t_ns: u64,
///     data: *const u8,
/// }
/// ```
///
/// A `bool` (only 0 and 1 are valid, and a peer may write any byte):
///
/// ```compile_fail,E0277
/// #[derive(Clone, Copy, shmbus::Pod)]
/// #[repr(C)]
/// struct WithBool {
///     id: u8,
///     valid: bool,
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `shmbus::Pod`: it cannot travel through shared memory as its bytes",
    label = "not `shmbus::Pod`",
    note = "integers, floats, arrays of `Pod` and `#[derive(shmbus::Pod)]` structs are `Pod`; pointers, references, `bool`, `char` and enums are not"
)]
pub unsafe trait Pod: Copy + Send + Sync + 'static {
    /// The layout of `Self` for the channel schema (see [`pod_schema`]), or `None` if it is
    /// not described (the default). The derive, the primitives and arrays of described
    /// types give one.
    fn pod_layout() -> Option<PodLayout> {
        None
    }
}

macro_rules! pod_impls {
    ($($t:ty => $scalar:expr),* $(,)?) => { $(
        // SAFETY: a primitive integer or float: any bit pattern is a value, no padding.
        unsafe impl Pod for $t {
            fn pod_layout() -> Option<PodLayout> {
                Some(PodLayout::scalar($scalar))
            }
        }
    )* };
}
pod_impls!(
    u8 => PodScalar::U8, u16 => PodScalar::U16, u32 => PodScalar::U32, u64 => PodScalar::U64,
    u128 => PodScalar::U128, usize => PodScalar::USIZE,
    i8 => PodScalar::I8, i16 => PodScalar::I16, i32 => PodScalar::I32, i64 => PodScalar::I64,
    i128 => PodScalar::I128, isize => PodScalar::ISIZE,
    f32 => PodScalar::F32, f64 => PodScalar::F64,
);

// SAFETY: an array of Pod has no padding between elements (size is a multiple of alignment)
// and every bit pattern of each element is valid.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {
    fn pod_layout() -> Option<PodLayout> {
        let mut layout = T::pod_layout()?;
        layout.shape.insert(0, N);
        Some(layout)
    }
}

/// The `message_encoding` and `schema_encoding` of a channel of `Pod` structs whose schema
/// is [`pod_schema`]'s JSON.
pub const POD_ENCODING: &str = "shmbus-pod";

/// The layout of a [`Pod`] type, as the `shmbus-pod` schema describes it: an element type
/// (a number or a struct) and the array dimensions around it, outermost first (`[[f32; 3];
/// 4]` is `f32` with shape `[4, 3]`; a scalar has an empty shape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLayout {
    /// What each element is.
    pub element: PodElement,
    /// Array dimensions, outermost first; empty for a single element.
    pub shape: Vec<usize>,
}

impl PodLayout {
    /// A single number.
    pub fn scalar(scalar: PodScalar) -> PodLayout {
        PodLayout { element: PodElement::Scalar(scalar), shape: Vec::new() }
    }

    /// A single struct.
    pub fn of_struct(s: PodStruct) -> PodLayout {
        PodLayout { element: PodElement::Struct(s), shape: Vec::new() }
    }
}

/// The element of a [`PodLayout`]: a number or a struct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodElement {
    /// A little-endian integer or float.
    Scalar(PodScalar),
    /// A `#[repr(C)]` struct, described field by field.
    Struct(PodStruct),
}

/// A number type of the `shmbus-pod` schema (all little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum PodScalar {
    U8,
    U16,
    U32,
    U64,
    U128,
    I8,
    I16,
    I32,
    I64,
    I128,
    F32,
    F64,
}

impl PodScalar {
    /// `usize` on this target (`u64` on the 64-bit targets shmbus runs on).
    #[cfg(target_pointer_width = "64")]
    pub const USIZE: PodScalar = PodScalar::U64;
    /// `usize` on this target.
    #[cfg(target_pointer_width = "32")]
    pub const USIZE: PodScalar = PodScalar::U32;
    /// `isize` on this target (`i64` on the 64-bit targets shmbus runs on).
    #[cfg(target_pointer_width = "64")]
    pub const ISIZE: PodScalar = PodScalar::I64;
    /// `isize` on this target.
    #[cfg(target_pointer_width = "32")]
    pub const ISIZE: PodScalar = PodScalar::I32;

    /// Its name in the schema: `u8`, `u16`, … `i128`, `f32`, `f64`.
    pub fn name(self) -> &'static str {
        match self {
            PodScalar::U8 => "u8",
            PodScalar::U16 => "u16",
            PodScalar::U32 => "u32",
            PodScalar::U64 => "u64",
            PodScalar::U128 => "u128",
            PodScalar::I8 => "i8",
            PodScalar::I16 => "i16",
            PodScalar::I32 => "i32",
            PodScalar::I64 => "i64",
            PodScalar::I128 => "i128",
            PodScalar::F32 => "f32",
            PodScalar::F64 => "f64",
        }
    }

    /// Its size in bytes.
    pub fn size(self) -> usize {
        match self {
            PodScalar::U8 | PodScalar::I8 => 1,
            PodScalar::U16 | PodScalar::I16 => 2,
            PodScalar::U32 | PodScalar::I32 | PodScalar::F32 => 4,
            PodScalar::U64 | PodScalar::I64 | PodScalar::F64 => 8,
            PodScalar::U128 | PodScalar::I128 => 16,
        }
    }
}

/// A `#[repr(C)]` struct of the `shmbus-pod` schema: what `#[derive(shmbus::Pod)]` gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStruct {
    /// The schema name: `concat!(module_path!(), "::", Name)` for a derived struct.
    pub name: &'static str,
    /// `size_of` the struct: a message of this schema is exactly this many bytes.
    pub size: usize,
    /// `align_of` the struct.
    pub align: usize,
    /// Its fields, in declaration order.
    pub fields: Vec<PodField>,
}

/// A field of a [`PodStruct`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodField {
    /// The field's name (`0`, `1`, … for a tuple struct).
    pub name: &'static str,
    /// Its offset in the struct, in bytes (`core::mem::offset_of!`).
    pub offset: usize,
    /// Its type.
    pub layout: PodLayout,
}

impl PodStruct {
    /// The `shmbus-pod` schema JSON of this struct: one object
    /// `{"name":…,"size":…,"align":…,"fields":[{"name":…,"offset":…,"type":…,"shape":[…]},…]}`,
    /// with `type` a scalar name or a nested struct object and `shape` only on arrays. No
    /// whitespace; strings escaped.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) {
        out.push_str("{\"name\":");
        write_json_str(out, self.name);
        out.push_str(&format!(",\"size\":{},\"align\":{},\"fields\":[", self.size, self.align));
        for (i, field) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str("{\"name\":");
            write_json_str(out, field.name);
            out.push_str(&format!(",\"offset\":{},\"type\":", field.offset));
            match &field.layout.element {
                PodElement::Scalar(s) => write_json_str(out, s.name()),
                PodElement::Struct(s) => s.write_json(out),
            }
            if !field.layout.shape.is_empty() {
                let dims: Vec<String> = field.layout.shape.iter().map(|d| d.to_string()).collect();
                out.push_str(&format!(",\"shape\":[{}]", dims.join(",")));
            }
            out.push('}');
        }
        out.push_str("]}");
    }
}

/// `s` as a JSON string literal.
fn write_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The `shmbus-pod` schema of `T`: its name and JSON text (see [`PodStruct::to_json`]), for
/// a channel whose `message_encoding` and `schema_encoding` are [`POD_ENCODING`]. `None` if
/// `T` is not a described struct: a hand-written `Pod` impl without
/// [`Pod::pod_layout`], a struct with such a field, a number or an array.
///
/// ```
/// #[derive(Clone, Copy, shmbus::Pod)]
/// #[repr(C)]
/// struct Sample {
///     t_ns: u64,
///     grid: [[f32; 3]; 2],
///     id: u32,
///     _pad: u32, // 8 + 24 + 4 + 4 = 40, a multiple of the alignment 8
/// }
///
/// let (name, json) = shmbus::pod::pod_schema::<Sample>().unwrap();
/// assert_eq!(name, format!("{}::Sample", module_path!()));
/// assert_eq!(
///     json,
///     format!(
///         concat!(
///             r#"{{"name":"{}","size":40,"align":8,"fields":["#,
///             r#"{{"name":"t_ns","offset":0,"type":"u64"}},"#,
///             r#"{{"name":"grid","offset":8,"type":"f32","shape":[2,3]}},"#,
///             r#"{{"name":"id","offset":32,"type":"u32"}},"#,
///             r#"{{"name":"_pad","offset":36,"type":"u32"}}]}}"#,
///         ),
///         name
///     )
/// );
/// assert_eq!(shmbus::pod::pod_schema::<u64>(), None);
/// ```
pub fn pod_schema<T: Pod>() -> Option<(String, String)> {
    match T::pod_layout()? {
        PodLayout { element: PodElement::Struct(s), shape } if shape.is_empty() => {
            Some((s.name.to_owned(), s.to_json()))
        }
        _ => None,
    }
}

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
    fn schema_json_escapes_names() {
        let s = PodStruct {
            name: "odd \"name\" \\ \n",
            size: 2,
            align: 2,
            fields: vec![PodField { name: "a\u{1}", offset: 0, layout: PodLayout::scalar(PodScalar::I16) }],
        };
        assert_eq!(
            s.to_json(),
            r#"{"name":"odd \"name\" \\ \u000a","size":2,"align":2,"fields":[{"name":"a\u0001","offset":0,"type":"i16"}]}"#
        );
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
