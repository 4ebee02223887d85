//! The stream kind for `pub` and `sub`.
//!
//! `pub` attaches as the stream's one writer and writes one record per message; `sub`
//! attaches as its one reader and *consumes* records: a record `sub` printed is gone, and
//! the next reader resumes after it. A stream has no sequence numbers or timestamps of its
//! own, so `sub --json` reports `seq` as the record's ordinal in this reader's session
//! (1, 2, …) and `ts_mono_ns` as CLOCK_MONOTONIC when this reader received it.

use std::time::{Duration, Instant};

use shmbus::stream::{
    Stream, StreamConfig, StreamReader, StreamRecvTimeoutError, StreamSendTimeoutError, StreamWriter,
};
use shmbus::time::monotonic_ns;
use shmbus::{Domain, WaitSet, WaitTimeoutError};

use crate::pubsub::{PubArgs, Recv, Sink, Source, SubArgs};
use crate::{CliError, Result};

/// `pub`'s end of a stream.
#[derive(Debug)]
pub struct StreamSink {
    writer: StreamWriter,
    timeout: Option<Duration>,
}

/// Attaches as the writer of the stream, creating it if missing. `--capacity` creates it
/// with that capacity, or must match an existing stream's; a schema likewise.
pub fn writer(domain: &Domain, args: &PubArgs, schema: Option<shmbus::Schema>) -> Result<StreamSink> {
    let mut config = StreamConfig::default();
    if let Some(c) = args.capacity {
        config = config.capacity(c);
    }
    if let Some(s) = schema {
        config = config.schema(s);
    }
    let writer = Stream::create_or_open(domain, &args.name, &config)?.writer()?;
    Ok(StreamSink { writer, timeout: args.timeout_ms.map(Duration::from_millis) })
}

impl Sink for StreamSink {
    fn send(&mut self, data: &[u8]) -> Result<()> {
        let r = match self.timeout {
            Some(t) => self.writer.send_timeout(data, t),
            None => self.writer.send(data).map_err(StreamSendTimeoutError::from),
        };
        r.map_err(|e| match e {
            StreamSendTimeoutError::Timeout => CliError::msg(format!(
                "publish failed: no room for a {} byte record in the stream within {} ms; the reader is slow or stuck",
                data.len(),
                self.timeout.unwrap_or_default().as_millis()
            )),
            e => CliError::during("publish failed", e),
        })
    }

    fn max_len(&self) -> usize {
        self.writer.max_record_len()
    }
}

/// `sub`'s end of a stream.
#[derive(Debug)]
pub struct StreamSource {
    reader: StreamReader,
    /// Sleeps on the reader while no writer is attached.
    waitset: WaitSet,
    /// Records received in this session.
    received: u64,
}

/// Attaches as the reader of the existing stream.
pub fn reader(domain: &Domain, args: &SubArgs) -> Result<StreamSource> {
    if args.from.is_some() || args.latest {
        return Err(CliError::msg(format!(
            "--from and --latest apply to topics; {}/{} is a stream, whose reader resumes after the last record consumed",
            args.domain, args.name
        )));
    }
    Ok(StreamSource { reader: Stream::open(domain, &args.name)?.reader()?, waitset: WaitSet::new(), received: 0 })
}

impl Source for StreamSource {
    /// The next record. With no writer attached, waits for a record anyway instead of
    /// failing: writers come and go (one `shmbus pub` per message).
    fn recv(&mut self, buf: &mut Vec<u8>, timeout: Option<Duration>) -> Result<Recv> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let r = match left {
                Some(left) => self.reader.recv_into_timeout(buf, left),
                None => self.reader.recv_into(buf).map_err(StreamRecvTimeoutError::from),
            };
            match r {
                Ok(_) => {
                    self.received += 1;
                    return Ok(Recv::Msg { seq: self.received, ts_ns: monotonic_ns() });
                }
                Err(StreamRecvTimeoutError::Timeout) => return Ok(Recv::Timeout),
                Err(StreamRecvTimeoutError::Disconnected) => {
                    // Empty and no writer: wait for a record instead (a `pub` per message
                    // attaches, commits and detaches between two looks at its liveness).
                    let waited = match left {
                        Some(t) => self.waitset.wait_timeout(&[&self.reader], t),
                        None => self.waitset.wait(&[&self.reader]).map_err(WaitTimeoutError::from),
                    };
                    match waited {
                        Ok(_) => {}
                        Err(WaitTimeoutError::Timeout) => return Ok(Recv::Timeout),
                        Err(e) => return Err(CliError::msg(format!("waiting for a record: {e}"))),
                    }
                }
                Err(e) => return Err(CliError::during("receive failed", e)),
            }
        }
    }
}
