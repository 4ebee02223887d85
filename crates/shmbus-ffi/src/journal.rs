//! Journal: a persistent, replayable log in a directory, with durable named readers.
//! `shmbus_journal_*`, `shmbus_appender_*`, `shmbus_journal_loan_*`, `shmbus_tailer_*`.
//! The config's retention is not in the C API yet (a created journal takes the default; an
//! existing one keeps its own).

use std::ffi::{c_char, c_void};

use shmbus::journal::{Durability, JournalStatus, OwnedLoan, RollCycle};
use shmbus::{Appender, Journal, JournalConfig, Tailer};

use crate::call::*;
use crate::handle::*;
use crate::schema::*;
use crate::status::*;

/// Settings for `shmbus_journal_create_or_open`; they apply only when the journal is created
/// (an existing journal keeps its own).
#[derive(Debug)]
pub struct shmbus_journal_config {
    h: Handle<JournalConfig>,
}

/// An open journal (a directory). Appenders and tailers made from it do not borrow it.
#[derive(Debug)]
pub struct shmbus_journal {
    h: Handle<Journal>,
}

/// A journal's appender. Never waits: the log grows.
#[derive(Debug)]
pub struct shmbus_appender {
    h: Handle<Appender>,
}

/// Room for one entry loaned from an appender (`shmbus_appender_loan`): write it through
/// `shmbus_journal_loan_data`, then `shmbus_journal_loan_send` or `shmbus_journal_loan_discard`
/// (either frees it). While it is out, calls on its appender are `SHMBUS_BUSY`.
#[derive(Debug)]
pub struct shmbus_journal_loan {
    item: OwnedLoan,
}

/// A journal reader: an anonymous tailer (from the start, the end, an index or a time), or a
/// named reader whose position survives restarts (`shmbus_tailer_ack`).
#[derive(Debug)]
pub struct shmbus_tailer {
    h: Handle<Tail>,
}

/// A snapshot of a journal (`shmbus_journal_status`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shmbus_journal_status_info {
    /// Oldest retained index.
    pub first_index: u64,
    /// The index the next entry will get.
    pub next_index: u64,
    /// Data bytes in use over all cycles.
    pub bytes: u64,
    /// Bytes of all cycle files on disk.
    pub file_bytes: u64,
    /// Cycles present.
    pub cycles: u64,
    /// Named readers.
    pub readers: u64,
    /// Registered appenders.
    pub appenders: u64,
}

/// The tailer (which stays on an entry too large for the caller's buffer).
#[derive(Debug)]
pub(crate) struct Tail {
    pub(crate) tailer: Tailer,
}

waitable_via!(Tail => tailer);

impl From<JournalStatus> for shmbus_journal_status_info {
    fn from(s: JournalStatus) -> Self {
        shmbus_journal_status_info {
            first_index: s.first_index,
            next_index: s.next_index,
            bytes: s.bytes,
            file_bytes: s.file_bytes,
            cycles: s.cycles.len() as u64,
            readers: s.readers.len() as u64,
            appenders: s.appenders as u64,
        }
    }
}

lent_item! {
    shmbus_journal_loan => OwnedLoan;
}

wrapper!(
    shmbus_journal_config => JournalConfig,
    shmbus_journal => Journal,
    shmbus_appender => Appender,
    shmbus_tailer => Tail,
);

/// Makes a journal config with the defaults.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_new(out: *mut *mut shmbus_journal_config) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, JournalConfig::default()) })
}

/// Frees a journal config (NULL: nothing).
///
/// # Safety
/// `config` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_free(config: *mut shmbus_journal_config) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(config) })
}

/// Sets the size of a cycle file, in bytes.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_set_cycle_bytes(
    config: *mut shmbus_journal_config,
    bytes: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.cycle_bytes(bytes)) }
}

/// Sets the size the data files grow by, in bytes.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_set_chunk_bytes(
    config: *mut shmbus_journal_config,
    bytes: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.chunk_bytes(bytes)) }
}

/// Sets the largest entry, in bytes.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_set_max_entry_len(
    config: *mut shmbus_journal_config,
    len: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.max_entry_len(len)) }
}

