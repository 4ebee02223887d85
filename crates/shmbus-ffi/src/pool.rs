//! Pool: work dispatch to worker processes, the job handed back when every worker is busy.
//! `shmbus_pool_*`, `shmbus_dispatcher_*`, `shmbus_worker_*`.

use std::ffi::{c_char, c_void};

use shmbus::{Dispatcher, Pool, PoolConfig, PoolStatus, Worker};

use crate::call::*;
use crate::domain::shmbus_domain;
use crate::handle::*;
use crate::schema::*;
use crate::status::*;

/// Settings for `shmbus_pool_create_or_open` (unset values: as the existing pool, or the
/// defaults when created).
#[derive(Debug)]
pub struct shmbus_pool_config {
    h: Handle<PoolConfig>,
}

/// An open pool. Endpoints made from it do not borrow it.
#[derive(Debug)]
pub struct shmbus_pool {
    h: Handle<Pool>,
}

/// The pool's dispatcher (one per pool: a second is `SHMBUS_BUSY`).
#[derive(Debug)]
pub struct shmbus_dispatcher {
    h: Handle<Dispatcher>,
}

/// A pool worker: receives one job at a time, and `shmbus_worker_done` when it is finished.
#[derive(Debug)]
pub struct shmbus_worker {
    h: Handle<Work>,
}

/// A snapshot of a pool (`shmbus_pool_status`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shmbus_pool_status_info {
    /// Most workers.
    pub max_workers: u64,
    /// Largest job in bytes.
    pub max_job_len: u64,
    /// Workers attached (including dead ones not reaped yet).
    pub workers: u64,
    /// Workers waiting for work.
    pub idle: u64,
    /// Workers attached and not waiting.
    pub busy: u64,
    /// The dispatcher's pid (0: none).
    pub dispatcher_pid: u32,
    /// Whether that dispatcher is alive (1) or not (0).
    pub dispatcher_alive: u32,
    /// Jobs dispatched over the pool's life.
    pub dispatched: u64,
    /// Jobs reported lost over the pool's life.
    pub lost: u64,
}

/// The worker (which keeps a job too large for the caller's buffer in its mailbox).
#[derive(Debug)]
pub(crate) struct Work {
    pub(crate) worker: Worker,
}

waitable_via!(Work => worker);

impl From<PoolStatus> for shmbus_pool_status_info {
    fn from(s: PoolStatus) -> Self {
        shmbus_pool_status_info {
            max_workers: s.max_workers as u64,
            max_job_len: s.max_job_len as u64,
            workers: s.workers as u64,
            idle: s.idle as u64,
            busy: s.busy as u64,
            dispatcher_pid: s.dispatcher_pid.unwrap_or(0),
            dispatcher_alive: u32::from(s.dispatcher_alive),
            dispatched: s.dispatched,
            lost: s.lost,
        }
    }
}

wrapper!(
    shmbus_pool_config => PoolConfig,
    shmbus_pool => Pool,
    shmbus_dispatcher => Dispatcher,
    shmbus_worker => Work,
);

/// Makes a pool config with nothing set.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_config_new(out: *mut *mut shmbus_pool_config) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, PoolConfig::default()) })
}

/// Frees a pool config (NULL: nothing).
///
/// # Safety
/// `config` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_config_free(config: *mut shmbus_pool_config) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(config) })
}

/// Sets the most workers.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_config_set_max_workers(
    config: *mut shmbus_pool_config,
    n: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.max_workers(n)) }
}

/// Sets the largest job, in bytes.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_config_set_max_job_len(
    config: *mut shmbus_pool_config,
    len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.max_job_len(len)) }
}

/// Sets the file mode of a created pool.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_config_set_mode(config: *mut shmbus_pool_config, mode: u32) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.mode(mode)) }
}

/// Sets the group id of a created pool.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_config_set_group(config: *mut shmbus_pool_config, gid: u32) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.group(gid)) }
}

