//! The `shmbus-pod` schema: a `#[repr(C)]` struct of little-endian numbers, described by a
//! JSON object `{"name","size","align","fields":[{"name","offset","type","shape"}]}` where
//! `type` is a scalar name (`u8` ... `i128`, `f32`, `f64`) or a nested struct object.
//!
//! Hand-written: the format is shmbus's own. The schema is untrusted (it comes from shared
//! memory): every field must lie inside `size`, sizes and offsets are checked for overflow,
//! nesting is capped at [`MAX_DEPTH`](crate::MAX_DEPTH), and a message must be exactly `size`
//! bytes.

use serde_json::{Map, Value};

use crate::cdr::{float32_value, float_value, Path};
use crate::error::{CodecError, DecodeError, EncodeError};
use crate::{DecodeOptions, MAX_DEPTH, MAX_OUTPUT_NODES, SUMMARY_THRESHOLD};

/// Largest struct size a schema may give (bytes).
const MAX_SIZE: u64 = 1 << 30;
/// Most fields a struct may have.
const MAX_FIELDS: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scalar {
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

impl Scalar {
    fn parse(s: &str) -> Option<Scalar> {
        Some(match s {
            "u8" => Scalar::U8,
            "u16" => Scalar::U16,
            "u32" => Scalar::U32,
            "u64" => Scalar::U64,
            "u128" => Scalar::U128,
            "i8" => Scalar::I8,
            "i16" => Scalar::I16,
            "i32" => Scalar::I32,
            "i64" => Scalar::I64,
            "i128" => Scalar::I128,
            "f32" => Scalar::F32,
            "f64" => Scalar::F64,
            _ => return None,
        })
    }

    fn size(self) -> usize {
        match self {
            Scalar::U8 | Scalar::I8 => 1,
            Scalar::U16 | Scalar::I16 => 2,
            Scalar::U32 | Scalar::I32 | Scalar::F32 => 4,
            Scalar::U64 | Scalar::I64 | Scalar::F64 => 8,
            Scalar::U128 | Scalar::I128 => 16,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scalar::U8 => "u8",
            Scalar::U16 => "u16",
            Scalar::U32 => "u32",
            Scalar::U64 => "u64",
            Scalar::U128 => "u128",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::I128 => "i128",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
        }
    }
}

#[derive(Debug, Clone)]
enum PodTy {
    Scalar(Scalar),
    Struct(Box<PodStruct>),
}

impl PodTy {
    fn size(&self) -> usize {
        match self {
            PodTy::Scalar(s) => s.size(),
            PodTy::Struct(s) => s.size,
        }
    }
}

#[derive(Debug, Clone)]
struct PodField {
    name: String,
    offset: usize,
    ty: PodTy,
    /// Array dimensions, outermost first; empty for a scalar.
    shape: Vec<usize>,
}

/// A parsed `shmbus-pod` struct.
#[derive(Debug, Clone)]
pub(crate) struct PodStruct {
    size: usize,
    fields: Vec<PodField>,
}

/// Parses the schema data (UTF-8 JSON).
pub(crate) fn parse(data: &[u8]) -> Result<PodStruct, CodecError> {
    let v: Value =
        serde_json::from_slice(data).map_err(|e| CodecError::bad(format!("shmbus-pod schema is not JSON: {e}")))?;
    parse_struct(&v, "", 0)
}

fn parse_struct(v: &Value, path: &str, depth: usize) -> Result<PodStruct, CodecError> {
    let at = |what: String| CodecError::bad(if path.is_empty() { what } else { format!("{path}: {what}") });
    if depth > MAX_DEPTH {
        return Err(at(format!("nested more than {MAX_DEPTH} levels deep")));
    }
    let obj = v.as_object().ok_or_else(|| at("a struct must be a JSON object".into()))?;
    let size = obj
        .get("size")
        .and_then(Value::as_u64)
        .filter(|&s| s <= MAX_SIZE)
        .ok_or_else(|| at(format!("`size` must be an integer up to {MAX_SIZE}")))? as usize;
    let fields_v = obj.get("fields").and_then(Value::as_array).ok_or_else(|| at("`fields` must be an array".into()))?;
    if fields_v.len() > MAX_FIELDS {
        return Err(at(format!("more than {MAX_FIELDS} fields")));
    }
    let mut fields: Vec<PodField> = Vec::with_capacity(fields_v.len());
    for fv in fields_v {
        let name = fv
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| at("a field without a string `name`".into()))?
            .to_owned();
        let fpath = crate::error::join(path, &name);
        let fat = |what: &str| CodecError::bad(format!("{fpath}: {what}"));
        if fields.iter().any(|f| f.name == name) {
            return Err(fat("declared twice"));
        }
        let offset =
            fv.get("offset").and_then(Value::as_u64).ok_or_else(|| fat("`offset` must be a non-negative integer"))?;
        let ty = match fv.get("type") {
            Some(Value::String(s)) => {
                PodTy::Scalar(Scalar::parse(s).ok_or_else(|| fat(&format!("unknown scalar type `{s}`")))?)
            }
            Some(t @ Value::Object(_)) => PodTy::Struct(Box::new(parse_struct(t, &fpath, depth + 1)?)),
            _ => return Err(fat("`type` must be a scalar name or a struct object")),
        };
        let shape: Vec<usize> = match fv.get("shape") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(dims)) => dims
                .iter()
                .map(|d| d.as_u64().map(|d| d as usize))
                .collect::<Option<Vec<usize>>>()
                .filter(|dims| !dims.is_empty() && dims.len() <= 8)
                .ok_or_else(|| fat("`shape` must be 1 to 8 non-negative integers"))?,
            Some(_) => return Err(fat("`shape` must be an array")),
        };
        let count =
            shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64)).ok_or_else(|| fat("`shape` overflows"))?;
        let end = count
            .checked_mul(ty.size() as u64)
            .and_then(|bytes| bytes.checked_add(offset))
            .ok_or_else(|| fat("field size overflows"))?;
        if end > size as u64 {
            return Err(fat(&format!("ends at byte {end}, past the struct's size {size}")));
        }
        fields.push(PodField { name, offset: offset as usize, ty, shape });
    }
    Ok(PodStruct { size, fields })
}

