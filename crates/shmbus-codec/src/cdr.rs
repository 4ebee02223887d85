//! CDR (OMG XCDR1, "plain CDR", as ROS 2 and rosbags write it) over the [`Types`] of a
//! `ros2msg` or `ros2idl` schema, dynamically (no generated code).
//!
//! Wire form: a 4-byte encapsulation header (`00 01 00 00` little-endian, `00 00 00 00`
//! big-endian, accepted on decode; encode writes little-endian), then the fields in order.
//! Each primitive is aligned to its size (8 for 64-bit types) counted from the end of the
//! header; strings are a `uint32` length that counts a terminating NUL, the bytes, the NUL;
//! sequences a `uint32` element count then the elements; fixed arrays just the elements;
//! an empty struct one `uint8`, as rosidl generates.
//!
//! Hand-written: the maintained Rust CDR crates (`cdr`, `cdr-encoding`) are serde-based and
//! need a Rust type per message; the one dynamic ros2msg decoder on crates.io
//! (`ros2_message`) decodes only, little-endian only, and describes itself as not yet
//! tested. Reading and writing aligned primitives is a few lines here, with every length
//! checked against the bytes that remain.
//!
//! Untrusted input: every read is bounds-checked, a sequence length is checked against the
//! bytes remaining before any element is read, nesting is capped at [`MAX_DEPTH`] and the
//! decoded form at [`MAX_OUTPUT_NODES`] values.

use serde_json::{Map, Number, Value};

use crate::error::{DecodeError, EncodeError};
use crate::types::{Arity, Field, Prim, Ty, Types};
use crate::{DecodeOptions, MAX_DEPTH, MAX_OUTPUT_NODES, SUMMARY_THRESHOLD};

/// Largest message encode produces (bytes).
pub(crate) const MAX_ENCODED: usize = 256 << 20;
/// Most values one encode writes, zero-size ones included (a schema can nest fixed arrays
/// of empty-on-the-wire elements, so bytes alone do not bound the work).
pub(crate) const MAX_ENCODE_STEPS: usize = 1 << 26;

/// A float as JSON: a number, or `"NaN"`, `"inf"`, `"-inf"`.
pub(crate) fn float_value(x: f64) -> Value {
    match Number::from_f64(x) {
        Some(n) => Value::Number(n),
        None if x.is_nan() => Value::String("NaN".to_owned()),
        None if x > 0.0 => Value::String("inf".to_owned()),
        None => Value::String("-inf".to_owned()),
    }
}

/// A float32 as JSON, with its shortest decimal form (0.1, not 0.10000000149011612).
pub(crate) fn float32_value(x: f32) -> Value {
    if x.is_finite() {
        // The shortest text that reads back as this f32, read as an f64.
        let shortest: f64 = x.to_string().parse().unwrap_or(f64::from(x));
        float_value(shortest)
    } else {
        float_value(f64::from(x))
    }
}

/// A path kept as a stack while walking, rendered only for an error.
#[derive(Default)]
pub(crate) struct Path<'t> {
    segs: Vec<Seg<'t>>,
}

enum Seg<'t> {
    Field(&'t str),
    Index(usize),
}

impl<'t> Path<'t> {
    pub(crate) fn field(&mut self, name: &'t str) {
        self.segs.push(Seg::Field(name));
    }
    pub(crate) fn index(&mut self, i: usize) {
        self.segs.push(Seg::Index(i));
    }
    pub(crate) fn pop(&mut self) {
        self.segs.pop();
    }
    pub(crate) fn render(&self) -> String {
        let mut s = String::new();
        for seg in &self.segs {
            match seg {
                Seg::Field(name) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(name);
                }
                Seg::Index(i) => {
                    s.push('[');
                    s.push_str(&i.to_string());
                    s.push(']');
                }
            }
        }
        s
    }
}

// ---------------------------------------------------------------------------------------------
// Decode

struct Decoder<'b, 't> {
    types: &'t Types,
    buf: &'b [u8],
    pos: usize,
    big_endian: bool,
    full: bool,
    nodes: usize,
    depth: usize,
    path: Path<'t>,
}

