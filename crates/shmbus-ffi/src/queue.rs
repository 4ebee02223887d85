//! Queue: a bounded MPMC queue, each message to exactly one consumer. `shmbus_queue_*`,
//! `shmbus_producer_*`, `shmbus_consumer_*`. It has no loan and no zero-copy receive.

use std::ffi::{c_char, c_void};

use shmbus::{Consumer, Producer, Queue, QueueConfig, QueueStatus};

use crate::call::*;
use crate::domain::shmbus_domain;
use crate::handle::*;
use crate::schema::*;
use crate::status::*;

/// Settings for `shmbus_queue_create_or_open` (unset values: as the existing queue, or the
/// defaults when created).
#[derive(Debug)]
pub struct shmbus_queue_config {
    h: Handle<QueueConfig>,
}

/// An open queue. Endpoints made from it do not borrow it.
#[derive(Debug)]
pub struct shmbus_queue {
    h: Handle<Queue>,
}

/// A queue's producer.
#[derive(Debug)]
pub struct shmbus_producer {
    h: Handle<Producer>,
}

/// A queue's consumer.
#[derive(Debug)]
pub struct shmbus_consumer {
    h: Handle<Cons>,
}

/// A snapshot of a queue (`shmbus_queue_status`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shmbus_queue_status_info {
    /// Most messages held.
    pub capacity: u64,
    /// Largest message in bytes.
    pub max_message_len: u64,
    /// Messages held now.
    pub depth: u64,
    /// Live producers.
    pub producers: u64,
    /// Live consumers.
    pub consumers: u64,
    /// Messages sent over the queue's life.
    pub sent: u64,
    /// Messages received over the queue's life.
    pub received: u64,
    /// Claims abandoned by dead producers.
    pub abandoned: u64,
    /// Messages lost with dead consumers.
    pub lost: u64,
}

/// The consumer (which keeps a message too large for the caller's buffer itself).
#[derive(Debug)]
pub(crate) struct Cons {
    pub(crate) consumer: Consumer,
}

waitable_via!(Cons => consumer);

impl From<QueueStatus> for shmbus_queue_status_info {
    fn from(s: QueueStatus) -> Self {
        shmbus_queue_status_info {
            capacity: s.capacity,
            max_message_len: s.max_message_len as u64,
            depth: s.depth,
            producers: s.producers as u64,
            consumers: s.consumers as u64,
            sent: s.sent,
            received: s.received,
            abandoned: s.abandoned,
            lost: s.lost,
        }
    }
}

wrapper!(
    shmbus_queue_config => QueueConfig,
    shmbus_queue => Queue,
    shmbus_producer => Producer,
    shmbus_consumer => Cons,
);

/// Makes a queue config with nothing set.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_config_new(out: *mut *mut shmbus_queue_config) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, QueueConfig::default()) })
}

/// Frees a queue config (NULL: nothing).
///
/// # Safety
/// `config` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_config_free(config: *mut shmbus_queue_config) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(config) })
}

/// Sets how many messages the queue holds.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_config_set_capacity(config: *mut shmbus_queue_config, n: u64) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.capacity(n)) }
}

/// Sets the largest message, in bytes.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_config_set_max_message_len(
    config: *mut shmbus_queue_config,
    len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.max_message_len(len)) }
}

/// Sets the file mode of a created queue.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_config_set_mode(config: *mut shmbus_queue_config, mode: u32) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.mode(mode)) }
}

/// Sets the group id of a created queue.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_config_set_group(config: *mut shmbus_queue_config, gid: u32) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.group(gid)) }
}

/// Sets the schema of the queue's messages (see `shmbus_schema`): `message_encoding` (`cdr`,
/// `protobuf`, `json`, ...; required), `schema_name` and `schema_encoding` (NULL: empty) and
/// `data_len` bytes of schema data at `data` (NULL with 0: none; at most
/// `SHMBUS_SCHEMA_MAX_DATA`). A created queue stores it; an existing queue must carry the same
/// schema (`SHMBUS_SCHEMA_MISMATCH`). Without this setter any schema is accepted. An invalid
/// schema (empty message encoding, a text over `SHMBUS_SCHEMA_MAX_TEXT` bytes or with a
/// control character, data too long or without a schema encoding) is
/// `SHMBUS_INVALID_CONFIG`, and the config is left as it was.
///
/// # Safety
/// `config` is NULL or live; the texts NULL or NUL-terminated; `data` valid for `data_len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_config_set_schema(
    config: *mut shmbus_queue_config,
    message_encoding: *const c_char,
    schema_name: *const c_char,
    schema_encoding: *const c_char,
    data: *const c_void,
    data_len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set_schema(config, message_encoding, schema_name, schema_encoding, data, data_len, |c, s| c.schema(s)) }
}

