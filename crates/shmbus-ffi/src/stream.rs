//! Stream: an SPSC ring of variable-size records. `shmbus_stream_*`, `shmbus_stream_writer_*`,
//! `shmbus_stream_loan_*`, `shmbus_stream_reader_*`, `shmbus_record_*`.

use std::ffi::{c_char, c_void};

use shmbus::stream::{EndpointStatus, OwnedLoan, OwnedRecord, StreamStatus};
use shmbus::{Stream, StreamConfig, StreamReader, StreamWriter};

use crate::call::*;
use crate::domain::shmbus_domain;
use crate::handle::*;
use crate::schema::*;
use crate::status::*;

/// Settings for `shmbus_stream_create_or_open` (unset values: as the existing stream, or the
/// defaults when created).
#[derive(Debug)]
pub struct shmbus_stream_config {
    h: Handle<StreamConfig>,
}

/// An open stream. Endpoints made from it do not borrow it.
#[derive(Debug)]
pub struct shmbus_stream {
    h: Handle<Stream>,
}

/// A stream's writer (one per stream: a second is `SHMBUS_BUSY`).
#[derive(Debug)]
pub struct shmbus_stream_writer {
    h: Handle<StreamWriter>,
}

/// A stream's reader (one per stream: a second is `SHMBUS_BUSY`).
#[derive(Debug)]
pub struct shmbus_stream_reader {
    h: Handle<StreamReader>,
}

/// Room for one record loaned from a writer (`shmbus_stream_writer_*loan*`): write it through
/// `shmbus_stream_loan_data`, then `shmbus_stream_loan_send` or `shmbus_stream_loan_discard`
/// (either frees it). While it is out, calls on its writer are `SHMBUS_BUSY`.
#[derive(Debug)]
pub struct shmbus_stream_loan {
    item: OwnedLoan,
}

/// A record read in place (`shmbus_stream_reader_*recv_ref*`). `shmbus_record_consume` takes
/// it off the stream; `shmbus_record_release` leaves it there, to be read again (an
/// at-least-once handover). Either frees it; while it is out, calls on its reader are
/// `SHMBUS_BUSY`.
#[derive(Debug)]
pub struct shmbus_record {
    item: OwnedRecord,
}

/// A snapshot of a stream (`shmbus_stream_status`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shmbus_stream_status_info {
    /// Ring capacity in bytes.
    pub capacity: u64,
    /// Bytes in the ring now.
    pub used: u64,
    /// The writer's pid (0: none attached).
    pub writer_pid: u32,
    /// Whether that writer is alive (1) or not (0).
    pub writer_alive: u32,
    /// The reader's pid (0: none attached).
    pub reader_pid: u32,
    /// Whether that reader is alive (1) or not (0).
    pub reader_alive: u32,
}

impl From<StreamStatus> for shmbus_stream_status_info {
    fn from(s: StreamStatus) -> Self {
        let pid = |e: &Option<EndpointStatus>| e.as_ref().map_or(0, |e| e.pid);
        let alive = |e: &Option<EndpointStatus>| e.as_ref().map_or(0, |e| u32::from(e.alive));
        shmbus_stream_status_info {
            capacity: s.capacity,
            used: s.used,
            writer_pid: pid(&s.writer),
            writer_alive: alive(&s.writer),
            reader_pid: pid(&s.reader),
            reader_alive: alive(&s.reader),
        }
    }
}

lent_item! {
    shmbus_stream_loan => OwnedLoan;
    shmbus_record => OwnedRecord;
}

wrapper!(
    shmbus_stream_config => StreamConfig,
    shmbus_stream => Stream,
    shmbus_stream_writer => StreamWriter,
    shmbus_stream_reader => StreamReader,
);

/// Makes a stream config with nothing set.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_config_new(out: *mut *mut shmbus_stream_config) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, StreamConfig::default()) })
}

/// Frees a stream config (NULL: nothing).
///
/// # Safety
/// `config` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_config_free(config: *mut shmbus_stream_config) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(config) })
}

/// Sets the ring's capacity in bytes (the largest record follows from it).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_config_set_capacity(
    config: *mut shmbus_stream_config,
    bytes: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.capacity(bytes)) }
}

/// Sets the file mode of a created stream.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_config_set_mode(config: *mut shmbus_stream_config, mode: u32) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.mode(mode)) }
}

/// Sets the group id of a created stream.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_config_set_group(config: *mut shmbus_stream_config, gid: u32) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.group(gid)) }
}

