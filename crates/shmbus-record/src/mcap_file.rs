//! MCAP files: [`McapWriter`] and [`McapMessages`] over the `mcap` crate.
//!
//! Each topic is one MCAP channel; a topic's schema is one MCAP schema record (shared by
//! topics with the same schema name, encoding and data), its message encoding the channel's.
//! A topic without a schema gets schema id 0 and an empty message encoding: the MCAP spec
//! has no well-known encoding for "opaque bytes", readers pass an unknown (or empty) message
//! encoding through undecoded, and empty says plainly that nothing is known.
//!
//! Times: MCAP's `log_time` and `publish_time` are Unix-epoch nanoseconds; shmbus stamps
//! messages with CLOCK_MONOTONIC. [`McapWriter::write`] converts both with one offset,
//! CLOCK_REALTIME − CLOCK_MONOTONIC sampled when the writer is made, so the times of one
//! file are consistent with each other even if the wall clock is stepped while recording.
//! MCAP's `sequence` is a u32: it holds the shmbus sequence number modulo 2³² (it wraps
//! after 4 294 967 295 messages of one topic).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufReader, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use shmbus::journal::realtime_ns;
use shmbus::time::monotonic_ns;
use shmbus::Schema;

use crate::RecordError;

/// How the chunks of an MCAP file are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// zstd (the default: what MCAP tools expect and the best ratio).
    #[default]
    Zstd,
    /// LZ4 frames (faster, larger).
    Lz4,
    /// None.
    None,
}

impl Compression {
    /// `zstd`, `lz4` or `none`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
            Compression::None => "none",
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = String;

    fn from_str(s: &str) -> Result<Compression, String> {
        match s {
            "zstd" => Ok(Compression::Zstd),
            "lz4" => Ok(Compression::Lz4),
            "none" => Ok(Compression::None),
            _ => Err(format!("unknown compression {s:?}: zstd, lz4 or none")),
        }
    }
}

/// Options of an [`McapWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McapOptions {
    /// Chunk compression (default zstd).
    pub compression: Compression,
    /// A chunk is closed (compressed, written whole) once it holds this many uncompressed
    /// bytes (default 1 MiB). A killed writer loses at most the open chunk.
    pub chunk_size: u64,
}

impl Default for McapOptions {
    fn default() -> Self {
        McapOptions { compression: Compression::Zstd, chunk_size: mcap::WriteOptions::DEFAULT_CHUNK_SIZE }
    }
}

/// The channel of a topic: its id and the schema it was added with.
#[derive(Debug)]
struct TopicChannel {
    id: u16,
    schema: Option<Schema>,
}

/// Writes topics' messages to an MCAP file.
///
/// Each topic is one channel; its schema one schema record (shared by topics with the same
/// schema), its message encoding the channel's. A topic without a schema gets schema id 0
/// and an empty message encoding (MCAP has no well-known encoding for opaque bytes; readers
/// pass an unknown one through undecoded). Times are converted from CLOCK_MONOTONIC to Unix
/// epoch with one offset sampled when the writer is made ([`clock_offset_ns`](Self::clock_offset_ns));
/// the MCAP sequence is the shmbus sequence number modulo 2³².
///
/// Messages go into chunks, written whole as they fill; [`finish`](Self::finish) closes
/// the last chunk and writes the summary section (schemas, channels, statistics, chunk
/// and message indexes). Dropping an unfinished writer finishes it, ignoring errors.
pub struct McapWriter<W: Write + Seek> {
    inner: mcap::Writer<W>,
    topics: HashMap<String, TopicChannel>,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC when the writer was made.
    offset_ns: u64,
}

impl<W: Write + Seek> std::fmt::Debug for McapWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McapWriter")
            .field("topics", &self.topics)
            .field("offset_ns", &self.offset_ns)
            .finish_non_exhaustive()
    }
}

