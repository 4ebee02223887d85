//! Service: request/response between clients and competing servers. `shmbus_service_*`,
//! `shmbus_client_*`, `shmbus_server_*`, `shmbus_request_*`, and the zero-copy items:
//! `shmbus_request_loan_*`, `shmbus_response_loan_*`, `shmbus_response_*`.

use std::ffi::{c_char, c_void};

use shmbus::lend::{LendError, LendOr};
use shmbus::service::{
    ActiveRequest, OwnedRequestLoan, OwnedResponseLoan, OwnedResponseRef, RespondError, Service, ServiceConfig,
    ServiceStatus,
};
use shmbus::{Client, Server};

use crate::call::*;
use crate::domain::shmbus_domain;
use crate::handle::*;
use crate::schema::{schema_of, set_schema, shmbus_schema};
use crate::status::*;

/// Settings for `shmbus_service_create_or_open` (unset values: as the existing service, or
/// the defaults when created).
#[derive(Debug)]
pub struct shmbus_service_config {
    h: Handle<ServiceConfig>,
}

/// An open service. Endpoints made from it do not borrow it.
#[derive(Debug)]
pub struct shmbus_service {
    h: Handle<Service>,
}

/// A client of a service: sends requests, reads the responses to them.
#[derive(Debug)]
pub struct shmbus_client {
    h: Handle<Client>,
}

/// A server of a service: takes requests (competing with the other servers).
#[derive(Debug)]
pub struct shmbus_server {
    h: Handle<Server>,
}

/// A request a server took: its bytes, and its answer. Owned by the caller; may be answered
/// on another thread. Freeing it unfinished ends it (its client reads an empty last
/// response).
#[derive(Debug)]
pub struct shmbus_request {
    h: Handle<ActiveRequest>,
}

/// A request slot loaned from a client (`shmbus_client_loan_request`): write the request into
/// `shmbus_request_loan_data`, then `shmbus_request_loan_send` or
/// `shmbus_request_loan_discard` (either frees it). While it is out, calls on its client fail
/// with `SHMBUS_BUSY`.
#[derive(Debug)]
pub struct shmbus_request_loan {
    item: OwnedRequestLoan,
}

/// A response cell loaned from a request (`shmbus_request_loan_response`): write the response
/// into `shmbus_response_loan_data`, then `shmbus_response_loan_send` or
/// `shmbus_response_loan_discard` (either frees it). While it is out, calls on its request
/// fail with `SHMBUS_BUSY`.
#[derive(Debug)]
pub struct shmbus_response_loan {
    item: OwnedResponseLoan,
}

/// A response read in place, in its cell (`shmbus_client_recv_response_ref`): read it with
/// `shmbus_response_data`, give the cell back to the server with `shmbus_response_free`.
/// While it is out, calls on its client fail with `SHMBUS_BUSY`.
#[derive(Debug)]
pub struct shmbus_response {
    item: OwnedResponseRef,
}

/// A snapshot of a service (`shmbus_service_status`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shmbus_service_status_info {
    /// Most servers.
    pub max_servers: u64,
    /// Most clients.
    pub max_clients: u64,
    /// Most requests one client has in flight.
    pub max_in_flight: u64,
    /// Largest request in bytes.
    pub max_request_len: u64,
    /// Largest response in bytes.
    pub max_response_len: u64,
    /// Responses to one request that may wait unread.
    pub response_depth: u64,
    /// Live servers.
    pub servers: u64,
    /// Live clients.
    pub clients: u64,
    /// Requests waiting for a server now.
    pub pending: u64,
    /// Requests a server is answering now.
    pub in_flight: u64,
    /// Requests given up on while a server holds them.
    pub abandoned: u64,
    /// Requests sent, over the service's life.
    pub requests: u64,
    /// Responses read, over the service's life.
    pub responses: u64,
    /// Requests their clients gave up on (timed out, cancelled).
    pub timeouts: u64,
    /// Requests whose server died holding them.
    pub server_gone: u64,
    /// Requests their server failed.
    pub failed: u64,
}

