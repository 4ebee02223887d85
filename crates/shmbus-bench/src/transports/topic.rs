//! `topic`: two shmbus topics, `ping` and `pong`. `--payload touch` loans a slot, writes the
//! first and last byte in place and sends; the receiver pins the sample and reads those two
//! bytes (the zero-copy figure). `--payload copy` publishes by copy and receives by copy.
//! `--mode async` receives in a current-thread tokio runtime: copy with
//! `recv_async().await`; touch awaits `shmbus::r#async::wait` on the subscriber, then pins
//! the sample with `try_recv_ref` (the async receive has no zero-copy form).
//!
//! Each topic keeps a history of 2 plus 1 spare slot: the same number of samples in flight as
//! the iceoryx2 peer (no history, a subscriber buffer of 2), so large payloads cycle through
//! the same amount of memory in both.
//!
//! `topic-lossless`: the same over topics of policy `block` with reliable subscribers, so
//! each publish checks the peer's cursor (the lossless cost against `topic`).

use std::io;

use shmbus::topic::{
    DeliveryPolicy, Publisher, Subscriber, Topic, TopicConfig, TopicRecvTimeoutError, TopicTryRecvError,
};

use shmbus::r#async::AsyncRecv;

use super::shmbus_kinds::{async_runtime, await_slice, check_size, policy, wait_for, ScratchRoot};
use super::{Endpoint, Handoff, Mode, Params, Payload, Transport};
use crate::waiter::Waiter;

/// shmbus topics: `overwrite` (lossy), or `block` with reliable subscribers (lossless).
#[derive(Debug)]
pub struct TopicTransport {
    /// `topic-lossless`.
    pub lossless: bool,
}

fn end(root: ScratchRoot, params: &Params, tx: &str, rx: &str, lossless: bool) -> io::Result<Box<dyn Endpoint>> {
    check_size(params)?;
    let d = root.domain()?;
    let mut cfg = TopicConfig::default().max_message_len(params.size).history(2).spare_slots(1);
    if lossless {
        cfg = cfg.policy(DeliveryPolicy::Block);
    }
    let tx = Topic::create_or_open(&d, tx, &cfg).map_err(io::Error::other)?;
    let rx = Topic::create_or_open(&d, rx, &cfg).map_err(io::Error::other)?;
    let publisher = tx.publisher().map_err(io::Error::other)?;
    let subscriber = if lossless { rx.reliable_subscriber() } else { rx.subscriber() }.map_err(io::Error::other)?;
    // Both topics are fresh: start at the first message whoever subscribes last.
    subscriber.seek(1);
    subscriber.set_wait_policy(policy(params.mode));
    let rt = async_runtime(params.mode)?;
    Ok(Box::new(TopicEnd { _root: root, publisher, subscriber, params: *params, rt }))
}

impl Transport for TopicTransport {
    fn name(&self) -> &'static str {
        if self.lossless {
            "topic-lossless"
        } else {
            "topic"
        }
    }

    fn payload(&self, requested: Payload) -> Payload {
        requested
    }

    fn mode(&self, requested: Mode) -> Mode {
        requested
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let (root, handoff) = ScratchRoot::create("topic")?;
        Ok((end(root, params, "ping", "pong", self.lossless)?, handoff))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        end(ScratchRoot::attach(&handoff)?, params, "pong", "ping", self.lossless)
    }
}

struct TopicEnd {
    _root: ScratchRoot,
    publisher: Publisher,
    subscriber: Subscriber,
    params: Params,
    /// Async mode's runtime.
    rt: Option<tokio::runtime::Runtime>,
}

fn lagged(missed: u64) -> io::Error {
    io::Error::other(format!("topic subscriber lagged by {missed} in a ping-pong"))
}