impl McapWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and writes an MCAP file there with the
    /// default options.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        McapWriter::create_with(path, McapOptions::default())
    }

    /// [`create`](Self::create) with options.
    pub fn create_with(path: impl AsRef<Path>, options: McapOptions) -> Result<Self, RecordError> {
        let path = path.as_ref();
        let f = File::create(path).map_err(|e| RecordError::Io { path: path.to_path_buf(), source: e })?;
        // A chunk is written as a header, its compressed records, then a seek back to fill
        // in the header's lengths: the seek flushes the buffer, so every closed chunk is in
        // the file before the next one starts.
        McapWriter::with_options(BufWriter::new(f), options)
    }
}

impl<W: Write + Seek> McapWriter<W> {
    /// Writes an MCAP file to `w` with the default options.
    pub fn new(w: W) -> Result<Self, RecordError> {
        McapWriter::with_options(w, McapOptions::default())
    }

    /// Writes an MCAP file to `w`.
    pub fn with_options(w: W, options: McapOptions) -> Result<Self, RecordError> {
        let compression = match options.compression {
            Compression::Zstd => Some(mcap::Compression::Zstd),
            Compression::Lz4 => Some(mcap::Compression::Lz4),
            Compression::None => None,
        };
        let inner = mcap::WriteOptions::new()
            .compression(compression)
            .chunk_size(Some(options.chunk_size.max(1)))
            .profile("")
            .library(format!("shmbus-record/{} ({})", env!("CARGO_PKG_VERSION"), mcap::LIBRARY_IDENTIFIER))
            // One thread: the recorder's, so a kill loses nothing a worker held.
            .compression_threads(0)
            .create(w)?;
        let (mono, real) = (monotonic_ns(), realtime_ns());
        Ok(McapWriter { inner, topics: HashMap::new(), offset_ns: real.saturating_sub(mono) })
    }

    /// CLOCK_REALTIME − CLOCK_MONOTONIC (ns) sampled when the writer was made: what
    /// [`write`](Self::write) adds to shmbus timestamps.
    pub fn clock_offset_ns(&self) -> u64 {
        self.offset_ns
    }

    /// Adds `topic` as a channel with its schema (none: schema id 0, empty message encoding).
    /// Adding a topic again with the same schema does nothing.
    pub fn add_topic(&mut self, topic: &str, schema: Option<&Schema>) -> Result<(), RecordError> {
        if let Some(t) = self.topics.get(topic) {
            return match t.schema.as_ref() == schema {
                true => Ok(()),
                false => Err(RecordError::TopicSchemaChanged(topic.to_owned())),
            };
        }
        let (schema_id, message_encoding) = match schema {
            Some(s) => (self.inner.add_schema(s.name(), s.encoding(), s.data())?, s.message_encoding()),
            None => (0, ""),
        };
        let id = self.inner.add_channel(schema_id, topic, message_encoding, &BTreeMap::new())?;
        self.topics.insert(topic.to_owned(), TopicChannel { id, schema: schema.cloned() });
        Ok(())
    }

    /// Writes one message of `topic` (added before): its shmbus sequence number, publish
    /// timestamp and receive timestamp, both CLOCK_MONOTONIC ns (converted to Unix epoch
    /// with [`clock_offset_ns`](Self::clock_offset_ns)).
    pub fn write(
        &mut self,
        topic: &str,
        seq: u64,
        publish_ns: u64,
        log_ns: u64,
        payload: &[u8],
    ) -> Result<(), RecordError> {
        let off = self.offset_ns;
        self.write_epoch(topic, seq, publish_ns.saturating_add(off), log_ns.saturating_add(off), payload)
    }

    /// [`write`](Self::write) with both times already Unix-epoch ns.
    pub fn write_epoch(
        &mut self,
        topic: &str,
        seq: u64,
        publish_epoch_ns: u64,
        log_epoch_ns: u64,
        payload: &[u8],
    ) -> Result<(), RecordError> {
        let channel_id = self.topics.get(topic).ok_or_else(|| RecordError::UnknownTopic(topic.to_owned()))?.id;
        let header = mcap::records::MessageHeader {
            channel_id,
            // MCAP's sequence is a u32: the shmbus sequence modulo 2^32.
            sequence: seq as u32,
            log_time: log_epoch_ns,
            publish_time: publish_epoch_ns,
        };
        self.inner.write_to_known_channel(&header, payload)?;
        Ok(())
    }

