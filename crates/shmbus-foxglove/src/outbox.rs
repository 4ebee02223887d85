//! What goes out to one client: WebSocket frames, written straight to its socket when
//! nothing waits before them, else queued for its writer task, within bounds.
//!
//! A client's socket is written by whoever has a frame for it while its queue is empty: a
//! stream thread with a message writes the frame itself (a non-blocking `writev` from the
//! topic's shared memory, so a message to a client that keeps up costs no copy into a
//! buffer and no wake-up of another thread), and only what the socket does not take at once
//! is queued. The queue is drained by the client's writer task as the socket takes more.
//!
//! **Bounds.** Message data (the `messageData` frames) may be queued up to
//! [`Limits::backlog`] messages and [`Limits::backlog_bytes`] bytes per client; past either,
//! the oldest queued messages not yet begun are dropped, counted, and said once per client
//! (and their total when the client goes). The newest message and one being written are
//! never dropped, so a queue holds at most `max(backlog, 2)` messages and
//! `max(backlog_bytes, two messages)` bytes of them. Everything else (`serverInfo`,
//! advertisements, statuses, and the WebSocket library's own frames: the handshake's answer,
//! pongs, the close) is never dropped: a client that lets more than [`CONTROL_BYTES`] of it
//! pile up (each queued frame counted at least [`ENTRY_COST`] bytes) is disconnected; one
//! such frame alone always fits, however large. A frame once begun is always finished, so
//! the byte stream stays whole; after a close frame nothing more is sent.
//!
//! Lock order: a topic's subscriber list, then an outbox's state (never the other way).

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};

use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::Notify;

/// Bytes of non-data frames a client may leave unread before it is disconnected.
pub const CONTROL_BYTES: usize = 16 << 20;
/// What a queued frame counts against the bounds at least: its bookkeeping, so that a flood
/// of tiny frames (pongs to a client's pings) is bounded in memory too.
pub const ENTRY_COST: usize = 256;

/// A client's bounds on queued message data.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Messages queued at most (a message being written counts).
    pub backlog: usize,
    /// Bytes of messages queued at most (the newest message and one being written are always
    /// kept, however large: see the module docs).
    pub backlog_bytes: usize,
}

/// Bytes of the longest WebSocket frame header a server writes (no mask).
pub const MAX_HEAD: usize = 10;

