//! Typed stream endpoints: a [`Pod`] type `T` instead of bytes, as thin wrappers over
//! [`StreamWriter`] and [`StreamReader`].

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use super::channel::Stream;
use super::error::{
    StreamRecvError, StreamRecvTimeoutError, StreamSendError, StreamSendTimeoutError, StreamTryRecvError,
    StreamTrySendError,
};
use super::layout::StreamConfig;
use super::reader::{Record, StreamReader};
use super::writer::{Loan, StreamWriter};
use crate::error::{Corrupt, OpenError};
use crate::pod::{bytes_of, read_from, ref_from, PayloadType, Pod};
use crate::segment::Kind;
use crate::waitset::{WaitHandle, Waitable};

/// What a typed receive reports for a record that is not exactly one `T`.
fn wrong_len<T>(len: usize) -> Corrupt {
    Corrupt::new(Kind::Stream, "record length is not the size of the reader's payload type")
        .with("len", len as u64)
        .with("size", std::mem::size_of::<T>() as u64)
}

impl StreamConfig {
    /// A config for a stream of `T` records: a created stream records `T`'s name, size and
    /// alignment in its header (the capacity is set as for any stream). Opening an existing
    /// stream with it fails with [`OpenError::TypeMismatch`] if the stream records another
    /// type, or is an untyped stream whose records cannot hold a `T`. Records are placed at
    /// 8-byte aligned addresses: a type aligned to more is refused with
    /// [`OpenError::InvalidConfig`].
    pub fn for_type<T: Pod>() -> StreamConfig {
        StreamConfig::default().payload_type(PayloadType::of::<T>())
    }
}

impl Stream {
    /// Attaches as the stream's writer of `T` records. Fails with
    /// [`OpenError::TypeMismatch`] if the stream records another payload type, or is untyped
    /// and cannot hold a `T` (too large, or aligned to more than 8 bytes); otherwise as
    /// [`Stream::writer`].
    pub fn writer_of<T: Pod>(&self) -> Result<TypedStreamWriter<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(TypedStreamWriter { inner: self.writer()?, _type: PhantomData })
    }

    /// Attaches as the stream's reader of `T` records. Fails as [`Stream::writer_of`] does;
    /// otherwise as [`Stream::reader`].
    pub fn reader_of<T: Pod>(&self) -> Result<TypedStreamReader<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        let buf = Vec::with_capacity(std::mem::size_of::<T>());
        Ok(TypedStreamReader { inner: self.reader()?, buf, _type: PhantomData })
    }
}

/// Writes `T` records to a stream: a [`StreamWriter`] that sends the bytes of a `T`, or lends
/// ring space to build one in place.
#[derive(Debug)]
pub struct TypedStreamWriter<T: Pod> {
    inner: StreamWriter,
    _type: PhantomData<fn(T)>,
}

impl<T: Pod> TypedStreamWriter<T> {
    /// Sends a copy of `value` if there is room now (see [`StreamWriter::try_send`]).
    pub fn try_send(&mut self, value: &T) -> Result<(), StreamTrySendError> {
        self.inner.try_send(bytes_of(value))
    }

    /// Sends a copy of `value`, waiting as long as it takes for room.
    pub fn send(&mut self, value: &T) -> Result<(), StreamSendError> {
        self.inner.send(bytes_of(value))
    }

    /// Sends a copy of `value`, waiting at most `timeout` for room.
    pub fn send_timeout(&mut self, value: &T, timeout: Duration) -> Result<(), StreamSendTimeoutError> {
        self.inner.send_timeout(bytes_of(value), timeout)
    }

    /// Lends ring space for one `T` without waiting; build it in place, then
    /// [`TypedLoan::send`]. The space holds whatever the ring held before (some valid `T`):
    /// set every field. Dropping the loan sends nothing.
    pub fn try_loan(&mut self) -> Result<TypedLoan<'_, T>, StreamTrySendError> {
        self.inner.try_loan(std::mem::size_of::<T>()).map(TypedLoan::new)
    }

    /// [`try_loan`](Self::try_loan), waiting as long as it takes for room.
    pub fn loan(&mut self) -> Result<TypedLoan<'_, T>, StreamSendError> {
        self.inner.loan(std::mem::size_of::<T>()).map(TypedLoan::new)
    }

    /// [`try_loan`](Self::try_loan), waiting at most `timeout` for room.
    pub fn loan_timeout(&mut self, timeout: Duration) -> Result<TypedLoan<'_, T>, StreamSendTimeoutError> {
        self.inner.loan_timeout(std::mem::size_of::<T>(), timeout).map(TypedLoan::new)
    }

    /// The byte writer underneath.
    pub fn as_bytes(&mut self) -> &mut StreamWriter {
        &mut self.inner
    }
}

impl<T: Pod> Waitable for TypedStreamWriter<T> {
    fn wait_handle(&self) -> WaitHandle<'_> {
        self.inner.wait_handle()
    }

    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.inner.recheck_interval()
    }

    fn recheck(&self) -> bool {
        self.inner.recheck()
    }
}

/// Ring space lent by [`TypedStreamWriter::loan`] and its forms: a `T` to write in place
/// (`DerefMut<Target = T>`), sent by [`TypedLoan::send`].
#[must_use = "a loan is discarded unless sent"]
#[derive(Debug)]
pub struct TypedLoan<'a, T: Pod> {
    inner: Loan<'a>,
    _type: PhantomData<&'a mut T>,
}

