//! The reading end: [`StreamReader`] and the in-place [`Record`].

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::time::Duration;

use super::error::{StreamRecvError, StreamRecvTimeoutError, StreamTryRecvError};
use super::protocol::{decode_header, Corruption, ReaderCore, HEADER};
use super::shared::{status_of, wait_for_peer, PeerWatch, Shared, StreamStatus, LIVENESS_INTERVAL, WRITER_SLOT};
use crate::endpoint::forms::{until, wait_forms};
use crate::endpoint::receive::{impl_receive, Waited};
use crate::error::{too_small, OpenError, RecvIntoSliceError};
use crate::lend::{LendOr, Lender, LentMut};
use crate::wait::{try_then_block_on, Deadline, Wait, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// The reading end of a stream (one at a time per stream, across all processes).
#[derive(Debug)]
pub struct StreamReader {
    shared: Shared,
    core: ReaderCore,
    writer: PeerWatch,
    policy: WaitPolicy,
    /// The corrupt state reported last: the same state again reads as empty, so corruption
    /// is reported once per state, not by every call while it lasts.
    reported: Option<Corruption>,
}

/// Where the next record is: `(position, payload length, ring bytes)`.
type Next = (u64, u32, u64);

impl StreamReader {
    pub(super) fn attach(shared: Shared) -> Result<StreamReader, OpenError> {
        let core = ReaderCore::attach(shared.ctrl(), shared.layout().capacity).map_err(|c| shared.corrupt_open(c))?;
        shared.counter.position(core.position());
        shared.ctrl().nudge();
        Ok(StreamReader {
            shared,
            core,
            writer: PeerWatch::new(WRITER_SLOT),
            policy: WaitPolicy::default(),
            reported: None,
        })
    }

    /// Ring size in bytes.
    pub fn capacity(&self) -> usize {
        self.shared.layout().capacity as usize
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        self.shared.chan().path()
    }

    /// How blocking calls wait (default: spin ~20 µs, then sleep).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// Whether a live process holds the writer role (cached for [`LIVENESS_INTERVAL`]).
    pub fn writer_alive(&mut self) -> bool {
        self.writer.alive(&self.shared)
    }

    /// Has the next receive attempt read the liveness clock: an async receive tries once per
    /// wake-up (every [`LIVENESS_INTERVAL`] while it waits), too seldom for the watch's
    /// every-64th-poll clock, and would find a SIGKILLed writer only after 64 intervals. The
    /// writer is still looked up at most once per interval.
    pub(crate) fn before_attempt(&self) {
        self.writer.clock_next();
    }

    /// A SIGKILLed writer sends no notification: an async receive tries again every
    /// `LIVENESS_INTERVAL` to find it gone, as the blocking `recv` does.
    pub(crate) fn retry_interval(&self) -> Option<Duration> {
        Some(LIVENESS_INTERVAL)
    }

    /// Waits until a live process holds the writer role. Useful at start-up: a reader of an
    /// empty stream with no writer gets `Disconnected`.
    pub fn wait_for_writer(&mut self) -> bool {
        wait_for_peer(&self.shared, &mut self.writer, self.shared.ctrl().readable_event(), Deadline::NEVER)
    }

    /// Waits until a live process holds the writer role, at most `timeout`. Returns whether
    /// one does.
    pub fn wait_for_writer_timeout(&mut self, timeout: Duration) -> bool {
        wait_for_peer(&self.shared, &mut self.writer, self.shared.ctrl().readable_event(), Deadline::after(timeout))
    }

    /// Ring bytes committed and not yet consumed (headers and padding included).
    pub fn pending(&self) -> usize {
        self.core.pending_now(self.shared.ctrl()) as usize
    }

    /// A snapshot for tools.
    pub fn status(&self) -> StreamStatus {
        status_of(self.shared.chan())
    }

    /// The next committed record, if any, validated. A corrupt state equal to `reported` is
    /// not reported again: it reads as no record (see `StreamReader::reported`).
    #[inline]
    fn next(
        core: &mut ReaderCore,
        shared: &Shared,
        reported: &mut Option<Corruption>,
    ) -> Result<Option<Next>, Corruption> {
        match StreamReader::next_raw(core, shared) {
            Err(c) if *reported == Some(c) => Ok(None),
            Err(c) => {
                *reported = Some(c);
                Err(c)
            }
            ok => ok,
        }
    }

    #[inline]
    fn next_raw(core: &mut ReaderCore, shared: &Shared) -> Result<Option<Next>, Corruption> {
        let avail = core.poll(shared.ctrl())?;
        if avail == 0 {
            // Fetch the lines the next record will be written to while we wait for the write
            // position: once it moves, they are already on their way instead of requested
            // only then (about one cache-line round trip instead of two). Four lines cover
            // records up to ~250 B; the double mapping makes them contiguous. Measured, spin
            // ping-pong p50 at floor 55-60 ns: 32 B 105-110 -> 95-100 ns, 256 B 150 -> 135 ns.
            let at = shared.at(core.position());
            for i in 0..4 {
                crate::sync::prefetch_line(at.wrapping_add(64 * i));
            }
            return Ok(None);
        }
        let pos = core.position();
        // SAFETY: `avail > 0` committed bytes start at `pos`, a multiple of ALIGN, so an
        // aligned 8-byte header is inside the mapping; the writer wrote it before its Release
        // store of head (which `poll` Acquired) and will not touch it until we consume.
        // A volatile read copies it out once; only the copy is validated and used.
        let header = unsafe { std::ptr::read_volatile(shared.at(pos) as *const u64) };
        let (len, size) = decode_header(header, avail, core.cached_head(), pos).inspect_err(|_| core.resync())?;
        Ok(Some((pos, len, size)))
    }

    fn record(&mut self, (pos, len, size): Next) -> Record<'_> {
        // SAFETY: `decode_header` checked HEADER + len <= size <= avail <= capacity, so the
        // bytes are inside the double mapping; they are committed and the writer leaves them
        // alone until we consume (the Record borrows the reader, so no consume can happen
        // while the slice lives).
        let ptr = unsafe { self.shared.at(pos).add(HEADER as usize) };
        Record { reader: self, ptr, len: len as usize, size, _life: PhantomData }
    }

    /// The next record, waiting as `wait` says (a wait ends early when the writer is gone).
    /// Read it in place, then [`Record::consume`] it; dropping it unconsumed leaves it to be
    /// read again.
    #[inline]
    pub fn recv_ref_with(&mut self, wait: Wait) -> Result<Record<'_>, Waited<StreamRecvError>> {
        let n = self.next_with(wait)?;
        Ok(self.record(n))
    }

    wait_forms! {
        /// The next record, without waiting (see [`recv_ref_with`](Self::recv_ref_with)).
        fn try_recv_ref, recv_ref, recv_ref_timeout, recv_ref_deadline (&mut self) = recv_ref_with -> Record<'_>;
        errors (StreamTryRecvError, StreamRecvError, StreamRecvTimeoutError)
    }

    /// Where the next record is, waiting for it as `wait` says.
    #[inline]
    fn next_with(&mut self, wait: Wait) -> Result<Next, Waited<StreamRecvError>> {
        match wait {
            Wait::Now => Ok(self.try_next()?),
            wait => until(wait, |w| self.next_until(w.deadline())).map_err(Waited::timed),
        }
    }

    /// Where the next record is, if there is one now.
    #[inline]
    fn try_next(&mut self) -> Result<Next, StreamTryRecvError> {
        let e = match StreamReader::next(&mut self.core, &self.shared, &mut self.reported) {
            Ok(Some(n)) => return Ok(n),
            Ok(None) => {
                if self.writer.alive(&self.shared) {
                    StreamTryRecvError::Empty
                } else {
                    // The writer may have committed just before it went: look once more.
                    match StreamReader::next(&mut self.core, &self.shared, &mut self.reported) {
                        Ok(Some(n)) => return Ok(n),
                        Ok(None) => StreamTryRecvError::Disconnected,
                        Err(c) => StreamTryRecvError::Corrupt(c.into()),
                    }
                }
            }
            Err(c) => StreamTryRecvError::Corrupt(c.into()),
        };
        // Nothing valid found: zeros past a cut read as "empty" or as garbage.
        Err(if self.shared.truncated() { StreamTryRecvError::Truncated } else { e })
    }

    /// Waits for the next record until `deadline`; `Err(None)` if it passed.
    fn next_until(&mut self, deadline: Deadline) -> Result<Next, Option<StreamRecvError>> {
        let StreamReader { shared, core, writer, policy, reported } = self;
        let ctrl = shared.ctrl();
        let recheck = || Some(LIVENESS_INTERVAL);
        let outcome = try_then_block_on(ctrl.readable_event(), *policy, deadline, recheck, shared.counter, || {
            let e = match StreamReader::next(core, shared, reported) {
                Ok(Some(n)) => return Some(Ok(n)),
                // Nothing yet: wait, unless the file was truncated (then nothing ever comes).
                Ok(None) if writer.alive(shared) => {
                    return shared.truncated().then_some(Err(StreamRecvError::Truncated))
                }
                // Gone: one more look, as in `try_recv_ref`.
                Ok(None) => match StreamReader::next(core, shared, reported) {
                    Ok(Some(n)) => return Some(Ok(n)),
                    Ok(None) => StreamRecvError::Disconnected,
                    Err(c) => StreamRecvError::Corrupt(c.into()),
                },
                Err(c) => StreamRecvError::Corrupt(c.into()),
            };
            Some(Err(if shared.truncated() { StreamRecvError::Truncated } else { e }))
        });
        match outcome {
            Some(Ok(n)) => Ok(n),
            Some(Err(e)) => Err(Some(e)),
            None if self.shared.truncated() => Err(Some(StreamRecvError::Truncated)),
            None => Err(None),
        }
    }

    /// Copies the next record into `buf` (replacing its contents, reusing its capacity) and
    /// consumes it, waiting as `wait` says. Returns the record length.
    #[inline]
    pub fn recv_into_with(&mut self, buf: &mut Vec<u8>, wait: Wait) -> Result<usize, Waited<StreamRecvError>> {
        Ok(self.recv_ref_with(wait)?.copy_into(buf))
    }

    wait_forms! {
        /// Copies the next record into `buf` and consumes it, without waiting (see
        /// [`recv_into_with`](Self::recv_into_with)).
        fn try_recv_into, recv_into, recv_into_timeout, recv_into_deadline (&mut self, buf: &mut Vec<u8>)
            = recv_into_with -> usize;
        errors (StreamTryRecvError, StreamRecvError, StreamRecvTimeoutError)
    }

    /// Copies the next record into the start of `buf` and consumes it, waiting as `wait`
    /// says: one copy, straight out of the ring, and no allocation. Returns the record's
    /// length (`buf[..n]` holds it).
    ///
    /// A record longer than `buf` is [`RecvIntoSliceError::TooSmall`] and is not consumed:
    /// it stays at the head of the ring (the writer cannot overwrite it), and the next
    /// receive of any form returns it.
    #[inline]
    pub fn recv_into_slice_with(
        &mut self,
        buf: &mut [u8],
        wait: Wait,
    ) -> Result<usize, RecvIntoSliceError<Waited<StreamRecvError>>> {
        self.recv_ref_with(wait)?.copy_to_slice(buf)
    }

    wait_forms! {
        /// Copies the next record into the start of `buf` and consumes it, without waiting
        /// (see [`recv_into_slice_with`](Self::recv_into_slice_with)).
        fn try_recv_into_slice, recv_into_slice, recv_into_slice_timeout, recv_into_slice_deadline
            (&mut self, buf: &mut [u8]) = recv_into_slice_with -> usize;
        errors (StreamTryRecvError, StreamRecvError, StreamRecvTimeoutError) slice
    }

    /// The next record, copied out and consumed, waiting as `wait` says.
    #[inline]
    pub fn recv_with(&mut self, wait: Wait) -> Result<Vec<u8>, Waited<StreamRecvError>> {
        Ok(self.recv_ref_with(wait)?.take())
    }

    wait_forms! {
        /// The next record, copied out and consumed, without waiting.
        fn try_recv, recv, recv_timeout, recv_deadline (&mut self) = recv_with -> Vec<u8>;
        errors (StreamTryRecvError, StreamRecvError, StreamRecvTimeoutError)
    }

    /// A blocking iterator over the records, copied out and consumed ([`StreamReader::recv`]
    /// per item). After it yields [`StreamRecvError::Disconnected`] or
    /// [`StreamRecvError::Truncated`] (which would repeat for ever) it ends.
    pub fn iter(&mut self) -> Iter<'_> {
        Iter::new(self)
    }

    /// An iterator over the records available now ([`StreamReader::try_recv`] per item): it
    /// ends at [`StreamTryRecvError::Empty`]; another error is yielded once, then it ends.
    pub fn try_iter(&mut self) -> TryIter<'_> {
        TryIter::new(self)
    }
}