/// Opens queue `name` in `domain`, creating it with `config` (NULL: defaults) if it does not
/// exist. Codes as `shmbus_topic_create_or_open`.
///
/// # Safety
/// `domain`, `config` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_create_or_open(
    domain: *const shmbus_domain,
    name: *const c_char,
    config: *const shmbus_queue_config,
    out: *mut *mut shmbus_queue,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { open_in(domain, name, out, |d, n| Ok(Queue::create_or_open(d, n, &config_or_default(config)?)?)) }
}

/// Opens the existing queue `name` (`SHMBUS_NOT_FOUND` if there is none).
///
/// # Safety
/// `domain` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_open(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut *mut shmbus_queue,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { open_in(domain, name, out, |d, n| Ok(Queue::open(d, n)?)) }
}

/// Reads the state of queue `name` (read permission suffices).
///
/// # Safety
/// `domain` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_status(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut shmbus_queue_status_info,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { status_in(domain, name, out, |d, n| Ok(Queue::status(d, n)?)) }
}

/// Maps every page of the queue into this process now, so that no send or receive of
/// this process takes a page fault the first time it touches a page (NULL: nothing). For a
/// long-lived process on a latency path; advice only (nothing before Linux 5.14). See
/// `docs/topic.md`, "Sizing".
///
/// # Safety
/// `queue` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_prefault(queue: *const shmbus_queue) {
    // SAFETY: per this function's contract.
    unsafe { value_of(queue, (), |h| h.prefault()) }
}

/// The queue's schema, set by its creator, into `*out`: `SHMBUS_OK`, or `SHMBUS_NOT_FOUND` (and
/// `*out` all NULL and zero) when it has none. The pointers stay valid until `queue` is freed.
///
/// # Safety
/// `queue` is NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_schema(queue: *const shmbus_queue, out: *mut shmbus_schema) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { schema_of(queue, out, "queue", |c| c.schema()) }
}

/// Frees a queue handle (NULL: nothing). Its endpoints stay usable.
///
/// # Safety
/// `queue` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_free(queue: *mut shmbus_queue) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(queue) })
}

/// Makes a producer.
///
/// # Safety
/// `queue` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_producer(
    queue: *const shmbus_queue,
    out: *mut *mut shmbus_producer,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, with_ref(queue, |q| Ok(q.producer()?))?) })
}

/// Makes a consumer.
///
/// # Safety
/// `queue` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_queue_consumer(
    queue: *const shmbus_queue,
    out: *mut *mut shmbus_consumer,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            let consumer = with_ref(queue, |q| Ok(q.consumer()?))?;
            into_c(out, Cons { consumer })
        }
    })
}

/// Sends `len` bytes from `data` if there is room now (`SHMBUS_FULL` if not). Codes also
/// `SHMBUS_TOO_LARGE`, `SHMBUS_CORRUPT`, `SHMBUS_TRUNCATED`.
///
/// # Safety
/// `producer` NULL or live; `data` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_producer_try_send(
    producer: *mut shmbus_producer,
    data: *const c_void,
    len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { with_mut(producer, |p| Ok(p.try_send(bytes_arg(data, len)?)?)) })
}

/// `shmbus_producer_try_send`, waiting as long as it takes for room.
///
/// # Safety
/// As `shmbus_producer_try_send`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_producer_send(
    producer: *mut shmbus_producer,
    data: *const c_void,
    len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { with_mut(producer, |p| Ok(p.send(bytes_arg(data, len)?)?)) })
}