pub(crate) fn decode(types: &Types, msg: &[u8], opts: &DecodeOptions) -> Result<Value, DecodeError> {
    let header = msg.get(..4).ok_or(DecodeError::Truncated { path: String::new() })?;
    let big_endian = match (header[0], header[1]) {
        (0, 1) => false,
        (0, 0) => true,
        (a, b) => {
            return Err(DecodeError::Invalid {
                path: String::new(),
                reason: format!(
                    "encapsulation {a:02x} {b:02x} is not plain CDR (00 00 or 00 01); \
                     parameter lists and XCDR2 are not supported"
                ),
            })
        }
    };
    let mut d = Decoder {
        types,
        buf: &msg[4..],
        pos: 0,
        big_endian,
        full: opts.full,
        nodes: 0,
        depth: 0,
        path: Path::default(),
    };
    let v = d.structure(types.root)?;
    let left = d.buf.len() - d.pos;
    // Writers may pad the message to a multiple of 4.
    if left > 3 {
        return Err(DecodeError::TrailingBytes { count: left });
    }
    Ok(v)
}

impl<'b, 't> Decoder<'b, 't> {
    fn truncated(&self) -> DecodeError {
        DecodeError::Truncated { path: self.path.render() }
    }

    fn invalid(&self, reason: String) -> DecodeError {
        DecodeError::Invalid { path: self.path.render(), reason }
    }

    fn node(&mut self) -> Result<(), DecodeError> {
        self.nodes += 1;
        if self.nodes > MAX_OUTPUT_NODES {
            return Err(DecodeError::TooLarge);
        }
        Ok(())
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn align(&mut self, n: usize) -> Result<(), DecodeError> {
        let pad = (n - self.pos % n) % n;
        if pad > self.remaining() {
            return Err(self.truncated());
        }
        self.pos += pad;
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&'b [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.truncated());
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        self.align(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        if self.big_endian {
            a.reverse();
        }
        // Little-endian from here on.
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.fixed::<4>()?))
    }

    fn structure(&mut self, id: usize) -> Result<Value, DecodeError> {
        if self.depth >= MAX_DEPTH {
            return Err(DecodeError::TooDeep { path: self.path.render() });
        }
        self.depth += 1;
        let v = self.structure_fields(id);
        self.depth -= 1;
        v
    }

    fn structure_fields(&mut self, id: usize) -> Result<Value, DecodeError> {
        self.node()?;
        let types: &'t Types = self.types;
        let def = &types.structs[id];
        let mut map = Map::new();
        if def.fields.is_empty() {
            self.take(1)?;
            return Ok(Value::Object(map));
        }
        for f in &def.fields {
            self.path.field(&f.name);
            let v = self.field(f)?;
            self.path.pop();
            map.insert(f.name.clone(), v);
        }
        Ok(Value::Object(map))
    }

    fn field(&mut self, f: &'t Field) -> Result<Value, DecodeError> {
        let n = match f.arity {
            Arity::Single => return self.one(f.ty),
            Arity::Fixed(n) => n,
            Arity::Bounded(_) | Arity::Unbounded => {
                let n = self.u32()? as usize;
                if let Arity::Bounded(b) = f.arity {
                    if n > b {
                        return Err(self.invalid(format!("{n} elements, over the bound of {b}")));
                    }
                }
                n
            }
        };
        self.array(f.ty, n)
    }

    fn array(&mut self, ty: Ty, n: usize) -> Result<Value, DecodeError> {
        if let Ty::Prim(p) = ty {
            if let Some(size) = p.size() {
                if n > 0 {
                    self.align(size)?;
                }
                if n.checked_mul(size).is_none_or(|total| total > self.remaining()) {
                    return Err(self.truncated());
                }
                if p.is_bytelike() && n > SUMMARY_THRESHOLD && !self.full {
                    self.node()?;
                    self.take(n)?;
                    return Ok(Value::String(format!("<{n} bytes>")));
                }
            } else if n.checked_mul(4).is_none_or(|total| total > self.remaining()) {
                // Every string takes at least its 4-byte length.
                return Err(self.truncated());
            }
        }
        self.node()?;
        let mut items = Vec::new();
        for i in 0..n {
            self.path.index(i);
            items.push(self.one(ty)?);
            self.path.pop();
        }
        Ok(Value::Array(items))
    }

