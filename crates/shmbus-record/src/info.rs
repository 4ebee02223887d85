//! What a recording holds ([`read_info`]) and journal → MCAP conversion ([`export_journal`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use mcap::records::Record;
use std::sync::Arc;

use shmbus::journal::{EntryCipher, Journal};

use crate::journal::JournalMessages;
use crate::mcap_file::{McapOptions, McapWriter};
use crate::RecordError;

/// The kind of a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordingFormat {
    /// An MCAP file.
    Mcap,
    /// A shmbus journal directory of record entries.
    Journal,
}

/// One topic (MCAP channel) of a recording.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// Message encoding (empty: unknown).
    pub message_encoding: String,
    /// Schema name (empty: no schema).
    pub schema_name: String,
    /// Schema encoding (empty: no schema data).
    pub schema_encoding: String,
    /// Its messages.
    pub messages: u64,
}

/// What [`read_info`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingInfo {
    /// MCAP file or journal.
    pub format: RecordingFormat,
    /// Topics by name (a name shared by several MCAP channels is listed once per channel).
    pub topics: Vec<TopicInfo>,
    /// All messages.
    pub messages: u64,
    /// Log time of the earliest message, Unix-epoch ns (`None`: no messages).
    pub start_ns: Option<u64>,
    /// Log time of the latest message, Unix-epoch ns.
    pub end_ns: Option<u64>,
    /// `end − start` (0 without messages).
    pub duration_ns: u64,
    /// Bytes on disk.
    pub size_bytes: u64,
    /// The counts come from an MCAP summary (true) or from reading every message (false).
    pub from_summary: bool,
    /// False when the file ends early (its writer was killed): the counts are of what is
    /// readable.
    pub complete: bool,
}

/// Topics, schemas, message counts and time span of the recording at `path`: an MCAP file
/// (from its summary when it has statistics, else by reading it through) or a recording
/// journal directory (message entries with or without topic entries; entries without
/// record framing count as one topic named after the directory).
pub fn read_info(path: impl AsRef<Path>) -> Result<RecordingInfo, RecordError> {
    let path = path.as_ref();
    let io = |e| RecordError::Io { path: path.to_path_buf(), source: e };
    if path.is_dir() {
        return journal_info(path);
    }
    let mut f = File::open(path).map_err(io)?;
    let size = f.metadata().map_err(io)?.len();
    let mut magic = [0u8; 8];
    if size < 8 || f.read_exact(&mut magic).is_err() || magic != mcap::MAGIC {
        return Err(RecordError::UnknownFormat(path.to_path_buf()));
    }
    if let Some(info) = summary_info(&mut f, size).map_err(io)? {
        return Ok(info);
    }
    scan_info(path, size)
}

/// Bytes of the footer record: opcode, length, two offsets and a CRC.
const FOOTER: u64 = 1 + 8 + 8 + 8 + 4;

