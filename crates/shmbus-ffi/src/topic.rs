//! Topic: broadcast publish/subscribe with history. `shmbus_topic_*`, `shmbus_publisher_*`,
//! `shmbus_loan_*`, `shmbus_subscriber_*`, `shmbus_sample_*`.

use std::ffi::{c_char, c_void};
use std::time::Duration;

use shmbus::topic::{MessageInfo, OwnedLoan, OwnedSample, TopicStatus};
use shmbus::{DeliveryPolicy, Publisher, Subscriber, Topic, TopicConfig};

use crate::call::*;
use crate::domain::shmbus_domain;
use crate::handle::*;
use crate::schema::*;
use crate::status::*;

/// Settings for `shmbus_topic_create_or_open`: unset values accept what an existing topic has
/// and take the defaults when the topic is created. Made by `shmbus_topic_config_new`, freed
/// by `shmbus_topic_config_free`.
#[derive(Debug)]
pub struct shmbus_topic_config {
    h: Handle<TopicConfig>,
}

/// An open topic (maps its file). Endpoints made from it do not borrow it.
#[derive(Debug)]
pub struct shmbus_topic {
    h: Handle<Topic>,
}

/// Delivery policy `overwrite` (the default): publishers never wait; the oldest message
/// beyond the history is overwritten. A topic with it refuses reliable subscribers.
pub const SHMBUS_POLICY_OVERWRITE: u32 = 0;
/// Delivery policy `block`: a send that would overwrite a message a reliable subscriber has
/// not read waits for it (`shmbus_publisher_try_send`: `SHMBUS_FULL`).
pub const SHMBUS_POLICY_BLOCK: u32 = 1;
/// Delivery policy `fail`: such a send fails at once with `SHMBUS_FULL`.
pub const SHMBUS_POLICY_FAIL: u32 = 2;

/// A topic's publisher. On an `overwrite` topic it never waits: the oldest message beyond the
/// history is overwritten. On a `block` or `fail` topic it does not overwrite what a reliable
/// subscriber has not read.
#[derive(Debug)]
pub struct shmbus_publisher {
    h: Handle<Publisher>,
}

/// A topic's subscriber: reads every message in order from where it joined.
#[derive(Debug)]
pub struct shmbus_subscriber {
    h: Handle<Subscriber>,
}

/// A slot loaned from a publisher (`shmbus_publisher_loan`): write the message into
/// `shmbus_loan_data`, then `shmbus_loan_send` or `shmbus_loan_discard` (either frees it).
/// While it is out, calls on its publisher fail with `SHMBUS_BUSY`.
#[derive(Debug)]
pub struct shmbus_loan {
    item: OwnedLoan,
}

/// A message read in place (zero-copy) by `shmbus_subscriber_*_recv_ref`: pinned in shared
/// memory, so no publisher overwrites it until `shmbus_sample_release`. Several may be out at
/// once (up to the subscriber's pin budget, 2 by default). On a topic of slots up to 40 bytes
/// a sample is a copy instead (the same calls; it pins nothing and is not in the budget).
#[derive(Debug)]
pub struct shmbus_sample {
    item: OwnedSample,
}

/// A snapshot of a topic (`shmbus_topic_status`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shmbus_topic_status_info {
    /// Largest message in bytes.
    pub max_message_len: u64,
    /// Guaranteed history depth.
    pub history: u64,
    /// Total slots (history + spare).
    pub slots: u64,
    /// Highest committed sequence number (0: none yet).
    pub last_seq: u64,
    /// Live publishers.
    pub publishers: u64,
    /// Live subscribers.
    pub subscribers: u64,
    /// Slots pinned right now.
    pub pinned_slots: u64,
    /// The delivery policy (`SHMBUS_POLICY_OVERWRITE`, `_BLOCK`, `_FAIL`).
    pub policy: u32,
    /// How long a live reliable subscriber may hold publishers back without reading, in ms.
    pub reliable_timeout_ms: u64,
    /// Live reliable subscribers (not evicted).
    pub reliable_subscribers: u64,
}