/// The header of one whole (FIN) unmasked WebSocket frame of `len` payload bytes with
/// `opcode` (RFC 6455 §5.2): its bytes and length.
pub fn frame_head(opcode: u8, len: usize) -> ([u8; MAX_HEAD], usize) {
    let mut h = [0u8; MAX_HEAD];
    h[0] = 0x80 | opcode;
    let n = if len < 126 {
        h[1] = len as u8;
        2
    } else if len <= usize::from(u16::MAX) {
        h[1] = 126;
        h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        4
    } else {
        h[1] = 127;
        h[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    (h, n)
}

/// WebSocket opcode of a text frame.
pub const TEXT: u8 = 0x1;
/// WebSocket opcode of a binary frame.
pub const BINARY: u8 = 0x2;
/// WebSocket opcode of a close frame.
const CLOSE: u8 = 0x8;

/// What of a frame of `head` and `body` is left after its first `done` bytes.
fn unwritten<'a>(head: &'a [u8], body: &'a [u8], done: usize) -> [IoSlice<'a>; 2] {
    let h = done.min(head.len());
    [IoSlice::new(&head[h..]), IoSlice::new(&body[done - h..])]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// A `messageData` frame: may be dropped before it is begun.
    Data,
    /// Anything else: never dropped.
    Control,
}

/// A frame (or, for the WebSocket library's writes, some whole frames) waiting for the
/// socket: a head and a body, `done` bytes of them written.
#[derive(Debug)]
struct Pending {
    head: Vec<u8>,
    body: bytes::Bytes,
    done: usize,
    class: Class,
}

impl Pending {
    fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// What it counts against the bounds.
    fn cost(&self) -> usize {
        self.len().max(ENTRY_COST)
    }

    /// The unwritten rest, as at most two slices.
    fn rest(&self) -> [IoSlice<'_>; 2] {
        unwritten(&self.head, &self.body, self.done)
    }
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Pending>,
    data_msgs: usize,
    data_bytes: usize,
    control_bytes: usize,
    dropped: u64,
    /// A close frame is queued: nothing more is taken; the writer ends once it is written.
    closing: bool,
    closed: bool,
}

impl State {
    /// Queues `p`, counting it against its class's bound.
    fn push(&mut self, p: Pending) {
        match p.class {
            Class::Data => {
                self.data_msgs += 1;
                self.data_bytes += p.cost();
            }
            Class::Control => self.control_bytes += p.cost(),
        }
        self.queue.push_back(p);
    }

    /// Takes the `k`th queued frame out, and its count.
    fn take(&mut self, k: usize) -> Option<Pending> {
        let p = self.queue.remove(k)?;
        match p.class {
            Class::Data => {
                self.data_msgs -= 1;
                self.data_bytes -= p.cost();
            }
            Class::Control => self.control_bytes -= p.cost(),
        }
        Some(p)
    }
}

/// The outgoing side of one client (see the [module docs](self)).
#[derive(Debug)]
pub struct Outbox {
    socket: OwnedWriteHalf,
    peer: SocketAddr,
    limits: Limits,
    state: Mutex<State>,
    /// Wakes the writer task: something was queued, or the outbox closed.
    wake: Notify,
}

/// What became of a frame handed to an [`Outbox`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Written to the socket, or queued behind what is.
    Taken,
    /// The outbox is closed (the client is going).
    Closed,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Outbox {
    /// The outbox of the client at `peer` writing to `socket`.
    pub fn new(socket: OwnedWriteHalf, peer: SocketAddr, limits: Limits) -> Outbox {
        Outbox { socket, peer, limits, state: Mutex::default(), wake: Notify::new() }
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Messages dropped for this client so far.
    pub fn dropped(&self) -> u64 {
        lock(&self.state).dropped
    }

    /// Closes the outbox: nothing more is written, the writer task ends.
    pub fn close(&self) {
        lock(&self.state).closed = true;
        self.wake.notify_one();
    }

    /// A close frame, "going away" (1001): the server is stopping. Messages not yet begun
    /// are dropped, the rest is written up to the close, then the writer task ends; nothing
    /// is taken after it.
    pub fn send_going_away(&self) {
        let (h, n) = frame_head(CLOSE, 2);
        let code = 1001u16.to_be_bytes();
        let mut st = lock(&self.state);
        if st.closed || st.closing {
            return;
        }
        let mut k = 0;
        while k < st.queue.len() {
            let p = &st.queue[k];
            if p.class == Class::Data && p.done == 0 {
                st.take(k);
            } else {
                k += 1;
            }
        }
        // Under the same lock as the close frame: nothing can follow it.
        let st = self.put(st, &h[..n], &code, || bytes::Bytes::copy_from_slice(&code), Class::Control);
        if let Some(mut st) = st {
            st.closing = true;
            if st.queue.is_empty() {
                st.closed = true;
            }
        }
        self.wake.notify_one();
    }

    /// A text frame of `json` (a protocol message other than message data): never dropped.
    pub fn send_json(&self, json: &str) -> Sent {
        let (h, n) = frame_head(TEXT, json.len());
        self.send_frame(&h[..n], json.as_bytes(), || bytes::Bytes::copy_from_slice(json.as_bytes()), Class::Control)
    }

    /// Bytes the WebSocket library wrote (whole frames, or the handshake's answer): never
    /// dropped.
    pub fn send_raw(&self, raw: &[u8]) -> Sent {
        self.send_frame(&[], raw, || bytes::Bytes::copy_from_slice(raw), Class::Control)
    }

    /// A `messageData` frame: `head` (the WebSocket header and the message's own header) and
    /// `body` (the message), which `shared` gives as an owned buffer should any of it have to
    /// wait (called at most once per call; the caller may hand every client the same one).
    /// Dropped later, oldest first, if the client falls behind its bounds.
    pub fn send_data(&self, head: &[u8], body: &[u8], shared: impl FnOnce() -> bytes::Bytes) -> Sent {
        self.send_frame(head, body, shared, Class::Data)
    }

    fn send_frame(&self, head: &[u8], body: &[u8], owned: impl FnOnce() -> bytes::Bytes, class: Class) -> Sent {
        let st = lock(&self.state);
        if st.closed || st.closing {
            return Sent::Closed;
        }
        match self.put(st, head, body, owned, class) {
            Some(_) => Sent::Taken,
            None => Sent::Closed,
        }
    }

    /// Writes the frame to the socket if nothing waits before it, and queues what is not
    /// written, within the bounds. The lock back (and the writer woken if anything was
    /// queued), or `None` if the outbox closed.
    fn put<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        head: &[u8],
        body: &[u8],
        owned: impl FnOnce() -> bytes::Bytes,
        class: Class,
    ) -> Option<MutexGuard<'a, State>> {
        let len = head.len() + body.len();
        if len == 0 {
            return Some(st);
        }
        let mut done = 0;
        if st.queue.is_empty() {
            // Nothing waits before it: straight to the socket, as much as it takes.
            while done < len {
                match self.write(&unwritten(head, body, done)) {
                    Ok(Some(k)) => done += k,
                    Ok(None) => break,
                    Err(e) => {
                        self.fail(st, e);
                        return None;
                    }
                }
            }
            if done == len {
                return Some(st);
            }
        }
        let body = if done > head.len() {
            // Begun and not finished: only the rest is kept.
            let skip = done - head.len();
            done = head.len();
            owned().slice(skip..)
        } else {
            owned()
        };
        let p = Pending { head: head.to_vec(), body, done, class };
        match class {
            Class::Data => {
                st.push(p);
                self.shed(&mut st);
            }
            Class::Control => {
                // One frame alone always fits (a large advertisement to a new client).
                if st.control_bytes > 0 && st.control_bytes + p.cost() > CONTROL_BYTES {
                    eprintln!(
                        "shmbus-foxglove: client {}: disconnected: it left over {} MiB of protocol messages unread",
                        self.peer,
                        CONTROL_BYTES >> 20
                    );
                    st.closed = true;
                    drop(st);
                    self.wake.notify_one();
                    return None;
                }
                st.push(p);
            }
        }
        self.wake.notify_one();
        Some(st)
    }

    /// Drops the oldest queued messages not yet begun while the queue is over its bounds.
    fn shed(&self, st: &mut State) {
        let over = |st: &State| {
            st.data_msgs > self.limits.backlog.max(1) || (st.data_bytes > self.limits.backlog_bytes && st.data_msgs > 1)
        };
        let mut k = 0;
        while over(st) && k < st.queue.len() {
            let p = &st.queue[k];
            // The newest message is kept (it is what the client should see next), as is a
            // frame begun (the stream must stay whole).
            if p.class != Class::Data || p.done > 0 || k + 1 == st.queue.len() {
                k += 1;
                continue;
            }
            st.take(k);
            st.dropped += 1;
            if st.dropped == 1 {
                eprintln!(
                    "shmbus-foxglove: client {}: reads too slowly, its oldest messages are dropped (--client-backlog {}, --client-backlog-bytes {}); the count is given when it goes",
                    self.peer, self.limits.backlog, self.limits.backlog_bytes
                );
            }
        }
    }

    /// One non-blocking write of `bufs`: the bytes written, `None` if the socket takes
    /// nothing now.
    fn write(&self, bufs: &[IoSlice<'_>]) -> io::Result<Option<usize>> {
        loop {
            match self.socket.try_write_vectored(bufs) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(k) => return Ok(Some(k)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn fail(&self, mut st: MutexGuard<'_, State>, e: io::Error) {
        if !st.closed && !matches!(e.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset) {
            eprintln!("shmbus-foxglove: client {}: {e}", self.peer);
        }
        st.closed = true;
        drop(st);
        self.wake.notify_one();
    }

    /// Writes what is queued as the socket takes it, until the outbox closes (or, after a
    /// close frame, until that is written). The client's writer task. The lock is taken for
    /// one write at a time, so senders are not held up behind a long drain.
    pub async fn drain(&self) {
        loop {
            let woken = self.wake.notified();
            let (closed, idle) = {
                let st = lock(&self.state);
                (st.closed, st.queue.is_empty())
            };
            if closed {
                return;
            }
            if idle {
                woken.await;
                continue;
            }
            // Writable, or woken: by a close above all, which must not wait for the socket.
            tokio::select! {
                ready = self.socket.writable() => {
                    if let Err(e) = ready {
                        self.fail(lock(&self.state), e);
                        return;
                    }
                }
                () = woken => continue,
            }
            loop {
                let mut st = lock(&self.state);
                if st.closed {
                    return;
                }
                let Some(front) = st.queue.front() else {
                    if st.closing {
                        st.closed = true;
                        return;
                    }
                    break;
                };
                match self.write(&front.rest()) {
                    Ok(Some(k)) => {
                        let front = st.queue.front_mut().expect("front seen");
                        front.done += k;
                        if front.done == front.len() {
                            st.take(0);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        self.fail(st, e);
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Reads whole frames off `raw` (a server's unmasked frames): each one's opcode and
    /// payload length, and what is left over (a torn frame).
    fn frames(mut raw: &[u8]) -> (Vec<(u8, usize)>, usize) {
        let mut out = Vec::new();
        while raw.len() >= 2 {
            let (len, at) = match raw[1] & 0x7f {
                126 if raw.len() >= 4 => (usize::from(u16::from_be_bytes([raw[2], raw[3]])), 4),
                127 if raw.len() >= 10 => (u64::from_be_bytes(raw[2..10].try_into().unwrap()) as usize, 10),
                n if n < 126 => (usize::from(n), 2),
                _ => break,
            };
            if raw.len() < at + len {
                break;
            }
            out.push((raw[0] & 0x0f, len));
            raw = &raw[at + len..];
        }
        (out, raw.len())
    }

    /// A client that does not read: what the server sends piles up in its outbox, the oldest
    /// messages are dropped past either bound (never a control frame, never one begun), and
    /// once the client reads, it gets whole frames: the control ones all, the messages less
    /// those dropped, the newest last.
    #[test]
    fn a_client_that_does_not_read_loses_whole_messages_within_its_bounds() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
            let (server, peer) = listener.accept().await.unwrap();
            let (_read, write) = server.into_split();
            let limits = Limits { backlog: 8, backlog_bytes: 1 << 20 };
            let out = Outbox::new(write, peer, limits);
            const BODY: usize = 256 << 10;
            let body = vec![7u8; BODY];
            let (h, n) = frame_head(BINARY, BODY);
            let sent = 400;
            for i in 0..sent {
                if i % 50 == 0 {
                    assert_eq!(out.send_json(r#"{"op":"status"}"#), Sent::Taken);
                }
                assert_eq!(out.send_data(&h[..n], &body, || bytes::Bytes::copy_from_slice(&body)), Sent::Taken);
                let st = lock(&out.state);
                assert!(st.data_msgs <= limits.backlog, "more messages queued than the backlog");
                assert!(st.data_bytes <= limits.backlog_bytes + BODY + MAX_HEAD, "more bytes queued than the bound");
            }
            let dropped = out.dropped();
            assert!(dropped > 0, "nothing dropped for a client that never read");
            // The byte bound is the tighter one here: 1 MiB holds four of these.
            assert!(lock(&out.state).data_msgs <= 5);
            // Now the client reads everything the server writes.
            let reading = async {
                use tokio::io::AsyncReadExt;
                let mut raw = Vec::new();
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    let (got, rest) = frames(&raw);
                    if rest == 0 && got.len() as u64 == sent + 8 - dropped {
                        return raw;
                    }
                    let k = client.read(&mut buf).await.unwrap();
                    assert!(k > 0, "the server closed");
                    raw.extend_from_slice(&buf[..k]);
                }
            };
            let raw = tokio::select! {
                raw = reading => raw,
                () = out.drain() => panic!("the outbox closed"),
            };
            let (got, rest) = frames(&raw);
            assert_eq!(rest, 0, "a torn frame");
            assert_eq!(got.iter().filter(|f| f.0 == TEXT).count(), 8, "a control frame was dropped");
            assert!(got.iter().filter(|f| f.0 == BINARY).all(|f| f.1 == BODY));
            assert_eq!(got.last().unwrap().0, BINARY, "the newest message is not the last one out");
        });
    }

    /// A connected pair: the server side's outbox and the client's socket.
    async fn pair(limits: Limits) -> (Outbox, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, peer) = listener.accept().await.unwrap();
        let (_read, write) = server.into_split();
        (Outbox::new(write, peer, limits), client)
    }

    /// Reads from `client` while `out` drains, until the drain ends: every byte the
    /// server wrote.
    async fn read_until_drained(out: &Outbox, client: &mut tokio::net::TcpStream) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut raw = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        let reading = async {
            loop {
                let k = client.read(&mut buf).await.unwrap();
                if k == 0 {
                    break;
                }
                raw.extend_from_slice(&buf[..k]);
            }
        };
        tokio::select! {
            () = reading => panic!("the socket closed before the drain ended"),
            () = out.drain() => {}
        }
        // What the last writes left in the socket.
        while let Ok(Ok(k)) = tokio::time::timeout(Duration::from_millis(200), client.read(&mut buf)).await {
            if k == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..k]);
        }
        raw
    }

    /// The server stopping with messages queued for a client that reads nothing: the
    /// messages not begun are dropped, the close (1001) is the last frame the client gets,
    /// nothing is taken after it, and the writer ends once it is out.
    #[test]
    fn a_close_is_the_last_frame_whatever_was_queued() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (out, mut client) = pair(Limits { backlog: 64, backlog_bytes: 64 << 20 }).await;
            const BODY: usize = 256 << 10;
            let body = vec![7u8; BODY];
            let (h, n) = frame_head(BINARY, BODY);
            while lock(&out.state).queue.len() < 8 {
                out.send_data(&h[..n], &body, || bytes::Bytes::copy_from_slice(&body));
            }
            out.send_going_away();
            assert_eq!(out.send_data(&h[..n], &body, || bytes::Bytes::copy_from_slice(&body)), Sent::Closed);
            assert_eq!(out.send_json("{}"), Sent::Closed);
            let raw = read_until_drained(&out, &mut client).await;
            let (got, rest) = frames(&raw);
            assert_eq!(rest, 0, "a torn frame");
            let last = *got.last().unwrap();
            assert_eq!(last, (0x8, 2), "the close is not the last frame: {:?}", &got[got.len().saturating_sub(3)..]);
            assert_eq!(&raw[raw.len() - 2..], &1001u16.to_be_bytes());
            assert!(lock(&out.state).closed);
        });
    }

    /// A flood of tiny protocol frames (pongs) to a client that reads nothing is bounded in
    /// entries, not only in bytes: the client is disconnected first.
    #[test]
    fn tiny_frames_are_bounded_too() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (out, _client) = pair(Limits { backlog: 64, backlog_bytes: 64 << 20 }).await;
            let pong = [0x8a, 0];
            let mut closed = false;
            for _ in 0..4_000_000 {
                if out.send_raw(&pong) == Sent::Closed {
                    closed = true;
                    break;
                }
                assert!(lock(&out.state).queue.len() <= CONTROL_BYTES / ENTRY_COST, "more entries than the bound");
            }
            assert!(closed, "never disconnected");
            // The writer ends though the socket never becomes writable again.
            let ended = tokio::time::timeout(Duration::from_secs(10), out.drain()).await;
            assert!(ended.is_ok(), "the writer waits on a socket of a closed outbox");
        });
    }

    #[test]
    fn frame_heads_use_the_shortest_length_form() {
        assert_eq!(&frame_head(TEXT, 5).0[..2], &[0x81, 5]);
        let (h, n) = frame_head(BINARY, 300);
        assert_eq!(&h[..n], &[0x82, 126, 1, 44]);
        let (h, n) = frame_head(BINARY, 6_220_813);
        assert_eq!(n, 10);
        assert_eq!(h[1], 127);
        assert_eq!(u64::from_be_bytes(h[2..10].try_into().unwrap()), 6_220_813);
        assert_eq!(frame_head(BINARY, 65_535).1, 4);
        assert_eq!(frame_head(BINARY, 65_536).1, 10);
    }
}
