//! The record entry format: recorded topic messages as entries of a shmbus journal.
//!
//! A recording journal holds two kinds of entries, each starting with the magic `SBRC` and a
//! format version. All integers are little-endian.
//!
//! # Message entry (version 1)
//!
//! One recorded message: a 32-byte header, the topic name, then the payload unchanged.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0  | 4 | magic `SBRC` |
//! | 4  | 2 | format version, 1 |
//! | 6  | 2 | topic name length `n` (1..=64) |
//! | 8  | 8 | sequence number of the message in its topic |
//! | 16 | 8 | publish timestamp of the message (CLOCK_MONOTONIC ns, from the topic) |
//! | 24 | 4 | slot size of the source topic (bytes) |
//! | 28 | 4 | history of the source topic (messages) |
//! | 32 | n | topic name (UTF-8) |
//! | 32+n | … | payload |
//!
//! # Topic entry (version 2)
//!
//! Written once per topic before its first message: the topic's shape and its schema. A
//! recording without topic entries (written before they existed) is still a recording; its
//! topics have no schema.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0  | 4 | magic `SBRC` |
//! | 4  | 2 | format version, 2 |
//! | 6  | 2 | topic name length `n` (1..=64) |
//! | 8  | 4 | entry kind, 1 = topic |
//! | 12 | 4 | flags: bit 0 set when a schema follows |
//! | 16 | 4 | slot size of the topic (bytes) |
//! | 20 | 4 | history of the topic (messages) |
//! | 24 | 8 | 0 (reserved) |
//! | 32 | n | topic name (UTF-8) |
//! | 32+n | 16 | schema: lengths of message encoding, schema name, schema encoding (u32 each), data (u32) |
//! | 48+n | … | message encoding, schema name, schema encoding, data |
//!
//! The journal's own entry timestamp (CLOCK_REALTIME at append) is when the message was
//! recorded: [`RecordedMessage::log_ns`].

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use shmbus::journal::{Appender, EntryCipher, Journal, JournalSendError, JournalTryRecvError, Tailer};
use shmbus::Schema;

use crate::RecordError;

/// Magic of a record entry.
pub const MAGIC: &[u8; 4] = b"SBRC";
/// Version of a message entry.
pub const MESSAGE_VERSION: u16 = 1;
/// Version of a topic entry.
pub const TOPIC_VERSION: u16 = 2;
/// Bytes before the topic name (both kinds).
pub const HEADER: usize = 32;
/// Longest topic name a record entry holds.
pub const MAX_TOPIC_LEN: usize = 64;
/// Entry kind of a topic entry.
const KIND_TOPIC: u32 = 1;
/// Flag of a topic entry: a schema follows the name.
const FLAG_SCHEMA: u32 = 1;

/// Why bytes are not a record entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryError {
    /// No `SBRC` header: not written by a recorder.
    NotARecordEntry,
    /// A format version (or entry kind) this library does not read.
    UnknownVersion {
        /// The version.
        version: u16,
    },
    /// A topic name length outside 1..=64 or past the entry's end.
    BadTopicLength {
        /// The length read.
        len: usize,
    },
    /// The topic name is not UTF-8.
    TopicNotUtf8,
    /// The schema of a topic entry is cut short or invalid.
    BadSchema {
        /// What is wrong.
        what: String,
    },
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryError::NotARecordEntry => f.write_str("not a record entry (no SBRC header)"),
            EntryError::UnknownVersion { version } => {
                write!(f, "record entry format version {version}; this library reads versions 1 and 2")
            }
            EntryError::BadTopicLength { len } => write!(f, "record entry with a bad topic name length {len}"),
            EntryError::TopicNotUtf8 => f.write_str("record entry topic name is not UTF-8"),
            EntryError::BadSchema { what } => write!(f, "record topic entry with a bad schema: {what}"),
        }
    }
}

impl std::error::Error for EntryError {}

/// One recorded message, as stored in a message entry (version 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded<'a> {
    /// Source topic name.
    pub topic: &'a str,
    /// Its sequence number there.
    pub seq: u64,
    /// Its publish timestamp (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// Slot size of the source topic.
    pub slot_size: u32,
    /// History of the source topic.
    pub history: u32,
    /// The payload.
    pub payload: &'a [u8],
}

/// A topic's shape and schema, as stored in a topic entry (version 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicEntry<'a> {
    /// Topic name.
    pub topic: &'a str,
    /// Slot size of the topic.
    pub slot_size: u32,
    /// History of the topic.
    pub history: u32,
    /// Its schema, if it has one.
    pub schema: Option<Schema>,
}