/// Decodes one message of exactly `size` bytes.
pub(crate) fn decode(s: &PodStruct, msg: &[u8], opts: &DecodeOptions) -> Result<Value, DecodeError> {
    if msg.len() != s.size {
        return Err(DecodeError::WrongSize { expected: s.size, actual: msg.len() });
    }
    let mut nodes = 0usize;
    decode_struct(s, msg, opts, &mut nodes)
}

fn bump(nodes: &mut usize) -> Result<(), DecodeError> {
    *nodes += 1;
    if *nodes > MAX_OUTPUT_NODES {
        return Err(DecodeError::TooLarge);
    }
    Ok(())
}

fn decode_struct(s: &PodStruct, bytes: &[u8], opts: &DecodeOptions, nodes: &mut usize) -> Result<Value, DecodeError> {
    bump(nodes)?;
    let mut map = Map::new();
    for f in &s.fields {
        // Checked when the schema was parsed: offset + the field's bytes <= size.
        let count: usize = f.shape.iter().product();
        let len = count * f.ty.size();
        let field_bytes = &bytes[f.offset..f.offset + len];
        let v = if matches!(f.ty, PodTy::Scalar(Scalar::U8)) && count > SUMMARY_THRESHOLD && !opts.full {
            bump(nodes)?;
            Value::String(format!("<{count} bytes>"))
        } else {
            decode_dims(&f.ty, &f.shape, field_bytes, opts, nodes)?
        };
        map.insert(f.name.clone(), v);
    }
    Ok(Value::Object(map))
}

fn decode_dims(
    ty: &PodTy,
    shape: &[usize],
    bytes: &[u8],
    opts: &DecodeOptions,
    nodes: &mut usize,
) -> Result<Value, DecodeError> {
    let Some((&outer, inner)) = shape.split_first() else {
        return decode_one(ty, bytes, opts, nodes);
    };
    bump(nodes)?;
    let stride = bytes.len().checked_div(outer).unwrap_or(0);
    let mut items = Vec::new();
    for i in 0..outer {
        items.push(decode_dims(ty, inner, &bytes[i * stride..(i + 1) * stride], opts, nodes)?);
    }
    Ok(Value::Array(items))
}

fn le<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

fn decode_one(ty: &PodTy, b: &[u8], opts: &DecodeOptions, nodes: &mut usize) -> Result<Value, DecodeError> {
    let s = match ty {
        PodTy::Struct(st) => return decode_struct(st, b, opts, nodes),
        PodTy::Scalar(s) => *s,
    };
    bump(nodes)?;
    Ok(match s {
        Scalar::U8 => Value::from(b[0]),
        Scalar::I8 => Value::from(b[0] as i8),
        Scalar::U16 => Value::from(u16::from_le_bytes(le(b))),
        Scalar::I16 => Value::from(i16::from_le_bytes(le(b))),
        Scalar::U32 => Value::from(u32::from_le_bytes(le(b))),
        Scalar::I32 => Value::from(i32::from_le_bytes(le(b))),
        Scalar::U64 => Value::from(u64::from_le_bytes(le(b))),
        Scalar::I64 => Value::from(i64::from_le_bytes(le(b))),
        Scalar::U128 => {
            let x = u128::from_le_bytes(le(b));
            match u64::try_from(x) {
                Ok(x) => Value::from(x),
                Err(_) => Value::String(x.to_string()),
            }
        }
        Scalar::I128 => {
            let x = i128::from_le_bytes(le(b));
            match i64::try_from(x) {
                Ok(x) => Value::from(x),
                Err(_) => Value::String(x.to_string()),
            }
        }
        Scalar::F32 => float32_value(f32::from_le_bytes(le(b))),
        Scalar::F64 => float_value(f64::from_le_bytes(le(b))),
    })
}

