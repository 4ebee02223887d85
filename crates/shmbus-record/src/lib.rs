//! shmbus recordings: topic messages kept with their schemas, in a shmbus journal or in an
//! [MCAP](https://mcap.dev) file.
//!
//! - [`journal`]: the record entry format, one recorded message per journal entry plus one
//!   topic entry (its schema) per topic; [`JournalRecorder`] to write a recording journal,
//!   [`JournalMessages`] to read one.
//! - [`McapWriter`]: one MCAP channel per topic with its schema, chunked and compressed
//!   (zstd by default), the summary section written by [`McapWriter::finish`]. A writer
//!   killed mid-recording leaves a file readable up to its last whole chunk.
//! - [`McapMessages`]: the messages of an MCAP file in file order.
//! - [`read_info`]: topics, schemas, counts and time span of an MCAP file or a recording
//!   journal.
//! - [`export_journal`]: a recording journal (or any journal) to an MCAP file.
//!
//! How shmbus maps onto MCAP (topic → channel, schema → schema, sequence numbers, clocks)
//! is in `docs/recording.md`; in short: publish timestamps are CLOCK_MONOTONIC in shmbus and
//! Unix epoch in MCAP, converted with one offset sampled when a writer starts, and the MCAP
//! sequence is the shmbus sequence number modulo 2³².
//!
//! ```no_run
//! use shmbus_record::{McapMessages, McapWriter};
//!
//! let imu = shmbus::Schema::new("json", "demo.Imu", "", Vec::new())?;
//! let mut w = McapWriter::create("run.mcap")?;
//! w.add_topic("imu", Some(&imu))?;
//! w.write("imu", 1, shmbus::time::monotonic_ns(), shmbus::time::monotonic_ns(), br#"{"x":1}"#)?;
//! w.finish()?;
//! for m in McapMessages::open("run.mcap")? {
//!     let m = m?;
//!     println!("{} #{}: {} bytes", m.topic, m.sequence, m.payload.len());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::io;
use std::path::PathBuf;

mod info;
pub mod journal;
mod mcap_file;

pub use info::{
    export_journal, export_journal_with, read_info, ExportReport, RecordingFormat, RecordingInfo, TopicInfo,
};
pub use journal::{JournalMessages, JournalRecorder, RecordedMessage, RecordedTopic};
pub use mcap_file::{Compression, McapMessage, McapMessages, McapOptions, McapWriter};

/// What failed in reading or writing a recording.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecordError {
    /// A file operation failed.
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
    /// The MCAP library failed to write, or found the file malformed while reading (a file
    /// whose writer was killed ends so, after its last whole chunk).
    Mcap(mcap::McapError),
    /// The journal could not be opened.
    JournalOpen {
        /// Its directory.
        dir: PathBuf,
        /// Why.
        source: shmbus::OpenError,
    },
    /// The journal could not be read further.
    JournalRead {
        /// Its directory.
        dir: PathBuf,
        /// Why.
        what: String,
    },
    /// Appending to the journal failed.
    JournalWrite(shmbus::journal::JournalSendError),
    /// A journal entry is not a record entry this library reads.
    Entry {
        /// The journal directory.
        dir: PathBuf,
        /// The entry's index.
        index: u64,
        /// What is wrong with it.
        what: journal::EntryError,
    },
    /// A message was written for a topic that [`McapWriter::add_topic`] was not given.
    UnknownTopic(String),
    /// [`McapWriter::add_topic`] was given a topic again with another schema.
    TopicSchemaChanged(String),
    /// An MCAP file holds a schema shmbus cannot carry (see [`shmbus::SchemaError`]).
    Schema {
        /// The topic of the channel.
        topic: String,
        /// Why.
        source: shmbus::SchemaError,
    },
    /// The path is neither an MCAP file nor a journal directory.
    UnknownFormat(PathBuf),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            RecordError::Mcap(e) => write!(f, "MCAP: {e}"),
            RecordError::JournalOpen { dir, source } => {
                write!(f, "{}: {}", dir.display(), shmbus::journal::open_error_message(source))
            }
            RecordError::JournalRead { dir, what } => write!(f, "reading {}: {what}", dir.display()),
            RecordError::JournalWrite(e) => write!(f, "recording to the journal: {e}"),
            RecordError::Entry { dir, index, what } => write!(f, "{} entry {index}: {what}", dir.display()),
            RecordError::UnknownTopic(t) => write!(f, "topic {t} was not added to the recording (add_topic)"),
            RecordError::TopicSchemaChanged(t) => {
                write!(f, "topic {t} was already added to the recording with another schema")
            }
            RecordError::Schema { topic, source } => write!(f, "the schema of {topic}: {source}"),
            RecordError::UnknownFormat(p) => {
                write!(f, "{}: neither an MCAP file nor a shmbus journal directory", p.display())
            }
        }
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecordError::Io { source, .. } => Some(source),
            RecordError::Mcap(e) => Some(e),
            RecordError::JournalOpen { source, .. } => Some(source),
            RecordError::Entry { what, .. } => Some(what),
            RecordError::JournalWrite(e) => Some(e),
            RecordError::Schema { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<mcap::McapError> for RecordError {
    fn from(e: mcap::McapError) -> Self {
        RecordError::Mcap(e)
    }
}