/// `shmbus_producer_try_send`, waiting at most `timeout_ns` for room (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_producer_try_send`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_producer_send_timeout(
    producer: *mut shmbus_producer,
    data: *const c_void,
    len: usize,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { with_mut(producer, |p| Ok(p.send_timeout(bytes_arg(data, len)?, timeout(timeout_ns))?)) })
}

/// Sets how the producer's blocking sends wait: busy-poll `spin_ns` nanoseconds before sleeping
/// (0: sleep at once; `UINT64_MAX`: never sleep; the default is 20 µs).
///
/// # Safety
/// `producer` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_producer_set_wait_policy(
    producer: *mut shmbus_producer,
    spin_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_mut(producer, |e| e.set_wait_policy(wait_policy(spin_ns))) }
}

/// Frees a producer (NULL: nothing).
///
/// # Safety
/// `producer` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_producer_free(producer: *mut shmbus_producer) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(producer) })
}

/// # Safety
/// As the exported receives.
unsafe fn recv_copy(
    consumer: *mut shmbus_consumer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    wait: Wait,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per the caller's contract.
        unsafe {
            with_mut(consumer, |e| {
                let c = &mut e.consumer;
                recv_into_buf(buf, cap, len_out, |dst| c.recv_into_slice_with(dst, wait).settle(wait), |&n| n).map(drop)
            })
        }
    })
}

/// Receives the next message if there is one now (`SHMBUS_EMPTY` if not), copying it into
/// `buf` (`cap` bytes) and its length to `*len_out`. A message larger than `cap` is
/// `SHMBUS_BUFFER_TOO_SMALL` with its length in `*len_out`: it has left the queue, and this
/// consumer keeps it for its next receive call.
///
/// # Safety
/// `consumer` NULL or live; `buf` valid for `cap` bytes; `len_out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_consumer_try_recv(
    consumer: *mut shmbus_consumer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(consumer, buf, cap, len_out, Wait::Now) }
}

/// `shmbus_consumer_try_recv`, waiting as long as it takes.
///
/// # Safety
/// As `shmbus_consumer_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_consumer_recv(
    consumer: *mut shmbus_consumer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(consumer, buf, cap, len_out, Wait::Forever) }
}

/// `shmbus_consumer_try_recv`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_consumer_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_consumer_recv_timeout(
    consumer: *mut shmbus_consumer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(consumer, buf, cap, len_out, wait_ns(timeout_ns)) }
}

/// Receives the next message into memory the caller keeps (the other bindings'
/// `recv_into`): the same as `shmbus_consumer_try_recv`. One copy from shared memory into
/// `buf`, no allocation; a message longer than `cap` is `SHMBUS_BUFFER_TOO_SMALL` with its
/// length in `*len_out`, kept for the next receive.
///
/// # Safety
/// As `shmbus_consumer_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_consumer_try_recv_into(
    consumer: *mut shmbus_consumer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(consumer, buf, cap, len_out, Wait::Now) }
}

/// `shmbus_consumer_try_recv_into`, waiting as long as it takes
/// (`shmbus_consumer_recv`).
///
/// # Safety
/// As `shmbus_consumer_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_consumer_recv_into(
    consumer: *mut shmbus_consumer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(consumer, buf, cap, len_out, Wait::Forever) }
}

/// `shmbus_consumer_try_recv_into`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`;
/// `shmbus_consumer_recv_timeout`).
///
/// # Safety
/// As `shmbus_consumer_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_consumer_recv_into_timeout(
    consumer: *mut shmbus_consumer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(consumer, buf, cap, len_out, wait_ns(timeout_ns)) }
}

/// Sets how the consumer's blocking receives wait: busy-poll `spin_ns` nanoseconds before sleeping
/// (0: sleep at once; `UINT64_MAX`: never sleep; the default is 20 µs).
///
/// # Safety
/// `consumer` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_consumer_set_wait_policy(
    consumer: *mut shmbus_consumer,
    spin_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_mut(consumer, |e| e.consumer.set_wait_policy(wait_policy(spin_ns))) }
}

/// Frees a consumer (NULL: nothing); a message it kept for a larger buffer is lost.
///
/// # Safety
/// `consumer` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_consumer_free(consumer: *mut shmbus_consumer) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(consumer) })
}
