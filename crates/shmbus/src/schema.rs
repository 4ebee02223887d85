//! What a channel's messages are: a [`Schema`] set by the channel's creator, fixed for the
//! channel's life, in MCAP's vocabulary (mcap.dev, "Well-known encodings"), so tools that
//! speak MCAP or the Foxglove WebSocket protocol carry it through unchanged.
//!
//! A schema is four things: the **message encoding** (`cdr`, `protobuf`, `json`, `cbor`,
//! `flatbuffer`, `msgpack`, `ros1`, `shmbus-pod`, or any other name), the **schema name**
//! (`sensor_msgs/msg/Imu`, `foxglove.RawImage`), the **schema encoding** (`ros2msg`,
//! `ros2idl`, `protobuf`, `flatbuffer`, `jsonschema`, `ros1msg`, `shmbus-pod`, or empty for
//! none) and the **schema data** (a ros2msg text with its dependencies, a binary protobuf
//! `FileDescriptorSet`, a JSON schema, …), up to [`Schema::MAX_DATA`] bytes.
//!
//! It is stored with the channel when the channel is made, before the channel is ready, in
//! one checksummed record (below): at the end of a segment file (its header
//! gives the record's length) and at the end of a journal's `journal.meta`. Opening reads
//! the record with `pread` into memory of its own, checks its bounds and checksum and parses
//! it; a peer that later scribbles over the file changes nothing an open handle sees.
//!
//! ```text
//! record:  u64 magic "SBSCHEMA" | u32 message-encoding length | u32 schema-name length
//!          | u32 schema-encoding length | u32 0 | u64 data length
//!          | message encoding | schema name | schema encoding | data | u32 CRC32C of all before
//! ```

use std::fmt;

/// `b"SBSCHEMA"` as a little-endian u64.
const MAGIC: u64 = u64::from_le_bytes(*b"SBSCHEMA");
/// Bytes of the record before its texts.
const HEAD: usize = 8 + 4 * 4 + 8;

/// The schema of a channel's messages (see the [module docs](self)).
///
/// ```
/// let imu = shmbus::Schema::new("cdr", "sensor_msgs/msg/Imu", "ros2msg", b"float64 x\n".to_vec())?;
/// assert_eq!(imu.message_encoding(), "cdr");
/// let json_only = shmbus::Schema::new("json", "", "", Vec::new())?; // self-describing messages
/// # Ok::<(), shmbus::SchemaError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Schema {
    message_encoding: String,
    name: String,
    encoding: String,
    data: Vec<u8>,
}

/// Why a [`Schema`] cannot be made, or a stored one cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaError {
    /// The message encoding is empty: every schema says how its messages are encoded.
    NoMessageEncoding,
    /// A text field (`field`) is longer than [`Schema::MAX_TEXT`] bytes.
    TextTooLong {
        /// `message encoding`, `schema name` or `schema encoding`.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// A text field holds a control character (a newline, a NUL, …).
    ControlCharacter {
        /// `message encoding`, `schema name` or `schema encoding`.
        field: &'static str,
    },
    /// The schema data is longer than [`Schema::MAX_DATA`] bytes.
    DataTooLong {
        /// Its length.
        len: usize,
    },
    /// Schema data was given with no schema encoding to say what it is.
    DataWithoutEncoding,
    /// A stored record is not a valid schema record.
    Corrupt {
        /// What is wrong with it.
        what: String,
    },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::NoMessageEncoding => {
                f.write_str("a schema needs a message encoding (cdr, protobuf, json, cbor, msgpack, …)")
            }
            SchemaError::TextTooLong { field, len } => {
                write!(f, "the {field} is {len} bytes, more than the {} a schema allows", Schema::MAX_TEXT)
            }
            SchemaError::ControlCharacter { field } => write!(f, "the {field} holds a control character"),
            SchemaError::DataTooLong { len } => {
                write!(f, "the schema data is {len} bytes, more than the {} a schema allows", Schema::MAX_DATA)
            }
            SchemaError::DataWithoutEncoding => {
                f.write_str("schema data was given without a schema encoding to say what it is")
            }
            SchemaError::Corrupt { what } => write!(f, "stored schema is corrupt: {what}"),
        }
    }
}

