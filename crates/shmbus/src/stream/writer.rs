//! The writing end: [`StreamWriter`] and its in-place [`WriteGrant`].

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::time::Duration;

use super::channel::{status_of, wait_for_peer, PeerWatch, Shared, StreamStatus, LIVENESS_INTERVAL, READER_SLOT};
use super::error::{StreamSendError, StreamSendTimeoutError, StreamTrySendError};
use super::protocol::{encode_header, record_size, ClaimError, Corruption, WriterCore, HEADER};
use crate::error::OpenError;
use crate::wait::{block_on, Deadline, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// The writing end of a stream (one at a time per stream, across all processes).
#[derive(Debug)]
pub struct StreamWriter {
    pub(super) shared: Shared,
    core: WriterCore,
    reader: PeerWatch,
    policy: WaitPolicy,
    writable_size: u64,
    /// The corrupt state reported last: the same state again reads as a full ring, so
    /// corruption is reported once per state, not by every call while it lasts.
    reported: Option<Corruption>,
}

impl StreamWriter {
    pub(super) fn attach(shared: Shared) -> Result<StreamWriter, OpenError> {
        let core = WriterCore::attach(shared.ctrl(), shared.layout().capacity).map_err(|c| shared.corrupt_open(c))?;
        shared.ctrl().nudge();
        Ok(StreamWriter {
            shared,
            core,
            reader: PeerWatch::new(READER_SLOT),
            policy: WaitPolicy::default(),
            writable_size: HEADER,
            reported: None,
        })
    }

    /// Ring size in bytes.
    pub fn capacity(&self) -> usize {
        self.shared.layout().capacity as usize
    }

    /// The largest record payload this stream accepts (`capacity - 8`, at most `u32::MAX`).
    pub fn max_record_len(&self) -> usize {
        self.shared.layout().max_record_len() as usize
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        self.shared.seg().path()
    }

    /// How blocking calls wait (default: spin ~20 µs, then sleep).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// For [`Waitable::is_ready`]: report ready when a record of `len` payload bytes fits
    /// (default 0: when any record fits). Clamped to the maximum record length.
    pub fn set_writable_len(&mut self, len: usize) {
        self.writable_size = record_size((len as u64).min(self.shared.layout().max_record_len()));
    }

    /// Whether a live process holds the reader role (cached for [`LIVENESS_INTERVAL`]).
    pub fn reader_alive(&mut self) -> bool {
        self.reader.alive(&self.shared)
    }

    /// Waits until a live process holds the reader role, at most `timeout` (`None`: for
    /// ever). Returns whether one does. Useful at start-up: a writer whose ring fills before
    /// any reader attached gets `Disconnected`.
    pub fn wait_for_reader(&mut self, timeout: Option<Duration>) -> bool {
        wait_for_peer(&self.shared, &mut self.reader, self.shared.ctrl().writable_event(), timeout)
    }

    /// Ring bytes free right now.
    pub fn free(&self) -> usize {
        self.core.free_now(self.shared.ctrl()).unwrap_or(0) as usize
    }

    /// A snapshot for tools.
    pub fn status(&self) -> StreamStatus {
        status_of(self.shared.seg(), self.shared.layout())
    }

    #[inline]
    fn size_for(&self, len: usize) -> Option<u64> {
        let max = self.shared.layout().max_record_len();
        (len as u64 <= max).then(|| record_size(len as u64))
    }

    /// Reserves `len` contiguous bytes for a record, without waiting. Write them through the
    /// returned grant, then [`WriteGrant::commit`]; dropping the grant commits nothing.
    #[inline]
    pub fn try_reserve(&mut self, len: usize) -> Result<WriteGrant<'_>, StreamTrySendError> {
        let Some(size) = self.size_for(len) else {
            return Err(StreamTrySendError::TooLarge { len, max: self.max_record_len() });
        };
        match latch(self.core.try_claim(self.shared.ctrl(), size), &mut self.reported) {
            Ok(pos) => Ok(WriteGrant { pos, len, writer: self }),
            Err(_) if self.shared.truncated() => Err(StreamTrySendError::Truncated),
            Err(ClaimError::Full { free }) => {
                if self.reader.alive(&self.shared) {
                    Err(StreamTrySendError::Full { needed: size as usize, free: free as usize })
                } else {
                    Err(StreamTrySendError::Disconnected)
                }
            }
            Err(ClaimError::Corrupt(c)) => Err(StreamTrySendError::Corrupt(c.into())),
        }
    }

    /// Reserves `len` contiguous bytes, waiting for space as long as it takes.
    pub fn reserve(&mut self, len: usize) -> Result<WriteGrant<'_>, StreamSendError> {
        let pos = loop {
            match self.claim_until(len, Deadline::NEVER) {
                Ok(pos) => break pos,
                Err(Some(e)) => return Err(e),
                Err(None) => continue,
            }
        };
        Ok(WriteGrant { pos, len, writer: self })
    }

    /// Reserves `len` contiguous bytes, waiting for space at most `timeout`.
    pub fn reserve_timeout(&mut self, len: usize, timeout: Duration) -> Result<WriteGrant<'_>, StreamSendTimeoutError> {
        match self.claim_until(len, Deadline::after(timeout)) {
            Ok(pos) => Ok(WriteGrant { pos, len, writer: self }),
            Err(Some(e)) => Err(e.into()),
            Err(None) => Err(StreamSendTimeoutError::Timeout),
        }
    }

    /// Claims space for a record of `len` bytes by `deadline`; `Err(None)` if it passed.
    fn claim_until(&mut self, len: usize, deadline: Deadline) -> Result<u64, Option<StreamSendError>> {
        let Some(size) = self.size_for(len) else {
            return Err(Some(StreamSendError::TooLarge { len, max: self.max_record_len() }));
        };
        let StreamWriter { shared, core, reader, policy, reported, .. } = self;
        let ctrl = shared.ctrl();
        let outcome = block_on(ctrl.writable_event(), *policy, deadline, Some(LIVENESS_INTERVAL), || {
            match latch(core.try_claim(ctrl, size), reported) {
                Ok(pos) => Some(Ok(pos)),
                // No room (or garbage): a truncated file never makes room, so say so now.
                Err(_) if shared.truncated() => Some(Err(StreamSendError::Truncated)),
                Err(ClaimError::Full { .. }) => (!reader.alive(shared)).then_some(Err(StreamSendError::Disconnected)),
                Err(ClaimError::Corrupt(c)) => Some(Err(StreamSendError::Corrupt(c.into()))),
            }
        });
        match outcome {
            Some(Ok(pos)) => Ok(pos),
            Some(Err(e)) => Err(Some(e)),
            None if self.shared.truncated() => Err(Some(StreamSendError::Truncated)),
            None => Err(None),
        }
    }

    /// Copies `data` in as one record, without waiting.
    #[inline]
    pub fn try_write(&mut self, data: &[u8]) -> Result<(), StreamTrySendError> {
        let mut g = self.try_reserve(data.len())?;
        g.copy_from_slice(data);
        g.commit();
        Ok(())
    }

    /// Copies `data` in as one record, waiting for space as long as it takes.
    pub fn write(&mut self, data: &[u8]) -> Result<(), StreamSendError> {
        let mut g = self.reserve(data.len())?;
        g.copy_from_slice(data);
        g.commit();
        Ok(())
    }

    /// Copies `data` in as one record, waiting for space at most `timeout`.
    pub fn write_timeout(&mut self, data: &[u8], timeout: Duration) -> Result<(), StreamSendTimeoutError> {
        let mut g = self.reserve_timeout(data.len(), timeout)?;
        g.copy_from_slice(data);
        g.commit();
        Ok(())
    }
}