/// Sets the schema of the stream's messages (see `shmbus_schema`): `message_encoding` (`cdr`,
/// `protobuf`, `json`, ...; required), `schema_name` and `schema_encoding` (NULL: empty) and
/// `data_len` bytes of schema data at `data` (NULL with 0: none; at most
/// `SHMBUS_SCHEMA_MAX_DATA`). A created stream stores it; an existing stream must carry the same
/// schema (`SHMBUS_SCHEMA_MISMATCH`). Without this setter any schema is accepted. An invalid
/// schema (empty message encoding, a text over `SHMBUS_SCHEMA_MAX_TEXT` bytes or with a
/// control character, data too long or without a schema encoding) is
/// `SHMBUS_INVALID_CONFIG`, and the config is left as it was.
///
/// # Safety
/// `config` is NULL or live; the texts NULL or NUL-terminated; `data` valid for `data_len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_config_set_schema(
    config: *mut shmbus_stream_config,
    message_encoding: *const c_char,
    schema_name: *const c_char,
    schema_encoding: *const c_char,
    data: *const c_void,
    data_len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set_schema(config, message_encoding, schema_name, schema_encoding, data, data_len, |c, s| c.schema(s)) }
}

/// Opens stream `name` in `domain`, creating it with `config` (NULL: defaults) if it does not
/// exist. Codes as `shmbus_topic_create_or_open`.
///
/// # Safety
/// `domain`, `config` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_create_or_open(
    domain: *const shmbus_domain,
    name: *const c_char,
    config: *const shmbus_stream_config,
    out: *mut *mut shmbus_stream,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { open_in(domain, name, out, |d, n| Ok(Stream::create_or_open(d, n, &config_or_default(config)?)?)) }
}

/// Opens the existing stream `name` (`SHMBUS_NOT_FOUND` if there is none).
///
/// # Safety
/// `domain` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_open(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut *mut shmbus_stream,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { open_in(domain, name, out, |d, n| Ok(Stream::open(d, n)?)) }
}

/// Reads the state of stream `name` (read permission suffices).
///
/// # Safety
/// `domain` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_status(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut shmbus_stream_status_info,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { status_in(domain, name, out, |d, n| Ok(Stream::status(d, n)?)) }
}

/// The largest record the stream takes, in bytes (0 if `stream` is NULL).
///
/// # Safety
/// `stream` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_max_record_len(stream: *const shmbus_stream) -> usize {
    // SAFETY: per this function's contract.
    unsafe { value_of(stream, 0, |s| s.max_record_len()) }
}

/// Maps every page of the stream into this process now, so that no write or read of
/// this process takes a page fault the first time it touches a page (NULL: nothing). For a
/// long-lived process on a latency path; advice only (nothing before Linux 5.14). See
/// `docs/topic.md`, "Sizing".
///
/// # Safety
/// `stream` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_prefault(stream: *const shmbus_stream) {
    // SAFETY: per this function's contract.
    unsafe { value_of(stream, (), |h| h.prefault()) }
}

/// The stream's schema, set by its creator, into `*out`: `SHMBUS_OK`, or `SHMBUS_NOT_FOUND` (and
/// `*out` all NULL and zero) when it has none. The pointers stay valid until `stream` is freed.
///
/// # Safety
/// `stream` is NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_schema(stream: *const shmbus_stream, out: *mut shmbus_schema) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { schema_of(stream, out, "stream", |c| c.schema()) }
}

/// Frees a stream handle (NULL: nothing). Its endpoints stay usable.
///
/// # Safety
/// `stream` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_free(stream: *mut shmbus_stream) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(stream) })
}

/// Makes the stream's writer (`SHMBUS_BUSY` if a live process holds it).
///
/// # Safety
/// `stream` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_writer_open(
    stream: *const shmbus_stream,
    out: *mut *mut shmbus_stream_writer,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, with_ref(stream, |s| Ok(s.writer()?))?) })
}

/// Makes the stream's reader (`SHMBUS_BUSY` if a live process holds it).
///
/// # Safety
/// `stream` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_open(
    stream: *const shmbus_stream,
    out: *mut *mut shmbus_stream_reader,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, with_ref(stream, |s| Ok(s.reader()?))?) })
}

/// Sends a record of `len` bytes from `data` if there is room now (`SHMBUS_FULL` if not).
/// Codes also `SHMBUS_TOO_LARGE`, `SHMBUS_DISCONNECTED` (full, and no reader attached).
///
/// # Safety
/// `writer` NULL or live; `data` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_writer_try_send(
    writer: *mut shmbus_stream_writer,
    data: *const c_void,
    len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { with_mut(writer, |w| Ok(w.try_send(bytes_arg(data, len)?)?)) })
}

/// `shmbus_stream_writer_try_send`, waiting as long as it takes for room.
///
/// # Safety
/// As `shmbus_stream_writer_try_send`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_writer_send(
    writer: *mut shmbus_stream_writer,
    data: *const c_void,
    len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { with_mut(writer, |w| Ok(w.send(bytes_arg(data, len)?)?)) })
}

