//! `queue`: two shmbus queues, `ping` and `pong` (one per direction), each with one producer
//! and one consumer. The payload is copied in (`try_send` / `send_timeout`) and out
//! (`try_recv_into` / `recv_into_timeout`, no allocation); the queue has no zero-copy verbs,
//! so `--payload touch` runs as copy. Spin mode busy-polls the non-blocking verbs; block
//! mode sets [`shmbus::WaitPolicy::BLOCK`] (sleep on the futex at once); async mode receives
//! with `recv_async().await` in a current-thread tokio runtime (a copy out, owned) and sends
//! as block mode does.

use std::io;

use shmbus::queue::{
    Consumer, Producer, Queue, QueueConfig, QueueRecvTimeoutError, QueueSendTimeoutError, QueueTryRecvError,
    QueueTrySendError,
};

use shmbus::r#async::AsyncRecv;

use super::shmbus_kinds::{async_runtime, await_slice, check_size, policy, wait_for, ScratchRoot};
use super::{Endpoint, Handoff, Mode, Params, Transport};
use crate::waiter::Waiter;

/// Cells per queue. A ping-pong has at most one message in flight per direction.
pub const CAPACITY: u64 = 16;

/// shmbus queues.
#[derive(Debug)]
pub struct QueueTransport;

fn end(root: ScratchRoot, params: &Params, tx: &str, rx: &str, create: bool) -> io::Result<Box<dyn Endpoint>> {
    check_size(params)?;
    let d = root.domain()?;
    let open = |name: &str| {
        if create {
            let cfg = QueueConfig::default().capacity(CAPACITY).max_message_len(params.size);
            Queue::create_or_open(&d, name, &cfg)
        } else {
            Queue::open(&d, name)
        }
        .map_err(io::Error::other)
    };
    let tx = open(tx)?;
    let rx = open(rx)?;
    let mut producer = tx.producer().map_err(io::Error::other)?;
    let mut consumer = rx.consumer().map_err(io::Error::other)?;
    producer.set_wait_policy(policy(params.mode));
    consumer.set_wait_policy(policy(params.mode));
    let rt = async_runtime(params.mode)?;
    Ok(Box::new(QueueEnd { _root: root, producer, consumer, params: *params, rt }))
}

impl Transport for QueueTransport {
    fn name(&self) -> &'static str {
        "queue"
    }

    fn mode(&self, requested: Mode) -> Mode {
        requested
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let (root, handoff) = ScratchRoot::create("queue")?;
        Ok((end(root, params, "ping", "pong", true)?, handoff))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        end(ScratchRoot::attach(&handoff)?, params, "pong", "ping", false)
    }
}

struct QueueEnd {
    _root: ScratchRoot,
    producer: Producer,
    consumer: Consumer,
    params: Params,
    /// Async mode's runtime.
    rt: Option<tokio::runtime::Runtime>,
}

impl Endpoint for QueueEnd {
    #[inline]
    fn send(&mut self, msg: &[u8], waiter: &mut Waiter<'_>) -> io::Result<()> {
        let p = &mut self.producer;
        let p = std::cell::RefCell::new(p);
        wait_for(
            self.params.mode,
            waiter,
            || match p.borrow_mut().try_send(msg) {
                Ok(()) => Ok(Some(())),
                Err(QueueTrySendError::Full) => Ok(None),
                Err(e) => Err(io::Error::other(e.to_string())),
            },
            |slice| match p.borrow_mut().send_timeout(msg, slice) {
                Ok(()) => Ok(Some(())),
                Err(QueueSendTimeoutError::Timeout) => Ok(None),
                Err(e) => Err(io::Error::other(e.to_string())),
            },
        )
    }

    #[inline]
    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        // `recv_into` replaces the contents of `buf`, whose capacity (it holds `size` bytes)
        // is the max message length: no allocation.
        let expected = buf.len();
        if let Some(rt) = &self.rt {
            let c = &mut self.consumer;
            let data = loop {
                match await_slice(rt, c.recv_async()) {
                    Some(r) => break r.map_err(io::Error::other)?,
                    None => waiter.check()?,
                }
            };
            if data.len() != expected {
                return Err(io::Error::other(format!("received {} bytes, expected {expected}", data.len())));
            }
            // The received bytes are what goes back: no second copy (the blocking receive
            // makes one copy too, straight into `buf`).
            *buf = data;
            return Ok(());
        }
        let c = std::cell::RefCell::new(&mut self.consumer);
        let b = std::cell::RefCell::new(buf);
        let n = wait_for(
            self.params.mode,
            waiter,
            || match c.borrow_mut().try_recv_into(&mut b.borrow_mut()) {
                Ok(n) => Ok(Some(n)),
                Err(QueueTryRecvError::Empty) => Ok(None),
                Err(e) => Err(io::Error::other(e)),
            },
            |slice| match c.borrow_mut().recv_into_timeout(&mut b.borrow_mut(), slice) {
                Ok(n) => Ok(Some(n)),
                Err(QueueRecvTimeoutError::Timeout) => Ok(None),
                Err(e) => Err(io::Error::other(e)),
            },
        )?;
        if n != expected {
            return Err(io::Error::other(format!("received {n} bytes, expected {expected}")));
        }
        Ok(())
    }
}
