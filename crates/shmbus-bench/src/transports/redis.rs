//! The Redis peers: `redis-pubsub-tcp`, `redis-pubsub-uds`, `redis-stream-tcp` and
//! `redis-stream-uds`.
//!
//! The ping side starts its own `redis-server` (Debian's package, Redis 7) with a temporary
//! configuration in a fresh directory: loopback TCP on a free port and a Unix socket in that
//! directory, no persistence (`save ""`, `appendonly no`). The server is not pinned (it may
//! run on every CPU the machine allows) and gets `PDEATHSIG`; it is stopped (SIGTERM, then
//! SIGKILL) and its directory removed when the ping endpoint is dropped at the end of the run.
//!
//! The client is a small hand-written RESP2 client over blocking sockets (no async runtime):
//! one command, then its reply, as a synchronous client does. Payloads are copied into the
//! command buffer and read straight into the caller's buffer.
//!
//! * **pub/sub**: channels `ping` and `pong`. Each side has a subscriber connection
//!   (`SUBSCRIBE` to its incoming channel) and a command connection (`PUBLISH` to the other,
//!   whose integer reply is read before `send` returns). Until the echo has subscribed, a
//!   `PUBLISH` reaches nobody (reply 0); the ping side then waits 1 ms and publishes again.
//! * **streams**: keys `ping` and `pong`. Each side has one connection: `send` is `XADD key
//!   MAXLEN 16 * d PAYLOAD` (reply read), `recv` is `XREAD BLOCK 0 COUNT 1 STREAMS key LAST`
//!   with the id of the last entry read (`0-0` at first).
//!
//! Redis waits only by blocking on its sockets, so these transports always run in `block`
//! mode; sockets get a receive/send timeout of [`BLOCK_SLICE`] so a dead peer is noticed.
//!
//! `demo-redis` (the demo profile over Redis streams) starts its server with [`Server`] and
//! talks to it through [`Conn`] too.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Endpoint, Handoff, Mode, Params, Transport};
use crate::waiter::{Waiter, BLOCK_SLICE};

/// Overrides where `redis-server` is looked for (a path to the binary).
pub const SERVER_ENV: &str = "SHMBUS_BENCH_REDIS_SERVER";

/// The one line printed when the Redis peers cannot run.
pub const NOT_FOUND: &str = "redis-server not found: skipping the Redis peers";

/// How long the server may take to answer `PING` after it was started.
const START_LIMIT: Duration = Duration::from_secs(10);

/// Entries kept per stream (`XADD … MAXLEN 16`): memory stays bounded for 6 MiB payloads.
const STREAM_MAXLEN: &str = "16";

/// The `redis-server` binary: `$SHMBUS_BENCH_REDIS_SERVER` when set, else the first
/// executable `redis-server` on `PATH`.
pub fn server_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(SERVER_ENV) {
        let p = PathBuf::from(p);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|d| d.join("redis-server")).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// Whether the Redis peers can run here.
pub fn available() -> bool {
    server_binary().is_some()
}

/// A `redis-server` this process started, with its temporary directory. Dropping it stops
/// the server and removes the directory.
#[derive(Debug)]
pub struct Server {
    child: Child,
    dir: PathBuf,
    port: u16,
    socket: PathBuf,
}

