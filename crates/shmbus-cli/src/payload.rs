//! Payloads in and out: `--format text|hex|base64|raw` of the reading verbs, `pub --format`
//! and `pub --file`, and the JSON `data` / `data_base64` key
//! ([`crate::output::MessageLine`]).
//!
//! Reading verbs print each payload as one line: `text` is the payload as lossy UTF-8 (what a
//! terminal shows; a newline in it splits the line, bytes that are not UTF-8 become U+FFFD),
//! `hex` and `base64` one encoded line per message (exact whatever the bytes), and `raw` the
//! bytes as they are with no separator (for one message, or a consumer that knows the framing).
//! `sub` without `--format` prints a payload that is valid UTF-8 as `text` and any other as
//! `hex` ([`Format::Auto`]): binary bytes never reach a terminal as they are.
//! JSON lines carry `data` (the payload as a string) when it is valid UTF-8, else
//! `data_base64` (standard alphabet, padded): never lossy.

use std::io::{Read, Write};
use std::path::PathBuf;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use crate::input::for_each_input_up_to;
use crate::{CliError, Result};

/// How a reading verb prints payloads (`--format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One line per message, lossy UTF-8.
    #[default]
    Text,
    /// One line of lowercase hex digits per message.
    Hex,
    /// One line of base64 (standard alphabet, padded) per message.
    Base64,
    /// The bytes as they are, no separator between messages.
    Raw,
    /// `text` when the payload is valid UTF-8, else `hex`: `sub`'s default, not a choice
    /// of `--format`.
    #[value(skip)]
    Auto,
}

/// How `pub` reads each stdin line or `--data` (`--format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum InFormat {
    /// The line's bytes as they are (`raw` is another name for it).
    #[default]
    #[value(alias = "raw")]
    Text,
    /// Hex digits (either case), two per byte.
    Hex,
    /// Base64, standard alphabet, padded.
    Base64,
}

/// Writes one payload as `format` says.
pub fn write(out: &mut impl Write, format: Format, data: &[u8]) -> Result<()> {
    match format {
        Format::Text => {
            out.write_all(String::from_utf8_lossy(data).as_bytes())?;
            out.write_all(b"\n")?;
        }
        Format::Hex => {
            let mut line = String::with_capacity(data.len() * 2 + 1);
            for b in data {
                line.push_str(&format!("{b:02x}"));
            }
            line.push('\n');
            out.write_all(line.as_bytes())?;
        }
        Format::Base64 => {
            let mut line = STANDARD.encode(data);
            line.push('\n');
            out.write_all(line.as_bytes())?;
        }
        Format::Raw => out.write_all(data)?,
        Format::Auto if std::str::from_utf8(data).is_ok() => return write(out, Format::Text, data),
        Format::Auto => return write(out, Format::Hex, data),
    }
    Ok(())
}

/// Where `pub` takes its messages from, and how they are written.
#[derive(Debug, Clone, Default)]
pub struct Input {
    /// `--data`: one message.
    pub data: Option<String>,
    /// `--file`: one message, the file's whole content.
    pub file: Option<PathBuf>,
    /// `--format` of `--data` and of each stdin line.
    pub format: InFormat,
    /// The channel's codec, when `--data` and each stdin line are JSON to encode by the
    /// channel's schema (no `--format` given): a line that is not JSON, or does not fit the
    /// schema, is an error naming the line and the field, and nothing of it is sent.
    pub codec: Option<shmbus_codec::Codec>,
}

impl Input {
    /// Calls `f` with each message, decoded: `--file`'s content, `--data`, or each stdin line.
    /// `max_len` is the most one message can hold; `limit` the most stdin lines read.
    pub fn for_each(&self, max_len: usize, limit: Option<u64>, mut f: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
        if let Some(path) = &self.file {
            return f(&read_file(path, max_len)?);
        }
        // An encoded line is longer than its message: bound the line by the encoded size of
        // the largest message (the decoded size is then checked by the channel).
        let line_max = match (&self.codec, self.format) {
            (Some(_), _) => json_text_max(max_len),
            (None, InFormat::Text) => max_len,
            (None, InFormat::Hex) => max_len.saturating_mul(2),
            (None, InFormat::Base64) => max_len.div_ceil(3).saturating_mul(4),
        };
        let mut number = 0u64;
        for_each_input_up_to(self.data.as_deref(), line_max, limit, |line| {
            number += 1;
            let what = || if self.data.is_some() { "--data".to_string() } else { format!("stdin line {number}") };
            if let Some(codec) = &self.codec {
                return f(&encode_json(codec, line)
                    .map_err(|e| CliError::msg(format!("{}: {e}; nothing of it was sent", what())))?);
            }
            match self.format {
                InFormat::Text => f(line),
                _ => f(&decode(self.format, line).map_err(|e| CliError::msg(format!("{}: {e}", what())))?),
            }
        })
    }
}