/// Sets how long an entry may stay claimed before readers skip it (nanoseconds).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_set_abandon_timeout(
    config: *mut shmbus_journal_config,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.abandon_timeout(timeout(timeout_ns))) }
}

/// Sets the file mode of a created journal's files.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_set_mode(
    config: *mut shmbus_journal_config,
    mode: u32,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.mode(mode)) }
}

/// Sets when a new cycle starts besides when one is full: every `secs` seconds (aligned to
/// the epoch: 60 is every minute, 3600 every hour), or only when full for 0.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_set_roll_secs(
    config: *mut shmbus_journal_config,
    secs: u64,
) -> shmbus_status {
    let roll = if secs == 0 { RollCycle::Never } else { RollCycle::Every(std::time::Duration::from_secs(secs)) };
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.roll(roll)) }
}

/// Sets what a commit guarantees: in the page cache only (survives any process's crash, not
/// the machine's; the default).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_set_durability_none(
    config: *mut shmbus_journal_config,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.durability(Durability::None)) }
}

/// Sets what a commit guarantees: the entry's pages are flushed (`msync`) before the send
/// returns (survives power loss).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_set_durability_flush(
    config: *mut shmbus_journal_config,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.durability(Durability::Flush)) }
}

/// Sets what a commit guarantees: each appender syncs every `period_ns` in the background (at
/// most one period of entries is lost on power loss).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_set_durability_periodic(
    config: *mut shmbus_journal_config,
    period_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.durability(Durability::Periodic(timeout(period_ns)))) }
}

/// Sets the schema of the journal's messages (see `shmbus_schema`): `message_encoding` (`cdr`,
/// `protobuf`, `json`, ...; required), `schema_name` and `schema_encoding` (NULL: empty) and
/// `data_len` bytes of schema data at `data` (NULL with 0: none; at most
/// `SHMBUS_SCHEMA_MAX_DATA`). A created journal stores it; an existing journal must carry the same
/// schema (`SHMBUS_SCHEMA_MISMATCH`). Without this setter any schema is accepted. An invalid
/// schema (empty message encoding, a text over `SHMBUS_SCHEMA_MAX_TEXT` bytes or with a
/// control character, data too long or without a schema encoding) is
/// `SHMBUS_INVALID_CONFIG`, and the config is left as it was.
///
/// # Safety
/// `config` is NULL or live; the texts NULL or NUL-terminated; `data` valid for `data_len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_config_set_schema(
    config: *mut shmbus_journal_config,
    message_encoding: *const c_char,
    schema_name: *const c_char,
    schema_encoding: *const c_char,
    data: *const c_void,
    data_len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set_schema(config, message_encoding, schema_name, schema_encoding, data, data_len, |c, s| c.schema(s)) }
}

/// Opens the journal in directory `dir`, creating it with `config` (NULL: defaults) if there
/// is none. Codes: `SHMBUS_INVALID_CONFIG`, `SHMBUS_PERMISSION_DENIED`, `SHMBUS_CORRUPT`,
/// `SHMBUS_IO`, ...
///
/// # Safety
/// `dir` NUL-terminated; `config` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_create_or_open(
    dir: *const c_char,
    config: *const shmbus_journal_config,
    out: *mut *mut shmbus_journal,
) -> shmbus_status {
    guard(|| {
        out_arg(out)?;
        // SAFETY: per this function's contract.
        unsafe { into_c(out, Journal::create_or_open(str_arg(dir, "dir")?, &config_or_default(config)?)?) }
    })
}

/// Opens the existing journal in directory `dir` (`SHMBUS_NOT_FOUND` if there is none).
///
/// # Safety
/// `dir` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_open(dir: *const c_char, out: *mut *mut shmbus_journal) -> shmbus_status {
    guard(|| {
        out_arg(out)?;
        // SAFETY: per this function's contract.
        unsafe { into_c(out, Journal::open(str_arg(dir, "dir")?)?) }
    })
}

/// Reads the state of the journal in `dir` (read permission suffices).
///
/// # Safety
/// `dir` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_status(
    dir: *const c_char,
    out: *mut shmbus_journal_status_info,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe { put_required(out, Journal::status(str_arg(dir, "dir")?)?.into(), "out") }
    })
}