/// `shmbus_stream_writer_try_send`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_stream_writer_try_send`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_writer_send_timeout(
    writer: *mut shmbus_stream_writer,
    data: *const c_void,
    len: usize,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { with_mut(writer, |w| Ok(w.send_timeout(bytes_arg(data, len)?, timeout(timeout_ns))?)) })
}

/// # Safety
/// As the exported loans.
unsafe fn loan(
    writer: *mut shmbus_stream_writer,
    len: usize,
    out: *mut *mut shmbus_stream_loan,
    wait: Wait,
) -> shmbus_status {
    // SAFETY: per the caller's contract.
    unsafe { lend_out(writer, out, |w| StreamWriter::loan_owned(w, |w| w.loan_with(len, wait).settle(wait))) }
}

/// Loans room for a record of up to `len` bytes if there is room now (`SHMBUS_FULL` if not).
///
/// # Safety
/// `writer` NULL or live; `out` valid for a write. Send or discard the loan before using the
/// writer again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_writer_try_loan(
    writer: *mut shmbus_stream_writer,
    len: usize,
    out: *mut *mut shmbus_stream_loan,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { loan(writer, len, out, Wait::Now) }
}

/// `shmbus_stream_writer_try_loan`, waiting as long as it takes for room.
///
/// # Safety
/// As `shmbus_stream_writer_try_loan`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_writer_loan(
    writer: *mut shmbus_stream_writer,
    len: usize,
    out: *mut *mut shmbus_stream_loan,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { loan(writer, len, out, Wait::Forever) }
}

/// `shmbus_stream_writer_try_loan`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_stream_writer_try_loan`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_writer_loan_timeout(
    writer: *mut shmbus_stream_writer,
    len: usize,
    timeout_ns: u64,
    out: *mut *mut shmbus_stream_loan,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { loan(writer, len, out, wait_ns(timeout_ns)) }
}

/// The loan's memory: `*data` (writable) and `*capacity` (the `len` it was asked with).
///
/// # Safety
/// `loan` NULL or live; `data` and `capacity` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_loan_data(
    loan: *mut shmbus_stream_loan,
    data: *mut *mut u8,
    capacity: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { item_room(loan, data, capacity, "capacity") }
}

/// Sends the first `len` bytes of the loan as one record and frees the loan (in every case;
/// `SHMBUS_TOO_LARGE`, sending nothing, if `len` exceeds its capacity).
///
/// # Safety
/// `loan` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_loan_send(loan: *mut shmbus_stream_loan, len: usize) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            give_back(loan, |mut item| {
                loan_fits(item.len(), len, "sent")?;
                item.truncate(len);
                item.send();
                Ok(())
            })
        }?
    })
}

/// Frees a loan without sending anything (NULL: nothing).
///
/// # Safety
/// `loan` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_loan_discard(loan: *mut shmbus_stream_loan) {
    // SAFETY: per this function's contract.
    unsafe { hand_back(loan, drop) }
}

/// Sets how the writer's blocking sends and loans wait: busy-poll `spin_ns` nanoseconds before sleeping
/// (0: sleep at once; `UINT64_MAX`: never sleep; the default is 20 µs).
///
/// # Safety
/// `writer` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_writer_set_wait_policy(
    writer: *mut shmbus_stream_writer,
    spin_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_mut(writer, |e| e.set_wait_policy(wait_policy(spin_ns))) }
}

/// Frees a writer (NULL: nothing; with a loan out, the loan frees it).
///
/// # Safety
/// `writer` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_writer_free(writer: *mut shmbus_stream_writer) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(writer) })
}

/// The copy receives: the record is read in place and copied; one too large for the caller's
/// buffer is left on the stream.
///
/// # Safety
/// As the exported receives.
unsafe fn recv_copy(
    reader: *mut shmbus_stream_reader,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    wait: Wait,
) -> shmbus_status {
    guard(|| {
        buf_args(buf, cap, len_out)?;
        // SAFETY: per the caller's contract.
        unsafe {
            with_mut(reader, |r| {
                let record = r.recv_ref_with(wait).settle(wait)?;
                // Dropped unconsumed on an error: read again next time.
                deliver(&record, buf, cap, len_out)?;
                record.consume();
                Ok(())
            })
        }
    })
}

/// Receives the next record if there is one now (`SHMBUS_EMPTY` if not; `SHMBUS_DISCONNECTED`
/// if also no writer is attached), copying it into `buf` (`cap` bytes) and its length to
/// `*len_out`. A record larger than `cap` is `SHMBUS_BUFFER_TOO_SMALL` with its length in
/// `*len_out`, and stays on the stream.
///
/// # Safety
/// `reader` NULL or live; `buf` valid for `cap` bytes; `len_out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_try_recv(
    reader: *mut shmbus_stream_reader,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(reader, buf, cap, len_out, Wait::Now) }
}