impl From<TopicStatus> for shmbus_topic_status_info {
    fn from(s: TopicStatus) -> Self {
        shmbus_topic_status_info {
            max_message_len: s.max_message_len,
            history: s.history,
            slots: s.slots,
            last_seq: s.last_seq,
            publishers: s.publishers as u64,
            subscribers: s.subscribers as u64,
            pinned_slots: s.pinned_slots as u64,
            policy: s.policy as u32,
            reliable_timeout_ms: u64::try_from(s.reliable_timeout.as_millis()).unwrap_or(u64::MAX),
            reliable_subscribers: s.reliable_subscribers as u64,
        }
    }
}

lent_item! {
    shmbus_loan => OwnedLoan;
    shmbus_sample => OwnedSample;
}

wrapper!(
    shmbus_topic_config => TopicConfig,
    shmbus_topic => Topic,
    shmbus_publisher => Publisher,
    shmbus_subscriber => Subscriber,
);

/// Makes a topic config with nothing set.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_config_new(out: *mut *mut shmbus_topic_config) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, TopicConfig::default()) })
}

/// Frees a topic config (NULL: nothing).
///
/// # Safety
/// `config` is NULL or a live config, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_config_free(config: *mut shmbus_topic_config) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(config) })
}

/// Sets the largest message, in bytes.
///
/// # Safety
/// `config` is NULL or a live config.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_config_set_max_message_len(
    config: *mut shmbus_topic_config,
    len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.max_message_len(len)) }
}

/// Sets the guaranteed history: how many recent messages stay readable.
///
/// # Safety
/// `config` is NULL or a live config.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_config_set_history(config: *mut shmbus_topic_config, n: usize) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.history(n)) }
}

/// Sets the spare slots beyond the history (room for pinned samples and slow writers).
///
/// # Safety
/// `config` is NULL or a live config.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_config_set_spare_slots(
    config: *mut shmbus_topic_config,
    n: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.spare_slots(n)) }
}

/// Sets the delivery policy: `SHMBUS_POLICY_OVERWRITE` (the default), `SHMBUS_POLICY_BLOCK`
/// or `SHMBUS_POLICY_FAIL` (`SHMBUS_INVALID_ARGUMENT` for another number).
///
/// # Safety
/// `config` is NULL or a live config.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_config_set_policy(
    config: *mut shmbus_topic_config,
    policy: u32,
) -> shmbus_status {
    let Some(policy) = DeliveryPolicy::from_u64(u64::from(policy)) else {
        return guard(|| {
            Err(Error::new(
                SHMBUS_INVALID_ARGUMENT,
                format_args!("unknown delivery policy {policy}: expected SHMBUS_POLICY_OVERWRITE, _BLOCK or _FAIL"),
            ))
        });
    };
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.policy(policy)) }
}

/// Sets the reliable timeout, in milliseconds: how long a live reliable subscriber may hold a
/// publisher back without reading before it is evicted.
///
/// # Safety
/// `config` is NULL or a live config.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_config_set_reliable_timeout_ms(
    config: *mut shmbus_topic_config,
    ms: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.reliable_timeout(Duration::from_millis(ms))) }
}

/// Sets the file mode of a created topic (e.g. `0660`).
///
/// # Safety
/// `config` is NULL or a live config.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_config_set_mode(config: *mut shmbus_topic_config, mode: u32) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.mode(mode)) }
}

/// Sets the group id of a created topic.
///
/// # Safety
/// `config` is NULL or a live config.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_config_set_group(config: *mut shmbus_topic_config, gid: u32) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.group(gid)) }
}

/// Sets the schema of the topic's messages (see `shmbus_schema`): `message_encoding` (`cdr`,
/// `protobuf`, `json`, ...; required), `schema_name` and `schema_encoding` (NULL: empty) and
/// `data_len` bytes of schema data at `data` (NULL with 0: none; at most
/// `SHMBUS_SCHEMA_MAX_DATA`). A created topic stores it; an existing topic must carry the same
/// schema (`SHMBUS_SCHEMA_MISMATCH`). Without this setter any schema is accepted. An invalid
/// schema (empty message encoding, a text over `SHMBUS_SCHEMA_MAX_TEXT` bytes or with a
/// control character, data too long or without a schema encoding) is
/// `SHMBUS_INVALID_CONFIG`, and the config is left as it was.
///
/// # Safety
/// `config` is NULL or live; the texts NULL or NUL-terminated; `data` valid for `data_len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_config_set_schema(
    config: *mut shmbus_topic_config,
    message_encoding: *const c_char,
    schema_name: *const c_char,
    schema_encoding: *const c_char,
    data: *const c_void,
    data_len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set_schema(config, message_encoding, schema_name, schema_encoding, data, data_len, |c, s| c.schema(s)) }
}

