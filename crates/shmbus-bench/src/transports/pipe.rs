//! `pipe`: two anonymous pipes, one per direction.
//!
//! Pipes have no receive timeout: in block mode a dead echo process is noticed by
//! end-of-file (the ping process holds no copy of the echo's ends), a live but silent one is
//! not.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use super::fd_stream::FdStream;
use super::{Endpoint, Handoff, Params, Transport};

/// Two pipes.
#[derive(Debug)]
pub struct Pipe;

/// A pipe as (read end, write end), both close-on-exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 requires.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Transport for Pipe {
    fn name(&self) -> &'static str {
        "pipe"
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let (to_echo_r, to_echo_w) = pipe()?;
        let (to_ping_r, to_ping_w) = pipe()?;
        let ping = FdStream::new(to_ping_r, to_echo_w, params.mode)?;
        let handoff = Handoff { fds: vec![to_echo_r, to_ping_w], args: Vec::new() };
        Ok((Box::new(ping), handoff))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        let mut fds = handoff.fds.into_iter();
        match (fds.next(), fds.next()) {
            (Some(rx), Some(tx)) => Ok(Box::new(FdStream::new(rx, tx, params.mode)?)),
            _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "pipe needs two descriptors")),
        }
    }
}