impl From<ServiceStatus> for shmbus_service_status_info {
    fn from(s: ServiceStatus) -> Self {
        shmbus_service_status_info {
            max_servers: s.max_servers as u64,
            max_clients: s.max_clients as u64,
            max_in_flight: s.max_in_flight as u64,
            max_request_len: s.max_request_len as u64,
            max_response_len: s.max_response_len as u64,
            response_depth: s.response_depth as u64,
            servers: s.servers as u64,
            clients: s.clients as u64,
            pending: s.pending,
            in_flight: s.in_flight,
            abandoned: s.abandoned,
            requests: s.requests,
            responses: s.responses,
            timeouts: s.timeouts,
            server_gone: s.server_gone,
            failed: s.failed,
        }
    }
}

lent_item! {
    shmbus_request_loan => OwnedRequestLoan;
    shmbus_response_loan => OwnedResponseLoan;
    shmbus_response => OwnedResponseRef;
}

wrapper!(
    shmbus_service_config => ServiceConfig,
    shmbus_service => Service,
    shmbus_client => Client,
    shmbus_server => Server,
    shmbus_request => ActiveRequest,
);

/// Makes a service config with nothing set.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_new(out: *mut *mut shmbus_service_config) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, ServiceConfig::default()) })
}

/// Frees a service config (NULL: nothing).
///
/// # Safety
/// `config` is NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_free(config: *mut shmbus_service_config) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(config) })
}

/// Sets the most servers (default 4; with the clients at most 128).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_set_max_servers(
    config: *mut shmbus_service_config,
    n: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.max_servers(n)) }
}

/// Sets the most clients (default 16).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_set_max_clients(
    config: *mut shmbus_service_config,
    n: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.max_clients(n)) }
}

/// Sets the most requests one client has in flight, 1 to 64 (default 4).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_set_max_in_flight(
    config: *mut shmbus_service_config,
    n: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.max_in_flight(n)) }
}

/// Sets the largest request, in bytes (default 4096).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_set_max_request_len(
    config: *mut shmbus_service_config,
    len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.max_request_len(len)) }
}

/// Sets the largest response, in bytes (default 4096).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_set_max_response_len(
    config: *mut shmbus_service_config,
    len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.max_response_len(len)) }
}

/// Sets the responses to one request that may wait unread, 1 to 4 (default 2).
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_set_response_depth(
    config: *mut shmbus_service_config,
    n: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.response_depth(n)) }
}

/// Sets the file mode of a created service.
///
/// # Safety
/// `config` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_set_mode(
    config: *mut shmbus_service_config,
    mode: u32,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { set(config, |c| c.mode(mode)) }
}

/// Sets the schema of the service's requests (as `shmbus_topic_config_set_schema` sets a
/// topic's). A service stores its request and response schemas together: a config with one
/// of them set and not the other is refused by `shmbus_service_create_or_open` with
/// `SHMBUS_INVALID_CONFIG`.
///
/// # Safety
/// `config` is NULL or live; the texts NULL or NUL-terminated; `data` valid for `data_len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_set_request_schema(
    config: *mut shmbus_service_config,
    message_encoding: *const c_char,
    schema_name: *const c_char,
    schema_encoding: *const c_char,
    data: *const c_void,
    data_len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe {
        set_schema(config, message_encoding, schema_name, schema_encoding, data, data_len, |c, s| c.request_schema(s))
    }
}

/// Sets the schema of the service's responses (see
/// `shmbus_service_config_set_request_schema`).
///
/// # Safety
/// `config` is NULL or live; the texts NULL or NUL-terminated; `data` valid for `data_len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_config_set_response_schema(
    config: *mut shmbus_service_config,
    message_encoding: *const c_char,
    schema_name: *const c_char,
    schema_encoding: *const c_char,
    data: *const c_void,
    data_len: usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe {
        set_schema(config, message_encoding, schema_name, schema_encoding, data, data_len, |c, s| c.response_schema(s))
    }
}

