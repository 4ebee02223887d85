//! Decode message bytes into JSON and encode JSON into message bytes, given a channel's
//! schema in MCAP's vocabulary (`message_encoding`, `schema_name`, `schema_encoding`, schema
//! data).
//!
//! | message encoding | schema encoding | how |
//! |---|---|---|
//! | `cdr` | `ros2msg` | hand-written over the parsed `.msg` text (module `cdr`) |
//! | `cdr` | `ros2idl` | the same, over the parsed IDL subset ROS 2 emits |
//! | `protobuf` | `protobuf` | `prost-reflect` (dynamic messages, canonical JSON mapping) |
//! | `json` | empty or `jsonschema` | `serde_json` (the schema is not enforced) |
//! | `cbor` | empty | `ciborium` |
//! | `msgpack` | empty | `rmp-serde` |
//! | `shmbus-pod` | `shmbus-pod` | hand-written (shmbus's own format) |
//!
//! ```
//! use shmbus_codec::{Codec, DecodeOptions};
//! let schema = "float64 x\nuint8 level 3\n";
//! let codec = Codec::new("cdr", "demo/msg/Level", "ros2msg", schema.as_bytes()).unwrap();
//! let bytes = codec.encode(&serde_json::json!({"x": 1.5})).unwrap();
//! let value = codec.decode(&bytes, &DecodeOptions::default()).unwrap();
//! assert_eq!(value, serde_json::json!({"x": 1.5, "level": 3}));
//! ```
//!
//! Why some codecs are hand-written: no maintained Rust crate decodes *and* encodes CDR
//! dynamically from a `ros2msg` or `ros2idl` text (the serde-based CDR crates need a Rust
//! type per message; `ros2_message`, the one dynamic decoder, is decode-only, little-endian
//! only and says it is not yet tested), so the schema parsers and the CDR walk are here, with
//! rosbags as the interop reference in the tests. `shmbus-pod` is shmbus's own format.
//!
//! Encode follows `ros2 topic pub`: a missing field takes its default (the declared one, or
//! zero / empty); an unknown field, a value out of range or of the wrong type is an error
//! naming the field, and no bytes are produced.
//!
//! Message bytes and schema data are untrusted: every length is checked against the bytes
//! there are, nesting is capped at [`MAX_DEPTH`], decoded output at [`MAX_OUTPUT_NODES`]
//! values, and no input makes these functions panic.

mod cdr;
mod error;
mod pod;
mod protobuf;
mod ros2idl;
mod ros2msg;
mod selfdesc;
mod types;

pub use error::{CodecError, DecodeError, EncodeError};

/// Deepest nesting of structs (or arrays and maps) decode and encode accept.
pub const MAX_DEPTH: usize = 64;
/// Most JSON values one decode produces (a summarised byte array counts as one).
pub const MAX_OUTPUT_NODES: usize = 1 << 22;
/// Largest schema data accepted (bytes), as the channel schema allows.
pub const MAX_SCHEMA_LEN: usize = 1 << 20;
/// Byte arrays longer than this are summarised as `"<N bytes>"` unless
/// [`DecodeOptions::full`].
pub const SUMMARY_THRESHOLD: usize = 64;

/// How [`Codec::decode`] renders a message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    /// `false` (the default): byte arrays (`uint8`/`byte`/`char` arrays, protobuf `bytes`,
    /// CBOR/MessagePack byte strings, `u8` arrays of `shmbus-pod`) longer than 64 are shown as
    /// `"<N bytes>"`; `true`: every element.
    pub full: bool,
}

/// The message encodings this crate decodes, each with the schema encodings it takes.
const PAIRS: &[(&str, &[&str])] = &[
    ("cdr", &["ros2msg", "ros2idl"]),
    ("protobuf", &["protobuf"]),
    ("json", &["", "jsonschema"]),
    ("cbor", &[""]),
    ("msgpack", &[""]),
    ("shmbus-pod", &["shmbus-pod"]),
];

