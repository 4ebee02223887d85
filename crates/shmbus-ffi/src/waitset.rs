//! `shmbus_waitset`: sleeping on any set of endpoints of any kinds at once.
//!
//! The Rust `WaitSet` takes the endpoints at each wait (`WaitSet::wait(&[&dyn Waitable])`);
//! the C one remembers the endpoints added to it (by pointer, in order) and lends them to the
//! Rust wait for the duration of each call, so between waits they stay free for receives.

use std::ffi::c_void;

use shmbus::{WaitSet, Waitable};

use crate::handle::*;
use crate::journal::shmbus_tailer;
use crate::pool::{shmbus_dispatcher, shmbus_worker};
use crate::queue::{shmbus_consumer, shmbus_producer};
use crate::status::*;
use crate::stream::{shmbus_stream_reader, shmbus_stream_writer};
use crate::topic::shmbus_subscriber;

/// A wait set: endpoints added with `shmbus_waitset_add_*` (each gets the next index, from
/// 0), then `shmbus_waitset_wait*` says which are ready. The endpoints are not owned: free
/// the wait set (or `shmbus_waitset_clear` it) before freeing an endpoint in it.
pub struct shmbus_waitset {
    set: WaitSet,
    members: Vec<Member>,
    /// Scratch for each wait: the members lent as `Waitable`s (empty between calls).
    scratch: Vec<&'static dyn Waitable>,
}

impl std::fmt::Debug for shmbus_waitset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("shmbus_waitset").field("members", &self.members).finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy)]
enum Member {
    Subscriber(*const shmbus_subscriber),
    Producer(*const shmbus_producer),
    Consumer(*const shmbus_consumer),
    StreamWriter(*const shmbus_stream_writer),
    StreamReader(*const shmbus_stream_reader),
    Dispatcher(*const shmbus_dispatcher),
    Worker(*const shmbus_worker),
    Tailer(*const shmbus_tailer),
}

impl Member {
    /// The endpoint as a `Waitable`.
    ///
    /// # Safety
    /// The endpoint is live and is not borrowed mutably while the reference is used.
    unsafe fn waitable(self) -> Result<&'static dyn Waitable, Error> {
        // SAFETY: per the caller.
        unsafe {
            Ok(match self {
                Member::Subscriber(p) => peek(p)?,
                Member::Producer(p) => peek(p)?,
                Member::Consumer(p) => peek(p)?,
                Member::StreamWriter(p) => peek(p)?,
                Member::StreamReader(p) => peek(p)?,
                Member::Dispatcher(p) => peek(p)?,
                Member::Worker(p) => peek(p)?,
                Member::Tailer(p) => peek(p)?,
            })
        }
    }
}

/// Makes an empty wait set.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_new(out: *mut *mut shmbus_waitset) -> shmbus_status {
    guard(|| {
        let ws = shmbus_waitset { set: WaitSet::new(), members: Vec::new(), scratch: Vec::new() };
        // SAFETY: per this function's contract.
        unsafe { lent_into_c(out, ws) }
    })
}

/// Frees a wait set (NULL: nothing); the endpoints in it are untouched.
///
/// # Safety
/// `ws` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_free(ws: *mut shmbus_waitset) {
    if !ws.is_null() {
        // SAFETY: made by `lent_into_c` in `shmbus_waitset_new`, given up by the caller.
        guard_value((), || drop(unsafe { Box::from_raw(ws) }))
    }
}

/// Removes every endpoint from the wait set (the next one added gets index 0).
///
/// # Safety
/// `ws` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_clear(ws: *mut shmbus_waitset) -> shmbus_status {
    guard(|| {
        // SAFETY: NULL or live, per this function's contract.
        let ws = unsafe { ws.as_mut() }.ok_or_else(|| Error::null("shmbus_waitset"))?;
        ws.members.clear();
        Ok(())
    })
}

/// # Safety
/// `ws` NULL or live; `index_out` NULL or valid.
unsafe fn add(
    ws: *mut shmbus_waitset,
    endpoint: *const c_void,
    member: Member,
    index_out: *mut usize,
) -> shmbus_status {
    guard(|| {
        // SAFETY: NULL or live, per the caller's contract.
        let ws = unsafe { ws.as_mut() }.ok_or_else(|| Error::null("shmbus_waitset"))?;
        if endpoint.is_null() {
            return Err(Error::null("the endpoint"));
        }
        ws.members.push(member);
        // SAFETY: per the caller's contract.
        unsafe { put(index_out, ws.members.len() - 1) };
        Ok(())
    })
}

/// Adds a topic subscriber (ready: a message to read); its index goes to `*index_out` (NULL:
/// not wanted). The same shape for every `shmbus_waitset_add_*`.
///
/// # Safety
/// `ws` NULL or live; the endpoint NULL or live, and live as long as it is in the set;
/// `index_out` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_add_subscriber(
    ws: *mut shmbus_waitset,
    subscriber: *const shmbus_subscriber,
    index_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { add(ws, subscriber.cast(), Member::Subscriber(subscriber), index_out) }
}

/// Adds a queue producer (ready: room to send).
///
/// # Safety
/// As `shmbus_waitset_add_subscriber`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_add_producer(
    ws: *mut shmbus_waitset,
    producer: *const shmbus_producer,
    index_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { add(ws, producer.cast(), Member::Producer(producer), index_out) }
}