/// Opens service `name` in `domain`, creating it with `config` (NULL: defaults) if it does
/// not exist. Codes as `shmbus_topic_create_or_open`.
///
/// # Safety
/// `domain`, `config` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_create_or_open(
    domain: *const shmbus_domain,
    name: *const c_char,
    config: *const shmbus_service_config,
    out: *mut *mut shmbus_service,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { open_in(domain, name, out, |d, n| Ok(Service::create_or_open(d, n, &config_or_default(config)?)?)) }
}

/// Opens the existing service `name` (`SHMBUS_NOT_FOUND` if there is none).
///
/// # Safety
/// `domain` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_open(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut *mut shmbus_service,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { open_in(domain, name, out, |d, n| Ok(Service::open(d, n)?)) }
}

/// Reads the state of service `name` (read permission suffices).
///
/// # Safety
/// `domain` NULL or live; `name` NUL-terminated; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_status(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut shmbus_service_status_info,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { status_in(domain, name, out, |d, n| Ok(Service::status(d, n)?)) }
}

/// The schema of the service's requests, set by its creator, into `*out`: `SHMBUS_OK`, or
/// `SHMBUS_NOT_FOUND` (and `*out` all NULL and zero) when it has none. The pointers stay valid
/// until `service` is freed.
///
/// # Safety
/// `service` is NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_request_schema(
    service: *const shmbus_service,
    out: *mut shmbus_schema,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { schema_of(service, out, "service", |c| c.request_schema()) }
}

/// The schema of the service's responses (see `shmbus_service_request_schema`).
///
/// # Safety
/// `service` is NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_response_schema(
    service: *const shmbus_service,
    out: *mut shmbus_schema,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { schema_of(service, out, "service", |c| c.response_schema()) }
}

/// Frees a service handle (NULL: nothing). Its endpoints stay usable.
///
/// # Safety
/// `service` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_free(service: *mut shmbus_service) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(service) })
}

/// Joins the service as a client (`SHMBUS_TOO_MANY_PARTICIPANTS` when every lane is held).
///
/// # Safety
/// `service` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_client(
    service: *const shmbus_service,
    out: *mut *mut shmbus_client,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, with_ref(service, |s| Ok(s.client()?))?) })
}

/// Joins the service as a server.
///
/// # Safety
/// `service` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_service_server(
    service: *const shmbus_service,
    out: *mut *mut shmbus_server,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    guard(|| unsafe { into_c(out, with_ref(service, |s| Ok(s.server()?))?) })
}

/// Frees a client (NULL: nothing); its requests in flight are given up.
///
/// # Safety
/// `client` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_client_free(client: *mut shmbus_client) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(client) })
}

/// Sends `len` bytes at `data` as a request, without waiting; its id goes to `*id_out`
/// (NULL: not wanted). `SHMBUS_FULL`: `max_in_flight` requests unanswered;
/// `SHMBUS_NO_WORKERS`: no server; `SHMBUS_TOO_LARGE`. Nothing was sent on an error.
///
/// # Safety
/// `client` NULL or live; `data` valid for `len` bytes; `id_out` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_client_try_send_request(
    client: *mut shmbus_client,
    data: *const c_void,
    len: usize,
    id_out: *mut u64,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            let id = with_mut(client, |c| Ok(c.try_send_request(bytes_arg(data, len)?)?))?;
            put(id_out, id);
            Ok(())
        }
    })
}

/// Loans a request slot to write a request in place (zero-copy send): write up to
/// `shmbus_request_loan_data`'s capacity (`max_request_len` bytes, 64-byte aligned), then
/// `shmbus_request_loan_send(loan, len, ...)`. Never waits; refused as
/// `shmbus_client_try_send_request` (`SHMBUS_FULL`: `max_in_flight` requests unanswered;
/// `SHMBUS_NO_WORKERS`: no server). One loan per client at a time.
///
/// # Safety
/// `client` NULL or live; `out` valid for a write. The loan must be sent or discarded before
/// the client is used again; freeing the client first is allowed (the loan then frees it).
#[no_mangle]
pub unsafe extern "C" fn shmbus_client_loan_request(
    client: *mut shmbus_client,
    out: *mut *mut shmbus_request_loan,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { lend_out(client, out, Client::loan_request_owned) }
}