impl std::error::Error for SchemaError {}

impl crate::error::Failure for SchemaError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            SchemaError::Corrupt { .. } => crate::error::ErrorKind::Corrupt,
            _ => crate::error::ErrorKind::InvalidConfig,
        }
    }
}

impl Schema {
    /// Largest schema data, in bytes (1 MiB).
    pub const MAX_DATA: usize = 1 << 20;
    /// Largest message encoding, schema name or schema encoding, in bytes.
    pub const MAX_TEXT: usize = 1024;
    /// Largest stored record.
    pub(crate) const MAX_RECORD: usize = HEAD + 3 * Schema::MAX_TEXT + Schema::MAX_DATA + 4;

    /// A schema: how messages are encoded (`message_encoding`, never empty), the schema's
    /// name, its encoding (empty for none) and its bytes (empty when there is no schema
    /// encoding).
    pub fn new(
        message_encoding: impl Into<String>,
        name: impl Into<String>,
        encoding: impl Into<String>,
        data: impl Into<Vec<u8>>,
    ) -> Result<Schema, SchemaError> {
        let s = Schema {
            message_encoding: message_encoding.into(),
            name: name.into(),
            encoding: encoding.into(),
            data: data.into(),
        };
        s.validate()?;
        Ok(s)
    }

    fn validate(&self) -> Result<(), SchemaError> {
        if self.message_encoding.is_empty() {
            return Err(SchemaError::NoMessageEncoding);
        }
        for (field, text) in self.texts() {
            if text.len() > Schema::MAX_TEXT {
                return Err(SchemaError::TextTooLong { field, len: text.len() });
            }
            if text.chars().any(char::is_control) {
                return Err(SchemaError::ControlCharacter { field });
            }
        }
        if self.data.len() > Schema::MAX_DATA {
            return Err(SchemaError::DataTooLong { len: self.data.len() });
        }
        if self.encoding.is_empty() && !self.data.is_empty() {
            return Err(SchemaError::DataWithoutEncoding);
        }
        Ok(())
    }

    fn texts(&self) -> [(&'static str, &str); 3] {
        [("message encoding", &self.message_encoding), ("schema name", &self.name), ("schema encoding", &self.encoding)]
    }

    /// How each message's bytes are encoded (`cdr`, `protobuf`, `json`, …).
    pub fn message_encoding(&self) -> &str {
        &self.message_encoding
    }

    /// The schema's name (`sensor_msgs/msg/Imu`); may be empty.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema's encoding (`ros2msg`, `protobuf`, …); empty when there is no schema data.
    pub fn encoding(&self) -> &str {
        &self.encoding
    }

    /// The schema's bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The stored record of this schema (see the [module docs](self)).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.record_len());
        b.extend_from_slice(&MAGIC.to_le_bytes());
        for (_, text) in self.texts() {
            b.extend_from_slice(&(text.len() as u32).to_le_bytes());
        }
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&(self.data.len() as u64).to_le_bytes());
        for (_, text) in self.texts() {
            b.extend_from_slice(text.as_bytes());
        }
        b.extend_from_slice(&self.data);
        let crc = crate::crc::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Length of [`encode`](Schema::encode)'s record.
    pub(crate) fn record_len(&self) -> usize {
        HEAD + self.message_encoding.len() + self.name.len() + self.encoding.len() + self.data.len() + 4
    }

    /// Parses `b` as up to `max` stored records one after another (untrusted: each record's
    /// length is taken from its head, bounded, and checked as [`decode`](Schema::decode)
    /// checks it).
    pub(crate) fn decode_all(mut b: &[u8], max: usize) -> Result<Vec<Schema>, SchemaError> {
        let mut all = Vec::new();
        while !b.is_empty() {
            if all.len() == max {
                return Err(SchemaError::Corrupt { what: format!("more than {max} schema records") });
            }
            let len = Schema::stored_len(b)?;
            all.push(Schema::decode(&b[..len])?);
            b = &b[len..];
        }
        Ok(all)
    }