/// The blocking iterator of [`StreamReader::iter`].
///
/// An `Iterator` whose items are `Result<Vec<u8>, StreamRecvError>`.
pub type Iter<'a> = crate::endpoint::iter::Iter<&'a mut StreamReader>;

/// The non-blocking iterator of [`StreamReader::try_iter`].
///
/// An `Iterator` whose items are `Result<Vec<u8>, StreamRecvError>`.
pub type TryIter<'a> = crate::endpoint::iter::TryIter<&'a mut StreamReader>;

impl_receive!(
    StreamReader: Vec<u8>, usize, StreamRecvError; Stream, "record length is not the size of the reader's payload type";
    ends (StreamRecvError::Disconnected | StreamRecvError::Truncated);
    hooks from StreamReader
);
impl_receive!(ref StreamReader: Record<'a>; discard |record| record.consume());

impl Waitable for StreamReader {
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: self.shared.ctrl().readable_event() }
    }

    /// Ready when a committed record is waiting (or a corrupt state not reported yet, or the
    /// file was truncated: the read reports it).
    fn is_ready(&self) -> bool {
        let ctrl = self.shared.ctrl();
        (self.core.has_data(ctrl) && self.reported.is_none_or(|c| c.head != ctrl.positions().0))
            || self.shared.truncated()
    }
}