/// Adds a queue consumer (ready: a message to read).
///
/// # Safety
/// As `shmbus_waitset_add_subscriber`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_add_consumer(
    ws: *mut shmbus_waitset,
    consumer: *const shmbus_consumer,
    index_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { add(ws, consumer.cast(), Member::Consumer(consumer), index_out) }
}

/// Adds a stream writer (ready: room to write, or the reader gone).
///
/// # Safety
/// As `shmbus_waitset_add_subscriber`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_add_stream_writer(
    ws: *mut shmbus_waitset,
    writer: *const shmbus_stream_writer,
    index_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { add(ws, writer.cast(), Member::StreamWriter(writer), index_out) }
}

/// Adds a stream reader (ready: a record to read, or the writer gone).
///
/// # Safety
/// As `shmbus_waitset_add_subscriber`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_add_stream_reader(
    ws: *mut shmbus_waitset,
    reader: *const shmbus_stream_reader,
    index_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { add(ws, reader.cast(), Member::StreamReader(reader), index_out) }
}

/// Adds a pool dispatcher (ready: a worker idle).
///
/// # Safety
/// As `shmbus_waitset_add_subscriber`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_add_dispatcher(
    ws: *mut shmbus_waitset,
    dispatcher: *const shmbus_dispatcher,
    index_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { add(ws, dispatcher.cast(), Member::Dispatcher(dispatcher), index_out) }
}

/// Adds a pool worker (ready: a job in its mailbox, or its dispatcher gone). Call
/// `shmbus_worker_done` first: only an idle worker is given jobs.
///
/// # Safety
/// As `shmbus_waitset_add_subscriber`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_add_worker(
    ws: *mut shmbus_waitset,
    worker: *const shmbus_worker,
    index_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { add(ws, worker.cast(), Member::Worker(worker), index_out) }
}

/// Adds a journal tailer or named reader (ready: an entry to read).
///
/// # Safety
/// As `shmbus_waitset_add_subscriber`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_add_tailer(
    ws: *mut shmbus_waitset,
    tailer: *const shmbus_tailer,
    index_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { add(ws, tailer.cast(), Member::Tailer(tailer), index_out) }
}

/// How to wait.
#[derive(Clone, Copy)]
enum Mode {
    Poll,
    Block,
    Timeout(u64),
}

/// # Safety
/// `ws` NULL or live, its members live; `ready` valid for `cap` values; `n_out` valid.
unsafe fn wait(ws: *mut shmbus_waitset, ready: *mut usize, cap: usize, n_out: *mut usize, mode: Mode) -> shmbus_status {
    guard(|| {
        // SAFETY: NULL or live, per the caller's contract.
        let ws = unsafe { ws.as_mut() }.ok_or_else(|| Error::null("shmbus_waitset"))?;
        if n_out.is_null() {
            return Err(Error::null("n_out"));
        }
        if ready.is_null() && cap != 0 {
            return Err(Error::null("ready"));
        }
        ws.scratch.clear();
        for m in &ws.members {
            // SAFETY: members are live (the caller's contract); the references are used only
            // during this call, which makes no call that could borrow them mutably, and are
            // dropped (`scratch.clear()`) before it returns.
            match unsafe { m.waitable() } {
                Ok(w) => ws.scratch.push(w),
                Err(e) => {
                    ws.scratch.clear();
                    return Err(e);
                }
            }
        }
        let result = match mode {
            Mode::Poll => Ok(ws.set.poll(&ws.scratch)),
            Mode::Block => ws.set.wait(&ws.scratch).map_err(Error::from),
            Mode::Timeout(ns) => ws.set.wait_timeout(&ws.scratch, timeout(ns)).map_err(Error::from),
        };
        let out = result.map(|indices| {
            for (i, &index) in indices.iter().take(cap).enumerate() {
                // SAFETY: `ready` holds `cap` values, per the caller's contract.
                unsafe { ready.add(i).write(index) };
            }
            indices.len()
        });
        ws.scratch.clear();
        let n = out?;
        // SAFETY: checked non-NULL; valid per the caller's contract.
        unsafe { n_out.write(n) };
        Ok(())
    })
}

/// Waits until at least one endpoint in the set is ready. The indices of the ready ones go to
/// `ready` (up to `cap` of them), their number to `*n_out` (at least 1; it may exceed `cap`).
/// Then receive (or send) on them with the `try` calls: ready means "may make progress", and
/// another process may get there first. `SHMBUS_INVALID_ARGUMENT` for an empty set or one of
/// more than 128 endpoints; `SHMBUS_BUSY` if an endpoint has a loan or record out.
///
/// # Safety
/// `ws` NULL or live, and every endpoint in it live; `ready` valid for `cap` values (NULL if
/// `cap` is 0); `n_out` valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_wait(
    ws: *mut shmbus_waitset,
    ready: *mut usize,
    cap: usize,
    n_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { wait(ws, ready, cap, n_out, Mode::Block) }
}

/// `shmbus_waitset_wait`, giving up after `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_waitset_wait`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_wait_timeout(
    ws: *mut shmbus_waitset,
    ready: *mut usize,
    cap: usize,
    n_out: *mut usize,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { wait(ws, ready, cap, n_out, Mode::Timeout(timeout_ns)) }
}

/// The endpoints ready now, without sleeping (`*n_out` may be 0).
///
/// # Safety
/// As `shmbus_waitset_wait`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_waitset_poll(
    ws: *mut shmbus_waitset,
    ready: *mut usize,
    cap: usize,
    n_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { wait(ws, ready, cap, n_out, Mode::Poll) }
}
