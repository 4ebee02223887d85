//! The HTTP/1.1 server of `shmbus export`: std threads, every resource bounded, made to
//! keep answering scrapes while a hostile local client does its worst.
//!
//! One thread accepts; each admitted connection gets its own thread, so a client that is
//! slow, stalled or silent only ever holds its own thread. What bounds each resource:
//!
//! - **Connections**: at most [`MAX_CONNECTIONS`], and fewer when `RLIMIT_NOFILE` is low
//!   (the limit is read again at every accept, so `prlimit` on a running exporter counts):
//!   [`FD_RESERVE`] descriptors stay free for the scrapes themselves. A new connection over
//!   the limit takes the place of the connection that has been evictable longest: every
//!   connection is, since its accept or its last answer, except while its answer is being
//!   made (it may be idle, sending a request, waiting for its turn, or not reading its
//!   answer). When every connection is having its answer made, the new one gets `503` and
//!   is closed at once.
//! - **Time**: the head and body of a request must arrive within [`REQUEST_TIMEOUT`] of its
//!   first byte (of the accept, for a connection's first request), a kept-alive connection
//!   may wait [`IDLE_TIMEOUT`] for its next request, and a response must be taken by the
//!   client within [`WRITE_TIMEOUT`]. These are deadlines for the whole head, body or
//!   response, not per read, so trickling one byte at a time does not extend them.
//! - **Memory**: a request line holds at most [`MAX_REQUEST_LINE`] bytes (`414`), a header
//!   line [`MAX_HEADER_LINE`] and the whole head [`MAX_HEAD_BYTES`] or [`MAX_HEADERS`] lines
//!   (`431`); a body may announce at most [`MAX_BODY_BYTES`] (`413`), is read and dropped,
//!   and must come with a `Content-Length` (`Transfer-Encoding` gets `501`). The connection
//!   is closed after each of those answers. `Expect: 100-continue` gets its `100 Continue`
//!   only for a body within the limit.
//! - **Pipelining**: requests are read one at a time, the next only after the previous
//!   answer was written, so a client that sends without reading stops being read once its
//!   socket buffers are full, and is dropped at [`WRITE_TIMEOUT`]. A connection answers at
//!   most [`MAX_REQUESTS_PER_CONNECTION`] requests and is then closed. Before each request
//!   but a connection's first, the server checks the client is still there (`POLLRDHUP`):
//!   a client that left gets no more scrapes for what it had queued.
//! - **Work**: at most [`MAX_PARALLEL_HANDLERS`] requests are being answered (scraped) at
//!   once; the others wait their turn.
//! - **Accept errors**: running out of descriptors or memory (`EMFILE`, `ENFILE`,
//!   `ENOBUFS`, `ENOMEM`) sheds idle connections and backs off from
//!   [`ACCEPT_BACKOFF_MIN`] to [`ACCEPT_BACKOFF_MAX`], then accepts again; errors of one
//!   connection (`ECONNABORTED`, `EPROTO`, network errors) are skipped. Any other error
//!   means the listening socket itself is broken: [`serve`] returns it, and the caller
//!   exits non-zero so that a supervisor restarts the exporter.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Connections served at once, at most (fewer when `RLIMIT_NOFILE` is low).
pub const MAX_CONNECTIONS: usize = 64;
/// File descriptors kept free for scrapes (domain directories, channel files, journals) and
/// for the listener and standard streams: connections take at most `RLIMIT_NOFILE` minus
/// this many (and at least one).
pub const FD_RESERVE: u64 = 32;
/// Bytes in the request line (method, target, version), at most; longer gets `414`.
pub const MAX_REQUEST_LINE: usize = 8 * 1024;
/// Bytes in one header line, at most; longer gets `431`.
pub const MAX_HEADER_LINE: usize = 8 * 1024;
/// Bytes in a request's head (request line, headers, blank line), at most; more gets `431`.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// Header lines in a request, at most; more gets `431`.
pub const MAX_HEADERS: usize = 100;
/// A request body's announced length, at most; longer gets `413` (the body is not read).
pub const MAX_BODY_BYTES: u64 = 64 * 1024;
/// Requests answered on one connection; the last answer says `Connection: close`.
pub const MAX_REQUESTS_PER_CONNECTION: u32 = 100;
/// Requests being answered (scraped) at once, at most.
pub const MAX_PARALLEL_HANDLERS: usize = 4;
/// Time for a request's head and body to arrive, from its first byte (from the accept for
/// a connection's first request); after it, `408` and the connection is closed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a kept-alive connection may wait for its next request before it is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Time for the client to take a whole response; after it the connection is closed.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// First pause after an accept failed for lack of descriptors or memory.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause between accepts that keep failing for lack of descriptors or memory.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// After a last answer, the input still read (and dropped) so that the close is a clean FIN
/// and not a reset that could destroy the answer in flight: at most this long and this much.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 64 * 1024;
/// Bytes read from a socket at a time.
const CHUNK: usize = 4096;

