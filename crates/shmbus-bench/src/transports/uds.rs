//! `uds`: a connected pair of Unix stream sockets (`socketpair(AF_UNIX, SOCK_STREAM)`).

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;

use super::fd_stream::FdStream;
use super::{Endpoint, Handoff, Mode, Params, Transport};
use crate::waiter::BLOCK_SLICE;

/// A Unix stream socket pair.
#[derive(Debug)]
pub struct Uds;

fn endpoint(sock: UnixStream, mode: Mode) -> io::Result<FdStream> {
    if mode == Mode::Block {
        sock.set_read_timeout(Some(BLOCK_SLICE))?;
        sock.set_write_timeout(Some(BLOCK_SLICE))?;
    }
    let tx = OwnedFd::from(sock.try_clone()?);
    FdStream::new(OwnedFd::from(sock), tx, mode)
}

impl Transport for Uds {
    fn name(&self) -> &'static str {
        "uds"
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let (ping, echo) = UnixStream::pair()?;
        let handoff = Handoff { fds: vec![OwnedFd::from(echo)], args: Vec::new() };
        Ok((Box::new(endpoint(ping, params.mode)?), handoff))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        let fd = handoff
            .fds
            .into_iter()
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "uds needs one descriptor"))?;
        Ok(Box::new(endpoint(UnixStream::from(fd), params.mode)?))
    }
}