/// The info of an MCAP file from its summary section, if it has one with statistics.
fn summary_info(f: &mut File, size: u64) -> std::io::Result<Option<RecordingInfo>> {
    let magic_len = mcap::MAGIC.len() as u64;
    if size < 2 * magic_len + FOOTER {
        return Ok(None);
    }
    let mut tail = [0u8; (FOOTER + 8) as usize];
    f.seek(SeekFrom::Start(size - FOOTER - magic_len))?;
    f.read_exact(&mut tail)?;
    if &tail[FOOTER as usize..] != mcap::MAGIC || tail[0] != mcap::records::op::FOOTER {
        return Ok(None);
    }
    let summary_start = u64::from_le_bytes(tail[9..17].try_into().unwrap_or_default());
    let footer_at = size - FOOTER - magic_len;
    // Untrusted offsets: the summary lies between the header and the footer.
    if summary_start == 0 || summary_start < magic_len || summary_start > footer_at {
        return Ok(None);
    }
    let mut summary = vec![0u8; (footer_at - summary_start) as usize];
    f.seek(SeekFrom::Start(summary_start))?;
    f.read_exact(&mut summary)?;
    let (mut schemas, mut channels, mut stats) = (BTreeMap::new(), BTreeMap::new(), None);
    let mut at = 0usize;
    while summary.len() - at >= 9 {
        let op = summary[at];
        let len = u64::from_le_bytes(summary[at + 1..at + 9].try_into().unwrap_or_default());
        let body_at = at + 9;
        let Some(end) = usize::try_from(len).ok().and_then(|l| body_at.checked_add(l)).filter(|e| *e <= summary.len())
        else {
            return Ok(None);
        };
        match mcap::parse_record(op, &summary[body_at..end]) {
            Ok(Record::Schema { header, .. }) => {
                schemas.insert(header.id, (header.name, header.encoding));
            }
            Ok(Record::Channel(c)) => {
                channels.insert(c.id, c);
            }
            Ok(Record::Statistics(s)) => stats = Some(s),
            Ok(_) => {}
            Err(_) => return Ok(None),
        }
        at = end;
    }
    let Some(stats) = stats else { return Ok(None) };
    let topics = channels
        .values()
        .map(|c| {
            let (schema_name, schema_encoding) = schemas.get(&c.schema_id).cloned().unwrap_or_default();
            TopicInfo {
                name: c.topic.clone(),
                message_encoding: c.message_encoding.clone(),
                schema_name,
                schema_encoding,
                messages: stats.channel_message_counts.get(&c.id).copied().unwrap_or(0),
            }
        })
        .collect();
    let any = stats.message_count > 0;
    Ok(Some(RecordingInfo {
        format: RecordingFormat::Mcap,
        topics,
        messages: stats.message_count,
        start_ns: any.then_some(stats.message_start_time),
        end_ns: any.then_some(stats.message_end_time),
        duration_ns: stats.message_end_time.saturating_sub(stats.message_start_time),
        size_bytes: size,
        from_summary: true,
        complete: true,
    }))
}

/// Counts and times, by message.
#[derive(Default)]
struct Tally {
    messages: u64,
    start: Option<u64>,
    end: Option<u64>,
}

impl Tally {
    fn add(&mut self, log_ns: u64) {
        self.messages += 1;
        self.start = Some(self.start.map_or(log_ns, |s| s.min(log_ns)));
        self.end = Some(self.end.map_or(log_ns, |e| e.max(log_ns)));
    }

    fn info(self, format: RecordingFormat, topics: Vec<TopicInfo>, size: u64, complete: bool) -> RecordingInfo {
        RecordingInfo {
            format,
            topics,
            messages: self.messages,
            start_ns: self.start,
            end_ns: self.end,
            duration_ns: self.end.unwrap_or(0).saturating_sub(self.start.unwrap_or(0)),
            size_bytes: size,
            from_summary: false,
            complete,
        }
    }
}

/// The info of an MCAP file by reading every message (no summary, or a cut-off file).
fn scan_info(path: &Path, size: u64) -> Result<RecordingInfo, RecordError> {
    let f = File::open(path).map_err(|e| RecordError::Io { path: path.to_path_buf(), source: e })?;
    let mut tally = Tally::default();
    let mut topics: BTreeMap<u16, TopicInfo> = BTreeMap::new();
    let mut complete = true;
    for m in mcap::io::MessageReader::new(BufReader::new(f)) {
        let Ok(m) = m else {
            complete = false;
            break;
        };
        tally.add(m.log_time);
        let ch = &m.channel;
        let t = topics.entry(ch.id).or_insert_with(|| TopicInfo {
            name: ch.topic.clone(),
            message_encoding: ch.message_encoding.clone(),
            schema_name: ch.schema.as_ref().map(|s| s.name.clone()).unwrap_or_default(),
            schema_encoding: ch.schema.as_ref().map(|s| s.encoding.clone()).unwrap_or_default(),
            messages: 0,
        });
        t.messages += 1;
    }
    Ok(tally.info(RecordingFormat::Mcap, topics.into_values().collect(), size, complete))
}

/// The name of the channel that entries without record framing go to: the directory's.
fn plain_name(dir: &Path) -> String {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "journal".to_owned())
}