/// A request, as the handler sees it.
#[derive(Debug)]
pub struct Request<'a> {
    /// `GET`, `HEAD`, … (case-sensitive, as HTTP has it).
    pub method: &'a str,
    /// The request target (`/metrics?x=1`).
    pub target: &'a str,
}

/// A handler's answer. The server adds `Content-Length` and `Connection`, and drops the
/// body for `HEAD`.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    /// The `Allow` header, for `405`.
    pub allow: Option<&'static str>,
    pub body: String,
}

/// What answers requests; called on the connections' threads.
pub type Handler = dyn Fn(&Request) -> Response + Send + Sync;

/// Serves `listener` until accepting fails for good; returns that error (never returns
/// otherwise).
pub fn serve(listener: TcpListener, handler: Arc<Handler>) -> io::Error {
    let shared = Arc::new(Shared {
        registry: Mutex::new(Vec::new()),
        next_id: AtomicU64::new(0),
        handlers: Gate::new(MAX_PARALLEL_HANDLERS),
        handler,
    });
    let mut backoff: Option<Duration> = None;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                backoff = None;
                admit(&shared, stream);
            }
            Err(e) => {
                match accept_error(&e) {
                    AcceptError::Skip => {}
                    AcceptError::Exhausted => {
                        let pause = backoff.map_or(ACCEPT_BACKOFF_MIN, |b| (b * 2).min(ACCEPT_BACKOFF_MAX));
                        if backoff.is_none() {
                            say(&format!("cannot accept a connection ({e}); closing idle connections and retrying"));
                        }
                        backoff = Some(pause);
                        // Make room: the idle connections beyond what the descriptor limit
                        // allows now, and at least one, give their descriptors back.
                        let mut reg = shared.lock();
                        let keep = connection_limit().saturating_sub(1);
                        while reg.iter().filter(|s| !s.evicted).count() > keep && evict_longest_waiting(&mut reg) {}
                        if !reg.iter().any(|s| s.evicted) {
                            evict_longest_waiting(&mut reg);
                        }
                        drop(reg);
                        std::thread::sleep(pause);
                    }
                    AcceptError::Fatal => {
                        // Stop the connections too: the caller exits.
                        let mut reg = shared.lock();
                        while evict_longest_waiting(&mut reg) {}
                        return e;
                    }
                }
            }
        }
    }
}

/// A line on stderr. Not `eprintln!`, which panics when stderr is gone: the server goes on
/// without it.
fn say(line: &str) {
    let _ = writeln!(io::stderr(), "shmbus export: {line}");
}

enum AcceptError {
    /// That connection failed before it was accepted: the next one is unaffected.
    Skip,
    /// Out of descriptors or memory: make room, pause, retry.
    Exhausted,
    /// The listening socket itself is unusable.
    Fatal,
}

fn accept_error(e: &io::Error) -> AcceptError {
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => AcceptError::Exhausted,
        // accept(2): errors pending on the new socket, to be treated like EAGAIN; and a
        // connection refused by a security module (EPERM).
        Some(
            libc::EINTR
            | libc::EAGAIN
            | libc::ECONNABORTED
            | libc::EPROTO
            | libc::EPERM
            | libc::ENETDOWN
            | libc::ENOPROTOOPT
            | libc::EHOSTDOWN
            | libc::ENONET
            | libc::EHOSTUNREACH
            | libc::EOPNOTSUPP
            | libc::ENETUNREACH
            | libc::ETIMEDOUT,
        ) => AcceptError::Skip,
        _ => AcceptError::Fatal,
    }
}