/// Sets the schema of the pool's messages (see `shmbus_schema`): `message_encoding` (`cdr`,
/// `protobuf`, `json`, ...; required), `schema_name` and `schema_encoding` (NULL: empty) and
/// `data_len` bytes of schema data at `data` (NULL with 0: none; at most
/// `SHMBUS_SCHEMA_MAX_DATA`). A created pool stores it; an existing pool must carry the same
/// schema (`SHMBUS_SCHEMA_MISMATCH`). Without this setter any schema is accepted. An invalid
/// schema (empty message encoding, a text over `SHMBUS_SCHEMA_MAX_TEXT` bytes or with a
/// control character, data too long or without a schema encoding) is
/// `SHMBUS_INVALID_CONFIG`, and the config is left as it was.
///
/// # Safety
/// `config` is NULL or live; the texts NULL or NUL-terminated; `data` valid for `data_len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_config_set_schema(
    config: *mut shmbus_pool_config,
    message_encoding: *const c_char,
    schema_name: *const c_char,
    schema_encoding: *const c_char,
    data: *const c_void,
    data_len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set_schema(config, message_encoding, schema_name, schema_encoding, data, data_len, |c, s| c.schema(s)) }
}

/// Opens pool `name` in `domain`, creating it with `config` (NULL: defaults) if it does not
/// exist. Codes as `shmbus_topic_create_or_open`.
///
/// # Safety
/// `domain`, `config` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_create_or_open(
    domain: *const shmbus_domain,
    name: *const c_char,
    config: *const shmbus_pool_config,
    out: *mut *mut shmbus_pool,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { open_in(domain, name, out, |d, n| Ok(Pool::create_or_open(d, n, &config_or_default(config)?)?)) }
}

/// Opens the existing pool `name` (`SHMBUS_NOT_FOUND` if there is none).
///
/// # Safety
/// `domain` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_open(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut *mut shmbus_pool,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { open_in(domain, name, out, |d, n| Ok(Pool::open(d, n)?)) }
}

/// Reads the state of pool `name` (read permission suffices).
///
/// # Safety
/// `domain` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_status(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut shmbus_pool_status_info,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { status_in(domain, name, out, |d, n| Ok(Pool::status(d, n)?)) }
}

/// Maps every page of the pool into this process now, so that no dispatch or job of
/// this process takes a page fault the first time it touches a page (NULL: nothing). For a
/// long-lived process on a latency path; advice only (nothing before Linux 5.14). See
/// `docs/topic.md`, "Sizing".
///
/// # Safety
/// `pool` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_prefault(pool: *const shmbus_pool) {
    // SAFETY: per this function's contract.
    unsafe { value_of(pool, (), |h| h.prefault()) }
}

/// The pool's schema, set by its creator, into `*out`: `SHMBUS_OK`, or `SHMBUS_NOT_FOUND` (and
/// `*out` all NULL and zero) when it has none. The pointers stay valid until `pool` is freed.
///
/// # Safety
/// `pool` is NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_schema(pool: *const shmbus_pool, out: *mut shmbus_schema) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { schema_of(pool, out, "pool", |c| c.schema()) }
}

/// Frees a pool handle (NULL: nothing). Its endpoints stay usable.
///
/// # Safety
/// `pool` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_free(pool: *mut shmbus_pool) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(pool) })
}

/// Makes the pool's dispatcher (`SHMBUS_BUSY` if a live process holds it).
///
/// # Safety
/// `pool` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_dispatcher(
    pool: *const shmbus_pool,
    out: *mut *mut shmbus_dispatcher,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, with_ref(pool, |p| Ok(p.dispatcher()?))?) })
}

/// Makes a worker (`SHMBUS_TOO_MANY_PARTICIPANTS` when every mailbox is taken).
///
/// # Safety
/// `pool` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_pool_worker(pool: *const shmbus_pool, out: *mut *mut shmbus_worker) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            let worker = with_ref(pool, |p| Ok(p.worker()?))?;
            into_c(out, Work { worker })
        }
    })
}

/// Hands a job of `len` bytes to an idle worker; its id goes to `*job_id_out` and the
/// worker's index to `*worker_out` (each NULL: not wanted). Never waits: `SHMBUS_ALL_BUSY` or
/// `SHMBUS_NO_WORKERS` hand the job back (nothing was sent). Also `SHMBUS_TOO_LARGE`.
///
/// # Safety
/// `dispatcher` NULL or live; `data` valid for `len` bytes; the outputs NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_dispatcher_try_send(
    dispatcher: *mut shmbus_dispatcher,
    data: *const c_void,
    len: usize,
    job_id_out: *mut u64,
    worker_out: *mut usize,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            let sent = with_mut(dispatcher, |d| Ok(d.try_send(bytes_arg(data, len)?)?))?;
            put(job_id_out, sent.job_id);
            put(worker_out, sent.worker);
            Ok(())
        }
    })
}