/// Opens topic `name` in `domain`, creating it with `config` (NULL: defaults) if it does not
/// exist, and stores the handle in `*out`. Codes: `SHMBUS_LAYOUT_MISMATCH` (a set value
/// differs from the existing topic), `SHMBUS_INVALID_CONFIG`, `SHMBUS_INVALID_NAME`,
/// `SHMBUS_PERMISSION_DENIED`, `SHMBUS_UNTRUSTED`, `SHMBUS_INCOMPATIBLE`, `SHMBUS_IO`, ...
///
/// # Safety
/// `domain` and `config` are NULL or live handles; `name` a NUL-terminated string; `out`
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_create_or_open(
    domain: *const shmbus_domain,
    name: *const c_char,
    config: *const shmbus_topic_config,
    out: *mut *mut shmbus_topic,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { open_in(domain, name, out, |d, n| Ok(Topic::create_or_open(d, n, &config_or_default(config)?)?)) }
}

/// Opens the existing topic `name` in `domain` (`SHMBUS_NOT_FOUND` if there is none).
///
/// # Safety
/// `domain` is NULL or live; `name` a NUL-terminated string; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_open(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut *mut shmbus_topic,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { open_in(domain, name, out, |d, n| Ok(Topic::open(d, n)?)) }
}

/// Reads the state of topic `name` through a read-only mapping (read permission suffices).
///
/// # Safety
/// `domain` is NULL or live; `name` a NUL-terminated string; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_status(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut shmbus_topic_status_info,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { status_in(domain, name, out, |d, n| Ok(Topic::status(d, n)?)) }
}

/// The topic's largest message, in bytes (0 if `topic` is NULL).
///
/// # Safety
/// `topic` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_max_message_len(topic: *const shmbus_topic) -> usize {
    // SAFETY: per this function's contract.
    unsafe { value_of(topic, 0, |t| t.max_message_len()) }
}

/// Maps every page of the topic into this process now, so that no send or receive of
/// this process takes a page fault the first time it touches a page (NULL: nothing). For a
/// long-lived process on a latency path; advice only (nothing before Linux 5.14). See
/// `docs/topic.md`, "Sizing".
///
/// # Safety
/// `topic` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_prefault(topic: *const shmbus_topic) {
    // SAFETY: per this function's contract.
    unsafe { value_of(topic, (), |h| h.prefault()) }
}

/// The topic's schema, set by its creator, into `*out`: `SHMBUS_OK`, or `SHMBUS_NOT_FOUND` (and
/// `*out` all NULL and zero) when it has none. The pointers stay valid until `topic` is freed.
///
/// # Safety
/// `topic` is NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_schema(topic: *const shmbus_topic, out: *mut shmbus_schema) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { schema_of(topic, out, "topic", |c| c.schema()) }
}

/// Frees a topic handle (NULL: nothing). Its endpoints stay usable.
///
/// # Safety
/// `topic` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_free(topic: *mut shmbus_topic) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(topic) })
}

/// Makes a publisher (`SHMBUS_TOO_MANY_PARTICIPANTS` when the table is full).
///
/// # Safety
/// `topic` is NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_publisher(
    topic: *const shmbus_topic,
    out: *mut *mut shmbus_publisher,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, with_ref(topic, |t| Ok(t.publisher()?))?) })
}

/// Makes a subscriber; it reads the messages published from now on.
///
/// # Safety
/// `topic` is NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_subscriber(
    topic: *const shmbus_topic,
    out: *mut *mut shmbus_subscriber,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            let sub = with_ref(topic, |t| Ok(t.subscriber()?))?;
            into_c(out, sub)
        }
    })
}

/// Makes a reliable subscriber (on a `block` or `fail` topic; `SHMBUS_INVALID_CONFIG` on an
/// `overwrite` one): publishers do not overwrite a message it has not read, unless it stands
/// still for the topic's reliable timeout; it is then evicted (its next receive returns
/// `SHMBUS_EVICTED` once) and reads on as a lossy subscriber. It reads the messages published
/// from now on.
///
/// # Safety
/// `topic` is NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_reliable_subscriber(
    topic: *const shmbus_topic,
    out: *mut *mut shmbus_subscriber,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            let sub = with_ref(topic, |t| Ok(t.reliable_subscriber()?))?;
            into_c(out, sub)
        }
    })
}