/// The request loan's memory: `*data` (writable, 64-byte aligned, not cleared) and
/// `*capacity` (the service's `max_request_len`).
///
/// # Safety
/// `loan` NULL or live; `data` and `capacity` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_request_loan_data(
    loan: *mut shmbus_request_loan,
    data: *mut *mut u8,
    capacity: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { item_room(loan, data, capacity, "capacity") }
}

/// Sends the first `len` bytes of the loan as a request and frees the loan (in every case:
/// on an error nothing is sent). Its id goes to `*id_out` (NULL: not wanted).
/// `SHMBUS_TOO_LARGE` if `len` exceeds the capacity.
///
/// # Safety
/// `loan` NULL or live, not used again; `id_out` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_request_loan_send(
    loan: *mut shmbus_request_loan,
    len: usize,
    id_out: *mut u64,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        let id = unsafe {
            give_back(loan, |item| {
                loan_fits(item.len(), len, "sent")?;
                Ok::<_, Error>(item.send(len))
            })
        }??;
        // SAFETY: per this function's contract.
        unsafe { put(id_out, id) };
        Ok(())
    })
}

/// Frees a request loan without sending anything (NULL: nothing).
///
/// # Safety
/// `loan` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_request_loan_discard(loan: *mut shmbus_request_loan) {
    // SAFETY: per this function's contract.
    unsafe { hand_back(loan, drop) }
}

/// # Safety
/// As the exported receives.
#[allow(clippy::too_many_arguments)]
unsafe fn recv_response(
    client: *mut shmbus_client,
    only: Option<u64>,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    id_out: *mut u64,
    last_out: *mut u32,
    wait: Wait,
) -> Result<(), Error> {
    buf_args(buf, cap, len_out)?;
    // SAFETY: per the caller's contract.
    unsafe {
        let (id, last) = with_mut(client, |c| {
            let r = match only {
                Some(id) => c.recv_response_for_with(id, wait),
                None => c.recv_response_ref_with(wait),
            }
            .settle(wait)?;
            let (id, last) = (r.request_id(), r.is_last());
            if r.len() > cap {
                len_out.write(r.len());
                let need = r.len();
                r.unread();
                return Err(Error::with_value(
                    SHMBUS_BUFFER_TOO_SMALL,
                    need as u64,
                    format_args!("the response is {need} bytes, the buffer {cap}; it is kept for the next receive"),
                ));
            }
            deliver(r.data(), buf, cap, len_out)?;
            Ok((id, last))
        })?;
        put(id_out, id);
        put(last_out, u32::from(last));
    }
    Ok(())
}

/// Receives the next response to any request in flight, waiting up to `timeout_ns`
/// (`UINT64_MAX`: for ever; 0: not at all, `SHMBUS_EMPTY`), copying it into `buf` (`cap`
/// bytes), its length to `*len_out`, its request's id to `*id_out` and 1 to `*last_out` if it
/// is that request's last (each NULL but `len_out`: not wanted). `SHMBUS_TIMEOUT`;
/// `SHMBUS_DISCONNECTED`: the server answering it died; `SHMBUS_FAILED`: the server failed
/// it; `SHMBUS_EMPTY` also when nothing is in flight. A response larger than `cap` is
/// `SHMBUS_BUFFER_TOO_SMALL` (its length in `*len_out`), kept for the next receive.
///
/// # Safety
/// `client` NULL or live; `buf` valid for `cap` bytes; `len_out` valid; the others NULL or
/// valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_client_recv_response(
    client: *mut shmbus_client,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    id_out: *mut u64,
    last_out: *mut u32,
    timeout_ns: u64,
) -> shmbus_status {
    let wait = wait_of(timeout_ns);
    // SAFETY: per this function's contract.
    guard(|| unsafe { recv_response(client, None, buf, cap, len_out, id_out, last_out, wait) })
}