/// `shmbus_dispatcher_try_send` with the caller's job id `job_id` (instead of the pool's).
///
/// # Safety
/// As `shmbus_dispatcher_try_send`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_dispatcher_try_send_with_id(
    dispatcher: *mut shmbus_dispatcher,
    job_id: u64,
    data: *const c_void,
    len: usize,
    worker_out: *mut usize,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            let sent = with_mut(dispatcher, |d| Ok(d.try_send_with_id(job_id, bytes_arg(data, len)?)?))?;
            put(worker_out, sent.worker);
            Ok(())
        }
    })
}

/// Frees the mailboxes of dead workers. The ids of the jobs they held (lost: send them again
/// if they matter) go to `lost_ids` (up to `cap` of them; NULL with `cap` 0 when not wanted),
/// and their number to `*n_out` (which may exceed `cap`: the rest are not reported again).
///
/// # Safety
/// `dispatcher` NULL or live; `lost_ids` valid for `cap` values; `n_out` valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_dispatcher_reap(
    dispatcher: *mut shmbus_dispatcher,
    lost_ids: *mut u64,
    cap: usize,
    n_out: *mut usize,
) -> shmbus_status {
    guard(|| {
        if lost_ids.is_null() && cap != 0 {
            return Err(Error::null("lost_ids"));
        }
        // SAFETY: per this function's contract.
        unsafe {
            let lost = with_mut(dispatcher, |d| Ok(d.reap()))?;
            for (i, job) in lost.iter().take(cap).enumerate() {
                lost_ids.add(i).write(job.job_id);
            }
            put_required(n_out, lost.len(), "n_out")
        }
    })
}

/// Frees the dispatcher (NULL: nothing); workers see it gone (`SHMBUS_DISCONNECTED`).
///
/// # Safety
/// `dispatcher` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_dispatcher_free(dispatcher: *mut shmbus_dispatcher) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(dispatcher) })
}

/// # Safety
/// As the exported receives.
unsafe fn recv_copy(
    worker: *mut shmbus_worker,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    job_id_out: *mut u64,
    wait: Wait,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per the caller's contract.
        unsafe {
            let id = with_mut(worker, |e| {
                let w = &mut e.worker;
                let info = recv_into_buf(
                    buf,
                    cap,
                    len_out,
                    |dst| w.recv_into_slice_with(dst, wait).settle(wait),
                    |i| i.len(),
                )?;
                Ok(info.id())
            })?;
            put(job_id_out, id);
            Ok(())
        }
    })
}

/// Receives a job if one is in this worker's mailbox now (`SHMBUS_EMPTY` if not), copying it
/// into `buf` (`cap` bytes), its length to `*len_out` and its id to `*job_id_out` (NULL: not
/// wanted). Receiving declares the previous job done. `SHMBUS_DISCONNECTED`: the dispatcher
/// is gone (receive again to wait for a new one). A job larger than `cap` is
/// `SHMBUS_BUFFER_TOO_SMALL` (its length in `*len_out`), kept for the next receive.
///
/// # Safety
/// `worker` NULL or live; `buf` valid for `cap` bytes; `len_out` valid; `job_id_out` NULL or
/// valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_try_recv(
    worker: *mut shmbus_worker,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    job_id_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(worker, buf, cap, len_out, job_id_out, Wait::Now) }
}

/// `shmbus_worker_try_recv`, waiting as long as it takes for a job.
///
/// # Safety
/// As `shmbus_worker_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_recv(
    worker: *mut shmbus_worker,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    job_id_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(worker, buf, cap, len_out, job_id_out, Wait::Forever) }
}

/// `shmbus_worker_try_recv`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_worker_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_recv_timeout(
    worker: *mut shmbus_worker,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    job_id_out: *mut u64,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(worker, buf, cap, len_out, job_id_out, wait_ns(timeout_ns)) }
}

/// Receives the next job into memory the caller keeps (the other bindings'
/// `recv_into`): the same as `shmbus_worker_try_recv`. One copy from shared memory into
/// `buf`, no allocation; a job longer than `cap` is `SHMBUS_BUFFER_TOO_SMALL` with its
/// length in `*len_out`, kept for the next receive.
///
/// # Safety
/// As `shmbus_worker_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_try_recv_into(
    worker: *mut shmbus_worker,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    job_id_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(worker, buf, cap, len_out, job_id_out, Wait::Now) }
}

/// `shmbus_worker_try_recv_into`, waiting as long as it takes
/// (`shmbus_worker_recv`).
///
/// # Safety
/// As `shmbus_worker_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_recv_into(
    worker: *mut shmbus_worker,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    job_id_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(worker, buf, cap, len_out, job_id_out, Wait::Forever) }
}

