//! The `ros2idl` schema language: the OMG IDL subset ROS 2 emits (`rosidl_adapter`'s output),
//! parsed into the same [`Types`] as `ros2msg`. MCAP concatenates the message's file and its
//! dependencies' with a line of `=` and `IDL: pkg/msg/Type` between them; all are read.
//!
//! Supported: `module` (nested), `struct`, `typedef` (of a type with one array dimension, as
//! rosidl writes `typedef double double__9[9];`), `const` (skipped: constants are not on the
//! wire), annotations (`@default (value=...)` on scalar members is kept, the others skipped),
//! `#` preprocessor lines (skipped), the base types (`boolean octet char wchar int8`...`uint64
//! short long` `long long` `unsigned ...` `float double`), `string`/`wstring` with optional
//! bound, `sequence<T>` and `sequence<T, N>`, one-dimensional arrays, scoped names
//! (`pkg::msg::Type`). Not supported (a [`CodecError::Unsupported`]): `enum`, `union`,
//! `long double`, multi-dimensional arrays, sequences of arrays, default values of arrays.

use serde_json::Value;

use crate::error::CodecError;
use crate::ros2msg::{resolve, RawField, RawTy};
use crate::types::{canonical, Arity, Prim, Types, MAX_ARRAY_LEN, MAX_TYPES};

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Num(String),
    Str(String),
    Punct(char),
}

fn unsupported(reason: String) -> CodecError {
    CodecError::Unsupported { message_encoding: "cdr".into(), schema_encoding: "ros2idl".into(), reason }
}

fn lex(text: &str) -> Result<Vec<Tok>, CodecError> {
    let mut toks = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        // Preprocessor lines, and MCAP's separator and `IDL:` header lines.
        let rest_of_line = || text[i..].lines().next().unwrap_or("");
        if line_start && (c == b'#' || c == b'=' || rest_of_line().starts_with("IDL:")) {
            i += rest_of_line().len();
            continue;
        }
        line_start = false;
        if text[i..].starts_with("//") {
            i += rest_of_line().len();
        } else if text[i..].starts_with("/*") {
            i = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            toks.push(Tok::Ident(text[start..i].to_owned()));
        } else if c.is_ascii_digit() || (c == b'-' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) || c == b'.' {
            let start = i;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'+' || b[i] == b'-') {
                // An exponent's sign, or a digit, letter (hex, suffix) or point.
                if (b[i] == b'+' || b[i] == b'-') && !matches!(b[i - 1], b'e' | b'E') {
                    break;
                }
                i += 1;
            }
            toks.push(Tok::Num(text[start..i].to_owned()));
        } else if c == b'"' || c == b'\'' {
            let mut s = String::new();
            let mut chars = text[i + 1..].char_indices();
            let mut end = None;
            while let Some((j, ch)) = chars.next() {
                match ch {
                    '\\' => match chars.next() {
                        Some((_, 'n')) => s.push('\n'),
                        Some((_, 't')) => s.push('\t'),
                        Some((_, other)) => s.push(other),
                        None => break,
                    },
                    ch if ch == c as char => {
                        end = Some(i + 1 + j + 1);
                        break;
                    }
                    ch => s.push(ch),
                }
            }
            i = end.ok_or_else(|| CodecError::bad("an unterminated string literal"))?;
            toks.push(Tok::Str(s));
        } else if text[i..].starts_with("::") {
            toks.push(Tok::Punct(':'));
            i += 2;
        } else if c.is_ascii_punctuation() {
            toks.push(Tok::Punct(c as char));
            i += 1;
        } else {
            return Err(CodecError::bad(format!("unexpected character `{}`", text[i..].chars().next().unwrap_or('?'))));
        }
    }
    Ok(toks)
}

/// A type as written: a primitive or a scoped name, maybe a sequence.
#[derive(Debug, Clone)]
struct IdlTy {
    base: RawTyC,
    arity: Arity,
}