/// `shmbus_client_recv_response` for the responses to request `id` only (those to other
/// requests wait for their turn); `SHMBUS_EMPTY` at once when `id` is not in flight.
///
/// # Safety
/// As `shmbus_client_recv_response`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_client_recv_response_for(
    client: *mut shmbus_client,
    id: u64,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    last_out: *mut u32,
    timeout_ns: u64,
) -> shmbus_status {
    let wait = wait_of(timeout_ns);
    // SAFETY: per this function's contract.
    guard(|| unsafe { recv_response(client, Some(id), buf, cap, len_out, std::ptr::null_mut(), last_out, wait) })
}

/// The in-place receives: the response stays in its cell, lent with the client.
///
/// # Safety
/// As the exported receives.
unsafe fn recv_response_ref(
    client: *mut shmbus_client,
    only: Option<u64>,
    out: *mut *mut shmbus_response,
    wait: Wait,
) -> shmbus_status {
    // SAFETY: per the caller's contract.
    unsafe {
        lend_out(client, out, |h| {
            Client::response_owned(h, |c| {
                match only {
                    Some(id) => c.recv_response_for_with(id, wait),
                    None => c.recv_response_ref_with(wait),
                }
                .settle(wait)
            })
        })
    }
}

/// Receives the next response to any request in flight in place (zero-copy), waiting as
/// `shmbus_client_recv_response` does (`timeout_ns`: 0 not at all, `UINT64_MAX` for ever):
/// `*out` is the response in its cell, read with `shmbus_response_data`,
/// `shmbus_response_request_id` and `shmbus_response_is_last`, its cell handed back to the
/// server with `shmbus_response_free` (or kept for the next receive with
/// `shmbus_response_unread`). Codes as `shmbus_client_recv_response` (no
/// `SHMBUS_BUFFER_TOO_SMALL`). One response per client at a time.
///
/// # Safety
/// `client` NULL or live; `out` valid for a write. The response must be freed before the
/// client is used again; freeing the client first is allowed (the response then frees it).
#[no_mangle]
pub unsafe extern "C" fn shmbus_client_recv_response_ref(
    client: *mut shmbus_client,
    out: *mut *mut shmbus_response,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_response_ref(client, None, out, wait_of(timeout_ns)) }
}

/// `shmbus_client_recv_response_ref` for the responses to request `id` only (those to other
/// requests wait for their turn); `SHMBUS_EMPTY` at once when `id` is not in flight.
///
/// # Safety
/// As `shmbus_client_recv_response_ref`.
#[no_mangle]
pub unsafe extern "C" fn shmbus_client_recv_response_ref_for(
    client: *mut shmbus_client,
    id: u64,
    out: *mut *mut shmbus_response,
    timeout_ns: u64,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { recv_response_ref(client, Some(id), out, wait_of(timeout_ns)) }
}

/// The response's bytes, in its cell: `*data` (read-only, 64-byte aligned, valid until
/// `shmbus_response_free` or `shmbus_response_unread`) and `*len`.
///
/// # Safety
/// `response` NULL or live; `data` and `len` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_response_data(
    response: *const shmbus_response,
    data: *mut *const u8,
    len: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { item_bytes(response, data, len) }
}

/// The id of the request the response answers (0 if `response` is NULL).
///
/// # Safety
/// `response` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_response_request_id(response: *const shmbus_response) -> u64 {
    // SAFETY: per this function's contract.
    unsafe { item_value(response, 0, |r| r.request_id()) }
}

/// 1 if the response is its request's last (the request is then no longer in flight), else 0
/// (also for NULL).
///
/// # Safety
/// `response` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_response_is_last(response: *const shmbus_response) -> u32 {
    // SAFETY: per this function's contract.
    unsafe { item_value(response, 0, |r| u32::from(r.is_last())) }
}

/// Frees a response read in place, handing its cell back to the server (NULL: nothing); its
/// data pointer is invalid afterwards.
///
/// # Safety
/// `response` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_response_free(response: *mut shmbus_response) {
    // SAFETY: per this function's contract.
    unsafe { hand_back(response, drop) }
}

