//! The writing end: [`StreamWriter`] and its in-place [`Loan`].

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::time::Duration;

use super::error::{StreamSendError, StreamSendTimeoutError, StreamTrySendError};
use super::protocol::{encode_header, record_size, ClaimError, Corruption, WriterCore, HEADER};
use super::shared::{status_of, wait_for_peer, PeerWatch, Shared, StreamStatus, LIVENESS_INTERVAL, READER_SLOT};
use crate::endpoint::forms::{until, wait_forms};
use crate::endpoint::send::{impl_transmit, Refused};
use crate::error::OpenError;
use crate::lend::{LendOr, Lender, LentMut};
use crate::wait::{try_then_block_on, Deadline, Wait, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// The writing end of a stream (one at a time per stream, across all processes).
#[derive(Debug)]
pub struct StreamWriter {
    pub(super) shared: Shared,
    core: WriterCore,
    reader: PeerWatch,
    policy: WaitPolicy,
    writable_size: u64,
    /// The largest payload (cached from the layout for the send path).
    max_record: u64,
    /// The corrupt state reported last: the same state again reads as a full ring, so
    /// corruption is reported once per state, not by every call while it lasts.
    reported: Option<Corruption>,
}

impl StreamWriter {
    pub(super) fn attach(shared: Shared) -> Result<StreamWriter, OpenError> {
        let core = WriterCore::attach(shared.ctrl(), shared.layout().capacity).map_err(|c| shared.corrupt_open(c))?;
        shared.ctrl().nudge();
        Ok(StreamWriter {
            core,
            reader: PeerWatch::new(READER_SLOT),
            policy: WaitPolicy::default(),
            writable_size: HEADER,
            max_record: shared.layout().max_record_len(),
            reported: None,
            shared,
        })
    }

    /// Ring size in bytes.
    pub fn capacity(&self) -> usize {
        self.shared.layout().capacity as usize
    }

    /// The largest record payload this stream accepts (`capacity - 8`, at most `u32::MAX`).
    pub fn max_record_len(&self) -> usize {
        self.max_record as usize
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        self.shared.chan().path()
    }

    /// How blocking calls wait (default: spin ~20 µs, then sleep).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// For [`Waitable::is_ready`]: report ready when a record of `len` payload bytes fits
    /// (default 0: when any record fits). Clamped to the maximum record length.
    pub fn set_writable_len(&mut self, len: usize) {
        self.writable_size = record_size((len as u64).min(self.max_record));
    }

    /// Whether a live process holds the reader role (cached for [`LIVENESS_INTERVAL`]).
    pub fn reader_alive(&mut self) -> bool {
        self.reader.alive(&self.shared)
    }

    /// Waits until a live process holds the reader role. Useful at start-up: a writer whose
    /// ring fills before any reader attached gets `Disconnected`.
    pub fn wait_for_reader(&mut self) -> bool {
        wait_for_peer(&self.shared, &mut self.reader, self.shared.ctrl().writable_event(), Deadline::NEVER)
    }

    /// Waits until a live process holds the reader role, at most `timeout`. Returns whether
    /// one does.
    pub fn wait_for_reader_timeout(&mut self, timeout: Duration) -> bool {
        wait_for_peer(&self.shared, &mut self.reader, self.shared.ctrl().writable_event(), Deadline::after(timeout))
    }

    /// Ring bytes free right now.
    pub fn free(&self) -> usize {
        self.core.free_now(self.shared.ctrl()).unwrap_or(0) as usize
    }

    /// A snapshot for tools.
    pub fn status(&self) -> StreamStatus {
        status_of(self.shared.chan())
    }

    #[inline]
    fn size_for(&self, len: usize) -> Option<u64> {
        (len as u64 <= self.max_record).then(|| record_size(len as u64))
    }

    /// Lends `len` contiguous bytes of the ring for a record, waiting for space as `wait`
    /// says (a wait ends early when the reader is gone). Write them through the returned
    /// [`Loan`], then [`Loan::send`]; dropping the loan sends nothing.
    #[inline]
    pub fn loan_with(
        &mut self,
        len: usize,
        wait: Wait,
    ) -> Result<Loan<'_>, Refused<StreamSendError, StreamTrySendError>> {
        let pos = match wait {
            Wait::Now => self.try_claim(len)?,
            wait => until(wait, |w| self.claim_until(len, w.deadline())).map_err(Refused::timed)?,
        };
        Ok(Loan { pos, len, writer: self, _life: PhantomData })
    }

    wait_forms! {
        /// Lends `len` contiguous bytes of the ring for a record, without waiting (see
        /// [`loan_with`](Self::loan_with)).
        fn try_loan, loan, loan_timeout, loan_deadline (&mut self, len: usize) = loan_with now try_loan_now -> Loan<'_>;
        errors (StreamTrySendError, StreamSendError, StreamSendTimeoutError)
    }

    /// [`try_loan`](Self::try_loan): what [`loan_with`](Self::loan_with) does for
    /// [`Wait::Now`].
    #[inline]
    fn try_loan_now(&mut self, len: usize) -> Result<Loan<'_>, StreamTrySendError> {
        let pos = self.try_claim(len)?;
        Ok(Loan { pos, len, writer: self, _life: PhantomData })
    }

    /// Claims space for a record of `len` bytes if there is room now.
    #[inline]
    fn try_claim(&mut self, len: usize) -> Result<u64, StreamTrySendError> {
        let Some(size) = self.size_for(len) else {
            return Err(StreamTrySendError::TooLarge { len, max: self.max_record_len() });
        };
        match latch(self.core.try_claim(self.shared.ctrl(), size), &mut self.reported) {
            Ok(pos) => Ok(pos),
            Err(_) if self.shared.truncated() => Err(StreamTrySendError::Truncated),
            Err(ClaimError::Full { free }) => {
                self.shared.counter.full();
                if self.reader.alive(&self.shared) {
                    Err(StreamTrySendError::Full { needed: size as usize, free: free as usize })
                } else {
                    Err(StreamTrySendError::Disconnected)
                }
            }
            Err(ClaimError::Corrupt(c)) => Err(StreamTrySendError::Corrupt(c.into())),
        }
    }

    /// Claims space for a record of `len` bytes by `deadline`; `Err(None)` if it passed.
    fn claim_until(&mut self, len: usize, deadline: Deadline) -> Result<u64, Option<StreamSendError>> {
        let Some(size) = self.size_for(len) else {
            return Err(Some(StreamSendError::TooLarge { len, max: self.max_record_len() }));
        };
        let StreamWriter { shared, core, reader, policy, reported, .. } = self;
        let ctrl = shared.ctrl();
        let mut found_full = false;
        let outcome = try_then_block_on(
            ctrl.writable_event(),
            *policy,
            deadline,
            || Some(LIVENESS_INTERVAL),
            shared.counter,
            || {
                match latch(core.try_claim(ctrl, size), reported) {
                    Ok(pos) => Some(Ok(pos)),
                    // No room (or garbage): a truncated file never makes room, so say so now.
                    Err(_) if shared.truncated() => Some(Err(StreamSendError::Truncated)),
                    Err(ClaimError::Full { .. }) => {
                        found_full = true;
                        (!reader.alive(shared)).then_some(Err(StreamSendError::Disconnected))
                    }
                    Err(ClaimError::Corrupt(c)) => Some(Err(StreamSendError::Corrupt(c.into()))),
                }
            },
        );
        if found_full {
            self.shared.counter.full();
        }
        match outcome {
            Some(Ok(pos)) => Ok(pos),
            Some(Err(e)) => Err(Some(e)),
            None if self.shared.truncated() => Err(Some(StreamSendError::Truncated)),
            None => Err(None),
        }
    }

    /// Copies `data` in as one record, waiting for space as `wait` says.
    #[inline]
    pub fn send_with(&mut self, data: &[u8], wait: Wait) -> Result<(), Refused<StreamSendError, StreamTrySendError>> {
        let mut l = self.loan_with(data.len(), wait)?;
        l.copy_from_slice(data);
        l.send();
        Ok(())
    }

    wait_forms! {
        /// Copies `data` in as one record, without waiting (see [`send_with`](Self::send_with)).
        fn try_send, send, send_timeout, send_deadline (&mut self, data: &[u8]) = send_with now try_send_now -> ();
        errors (StreamTrySendError, StreamSendError, StreamSendTimeoutError)
    }

    /// [`try_send`](Self::try_send): what [`send_with`](Self::send_with) does for
    /// [`Wait::Now`].
    #[inline]
    fn try_send_now(&mut self, data: &[u8]) -> Result<(), StreamTrySendError> {
        let mut l = self.try_loan_now(data.len())?;
        l.copy_from_slice(data);
        l.send();
        Ok(())
    }
}