/// A decoded record entry of either kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry<'a> {
    /// A recorded message.
    Message(Recorded<'a>),
    /// A topic's shape and schema.
    Topic(TopicEntry<'a>),
}

/// Checks the common header; returns the version and the topic name.
fn header(b: &[u8]) -> Result<(u16, &str), EntryError> {
    if b.len() < HEADER || &b[..4] != MAGIC {
        return Err(EntryError::NotARecordEntry);
    }
    let version = u16_at(b, 4);
    if version != MESSAGE_VERSION && version != TOPIC_VERSION {
        return Err(EntryError::UnknownVersion { version });
    }
    let n = u16_at(b, 6) as usize;
    if n == 0 || n > MAX_TOPIC_LEN || b.len() < HEADER + n {
        return Err(EntryError::BadTopicLength { len: n });
    }
    let topic = std::str::from_utf8(&b[HEADER..HEADER + n]).map_err(|_| EntryError::TopicNotUtf8)?;
    Ok((version, topic))
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(x)
}

fn check_topic(topic: &str) {
    assert!(
        !topic.is_empty() && topic.len() <= MAX_TOPIC_LEN,
        "a recorded topic name is 1..={MAX_TOPIC_LEN} bytes (shmbus names are)"
    );
}

impl<'a> Recorded<'a> {
    /// Writes the encoded entry to `out` (which is cleared first).
    ///
    /// # Panics
    /// When the topic name is empty or longer than [`MAX_TOPIC_LEN`] (no shmbus name is).
    pub fn encode(&self, out: &mut Vec<u8>) {
        check_topic(self.topic);
        out.clear();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&MESSAGE_VERSION.to_le_bytes());
        out.extend_from_slice(&(self.topic.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.ts_ns.to_le_bytes());
        out.extend_from_slice(&self.slot_size.to_le_bytes());
        out.extend_from_slice(&self.history.to_le_bytes());
        out.extend_from_slice(self.topic.as_bytes());
        out.extend_from_slice(self.payload);
    }

    /// Parses a message entry.
    pub fn decode(b: &'a [u8]) -> Result<Recorded<'a>, EntryError> {
        match Entry::decode(b)? {
            Entry::Message(m) => Ok(m),
            Entry::Topic(_) => Err(EntryError::UnknownVersion { version: TOPIC_VERSION }),
        }
    }
}

impl<'a> TopicEntry<'a> {
    /// Writes the encoded entry to `out` (which is cleared first).
    ///
    /// # Panics
    /// When the topic name is empty or longer than [`MAX_TOPIC_LEN`] (no shmbus name is).
    pub fn encode(&self, out: &mut Vec<u8>) {
        check_topic(self.topic);
        out.clear();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&TOPIC_VERSION.to_le_bytes());
        out.extend_from_slice(&(self.topic.len() as u16).to_le_bytes());
        out.extend_from_slice(&KIND_TOPIC.to_le_bytes());
        let flags = if self.schema.is_some() { FLAG_SCHEMA } else { 0 };
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&self.slot_size.to_le_bytes());
        out.extend_from_slice(&self.history.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(self.topic.as_bytes());
        if let Some(s) = &self.schema {
            // Schema texts are at most Schema::MAX_TEXT bytes and data Schema::MAX_DATA: all
            // fit a u32.
            for len in [s.message_encoding().len(), s.name().len(), s.encoding().len(), s.data().len()] {
                out.extend_from_slice(&(len as u32).to_le_bytes());
            }
            out.extend_from_slice(s.message_encoding().as_bytes());
            out.extend_from_slice(s.name().as_bytes());
            out.extend_from_slice(s.encoding().as_bytes());
            out.extend_from_slice(s.data());
        }
    }
}

impl<'a> Entry<'a> {
    /// Parses a record entry of either kind; the bytes are untrusted (any journal entry).
    pub fn decode(b: &'a [u8]) -> Result<Entry<'a>, EntryError> {
        let (version, topic) = header(b)?;
        let rest = &b[HEADER + topic.len()..];
        if version == MESSAGE_VERSION {
            return Ok(Entry::Message(Recorded {
                topic,
                seq: u64_at(b, 8),
                ts_ns: u64_at(b, 16),
                slot_size: u32_at(b, 24),
                history: u32_at(b, 28),
                payload: rest,
            }));
        }
        if u32_at(b, 8) != KIND_TOPIC {
            return Err(EntryError::UnknownVersion { version });
        }
        let schema = if u32_at(b, 12) & FLAG_SCHEMA != 0 { Some(decode_schema(rest)?) } else { None };
        Ok(Entry::Topic(TopicEntry { topic, slot_size: u32_at(b, 16), history: u32_at(b, 20), schema }))
    }
}

/// The schema part of a topic entry: four u32 lengths, then the four fields.
fn decode_schema(b: &[u8]) -> Result<Schema, EntryError> {
    let bad = |what: &str| EntryError::BadSchema { what: what.to_owned() };
    if b.len() < 16 {
        return Err(bad("cut short before its lengths"));
    }
    let lens = [u32_at(b, 0), u32_at(b, 4), u32_at(b, 8), u32_at(b, 12)].map(|l| l as usize);
    // Checked sums: the lengths are untrusted.
    let total = lens.iter().try_fold(16usize, |acc, l| acc.checked_add(*l)).ok_or_else(|| bad("lengths overflow"))?;
    if total != b.len() {
        return Err(bad(&format!("its lengths add up to {total} bytes, the entry holds {}", b.len())));
    }
    let mut at = 16;
    let mut field = |len: usize| {
        let f = &b[at..at + len];
        at += len;
        f
    };
    let text = |f: &[u8]| std::str::from_utf8(f).map(str::to_owned).map_err(|_| bad("a text field is not UTF-8"));
    let (me, name, enc) = (text(field(lens[0]))?, text(field(lens[1]))?, text(field(lens[2]))?);
    let data = field(lens[3]).to_vec();
    Schema::new(me, name, enc, data).map_err(|e| EntryError::BadSchema { what: e.to_string() })
}

/// One recorded message, owned (what [`JournalMessages`] yields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedMessage {
    /// Source topic name.
    pub topic: String,
    /// Its sequence number in the topic.
    pub seq: u64,
    /// Its publish timestamp: CLOCK_MONOTONIC ns for a recorded message; for a journal entry
    /// without record framing (see [`JournalMessages::plain_as`]) the entry's timestamp.
    pub publish_ns: u64,
    /// When it was recorded: the journal entry's timestamp, CLOCK_REALTIME (Unix epoch) ns.
    pub log_ns: u64,
    /// The payload.
    pub payload: Vec<u8>,
}

/// What a recording says about one of its topics.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordedTopic {
    /// Slot size of the source topic (0 when unknown).
    pub slot_size: u32,
    /// History of the source topic (0 when unknown).
    pub history: u32,
    /// Its schema, when a topic entry gave one.
    pub schema: Option<Schema>,
}