/// The topic's delivery policy (`SHMBUS_POLICY_*`; `SHMBUS_POLICY_OVERWRITE` if `topic` is
/// NULL).
///
/// # Safety
/// `topic` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_topic_policy(topic: *const shmbus_topic) -> u32 {
    // SAFETY: per this function's contract.
    unsafe { value_of(topic, SHMBUS_POLICY_OVERWRITE, |t| t.policy() as u32) }
}

/// The sends by copy; the sequence number goes to `*seq_out`.
///
/// # Safety
/// As the exported sends.
unsafe fn send_copy(
    publisher: *mut shmbus_publisher,
    data: *const c_void,
    len: usize,
    seq_out: *mut u64,
    wait: Wait,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per the caller's contract.
        unsafe {
            let seq = with_mut(publisher, |p| {
                let data = bytes_arg(data, len)?;
                p.send_with(data, wait).settle(wait)
            })?;
            put(seq_out, seq);
            Ok(())
        }
    })
}

/// Publishes `len` bytes from `data` (copied); the sequence number goes to `*seq_out` (NULL:
/// not wanted). On an `overwrite` topic it never waits; on a `block` topic it waits while a
/// reliable subscriber has not read the message it would overwrite (at most the topic's
/// reliable timeout per stuck subscriber, which is then evicted); on a `fail` topic that is
/// `SHMBUS_FULL` (`shmbus_last_error_value()`: the oldest sequence number still needed).
/// Codes also: `SHMBUS_TOO_LARGE`, `SHMBUS_PINNED`, `SHMBUS_TRUNCATED`.
///
/// # Safety
/// `publisher` is NULL or live; `data` valid for `len` bytes; `seq_out` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_publisher_send(
    publisher: *mut shmbus_publisher,
    data: *const c_void,
    len: usize,
    seq_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { send_copy(publisher, data, len, seq_out, Wait::Forever) }
}

/// `shmbus_publisher_send` that never waits: `SHMBUS_FULL` where `send` would wait for a
/// reliable subscriber.
///
/// # Safety
/// As `shmbus_publisher_send`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_publisher_try_send(
    publisher: *mut shmbus_publisher,
    data: *const c_void,
    len: usize,
    seq_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { send_copy(publisher, data, len, seq_out, Wait::Now) }
}

/// `shmbus_publisher_send`, waiting at most `timeout_ns` for reliable subscribers
/// (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_publisher_send`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_publisher_send_timeout(
    publisher: *mut shmbus_publisher,
    data: *const c_void,
    len: usize,
    seq_out: *mut u64,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { send_copy(publisher, data, len, seq_out, wait_ns(timeout_ns)) }
}

/// Loans a whole slot to write a message in place (zero-copy send): write up to
/// `shmbus_loan_data`'s capacity, then `shmbus_loan_send(loan, len, ...)`. One loan per
/// publisher at a time.
///
/// # Safety
/// `publisher` is NULL or live; `out` valid for a write. The loan must be sent or discarded
/// before the publisher is used again; freeing the publisher first is allowed (the loan then
/// frees it).
#[no_mangle]
pub unsafe extern "C" fn shmbus_publisher_loan(
    publisher: *mut shmbus_publisher,
    out: *mut *mut shmbus_loan,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { lend_out(publisher, out, Publisher::loan_owned) }
}

/// The loan's memory: `*data` (writable) and `*capacity` (the topic's largest message).
///
/// # Safety
/// `loan` is NULL or live; `data` and `capacity` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_loan_data(
    loan: *mut shmbus_loan,
    data: *mut *mut u8,
    capacity: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { item_room(loan, data, capacity, "capacity") }
}

/// Publishes the first `len` bytes of the loan and frees it (in every case: on an error the
/// message is not published). The sequence number goes to `*seq_out` (NULL: not wanted).
/// `SHMBUS_TOO_LARGE` if `len` exceeds the capacity.
///
/// # Safety
/// `loan` is NULL or live, not used again; `seq_out` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_loan_send(loan: *mut shmbus_loan, len: usize, seq_out: *mut u64) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let seq = unsafe {
            give_back(loan, |mut item| {
                loan_fits(item.len(), len, "published")?;
                item.truncate(len);
                Ok::<_, Error>(item.send()?)
            })
        }??;
        // SAFETY: per this function's contract.
        unsafe { put(seq_out, seq) };
        Ok(())
    })
}