impl_transmit!(StreamWriter: (), StreamSendError);

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
    /// was truncated: the send reports it).
    fn is_ready(&self) -> bool {
        self.core.free_now(self.shared.ctrl()).is_ok_and(|free| free >= self.writable_size) || self.shared.truncated()
    }
}

/// Ring space lent for one record: write the payload through `DerefMut<Target = [u8]>`,
/// optionally [`Loan::truncate`] it, then [`Loan::send`]. Until sent the reader cannot see
/// it; dropping the loan (or the writer process dying) discards it.
///
/// `W` is how the loan holds its writer: borrowed (the default) or owned ([`OwnedLoan`],
/// from [`StreamWriter::loan_owned`]).
#[must_use = "a loan is discarded unless sent"]
pub struct Loan<'a, W: DerefMut<Target = StreamWriter> + 'a = &'a mut StreamWriter> {
    writer: W,
    pos: u64,
    len: usize,
    _life: PhantomData<&'a mut StreamWriter>,
}

/// A stream [`Loan`] that owns its writer, lent by a [`Lender`](crate::lend::Lender)
/// ([`StreamWriter::loan_owned`]).
pub type OwnedLoan = Loan<'static, LentMut<StreamWriter>>;

impl StreamWriter {
    /// A loan from `loan` (`try_loan`, `loan`, `loan_timeout`) that owns the writer of
    /// `lender`, lent exclusively, so it may be kept past the call, by a binding for
    /// instance. The loan is taken with the lender's mutex held, as any call on it.
    ///
    /// # Panics
    /// If `loan` returns a loan of another writer than the one it is given.
    pub fn loan_owned<E>(
        lender: &Lender<StreamWriter>,
        loan: impl FnOnce(&mut StreamWriter) -> Result<Loan<'_>, E>,
    ) -> Result<OwnedLoan, LendOr<E>> {
        let (lent, (pos, len)) = lender.lend_mut_after(|w| {
            let me: *const StreamWriter = w;
            let l = loan(w)?;
            assert!(std::ptr::eq(&*l.writer, me), "loan_owned: the loan is another writer's");
            Ok((l.pos, l.len))
        })?;
        Ok(Loan { writer: lent, pos, len, _life: PhantomData })
    }
}