fn journal_info(dir: &Path) -> Result<RecordingInfo, RecordError> {
    let status = Journal::status(dir).map_err(|e| RecordError::JournalOpen { dir: dir.to_path_buf(), source: e })?;
    let plain = plain_name(dir);
    let mut msgs = JournalMessages::open(dir)?.plain_as(plain.clone());
    let mut tally = Tally::default();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut complete = true;
    for m in msgs.by_ref() {
        let Ok(m) = m else {
            complete = false;
            break;
        };
        tally.add(m.log_ns);
        *counts.entry(m.topic).or_default() += 1;
    }
    let topics = msgs
        .topics()
        .iter()
        .map(|(name, t)| {
            let schema = match (&t.schema, name == &plain) {
                (Some(s), _) => Some(s.clone()),
                (None, true) => status.schema.as_deref().cloned(),
                (None, false) => None,
            };
            TopicInfo {
                name: name.clone(),
                message_encoding: schema.as_ref().map(|s| s.message_encoding().to_owned()).unwrap_or_default(),
                schema_name: schema.as_ref().map(|s| s.name().to_owned()).unwrap_or_default(),
                schema_encoding: schema.as_ref().map(|s| s.encoding().to_owned()).unwrap_or_default(),
                messages: counts.get(name).copied().unwrap_or(0),
            }
        })
        .collect();
    Ok(tally.info(RecordingFormat::Journal, topics, status.bytes, complete && msgs.skipped() == 0))
}

/// What [`export_journal`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExportReport {
    /// Messages written.
    pub messages: u64,
    /// Channels written (one per topic).
    pub topics: u64,
    /// Journal entries passed over (retention gaps, damage, encryption).
    pub skipped: u64,
}

/// How far a converted publish time may lie before its log time before the offset is
/// taken again (a journal holding recordings from before a reboot).
const RESAMPLE_NS: u64 = 10_000_000_000;

/// Converts the journal in `journal_dir` to an MCAP file at `out`.
///
/// Record entries become messages of their topic's channel, with the schema of the topic's
/// topic entry (none for a recording without topic entries). Entries without record
/// framing (any other journal) become messages of one channel named after the directory,
/// with the journal's own schema or none (empty message encoding), sequence = entry index.
///
/// Times: `log_time` is the entry's timestamp (CLOCK_REALTIME when recorded). A recorded
/// publish time is CLOCK_MONOTONIC of the recording machine, whose offset to the wall clock
/// then is unknown now: it is estimated per topic as log − publish of the topic's first
/// message, and taken again from a later message whose converted publish time would lie
/// after its log time or more than 10 s before it (a journal holding several recording
/// sessions, maybe across reboots).
pub fn export_journal(
    journal_dir: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: McapOptions,
) -> Result<ExportReport, RecordError> {
    export_journal_with(journal_dir, None, out, options)
}

/// [`export_journal`] of an encrypted journal: its entries decrypted with `cipher`.
pub fn export_journal_with(
    journal_dir: impl AsRef<Path>,
    cipher: Option<Arc<dyn EntryCipher>>,
    out: impl AsRef<Path>,
    options: McapOptions,
) -> Result<ExportReport, RecordError> {
    let dir = journal_dir.as_ref();
    let status = Journal::status(dir).map_err(|e| RecordError::JournalOpen { dir: dir.to_path_buf(), source: e })?;
    let plain = plain_name(dir);
    let mut msgs = JournalMessages::open(dir)?.plain_as(plain.clone()).with_cipher(cipher);
    let mut w = McapWriter::create_with(out.as_ref(), options)?;
    let mut offsets: BTreeMap<String, u64> = BTreeMap::new();
    let mut report = ExportReport::default();
    while let Some(m) = msgs.next() {
        let m = m?;
        if !offsets.contains_key(&m.topic) {
            let schema = match msgs.schema(&m.topic) {
                Some(s) => Some(s.clone()),
                None if m.topic == plain => status.schema.as_deref().cloned(),
                None => None,
            };
            w.add_topic(&m.topic, schema.as_ref())?;
            report.topics += 1;
            offsets.insert(m.topic.clone(), m.log_ns.saturating_sub(m.publish_ns));
        }
        let publish = if m.topic == plain && m.publish_ns == m.log_ns {
            m.publish_ns
        } else {
            let off = offsets.get_mut(&m.topic).expect("inserted above");
            let mut p = m.publish_ns.saturating_add(*off);
            if p > m.log_ns || m.log_ns - p > RESAMPLE_NS {
                *off = m.log_ns.saturating_sub(m.publish_ns);
                p = m.publish_ns.saturating_add(*off);
            }
            p
        };
        w.write_epoch(&m.topic, m.seq, publish, m.log_ns, &m.payload)?;
        report.messages += 1;
    }
    report.skipped = msgs.skipped();
    w.finish()?;
    Ok(report)
}