impl Endpoint for TopicEnd {
    #[inline]
    fn send(&mut self, msg: &[u8], _waiter: &mut Waiter<'_>) -> io::Result<()> {
        match self.params.payload {
            Payload::Copy => self.publisher.send(msg).map(drop).map_err(io::Error::other),
            Payload::Touch => {
                let n = msg.len();
                let mut loan = self.publisher.loan().map_err(io::Error::other)?;
                loan[0] = msg[0];
                loan[n - 1] = msg[n - 1];
                loan.truncate(n);
                loan.send().map(drop).map_err(io::Error::other)
            }
        }
    }

    #[inline]
    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let n = buf.len();
        if let Some(rt) = &self.rt {
            return recv_async(rt, &mut self.subscriber, self.params.payload, buf, waiter);
        }
        let sub = &self.subscriber;
        match self.params.payload {
            Payload::Copy => {
                // Straight into the caller's buffer: one copy out of the slot.
                // Two closures need the buffer in turn: route both through one cell.
                let data = std::cell::RefCell::new(&mut *buf);
                wait_for(
                    self.params.mode,
                    waiter,
                    || match sub.try_recv_into(&mut data.borrow_mut()) {
                        Ok(_) => Ok(Some(())),
                        Err(TopicTryRecvError::Empty) => Ok(None),
                        Err(TopicTryRecvError::Lagged { missed }) => Err(lagged(missed)),
                        Err(e) => Err(io::Error::other(e)),
                    },
                    |slice| match sub.recv_into_timeout(&mut data.borrow_mut(), slice) {
                        Ok(_) => Ok(Some(())),
                        Err(TopicRecvTimeoutError::Timeout) => Ok(None),
                        Err(e) => Err(io::Error::other(e)),
                    },
                )?;
                if buf.len() != n {
                    return Err(io::Error::other(format!("received {} bytes, expected {n}", buf.len())));
                }
            }
            Payload::Touch => {
                let (first, last) = wait_for(
                    self.params.mode,
                    waiter,
                    || match sub.try_recv_ref() {
                        Ok(s) => Ok(Some((s[0], s[s.len() - 1]))),
                        Err(TopicTryRecvError::Empty) => Ok(None),
                        Err(e) => Err(io::Error::other(e)),
                    },
                    |slice| match sub.recv_ref_timeout(slice) {
                        Ok(s) => Ok(Some((s[0], s[s.len() - 1]))),
                        Err(TopicRecvTimeoutError::Timeout) => Ok(None),
                        Err(e) => Err(io::Error::other(e)),
                    },
                )?;
                buf[0] = first;
                buf[n - 1] = last;
            }
        }
        Ok(())
    }
}

/// [`TopicEnd::recv`] in async mode.
fn recv_async(
    rt: &tokio::runtime::Runtime,
    sub: &mut Subscriber,
    payload: Payload,
    buf: &mut Vec<u8>,
    waiter: &mut Waiter<'_>,
) -> io::Result<()> {
    let n = buf.len();
    let bad = |e: shmbus::TopicRecvError| match e {
        shmbus::TopicRecvError::Lagged { missed } => lagged(missed),
        e => io::Error::other(e),
    };
    match payload {
        Payload::Copy => {
            let m = loop {
                match await_slice(rt, sub.recv_async()) {
                    Some(r) => break r.map_err(bad)?,
                    None => waiter.check()?,
                }
            };
            if m.data().len() != n {
                return Err(io::Error::other(format!("received {} bytes, expected {n}", m.data().len())));
            }
            // The message's bytes are what goes back: no second copy (the blocking receive
            // makes one copy too, straight into `buf`).
            *buf = m.into_data();
        }
        Payload::Touch => loop {
            match sub.try_recv_ref() {
                Ok(s) => {
                    buf[0] = s[0];
                    buf[n - 1] = s[s.len() - 1];
                    return Ok(());
                }
                Err(TopicTryRecvError::Empty) => {}
                Err(e) => return Err(io::Error::other(e)),
            }
            let channels: [&dyn shmbus::Waitable; 1] = [&*sub];
            match await_slice(rt, shmbus::r#async::wait(&channels)) {
                Some(r) => drop(r.map_err(io::Error::other)?),
                None => waiter.check()?,
            }
        },
    }
    Ok(())
}
