//! Channel schemas in the CLI: the flags that set one when a verb creates a channel
//! (`create`, `pub`, `journal append`), the `shmbus schema` verb that prints one, and the
//! [`Printer`] of the reading verbs (`sub`, `journal dump|tail`), which shows each message
//! decoded by the channel's schema when `shmbus_codec` has a codec for it.
//!
//! A schema is MCAP's four things (`shmbus::Schema`): the message encoding, the schema name,
//! the schema encoding and the schema data. The CLI never interprets them itself: the core
//! stores and checks them, `shmbus_codec` decodes and encodes messages by them.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use shmbus::{admin, Schema};
use shmbus_codec::{Codec, CodecError, DecodeOptions};

use crate::output::{Base64, JsonLines, MessageLine};
use crate::payload::Format;
use crate::{CliError, Ctx, Result};

/// The flags that give a channel its schema when the verb creates it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SchemaArgs {
    /// How each message's bytes are encoded, in MCAP's names: cdr, protobuf, json, cbor,
    /// msgpack, flatbuffer, ros1, shmbus-pod, or any other. Stored with the channel when
    /// this creates it; an existing channel must have the same schema.
    #[arg(long, value_name = "ENCODING")]
    pub message_encoding: Option<String>,
    /// The schema's name: sensor_msgs/msg/Imu, foxglove.RawImage, … (with
    /// --message-encoding).
    #[arg(long, value_name = "NAME", requires = "message_encoding")]
    pub schema_name: Option<String>,
    /// What the schema data is: ros2msg, ros2idl, protobuf, jsonschema, ros1msg,
    /// shmbus-pod, … (with --message-encoding; none for json, cbor or msgpack messages).
    #[arg(long, value_name = "ENCODING", requires = "message_encoding")]
    pub schema_encoding: Option<String>,
    /// The schema data, read from this file (at most 1 MiB): a .msg text with its
    /// dependencies, a binary protobuf FileDescriptorSet, a JSON schema, … (with
    /// --schema-encoding).
    #[arg(long, value_name = "PATH", requires = "schema_encoding")]
    pub schema_file: Option<PathBuf>,
}

impl SchemaArgs {
    /// The schema these flags give, `None` without `--message-encoding`.
    pub fn schema(&self) -> Result<Option<Schema>> {
        let Some(message_encoding) = &self.message_encoding else { return Ok(None) };
        let data = match &self.schema_file {
            Some(path) => crate::payload::read_bounded(path, Schema::MAX_DATA, "schema data a channel takes")
                .map_err(|e| CliError::msg(format!("--schema-file: {e}")))?,
            None => Vec::new(),
        };
        let name = self.schema_name.clone().unwrap_or_default();
        let encoding = self.schema_encoding.clone().unwrap_or_default();
        let schema = Schema::new(message_encoding.clone(), name, encoding, data).map_err(|e| {
            CliError::usage(format!("{e} (--message-encoding, --schema-name, --schema-encoding, --schema-file)"))
        })?;
        Ok(Some(schema))
    }
}

/// The codec of `schema`, when `shmbus_codec` has one for its encodings. A schema whose
/// data does not parse is said once on stderr and its messages are shown as bytes.
pub fn codec(schema: Option<&Schema>) -> Option<Codec> {
    let s = schema?;
    if !shmbus_codec::supported(s.message_encoding(), s.encoding()) {
        return None;
    }
    match Codec::new(s.message_encoding(), s.name(), s.encoding(), s.data()) {
        Ok(c) => Some(c),
        Err(CodecError::Unsupported { .. }) => None,
        Err(e) => {
            eprintln!("shmbus: the channel's schema {} cannot be used ({e}); messages are shown as bytes", label(s));
            None
        }
    }
}

/// `sensor_msgs/msg/Imu (cdr, ros2msg)`: a schema in a few words.
pub fn label(s: &Schema) -> String {
    match (s.name(), s.encoding()) {
        ("", "") => s.message_encoding().to_owned(),
        ("", e) => format!("{} ({e})", s.message_encoding()),
        (name, "") => format!("{name} ({})", s.message_encoding()),
        (name, e) => format!("{name} ({}, {e})", s.message_encoding()),
    }
}

/// The one-line summary of `info`, `top`'s detail pane: encoding, name, schema encoding and
/// the data's size.
pub fn summary(s: &Schema) -> String {
    let name = if s.name().is_empty() { "-" } else { s.name() };
    let encoding = if s.encoding().is_empty() { "-" } else { s.encoding() };
    format!("{} {name} {encoding} {} bytes", s.message_encoding(), s.data().len())
}

/// What identifies a message in the line that says it did not decode (`seq 5`, `entry 7`).
pub trait Head: Serialize {
    /// The message's number in words.
    fn id(&self) -> String;
}

impl Head for crate::output::Received {
    fn id(&self) -> String {
        format!("seq {}", self.seq)
    }
}

impl Head for crate::output::EntryHead {
    fn id(&self) -> String {
        format!("entry {}", self.index)
    }
}

/// `--json` of a decoded message: the head, `len`, and the decoded value as `msg`.
#[derive(Debug, Serialize)]
struct DecodedLine<'a, H> {
    #[serde(flatten)]
    head: H,
    len: usize,
    msg: &'a serde_json::Value,
}

/// `--json` of a message that does not decode: the head, `len`, and why as `error`.
#[derive(Debug, Serialize)]
struct UndecodedLine<H> {
    #[serde(flatten)]
    head: H,
    len: usize,
    error: String,
}