/// Whether a codec exists for this encoding pair (whether a CLI can show a channel's
/// messages decoded, rather than as bytes).
pub fn supported(message_encoding: &str, schema_encoding: &str) -> bool {
    PAIRS.iter().any(|(m, s)| *m == message_encoding && s.contains(&schema_encoding))
}

#[derive(Debug, Clone)]
enum Inner {
    Cdr(types::Types),
    Protobuf(prost_reflect::MessageDescriptor),
    SelfDescribing(selfdesc::Format),
    Pod(pod::PodStruct),
}

/// A decoder and encoder for one channel's messages, made from its schema.
#[derive(Debug, Clone)]
pub struct Codec {
    inner: Inner,
}

impl Codec {
    /// Parses the schema and makes the codec.
    ///
    /// `Err(CodecError::Unsupported{..})` for an encoding pair with no codec,
    /// `Err(CodecError::BadSchema{..})` for schema data that does not parse (schema data is
    /// untrusted: the work is bounded and nothing panics).
    pub fn new(
        message_encoding: &str,
        schema_name: &str,
        schema_encoding: &str,
        data: &[u8],
    ) -> Result<Codec, CodecError> {
        let unsupported = |reason: &str| CodecError::Unsupported {
            message_encoding: message_encoding.to_owned(),
            schema_encoding: schema_encoding.to_owned(),
            reason: reason.to_owned(),
        };
        if !supported(message_encoding, schema_encoding) {
            return Err(unsupported("this pair is not one of the supported encodings"));
        }
        if data.len() > MAX_SCHEMA_LEN {
            return Err(CodecError::bad(format!(
                "schema data is {} bytes, over the limit of {MAX_SCHEMA_LEN}",
                data.len()
            )));
        }
        let text = || std::str::from_utf8(data).map_err(|e| CodecError::bad(format!("schema data is not UTF-8: {e}")));
        let inner = match (message_encoding, schema_encoding) {
            ("cdr", "ros2msg") => Inner::Cdr(check_defaults(ros2msg::parse(schema_name, text()?)?)?),
            ("cdr", "ros2idl") => Inner::Cdr(check_defaults(ros2idl::parse(schema_name, text()?)?)?),
            ("protobuf", _) => Inner::Protobuf(protobuf::parse(schema_name, data)?),
            ("json", _) => Inner::SelfDescribing(selfdesc::Format::Json),
            ("cbor", _) => Inner::SelfDescribing(selfdesc::Format::Cbor),
            ("msgpack", _) => Inner::SelfDescribing(selfdesc::Format::Msgpack),
            ("shmbus-pod", _) => Inner::Pod(pod::parse(data)?),
            _ => return Err(unsupported("this pair is not one of the supported encodings")),
        };
        Ok(Codec { inner })
    }

    /// Decodes one message into its JSON form.
    pub fn decode(&self, msg: &[u8], opts: &DecodeOptions) -> Result<serde_json::Value, DecodeError> {
        match &self.inner {
            Inner::Cdr(types) => cdr::decode(types, msg, opts),
            Inner::Protobuf(desc) => protobuf::decode(desc, msg, opts),
            Inner::SelfDescribing(format) => selfdesc::decode(*format, msg, opts),
            Inner::Pod(s) => pod::decode(s, msg, opts),
        }
    }

    /// Encodes a JSON value into one message; on any error no bytes are produced.
    pub fn encode(&self, value: &serde_json::Value) -> Result<Vec<u8>, EncodeError> {
        match &self.inner {
            Inner::Cdr(types) => cdr::encode(types, value),
            Inner::Protobuf(desc) => protobuf::encode(desc, value),
            Inner::SelfDescribing(format) => selfdesc::encode(*format, value),
            Inner::Pod(s) => pod::encode(s, value),
        }
    }
}

/// Rejects a schema whose declared defaults do not fit their fields.
fn check_defaults(types: types::Types) -> Result<types::Types, CodecError> {
    for s in &types.structs {
        for f in &s.fields {
            if let Some(d) = &f.default {
                cdr::check_default(&types, f, d)
                    .map_err(|e| CodecError::bad(format!("{}: default value: {e}", s.name)))?;
            }
        }
    }
    Ok(types)
}