/// Frees a response read in place but leaves it unread: the next receive returns it again
/// (NULL: nothing); its data pointer is invalid afterwards.
///
/// # Safety
/// `response` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_response_unread(response: *mut shmbus_response) {
    // SAFETY: per this function's contract.
    unsafe { hand_back(response, |r| r.unread()) }
}

/// Sends `len` bytes at `data` and waits up to `timeout_ns` (`UINT64_MAX`: for ever) for the
/// response, copied into `buf` (`cap` bytes) with its length in `*len_out`: one round trip.
/// Refused as `shmbus_client_try_send_request` (nothing sent). `SHMBUS_TIMEOUT` gives the
/// request up (a late response is dropped); `SHMBUS_DISCONNECTED`: the server died;
/// `SHMBUS_FAILED`: it failed the request; `SHMBUS_BUFFER_TOO_SMALL`: the response did not
/// fit (its length in `*len_out`) and is given up.
///
/// # Safety
/// `client` NULL or live; `data` valid for `len` bytes; `buf` valid for `cap` bytes; `len_out`
/// valid.
#[no_mangle]
pub unsafe extern "C" fn shmbus_client_call(
    client: *mut shmbus_client,
    data: *const c_void,
    len: usize,
    buf: *mut c_void,
    cap: usize,
    len_out: *mut usize,
    timeout_ns: u64,
) -> shmbus_status {
    guard(|| {
        buf_args(buf, cap, len_out)?;
        // SAFETY: per this function's contract.
        unsafe {
            let id = with_mut(client, |c| Ok(c.try_send_request(bytes_arg(data, len)?)?))?;
            let wait = if timeout_ns == u64::MAX { Wait::Forever } else { wait_ns(timeout_ns) };
            let mut last = 0u32;
            let r = recv_response(client, Some(id), buf, cap, len_out, std::ptr::null_mut(), &mut last, wait);
            if r.is_err() || last == 0 {
                // Given up: timed out, too large, or more responses that a call does not read.
                with_mut(client, |c| Ok(c.cancel(id)))?;
            }
            r
        }
    })
}

/// Gives request `id` up: a response that comes later is dropped. `SHMBUS_OK` if it was in
/// flight, `SHMBUS_NOT_FOUND` if not.
///
/// # Safety
/// `client` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_client_cancel(client: *mut shmbus_client, id: u64) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        match unsafe { with_mut(client, |c| Ok(c.cancel(id))) }? {
            true => Ok(()),
            false => Err(Error::new(SHMBUS_NOT_FOUND, format_args!("request {id} is not in flight"))),
        }
    })
}

/// Requests of this client in flight (0 for NULL).
///
/// # Safety
/// `client` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_client_in_flight(client: *const shmbus_client) -> usize {
    // SAFETY: per this function's contract.
    unsafe { value_of(client, 0, |c| c.in_flight()) }
}

/// Frees a server (NULL: nothing). Requests it took and has not finished keep its place
/// until they are freed.
///
/// # Safety
/// `server` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_server_free(server: *mut shmbus_server) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(server) })
}

/// Takes the next request, waiting up to `timeout_ns` (`UINT64_MAX`: for ever; 0: not at
/// all, `SHMBUS_EMPTY`), into `*out` (a `shmbus_request` to answer and free).
/// `SHMBUS_TIMEOUT`; `SHMBUS_CORRUPT`: a request too large for the service (finished
/// unanswered).
///
/// # Safety
/// `server` NULL or live; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn shmbus_server_recv(
    server: *mut shmbus_server,
    out: *mut *mut shmbus_request,
    timeout_ns: u64,
) -> shmbus_status {
    let wait = wait_of(timeout_ns);
    guard(|| {
        out_arg(out)?;
        // SAFETY: per this function's contract.
        unsafe {
            let req = with_mut(server, |s| s.recv_with(wait).settle(wait))?;
            into_c(out, req)
        }
    })
}