#[derive(Debug, Clone)]
enum RawTyC {
    Prim(Prim),
    Named(String),
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// Module path, outermost first.
    scope: Vec<String>,
    typedefs: Vec<(String, IdlTy)>,
    structs: Vec<(String, Vec<RawField>)>,
    /// Unresolved member types: (struct index, field index, scope at the time, name).
    pending: Vec<(usize, usize, Vec<String>, String)>,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Result<Tok, CodecError> {
        let t = self.toks.get(self.pos).cloned().ok_or_else(|| CodecError::bad("the IDL text ends early"))?;
        self.pos += 1;
        Ok(t)
    }

    fn eat(&mut self, p: char) -> bool {
        if self.peek() == Some(&Tok::Punct(p)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, p: char) -> Result<(), CodecError> {
        match self.next()? {
            Tok::Punct(c) if c == p => Ok(()),
            other => Err(CodecError::bad(format!("expected `{p}`, found {other:?}"))),
        }
    }

    fn ident(&mut self) -> Result<String, CodecError> {
        match self.next()? {
            Tok::Ident(s) => Ok(s),
            other => Err(CodecError::bad(format!("expected a name, found {other:?}"))),
        }
    }

    fn number(&mut self) -> Result<usize, CodecError> {
        match self.next()? {
            Tok::Num(n) => n
                .parse::<usize>()
                .ok()
                .filter(|&n| n <= MAX_ARRAY_LEN)
                .ok_or_else(|| CodecError::bad(format!("`{n}` is not a length up to {MAX_ARRAY_LEN}"))),
            other => Err(CodecError::bad(format!("expected a length, found {other:?}"))),
        }
    }

    /// Skips a balanced `( ... )`, returning its tokens.
    fn parens(&mut self) -> Result<Vec<Tok>, CodecError> {
        self.expect('(')?;
        let mut depth = 1usize;
        let mut inner = Vec::new();
        loop {
            let t = self.next()?;
            match t {
                Tok::Punct('(') => depth += 1,
                Tok::Punct(')') => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(inner);
                    }
                }
                _ => {}
            }
            inner.push(t);
        }
    }

    /// Annotations before a definition or member; the `@default` value if there is one.
    fn annotations(&mut self) -> Result<Option<Tok>, CodecError> {
        let mut default = None;
        while self.eat('@') {
            let name = self.ident()?;
            if self.peek() == Some(&Tok::Punct('(')) {
                let inner = self.parens()?;
                if name == "default" {
                    if let [Tok::Ident(k), Tok::Punct('='), v] = inner.as_slice() {
                        if k == "value" {
                            default = Some(v.clone());
                        }
                    } else if let [Tok::Ident(k), Tok::Punct('='), Tok::Punct('-'), Tok::Num(n)] = inner.as_slice() {
                        if k == "value" {
                            default = Some(Tok::Num(format!("-{n}")));
                        }
                    }
                }
            }
        }
        Ok(default)
    }

    fn scoped_name(&mut self, first: String) -> Result<String, CodecError> {
        let mut parts = vec![first];
        while self.eat(':') {
            parts.push(self.ident()?);
        }
        Ok(parts.join("::"))
    }

    fn ty(&mut self) -> Result<IdlTy, CodecError> {
        self.ty_at(0)
    }

    fn ty_at(&mut self, depth: usize) -> Result<IdlTy, CodecError> {
        if depth > 2 {
            return Err(unsupported("a sequence of arrays or sequences".into()));
        }
        let first = self.ident()?;
        let single = |p| Ok(IdlTy { base: RawTyC::Prim(p), arity: Arity::Single });
        match first.as_str() {
            "boolean" => single(Prim::Bool),
            "octet" => single(Prim::Byte),
            "char" => single(Prim::Char),
            "wchar" => single(Prim::U16),
            "int8" => single(Prim::I8),
            "uint8" => single(Prim::U8),
            "int16" | "short" => single(Prim::I16),
            "uint16" => single(Prim::U16),
            "int32" => single(Prim::I32),
            "uint32" => single(Prim::U32),
            "int64" => single(Prim::I64),
            "uint64" => single(Prim::U64),
            "float" => single(Prim::F32),
            "double" => single(Prim::F64),
            "long" => {
                if self.peek() == Some(&Tok::Ident("long".into())) {
                    self.pos += 1;
                    single(Prim::I64)
                } else if self.peek() == Some(&Tok::Ident("double".into())) {
                    Err(unsupported("`long double` has no CDR form in ROS 2".into()))
                } else {
                    single(Prim::I32)
                }
            }
            "unsigned" => match self.ident()?.as_str() {
                "short" => single(Prim::U16),
                "long" => {
                    if self.peek() == Some(&Tok::Ident("long".into())) {
                        self.pos += 1;
                        single(Prim::U64)
                    } else {
                        single(Prim::U32)
                    }
                }
                other => Err(CodecError::bad(format!("`unsigned {other}` is not a type"))),
            },
            "string" | "wstring" => {
                let bound = if self.eat('<') {
                    let n = self.number()?;
                    self.expect('>')?;
                    Some(n)
                } else {
                    None
                };
                single(if first == "string" { Prim::Str(bound) } else { Prim::WStr(bound) })
            }
            "sequence" => {
                self.expect('<')?;
                let inner = self.ty_at(depth + 1)?;
                let arity = if self.eat(',') { Arity::Bounded(self.number()?) } else { Arity::Unbounded };
                self.expect('>')?;
                if inner.arity != Arity::Single {
                    return Err(unsupported("a sequence of arrays or sequences".into()));
                }
                Ok(IdlTy { base: inner.base, arity })
            }
            _ => {
                let name = self.scoped_name(first)?;
                // A typedef in this scope or an outer one.
                for depth in (0..=self.scope.len()).rev() {
                    let full = qualify(&self.scope[..depth], &name);
                    if let Some((_, t)) = self.typedefs.iter().find(|(n, _)| *n == full) {
                        return Ok(t.clone());
                    }
                }
                Ok(IdlTy { base: RawTyC::Named(name), arity: Arity::Single })
            }
        }
    }

    /// `NAME` or `NAME[N]`, applied to `ty`.
    fn declarator(&mut self, ty: &IdlTy) -> Result<(String, IdlTy), CodecError> {
        let name = self.ident()?;
        let mut ty = ty.clone();
        if self.eat('[') {
            let n = self.number()?;
            self.expect(']')?;
            if ty.arity != Arity::Single || self.peek() == Some(&Tok::Punct('[')) {
                return Err(unsupported(format!("`{name}`: multi-dimensional arrays")));
            }
            ty.arity = Arity::Fixed(n);
        }
        Ok((name, ty))
    }

    fn definitions(&mut self, depth: usize) -> Result<(), CodecError> {
        if depth > crate::MAX_DEPTH {
            return Err(CodecError::bad("modules nested too deep"));
        }
        while let Some(t) = self.peek().cloned() {
            if t == Tok::Punct('}') {
                return Ok(());
            }
            if self.eat(';') {
                continue;
            }
            self.annotations()?;
            let kw = self.ident()?;
            match kw.as_str() {
                "module" => {
                    let name = self.ident()?;
                    self.expect('{')?;
                    self.scope.push(name);
                    self.definitions(depth + 1)?;
                    self.scope.pop();
                    self.expect('}')?;
                }
                "struct" => self.structure()?,
                "typedef" => {
                    let ty = self.ty()?;
                    let (name, ty) = self.declarator(&ty)?;
                    self.typedefs.push((qualify(&self.scope, &name), ty));
                }
                "const" => {
                    // Constants are not on the wire.
                    while !self.eat(';') {
                        self.next()?;
                    }
                    self.pos -= 1;
                }
                other => return Err(unsupported(format!("IDL `{other}` definitions"))),
            }
            self.expect(';')?;
        }
        Ok(())
    }

    fn structure(&mut self) -> Result<(), CodecError> {
        let name = self.ident()?;
        let full = qualify(&self.scope, &name);
        if self.structs.len() >= MAX_TYPES {
            return Err(CodecError::bad(format!("more than {MAX_TYPES} types")));
        }
        let id = self.structs.len();
        self.structs.push((canonical(&full.replace("::", "/"), ""), Vec::new()));
        self.expect('{')?;
        while !self.eat('}') {
            let default = self.annotations()?;
            let ty = self.ty()?;
            loop {
                let (fname, fty) = self.declarator(&ty)?;
                let default = match &default {
                    None => None,
                    Some(_) if fty.arity != Arity::Single => {
                        return Err(unsupported(format!("`{fname}`: default values of arrays")))
                    }
                    Some(tok) => Some(default_value(&fty, tok)?),
                };
                let raw_ty = match &fty.base {
                    RawTyC::Prim(p) => RawTy::Prim(*p),
                    RawTyC::Named(n) => {
                        let fields = &self.structs[id].1;
                        self.pending.push((id, fields.len(), self.scope.clone(), n.clone()));
                        RawTy::Named(String::new())
                    }
                };
                self.structs[id].1.push(RawField { name: fname, ty: raw_ty, arity: fty.arity, default });
                if !self.eat(',') {
                    break;
                }
            }
            self.expect(';')?;
        }
        // rosidl's placeholder member of an empty message is the one-byte empty struct.
        let fields = &mut self.structs[id].1;
        if fields.len() == 1 && fields[0].name == "structure_needs_at_least_one_member" {
            fields.clear();
        }
        Ok(())
    }
}