    /// The length of the record at the start of `b`, from its head (checked as
    /// [`head_of`](Schema::head_of) checks it), if `b` holds that much.
    fn stored_len(b: &[u8]) -> Result<usize, SchemaError> {
        let (lens, data_len) = Schema::head_of(b)?;
        let len = HEAD + lens.iter().sum::<usize>() + data_len + 4;
        if len > b.len() {
            return Err(SchemaError::Corrupt { what: "lengths do not add up to the record's size".to_owned() });
        }
        Ok(len)
    }

    /// The text lengths and the data length a record's head at the start of `b` gives, after
    /// checking its magic, its reserved word and the limits (so the record they make is at
    /// most [`MAX_RECORD`](Schema::MAX_RECORD) bytes).
    fn head_of(b: &[u8]) -> Result<([usize; 3], usize), SchemaError> {
        let corrupt = |what: &str| SchemaError::Corrupt { what: what.to_owned() };
        if b.len() < HEAD + 4 {
            return Err(SchemaError::Corrupt { what: format!("record of {} bytes", b.len()) });
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes")) as usize;
        if b[..8] != MAGIC.to_le_bytes() {
            return Err(corrupt("bad magic"));
        }
        if u32_at(20) != 0 {
            return Err(corrupt("reserved word is not zero"));
        }
        let lens = [u32_at(8), u32_at(12), u32_at(16)];
        let data_len = u64::from_le_bytes(b[24..32].try_into().expect("8 bytes"));
        if lens.iter().any(|&l| l > Schema::MAX_TEXT) || data_len > Schema::MAX_DATA as u64 {
            return Err(corrupt("a field is longer than the limits"));
        }
        Ok((lens, data_len as usize))
    }

    /// Parses a stored record of exactly `b.len()` bytes (untrusted: every length is checked
    /// against the limits and the record, then the checksum, then the fields as [`Schema::new`]
    /// checks them).
    pub(crate) fn decode(b: &[u8]) -> Result<Schema, SchemaError> {
        let corrupt = |what: &str| SchemaError::Corrupt { what: what.to_owned() };
        if b.len() > Schema::MAX_RECORD {
            return Err(SchemaError::Corrupt { what: format!("record of {} bytes", b.len()) });
        }
        let (lens, data_len) = Schema::head_of(b)?;
        if HEAD + lens.iter().sum::<usize>() + data_len + 4 != b.len() {
            return Err(corrupt("lengths do not add up to the record's size"));
        }
        let crc_at = b.len() - 4;
        if crate::crc::crc32c(&b[..crc_at]).to_le_bytes() != b[crc_at..] {
            return Err(corrupt("checksum mismatch (the record was overwritten)"));
        }
        let mut at = HEAD;
        let mut text = |len: usize| {
            let s = std::str::from_utf8(&b[at..at + len]).map(str::to_owned);
            at += len;
            s.map_err(|_| corrupt("a text field is not UTF-8"))
        };
        let (message_encoding, name, encoding) = (text(lens[0])?, text(lens[1])?, text(lens[2])?);
        let data = b[at..crc_at].to_vec();
        let s = Schema { message_encoding, name, encoding, data };
        s.validate().map_err(|e| SchemaError::Corrupt { what: e.to_string() })?;
        Ok(s)
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema")
            .field("message_encoding", &self.message_encoding)
            .field("name", &self.name)
            .field("encoding", &self.encoding)
            .field("data_len", &self.data.len())
            .finish()
    }
}

/// `cdr sensor_msgs/msg/Imu (ros2msg, 1234 bytes)`; `json` for a schema without data.
impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message_encoding)?;
        if !self.name.is_empty() {
            write!(f, " {}", self.name)?;
        }
        if !self.encoding.is_empty() {
            write!(f, " ({}, {} bytes)", self.encoding, self.data.len())?;
        }
        Ok(())
    }
}

/// The `shmbus-pod` schema of `T` (see [`pod_schema`](crate::pod::pod_schema)): what a typed
/// config (`TopicConfig::for_type::<T>()`, …) stores when it creates a channel. `None` for a
/// type that describes no struct (numbers, arrays, hand-written `Pod` impls).
pub(crate) fn pod_schema_of<T: crate::Pod>() -> Option<Schema> {
    let (name, json) = crate::pod::pod_schema::<T>()?;
    let enc = crate::pod::POD_ENCODING;
    Schema::new(enc, name, enc, json.into_bytes()).ok()
}