/// The least bound of a JSON line to encode, whatever the channel's message size.
const JSON_LINE_MIN: usize = 64 << 10;

/// The most bytes of JSON text taken for a message of at most `max_len` encoded bytes: JSON
/// is several times a message's encoded size (numbers in decimal, field names), so bounded
/// generously, but bounded.
pub fn json_text_max(max_len: usize) -> usize {
    max_len.saturating_mul(16).max(JSON_LINE_MIN)
}

/// One line (`--data` or stdin) of JSON, or of one-line flow YAML as `ros2 topic pub` takes
/// it (`{linear_acceleration: {x: 1.0}}`), encoded by `codec`.
fn encode_json(codec: &shmbus_codec::Codec, line: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let value: serde_json::Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        // JSON is flow YAML too; YAML reads what JSON refused (unquoted keys and strings).
        Err(json) => serde_norway::from_slice(line).map_err(|_| format!("not JSON ({json}), nor one-line YAML"))?,
    };
    codec.encode(&value).map_err(|e| e.to_string())
}

/// `--file`: the whole file, if it fits in one message.
fn read_file(path: &std::path::Path, max_len: usize) -> Result<Vec<u8>> {
    read_bounded(path, max_len, "largest message this channel takes (set when it was created)")
}

/// The whole file at `path`, reading at most `max_len + 1` bytes of it: a longer one is an
/// error that says it is longer than `max_len` bytes, "the `what`".
pub fn read_bounded(path: &std::path::Path, max_len: usize, what: &str) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).map_err(|e| CliError::msg(format!("{}: {e}", path.display())))?;
    let mut data = Vec::new();
    file.take(max_len as u64 + 1)
        .read_to_end(&mut data)
        .map_err(|e| CliError::msg(format!("reading {}: {e}", path.display())))?;
    if data.len() > max_len {
        return Err(CliError::msg(format!("{} is longer than {max_len} bytes, the {what}", path.display())));
    }
    Ok(data)
}

/// One line of hex or base64, decoded (surrounding whitespace and a `\r` are ignored).
fn decode(format: InFormat, line: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let line = line.trim_ascii();
    match format {
        InFormat::Text => Ok(line.to_vec()),
        InFormat::Hex => {
            if line.len() % 2 != 0 {
                return Err(format!("{} hex digits: not whole bytes", line.len()));
            }
            line.chunks(2)
                .map(|pair| {
                    std::str::from_utf8(pair)
                        .ok()
                        .and_then(|p| u8::from_str_radix(p, 16).ok())
                        .ok_or_else(|| format!("{:?} is not a hex byte", String::from_utf8_lossy(pair)))
                })
                .collect()
        }
        InFormat::Base64 => STANDARD.decode(line).map_err(|e| format!("not base64 ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(format: Format, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut out, format, data).unwrap();
        out
    }

    #[test]
    fn formats_round_trip() {
        let data: Vec<u8> = (0..=255u8).chain([b'\n', 0xff, 0]).collect();
        let hex = written(Format::Hex, &data);
        assert_eq!(hex.last(), Some(&b'\n'));
        assert_eq!(decode(InFormat::Hex, &hex), Ok(data.clone()));
        let b64 = written(Format::Base64, &data);
        assert_eq!(decode(InFormat::Base64, &b64), Ok(data.clone()));
        assert_eq!(written(Format::Raw, &data), data);
        assert_eq!(written(Format::Text, b"a\xffb"), "a\u{fffd}b\n".as_bytes());
        assert_eq!(written(Format::Hex, b"\x00\xab"), b"00ab\n");
        assert_eq!(written(Format::Auto, "né\n".as_bytes()), "né\n\n".as_bytes());
        assert_eq!(written(Format::Auto, b"a\nb\xff"), b"610a62ff\n");
        assert_eq!(written(Format::Base64, b"hi"), b"aGk=\n");
        assert_eq!(decode(InFormat::Hex, b"00AB\r"), Ok(vec![0, 0xab]));
    }

    #[test]
    fn bad_encodings_are_named() {
        assert!(decode(InFormat::Hex, b"abc").unwrap_err().contains("not whole bytes"));
        assert!(decode(InFormat::Hex, b"zz").unwrap_err().contains("not a hex byte"));
        assert!(decode(InFormat::Base64, b"a$==").unwrap_err().contains("not base64"));
    }
}
