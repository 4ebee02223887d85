//! `shmbus serve` and `shmbus call`: answer a service's requests from the shell, and send
//! it one.
//!
//! `serve --echo` answers each request with its own bytes; `serve -- CMD ARGS…` runs CMD
//! once per request, with the request on its stdin, and answers with its stdout: at most
//! `--jobs` commands at once (a request beyond that waits in the service), each killed after
//! `--cmd-timeout-ms`. A command that fails, is killed, or prints more than the service's
//! `max_response_len` fails its request (the client is told at once), and the server goes
//! on. `call` sends one request and prints every response to it, until the last.
//!
//! A service with schemas (its request and response schemas, `shmbus_codec` having a codec
//! for them) is spoken to in JSON: `call --data '{"a": 1}'` encodes the request by the
//! request schema and prints each response decoded by the response schema; `serve -- CMD`
//! gives CMD the request decoded as one JSON line and encodes CMD's output (one JSON value)
//! by the response schema. `--format` (call) and `--raw` (serve) keep the bytes as they are.

use std::io::{Read, Write};

use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use shmbus::Schema;
use shmbus_codec::{Codec, DecodeOptions};

use shmbus::service::{
    ActiveRequest, CallError, RequestRecvTimeoutError, ResponseRecvTimeoutError, Service, ServiceConfig,
};

use crate::output::{JsonLines, MessageLine};
use crate::payload::{InFormat, Input};
use crate::{CliError, Ctx, Result};

/// The service's layout, for creating it.
#[derive(Debug, Clone, clap::Args)]
struct LayoutArgs {
    /// Most clients attached at once. Used when creating the service (default 16); if it
    /// exists with another value, the command fails.
    #[arg(long, value_name = "N")]
    max_clients: Option<usize>,
    /// Most requests one client has in flight, 1..=64. Used when creating the service
    /// (default 4).
    #[arg(long, value_name = "N")]
    max_in_flight: Option<usize>,
    /// Largest request in bytes (K, M, G suffixes: powers of 1024). Used when creating the
    /// service (default 4096).
    #[arg(long, value_name = "BYTES", value_parser = crate::units::size_usize)]
    max_request_size: Option<usize>,
    /// Largest response in bytes (K, M, G suffixes). Used when creating the service
    /// (default 4096).
    #[arg(long, value_name = "BYTES", value_parser = crate::units::size_usize)]
    max_response_size: Option<usize>,
}

/// The schemas of a service `serve` creates: its requests' and its responses', both or
/// neither (in MCAP's vocabulary, as `create --message-encoding …` takes one).
#[derive(Debug, Clone, Default, clap::Args)]
struct ServiceSchemaArgs {
    /// How each request's bytes are encoded (cdr, protobuf, json, cbor, msgpack,
    /// shmbus-pod, …). Stored with the service when this creates it, with
    /// --response-message-encoding; an existing service must carry the same schemas.
    #[arg(long, value_name = "ENCODING", requires = "response_message_encoding")]
    request_message_encoding: Option<String>,
    /// The request schema's name (sensor_msgs/srv/SetCameraInfo_Request, …).
    #[arg(long, value_name = "NAME", requires = "request_message_encoding")]
    request_schema_name: Option<String>,
    /// What the request schema data is (ros2msg, protobuf, jsonschema, …).
    #[arg(long, value_name = "ENCODING", requires = "request_message_encoding")]
    request_schema_encoding: Option<String>,
    /// The request schema data, read from this file (at most 1 MiB).
    #[arg(long, value_name = "PATH", requires = "request_schema_encoding")]
    request_schema_file: Option<std::path::PathBuf>,
    /// How each response's bytes are encoded (with --request-message-encoding).
    #[arg(long, value_name = "ENCODING", requires = "request_message_encoding")]
    response_message_encoding: Option<String>,
    /// The response schema's name.
    #[arg(long, value_name = "NAME", requires = "response_message_encoding")]
    response_schema_name: Option<String>,
    /// What the response schema data is.
    #[arg(long, value_name = "ENCODING", requires = "response_message_encoding")]
    response_schema_encoding: Option<String>,
    /// The response schema data, read from this file (at most 1 MiB).
    #[arg(long, value_name = "PATH", requires = "response_schema_encoding")]
    response_schema_file: Option<std::path::PathBuf>,
}

