//! The endpoint shared by the byte-stream transports (`pipe`, `uds`, `tcp`): the full
//! payload is written and read each way with `write(2)` / `read(2)`, looping over partial
//! transfers.
//!
//! * `block`: blocking descriptors. Sockets get a receive/send timeout of
//!   [`BLOCK_SLICE`](crate::waiter::BLOCK_SLICE) so a silent peer is noticed; a dead peer
//!   shows up as end-of-file or `EPIPE` on every kind.
//! * `spin`: `O_NONBLOCK` descriptors polled in a busy loop (`EAGAIN` → spin).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};

use super::{Endpoint, Mode};
use crate::waiter::Waiter;

/// Sets or clears `O_NONBLOCK` on `fd`.
pub fn set_nonblocking(fd: &OwnedFd, on: bool) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: F_GETFL on a descriptor we own; no memory is passed.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
    // SAFETY: F_SETFL with an int argument on a descriptor we own.
    if unsafe { libc::fcntl(raw, libc::F_SETFL, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A two-way byte stream over a receive and a send descriptor (the same socket twice, or
/// two pipes).
pub struct FdStream {
    rx: File,
    tx: File,
    mode: Mode,
}

impl FdStream {
    /// Wraps `rx` and `tx`, setting `O_NONBLOCK` on both in spin mode.
    pub fn new(rx: OwnedFd, tx: OwnedFd, mode: Mode) -> io::Result<FdStream> {
        if mode == Mode::Spin {
            set_nonblocking(&rx, true)?;
            set_nonblocking(&tx, true)?;
        }
        Ok(FdStream { rx: File::from(rx), tx: File::from(tx), mode })
    }

    /// Called when a transfer could not progress (`EAGAIN`: non-blocking and not ready, or
    /// a blocking socket's timeout passed).
    #[inline]
    fn stalled(&self, waiter: &mut Waiter<'_>) -> io::Result<()> {
        match self.mode {
            Mode::Spin => waiter.spin(),
            Mode::Block | Mode::Async => waiter.check(),
        }
    }
}

impl Endpoint for FdStream {
    fn send(&mut self, msg: &[u8], waiter: &mut Waiter<'_>) -> io::Result<()> {
        let mut done = 0;
        while done < msg.len() {
            match self.tx.write(&msg[done..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "peer stopped reading")),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.stalled(waiter)?,
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                    return Err(io::Error::new(e.kind(), "the peer closed its end (broken pipe)"))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let buf = buf.as_mut_slice();
        let mut done = 0;
        while done < buf.len() {
            match self.rx.read(&mut buf[done..]) {
                Ok(0) => {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed its end (end of file)"))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.stalled(waiter)?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
