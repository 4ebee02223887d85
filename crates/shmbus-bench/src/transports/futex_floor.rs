//! `futex-floor`: the block-mode lower bound. The same lanes as `floor`, but the receiver
//! sleeps in `FUTEX_WAIT` on the sequence word (a shared futex: the word is in a `MAP_SHARED`
//! memfd) and the sender calls `FUTEX_WAKE` after every store, sleeper or not.

use std::io;
use std::sync::atomic::Ordering;

use shmbus::sys::{futex_wait, futex_wake, WaitOutcome};

use super::shm_lanes::{Lane, Region};
use super::{Endpoint, Handoff, Mode, Params, Payload, Transport};
use crate::waiter::{Waiter, BLOCK_SLICE};

/// The futex floor.
#[derive(Debug)]
pub struct FutexFloor;

impl Transport for FutexFloor {
    fn name(&self) -> &'static str {
        "futex-floor"
    }

    fn mode(&self, _requested: Mode) -> Mode {
        Mode::Block
    }

    fn payload(&self, requested: Payload) -> Payload {
        requested
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let (region, handoff) = Region::create("shmbus-bench-futex-floor", params)?;
        Ok((Box::new(FutexEnd::new(region, 0)), handoff))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        Ok(Box::new(FutexEnd::new(Region::attach(params, handoff)?, 1)))
    }
}

struct FutexEnd {
    region: Region,
    tx: Lane,
    rx: Lane,
    next_tx: u32,
    next_rx: u32,
}

impl FutexEnd {
    fn new(region: Region, tx_lane: usize) -> Self {
        let tx = region.lane(tx_lane);
        let rx = region.lane(1 - tx_lane);
        FutexEnd { region, tx, rx, next_tx: 1, next_rx: 1 }
    }
}

impl Endpoint for FutexEnd {
    #[inline]
    fn send(&mut self, msg: &[u8], _waiter: &mut Waiter<'_>) -> io::Result<()> {
        self.region.put(self.tx, msg);
        let seq = self.region.seq(self.tx);
        // Pairs with the Acquire load of `seq` in recv() of the peer.
        seq.store(self.next_tx, Ordering::Release);
        futex_wake(seq, 1);
        self.next_tx = self.next_tx.wrapping_add(1);
        Ok(())
    }

    #[inline]
    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let buf = buf.as_mut_slice();
        let seq = self.region.seq(self.rx);
        loop {
            // Pairs with the Release store of `seq` in send() of the peer.
            let now = seq.load(Ordering::Acquire);
            if now == self.next_rx {
                break;
            }
            // Sleeps only while the word still holds `now`: a store + wake between the load
            // and the wait makes the kernel return at once (EAGAIN), so no wake is lost.
            if futex_wait(seq, now, Some(BLOCK_SLICE)) == WaitOutcome::TimedOut {
                waiter.check()?;
            }
        }
        self.region.take(self.rx, buf);
        self.next_rx = self.next_rx.wrapping_add(1);
        Ok(())
    }
}