impl ServiceSchemaArgs {
    /// The request and response schemas these flags give (`None` without them).
    fn schemas(&self) -> Result<Option<(Schema, Schema)>> {
        let one = |encoding: &Option<String>,
                   name: &Option<String>,
                   schema_encoding: &Option<String>,
                   file: &Option<std::path::PathBuf>,
                   side: &str| {
            crate::schema::SchemaArgs {
                message_encoding: encoding.clone(),
                schema_name: name.clone(),
                schema_encoding: schema_encoding.clone(),
                schema_file: file.clone(),
            }
            .schema()
            .map_err(|e| CliError::usage(format!("the {side} schema: {e}")))
        };
        let req = one(
            &self.request_message_encoding,
            &self.request_schema_name,
            &self.request_schema_encoding,
            &self.request_schema_file,
            "request",
        )?;
        let resp = one(
            &self.response_message_encoding,
            &self.response_schema_name,
            &self.response_schema_encoding,
            &self.response_schema_file,
            "response",
        )?;
        Ok(req.zip(resp))
    }
}

impl LayoutArgs {
    fn config(&self) -> ServiceConfig {
        let mut c = ServiceConfig::default();
        if let Some(n) = self.max_clients {
            c = c.max_clients(n);
        }
        if let Some(n) = self.max_in_flight {
            c = c.max_in_flight(n);
        }
        if let Some(n) = self.max_request_size {
            c = c.max_request_len(n);
        }
        if let Some(n) = self.max_response_size {
            c = c.max_response_len(n);
        }
        c
    }
}

/// `shmbus serve --domain D NAME (--echo | -- CMD ARGS…) [--jobs N] [--cmd-timeout-ms T]
/// [--count N] [--json]`
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The service's domain (or give it as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long = "domain", id = "domain", value_name = "D")]
    domain_flag: Option<String>,
    /// The service's name, or D/NAME. Created if missing.
    #[arg(value_name = "NAME")]
    channel: String,
    #[command(flatten)]
    layout: LayoutArgs,
    #[command(flatten)]
    schemas: ServiceSchemaArgs,
    /// Give CMD each request's bytes as they are and answer with its output as it is, even
    /// when the service has schemas (by default CMD reads the request as a JSON line and
    /// prints the response as JSON).
    #[arg(long, requires = "cmd")]
    raw: bool,
    /// Answer each request with its own bytes.
    #[arg(long, conflicts_with = "cmd", required_unless_present = "cmd")]
    echo: bool,
    /// Most commands running at once (default 4); further requests wait in the service.
    #[arg(long, value_name = "N", default_value = "4", value_parser = crate::units::count)]
    jobs: u64,
    /// Kill a command still running after this long and fail its request: milliseconds, or
    /// with a unit (`30s`).
    #[arg(long, value_name = "MS", default_value = "10000", value_parser = crate::units::millis)]
    cmd_timeout_ms: u64,
    /// Exit (with 0) after answering this many requests. Default: until interrupted.
    #[arg(long, value_name = "N", value_parser = crate::units::count)]
    count: Option<u64>,
    /// One JSON line per request answered ({"request_id","len","response_len","failed"})
    /// instead of text.
    #[arg(long)]
    json: bool,
    /// The command run for each request (after `--`): the request on its stdin, its stdout
    /// the response.
    #[arg(last = true, value_name = "CMD")]
    cmd: Vec<String>,
}