/// The journal's schema, set by its creator, into `*out`: `SHMBUS_OK`, or `SHMBUS_NOT_FOUND` (and
/// `*out` all NULL and zero) when it has none. The pointers stay valid until `journal` is freed.
///
/// # Safety
/// `journal` is NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_schema(
    journal: *const shmbus_journal,
    out: *mut shmbus_schema,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { schema_of(journal, out, "journal", |c| c.schema()) }
}

/// Frees a journal handle (NULL: nothing). Its appenders and tailers stay usable.
///
/// # Safety
/// `journal` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_free(journal: *mut shmbus_journal) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(journal) })
}

/// Makes an appender (`SHMBUS_TOO_MANY_PARTICIPANTS` when the table is full).
///
/// # Safety
/// `journal` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_appender(
    journal: *const shmbus_journal,
    out: *mut *mut shmbus_appender,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, with_ref(journal, |j| Ok(j.appender()?))?) })
}

/// # Safety
/// `journal` NULL or live; `out` valid for a write.
unsafe fn tailer(
    journal: *const shmbus_journal,
    out: *mut *mut shmbus_tailer,
    make: impl FnOnce(&Journal) -> Result<Tailer, Error>,
) -> shmbus_status {
    guard(|| {
        out_arg(out)?;
        // SAFETY: per the caller's contract.
        unsafe {
            let tailer = with_ref(journal, make)?;
            into_c(out, Tail { tailer })
        }
    })
}

/// Makes a tailer that reads from the oldest retained entry.
///
/// # Safety
/// `journal` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_tailer(
    journal: *const shmbus_journal,
    out: *mut *mut shmbus_tailer,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { tailer(journal, out, |j| Ok(j.tailer()?)) }
}

/// Makes a tailer that reads from entry `index` on.
///
/// # Safety
/// `journal` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_tailer_at(
    journal: *const shmbus_journal,
    index: u64,
    out: *mut *mut shmbus_tailer,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { tailer(journal, out, |j| Ok(j.tailer_at(index)?)) }
}

/// Makes a tailer that reads only the entries appended from now on.
///
/// # Safety
/// `journal` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_tailer_at_end(
    journal: *const shmbus_journal,
    out: *mut *mut shmbus_tailer,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { tailer(journal, out, |j| Ok(j.tailer_at_end()?)) }
}

/// Makes a tailer that reads from the first entry stamped at or after `ts_ns` (wall-clock
/// nanoseconds since the Unix epoch).
///
/// # Safety
/// `journal` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_tailer_at_time(
    journal: *const shmbus_journal,
    ts_ns: u64,
    out: *mut *mut shmbus_tailer,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { tailer(journal, out, |j| Ok(j.tailer_at_time(ts_ns)?)) }
}

/// Makes the named reader `name`: it goes on from its last `shmbus_tailer_ack`ed position
/// (from the start the first time). One process at a time holds a name (`SHMBUS_BUSY`).
///
/// # Safety
/// `journal` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_reader(
    journal: *const shmbus_journal,
    name: *const c_char,
    out: *mut *mut shmbus_tailer,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { tailer(journal, out, |j| Ok(j.reader(str_arg(name, "name")?)?)) }
}

/// Appends an entry of `len` bytes; its index goes to `*index_out` (NULL: not wanted). Never
/// waits. Codes: `SHMBUS_TOO_LARGE`, `SHMBUS_DAMAGED` (abandoned: send it again),
/// `SHMBUS_CORRUPT`, `SHMBUS_TRUNCATED`, `SHMBUS_IO`.
///
/// # Safety
/// `appender` NULL or live; `data` valid for `len` bytes; `index_out` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_appender_send(
    appender: *mut shmbus_appender,
    data: *const c_void,
    len: usize,
    index_out: *mut u64,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            let index = with_mut(appender, |a| Ok(a.send(bytes_arg(data, len)?)?))?;
            put(index_out, index);
            Ok(())
        }
    })
}

/// Loans room for an entry of exactly `len` bytes, written in place: fill
/// `shmbus_journal_loan_data`, then `shmbus_journal_loan_send`.
///
/// # Safety
/// `appender` NULL or live; `out` valid for a write. Send or discard the loan before using
/// the appender again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_appender_loan(
    appender: *mut shmbus_appender,
    len: usize,
    out: *mut *mut shmbus_journal_loan,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { lend_out(appender, out, |a| Appender::loan_owned(a, len)) }
}