    /// Closes the open chunk (written whole) and flushes the output: every message written
    /// so far is readable, even if the writer is killed next. A recorder calls it now and then
    /// (say once a second) to bound what a kill loses in time as well as in chunk size; each
    /// call ends a chunk, and smaller chunks compress less well.
    pub fn flush(&mut self) -> Result<(), RecordError> {
        self.inner.flush()?;
        Ok(())
    }

    /// Closes the open chunk, writes the summary section and the footer, flushes, and hands
    /// back the output.
    pub fn finish(mut self) -> Result<W, RecordError> {
        self.inner.finish()?;
        let mut w = self.inner.into_inner();
        w.flush().map_err(|e| RecordError::Mcap(e.into()))?;
        Ok(w)
    }
}

/// One message of an MCAP file (what [`McapMessages`] yields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McapMessage {
    /// The channel's topic.
    pub topic: String,
    /// The channel's id in the file.
    pub channel_id: u16,
    /// The channel's schema as a shmbus schema (`None`: the channel has no schema and an
    /// empty message encoding). A channel with a message encoding but no schema record gets
    /// a schema with that message encoding alone.
    pub schema: Option<Arc<Schema>>,
    /// MCAP's sequence (the shmbus sequence modulo 2³² in files shmbus writes).
    pub sequence: u32,
    /// Publish time, Unix-epoch ns.
    pub publish_ns: u64,
    /// Log (receive) time, Unix-epoch ns.
    pub log_ns: u64,
    /// The payload.
    pub payload: Vec<u8>,
}

/// The messages of an MCAP file in file order: an iterator of
/// `Result<McapMessage, RecordError>`.
///
/// It reads the data section front to back and does not need the summary, so it also reads
/// a file whose writer was killed: every message of its whole chunks, then one error
/// ([`RecordError::Mcap`]) for the cut-off rest. After an error it ends.
pub struct McapMessages {
    path: PathBuf,
    reader: mcap::io::MessageReader<BufReader<File>>,
    schemas: HashMap<u16, Option<Arc<Schema>>>,
    done: bool,
}

impl std::fmt::Debug for McapMessages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McapMessages").field("path", &self.path).finish_non_exhaustive()
    }
}

impl McapMessages {
    /// Opens the MCAP file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<McapMessages, RecordError> {
        let path = path.as_ref().to_path_buf();
        let f = File::open(&path).map_err(|e| RecordError::Io { path: path.clone(), source: e })?;
        let reader = mcap::io::MessageReader::new(BufReader::new(f));
        Ok(McapMessages { path, reader, schemas: HashMap::new(), done: false })
    }

    fn convert(&mut self, m: mcap::Message<'static>) -> Result<McapMessage, RecordError> {
        let ch = &m.channel;
        let schema = match self.schemas.get(&ch.id) {
            Some(s) => s.clone(),
            None => {
                let s = shmbus_schema(ch)?.map(Arc::new);
                self.schemas.insert(ch.id, s.clone());
                s
            }
        };
        Ok(McapMessage {
            topic: ch.topic.clone(),
            channel_id: ch.id,
            schema,
            sequence: m.sequence,
            publish_ns: m.publish_time,
            log_ns: m.log_time,
            payload: m.data.into_owned(),
        })
    }
}

/// The shmbus schema of an MCAP channel (`None`: no schema, no message encoding).
pub(crate) fn shmbus_schema(ch: &mcap::Channel<'_>) -> Result<Option<Schema>, RecordError> {
    let bad = |source| RecordError::Schema { topic: ch.topic.clone(), source };
    match (&ch.schema, ch.message_encoding.as_str()) {
        (None, "") => Ok(None),
        (None, me) => Schema::new(me, "", "", Vec::new()).map(Some).map_err(bad),
        (Some(s), me) => Schema::new(me, s.name.clone(), s.encoding.clone(), s.data.to_vec()).map(Some).map_err(bad),
    }
}

impl Iterator for McapMessages {
    type Item = Result<McapMessage, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = match self.reader.next()? {
            Ok(m) => self.convert(m),
            Err(e) => Err(RecordError::Mcap(e)),
        };
        self.done = next.is_err();
        Some(next)
    }
}