/// `shmbus call --domain D NAME (--data X | --file PATH) [--format F] [--timeout-ms T] [--json]`
#[derive(Debug, Clone, clap::Args)]
pub struct CallArgs {
    /// The service's domain (or give it as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long = "domain", id = "domain", value_name = "D")]
    domain_flag: Option<String>,
    /// The service's name, or D/NAME.
    #[arg(value_name = "NAME")]
    channel: String,
    /// The request. Without it (or --file), stdin's first line is the request.
    #[arg(long, value_name = "TEXT", conflicts_with = "file")]
    data: Option<String>,
    /// The whole content of this file is the request.
    #[arg(long, value_name = "PATH")]
    file: Option<std::path::PathBuf>,
    /// How --data (or the stdin line) is written: text, hex or base64; responses are then
    /// printed as bytes too. Without it, a service with schemas takes JSON (or one-line
    /// YAML) and prints each response decoded, as JSON; any other takes text.
    #[arg(long, value_enum, conflicts_with = "file")]
    format: Option<InFormat>,
    /// How long to wait for each response: milliseconds, or with a unit (`5s`).
    #[arg(long, value_name = "MS", default_value = "5000", value_parser = crate::units::millis)]
    timeout_ms: u64,
    /// Print JSON lines {"request_id","last","len","data"} (`data_base64` for bytes that are
    /// not UTF-8) instead of the responses as they are.
    #[arg(long)]
    json: bool,
    /// Wait up to SECS for the service to be created.
    #[arg(long, value_name = "SECS", value_parser = crate::parse_wait)]
    wait: Option<Duration>,
}

/// The head of a `call --json` line.
#[derive(Debug, serde::Serialize)]
struct ResponseHead {
    request_id: u64,
    last: bool,
}

impl crate::schema::Head for ResponseHead {
    fn id(&self) -> String {
        format!("the response to request {}", self.request_id)
    }
}

/// How `serve -- CMD` hands a request to CMD and reads its answer: as bytes, or (a service
/// with schemas) as JSON by the request's and the response's codecs.
#[derive(Clone)]
struct Translation {
    codecs: Option<Arc<Codecs>>,
}

/// A service's two codecs, and how its responses are named in errors.
struct Codecs {
    request: Codec,
    response: Codec,
    response_label: String,
}

impl Translation {
    /// The codecs of `svc`'s schemas, unless `raw` or it has none a codec reads.
    fn of(svc: &Service, raw: bool) -> Translation {
        let codecs = match (raw, svc.request_schema(), svc.response_schema()) {
            (false, Some(req), Some(resp)) => {
                crate::schema::codec(Some(req)).zip(crate::schema::codec(Some(resp))).map(|(request, response)| {
                    Arc::new(Codecs { request, response, response_label: crate::schema::label(resp) })
                })
            }
            _ => None,
        };
        Translation { codecs }
    }

    /// What CMD reads on its stdin: the request as it is, or decoded as one JSON line.
    fn request(&self, data: &[u8]) -> std::result::Result<Vec<u8>, String> {
        let Some(c) = &self.codecs else { return Ok(data.to_vec()) };
        let value = c
            .request
            .decode(data, &DecodeOptions { full: true })
            .map_err(|e| format!("the request does not decode by the service's request schema: {e}"))?;
        let mut line = serde_json::to_vec(&value).map_err(|e| e.to_string())?;
        line.push(b'\n');
        Ok(line)
    }

    /// The response CMD's output gives: as it is, or its JSON encoded by the response schema.
    fn response(&self, output: Vec<u8>, cmd: &str) -> std::result::Result<Vec<u8>, String> {
        let Some(c) = &self.codecs else { return Ok(output) };
        let value: serde_json::Value = serde_json::from_slice(&output).map_err(|e| {
            format!("{cmd} printed no JSON value ({e}); the service's responses are {}", c.response_label)
        })?;
        c.response.encode(&value).map_err(|e| format!("{cmd}'s output does not encode as {}: {e}", c.response_label))
    }
}

/// A line of `serve --json`.
#[derive(Debug, serde::Serialize)]
struct Served {
    request_id: u64,
    len: usize,
    response_len: usize,
    failed: bool,
    /// Why it failed (the command's exit, its timeout, a response too large); `null` when it
    /// did not.
    reason: Option<String>,
}

/// How one request went, reported by the thread that answered it.
struct Outcome {
    id: u64,
    len: usize,
    response_len: usize,
    failure: Option<String>,
}

