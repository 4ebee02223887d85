//! Output helpers: aligned text tables, JSON.

use std::io::{self, Write};

use serde::Serialize;

/// How a column is aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A plain text table: a header row, then rows, columns padded to their widest cell.
#[derive(Debug)]
pub struct Table {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(columns: &[(&'static str, Align)]) -> Table {
        Table { columns: columns.to_vec(), rows: Vec::new() }
    }

    /// Adds a row (missing cells are blank).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Writes the table; the last column is never padded.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let n = self.columns.len();
        let mut widths: Vec<usize> = self.columns.iter().map(|(t, _)| t.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let titles: Vec<String> = self.columns.iter().map(|(t, _)| t.to_string()).collect();
        for row in std::iter::once(&titles).chain(&self.rows) {
            let mut line = String::new();
            for (i, (&width, &(_, align))) in widths.iter().zip(&self.columns).enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
                if i > 0 {
                    line.push_str("  ");
                }
                match align {
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                    Align::Left => {
                        line.push_str(cell);
                        if i + 1 < n {
                            line.push_str(&pad);
                        }
                    }
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// Prints `v` as one pretty JSON object (or array) on stdout: the `--json` output of the
/// verbs that print one result. Keys come in the order the type declares its fields.
pub fn print_json(v: &impl Serialize) -> io::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)
}

/// Writes JSON lines (one compact object per line) through one buffer reused for every
/// line: the `--json` output of the verbs that stream (a message, an entry, a sample per
/// line).
#[derive(Debug, Default)]
pub struct JsonLines {
    buf: Vec<u8>,
}

impl JsonLines {
    /// A writer with an empty buffer.
    pub fn new() -> JsonLines {
        JsonLines::default()
    }

    /// Writes `v` and a newline to `out` in one `write_all`.
    pub fn write(&mut self, out: &mut impl Write, v: &impl Serialize) -> io::Result<()> {
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, v)?;
        self.buf.push(b'\n');
        out.write_all(&self.buf)
    }
}

/// One message, entry or job as a JSON line: the keys of `head` (what identifies it), then
/// `len` and the payload as `data` when it is UTF-8, else as `data_base64` in its place
/// (never lossy, never both). The one line shape of `sub`, `journal dump|tail` and `pool
/// worker`; it borrows the payload, so writing it allocates nothing but the base64 text.
#[derive(Debug, Serialize)]
pub struct MessageLine<'a, H> {
    /// What identifies the message: [`Received`], [`EntryHead`] or [`JobHead`].
    #[serde(flatten)]
    pub head: H,
    /// Payload bytes.
    pub len: usize,
    /// The payload, when it is valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<&'a str>,
    /// The payload in standard base64, when it is not valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_base64: Option<Base64<'a>>,
}

impl<'a, H> MessageLine<'a, H> {
    /// The line of payload `data` identified by `head`.
    pub fn new(head: H, data: &'a [u8]) -> MessageLine<'a, H> {
        let (data_text, data_base64) = match std::str::from_utf8(data) {
            Ok(text) => (Some(text), None),
            Err(_) => (None, Some(Base64(data))),
        };
        MessageLine { head, len: data.len(), data: data_text, data_base64 }
    }
}

/// Bytes serialized as a standard base64 string (written straight into the output).
#[derive(Debug)]
pub struct Base64<'a>(pub &'a [u8]);

impl Serialize for Base64<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&base64::display::Base64Display::new(self.0, &base64::engine::general_purpose::STANDARD))
    }
}

/// The head of a received message (`sub` of a topic, stream or queue): `seq` (a topic's
/// sequence number; on a stream or queue the ordinal in this run) and `ts_mono_ns`
/// (CLOCK_MONOTONIC).
#[derive(Debug, Serialize)]
pub struct Received {
    /// Sequence number.
    pub seq: u64,
    /// CLOCK_MONOTONIC at publish (topic) or receive (stream, queue).
    pub ts_mono_ns: u64,
}

impl Received {
    /// The head of message `seq` stamped `ts_mono_ns`.
    pub fn new(seq: u64, ts_mono_ns: u64) -> Received {
        Received { seq, ts_mono_ns }
    }
}

/// The head of a journal entry (`journal dump|tail`): `index` and `ts_real_ns`
/// (CLOCK_REALTIME at append).
#[derive(Debug, Serialize)]
pub struct EntryHead {
    /// The entry's index.
    pub index: u64,
    /// CLOCK_REALTIME at append.
    pub ts_real_ns: u64,
}

impl EntryHead {
    /// The head of entry `index` stamped `ts_real_ns`.
    pub fn new(index: u64, ts_real_ns: u64) -> EntryHead {
        EntryHead { index, ts_real_ns }
    }
}

/// The head of a pool job (`pool worker`): its id and the index of the worker that took it.
#[derive(Debug, Serialize)]
pub struct JobHead {
    /// The job's id (from 1, per dispatcher).
    pub job_id: u64,
    /// The worker's index in the pool.
    pub worker: u64,
}

/// An optional number as a table cell (`-` when absent).
pub fn cell<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(v: &impl Serialize) -> String {
        let mut out = Vec::new();
        JsonLines::new().write(&mut out, v).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn message_lines_have_exactly_five_keys() {
        let text = line(&MessageLine::new(Received::new(3, 42), b"a\"b"));
        assert_eq!(text, "{\"seq\":3,\"ts_mono_ns\":42,\"len\":3,\"data\":\"a\\\"b\"}\n");
        // Not UTF-8: base64 under another key, never a lossy string.
        let text = line(&MessageLine::new(Received::new(3, 42), b"a\"b\xff"));
        assert_eq!(text, "{\"seq\":3,\"ts_mono_ns\":42,\"len\":4,\"data_base64\":\"YSJi/w==\"}\n");
        let text = line(&MessageLine::new(JobHead { job_id: 1, worker: 0 }, b""));
        assert_eq!(text, "{\"job_id\":1,\"worker\":0,\"len\":0,\"data\":\"\"}\n");
    }

    #[test]
    fn table_aligns() {
        let mut t = Table::new(&[("NAME", Align::Left), ("N", Align::Right), ("NOTE", Align::Left)]);
        t.row(vec!["imu".into(), "1000".into(), "ok".into()]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "NAME     N  NOTE\nimu   1000  ok\n");
    }
}
