//! `tcp`: one loopback TCP connection (127.0.0.1 only) with `TCP_NODELAY` on both ends.
//!
//! The ping process listens on an ephemeral port, connects to itself and hands the accepted
//! socket to the echo process; the connection is the same as if the echo had dialled.

use std::io;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;

use super::fd_stream::FdStream;
use super::{Endpoint, Handoff, Mode, Params, Transport};
use crate::waiter::BLOCK_SLICE;

/// Loopback TCP.
#[derive(Debug)]
pub struct Tcp;

fn endpoint(sock: TcpStream, mode: Mode) -> io::Result<FdStream> {
    sock.set_nodelay(true)?;
    if mode == Mode::Block {
        sock.set_read_timeout(Some(BLOCK_SLICE))?;
        sock.set_write_timeout(Some(BLOCK_SLICE))?;
    }
    let tx = OwnedFd::from(sock.try_clone()?);
    FdStream::new(OwnedFd::from(sock), tx, mode)
}

impl Transport for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let ping = TcpStream::connect(listener.local_addr()?)?;
        let (echo, peer) = listener.accept()?;
        if peer != ping.local_addr()? {
            return Err(io::Error::other("an unexpected client connected to the loopback listener"));
        }
        let handoff = Handoff { fds: vec![OwnedFd::from(echo)], args: Vec::new() };
        Ok((Box::new(endpoint(ping, params.mode)?), handoff))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        let fd = handoff
            .fds
            .into_iter()
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "tcp needs one descriptor"))?;
        Ok(Box::new(endpoint(TcpStream::from(fd), params.mode)?))
    }
}