/// Runs `serve`.
pub fn serve(ctx: &Ctx, args: &ServeArgs) -> Result<()> {
    let ch = crate::target::channel(args.domain_flag.as_deref(), &args.channel)?;
    let domain = ctx.domain(&ch.domain)?;
    let mut config = args.layout.config();
    if let Some((req, resp)) = args.schemas.schemas()? {
        config = config.request_schema(req).response_schema(resp);
    }
    let svc = Service::create_or_open(&domain, &ch.name, &config)?;
    let mut server = svc.server()?;
    let max = svc.max_response_len();
    let translation = Translation::of(&svc, args.raw);
    let (tx, rx) = mpsc::channel::<Outcome>();
    let mut running = 0u64;
    let mut answered = 0u64;
    let mut out = std::io::stdout().lock();
    let mut lines = JsonLines::new();
    let mut report = |o: Outcome, out: &mut std::io::StdoutLock<'_>| -> Result<()> {
        if args.json {
            let line = Served {
                request_id: o.id,
                len: o.len,
                response_len: o.response_len,
                failed: o.failure.is_some(),
                reason: o.failure,
            };
            lines.write(out, &line)?;
        } else {
            match o.failure {
                None => writeln!(out, "request {}: {} bytes -> {} bytes", o.id, o.len, o.response_len)?,
                Some(why) => writeln!(out, "request {}: {} bytes -> failed: {why}", o.id, o.len)?,
            }
        }
        Ok(out.flush()?)
    };
    let timeout = Duration::from_millis(args.cmd_timeout_ms);
    while args.count.is_none_or(|n| answered < n) {
        // Finished commands first: each frees a job.
        while let Ok(o) = rx.try_recv() {
            running -= 1;
            answered += 1;
            report(o, &mut out)?;
        }
        if args.count.is_some_and(|n| answered + running >= n) || running >= args.jobs {
            // Enough taken (or every job busy): wait for one to finish.
            let o = rx.recv().map_err(|_| CliError::msg("a command thread vanished"))?;
            running -= 1;
            answered += 1;
            report(o, &mut out)?;
            continue;
        }
        let req = match server.recv_timeout(Duration::from_millis(50)) {
            Ok(r) => r,
            Err(RequestRecvTimeoutError::Timeout) => continue,
            Err(RequestRecvTimeoutError::Corrupt(c)) => {
                eprintln!("shmbus serve: {c}");
                continue;
            }
            Err(e) => return Err(CliError::during("receive failed", e)),
        };
        if args.echo {
            let (id, len) = (req.id(), req.len());
            let data = req.data().to_vec();
            let failure = if len > max {
                req.fail();
                Some(format!("a request of {len} bytes does not fit the service's max_response_len of {max}"))
            } else {
                req.respond_last(&data).err().map(|e| e.to_string())
            };
            answered += 1;
            report(Outcome { id, len, response_len: len, failure }, &mut out)?;
            continue;
        }
        running += 1;
        let (tx, cmd, translation) = (tx.clone(), args.cmd.clone(), translation.clone());
        std::thread::spawn(move || {
            let _ = tx.send(run_command(req, &cmd, &translation, timeout, max));
        });
    }
    Ok(())
}

/// Runs `cmd` with the request on its stdin and answers with its stdout, or fails the
/// request.
fn run_command(
    req: ActiveRequest,
    cmd: &[String],
    translation: &Translation,
    timeout: Duration,
    max: usize,
) -> Outcome {
    let (id, len) = (req.id(), req.len());
    let outcome = |response_len, failure| Outcome { id, len, response_len, failure };
    let answer = translation
        .request(req.data())
        .and_then(|input| {
            command_output(
                input,
                cmd,
                timeout,
                translation.codecs.as_ref().map_or(max, |_| crate::payload::json_text_max(max)),
            )
        })
        .and_then(|output| translation.response(output, &cmd[0]))
        .and_then(|response| {
            if response.len() > max {
                Err(format!(
                    "{}'s response of {} bytes is more than the service's max_response_len of {max}",
                    cmd[0],
                    response.len()
                ))
            } else {
                Ok(response)
            }
        });
    let output = match answer {
        Ok(o) => o,
        Err(why) => {
            req.fail();
            return outcome(0, Some(why));
        }
    };
    match req.respond_last(&output) {
        Ok(()) => outcome(output.len(), None),
        Err(e) => outcome(output.len(), Some(e.to_string())),
    }
}