fn qualify(scope: &[String], name: &str) -> String {
    if scope.is_empty() || name.contains("::") {
        name.to_owned()
    } else {
        format!("{}::{name}", scope.join("::"))
    }
}

fn default_value(ty: &IdlTy, tok: &Tok) -> Result<Value, CodecError> {
    let bad = || CodecError::bad(format!("`{tok:?}` is not a default value for its member"));
    let RawTyC::Prim(p) = ty.base else { return Err(bad()) };
    Ok(match (p, tok) {
        (Prim::Str(_) | Prim::WStr(_), Tok::Str(s)) => Value::String(s.clone()),
        (Prim::Bool, Tok::Ident(b)) | (Prim::Bool, Tok::Str(b)) => match b.as_str() {
            "TRUE" | "true" | "True" => Value::Bool(true),
            "FALSE" | "false" | "False" => Value::Bool(false),
            _ => return Err(bad()),
        },
        (Prim::F32 | Prim::F64, Tok::Num(n) | Tok::Str(n)) => {
            crate::cdr::float_value(n.parse::<f64>().map_err(|_| bad())?)
        }
        (_, Tok::Num(n) | Tok::Str(n)) => match n.parse::<i64>() {
            Ok(i) => Value::from(i),
            Err(_) => Value::from(n.parse::<u64>().map_err(|_| bad())?),
        },
        _ => return Err(bad()),
    })
}

