//! The `ros2msg` schema language: a `.msg` text, with its dependencies concatenated MCAP-style
//! (a line of `=`, then `MSG: pkg/Type`, then that type's text), parsed into [`Types`].
//!
//! Supported: the builtin types, fixed (`T[N]`), bounded (`T[<=N]`) and unbounded (`T[]`)
//! arrays, bounded strings (`string<=N`), default values (`int32 x 5`, `float64[] v [1, 2]`,
//! `string s "hi"`), constants (skipped: they are not on the wire), nested types by
//! `pkg/Type`, `pkg/msg/Type` or `Type` (same package; `Header` is `std_msgs/Header`), and
//! `builtin_interfaces/Time`, `Duration` and `std_msgs/Header` when the text does not give them.

use std::collections::HashMap;

use serde_json::Value;

use crate::error::CodecError;
use crate::types::{canonical, package, Arity, Field, Prim, StructDef, Ty, Types, IMPLICIT, MAX_ARRAY_LEN, MAX_TYPES};

/// A field as written, before its type name is resolved.
pub(crate) struct RawField {
    pub(crate) name: String,
    /// A primitive, or a struct name to resolve (`pkg/msg/Type` or a bare name).
    pub(crate) ty: RawTy,
    pub(crate) arity: Arity,
    pub(crate) default: Option<Value>,
}

pub(crate) enum RawTy {
    Prim(Prim),
    Named(String),
}

/// Parses the schema data of `schema_name`.
pub(crate) fn parse(schema_name: &str, text: &str) -> Result<Types, CodecError> {
    let mut sections: Vec<(String, Vec<RawField>)> = Vec::new();
    let mut current_name = canonical(schema_name.trim(), "");
    let mut current_lines: Vec<(usize, &str)> = Vec::new();
    let mut expect_header = false;
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let trimmed = line.trim();
        if trimmed.len() >= 3 && trimmed.bytes().all(|b| b == b'=') {
            let fields = parse_fields(&current_name, &current_lines)?;
            sections.push((current_name.clone(), fields));
            current_lines.clear();
            expect_header = true;
            continue;
        }
        if expect_header {
            if trimmed.is_empty() {
                continue;
            }
            let Some(name) = trimmed.strip_prefix("MSG:") else {
                return Err(CodecError::bad(format!("line {lineno}: expected `MSG: pkg/Type` after a separator line")));
            };
            current_name = canonical(name.trim(), "");
            expect_header = false;
            continue;
        }
        current_lines.push((lineno, line));
    }
    if expect_header {
        return Err(CodecError::bad("a separator line at the end, with no MSG: after it"));
    }
    let fields = parse_fields(&current_name, &current_lines)?;
    sections.push((current_name, fields));
    resolve(sections)
}

/// Resolves the struct names of `sections` (the first is the message) into [`Types`], adding
/// the implicit definitions that are used but not given.
pub(crate) fn resolve(sections: Vec<(String, Vec<RawField>)>) -> Result<Types, CodecError> {
    if sections.len() > MAX_TYPES {
        return Err(CodecError::bad(format!("more than {MAX_TYPES} types")));
    }
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut raw: Vec<(String, Vec<RawField>)> = Vec::new();
    for (name, fields) in sections {
        if index.contains_key(&name) {
            // The same dependency given twice: the first one counts.
            continue;
        }
        index.insert(name.clone(), raw.len());
        raw.push((name, fields));
    }
    let mut structs: Vec<StructDef> = Vec::new();
    let mut next = 0;
    while next < raw.len() {
        let (name, fields) = std::mem::take(&mut raw[next]);
        let pkg = package(&name).to_owned();
        let mut out = Vec::with_capacity(fields.len());
        for f in fields {
            let ty = match f.ty {
                RawTy::Prim(p) => Ty::Prim(p),
                RawTy::Named(ref n) => {
                    let mut key = canonical(n, &pkg);
                    if !index.contains_key(&key) && n == "Header" {
                        key = "std_msgs/msg/Header".to_owned();
                    }
                    let id = match index.get(&key) {
                        Some(&id) => id,
                        None => {
                            let Some((_, text)) = IMPLICIT.iter().find(|(k, _)| *k == key) else {
                                return Err(CodecError::bad(format!(
                                    "{name}: field `{}` has type `{n}`, which the schema does \
                                     not define",
                                    f.name
                                )));
                            };
                            let lines: Vec<(usize, &str)> = text.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
                            let fields = parse_fields(&key, &lines)?;
                            index.insert(key.clone(), raw.len());
                            raw.push((key.clone(), fields));
                            raw.len() - 1
                        }
                    };
                    Ty::Struct(id)
                }
            };
            out.push(Field { name: f.name, ty, arity: f.arity, default: f.default });
        }
        structs.push(StructDef { name, fields: out });
        next += 1;
    }
    Ok(Types { structs, root: 0 })
}