/// The loan's memory: `*data` (writable) and `*len` (the entry's length).
///
/// # Safety
/// `loan` NULL or live; `data` and `len` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_loan_data(
    loan: *mut shmbus_journal_loan,
    data: *mut *mut u8,
    len: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { item_room(loan, data, len, "len") }
}

/// Commits the loaned entry and frees the loan (in every case); its index goes to
/// `*index_out` (NULL: not wanted). `SHMBUS_DAMAGED`: readers gave up on it (send it again).
///
/// # Safety
/// `loan` NULL or live, not used again; `index_out` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_loan_send(
    loan: *mut shmbus_journal_loan,
    index_out: *mut u64,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let index = unsafe { give_back(loan, OwnedLoan::send) }??;
        // SAFETY: per this function's contract.
        unsafe { put(index_out, index) };
        Ok(())
    })
}

/// Frees a loan without committing its entry (NULL: nothing).
///
/// # Safety
/// `loan` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_journal_loan_discard(loan: *mut shmbus_journal_loan) {
    // SAFETY: per this function's contract.
    unsafe { hand_back(loan, drop) }
}

/// Frees an appender (NULL: nothing; with a loan out, the loan frees it).
///
/// # Safety
/// `appender` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_appender_free(appender: *mut shmbus_appender) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(appender) })
}

/// # Safety
/// As the exported receives.
unsafe fn recv_copy(
    tailer: *mut shmbus_tailer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    index_out: *mut u64,
    ts_out: *mut u64,
    wait: Wait,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per the caller's contract.
        unsafe {
            let (index, ts) = with_mut(tailer, |e| {
                let t = &mut e.tailer;
                let info = recv_into_buf(
                    buf,
                    cap,
                    len_out,
                    |dst| t.recv_into_slice_with(dst, wait).settle(wait),
                    |i| i.len(),
                )?;
                Ok((info.index(), info.ts_ns()))
            })?;
            put(index_out, index);
            put(ts_out, ts);
            Ok(())
        }
    })
}

/// Reads the next entry if one is committed now (`SHMBUS_EMPTY` if not), copying it into
/// `buf` (`cap` bytes), its length to `*len_out`, its index and wall-clock stamp to
/// `*index_out` / `*ts_ns_out` (NULL: not wanted). `SHMBUS_DAMAGED`: entries were skipped (a
/// gap, damage, an abandoned entry; the message says which), reading goes on after them;
/// `SHMBUS_CORRUPT`: one entry is corrupt and skipped. An entry larger than `cap` is
/// `SHMBUS_BUFFER_TOO_SMALL` (its length in `*len_out`), kept for the next receive.
///
/// # Safety
/// `tailer` NULL or live; `buf` valid for `cap` bytes; `len_out` valid; the others NULL or
/// valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_try_recv(
    tailer: *mut shmbus_tailer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    index_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(tailer, buf, cap, len_out, index_out, ts_ns_out, Wait::Now) }
}

/// `shmbus_tailer_try_recv`, waiting as long as it takes.
///
/// # Safety
/// As `shmbus_tailer_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_recv(
    tailer: *mut shmbus_tailer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    index_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(tailer, buf, cap, len_out, index_out, ts_ns_out, Wait::Forever) }
}

/// `shmbus_tailer_try_recv`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_tailer_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_recv_timeout(
    tailer: *mut shmbus_tailer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    index_out: *mut u64,
    ts_ns_out: *mut u64,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(tailer, buf, cap, len_out, index_out, ts_ns_out, wait_ns(timeout_ns)) }
}

/// Receives the next entry into memory the caller keeps (the other bindings'
/// `recv_into`): the same as `shmbus_tailer_try_recv`. One copy from shared memory into
/// `buf`, no allocation; a entry longer than `cap` is `SHMBUS_BUFFER_TOO_SMALL` with its
/// length in `*len_out`, kept for the next receive.
///
/// # Safety
/// As `shmbus_tailer_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_try_recv_into(
    tailer: *mut shmbus_tailer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    index_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(tailer, buf, cap, len_out, index_out, ts_ns_out, Wait::Now) }
}