/// Parses the schema data of `schema_name` (`pkg/msg/Type` or `pkg::msg::Type`).
pub(crate) fn parse(schema_name: &str, text: &str) -> Result<Types, CodecError> {
    let mut p = Parser {
        toks: lex(text)?,
        pos: 0,
        scope: Vec::new(),
        typedefs: Vec::new(),
        structs: Vec::new(),
        pending: Vec::new(),
    };
    p.definitions(0)?;
    if p.pos != p.toks.len() {
        return Err(CodecError::bad("unbalanced `}` in the IDL text"));
    }
    // Resolve member type names against the structs defined (innermost scope first).
    let defined: Vec<String> = p.structs.iter().map(|(n, _)| n.clone()).collect();
    for (sid, fid, scope, name) in std::mem::take(&mut p.pending) {
        let mut key = None;
        for depth in (0..=scope.len()).rev() {
            let full = canonical(&qualify(&scope[..depth], &name).replace("::", "/"), "");
            if defined.contains(&full) {
                key = Some(full);
                break;
            }
        }
        // Not defined here: a dependency left out, such as builtin_interfaces::msg::Time.
        let key = key.unwrap_or_else(|| canonical(&name.replace("::", "/"), ""));
        p.structs[sid].1[fid].ty = RawTy::Named(key);
    }
    let root = schema_name.trim().replace("::", "/");
    let root = canonical(&root, "");
    let Some(root_at) = p.structs.iter().position(|(n, _)| *n == root) else {
        return Err(CodecError::bad(format!("the IDL text defines no struct `{root}`")));
    };
    let mut structs = p.structs;
    let main = structs.remove(root_at);
    structs.insert(0, main);
    resolve(structs)
}