/// Frees a loan without publishing anything (NULL: nothing).
///
/// # Safety
/// `loan` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_loan_discard(loan: *mut shmbus_loan) {
    // SAFETY: per this function's contract.
    unsafe { hand_back(loan, drop) }
}

/// Frees a publisher (NULL: nothing).
///
/// # Safety
/// `publisher` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_publisher_free(publisher: *mut shmbus_publisher) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(publisher) })
}

/// The copy receives, straight into the caller's buffer. A message too large for it is left
/// unread: the subscriber's cursor stays on it.
///
/// # Safety
/// As the exported receives.
unsafe fn recv_copy(
    sub: *mut shmbus_subscriber,
    out: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    seq_out: *mut u64,
    ts_out: *mut u64,
    wait: Wait,
) -> shmbus_status {
    // SAFETY: per the caller's contract.
    unsafe {
        copy_message(sub, out, cap, len_out, seq_out, ts_out, |sub, dst| {
            sub.recv_into_slice_with(dst, wait).settle(wait)
        })
    }
}

/// Receives the next message if there is one now (`SHMBUS_EMPTY` if not), copying it into
/// `buf` (`cap` bytes). Its length goes to `*len_out`; sequence number and publish time
/// (`CLOCK_MONOTONIC` ns) to `*seq_out` / `*ts_ns_out` (NULL: not wanted). A message larger
/// than `cap` is `SHMBUS_BUFFER_TOO_SMALL` with its length in `*len_out`, left unread for the
/// next receive (unless the history overwrites it first: `SHMBUS_LAGGED` then). `SHMBUS_LAGGED`: messages were overwritten before being read
/// (`shmbus_last_error_value()` says how many); receive again for the oldest one kept.
/// `SHMBUS_EVICTED` (once): this reliable subscriber was evicted and is lossy from now on.
///
/// # Safety
/// `subscriber` is NULL or live; `buf` valid for `cap` bytes; `len_out` valid; `seq_out` and
/// `ts_ns_out` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_try_recv(
    subscriber: *mut shmbus_subscriber,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    seq_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(subscriber, buf, cap, len_out, seq_out, ts_ns_out, Wait::Now) }
}

/// `shmbus_subscriber_try_recv`, waiting as long as it takes for a message.
///
/// # Safety
/// As `shmbus_subscriber_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_recv(
    subscriber: *mut shmbus_subscriber,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    seq_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(subscriber, buf, cap, len_out, seq_out, ts_ns_out, Wait::Forever) }
}

/// `shmbus_subscriber_try_recv`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_subscriber_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_recv_timeout(
    subscriber: *mut shmbus_subscriber,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    seq_out: *mut u64,
    ts_ns_out: *mut u64,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(subscriber, buf, cap, len_out, seq_out, ts_ns_out, wait_ns(timeout_ns)) }
}

/// Receives the next message into memory the caller keeps (the other bindings'
/// `recv_into`): the same as `shmbus_subscriber_try_recv`. One copy from shared memory into
/// `buf`, no allocation; a message longer than `cap` is `SHMBUS_BUFFER_TOO_SMALL` with its
/// length in `*len_out`, kept for the next receive.
///
/// # Safety
/// As `shmbus_subscriber_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_try_recv_into(
    subscriber: *mut shmbus_subscriber,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    seq_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(subscriber, buf, cap, len_out, seq_out, ts_ns_out, Wait::Now) }
}

/// `shmbus_subscriber_try_recv_into`, waiting as long as it takes
/// (`shmbus_subscriber_recv`).
///
/// # Safety
/// As `shmbus_subscriber_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_recv_into(
    subscriber: *mut shmbus_subscriber,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    seq_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(subscriber, buf, cap, len_out, seq_out, ts_ns_out, Wait::Forever) }
}

/// `shmbus_subscriber_try_recv_into`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`;
/// `shmbus_subscriber_recv_timeout`).
///
/// # Safety
/// As `shmbus_subscriber_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_recv_into_timeout(
    subscriber: *mut shmbus_subscriber,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    seq_out: *mut u64,
    ts_ns_out: *mut u64,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(subscriber, buf, cap, len_out, seq_out, ts_ns_out, wait_ns(timeout_ns)) }
}

