//! `floor`: the spin-mode lower bound. Two processes bounce a sequence number between two
//! cache lines of a shared memfd; payloads over 8 bytes go through a shared buffer written
//! before the number (see [`super::shm_lanes`]). No syscall on the hot path.

use std::io;
use std::sync::atomic::Ordering;

use super::shm_lanes::{Lane, Region};
use super::{Endpoint, Handoff, Mode, Params, Payload, Transport};
use crate::waiter::Waiter;

/// The spin floor.
#[derive(Debug)]
pub struct Floor;

impl Transport for Floor {
    fn name(&self) -> &'static str {
        "floor"
    }

    fn mode(&self, _requested: Mode) -> Mode {
        Mode::Spin
    }

    fn payload(&self, requested: Payload) -> Payload {
        requested
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let (region, handoff) = Region::create("shmbus-bench-floor", params)?;
        Ok((Box::new(FloorEnd::new(region, 0)), handoff))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        Ok(Box::new(FloorEnd::new(Region::attach(params, handoff)?, 1)))
    }
}

struct FloorEnd {
    region: Region,
    tx: Lane,
    rx: Lane,
    next_tx: u32,
    next_rx: u32,
}

impl FloorEnd {
    fn new(region: Region, tx_lane: usize) -> Self {
        let tx = region.lane(tx_lane);
        let rx = region.lane(1 - tx_lane);
        FloorEnd { region, tx, rx, next_tx: 1, next_rx: 1 }
    }
}

impl Endpoint for FloorEnd {
    #[inline]
    fn send(&mut self, msg: &[u8], _waiter: &mut Waiter<'_>) -> io::Result<()> {
        self.region.put(self.tx, msg);
        // Pairs with the Acquire load of `seq` in recv() of the peer: the payload written by
        // put() above is visible once the number is.
        self.region.seq(self.tx).store(self.next_tx, Ordering::Release);
        self.next_tx = self.next_tx.wrapping_add(1);
        Ok(())
    }

    #[inline]
    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let buf = buf.as_mut_slice();
        let seq = self.region.seq(self.rx);
        // Pairs with the Release store of `seq` in send() of the peer.
        while seq.load(Ordering::Acquire) != self.next_rx {
            waiter.spin()?;
        }
        self.region.take(self.rx, buf);
        self.next_rx = self.next_rx.wrapping_add(1);
        Ok(())
    }
}