/// `shmbus_stream_reader_try_recv`, waiting as long as it takes.
///
/// # Safety
/// As `shmbus_stream_reader_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_recv(
    reader: *mut shmbus_stream_reader,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(reader, buf, cap, len_out, Wait::Forever) }
}

/// `shmbus_stream_reader_try_recv`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_stream_reader_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_recv_timeout(
    reader: *mut shmbus_stream_reader,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(reader, buf, cap, len_out, wait_ns(timeout_ns)) }
}

/// Receives the next record into memory the caller keeps (the other bindings'
/// `recv_into`): the same as `shmbus_stream_reader_try_recv`. One copy from shared memory into
/// `buf`, no allocation; a record longer than `cap` is `SHMBUS_BUFFER_TOO_SMALL` with its
/// length in `*len_out`, kept for the next receive.
///
/// # Safety
/// As `shmbus_stream_reader_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_try_recv_into(
    reader: *mut shmbus_stream_reader,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(reader, buf, cap, len_out, Wait::Now) }
}

/// `shmbus_stream_reader_try_recv_into`, waiting as long as it takes
/// (`shmbus_stream_reader_recv`).
///
/// # Safety
/// As `shmbus_stream_reader_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_recv_into(
    reader: *mut shmbus_stream_reader,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(reader, buf, cap, len_out, Wait::Forever) }
}

/// `shmbus_stream_reader_try_recv_into`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`;
/// `shmbus_stream_reader_recv_timeout`).
///
/// # Safety
/// As `shmbus_stream_reader_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_recv_into_timeout(
    reader: *mut shmbus_stream_reader,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(reader, buf, cap, len_out, wait_ns(timeout_ns)) }
}

/// # Safety
/// As the exported receives.
unsafe fn recv_ref(reader: *mut shmbus_stream_reader, out: *mut *mut shmbus_record, wait: Wait) -> shmbus_status {
    // SAFETY: per the caller's contract.
    unsafe { lend_out(reader, out, |r| StreamReader::record_owned(r, |r| r.recv_ref_with(wait).settle(wait))) }
}

/// Reads the next record in place if there is one now (`SHMBUS_EMPTY` if not): `*out` until
/// `shmbus_record_consume` or `shmbus_record_release`.
///
/// # Safety
/// `reader` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_try_recv_ref(
    reader: *mut shmbus_stream_reader,
    out: *mut *mut shmbus_record,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(reader, out, Wait::Now) }
}

/// `shmbus_stream_reader_try_recv_ref`, waiting as long as it takes.
///
/// # Safety
/// As `shmbus_stream_reader_try_recv_ref`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_recv_ref(
    reader: *mut shmbus_stream_reader,
    out: *mut *mut shmbus_record,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(reader, out, Wait::Forever) }
}

/// `shmbus_stream_reader_try_recv_ref`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_stream_reader_try_recv_ref`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_recv_ref_timeout(
    reader: *mut shmbus_stream_reader,
    out: *mut *mut shmbus_record,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(reader, out, wait_ns(timeout_ns)) }
}

/// The record's bytes: `*data` (read-only, valid until the record is given back) and `*len`.
///
/// # Safety
/// `record` NULL or live; `data` and `len` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_record_data(
    record: *const shmbus_record,
    data: *mut *const u8,
    len: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { item_bytes(record, data, len) }
}

/// Takes the record off the stream and frees it (NULL: nothing).
///
/// # Safety
/// `record` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_record_consume(record: *mut shmbus_record) {
    // SAFETY: per this function's contract.
    unsafe { hand_back(record, OwnedRecord::consume) }
}

/// Frees the record and leaves it on the stream: the next receive returns it again (NULL:
/// nothing).
///
/// # Safety
/// `record` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_record_release(record: *mut shmbus_record) {
    // SAFETY: per this function's contract.
    unsafe { hand_back(record, drop) }
}

/// Sets how the reader's blocking receives wait: busy-poll `spin_ns` nanoseconds before sleeping
/// (0: sleep at once; `UINT64_MAX`: never sleep; the default is 20 µs).
///
/// # Safety
/// `reader` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_set_wait_policy(
    reader: *mut shmbus_stream_reader,
    spin_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_mut(reader, |e| e.set_wait_policy(wait_policy(spin_ns))) }
}

/// Frees a reader (NULL: nothing; with a record out, the record frees it).
///
/// # Safety
/// `reader` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_stream_reader_free(reader: *mut shmbus_stream_reader) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(reader) })
}