/// The zero-copy receives: the sample borrows the subscriber shared (several may be out).
///
/// # Safety
/// As the exported receives.
unsafe fn recv_ref(sub: *mut shmbus_subscriber, out: *mut *mut shmbus_sample, wait: Wait) -> shmbus_status {
    // SAFETY: per the caller's contract.
    unsafe { lend_out(sub, out, |s| Subscriber::sample_owned(s, |sub| sub.recv_ref_with(wait).settle(wait))) }
}

/// Receives the next message in place if there is one now (`SHMBUS_EMPTY` if not): `*out` is
/// a pinned sample, read with `shmbus_sample_data`, given back with `shmbus_sample_release`.
/// `SHMBUS_PINNED` when the subscriber's pin budget is spent; `SHMBUS_LAGGED` as for copies.
///
/// # Safety
/// `subscriber` is NULL or live; `out` valid for a write. Release the sample before freeing
/// the subscriber (freeing it first is allowed: the last sample released frees it).
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_try_recv_ref(
    subscriber: *mut shmbus_subscriber,
    out: *mut *mut shmbus_sample,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(subscriber, out, Wait::Now) }
}

/// `shmbus_subscriber_try_recv_ref`, waiting as long as it takes.
///
/// # Safety
/// As `shmbus_subscriber_try_recv_ref`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_recv_ref(
    subscriber: *mut shmbus_subscriber,
    out: *mut *mut shmbus_sample,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(subscriber, out, Wait::Forever) }
}

/// `shmbus_subscriber_try_recv_ref`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_subscriber_try_recv_ref`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_recv_ref_timeout(
    subscriber: *mut shmbus_subscriber,
    out: *mut *mut shmbus_sample,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(subscriber, out, wait_ns(timeout_ns)) }
}

/// The sample's bytes: `*data` (read-only, valid until `shmbus_sample_release`) and `*len`.
///
/// # Safety
/// `sample` is NULL or live; `data` and `len` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_sample_data(
    sample: *const shmbus_sample,
    data: *mut *const u8,
    len: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { item_bytes(sample, data, len) }
}

/// The sample's sequence number (0 if `sample` is NULL).
///
/// # Safety
/// `sample` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_sample_seq(sample: *const shmbus_sample) -> u64 {
    // SAFETY: per this function's contract.
    unsafe { item_value(sample, 0, |s| s.seq()) }
}

/// The sample's publish time, `CLOCK_MONOTONIC` nanoseconds (0 if `sample` is NULL).
///
/// # Safety
/// `sample` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_sample_ts_ns(sample: *const shmbus_sample) -> u64 {
    // SAFETY: per this function's contract.
    unsafe { item_value(sample, 0, |s| s.ts_ns()) }
}

/// Unpins and frees a sample (NULL: nothing); its data pointer is invalid afterwards.
///
/// # Safety
/// `sample` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_sample_release(sample: *mut shmbus_sample) {
    // SAFETY: per this function's contract.
    unsafe { hand_back(sample, drop) }
}

/// How many messages the subscriber is behind the newest (0 if `subscriber` is NULL).
///
/// # Safety
/// `subscriber` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_lag(subscriber: *const shmbus_subscriber) -> u64 {
    // SAFETY: per this function's contract.
    unsafe { value_of(subscriber, 0, |s| s.lag()) }
}

/// The sequence number the next receive asks for (0 if `subscriber` is NULL).
///
/// # Safety
/// `subscriber` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_next_seq(subscriber: *const shmbus_subscriber) -> u64 {
    // SAFETY: per this function's contract.
    unsafe { value_of(subscriber, 0, |s| s.next_seq()) }
}

/// Moves the subscriber so the next receive returns sequence number `seq` (or the oldest kept).
///
/// # Safety
/// `subscriber` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_seek(subscriber: *mut shmbus_subscriber, seq: u64) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_ref(subscriber, |s| s.seek(seq)) }
}

/// Moves the subscriber to the oldest message still kept.
///
/// # Safety
/// `subscriber` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_seek_oldest(subscriber: *mut shmbus_subscriber) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_ref(subscriber, |s| s.seek_oldest()) }
}

/// Moves the subscriber to the newest message, so the next receive returns it (or, if none
/// was published yet, the first one).
///
/// # Safety
/// `subscriber` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_seek_latest(subscriber: *mut shmbus_subscriber) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_ref(subscriber, |s| s.seek_latest()) }
}