/// The request's bytes, in the client's slot (no copy), to `*data` and `*len`: valid until
/// the request is finished (its last response sent, ended or failed) or freed; a response
/// loan out does not move them. `SHMBUS_INVALID_ARGUMENT` once it is finished,
/// `SHMBUS_BUSY` while a response loan is out.
///
/// # Safety
/// `request` NULL or live; `data` and `len` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_request_data(
    request: *const shmbus_request,
    data: *mut *const u8,
    len: *mut usize,
) -> shmbus_status {
    guard(|| {
        out_arg(data)?;
        out_arg(len)?;
        // SAFETY: per this function's contract; the bytes stay in the slot until the request
        // is finished, which only its owner (the caller, through this handle or a loan from
        // it) can do.
        unsafe {
            with_request(request, |r| {
                data.write(r.data().as_ptr());
                len.write(r.len());
                Ok(())
            })
        }
    })
}

/// The request's id, as its client numbered it (0 for NULL, a finished request, or while a
/// response loan is out).
///
/// # Safety
/// `request` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_request_id(request: *const shmbus_request) -> u64 {
    // SAFETY: per this function's contract.
    unsafe { value_of(request, 0, |r| if r.is_finished() { 0 } else { r.id() }) }
}

/// The wait of a service call's `timeout_ns`: 0 does not wait, `UINT64_MAX` waits for ever.
fn wait_of(timeout_ns: u64) -> Wait {
    match timeout_ns {
        0 => Wait::Now,
        u64::MAX => Wait::Forever,
        ns => wait_ns(ns),
    }
}

fn finished() -> Error {
    Error::new(SHMBUS_INVALID_ARGUMENT, "the request is finished (its last response sent, ended or failed)")
}

/// A refusal of a request's lender in C's terms: closed is finished (`shmbus_request_fail`
/// and a gone client take the request out of it), busy is a response loan out.
fn request_refused(e: LendError) -> Error {
    match e {
        LendError::Closed => finished(),
        busy => lend_failed::<shmbus_request, Error>(LendOr::Refused(busy)),
    }
}

/// Runs `f` on the unfinished request behind `p` (`SHMBUS_INVALID_ARGUMENT` once finished,
/// `SHMBUS_BUSY` while a response loan is out).
///
/// # Safety
/// `p` is NULL or a live request.
unsafe fn with_request<R>(
    p: *const shmbus_request,
    f: impl FnOnce(&mut ActiveRequest) -> Result<R, Error>,
) -> Result<R, Error> {
    // SAFETY: forwarded.
    let lender = unsafe { get(p) }?;
    lender.with(|r| if r.is_finished() { Err(finished()) } else { f(r) }).map_err(request_refused)?
}

/// Ends the request behind `p` whose client gave up or died (`RespondError::ClientGone`):
/// taken out of its handle and dropped, its slot goes back at once, as it did before loans
/// (the handle then answers as finished).
///
/// # Safety
/// `p` is NULL or a live request.
unsafe fn end_gone(p: *const shmbus_request) {
    // SAFETY: forwarded.
    if let Ok(lender) = unsafe { get(p) } {
        drop(lender.take());
    }
}

/// Sends `len` bytes at `data` as a response to `request`, the last one if `last` is not 0
/// (the request is then finished: free it). Waits up to `timeout_ns` (`UINT64_MAX`: for
/// ever) while the client has `response_depth` responses unread (`SHMBUS_FULL` after).
/// `SHMBUS_DISCONNECTED`: the client gave up or died, the response was dropped and the
/// request is finished; `SHMBUS_TOO_LARGE`; `SHMBUS_INVALID_ARGUMENT`: already finished.
///
/// # Safety
/// `request` NULL or live; `data` valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_request_respond(
    request: *mut shmbus_request,
    data: *const c_void,
    len: usize,
    last: u32,
    timeout_ns: u64,
) -> shmbus_status {
    let wait = wait_of(timeout_ns);
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            let out = with_request(request, |r| Ok(r.respond_with(bytes_arg(data, len)?, last != 0, wait)))?;
            if matches!(out, Err(RespondError::ClientGone)) {
                end_gone(request);
            }
            Ok(out?)
        }
    })
}