/// The messages of a recording journal, in journal order (an iterator of
/// `Result<RecordedMessage, RecordError>`), and its topics as they are met.
///
/// Entries the journal itself skips (removed by retention, damaged, encrypted: this reader
/// has no cipher, see [`with_cipher`](Self::with_cipher)) are counted in
/// [`skipped`](Self::skipped) and passed over. An entry that
/// is not a record entry is an error ([`RecordError::Entry`]), unless [`plain_as`](Self::plain_as)
/// names a topic for such entries. After an error the iterator ends.
pub struct JournalMessages {
    dir: PathBuf,
    tailer: Tailer,
    topics: BTreeMap<String, RecordedTopic>,
    plain: Option<String>,
    skipped: u64,
    done: bool,
}

impl fmt::Debug for JournalMessages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JournalMessages")
            .field("dir", &self.dir)
            .field("topics", &self.topics.keys())
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

impl JournalMessages {
    /// Opens the journal in `dir` to read it from its first entry.
    pub fn open(dir: impl AsRef<Path>) -> Result<JournalMessages, RecordError> {
        let dir = dir.as_ref().to_path_buf();
        let journal = Journal::open(&dir).map_err(|e| RecordError::JournalOpen { dir: dir.clone(), source: e })?;
        let tailer = journal.tailer().map_err(|e| RecordError::JournalOpen { dir: dir.clone(), source: e })?;
        Ok(JournalMessages { dir, tailer, topics: BTreeMap::new(), plain: None, skipped: 0, done: false })
    }

    /// Entries without record framing become messages of topic `name` (sequence = the
    /// entry's index, publish and log time = the entry's timestamp) instead of errors.
    pub fn plain_as(mut self, name: impl Into<String>) -> JournalMessages {
        self.plain = Some(name.into());
        self
    }

    /// Decrypts entries with `cipher` (the recorder's, for an encrypted recording); without
    /// one, encrypted entries are skipped and counted in [`skipped`](Self::skipped).
    pub fn with_cipher(mut self, cipher: Option<Arc<dyn EntryCipher>>) -> JournalMessages {
        self.tailer.set_cipher(cipher);
        self
    }

    /// The topics met so far (all of them once the iterator has ended), by name.
    pub fn topics(&self) -> &BTreeMap<String, RecordedTopic> {
        &self.topics
    }

    /// The schema of `topic`, when the recording gave it one (so far).
    pub fn schema(&self, topic: &str) -> Option<&Schema> {
        self.topics.get(topic).and_then(|t| t.schema.as_ref())
    }