/// `shmbus_tailer_try_recv_into`, waiting as long as it takes
/// (`shmbus_tailer_recv`).
///
/// # Safety
/// As `shmbus_tailer_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_recv_into(
    tailer: *mut shmbus_tailer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    index_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(tailer, buf, cap, len_out, index_out, ts_ns_out, Wait::Forever) }
}

/// `shmbus_tailer_try_recv_into`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`;
/// `shmbus_tailer_recv_timeout`).
///
/// # Safety
/// As `shmbus_tailer_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_recv_into_timeout(
    tailer: *mut shmbus_tailer,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    index_out: *mut u64,
    ts_ns_out: *mut u64,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(tailer, buf, cap, len_out, index_out, ts_ns_out, wait_ns(timeout_ns)) }
}

/// # Safety
/// As the exported receives.
unsafe fn recv_ref(
    tailer: *mut shmbus_tailer,
    data: *mut *const u8,
    len: *mut usize,
    index_out: *mut u64,
    ts_out: *mut u64,
    wait: Wait,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per the caller's contract.
        unsafe {
            let (index, ts) = recv_in_place(tailer, data, len, |e| {
                let t = &mut e.tailer;
                let e = t.recv_ref_with(wait).settle(wait)?;
                Ok((e.data(), (e.index(), e.ts_ns())))
            })?;
            put(index_out, index);
            put(ts_out, ts);
            Ok(())
        }
    })
}

/// Reads the next entry in place (zero-copy) if one is committed now (`SHMBUS_EMPTY` if not):
/// `*data` / `*len` are its bytes in the mapped file, valid until the next call on this
/// tailer. Other outputs and codes as `shmbus_tailer_try_recv`.
///
/// # Safety
/// `tailer` NULL or live; `data` and `len` valid for writes; the others NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_try_recv_ref(
    tailer: *mut shmbus_tailer,
    data: *mut *const u8,
    len: *mut usize,
    index_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(tailer, data, len, index_out, ts_ns_out, Wait::Now) }
}

/// `shmbus_tailer_try_recv_ref`, waiting as long as it takes.
///
/// # Safety
/// As `shmbus_tailer_try_recv_ref`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_recv_ref(
    tailer: *mut shmbus_tailer,
    data: *mut *const u8,
    len: *mut usize,
    index_out: *mut u64,
    ts_ns_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(tailer, data, len, index_out, ts_ns_out, Wait::Forever) }
}

/// `shmbus_tailer_try_recv_ref`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_tailer_try_recv_ref`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_recv_ref_timeout(
    tailer: *mut shmbus_tailer,
    data: *mut *const u8,
    len: *mut usize,
    index_out: *mut u64,
    ts_ns_out: *mut u64,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(tailer, data, len, index_out, ts_ns_out, wait_ns(timeout_ns)) }
}

/// Saves a named reader's position (everything read so far), so the next reader of that name
/// goes on from here. Does nothing for an anonymous tailer.
///
/// # Safety
/// `tailer` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_ack(tailer: *mut shmbus_tailer) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_ref(tailer, |t| t.tailer.ack()) }
}

/// The index the next read returns (0 if `tailer` is NULL).
///
/// # Safety
/// `tailer` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_position(tailer: *const shmbus_tailer) -> u64 {
    // SAFETY: per this function's contract.
    unsafe { value_of(tailer, 0, |t| t.tailer.position()) }
}

/// Sets how the tailer's blocking receives wait: busy-poll `spin_ns` nanoseconds before sleeping
/// (0: sleep at once; `UINT64_MAX`: never sleep; the default is 20 µs).
///
/// # Safety
/// `tailer` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_set_wait_policy(tailer: *mut shmbus_tailer, spin_ns: u64) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_mut(tailer, |e| e.tailer.set_wait_policy(wait_policy(spin_ns))) }
}

/// Frees a tailer (NULL: nothing). A named reader's unacked reads are not saved.
///
/// # Safety
/// `tailer` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_tailer_free(tailer: *mut shmbus_tailer) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(tailer) })
}