/// Sets how many samples the subscriber may hold pinned at once (default 2).
///
/// # Safety
/// `subscriber` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_set_pin_budget(
    subscriber: *mut shmbus_subscriber,
    budget: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_ref(subscriber, |s| s.set_pin_budget(budget)) }
}

/// The copies into the caller's buffer (the receives, and the random-access reads that do
/// not move the cursor): `read` copies a message straight into it, once.
///
/// # Safety
/// As the exported functions.
unsafe fn copy_message(
    sub: *const shmbus_subscriber,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    seq_out: *mut u64,
    ts_out: *mut u64,
    read: impl FnOnce(&Subscriber, &mut [u8]) -> Result<MessageInfo, Error>,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per the caller's contract.
        unsafe {
            let info = with_ref(sub, |s| recv_into_buf(buf, cap, len_out, |dst| read(s, dst), |i| i.len()))?;
            put(seq_out, info.seq());
            put(ts_out, info.ts_ns());
            Ok(())
        }
    })
}

/// Copies message `seq` (any of the history) into `buf` (`cap` bytes) without moving the
/// cursor; its length goes to `*len_out` and its publish time to `*ts_ns_out` (NULL: not
/// wanted). Codes: `SHMBUS_EMPTY` (not published yet, or claimed by a publisher that has not
/// committed it; `shmbus_last_error_value()` is the last sequence number claimed, or 0),
/// `SHMBUS_LAGGED` (overwritten: `shmbus_last_error_value()` is the oldest sequence number
/// kept), `SHMBUS_INVALID_ARGUMENT` (`seq` 0), `SHMBUS_BUFFER_TOO_SMALL` (its length in
/// `*len_out`; the message stays, until the history overwrites it).
///
/// # Safety
/// `subscriber` is NULL or live; `buf` valid for `cap` bytes; `len_out` valid; `ts_ns_out`
/// NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_get(
    subscriber: *const shmbus_subscriber,
    seq: u64,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe {
        copy_message(subscriber, buf, cap, len_out, std::ptr::null_mut(), ts_ns_out, |s, dst| {
            Ok(s.get_into_slice(seq, dst)?)
        })
    }
}

/// Copies the newest committed message into `buf` (`cap` bytes) without moving the cursor;
/// length, sequence number and publish time as `shmbus_subscriber_try_recv`. `SHMBUS_EMPTY`
/// if nothing was published yet; other codes as `shmbus_subscriber_get`.
///
/// # Safety
/// `subscriber` is NULL or live; `buf` valid for `cap` bytes; `len_out` valid; `seq_out` and
/// `ts_ns_out` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_latest(
    subscriber: *const shmbus_subscriber,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    seq_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { copy_message(subscriber, buf, cap, len_out, seq_out, ts_ns_out, |s, dst| Ok(s.latest_into_slice(dst)?)) }
}

/// Pins message `seq` (any of the history) as a zero-copy sample in `*out`, without moving the
/// cursor: read it with `shmbus_sample_data`, give it back with `shmbus_sample_release`. It
/// counts against the pin budget (`SHMBUS_PINNED`); other codes as `shmbus_subscriber_get`.
///
/// # Safety
/// `subscriber` is NULL or live; `out` valid for a write. Release the sample before freeing
/// the subscriber (freeing it first is allowed: the last sample released frees it).
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_get_ref(
    subscriber: *mut shmbus_subscriber,
    seq: u64,
    out: *mut *mut shmbus_sample,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { lend_out(subscriber, out, |s| Subscriber::sample_owned(s, |sub| sub.get_ref(seq))) }
}

/// Sets how the subscriber's blocking receives wait: busy-poll `spin_ns` nanoseconds before
/// sleeping (0: sleep at once; `UINT64_MAX`: never sleep; the default is 20 µs).
///
/// # Safety
/// `subscriber` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_set_wait_policy(
    subscriber: *mut shmbus_subscriber,
    spin_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_ref(subscriber, |s| s.set_wait_policy(wait_policy(spin_ns))) }
}

/// Frees a subscriber (NULL: nothing). With samples still out, it is freed when the last one
/// is released.
///
/// # Safety
/// `subscriber` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_subscriber_free(subscriber: *mut shmbus_subscriber) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(subscriber) })
}
