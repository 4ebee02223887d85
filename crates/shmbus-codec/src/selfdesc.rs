//! The self-describing encodings: `json` (serde_json), `cbor` (ciborium) and `msgpack`
//! (rmp-serde). No schema is needed; decode maps the value to JSON (byte strings as arrays
//! of numbers, or `"<N bytes>"` past 64 bytes unless `full`; non-string map keys as their
//! text), encode writes the JSON value in the encoding.

use ciborium::Value as Cbor;
use serde_json::{Map, Value};

use crate::cdr::float_value;
use crate::error::{DecodeError, EncodeError};
use crate::{DecodeOptions, MAX_DEPTH, MAX_OUTPUT_NODES, SUMMARY_THRESHOLD};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Cbor,
    Msgpack,
}

fn invalid(reason: String) -> DecodeError {
    DecodeError::Invalid { path: String::new(), reason }
}

pub(crate) fn decode(format: Format, msg: &[u8], opts: &DecodeOptions) -> Result<Value, DecodeError> {
    let value: Cbor = match format {
        Format::Json => {
            let v: Value = serde_json::from_slice(msg).map_err(|e| invalid(format!("not JSON: {e}")))?;
            let mut nodes = 0;
            count_json(&v, 0, &mut nodes)?;
            return Ok(v);
        }
        Format::Cbor => {
            let mut rest = msg;
            let v: Cbor = ciborium::de::from_reader_with_recursion_limit(&mut rest, MAX_DEPTH + 1)
                .map_err(|e| invalid(format!("not CBOR: {e}")))?;
            if !rest.is_empty() {
                return Err(DecodeError::TrailingBytes { count: rest.len() });
            }
            v
        }
        Format::Msgpack => {
            let mut rest = msg;
            let mut de = rmp_serde::Deserializer::new(&mut rest);
            de.set_max_depth(MAX_DEPTH + 1);
            let v: Cbor =
                serde::Deserialize::deserialize(&mut de).map_err(|e| invalid(format!("not MessagePack: {e}")))?;
            drop(de);
            if !rest.is_empty() {
                return Err(DecodeError::TrailingBytes { count: rest.len() });
            }
            v
        }
    };
    let mut nodes = 0;
    to_json(value, opts, 0, &mut nodes)
}

fn bump(nodes: &mut usize) -> Result<(), DecodeError> {
    *nodes += 1;
    if *nodes > MAX_OUTPUT_NODES {
        return Err(DecodeError::TooLarge);
    }
    Ok(())
}

fn count_json(v: &Value, depth: usize, nodes: &mut usize) -> Result<(), DecodeError> {
    bump(nodes)?;
    if depth > MAX_DEPTH {
        return Err(DecodeError::TooDeep { path: String::new() });
    }
    match v {
        Value::Array(items) => items.iter().try_for_each(|i| count_json(i, depth + 1, nodes)),
        Value::Object(m) => m.values().try_for_each(|i| count_json(i, depth + 1, nodes)),
        _ => Ok(()),
    }
}

fn to_json(v: Cbor, opts: &DecodeOptions, depth: usize, nodes: &mut usize) -> Result<Value, DecodeError> {
    bump(nodes)?;
    if depth > MAX_DEPTH {
        return Err(DecodeError::TooDeep { path: String::new() });
    }
    Ok(match v {
        Cbor::Integer(i) => {
            let i = i128::from(i);
            if let Ok(x) = i64::try_from(i) {
                Value::from(x)
            } else if let Ok(x) = u64::try_from(i) {
                Value::from(x)
            } else {
                Value::String(i.to_string())
            }
        }
        Cbor::Bytes(b) => {
            if b.len() > SUMMARY_THRESHOLD && !opts.full {
                Value::String(format!("<{} bytes>", b.len()))
            } else {
                *nodes += b.len();
                if *nodes > MAX_OUTPUT_NODES {
                    return Err(DecodeError::TooLarge);
                }
                Value::Array(b.into_iter().map(Value::from).collect())
            }
        }
        Cbor::Float(x) => float_value(x),
        Cbor::Text(s) => Value::String(s),
        Cbor::Bool(b) => Value::Bool(b),
        Cbor::Null => Value::Null,
        Cbor::Tag(_, inner) => to_json(*inner, opts, depth + 1, nodes)?,
        Cbor::Array(items) => {
            Value::Array(items.into_iter().map(|i| to_json(i, opts, depth + 1, nodes)).collect::<Result<_, _>>()?)
        }
        Cbor::Map(entries) => {
            let mut map = Map::new();
            for (k, v) in entries {
                let key = match to_json(k, opts, depth + 1, nodes)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                map.insert(key, to_json(v, opts, depth + 1, nodes)?);
            }
            Value::Object(map)
        }
        _ => Value::Null,
    })
}

pub(crate) fn encode(format: Format, value: &Value) -> Result<Vec<u8>, EncodeError> {
    let fail = |reason: String| EncodeError::Invalid { path: String::new(), reason };
    match format {
        Format::Json => serde_json::to_vec(value).map_err(|e| fail(e.to_string())),
        Format::Cbor => {
            let mut out = Vec::new();
            ciborium::ser::into_writer(value, &mut out).map_err(|e| fail(e.to_string()))?;
            Ok(out)
        }
        Format::Msgpack => rmp_serde::to_vec_named(value).map_err(|e| fail(e.to_string())),
    }
}
