//! Output helpers: aligned text tables, JSON.

use std::io::{self, Write};

use serde_json::Value;

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

/// Prints `v` as pretty JSON on stdout.
pub fn print_json(v: &Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)
}

/// An optional number as a table cell (`-` when absent).
pub fn cell<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// One received message as a JSON line with exactly `seq`, `ts_ns`, `ts_mono_ns`, `len` and
/// `data` (or `data_base64` when the payload is not UTF-8), in that order. `ts_mono_ns` is
/// CLOCK_MONOTONIC and names its clock; `ts_ns` is the same number under its old name, kept
/// for one release.
pub fn message_json(seq: u64, ts_mono_ns: u64, data: &[u8]) -> String {
    message_json_with(&[("seq", seq), ("ts_ns", ts_mono_ns), ("ts_mono_ns", ts_mono_ns)], data)
}

/// One received message as a JSON line: the numbers `fields` in order, then `len` and
/// `data` (or `data_base64`, [`crate::payload::json_data`]).
pub fn message_json_with(fields: &[(&str, u64)], data: &[u8]) -> String {
    let mut line = String::from("{");
    for (k, v) in fields {
        line.push_str(&format!("\"{k}\":{v},"));
    }
    line.push_str(&format!("\"len\":{},{}}}", data.len(), crate::payload::json_data(data)));
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_lines_have_exactly_five_keys() {
        let line = message_json(3, 42, b"a\"b");
        assert_eq!(line, "{\"seq\":3,\"ts_ns\":42,\"ts_mono_ns\":42,\"len\":3,\"data\":\"a\\\"b\"}");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 5);
        // Not UTF-8: base64 under another key, never a lossy string.
        let line = message_json(3, 42, b"a\"b\xff");
        assert_eq!(line, "{\"seq\":3,\"ts_ns\":42,\"ts_mono_ns\":42,\"len\":4,\"data_base64\":\"YSJi/w==\"}");
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