/// What a schema mismatch names for a list of schemas: `no schema`, the one, or a
/// service's pair (`requests cdr x/Req, responses cdr x/Resp`).
pub(crate) fn describe_all(all: &[std::sync::Arc<Schema>]) -> String {
    match all {
        [] => describe(None),
        [one] => one.to_string(),
        [req, resp] => format!("requests {req}, responses {resp}"),
        more => more.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("; "),
    }
}

/// What a schema mismatch names: the schema, or `no schema`.
pub(crate) fn describe(s: Option<&Schema>) -> String {
    s.map_or_else(|| "no schema".to_owned(), |s| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imu() -> Schema {
        Schema::new("cdr", "sensor_msgs/msg/Imu", "ros2msg", b"float64 x\nfloat64 y\n".to_vec()).unwrap()
    }

    #[test]
    fn record_round_trips() {
        let s = imu();
        let b = s.encode();
        assert_eq!(b.len(), s.record_len());
        assert_eq!(Schema::decode(&b).unwrap(), s);
        let empty = Schema::new("json", "", "", Vec::new()).unwrap();
        assert_eq!(Schema::decode(&empty.encode()).unwrap(), empty);
    }

    #[test]
    fn limits_are_exact() {
        let at = Schema::new("protobuf", "x.Y", "protobuf", vec![7u8; Schema::MAX_DATA]).unwrap();
        assert_eq!(Schema::decode(&at.encode()).unwrap(), at);
        assert_eq!(
            Schema::new("protobuf", "x.Y", "protobuf", vec![7u8; Schema::MAX_DATA + 1]),
            Err(SchemaError::DataTooLong { len: Schema::MAX_DATA + 1 })
        );
        let long = "a".repeat(Schema::MAX_TEXT + 1);
        assert!(matches!(Schema::new("cdr", long, "", Vec::new()), Err(SchemaError::TextTooLong { .. })));
        assert_eq!(Schema::new("", "", "", Vec::new()), Err(SchemaError::NoMessageEncoding));
        assert_eq!(
            Schema::new("cdr", "a\nb", "", Vec::new()),
            Err(SchemaError::ControlCharacter { field: "schema name" })
        );
        assert_eq!(Schema::new("cdr", "x", "", vec![1]), Err(SchemaError::DataWithoutEncoding));
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let b = imu().encode();
        for i in 0..b.len() {
            for bit in [0x01u8, 0x80] {
                let mut m = b.clone();
                m[i] ^= bit;
                assert!(Schema::decode(&m).is_err(), "flip of bit {bit:#x} at {i} accepted");
            }
        }
        for len in 0..b.len() {
            assert!(Schema::decode(&b[..len]).is_err(), "cut at {len} accepted");
        }
    }

    #[test]
    fn scribbled_lengths_never_panic() {
        let b = imu().encode();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut m = b.clone();
            let i = (seed as usize) % 32;
            m[i] = (seed >> 32) as u8;
            let _ = Schema::decode(&m);
        }
    }

    #[test]
    fn a_pair_of_records_reads_back_and_a_cut_or_a_third_is_refused() {
        let (a, b) = (imu(), Schema::new("json", "", "", Vec::new()).unwrap());
        let both: Vec<u8> = [a.encode(), b.encode()].concat();
        assert_eq!(Schema::decode_all(&both, 2).unwrap(), vec![a.clone(), b.clone()]);
        assert_eq!(Schema::decode_all(&a.encode(), 2).unwrap(), vec![a.clone()]);
        for cut in (1..both.len()).filter(|&cut| cut != a.encode().len()) {
            assert!(Schema::decode_all(&both[..cut], 2).is_err(), "cut at {cut} accepted");
        }
        let three: Vec<u8> = [both.clone(), b.encode()].concat();
        assert!(Schema::decode_all(&three, 2).is_err());
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut m = both.clone();
            let i = (seed as usize) % m.len();
            m[i] ^= (seed >> 32) as u8 | 1;
            assert!(Schema::decode_all(&m, 2).is_err(), "byte {i} changed and accepted");
        }
    }
}