impl Server {
    /// Starts a server on 127.0.0.1 (a free port) and on a Unix socket in a fresh temporary
    /// directory, and waits until it answers `PING`.
    pub fn start() -> io::Result<Server> {
        let bin = server_binary().ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, NOT_FOUND))?;
        let nanos = shmbus::time::monotonic_ns();
        let dir = std::env::temp_dir().join(format!("shmbus-bench-redis-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        // A free port: bind port 0, note the port, let it go. Another process could take it
        // before the server binds; the server then fails to start and the run says so.
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
        let socket = dir.join("redis.sock");
        let log = dir.join("redis.log");
        let conf = dir.join("redis.conf");
        let text = format!(
            "bind 127.0.0.1\nport {port}\nprotected-mode yes\nunixsocket {}\nunixsocketperm 700\n\
             save \"\"\nappendonly no\ndir {}\nlogfile {}\nloglevel warning\ndaemonize no\n\
             databases 1\nclient-output-buffer-limit pubsub 0 0 0\n",
            socket.display(),
            dir.display(),
            log.display()
        );
        let cleanup = |e: io::Error| {
            let _ = std::fs::remove_dir_all(&dir);
            e
        };
        std::fs::write(&conf, text).map_err(cleanup)?;
        let mut cmd = Command::new(&bin);
        cmd.arg(&conf).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: the closure runs in the forked child before exec and calls only
        // async-signal-safe functions (prctl, sched_setaffinity) on a stack value.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) < 0 {
                    return Err(io::Error::last_os_error());
                }
                // The ping thread is pinned by now; the server is not: every CPU the
                // kernel allows (it intersects this full mask with the cpuset).
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                for c in 0..8 * std::mem::size_of::<libc::cpu_set_t>() {
                    libc::CPU_SET(c, &mut set);
                }
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                Ok(())
            })
        };
        let child = cmd
            .spawn()
            .map_err(|e| cleanup(io::Error::new(e.kind(), format!("cannot start {}: {e}", bin.display()))))?;
        let mut server = Server { child, dir, port, socket };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(io::Error::other(format!("redis-server exited at start ({status}){}", self.log_tail())));
            }
            if let Ok(mut c) = Conn::connect(&Addr::Tcp(self.port)) {
                let mut watch = NoWatch;
                let mut w = Waiter::new(&mut watch);
                c.command(&[b"PING"], &mut w)?;
                if c.read_simple(&mut w)? == b"PONG" && self.socket.exists() {
                    return Ok(());
                }
            }
            if start.elapsed() > START_LIMIT {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("redis-server did not answer within {} s{}", START_LIMIT.as_secs(), self.log_tail()),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn log_tail(&self) -> String {
        match std::fs::read_to_string(self.dir.join("redis.log")) {
            Ok(s) => match s.lines().rev().find(|l| !l.trim().is_empty()) {
                Some(l) => format!(": {}", l.trim()),
                None => String::new(),
            },
            Err(_) => String::new(),
        }
    }

    /// The loopback TCP address (`uds` false) or the Unix socket (`uds` true).
    pub(crate) fn addr(&self, uds: bool) -> Addr {
        if uds {
            Addr::Unix(self.socket.clone())
        } else {
            Addr::Tcp(self.port)
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill(2) passes no memory. The pid is our own child's, not reaped yet (only
        // this Drop waits for it), so it cannot have been reused by another process.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let start = Instant::now();
        while let Ok(None) = self.child.try_wait() {
            if start.elapsed() > Duration::from_secs(2) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where a client connects.
#[derive(Debug, Clone)]
pub(crate) enum Addr {
    Tcp(u16),
    Unix(PathBuf),
}

impl Addr {
    /// `tcp:PORT` or `unix:PATH`, for a child process's command line.
    pub(crate) fn to_arg(&self) -> String {
        match self {
            Addr::Tcp(port) => format!("tcp:{port}"),
            Addr::Unix(p) => format!("unix:{}", p.display()),
        }
    }

    /// The inverse of [`Addr::to_arg`].
    pub(crate) fn parse(s: &str) -> io::Result<Addr> {
        if let Some(p) = s.strip_prefix("tcp:") {
            return p.parse().map(Addr::Tcp).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad port"));
        }
        if let Some(p) = s.strip_prefix("unix:") {
            return Ok(Addr::Unix(PathBuf::from(p)));
        }
        Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad redis address '{s}'")))
    }
}

/// A watch that never gives up (used only while the server starts, which has its own limit).
struct NoWatch;

impl crate::waiter::Watch for NoWatch {
    fn check(&mut self, waited: Duration) -> io::Result<()> {
        if waited > START_LIMIT {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "redis-server does not answer"));
        }
        Ok(())
    }
}

/// One RESP2 connection: a buffered reader and the command buffer.
pub(crate) struct Conn {
    rx: File,
    tx: File,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    cmd: Vec<u8>,
}

fn protocol(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("redis: {what}"))
}

impl Conn {
    /// Connects (TCP_NODELAY; send/receive timeouts of [`BLOCK_SLICE`]).
    pub(crate) fn connect(addr: &Addr) -> io::Result<Conn> {
        let fd: OwnedFd = match addr {
            Addr::Tcp(port) => {
                let s = TcpStream::connect((Ipv4Addr::LOCALHOST, *port))?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(BLOCK_SLICE))?;
                s.set_write_timeout(Some(BLOCK_SLICE))?;
                s.into()
            }
            Addr::Unix(p) => {
                let s = UnixStream::connect(p)?;
                s.set_read_timeout(Some(BLOCK_SLICE))?;
                s.set_write_timeout(Some(BLOCK_SLICE))?;
                s.into()
            }
        };
        let rx = File::from(fd);
        let tx = rx.try_clone()?;
        Ok(Conn { rx, tx, buf: vec![0; 64 * 1024], start: 0, end: 0, cmd: Vec::with_capacity(256) })
    }

    /// Appends one RESP bulk string to the command buffer.
    fn push_bulk(&mut self, arg: &[u8]) {
        self.cmd.push(b'$');
        self.cmd.extend_from_slice(arg.len().to_string().as_bytes());
        self.cmd.extend_from_slice(b"\r\n");
        self.cmd.extend_from_slice(arg);
        self.cmd.extend_from_slice(b"\r\n");
    }

    /// Sends one command (an array of bulk strings) with a single write where it fits.
    pub(crate) fn command(&mut self, args: &[&[u8]], waiter: &mut Waiter<'_>) -> io::Result<()> {
        self.cmd.clear();
        self.cmd.push(b'*');
        self.cmd.extend_from_slice(args.len().to_string().as_bytes());
        self.cmd.extend_from_slice(b"\r\n");
        for a in args {
            self.push_bulk(a);
        }
        let mut done = 0;
        while done < self.cmd.len() {
            match self.tx.write(&self.cmd[done..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "redis stopped reading")),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => waiter.check()?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads more bytes into the buffer (compacting it first), waiting through timeouts.
    fn fill(&mut self, waiter: &mut Waiter<'_>) -> io::Result<()> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                let n = self.buf.len();
                self.buf.resize(2 * n, 0);
            }
        }
        loop {
            match self.rx.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "redis closed the connection")),
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => waiter.check()?,
                Err(e) => return Err(e),
            }
        }
    }

    /// One line without its CRLF: the type byte and the rest.
    fn line(&mut self, waiter: &mut Waiter<'_>) -> io::Result<(u8, Vec<u8>)> {
        loop {
            if let Some(i) = self.buf[self.start..self.end].windows(2).position(|w| w == b"\r\n") {
                let line = &self.buf[self.start..self.start + i];
                let out = match line.split_first() {
                    Some((&t, rest)) => (t, rest.to_vec()),
                    None => return Err(protocol("empty line")),
                };
                self.start += i + 2;
                return Ok(out);
            }
            self.fill(waiter)?;
        }
    }

    /// A header line of type `want` (`*`, `$`, `:`) as its integer; errors on `-ERR`.
    pub(crate) fn header(&mut self, want: u8, waiter: &mut Waiter<'_>) -> io::Result<i64> {
        let (t, rest) = self.line(waiter)?;
        if t == b'-' {
            return Err(protocol(String::from_utf8_lossy(&rest)));
        }
        if t != want {
            return Err(protocol(format!(
                "expected '{}', got '{}{}'",
                want as char,
                t as char,
                String::from_utf8_lossy(&rest)
            )));
        }
        std::str::from_utf8(&rest).ok().and_then(|s| s.parse().ok()).ok_or_else(|| protocol("bad length"))
    }

    /// A simple-string reply (`+OK`).
    fn read_simple(&mut self, waiter: &mut Waiter<'_>) -> io::Result<Vec<u8>> {
        let (t, rest) = self.line(waiter)?;
        match t {
            b'+' => Ok(rest),
            b'-' => Err(protocol(String::from_utf8_lossy(&rest))),
            _ => Err(protocol("expected a simple string")),
        }
    }

    fn read_int(&mut self, waiter: &mut Waiter<'_>) -> io::Result<i64> {
        self.header(b':', waiter)
    }

    /// `n` bytes into `dst`: first what is buffered, then straight from the socket.
    fn read_exact_into(&mut self, dst: &mut [u8], waiter: &mut Waiter<'_>) -> io::Result<()> {
        let have = (self.end - self.start).min(dst.len());
        dst[..have].copy_from_slice(&self.buf[self.start..self.start + have]);
        self.start += have;
        let mut done = have;
        while done < dst.len() {
            match self.rx.read(&mut dst[done..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "redis closed the connection")),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => waiter.check()?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn crlf(&mut self, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let mut two = [0u8; 2];
        self.read_exact_into(&mut two, waiter)?;
        if &two != b"\r\n" {
            return Err(protocol("bulk string not followed by CRLF"));
        }
        Ok(())
    }

    /// A (short) bulk string.
    pub(crate) fn read_bulk(&mut self, waiter: &mut Waiter<'_>) -> io::Result<Vec<u8>> {
        let n = self.header(b'$', waiter)?;
        let n = usize::try_from(n).map_err(|_| protocol("nil bulk string"))?;
        let mut v = vec![0; n];
        self.read_exact_into(&mut v, waiter)?;
        self.crlf(waiter)?;
        Ok(v)
    }

    /// A bulk string of at most `dst.len()` bytes, read into the start of `dst`; its length.
    pub(crate) fn read_bulk_to(&mut self, dst: &mut [u8], waiter: &mut Waiter<'_>) -> io::Result<usize> {
        let n = self.header(b'$', waiter)?;
        let n = usize::try_from(n).map_err(|_| protocol("nil bulk string"))?;
        if n > dst.len() {
            return Err(protocol(format!("payload of {n} bytes, at most {} expected", dst.len())));
        }
        self.read_exact_into(&mut dst[..n], waiter)?;
        self.crlf(waiter)?;
        Ok(n)
    }

    /// A bulk string of exactly `dst.len()` bytes, read into `dst`.
    fn read_bulk_into(&mut self, dst: &mut [u8], waiter: &mut Waiter<'_>) -> io::Result<()> {
        let n = self.header(b'$', waiter)?;
        if usize::try_from(n).ok() != Some(dst.len()) {
            return Err(protocol(format!("payload of {n} bytes, expected {}", dst.len())));
        }
        self.read_exact_into(dst, waiter)?;
        self.crlf(waiter)
    }

    pub(crate) fn expect_array(&mut self, len: i64, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let n = self.header(b'*', waiter)?;
        if n != len {
            return Err(protocol(format!("array of {n}, expected {len}")));
        }
        Ok(())
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// Pub/sub or streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    PubSub,
    Stream,
}

/// One of the four Redis transports.
#[derive(Debug)]
pub struct Redis {
    kind: Kind,
    uds: bool,
}

/// `redis-pubsub-tcp`.
pub static PUBSUB_TCP: Redis = Redis { kind: Kind::PubSub, uds: false };
/// `redis-pubsub-uds`.
pub static PUBSUB_UDS: Redis = Redis { kind: Kind::PubSub, uds: true };
/// `redis-stream-tcp`.
pub static STREAM_TCP: Redis = Redis { kind: Kind::Stream, uds: false };
/// `redis-stream-uds`.
pub static STREAM_UDS: Redis = Redis { kind: Kind::Stream, uds: true };

/// Whether `name` is one of the Redis transports.
pub fn is_redis(name: &str) -> bool {
    name.starts_with("redis-")
}

/// A pub/sub end: publishes on `out`, subscribed to `inc` on its own connection.
struct PubSubEnd {
    publ: Conn,
    sub: Conn,
    out: &'static [u8],
    /// Ping side: republish while nobody is subscribed yet.
    retry_unheard: bool,
    /// Ping side: the server, stopped when the endpoint is dropped (after the connections).
    _server: Option<Server>,
}

impl Endpoint for PubSubEnd {
    fn send(&mut self, msg: &[u8], waiter: &mut Waiter<'_>) -> io::Result<()> {
        loop {
            self.publ.command(&[b"PUBLISH", self.out, msg], waiter)?;
            match self.publ.read_int(waiter)? {
                0 if self.retry_unheard => {
                    std::thread::sleep(Duration::from_millis(1));
                    waiter.check()?;
                }
                0 => return Err(protocol("PUBLISH reached no subscriber (the peer is gone)")),
                _ => return Ok(()),
            }
        }
    }

    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let buf = buf.as_mut_slice();
        self.sub.expect_array(3, waiter)?;
        let kind = self.sub.read_bulk(waiter)?;
        if kind != b"message" {
            return Err(protocol(format!("unexpected push '{}'", String::from_utf8_lossy(&kind))));
        }
        let _channel = self.sub.read_bulk(waiter)?;
        self.sub.read_bulk_into(buf, waiter)
    }
}

/// A stream end: `XADD` to `out`, `XREAD BLOCK` from `inc`, one connection.
struct StreamEnd {
    conn: Conn,
    out: &'static [u8],
    inc: &'static [u8],
    last_id: Vec<u8>,
    _server: Option<Server>,
}

impl Endpoint for StreamEnd {
    fn send(&mut self, msg: &[u8], waiter: &mut Waiter<'_>) -> io::Result<()> {
        self.conn.command(&[b"XADD", self.out, b"MAXLEN", STREAM_MAXLEN.as_bytes(), b"*", b"d", msg], waiter)?;
        let _id = self.conn.read_bulk(waiter)?;
        Ok(())
    }

    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let buf = buf.as_mut_slice();
        let last = std::mem::take(&mut self.last_id);
        self.conn.command(&[b"XREAD", b"COUNT", b"1", b"BLOCK", b"0", b"STREAMS", self.inc, &last], waiter)?;
        // [[key, [[id, [field, value]]]]]
        let c = &mut self.conn;
        c.expect_array(1, waiter)?;
        c.expect_array(2, waiter)?;
        let _key = c.read_bulk(waiter)?;
        c.expect_array(1, waiter)?;
        c.expect_array(2, waiter)?;
        self.last_id = c.read_bulk(waiter)?;
        c.expect_array(2, waiter)?;
        let _field = c.read_bulk(waiter)?;
        c.read_bulk_into(buf, waiter)
    }
}