impl<'a, T: Pod> TypedLoan<'a, T> {
    fn new(inner: Loan<'a>) -> TypedLoan<'a, T> {
        // Records start at 8-byte aligned positions and the writer was made only for a type
        // aligned to at most 8 (`Stream::check_type`).
        assert!(
            inner.len() == std::mem::size_of::<T>() && inner.as_ptr().align_offset(std::mem::align_of::<T>()) == 0,
            "stream loan not sized and aligned for the type"
        );
        TypedLoan { inner, _type: PhantomData }
    }

    /// Sends the record.
    pub fn send(self) {
        self.inner.send()
    }
}

impl<T: Pod> Deref for TypedLoan<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: exactly size_of::<T>() bytes, aligned for T (checked in `new`); any bit
        // pattern is a valid T (Pod).
        unsafe { &*(self.inner.as_ptr() as *const T) }
    }
}

impl<T: Pod> DerefMut for TypedLoan<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; the claimed space belongs to this writer until sent.
        unsafe { &mut *(self.inner.as_mut_ptr() as *mut T) }
    }
}

/// Reads `T` records from a stream: a [`StreamReader`] whose receives return a `T` (copied)
/// or a [`TypedRecord`] (a `&T` in the ring).
///
/// A record that is not exactly `size_of::<T>()` bytes (written by a byte writer, or a
/// hostile peer) is reported as `Corrupt` (with the values `len` and `size`) and consumed:
/// the next receive goes on with the record after it.
#[derive(Debug)]
pub struct TypedStreamReader<T: Pod> {
    inner: StreamReader,
    /// The copy receives' buffer: `size_of::<T>()` bytes, allocated once.
    buf: Vec<u8>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Pod> TypedStreamReader<T> {
    /// Receives the next record as a `T` copy, without waiting (see
    /// [`StreamReader::try_recv`]).
    pub fn try_recv(&mut self) -> Result<T, StreamTryRecvError> {
        self.inner.try_recv_into(&mut self.buf)?;
        read_from(&self.buf).ok_or_else(|| StreamTryRecvError::Corrupt(wrong_len::<T>(self.buf.len())))
    }

    /// Receives the next record as a `T` copy, waiting as long as it takes.
    pub fn recv(&mut self) -> Result<T, StreamRecvError> {
        self.inner.recv_into(&mut self.buf)?;
        read_from(&self.buf).ok_or_else(|| StreamRecvError::Corrupt(wrong_len::<T>(self.buf.len())))
    }

    /// Receives the next record as a `T` copy, waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<T, StreamRecvTimeoutError> {
        self.inner.recv_into_timeout(&mut self.buf, timeout)?;
        read_from(&self.buf).ok_or_else(|| StreamRecvTimeoutError::Corrupt(wrong_len::<T>(self.buf.len())))
    }

    /// The next record in place, without waiting; [`TypedRecord::consume`] it when done.
    pub fn try_recv_ref(&mut self) -> Result<TypedRecord<'_, T>, StreamTryRecvError> {
        let r = self.inner.try_recv_ref()?;
        TypedRecord::new(r).map_err(|len| StreamTryRecvError::Corrupt(wrong_len::<T>(len)))
    }

    /// The next record in place, waiting as long as it takes.
    pub fn recv_ref(&mut self) -> Result<TypedRecord<'_, T>, StreamRecvError> {
        let r = self.inner.recv_ref()?;
        TypedRecord::new(r).map_err(|len| StreamRecvError::Corrupt(wrong_len::<T>(len)))
    }

    /// The next record in place, waiting at most `timeout`.
    pub fn recv_ref_timeout(&mut self, timeout: Duration) -> Result<TypedRecord<'_, T>, StreamRecvTimeoutError> {
        let r = self.inner.recv_ref_timeout(timeout)?;
        TypedRecord::new(r).map_err(|len| StreamRecvTimeoutError::Corrupt(wrong_len::<T>(len)))
    }

    /// The byte reader underneath.
    pub fn as_bytes(&mut self) -> &mut StreamReader {
        &mut self.inner
    }
}

impl<T: Pod> Waitable for TypedStreamReader<T> {
    fn wait_handle(&self) -> WaitHandle<'_> {
        self.inner.wait_handle()
    }

    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.inner.recheck_interval()
    }

    fn recheck(&self) -> bool {
        self.inner.recheck()
    }
}

/// A `T` read in place in the ring (`Deref<Target = T>`), from
/// [`TypedStreamReader::recv_ref`] and its forms. [`TypedRecord::consume`] hands its space
/// back to the writer; dropping it unconsumed leaves it to be read again.
#[must_use = "a record is read again unless consumed"]
#[derive(Debug)]
pub struct TypedRecord<'a, T: Pod> {
    inner: Record<'a>,
    _type: PhantomData<&'a T>,
}

impl<'a, T: Pod> TypedRecord<'a, T> {
    /// The record as a `T`, or the length of a record that is not one (consumed, so that the
    /// reader goes on with the next).
    fn new(inner: Record<'a>) -> Result<TypedRecord<'a, T>, usize> {
        if ref_from::<T>(&inner).is_some() {
            return Ok(TypedRecord { inner, _type: PhantomData });
        }
        let len = inner.len();
        inner.consume();
        Err(len)
    }

    /// Marks the record consumed: its space goes back to the writer.
    pub fn consume(self) {
        self.inner.consume()
    }

    /// The ring position of the record (bytes before it ever committed).
    pub fn position(&self) -> u64 {
        self.inner.position()
    }
}

impl<T: Pod> Deref for TypedRecord<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `new` checked that the record is exactly size_of::<T>() bytes and aligned
        // for T; any bit pattern is a valid T (Pod); the writer leaves the bytes alone until
        // the record is consumed, which takes `self`.
        unsafe { &*(self.inner.as_ptr() as *const T) }
    }
}