impl<'a, W: DerefMut<Target = StreamWriter> + 'a> Loan<'a, W> {
    /// Shortens the record to its first `len` bytes (for a writer that loaned the maximum it
    /// might need). Like [`Vec::truncate`], a `len` at least the current length does
    /// nothing.
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Publishes the record (all its bytes, or as many as [`Loan::truncate`] left).
    #[inline]
    pub fn send(self) {
        let (len, mut writer) = (self.len, self.writer);
        let w: &mut StreamWriter = &mut writer;
        let at = w.shared.at(self.pos);
        // SAFETY: `at` is an 8-aligned position (records start at multiples of ALIGN; the
        // mapping is page aligned) of the claimed space, which only this writer may touch
        // until `publish`.
        unsafe { std::ptr::write(at as *mut u64, encode_header(len as u32)) };
        if w.core.publish(w.shared.ctrl(), record_size(len as u64)) {
            w.shared.counter.futex_wake();
        }
        w.shared.counter.message(len);
    }
}

impl<'a, W: DerefMut<Target = StreamWriter> + 'a> Deref for Loan<'a, W> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: `pos` was claimed for HEADER + len <= capacity bytes; from `at(pos)` they lie
        // inside the 2×capacity double mapping, and the reader does not access them until
        // sent. The borrow of the writer keeps the mapping alive.
        unsafe { std::slice::from_raw_parts(self.writer.shared.at(self.pos).add(HEADER as usize), self.len) }
    }
}

impl<'a, W: DerefMut<Target = StreamWriter> + 'a> DerefMut for Loan<'a, W> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; the claimed bytes belong to this writer alone, and `&mut self`
        // makes this the only slice over them.
        unsafe { std::slice::from_raw_parts_mut(self.writer.shared.at(self.pos).add(HEADER as usize), self.len) }
    }
}

impl<'a, W: DerefMut<Target = StreamWriter> + 'a> fmt::Debug for Loan<'a, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loan").field("pos", &self.pos).field("len", &self.len).finish()
    }
}