/// Encodes a JSON object into `size` bytes (missing fields zero).
pub(crate) fn encode(s: &PodStruct, value: &Value) -> Result<Vec<u8>, EncodeError> {
    let mut out = vec![0u8; s.size];
    let mut path = Path::default();
    encode_struct(s, value, &mut out, &mut path)?;
    Ok(out)
}

fn encode_struct<'s>(s: &'s PodStruct, value: &Value, out: &mut [u8], path: &mut Path<'s>) -> Result<(), EncodeError> {
    let Value::Object(obj) = value else {
        return Err(EncodeError::wrong_type(&path.render(), "an object", value));
    };
    if let Some(unknown) = obj.keys().find(|k| !s.fields.iter().any(|f| &f.name == *k)) {
        return Err(EncodeError::UnknownField { path: crate::error::join(&path.render(), unknown) });
    }
    for f in &s.fields {
        let Some(v) = obj.get(&f.name) else { continue };
        let count: usize = f.shape.iter().product();
        let len = count * f.ty.size();
        path.field(&f.name);
        encode_dims(&f.ty, &f.shape, v, &mut out[f.offset..f.offset + len], path)?;
        path.pop();
    }
    Ok(())
}

fn encode_dims<'s>(
    ty: &'s PodTy,
    shape: &[usize],
    v: &Value,
    out: &mut [u8],
    path: &mut Path<'s>,
) -> Result<(), EncodeError> {
    let Some((&outer, inner)) = shape.split_first() else {
        return encode_one(ty, v, out, path);
    };
    let Value::Array(items) = v else {
        return Err(EncodeError::wrong_type(&path.render(), "an array", v));
    };
    if items.len() != outer {
        return Err(EncodeError::WrongLength { path: path.render(), expected: outer, found: items.len() });
    }
    let stride = out.len().checked_div(outer).unwrap_or(0);
    for (i, item) in items.iter().enumerate() {
        path.index(i);
        encode_dims(ty, inner, item, &mut out[i * stride..(i + 1) * stride], path)?;
        path.pop();
    }
    Ok(())
}

fn encode_one<'s>(ty: &'s PodTy, v: &Value, out: &mut [u8], path: &mut Path<'s>) -> Result<(), EncodeError> {
    let s = match ty {
        PodTy::Struct(st) => return encode_struct(st, v, out, path),
        PodTy::Scalar(s) => *s,
    };
    let range = |reason: String| EncodeError::OutOfRange { path: path.render(), reason };
    if matches!(s, Scalar::F32 | Scalar::F64) {
        let x = match v {
            Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
            Value::String(t) if t == "NaN" => f64::NAN,
            Value::String(t) if t == "inf" => f64::INFINITY,
            Value::String(t) if t == "-inf" => f64::NEG_INFINITY,
            _ => return Err(EncodeError::wrong_type(&path.render(), "a number", v)),
        };
        if s == Scalar::F32 {
            if x.is_finite() && x.abs() > f64::from(f32::MAX) {
                return Err(range(format!("{x} does not fit f32")));
            }
            out.copy_from_slice(&(x as f32).to_le_bytes());
        } else {
            out.copy_from_slice(&x.to_le_bytes());
        }
        return Ok(());
    }
    // Integers: JSON integers, or (for 128-bit values) decimal strings.
    let x: i128 = match v {
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into(),
            (None, Some(u)) => u.into(),
            _ => return Err(EncodeError::wrong_type(&path.render(), "an integer", v)),
        },
        Value::String(t) if matches!(s, Scalar::U128 | Scalar::I128) => {
            if s == Scalar::U128 {
                let u: u128 = t.parse().map_err(|_| EncodeError::wrong_type(&path.render(), "an integer", v))?;
                out.copy_from_slice(&u.to_le_bytes());
                return Ok(());
            }
            t.parse().map_err(|_| EncodeError::wrong_type(&path.render(), "an integer", v))?
        }
        _ => return Err(EncodeError::wrong_type(&path.render(), "an integer", v)),
    };
    let (min, max): (i128, i128) = match s {
        Scalar::U8 => (0, u8::MAX.into()),
        Scalar::U16 => (0, u16::MAX.into()),
        Scalar::U32 => (0, u32::MAX.into()),
        Scalar::U64 | Scalar::U128 => (0, u64::MAX.into()),
        Scalar::I8 => (i8::MIN.into(), i8::MAX.into()),
        Scalar::I16 => (i16::MIN.into(), i16::MAX.into()),
        Scalar::I32 => (i32::MIN.into(), i32::MAX.into()),
        Scalar::I64 => (i64::MIN.into(), i64::MAX.into()),
        Scalar::I128 => (i128::MIN, i128::MAX),
        Scalar::F32 | Scalar::F64 => unreachable!("floats handled above"),
    };
    if x < min || x > max {
        return Err(range(format!("{x} does not fit {}", s.name())));
    }
    let bytes = x.to_le_bytes();
    let n = out.len();
    out.copy_from_slice(&bytes[..n]);
    Ok(())
}
