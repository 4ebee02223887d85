//! `stream`: two shmbus streams, `ping` (ping → echo) and `pong` (echo → ping).
//! `--payload copy` writes the whole message (`try_send` / `send_timeout`) and reads it out
//! by copy (`try_recv_into` / `recv_into_timeout`). `--payload touch` is the zero-copy
//! pattern: loan, write the first and last byte in place, send; read the record in place
//! (`try_recv_ref`), look at its first and last byte, consume.

use std::cell::RefCell;
use std::io;
use std::time::Duration;

use shmbus::stream::{
    Stream, StreamConfig, StreamReader, StreamRecvTimeoutError, StreamSendTimeoutError, StreamTryRecvError,
    StreamTrySendError, StreamWriter,
};

use super::shmbus_kinds::{check_size, policy, wait_for, ScratchRoot};
use super::{Endpoint, Handoff, Params, Payload, Transport};
use crate::waiter::Waiter;

/// shmbus streams.
#[derive(Debug)]
pub struct StreamTransport;

/// Ring capacity for `size`-byte records: room for at least four records, a power of two,
/// at least 64 KiB (16 pages).
pub fn capacity_for(size: usize) -> usize {
    let record = (8 + size).next_multiple_of(8);
    (4 * record).next_power_of_two().max(1 << 16)
}

/// While the peer has not attached yet (or has just gone) a stream reports
/// `Disconnected`; the waiter decides whether the peer is dead. In block mode, nap instead of
/// spinning through the liveness checks.
const DISCONNECTED_NAP: Duration = Duration::from_millis(1);

fn end(root: ScratchRoot, params: &Params, create: bool) -> io::Result<Box<dyn Endpoint>> {
    check_size(params)?;
    let d = root.domain()?;
    let cfg = StreamConfig::default().capacity(capacity_for(params.size));
    let (mut writer, mut reader) = if create {
        (
            Stream::create_or_open(&d, "ping", &cfg).and_then(|s| s.writer()).map_err(io::Error::other)?,
            Stream::create_or_open(&d, "pong", &cfg).and_then(|s| s.reader()).map_err(io::Error::other)?,
        )
    } else {
        (
            Stream::open(&d, "pong").and_then(|s| s.writer()).map_err(io::Error::other)?,
            Stream::open(&d, "ping").and_then(|s| s.reader()).map_err(io::Error::other)?,
        )
    };
    writer.set_wait_policy(policy(params.mode));
    reader.set_wait_policy(policy(params.mode));
    Ok(Box::new(StreamEnd { _root: root, writer: RefCell::new(writer), reader: RefCell::new(reader), params: *params }))
}

impl Transport for StreamTransport {
    fn name(&self) -> &'static str {
        "stream"
    }

    fn payload(&self, requested: Payload) -> Payload {
        requested
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let (root, handoff) = ScratchRoot::create("stream")?;
        Ok((end(root, params, true)?, handoff))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        end(ScratchRoot::attach(&handoff)?, params, false)
    }
}

struct StreamEnd {
    _root: ScratchRoot,
    // The wait closures (try, then blocking with a timeout) both need the endpoints: cells.
    writer: RefCell<StreamWriter>,
    reader: RefCell<StreamReader>,
    params: Params,
}

fn nap<T>() -> io::Result<Option<T>> {
    std::thread::sleep(DISCONNECTED_NAP);
    Ok(None)
}

impl Endpoint for StreamEnd {
    #[inline]
    fn send(&mut self, msg: &[u8], waiter: &mut Waiter<'_>) -> io::Result<()> {
        let n = msg.len();
        let touch = self.params.payload == Payload::Touch;
        let fill = |g: &mut [u8]| {
            if touch {
                g[0] = msg[0];
                g[n - 1] = msg[n - 1];
            } else {
                g.copy_from_slice(msg);
            }
        };
        let w = &self.writer;
        wait_for(
            self.params.mode,
            waiter,
            || match w.borrow_mut().try_loan(n) {
                Ok(mut g) => {
                    fill(&mut g);
                    g.send();
                    Ok(Some(()))
                }
                // The reader not attached yet or gone: the waiter asks about the peer.
                Err(StreamTrySendError::Full { .. } | StreamTrySendError::Disconnected) => Ok(None),
                Err(e) => Err(io::Error::other(e)),
            },
            |slice| match w.borrow_mut().loan_timeout(n, slice) {
                Ok(mut g) => {
                    fill(&mut g);
                    g.send();
                    Ok(Some(()))
                }
                Err(StreamSendTimeoutError::Timeout) => Ok(None),
                Err(StreamSendTimeoutError::Disconnected) => nap(),
                Err(e) => Err(io::Error::other(e)),
            },
        )
    }

    #[inline]
    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let n = buf.len();
        let r = &self.reader;
        match self.params.payload {
            Payload::Copy => {
                // Straight into the caller's buffer: one copy out of the ring.
                let data = std::cell::RefCell::new(&mut *buf);
                let got = wait_for(
                    self.params.mode,
                    waiter,
                    || match r.borrow_mut().try_recv_into(&mut data.borrow_mut()) {
                        Ok(len) => Ok(Some(len)),
                        Err(StreamTryRecvError::Empty | StreamTryRecvError::Disconnected) => Ok(None),
                        Err(e) => Err(io::Error::other(e)),
                    },
                    |slice| match r.borrow_mut().recv_into_timeout(&mut data.borrow_mut(), slice) {
                        Ok(len) => Ok(Some(len)),
                        Err(StreamRecvTimeoutError::Timeout) => Ok(None),
                        Err(StreamRecvTimeoutError::Disconnected) => nap(),
                        Err(e) => Err(io::Error::other(e)),
                    },
                )?;
                if got != n || buf.len() != n {
                    return Err(io::Error::other(format!("received {got} bytes, expected {n}")));
                }
            }
            Payload::Touch => {
                let look = |rec: &[u8]| (rec.len(), rec.first().copied(), rec.last().copied());
                let (len, first, last) = wait_for(
                    self.params.mode,
                    waiter,
                    || {
                        let mut r = r.borrow_mut();
                        match r.try_recv_ref() {
                            Ok(rec) => {
                                let v = look(&rec);
                                rec.consume();
                                Ok(Some(v))
                            }
                            Err(StreamTryRecvError::Empty | StreamTryRecvError::Disconnected) => Ok(None),
                            Err(e) => Err(io::Error::other(e)),
                        }
                    },
                    |slice| {
                        let mut r = r.borrow_mut();
                        match r.recv_ref_timeout(slice) {
                            Ok(rec) => {
                                let v = look(&rec);
                                rec.consume();
                                Ok(Some(v))
                            }
                            Err(StreamRecvTimeoutError::Timeout) => Ok(None),
                            Err(StreamRecvTimeoutError::Disconnected) => nap(),
                            Err(e) => Err(io::Error::other(e)),
                        }
                    },
                )?;
                if len != n {
                    return Err(io::Error::other(format!("received {len} bytes, expected {n}")));
                }
                buf[0] = first.unwrap_or(0);
                buf[n - 1] = last.unwrap_or(0);
            }
        }
        Ok(())
    }
}