    /// Entries passed over because the journal could not give them (retention gaps,
    /// damage, encryption).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    fn next_message(&mut self) -> Option<Result<RecordedMessage, RecordError>> {
        loop {
            let e = match self.tailer.try_recv_ref() {
                Ok(e) => e,
                Err(JournalTryRecvError::Empty) => return None,
                Err(
                    JournalTryRecvError::Gap { .. }
                    | JournalTryRecvError::Corrupt(_)
                    | JournalTryRecvError::Damaged { .. }
                    | JournalTryRecvError::Encrypted { .. }
                    | JournalTryRecvError::UnknownKey { .. }
                    | JournalTryRecvError::Unauthenticated { .. }
                    | JournalTryRecvError::PositionReset { .. },
                ) => {
                    self.skipped += 1;
                    continue;
                }
                Err(e) => return Some(Err(RecordError::JournalRead { dir: self.dir.clone(), what: e.to_string() })),
            };
            let (index, ts) = (e.index(), e.ts_ns());
            match Entry::decode(e.data()) {
                Ok(Entry::Message(m)) => {
                    let t = self.topics.entry(m.topic.to_owned()).or_default();
                    if t.slot_size == 0 {
                        (t.slot_size, t.history) = (m.slot_size, m.history);
                    }
                    return Some(Ok(RecordedMessage {
                        topic: m.topic.to_owned(),
                        seq: m.seq,
                        publish_ns: m.ts_ns,
                        log_ns: ts,
                        payload: m.payload.to_vec(),
                    }));
                }
                Ok(Entry::Topic(t)) => {
                    let topic = RecordedTopic { slot_size: t.slot_size, history: t.history, schema: t.schema.clone() };
                    self.topics.insert(t.topic.to_owned(), topic);
                }
                Err(EntryError::NotARecordEntry) if self.plain.is_some() => {
                    let name = self.plain.clone().unwrap_or_default();
                    let payload = e.data().to_vec();
                    self.topics.entry(name.clone()).or_default();
                    return Some(Ok(RecordedMessage { topic: name, seq: index, publish_ns: ts, log_ns: ts, payload }));
                }
                Err(what) => return Some(Err(RecordError::Entry { dir: self.dir.clone(), index, what })),
            }
        }
    }
}

impl Iterator for JournalMessages {
    type Item = Result<RecordedMessage, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_message();
        if !matches!(next, Some(Ok(_))) {
            self.done = true;
        }
        next
    }
}

/// Appends a recording to a journal: a topic entry for each topic, then its messages.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use shmbus::journal::{Journal, JournalConfig};
/// use shmbus_record::journal::JournalRecorder;
///
/// let j = Journal::create_or_open("rec", &JournalConfig::default())?;
/// let mut rec = JournalRecorder::new(j.appender()?);
/// rec.add_topic("imu", 256, 8, None)?;
/// rec.write("imu", 1, shmbus::time::monotonic_ns(), b"payload")?;
/// # Ok(()) }
/// ```
pub struct JournalRecorder {
    appender: Appender,
    /// Slot size and history of each added topic.
    topics: HashMap<String, (u32, u32)>,
    buf: Vec<u8>,
}

impl fmt::Debug for JournalRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JournalRecorder").field("topics", &self.topics).finish_non_exhaustive()
    }
}

impl JournalRecorder {
    /// Records through `appender` (with its cipher and compression settings).
    pub fn new(appender: Appender) -> JournalRecorder {
        JournalRecorder { appender, topics: HashMap::new(), buf: Vec::new() }
    }

    /// Appends the topic entry of `topic` (its slot size, history and schema), unless the
    /// topic was added before. Returns whether it appended.
    ///
    /// # Panics
    /// When the topic name is empty or longer than [`MAX_TOPIC_LEN`] (no shmbus name is).
    pub fn add_topic(
        &mut self,
        topic: &str,
        slot_size: u32,
        history: u32,
        schema: Option<&Schema>,
    ) -> Result<bool, JournalSendError> {
        if self.topics.contains_key(topic) {
            return Ok(false);
        }
        TopicEntry { topic, slot_size, history, schema: schema.cloned() }.encode(&mut self.buf);
        self.appender.send(&self.buf)?;
        self.topics.insert(topic.to_owned(), (slot_size, history));
        Ok(true)
    }

    /// Appends one message of `topic` (added before): its sequence number, publish
    /// timestamp (CLOCK_MONOTONIC ns) and payload. Returns the entry's index.
    pub fn write(&mut self, topic: &str, seq: u64, publish_ns: u64, payload: &[u8]) -> Result<u64, RecordError> {
        let &(slot_size, history) =
            self.topics.get(topic).ok_or_else(|| RecordError::UnknownTopic(topic.to_owned()))?;
        Recorded { topic, seq, ts_ns: publish_ns, slot_size, history, payload }.encode(&mut self.buf);
        self.appender.send(&self.buf).map_err(RecordError::JournalWrite)
    }

    /// The appender (to change its cipher or compression).
    pub fn appender_mut(&mut self) -> &mut Appender {
        &mut self.appender
    }
}