/// Parses the field lines of one type.
fn parse_fields(ty_name: &str, lines: &[(usize, &str)]) -> Result<Vec<RawField>, CodecError> {
    let mut fields: Vec<RawField> = Vec::new();
    for &(lineno, line) in lines {
        let line = strip_comment(line).trim();
        if line.is_empty() {
            continue;
        }
        let err = |what: String| CodecError::bad(format!("{ty_name}, line {lineno}: {what}"));
        let (ty_text, rest) = split_token(line);
        let rest = rest.trim_start();
        let name_end = rest.find(|c: char| c.is_whitespace() || c == '=').unwrap_or(rest.len());
        let (name, after) = rest.split_at(name_end);
        if name.is_empty() {
            return Err(err(format!("`{line}` has a type but no field name")));
        }
        if !is_identifier(name) {
            return Err(err(format!("`{name}` is not a valid field name")));
        }
        let after = after.trim();
        if after.starts_with('=') {
            // A constant: not part of the message on the wire.
            continue;
        }
        let (ty, arity) = parse_type(ty_text).map_err(&err)?;
        let default = if after.is_empty() { None } else { Some(parse_default(&ty, arity, after).map_err(&err)?) };
        if fields.iter().any(|f| f.name == name) {
            return Err(err(format!("field `{name}` is declared twice")));
        }
        fields.push(RawField { name: name.to_owned(), ty, arity, default });
    }
    Ok(fields)
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn split_token(s: &str) -> (&str, &str) {
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    s.split_at(end)
}

/// The line without its `#` comment (a `#` inside quotes is text).
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') => return &line[..i],
            _ => {}
        }
    }
    line
}

fn parse_len(s: &str) -> Result<usize, String> {
    let n: usize = s.trim().parse().map_err(|_| format!("`{s}` is not an array length or bound"))?;
    if n > MAX_ARRAY_LEN {
        return Err(format!("length {n} is over the limit of {MAX_ARRAY_LEN}"));
    }
    Ok(n)
}

/// `T`, `T[N]`, `T[<=N]`, `T[]`, `string<=N`, `string<=N[3]`.
fn parse_type(text: &str) -> Result<(RawTy, Arity), String> {
    let (base, arity) = match text.find('[') {
        Some(open) => {
            let Some(inner) = text[open + 1..].strip_suffix(']') else {
                return Err(format!("`{text}`: unclosed `[`"));
            };
            let arity = if inner.is_empty() {
                Arity::Unbounded
            } else if let Some(b) = inner.strip_prefix("<=") {
                Arity::Bounded(parse_len(b)?)
            } else {
                Arity::Fixed(parse_len(inner)?)
            };
            (&text[..open], arity)
        }
        None => (text, Arity::Single),
    };
    let ty = if let Some((s, bound)) = base.split_once("<=") {
        let bound = Some(parse_len(bound)?);
        match s {
            "string" => RawTy::Prim(Prim::Str(bound)),
            "wstring" => RawTy::Prim(Prim::WStr(bound)),
            _ => return Err(format!("`{base}`: only strings take a `<=` bound")),
        }
    } else if let Some(p) = Prim::from_msg_name(base) {
        RawTy::Prim(p)
    } else {
        if base.is_empty() || !base.split('/').all(is_identifier) || base.split('/').count() > 3 {
            return Err(format!("`{base}` is not a type name"));
        }
        RawTy::Named(base.to_owned())
    };
    Ok((ty, arity))
}

/// A default value as JSON (checked against the type when the codec is made).
fn parse_default(ty: &RawTy, arity: Arity, text: &str) -> Result<Value, String> {
    let RawTy::Prim(p) = ty else {
        return Err("a field of a message type cannot have a default value".to_owned());
    };
    let bad = || format!("`{text}` is not a valid default value for a {} field", p.name());
    if arity == Arity::Single {
        return scalar_default(*p, text).ok_or_else(bad);
    }
    let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).ok_or_else(bad)?;
    let mut items = Vec::new();
    for item in split_list(inner) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        items.push(scalar_default(*p, item).ok_or_else(bad)?);
    }
    Ok(Value::Array(items))
}

fn scalar_default(p: Prim, text: &str) -> Option<Value> {
    match p {
        Prim::Bool => match text {
            "true" | "True" | "1" => Some(Value::Bool(true)),
            "false" | "False" | "0" => Some(Value::Bool(false)),
            _ => None,
        },
        Prim::Str(_) | Prim::WStr(_) => Some(Value::String(unquote(text))),
        Prim::F32 | Prim::F64 => {
            let x: f64 = text.parse().ok()?;
            Some(crate::cdr::float_value(x))
        }
        _ => {
            if let Ok(i) = text.parse::<i64>() {
                Some(Value::from(i))
            } else {
                text.parse::<u64>().ok().map(Value::from)
            }
        }
    }
}

/// Splits a list's inside on commas outside quotes.
fn split_list(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, ',') => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A string default: quoted (with `\` escapes) or the bare text.
fn unquote(text: &str) -> String {
    let t = text.trim();
    let q = match t.chars().next() {
        Some(q @ ('"' | '\'')) if t.len() >= 2 && t.ends_with(q) => q,
        _ => return t.to_owned(),
    };
    let inner = &t[1..t.len() - 1];
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(c) => out.push(c),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    let _ = q;
    out
}