/// The connections allowed now: [`MAX_CONNECTIONS`], or `RLIMIT_NOFILE` minus
/// [`FD_RESERVE`] when that is less, and at least one.
fn connection_limit() -> usize {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `r` is a valid, writable rlimit for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return MAX_CONNECTIONS;
    }
    // `rlim_t` is not `u64` on every target.
    #[allow(clippy::useless_conversion)]
    let room = u64::try_from(r.rlim_cur).unwrap_or(u64::MAX).saturating_sub(FD_RESERVE);
    usize::try_from(room).unwrap_or(usize::MAX).clamp(1, MAX_CONNECTIONS)
}

/// State shared by the accept loop and the connections.
struct Shared {
    /// The connections admitted and not yet closed.
    registry: Mutex<Vec<Slot>>,
    next_id: AtomicU64,
    handlers: Gate,
    handler: Arc<Handler>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Vec<Slot>> {
        // A connection thread that panicked held no invariant of this list across the lock.
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One connection in the registry.
struct Slot {
    id: u64,
    /// Its socket: open for as long as the slot is in the registry (see [`Conn`]).
    fd: RawFd,
    /// Since when it may be shut down to make room: since it was accepted or since its last
    /// answer was made (it waits for a request, reads one, waits for its turn to be
    /// answered, or writes its answer). `None` while its answer is being made.
    evictable_since: Option<Instant>,
    /// Shut down to make room; its thread is on its way out.
    evicted: bool,
}

/// Shuts down the connection that has been evictable longest (see [`Slot`]), if any is;
/// says whether one was.
fn evict_longest_waiting(reg: &mut [Slot]) -> bool {
    let Some(slot) =
        reg.iter_mut().filter(|s| !s.evicted && s.evictable_since.is_some()).min_by_key(|s| s.evictable_since)
    else {
        return false;
    };
    slot.evicted = true;
    // SAFETY: `slot.fd` is the socket of a connection still in the registry, and we hold the
    // registry's lock: a connection leaves the registry under this lock before its socket is
    // closed (`Conn` drops its `Registration` before its `TcpStream`), so the descriptor is
    // open and is still that socket. shutdown(2) only wakes the connection's thread (its
    // reads return end of file, its writes fail); that thread closes the socket.
    unsafe { libc::shutdown(slot.fd, libc::SHUT_RDWR) };
    true
}

/// Admits `stream`, making room if needed, or answers `503` and closes it.
fn admit(shared: &Arc<Shared>, stream: TcpStream) {
    let limit = connection_limit();
    let mut reg = shared.lock();
    while reg.iter().filter(|s| !s.evicted).count() >= limit && evict_longest_waiting(&mut reg) {}
    // Shut-down connections whose threads have not exited yet (they are on their way) still
    // hold a thread each: those count too, within a margin that a low descriptor limit
    // does not shrink (a descriptor they hold makes accept fail, which backs off).
    if reg.iter().filter(|s| !s.evicted).count() >= limit || reg.len() >= 2 * MAX_CONNECTIONS {
        drop(reg);
        refuse(stream);
        return;
    }
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    reg.push(Slot { id, fd: stream.as_raw_fd(), evictable_since: Some(Instant::now()), evicted: false });
    drop(reg);
    let conn = Conn { registration: Registration { shared: Arc::clone(shared), id }, stream };
    let spawned = std::thread::Builder::new().name("export-connection".into()).spawn(move || conn.serve());
    if let Err(e) = spawned {
        // The closure, and with it the connection, is dropped: it left the registry.
        say(&format!("cannot start a thread for a connection: {e}"));
        std::thread::sleep(ACCEPT_BACKOFF_MIN);
    }
}

/// Answers `503` without waiting for anything and closes: every connection is busy.
fn refuse(stream: TcpStream) {
    let body = "busy: too many connections, retry later\n";
    let text = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // A fresh socket's send buffer takes this at once; if not, the client gets nothing. What
    // the client sent already is read, so that the close is not a reset that destroys the
    // answer.
    if stream.set_nonblocking(true).is_ok() {
        let _ = (&stream).write(text.as_bytes());
        let _ = (&stream).read(&mut [0u8; CHUNK]);
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// A connection's place in the registry, left when dropped.
struct Registration {
    shared: Arc<Shared>,
    id: u64,
}

impl Registration {
    /// Marks the connection evictable (from now) or not (while its answer is made).
    /// Returns false if it was evicted meanwhile.
    fn set_evictable(&self, evictable: bool) -> bool {
        let mut reg = self.shared.lock();
        match reg.iter_mut().find(|s| s.id == self.id) {
            Some(s) => {
                s.evictable_since = evictable.then(Instant::now);
                !s.evicted
            }
            None => false,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared.lock().retain(|s| s.id != self.id);
    }
}

/// An admitted connection. Field order matters: the registration is dropped (the slot
/// leaves the registry) before the stream (the socket is closed), which is what makes
/// [`evict_longest_waiting`]'s shutdown of a registered descriptor sound.
struct Conn {
    registration: Registration,
    stream: TcpStream,
}

/// Why a request was not read.
enum ReadFailure {
    /// The client closed, or waited too long between requests, or the socket failed:
    /// close without a word.
    Quiet,
    /// The request is refused: answer this status (and message) and close.
    Reject(u16, &'static str),
}

/// A request head, parsed.
struct Head {
    method: String,
    target: String,
    http10: bool,
    content_length: Option<u64>,
    chunked: bool,
    expect_continue: bool,
    expect_other: bool,
    connection_close: bool,
    connection_keep_alive: bool,
    headers: usize,
}

impl Conn {
    fn serve(self) {
        let _ = self.stream.set_nodelay(true);
        // Bytes read past the previous request (pipelined), never more than a head's worth.
        let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
        let mut answered: u32 = 0;
        loop {
            let first_byte_by = Instant::now() + if answered == 0 { REQUEST_TIMEOUT } else { IDLE_TIMEOUT };
            let head = match self.read_request(&mut buf, first_byte_by, answered == 0) {
                Ok(h) => h,
                Err(ReadFailure::Quiet) => return,
                Err(ReadFailure::Reject(status, message)) => {
                    let r = Response {
                        status,
                        content_type: "text/plain; charset=utf-8",
                        allow: None,
                        body: format!("{message}\n"),
                    };
                    if self.write_response(&r, false, false).is_ok() {
                        self.linger();
                    }
                    return;
                }
            };
            let first = answered == 0;
            answered += 1;
            let keep_alive = !head.connection_close
                && (!head.http10 || head.connection_keep_alive)
                && answered < MAX_REQUESTS_PER_CONNECTION;
            let response = {
                let _turn = self.registration.shared.handlers.enter();
                // Only while its answer is being made is a connection not shut down to make
                // room; one shut down while it waited for its turn gets no scrape.
                if !self.registration.set_evictable(false) {
                    return;
                }
                // The client that queued this request may have left since: a scrape for
                // nobody is not made. (A connection's first request is answered even after
                // the client closed its sending side, as a one-shot `nc -N` does.)
                if peer_gone(&self.stream, !first) {
                    return;
                }
                (self.registration.shared.handler)(&Request { method: &head.method, target: &head.target })
            };
            if !self.registration.set_evictable(true) {
                return;
            }
            if self.write_response(&response, head.method == "HEAD", keep_alive).is_err() {
                return;
            }
            if !keep_alive {
                self.linger();
                return;
            }
        }
    }

    /// Reads one request: its head, then its body (dropped). `buf` holds bytes already read
    /// and keeps the bytes read past the request.
    /// The head and body must arrive within [`REQUEST_TIMEOUT`] of the first byte; that
    /// first byte by `first_byte_by`. A connection's `first` request has one deadline for
    /// all: `first_byte_by`.
    fn read_request(&self, buf: &mut Vec<u8>, first_byte_by: Instant, first: bool) -> Result<Head, ReadFailure> {
        let mut deadline = if buf.is_empty() { first_byte_by } else { Instant::now() + REQUEST_TIMEOUT };
        let mut started = !buf.is_empty();
        let mut head: Option<Head> = None;
        // Incremental scan: `line_start` is where the current line begins, `scanned` how far
        // a newline was looked for.
        let (mut line_start, mut scanned) = (0usize, 0usize);
        let head_end = loop {
            let mut end = None;
            while let Some(nl) = buf[scanned..].iter().position(|&b| b == b'\n').map(|i| scanned + i) {
                let line = &buf[line_start..nl];
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                scanned = nl + 1;
                line_start = nl + 1;
                match &mut head {
                    // Empty lines before the request line are ignored (RFC 9112 §2.2).
                    None if line.is_empty() => {}
                    None => head = Some(parse_request_line(line)?),
                    Some(_) if line.is_empty() => {
                        end = Some(nl + 1);
                        break;
                    }
                    Some(h) => parse_header(h, line)?,
                }
                if line_start > MAX_HEAD_BYTES {
                    return Err(ReadFailure::Reject(431, "request header fields too large"));
                }
            }
            if let Some(end) = end {
                break end;
            }
            scanned = buf.len();
            // The line still arriving is already too long, or the head is.
            let partial = buf.len() - line_start;
            if head.is_none() && partial > MAX_REQUEST_LINE {
                return Err(ReadFailure::Reject(414, "request line too long"));
            }
            if head.is_some() && partial > MAX_HEADER_LINE {
                return Err(ReadFailure::Reject(431, "request header field too large"));
            }
            if buf.len() > MAX_HEAD_BYTES {
                return Err(ReadFailure::Reject(431, "request header fields too large"));
            }
            let mut chunk = [0u8; CHUNK];
            let want = CHUNK.min(MAX_HEAD_BYTES + 1 - buf.len().min(MAX_HEAD_BYTES));
            match self.read_by(&mut chunk[..want], deadline) {
                Ok(0) => return Err(ReadFailure::Quiet),
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if !started && !first {
                        deadline = Instant::now() + REQUEST_TIMEOUT;
                    }
                    started = true;
                }
                Err(e) if is_timeout(&e) && started => return Err(ReadFailure::Reject(408, "request timeout")),
                Err(_) => return Err(ReadFailure::Quiet),
            }
        };
        let head = head.expect("a head ends after its request line");
        buf.drain(..head_end);

        if head.chunked {
            return Err(ReadFailure::Reject(501, "a request body needs a Content-Length (no Transfer-Encoding)"));
        }
        if head.expect_other {
            return Err(ReadFailure::Reject(417, "expectation failed: only 100-continue is known"));
        }
        let length = head.content_length.unwrap_or(0);
        if length > MAX_BODY_BYTES {
            return Err(ReadFailure::Reject(413, "request body too large"));
        }
        if length > 0 && head.expect_continue && !head.http10 {
            self.write_by(b"HTTP/1.1 100 Continue\r\n\r\n", Instant::now() + WRITE_TIMEOUT)
                .map_err(|_| ReadFailure::Quiet)?;
        }
        // The body: dropped, from what was read already, then from the socket (never past it).
        let mut left = usize::try_from(length).unwrap_or(usize::MAX);
        let from_buf = left.min(buf.len());
        buf.drain(..from_buf);
        left -= from_buf;
        let mut chunk = [0u8; CHUNK];
        while left > 0 {
            let want = left.min(CHUNK);
            match self.read_by(&mut chunk[..want], deadline) {
                Ok(0) => return Err(ReadFailure::Quiet),
                Ok(n) => left -= n,
                Err(e) if is_timeout(&e) => return Err(ReadFailure::Reject(408, "request timeout")),
                Err(_) => return Err(ReadFailure::Quiet),
            }
        }
        Ok(head)
    }

    /// One read, given up at `deadline`.
    fn read_by(&self, into: &mut [u8], deadline: Instant) -> io::Result<usize> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        // A zero timeout would mean none: `left` is not zero.
        self.stream.set_read_timeout(Some(left))?;
        loop {
            match (&self.stream).read(into) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }

    /// Writes all of `bytes`, given up at `deadline`.
    fn write_by(&self, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
        while !bytes.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.stream.set_write_timeout(Some(left))?;
            match (&self.stream).write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn write_response(&self, r: &Response, head_only: bool, keep_alive: bool) -> io::Result<()> {
        let mut text = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            r.status,
            reason(r.status),
            r.content_type,
            r.body.len()
        );
        if let Some(allow) = r.allow {
            text.push_str(&format!("Allow: {allow}\r\n"));
        }
        text.push_str(if keep_alive { "Connection: keep-alive\r\n\r\n" } else { "Connection: close\r\n\r\n" });
        if !head_only {
            text.push_str(&r.body);
        }
        self.write_by(text.as_bytes(), Instant::now() + WRITE_TIMEOUT)
    }

    /// Ends the connection after its last answer: no more writing, and what the client still
    /// sends is read and dropped for a moment, so the close does not reset the answer away.
    fn linger(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
        let deadline = Instant::now() + LINGER;
        let (mut chunk, mut read) = ([0u8; CHUNK], 0usize);
        while read < LINGER_BYTES {
            match self.read_by(&mut chunk, deadline) {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    }
}

/// Whether the client is gone: the connection reset or closed both ways, or (when
/// `half_closed_counts`) closed its sending side.
fn peer_gone(stream: &TcpStream, half_closed_counts: bool) -> bool {
    let mut p = libc::pollfd { fd: stream.as_raw_fd(), events: libc::POLLRDHUP, revents: 0 };
    // SAFETY: one valid, writable pollfd and a count of 1; the descriptor is this
    // connection's open socket for the whole call (borrowed from `stream`).
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1
        && (p.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0
            || (half_closed_counts && p.revents & libc::POLLRDHUP != 0))
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// `METHOD SP TARGET SP HTTP/1.x`.
fn parse_request_line(line: &[u8]) -> Result<Head, ReadFailure> {
    let bad = ReadFailure::Reject(400, "bad request line");
    let line = std::str::from_utf8(line).map_err(|_| ReadFailure::Reject(400, "bad request line"))?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad);
    };
    if method.is_empty() || !method.bytes().all(is_token_byte) || target.is_empty() || target.bytes().any(|b| b < 0x21)
    {
        return Err(bad);
    }
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        v if v.starts_with("HTTP/") => return Err(ReadFailure::Reject(505, "HTTP version not supported")),
        _ => return Err(bad),
    };
    Ok(Head {
        method: method.to_owned(),
        target: target.to_owned(),
        http10,
        content_length: None,
        chunked: false,
        expect_continue: false,
        expect_other: false,
        connection_close: false,
        connection_keep_alive: false,
        headers: 0,
    })
}

/// `Name: value`, noting the headers that matter to framing.
fn parse_header(h: &mut Head, line: &[u8]) -> Result<(), ReadFailure> {
    h.headers += 1;
    if h.headers > MAX_HEADERS {
        return Err(ReadFailure::Reject(431, "too many request header fields"));
    }
    let bad = ReadFailure::Reject(400, "bad header field");
    let colon = line.iter().position(|&b| b == b':').ok_or(ReadFailure::Reject(400, "bad header field"))?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    // No empty name, no whitespace before the colon, no obsolete line folding.
    if name.is_empty() || !name.iter().copied().all(is_token_byte) {
        return Err(bad);
    }
    let value = value.trim_ascii();
    if name.eq_ignore_ascii_case(b"content-length") {
        let n = std::str::from_utf8(value)
            .ok()
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .map(|v| v.parse::<u64>().unwrap_or(u64::MAX))
            .ok_or(ReadFailure::Reject(400, "bad Content-Length"))?;
        if h.content_length.is_some_and(|m| m != n) {
            return Err(ReadFailure::Reject(400, "conflicting Content-Length"));
        }
        h.content_length = Some(n);
    } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
        h.chunked = true;
    } else if name.eq_ignore_ascii_case(b"expect") {
        if value.eq_ignore_ascii_case(b"100-continue") {
            h.expect_continue = true;
        } else {
            h.expect_other = true;
        }
    } else if name.eq_ignore_ascii_case(b"connection") {
        for opt in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
            h.connection_close |= opt.eq_ignore_ascii_case(b"close");
            h.connection_keep_alive |= opt.eq_ignore_ascii_case(b"keep-alive");
        }
    }
    Ok(())
}

/// A `tchar` of RFC 9110 §5.6.2.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        417 => "Expectation Failed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// A counting gate: at most `n` holders at once; the others wait.
struct Gate {
    held: Mutex<usize>,
    freed: Condvar,
    n: usize,
}

impl Gate {
    fn new(n: usize) -> Gate {
        Gate { held: Mutex::new(0), freed: Condvar::new(), n }
    }

    fn enter(&self) -> Turn<'_> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        while *held >= self.n {
            held = self.freed.wait(held).unwrap_or_else(|p| p.into_inner());
        }
        *held += 1;
        Turn(self)
    }
}

/// A place in a [`Gate`], given back when dropped (also when the handler panics).
struct Turn<'a>(&'a Gate);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self.0.held.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(r: Result<(), ReadFailure>) -> Option<u16> {
        match r {
            Err(ReadFailure::Reject(s, _)) => Some(s),
            _ => None,
        }
    }

    #[test]
    fn request_lines() {
        let h = parse_request_line(b"GET /metrics?x=1 HTTP/1.1").ok().unwrap();
        assert_eq!((h.method.as_str(), h.target.as_str(), h.http10), ("GET", "/metrics?x=1", false));
        assert!(parse_request_line(b"GET /metrics HTTP/1.0").ok().unwrap().http10);
        for bad in [
            &b"GET /metrics"[..],
            b"GET  /metrics HTTP/1.1",
            b"GET /a b HTTP/1.1",
            b"G(T / HTTP/1.1",
            b"\xff / HTTP/1.1",
        ] {
            assert_eq!(rejected(parse_request_line(bad).map(|_| ())), Some(400), "{bad:?}");
        }
        assert_eq!(rejected(parse_request_line(b"GET / HTTP/2.0").map(|_| ())), Some(505));
    }

    #[test]
    fn framing_headers() {
        let mut h = parse_request_line(b"POST / HTTP/1.1").ok().unwrap();
        assert!(parse_header(&mut h, b"Content-Length: 12").is_ok());
        assert!(parse_header(&mut h, b"content-length:12").is_ok(), "the same length again is fine");
        assert_eq!(rejected(parse_header(&mut h, b"Content-Length: 13")), Some(400));
        assert_eq!(rejected(parse_header(&mut h, b"Content-Length: -1")), Some(400));
        assert_eq!(rejected(parse_header(&mut h, b"Content-Length : 1")), Some(400));
        assert_eq!(rejected(parse_header(&mut h, b" folded")), Some(400));
        assert!(parse_header(&mut h, b"Expect: 100-Continue").is_ok());
        assert!(parse_header(&mut h, b"Connection: Keep-Alive, close").is_ok());
        assert_eq!(h.content_length, Some(12));
        assert!(h.expect_continue && h.connection_close && h.connection_keep_alive && !h.chunked);
        let mut h = parse_request_line(b"GET / HTTP/1.1").ok().unwrap();
        let mut r = Ok(());
        for _ in 0..=MAX_HEADERS {
            r = parse_header(&mut h, b"X: y");
        }
        assert_eq!(rejected(r), Some(431));
    }

    #[test]
    fn accept_errors_are_classified() {
        let kind = |n| accept_error(&io::Error::from_raw_os_error(n));
        assert!(matches!(kind(libc::EMFILE), AcceptError::Exhausted));
        assert!(matches!(kind(libc::ENFILE), AcceptError::Exhausted));
        assert!(matches!(kind(libc::ENOMEM), AcceptError::Exhausted));
        assert!(matches!(kind(libc::ECONNABORTED), AcceptError::Skip));
        assert!(matches!(kind(libc::EBADF), AcceptError::Fatal));
        assert!(matches!(kind(libc::EINVAL), AcceptError::Fatal));
    }

    #[test]
    fn a_client_that_left_is_seen_gone() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        assert!(!peer_gone(&server, true));
        client.shutdown(Shutdown::Write).unwrap();
        let wait = |half: bool| {
            let t0 = Instant::now();
            while !peer_gone(&server, half) {
                assert!(t0.elapsed() < Duration::from_secs(20), "never seen gone");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        // Half-closed: gone only for the requests after a connection's first.
        wait(true);
        assert!(!peer_gone(&server, false));
        drop(client);
        (&server).write_all(b"x").unwrap(); // answered by a reset
        wait(false);
    }

    #[test]
    fn the_gate_admits_n_at_once() {
        let gate = Gate::new(2);
        let (a, b) = (gate.enter(), gate.enter());
        assert_eq!(*gate.held.lock().unwrap(), 2);
        drop(a);
        let c = gate.enter();
        drop((b, c));
        assert_eq!(*gate.held.lock().unwrap(), 0);
    }
}