/// The stdout of `cmd` run with `request` on its stdin, within `timeout` and `max` bytes.
fn command_output(
    request: Vec<u8>,
    cmd: &[String],
    timeout: Duration,
    max: usize,
) -> std::result::Result<Vec<u8>, String> {
    use std::os::unix::process::CommandExt;
    // In a process group of its own, so that a command killed for its time takes what it
    // started with it (a shell's children would otherwise keep running, and keep our pipes).
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("could not run {}: {e}", cmd[0]))?;
    // The request goes in on a thread of its own: a command that does not read its stdin
    // must not stop us reading its stdout.
    let mut stdin = child.stdin.take().expect("piped");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&request);
    });
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let r = (&mut stdout).take(max as u64 + 1).read_to_end(&mut v);
        r.map(|_| v)
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if start.elapsed() >= timeout => {
                // SAFETY: kill(2) on the process group our child leads (its pid, not reaped).
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                return Err(format!("{} still ran after {} ms; killed", cmd[0], timeout.as_millis()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("waiting for {}: {e}", cmd[0])),
        }
    };
    let _ = writer.join();
    let output = reader.join().map_err(|_| "the output reader panicked".to_string())?.map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("{} exited with {status}", cmd[0]));
    }
    if output.len() > max {
        return Err(format!("{} printed more than {max} bytes, more than a response may be", cmd[0]));
    }
    Ok(output)
}

/// Runs `call`.
pub fn call(ctx: &Ctx, args: &CallArgs) -> Result<()> {
    let ch = crate::target::channel(args.domain_flag.as_deref(), &args.channel)?;
    let domain = ctx.domain(&ch.domain)?;
    ctx.wait_for(&domain, &[&ch.name], args.wait)?;
    let svc = Service::open(&domain, &ch.name)?;
    let mut client = svc.client()?;
    // Without --format (or --file), a service with schemas takes JSON and answers in JSON.
    let (codec, response_schema) = match (args.format, &args.file) {
        (None, None) => (crate::schema::codec(svc.request_schema()), svc.response_schema()),
        _ => (None, None),
    };
    let input =
        Input { data: args.data.clone(), file: args.file.clone(), format: args.format.unwrap_or_default(), codec };
    let mut printer = crate::schema::codec(response_schema)
        .is_some()
        .then(|| crate::schema::Printer::new(response_schema, args.json, None, false));
    let mut request = None;
    input.for_each(svc.max_request_len(), Some(1), |msg| {
        request = Some(msg.to_vec());
        Ok(())
    })?;
    let request = request.ok_or_else(|| CliError::usage("no request: give --data, --file, or a line on stdin"))?;
    let id = client.try_send_request(&request).map_err(|e| CliError::during("call failed", CallError::Send(e)))?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let mut out = std::io::stdout().lock();
    let mut lines = JsonLines::new();
    loop {
        let r = match client.recv_response_for_timeout(id, timeout) {
            Ok(r) => r,
            Err(ResponseRecvTimeoutError::Timeout) => {
                return Err(CliError::msg(format!(
                    "timed out: no response from {}/{} within {} ms",
                    ch.domain, ch.name, args.timeout_ms
                )))
            }
            Err(e) => return Err(CliError::during("call failed", e)),
        };
        let head = ResponseHead { request_id: id, last: r.is_last() };
        if let Some(p) = &mut printer {
            // A stream's empty end (`end()`) is no message to decode.
            if !(r.is_last() && r.data().is_empty()) {
                p.write(&mut out, head, r.data())?;
            }
        } else if args.json {
            lines.write(&mut out, &MessageLine::new(head, r.data()))?;
        } else {
            // Text when valid UTF-8, else hex, as `sub` prints, one response per line: a
            // command's output keeps its own last newline.
            let data = r.data();
            let data = data.strip_suffix(b"\n").filter(|d| std::str::from_utf8(d).is_ok()).unwrap_or(data);
            crate::payload::write(&mut out, crate::payload::Format::Auto, data)?;
        }
        if r.is_last() {
            break;
        }
    }
    Ok(out.flush()?)
}