/// How a reading verb prints each message.
#[derive(Debug)]
enum Mode {
    /// `--json` with the payload as `data` / `data_base64`.
    Json,
    /// The payload as `--format` says.
    Payload(Format),
    /// Decoded: one JSON object per line (`json`: in the envelope, as `msg`).
    Decoded { codec: Box<Codec>, json: bool },
}

/// Prints the messages of a reading verb: decoded when the channel's schema has a codec
/// and no `--format` was given, else as bytes (`--format`, or `--json`'s `data`).
///
/// A message that does not decode is one line saying so, with its number (on stdout as a
/// JSON line `{…head, "len", "error"}` with `--json`, else on stderr), and the messages
/// after it go on.
#[derive(Debug)]
pub struct Printer {
    mode: Mode,
    opts: DecodeOptions,
    lines: JsonLines,
    what: String,
}

impl Printer {
    /// The printer for a channel of `schema`, for `--json`, `--format` (given or not) and
    /// `--full`.
    pub fn new(schema: Option<&Schema>, json: bool, format: Option<Format>, full: bool) -> Printer {
        let codec = if format.is_some() { None } else { codec(schema) };
        let mode = match (codec, json) {
            (Some(codec), json) => Mode::Decoded { codec: Box::new(codec), json },
            (None, true) => Mode::Json,
            // Without `--format`: text when valid UTF-8, else hex (binary bytes never reach
            // a terminal as they are).
            (None, false) => Mode::Payload(format.unwrap_or(Format::Auto)),
        };
        let what = schema.map(label).unwrap_or_default();
        Printer { mode, opts: DecodeOptions { full }, lines: JsonLines::new(), what }
    }

    /// Writes one message, identified by `head`.
    pub fn write<H: Head>(&mut self, out: &mut impl Write, head: H, data: &[u8]) -> Result<()> {
        match &self.mode {
            Mode::Json => self.lines.write(out, &MessageLine::new(head, data))?,
            Mode::Payload(format) => crate::payload::write(out, *format, data)?,
            Mode::Decoded { codec, json } => match (codec.decode(data, &self.opts), json) {
                (Ok(msg), true) => self.lines.write(out, &DecodedLine { head, len: data.len(), msg: &msg })?,
                (Ok(msg), false) => self.lines.write(out, &msg)?,
                (Err(e), true) => {
                    let error = format!("does not decode as {}: {e}", self.what);
                    self.lines.write(out, &UndecodedLine { head, len: data.len(), error })?
                }
                (Err(e), false) => {
                    // Said in order with the decoded lines around it.
                    out.flush()?;
                    eprintln!(
                        "undecodable: {} ({} bytes) does not decode as {}: {e}",
                        head.id(),
                        data.len(),
                        self.what
                    );
                }
            },
        }
        Ok(())
    }
}

/// `shmbus schema --domain D NAME` or `shmbus schema --dir DIR`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel's domain (or give the channel as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long, value_name = "D", conflicts_with = "dir")]
    pub domain: Option<String>,
    /// The channel's name, or D/NAME.
    #[arg(required_unless_present = "dir", conflicts_with = "dir")]
    pub name: Option<String>,
    /// A journal's directory, instead of a channel of a domain.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// A service's response schema (without it, a service's request schema).
    #[arg(long, conflicts_with = "dir")]
    pub response: bool,
    /// Print one JSON object {"message_encoding","schema_name","schema_encoding","data"}
    /// (`data_base64` in place of `data` for schema data that is not UTF-8).
    #[arg(long)]
    pub json: bool,
}

/// `schema --json`.
#[derive(Debug, Serialize)]
struct SchemaJson<'a> {
    message_encoding: &'a str,
    schema_name: &'a str,
    schema_encoding: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data_base64: Option<Base64<'a>>,
}

/// Prints the schema data of a channel (or a journal) to stdout, as it is.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    let (what, schema) = match (&args.dir, &args.name) {
        (Some(dir), _) => (dir.display().to_string(), journal_schema(dir)?),
        (None, Some(name)) => {
            let ch = crate::target::channel(args.domain.as_deref(), name)?;
            let domain = ctx.domain(&ch.domain)?;
            crate::target::require(&domain, &ch.name, crate::target::WaitHint::None)?;
            let report = admin::inspect_channel(&domain, &ch.name)?;
            if args.response && report.header.kind != shmbus::Kind::Service {
                return Err(CliError::usage(format!(
                    "{}/{} is a {}: only a service has a response schema",
                    ch.domain, ch.name, report.header.kind
                )));
            }
            let schema = if args.response { report.response_schema } else { report.schema };
            (format!("{}/{}", ch.domain, ch.name), schema)
        }
        (None, None) => return Err(CliError::usage("give a channel (--domain D NAME) or a journal (--dir DIR)")),
    };
    let Some(s) = schema else {
        return Err(CliError::msg(format!("{what} has no schema (it was created without --message-encoding)")));
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let (data, data_base64) = match std::str::from_utf8(s.data()) {
            Ok(text) => (Some(text), None),
            Err(_) => (None, Some(Base64(s.data()))),
        };
        let v = SchemaJson {
            message_encoding: s.message_encoding(),
            schema_name: s.name(),
            schema_encoding: s.encoding(),
            data,
            data_base64,
        };
        serde_json::to_writer_pretty(&mut out, &v)?;
        writeln!(out)?;
    } else {
        out.write_all(s.data())?;
    }
    out.flush()?;
    Ok(())
}

/// The schema of the journal in `dir`.
fn journal_schema(dir: &Path) -> Result<Option<std::sync::Arc<Schema>>> {
    Ok(crate::journal::open_existing(dir)?.schema().cloned().map(std::sync::Arc::new))
}
