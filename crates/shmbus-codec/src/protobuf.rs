//! `protobuf` messages with a `protobuf` schema (a binary `FileDescriptorSet`; the schema
//! name is the message's full name), dynamically through `prost-reflect`, whose serde
//! support gives the canonical protobuf JSON mapping (`lowerCamelCase` names, 64-bit
//! integers as strings, `bytes` as base64, enums by name).
//!
//! Decode also summarises `bytes` fields longer than 64 as `"<N bytes>"` unless `full`.
//! Encode rejects unknown fields and reports the JSON path of an error.

use prost::Message;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, Kind, MessageDescriptor, ReflectMessage, SerializeOptions,
    Value as PbValue,
};
use serde_json::Value;

use crate::error::{CodecError, DecodeError, EncodeError};
use crate::{DecodeOptions, SUMMARY_THRESHOLD};

pub(crate) fn parse(schema_name: &str, data: &[u8]) -> Result<MessageDescriptor, CodecError> {
    // prost-reflect 0.16 can panic while describing some malformed descriptor sets (an
    // index out of bounds when it labels the error); the schema is untrusted, so such a
    // panic is caught here and reported as a bad schema (the panic hook still prints it).
    let decoded = std::panic::catch_unwind(|| DescriptorPool::decode(data))
        .map_err(|_| CodecError::bad("not a valid FileDescriptorSet (the descriptor checks failed)"))?;
    let pool = decoded.map_err(|e| CodecError::bad(format!("not a valid FileDescriptorSet: {e}")))?;
    let name = schema_name.trim_start_matches('.');
    pool.get_message_by_name(name)
        .ok_or_else(|| CodecError::bad(format!("the FileDescriptorSet has no message named `{name}`")))
}

pub(crate) fn decode(desc: &MessageDescriptor, msg: &[u8], opts: &DecodeOptions) -> Result<Value, DecodeError> {
    let m = DynamicMessage::decode(desc.clone(), msg).map_err(|e| DecodeError::Invalid {
        path: String::new(),
        reason: format!("not a valid {} message: {e}", desc.full_name()),
    })?;
    let mut v = m
        .serialize_with_options(
            serde_json::value::Serializer,
            &SerializeOptions::new().skip_default_fields(false).stringify_64_bit_integers(false),
        )
        .map_err(|e| DecodeError::Invalid { path: String::new(), reason: e.to_string() })?;
    if !opts.full {
        summarise(&m, &mut v);
    }
    Ok(v)
}

/// Replaces long `bytes` values in `json` (the JSON form of `m`) by `"<N bytes>"`.
fn summarise(m: &DynamicMessage, json: &mut Value) {
    if m.descriptor().full_name().starts_with("google.protobuf.") {
        // Well-known types have their own JSON forms.
        return;
    }
    let Value::Object(obj) = json else { return };
    for (field, value) in m.fields() {
        let Some(j) = obj.get_mut(field.json_name()) else {
            continue;
        };
        match (field.kind(), value) {
            (Kind::Bytes, PbValue::Bytes(b)) if b.len() > SUMMARY_THRESHOLD => {
                *j = Value::String(format!("<{} bytes>", b.len()));
            }
            (Kind::Bytes, PbValue::List(items)) => {
                if let Value::Array(js) = j {
                    for (item, jv) in items.iter().zip(js.iter_mut()) {
                        if let PbValue::Bytes(b) = item {
                            if b.len() > SUMMARY_THRESHOLD {
                                *jv = Value::String(format!("<{} bytes>", b.len()));
                            }
                        }
                    }
                }
            }
            (Kind::Message(_), PbValue::Message(inner)) => summarise(inner, j),
            (Kind::Message(_), PbValue::List(items)) => {
                if let Value::Array(js) = j {
                    for (item, jv) in items.iter().zip(js.iter_mut()) {
                        if let PbValue::Message(inner) = item {
                            summarise(inner, jv);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

pub(crate) fn encode(desc: &MessageDescriptor, value: &Value) -> Result<Vec<u8>, EncodeError> {
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(value, &mut track);
    let opts = DeserializeOptions::new().deny_unknown_fields(true);
    match DynamicMessage::deserialize_with_options(desc.clone(), de, &opts) {
        Ok(m) => Ok(m.encode_to_vec()),
        Err(e) => {
            let path = track.path();
            let mut at = Some(value);
            for seg in path.iter() {
                at = match seg {
                    serde_path_to_error::Segment::Seq { index } => at.and_then(|v| v.get(index)),
                    serde_path_to_error::Segment::Map { key } => at.and_then(|v| v.get(key)),
                    _ => None,
                };
            }
            let path = path.to_string();
            let path = if path == "." { String::new() } else { path };
            Err(classify(path, &e.to_string(), at))
        }
    }
}

/// Maps a deserializer message to the error class it reports.
fn classify(path: String, msg: &str, at: Option<&Value>) -> EncodeError {
    let unknown = msg.strip_prefix("unknown field `").or_else(|| msg.strip_prefix("unrecognized field name '"));
    if let Some(rest) = unknown {
        let name = rest.split(['`', '\'']).next().unwrap_or_default();
        return EncodeError::UnknownField { path: crate::error::join(&path, name) };
    }
    if let Some(rest) = msg.strip_prefix("invalid type: ") {
        if let Some((found, expected)) = rest.split_once(", expected ") {
            return EncodeError::WrongType { path, expected: expected.to_owned(), found: found.to_owned() };
        }
    }
    if msg.starts_with("invalid digit")
        || msg.starts_with("invalid float literal")
        || msg.starts_with("expected integer value")
        || msg.starts_with("cannot parse")
    {
        return EncodeError::WrongType {
            path,
            expected: if msg.contains("float") { "a number".to_owned() } else { "an integer".to_owned() },
            found: at.map_or_else(|| msg.to_owned(), crate::error::abbreviate),
        };
    }
    if msg.starts_with("invalid value") || msg.contains("out of range") {
        return EncodeError::OutOfRange { path, reason: msg.to_owned() };
    }
    EncodeError::Invalid { path, reason: msg.to_owned() }
}