/// A claim's corruption equal to the one reported last reads as a full ring (no space can
/// be trusted), so that it is reported once, not by every call while it lasts.
#[inline]
fn latch(r: Result<u64, ClaimError>, reported: &mut Option<Corruption>) -> Result<u64, ClaimError> {
    match r {
        Err(ClaimError::Corrupt(c)) if *reported == Some(c) => Err(ClaimError::Full { free: 0 }),
        Err(ClaimError::Corrupt(c)) => {
            *reported = Some(c);
            Err(ClaimError::Corrupt(c))
        }
        ok => ok,
    }
}

impl Waitable for StreamWriter {
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: self.shared.ctrl().writable_event() }
    }

    /// Ready when a record of [`StreamWriter::set_writable_len`] bytes fits now (or the file
    /// was truncated: the reserve reports it).
    fn is_ready(&self) -> bool {
        self.core.free_now(self.shared.ctrl()).is_ok_and(|free| free >= self.writable_size) || self.shared.truncated()
    }
}

/// Space reserved for one record: write the payload through `Deref<Target = [u8]>`, then
/// [`WriteGrant::commit`]. Until committed the reader cannot see it; dropping the grant
/// (or the writer process dying) discards it.
#[must_use = "a reservation is discarded unless committed"]
pub struct WriteGrant<'a> {
    writer: &'a mut StreamWriter,
    pos: u64,
    len: usize,
}

impl WriteGrant<'_> {
    /// Publishes the record with all the reserved bytes.
    #[inline]
    pub fn commit(self) {
        let len = self.len;
        self.commit_len(len);
    }

    /// Publishes the record with only its first `len` bytes (for a writer that reserved the
    /// maximum it might need).
    ///
    /// # Panics
    /// If `len` is larger than the reservation.
    #[inline]
    pub fn commit_len(self, len: usize) {
        assert!(len <= self.len, "commit_len({len}) exceeds the reservation of {} bytes", self.len);
        let w = self.writer;
        let at = w.shared.at(self.pos);
        // SAFETY: `at` is an 8-aligned position (records start at multiples of ALIGN; the
        // mapping is page aligned) of the claimed space, which only this writer may touch
        // until `publish`.
        unsafe { std::ptr::write(at as *mut u64, encode_header(len as u32)) };
        w.core.publish(w.shared.ctrl(), record_size(len as u64));
    }
}

impl Deref for WriteGrant<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: `pos` was claimed for HEADER + len <= capacity bytes; from `at(pos)` they lie
        // inside the 2×capacity double mapping, and the reader does not access them until
        // commit. The borrow of the writer keeps the mapping alive.
        unsafe { std::slice::from_raw_parts(self.writer.shared.at(self.pos).add(HEADER as usize), self.len) }
    }
}

impl DerefMut for WriteGrant<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; the claimed bytes belong to this writer alone, and `&mut self`
        // makes this the only slice over them.
        unsafe { std::slice::from_raw_parts_mut(self.writer.shared.at(self.pos).add(HEADER as usize), self.len) }
    }
}

impl fmt::Debug for WriteGrant<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteGrant").field("pos", &self.pos).field("len", &self.len).finish()
    }
}