/// A committed record, borrowed in place from the ring. [`Record::consume`] hands its space
/// back to the writer; dropping it unconsumed leaves it to be read again.
///
/// `R` is how the record holds its reader: borrowed (the default) or owned
/// ([`OwnedRecord`], from [`StreamReader::record_owned`]).
#[must_use = "a record is read again unless consumed"]
pub struct Record<'a, R: DerefMut<Target = StreamReader> + 'a = &'a mut StreamReader> {
    reader: R,
    ptr: *const u8,
    len: usize,
    size: u64,
    _life: PhantomData<&'a mut StreamReader>,
}

/// A [`Record`] that owns its reader, lent by a [`Lender`](crate::lend::Lender)
/// ([`StreamReader::record_owned`]).
pub type OwnedRecord = Record<'static, LentMut<StreamReader>>;

// SAFETY: the pointer is to committed bytes nobody writes until the record is consumed,
// which needs the record itself; the lent reader it owns is `Send`.
unsafe impl Send for OwnedRecord {}
// SAFETY: as above; `&OwnedRecord` reads the bytes and the reader's position only.
unsafe impl Sync for OwnedRecord {}

impl StreamReader {
    /// A record from `recv` (`try_recv_ref`, `recv_ref`, `recv_ref_timeout`) that owns the
    /// reader of `lender`, lent exclusively, so it may be kept past the call, by a binding
    /// for instance. The receive runs with the lender's mutex held, as any call on it.
    ///
    /// # Panics
    /// If `recv` returns a record of another reader than the one it is given.
    pub fn record_owned<E>(
        lender: &Lender<StreamReader>,
        recv: impl FnOnce(&mut StreamReader) -> Result<Record<'_>, E>,
    ) -> Result<OwnedRecord, LendOr<E>> {
        let (lent, (ptr, len, size)) = lender.lend_mut_after(|r| {
            let me: *const StreamReader = r;
            let rec = recv(r)?;
            assert!(std::ptr::eq(&*rec.reader, me), "record_owned: the record is another reader's");
            Ok((rec.ptr, rec.len, rec.size))
        })?;
        Ok(Record { reader: lent, ptr, len, size, _life: PhantomData })
    }
}