/// Loans a response cell of `request` to write a response in place (zero-copy): write up to
/// `shmbus_response_loan_data`'s capacity (`max_response_len` bytes, 64-byte aligned), then
/// `shmbus_response_loan_send(loan, len, last)`. Waits up to `timeout_ns` (0: not at all;
/// `UINT64_MAX`: for ever) while the client has `response_depth` responses unread
/// (`SHMBUS_FULL` after). `SHMBUS_DISCONNECTED`: the client gave up or died (the request is
/// finished); `SHMBUS_INVALID_ARGUMENT`: already finished. One loan per request at a time.
/// (The name `shmbus_request_loan` is the request loan's type.)
///
/// # Safety
/// `request` NULL or live; `out` valid for a write. The loan must be sent or discarded before
/// the request is used again; freeing the request first is allowed (the loan then frees it:
/// a request left unfinished is ended then).
#[no_mangle]
pub unsafe extern "C" fn shmbus_request_loan_response(
    request: *mut shmbus_request,
    out: *mut *mut shmbus_response_loan,
    timeout_ns: u64,
) -> shmbus_status {
    let wait = wait_of(timeout_ns);
    // SAFETY: per this function's contract.
    unsafe {
        lend_out(request, out, |h| {
            ActiveRequest::loan_owned(h, wait).map_err(|e| match e {
                LendOr::Failed(RespondError::Finished) | LendOr::Refused(LendError::Closed) => {
                    LendOr::Failed(finished())
                }
                LendOr::Failed(RespondError::ClientGone) => {
                    // Ended at once, as `shmbus_request_respond` does.
                    drop(h.take());
                    LendOr::Failed(Error::from(RespondError::ClientGone))
                }
                LendOr::Failed(e) => LendOr::Failed(Error::from(e)),
                LendOr::Refused(busy) => LendOr::Refused(busy),
            })
        })
    }
}

/// The response loan's memory: `*data` (writable, 64-byte aligned, not cleared) and
/// `*capacity` (the service's `max_response_len`).
///
/// # Safety
/// `loan` NULL or live; `data` and `capacity` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn shmbus_response_loan_data(
    loan: *mut shmbus_response_loan,
    data: *mut *mut u8,
    capacity: *mut usize,
) -> shmbus_status {
    // SAFETY: per this function's contract.
    unsafe { item_room(loan, data, capacity, "capacity") }
}

/// Sends the first `len` bytes of the loan as a response, the last one if `last` is not 0
/// (the request is then finished: free it), and frees the loan (in every case: on an error
/// nothing is sent). `SHMBUS_TOO_LARGE` if `len` exceeds the capacity.
///
/// # Safety
/// `loan` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_response_loan_send(
    loan: *mut shmbus_response_loan,
    len: usize,
    last: u32,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            give_back(loan, |item| {
                loan_fits(item.len(), len, "sent")?;
                match last {
                    0 => item.send(len),
                    _ => item.send_last(len),
                }
                Ok(())
            })
        }?
    })
}

/// Frees a response loan without sending anything (NULL: nothing); the request stays as it
/// was.
///
/// # Safety
/// `loan` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_response_loan_discard(loan: *mut shmbus_response_loan) {
    // SAFETY: per this function's contract.
    unsafe { hand_back(loan, drop) }
}

/// Finishes `request` as failed: its client gets `SHMBUS_FAILED`.
/// `SHMBUS_INVALID_ARGUMENT` if it was already finished; `SHMBUS_BUSY` while a response loan
/// is out.
///
/// # Safety
/// `request` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn shmbus_request_fail(request: *mut shmbus_request) -> shmbus_status {
    guard(|| {
        // SAFETY: per this function's contract.
        unsafe {
            with_request(request, |_| Ok(()))?;
            get(request)?.take().map_err(request_refused)?.fail();
        }
        Ok(())
    })
}

/// Frees a request (NULL: nothing); one not finished is ended: its client reads an empty
/// last response.
///
/// # Safety
/// `request` NULL or live, not used again.
#[no_mangle]
pub unsafe extern "C" fn shmbus_request_free(request: *mut shmbus_request) {
    // SAFETY: per this function's contract.
    guard_value((), || unsafe { free(request) })
}
