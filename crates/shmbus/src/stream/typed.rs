//! Typed stream endpoints: a [`Pod`] type `T` instead of bytes, as thin wrappers over
//! [`StreamWriter`] and [`StreamReader`].

use super::handle::Stream;
use super::layout::StreamConfig;
use super::reader::{Record, StreamReader};
use super::writer::StreamWriter;
use crate::error::OpenError;
use crate::pod::{PayloadType, Pod};
use crate::typed::{Loan, Receiver, Ref, Sender};

impl StreamConfig {
    /// A config for a stream of `T` records: a created stream records `T`'s name, size and
    /// alignment in its header (the capacity is set as for any stream). Opening an existing
    /// stream with it fails with [`OpenError::TypeMismatch`] if the stream records another
    /// type, or is an untyped stream whose records cannot hold a `T`. Records are placed at
    /// 8-byte aligned addresses: a type aligned to more is refused with
    /// [`OpenError::InvalidConfig`].
    pub fn for_type<T: Pod>() -> StreamConfig {
        StreamConfig::default().payload_type::<T>()
    }
}

impl Stream {
    /// Attaches as the stream's writer of `T` records. Fails with
    /// [`OpenError::TypeMismatch`] if the stream records another payload type, or is untyped
    /// and cannot hold a `T` (too large, or aligned to more than 8 bytes); otherwise as
    /// [`Stream::writer`].
    pub fn writer_of<T: Pod>(&self) -> Result<TypedStreamWriter<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Sender::new(self.writer()?))
    }

    /// Attaches as the stream's reader of `T` records. Fails as [`Stream::writer_of`] does;
    /// otherwise as [`Stream::reader`].
    pub fn reader_of<T: Pod>(&self) -> Result<TypedStreamReader<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Receiver::new(self.reader()?))
    }
}

/// Writes `T` records to a stream: a [`StreamWriter`] that sends the bytes of a `T`
/// (`try_send`, `send`, `send_timeout`), or lends ring space to build one in place
/// (`try_loan`, `loan`, `loan_timeout`, a [`TypedLoan`]).
pub type TypedStreamWriter<T> = Sender<StreamWriter, T>;

/// Ring space lent by [`TypedStreamWriter`]'s `loan` and its forms: a `T` to write in place
/// (`DerefMut<Target = T>`), sent by its `send`.
pub type TypedLoan<'a, T> = Loan<crate::stream::Loan<'a>, T>;

/// Reads `T` records from a stream: a [`StreamReader`] whose receives return a `T` (copied)
/// or a [`TypedRecord`] (a `&T` in the ring).
///
/// A record that is not exactly `size_of::<T>()` bytes (written by a byte writer, or a
/// hostile peer) is reported as `Corrupt` (with the values `len` and `size`) and consumed:
/// the next receive goes on with the record after it.
pub type TypedStreamReader<T> = Receiver<StreamReader, T>;

/// A `T` read in place in the ring (`Deref<Target = T>`), from [`TypedStreamReader`]'s
/// `recv_ref` and its forms. Its `consume` hands its space back to the writer; dropping it
/// unconsumed leaves it to be read again.
pub type TypedRecord<'a, T> = Ref<Record<'a>, T>;

impl<T: Pod> Ref<Record<'_>, T> {
    /// Marks the record consumed: its space goes back to the writer.
    pub fn consume(self) {
        self.into_item().consume()
    }

    /// The ring position of the record (bytes before it ever committed).
    pub fn position(&self) -> u64 {
        self.item().position()
    }
}