impl<'a, R: DerefMut<Target = StreamReader> + 'a> Record<'a, R> {
    /// Marks the record consumed: its space goes back to the writer, and no reader (this one
    /// or a successor) will see it again.
    #[inline]
    pub fn consume(self) {
        let mut reader = self.reader;
        let r: &mut StreamReader = &mut reader;
        if r.core.release(r.shared.ctrl(), self.size) {
            r.shared.counter.futex_wake();
        }
        r.shared.counter.message(self.len);
        r.shared.counter.position(r.core.position());
    }

    /// The ring position of the record (bytes before it ever committed).
    pub fn position(&self) -> u64 {
        self.reader.core.position()
    }

    /// Where the record's bytes cross from the ring's first mapping into its second, for a
    /// record that runs over the end of the ring: the offset in the record. The double
    /// mapping shows such a record contiguous, but its bytes lie in two mappings (what
    /// [`ReadOnlyAlias::new`](crate::lend::ReadOnlyAlias::new) needs to know). `None` for a
    /// record in one of them.
    pub fn second_mapping_at(&self) -> Option<usize> {
        let first = self.reader.shared.at(0) as usize;
        let start = (self.ptr as usize).wrapping_sub(first);
        let cap = self.reader.capacity();
        (start < cap && start + self.len > cap).then(|| cap - start)
    }

    /// Copies the record out and consumes it.
    fn take(self) -> Vec<u8> {
        let v = self.to_vec();
        self.consume();
        v
    }

    /// Copies the record into the start of `buf` and consumes it; a record longer than `buf`
    /// is left unconsumed (`Err` with its length), to be read again.
    fn copy_to_slice<E>(self, buf: &mut [u8]) -> Result<usize, RecvIntoSliceError<E>> {
        let n = self.len;
        let Some(dst) = buf.get_mut(..n) else {
            return Err(too_small(n, buf.len()));
        };
        dst.copy_from_slice(&self);
        self.consume();
        Ok(n)
    }

    fn copy_into(self, buf: &mut Vec<u8>) -> usize {
        buf.clear();
        buf.extend_from_slice(&self);
        let n = self.len;
        self.consume();
        n
    }
}

impl<'a, R: DerefMut<Target = StreamReader> + 'a> Deref for Record<'a, R> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: built by `StreamReader::record` from a validated header: `len` committed bytes
        // inside the mapping, untouched by the writer until consumed, which needs `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<'a, R: DerefMut<Target = StreamReader> + 'a> fmt::Debug for Record<'a, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record").field("position", &self.position()).field("len", &self.len).finish()
    }
}