/// `shmbus_worker_try_recv_into`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`;
/// `shmbus_worker_recv_timeout`).
///
/// # Safety
/// As `shmbus_worker_try_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_recv_into_timeout(
    worker: *mut shmbus_worker,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    job_id_out: *mut u64,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_copy(worker, buf, cap, len_out, job_id_out, wait_ns(timeout_ns)) }
}

/// # Safety
/// As the exported receives.
unsafe fn recv_ref(
    worker: *mut shmbus_worker,
    data: *mut *const u8,
    len: *mut usize,
    job_id_out: *mut u64,
    wait: Wait,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per the caller's contract.
        unsafe {
            let id = recv_in_place(worker, data, len, |e| {
                let w = &mut e.worker;
                let job = w.recv_ref_with(wait).settle(wait)?;
                Ok((job.data(), job.id()))
            })?;
            put(job_id_out, id);
            Ok(())
        }
    })
}

/// Receives a job in place (zero-copy) if one is in the mailbox now (`SHMBUS_EMPTY` if not):
/// `*data` / `*len` are the job's bytes in shared memory, valid until the next call on this
/// worker (a receive, `shmbus_worker_done`, `shmbus_worker_free`); the id goes to
/// `*job_id_out` (NULL: not wanted).
///
/// # Safety
/// `worker` NULL or live; `data` and `len` valid for writes; `job_id_out` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_try_recv_ref(
    worker: *mut shmbus_worker,
    data: *mut *const u8,
    len: *mut usize,
    job_id_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(worker, data, len, job_id_out, Wait::Now) }
}

/// `shmbus_worker_try_recv_ref`, waiting as long as it takes.
///
/// # Safety
/// As `shmbus_worker_try_recv_ref`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_recv_ref(
    worker: *mut shmbus_worker,
    data: *mut *const u8,
    len: *mut usize,
    job_id_out: *mut u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(worker, data, len, job_id_out, Wait::Forever) }
}

/// `shmbus_worker_try_recv_ref`, waiting at most `timeout_ns` (`SHMBUS_TIMEOUT`).
///
/// # Safety
/// As `shmbus_worker_try_recv_ref`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_recv_ref_timeout(
    worker: *mut shmbus_worker,
    data: *mut *const u8,
    len: *mut usize,
    job_id_out: *mut u64,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_ref(worker, data, len, job_id_out, wait_ns(timeout_ns)) }
}

/// Declares the current job finished and the worker idle (the dispatcher may hand it the
/// next job). Call it before waiting in a `shmbus_waitset`; a receive does it by itself.
///
/// # Safety
/// `worker` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_done(worker: *mut shmbus_worker) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_mut(worker, |w| w.worker.done()) }
}

/// Whether the pool's dispatcher process is alive: 1, or 0 (also if `worker` is NULL).
///
/// # Safety
/// `worker` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_dispatcher_alive(worker: *const shmbus_worker) -> i32 {
    // SAFETY: per this function's contract.
    unsafe { value_of(worker, 0, |w| i32::from(w.worker.dispatcher_alive())) }
}

/// After a receive returned `SHMBUS_DISCONNECTED` (the dispatcher is gone): 1 if that
/// dispatcher finished normally (it was freed with `shmbus_dispatcher_free`; its process may
/// have exited since), 0 if it died holding the pool (killed, crashed). 0 before any
/// `SHMBUS_DISCONNECTED`, and if `worker` is NULL.
///
/// # Safety
/// `worker` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_dispatcher_finished(worker: *const shmbus_worker) -> i32 {
    // SAFETY: per this function's contract.
    unsafe { value_of(worker, 0, |w| i32::from(w.worker.dispatcher_finished())) }
}

/// Sets how the worker's blocking receives wait: busy-poll `spin_ns` nanoseconds before sleeping
/// (0: sleep at once; `UINT64_MAX`: never sleep; the default is 20 µs).
///
/// # Safety
/// `worker` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_set_wait_policy(worker: *mut shmbus_worker, spin_ns: u64) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { run_mut(worker, |e| e.worker.set_wait_policy(wait_policy(spin_ns))) }
}

/// Frees a worker (NULL: nothing). A job it held and did not finish is reported lost to the
/// dispatcher.
///
/// # Safety
/// `worker` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_worker_free(worker: *mut shmbus_worker) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(worker) })
}