    fn one(&mut self, ty: Ty) -> Result<Value, DecodeError> {
        let p = match ty {
            Ty::Struct(id) => return self.structure(id),
            Ty::Prim(p) => p,
        };
        self.node()?;
        Ok(match p {
            Prim::Bool => match self.take(1)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(self.invalid(format!("bool byte is {b}, not 0 or 1"))),
            },
            Prim::Byte | Prim::Char | Prim::U8 => Value::from(self.take(1)?[0]),
            Prim::I8 => Value::from(self.take(1)?[0] as i8),
            Prim::I16 => Value::from(i16::from_le_bytes(self.fixed()?)),
            Prim::U16 => Value::from(u16::from_le_bytes(self.fixed()?)),
            Prim::I32 => Value::from(i32::from_le_bytes(self.fixed()?)),
            Prim::U32 => Value::from(u32::from_le_bytes(self.fixed()?)),
            Prim::I64 => Value::from(i64::from_le_bytes(self.fixed()?)),
            Prim::U64 => Value::from(u64::from_le_bytes(self.fixed()?)),
            Prim::F32 => float32_value(f32::from_le_bytes(self.fixed()?)),
            Prim::F64 => float_value(f64::from_le_bytes(self.fixed()?)),
            Prim::Str(bound) => {
                let len = self.u32()? as usize;
                let bytes = self.take(len)?;
                let text = match bytes.split_last() {
                    None => &[][..],
                    Some((0, text)) => text,
                    Some(_) => return Err(self.invalid("string has no terminating NUL".into())),
                };
                let s = std::str::from_utf8(text).map_err(|e| self.invalid(format!("string is not UTF-8: {e}")))?;
                if let Some(b) = bound {
                    if s.len() > b {
                        return Err(self.invalid(format!("string of {} bytes, over the bound of {b}", s.len())));
                    }
                }
                Value::String(s.to_owned())
            }
            Prim::WStr(bound) => {
                let units = self.u32()? as usize;
                let total = units.checked_mul(2).ok_or_else(|| self.truncated())?;
                let bytes = self.take(total)?;
                let big = self.big_endian;
                let code: Vec<u16> = bytes
                    .chunks_exact(2)
                    .map(|c| if big { u16::from_be_bytes([c[0], c[1]]) } else { u16::from_le_bytes([c[0], c[1]]) })
                    .collect();
                let s = String::from_utf16(&code).map_err(|_| self.invalid("wstring is not valid UTF-16".into()))?;
                if let Some(b) = bound {
                    if units > b {
                        return Err(self.invalid(format!("wstring of {units} characters, over the bound of {b}")));
                    }
                }
                Value::String(s)
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Encode

struct Encoder<'t> {
    types: &'t Types,
    out: Vec<u8>,
    depth: usize,
    steps: usize,
    path: Path<'t>,
}

pub(crate) fn encode(types: &Types, value: &Value) -> Result<Vec<u8>, EncodeError> {
    let mut e = Encoder { types, out: vec![0, 1, 0, 0], depth: 0, steps: 0, path: Path::default() };
    e.structure(types.root, Some(value))?;
    Ok(e.out)
}

/// Checks a declared default against its field's type (when the codec is made).
pub(crate) fn check_default(types: &Types, f: &Field, v: &Value) -> Result<(), EncodeError> {
    let mut e = Encoder { types, out: vec![0, 1, 0, 0], depth: 0, steps: 0, path: Path::default() };
    e.path.field(&f.name);
    e.field(f, Some(v))
}

impl<'t> Encoder<'t> {
    fn pos(&self) -> usize {
        self.out.len() - 4
    }

    fn wrong(&self, expected: &str, found: &Value) -> EncodeError {
        EncodeError::wrong_type(&self.path.render(), expected, found)
    }

    fn range(&self, reason: String) -> EncodeError {
        EncodeError::OutOfRange { path: self.path.render(), reason }
    }

    fn align(&mut self, n: usize) {
        let pad = (n - self.pos() % n) % n;
        self.out.extend(std::iter::repeat_n(0u8, pad));
    }

    fn put<const N: usize>(&mut self, le: [u8; N]) {
        self.align(N);
        self.out.extend_from_slice(&le);
    }

    fn grow_check(&self) -> Result<(), EncodeError> {
        if self.out.len() > MAX_ENCODED {
            return Err(self.range(format!("message over {MAX_ENCODED} bytes")));
        }
        Ok(())
    }

    /// `value` `None`: the field is missing, so its zero value.
    fn structure(&mut self, id: usize, value: Option<&Value>) -> Result<(), EncodeError> {
        if self.depth >= MAX_DEPTH {
            return Err(EncodeError::TooDeep { path: self.path.render() });
        }
        self.depth += 1;
        let r = self.structure_fields(id, value);
        self.depth -= 1;
        r
    }

    fn structure_fields(&mut self, id: usize, value: Option<&Value>) -> Result<(), EncodeError> {
        let types: &'t Types = self.types;
        let def = &types.structs[id];
        let obj = match value {
            None => None,
            Some(Value::Object(m)) => Some(m),
            Some(other) => return Err(self.wrong("an object", other)),
        };
        if let Some(obj) = obj {
            if let Some(unknown) = obj.keys().find(|k| !def.fields.iter().any(|f| &f.name == *k)) {
                let mut path = self.path.render();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(unknown);
                return Err(EncodeError::UnknownField { path });
            }
        }
        if def.fields.is_empty() {
            self.out.push(0);
            return Ok(());
        }
        for f in &def.fields {
            self.path.field(&f.name);
            let v = obj.and_then(|o| o.get(&f.name)).or(f.default.as_ref());
            self.field(f, v)?;
            self.path.pop();
        }
        Ok(())
    }

    fn field(&mut self, f: &'t Field, v: Option<&Value>) -> Result<(), EncodeError> {
        if f.arity == Arity::Single {
            return self.one(f.ty, v);
        }
        let items: &[Value] = match v {
            None => &[],
            Some(Value::Array(items)) => items,
            Some(other) => return Err(self.wrong("an array", other)),
        };
        match f.arity {
            Arity::Single => unreachable!("handled above"),
            Arity::Fixed(n) => {
                if v.is_some() && items.len() != n {
                    return Err(EncodeError::WrongLength { path: self.path.render(), expected: n, found: items.len() });
                }
                if items.is_empty() {
                    // Missing: n zero values.
                    for i in 0..n {
                        self.path.index(i);
                        self.one(f.ty, None)?;
                        self.path.pop();
                    }
                    return Ok(());
                }
            }
            Arity::Bounded(b) if items.len() > b => {
                return Err(self.range(format!("{} elements, over the bound of {b}", items.len())));
            }
            Arity::Bounded(_) | Arity::Unbounded => {
                let n = u32::try_from(items.len()).map_err(|_| self.range("too many elements".to_owned()))?;
                self.put(n.to_le_bytes());
            }
        }
        for (i, item) in items.iter().enumerate() {
            self.path.index(i);
            self.one(f.ty, Some(item))?;
            self.path.pop();
        }
        Ok(())
    }

    fn int(&self, v: Option<&Value>, min: i128, max: i128, ty: &str) -> Result<i128, EncodeError> {
        let Some(v) = v else { return Ok(0) };
        let Value::Number(n) = v else {
            return Err(self.wrong("an integer", v));
        };
        let x: i128 = if let Some(i) = n.as_i64() {
            i.into()
        } else if let Some(u) = n.as_u64() {
            u.into()
        } else {
            return Err(self.wrong("an integer", v));
        };
        if x < min || x > max {
            return Err(self.range(format!("{x} does not fit {ty}")));
        }
        Ok(x)
    }

    fn float(&self, v: Option<&Value>) -> Result<f64, EncodeError> {
        match v {
            None => Ok(0.0),
            Some(Value::Number(n)) => n.as_f64().ok_or_else(|| self.wrong("a number", &Value::Number(n.clone()))),
            Some(Value::String(s)) => match s.as_str() {
                "NaN" | "nan" => Ok(f64::NAN),
                "inf" | "Infinity" => Ok(f64::INFINITY),
                "-inf" | "-Infinity" => Ok(f64::NEG_INFINITY),
                _ => Err(self.wrong("a number", v.unwrap_or(&Value::Null))),
            },
            Some(other) => Err(self.wrong("a number", other)),
        }
    }

    fn one(&mut self, ty: Ty, v: Option<&Value>) -> Result<(), EncodeError> {
        self.steps += 1;
        if self.steps > MAX_ENCODE_STEPS {
            return Err(self.range(format!("message of more than {MAX_ENCODE_STEPS} values")));
        }
        let p = match ty {
            Ty::Struct(id) => return self.structure(id, v),
            Ty::Prim(p) => p,
        };
        let name = p.name();
        match p {
            Prim::Bool => {
                let b = match v {
                    None => false,
                    Some(Value::Bool(b)) => *b,
                    Some(other) => return Err(self.wrong("true or false", other)),
                };
                self.out.push(u8::from(b));
            }
            Prim::Byte | Prim::Char | Prim::U8 => {
                let x = self.int(v, 0, 255, name)?;
                self.out.push(x as u8);
            }
            Prim::I8 => {
                let x = self.int(v, i8::MIN.into(), i8::MAX.into(), name)?;
                self.out.push(x as i8 as u8);
            }
            Prim::I16 => {
                let x = self.int(v, i16::MIN.into(), i16::MAX.into(), name)?;
                self.put((x as i16).to_le_bytes());
            }
            Prim::U16 => {
                let x = self.int(v, 0, u16::MAX.into(), name)?;
                self.put((x as u16).to_le_bytes());
            }
            Prim::I32 => {
                let x = self.int(v, i32::MIN.into(), i32::MAX.into(), name)?;
                self.put((x as i32).to_le_bytes());
            }
            Prim::U32 => {
                let x = self.int(v, 0, u32::MAX.into(), name)?;
                self.put((x as u32).to_le_bytes());
            }
            Prim::I64 => {
                let x = self.int(v, i64::MIN.into(), i64::MAX.into(), name)?;
                self.put((x as i64).to_le_bytes());
            }
            Prim::U64 => {
                let x = self.int(v, 0, u64::MAX.into(), name)?;
                self.put((x as u64).to_le_bytes());
            }
            Prim::F32 => {
                let x = self.float(v)?;
                if x.is_finite() && x.abs() > f64::from(f32::MAX) {
                    return Err(self.range(format!("{x} does not fit float32")));
                }
                self.put((x as f32).to_le_bytes());
            }
            Prim::F64 => {
                let x = self.float(v)?;
                self.put(x.to_le_bytes());
            }
            Prim::Str(bound) => {
                let s = match v {
                    None => "",
                    Some(Value::String(s)) => s.as_str(),
                    Some(other) => return Err(self.wrong("a string", other)),
                };
                if let Some(b) = bound {
                    if s.len() > b {
                        return Err(self.range(format!("string of {} bytes, over the bound of {b}", s.len())));
                    }
                }
                if s.as_bytes().contains(&0) {
                    return Err(self.range("string contains a NUL byte".to_owned()));
                }
                let len = u32::try_from(s.len() + 1).map_err(|_| self.range("string too long".to_owned()))?;
                self.put(len.to_le_bytes());
                self.out.extend_from_slice(s.as_bytes());
                self.out.push(0);
            }
            Prim::WStr(bound) => {
                let s = match v {
                    None => "",
                    Some(Value::String(s)) => s.as_str(),
                    Some(other) => return Err(self.wrong("a string", other)),
                };
                let units: Vec<u16> = s.encode_utf16().collect();
                if let Some(b) = bound {
                    if units.len() > b {
                        return Err(self.range(format!("wstring of {} characters, over the bound of {b}", units.len())));
                    }
                }
                let len = u32::try_from(units.len()).map_err(|_| self.range("wstring too long".to_owned()))?;
                self.put(len.to_le_bytes());
                for u in units {
                    self.out.extend_from_slice(&u.to_le_bytes());
                }
            }
        }
        self.grow_check()
    }
}