fn subscribe(addr: &Addr, channel: &[u8], waiter: &mut Waiter<'_>) -> io::Result<Conn> {
    let mut c = Conn::connect(addr)?;
    c.command(&[b"SUBSCRIBE", channel], waiter)?;
    c.expect_array(3, waiter)?;
    if c.read_bulk(waiter)? != b"subscribe" {
        return Err(protocol("SUBSCRIBE was not confirmed"));
    }
    let _channel = c.read_bulk(waiter)?;
    let _count = c.read_int(waiter)?;
    Ok(c)
}

impl Redis {
    fn endpoint(&self, addr: &Addr, ping: bool, server: Option<Server>) -> io::Result<Box<dyn Endpoint>> {
        let (out, inc): (&'static [u8], &'static [u8]) = if ping { (b"ping", b"pong") } else { (b"pong", b"ping") };
        let mut watch = NoWatch;
        let mut w = Waiter::new(&mut watch);
        Ok(match self.kind {
            Kind::PubSub => {
                let sub = subscribe(addr, inc, &mut w)?;
                let publ = Conn::connect(addr)?;
                Box::new(PubSubEnd { publ, sub, out, retry_unheard: ping, _server: server })
            }
            Kind::Stream => {
                let conn = Conn::connect(addr)?;
                Box::new(StreamEnd { conn, out, inc, last_id: b"0-0".to_vec(), _server: server })
            }
        })
    }
}

impl Transport for Redis {
    fn name(&self) -> &'static str {
        match (self.kind, self.uds) {
            (Kind::PubSub, false) => "redis-pubsub-tcp",
            (Kind::PubSub, true) => "redis-pubsub-uds",
            (Kind::Stream, false) => "redis-stream-tcp",
            (Kind::Stream, true) => "redis-stream-uds",
        }
    }

    fn mode(&self, _requested: Mode) -> Mode {
        Mode::Block
    }

    fn open(&self, _params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let server = Server::start()?;
        let addr = server.addr(self.uds);
        let handoff = Handoff { fds: Vec::new(), args: vec![addr.to_arg()] };
        Ok((self.endpoint(&addr, true, Some(server))?, handoff))
    }

    fn attach(&self, _params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        let arg = handoff
            .args
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "redis needs the server's address"))?;
        self.endpoint(&Addr::parse(arg)?, false, None)
    }
}
