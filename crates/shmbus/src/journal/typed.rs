//! Typed journal endpoints: a [`Pod`] type `T` instead of bytes, as thin wrappers over
//! [`Appender`] and [`Tailer`] (the wrappers are [`crate::typed`]'s).
//!
//! Entries are placed at 8-byte aligned addresses in the cycle files, so a typed appender's
//! loan is a `&mut T` in place for a type aligned to at most 8 (larger alignments are
//! refused at open). Typed tailers return copies: an entry is read from the mapping, or from
//! the tailer's buffer when it was stored compressed or encrypted, where no alignment is
//! promised, so there is no `&T` in place.

use super::appender::Appender;
use super::channel::{Journal, JournalConfig};
use super::format::{ENTRY_HEADER, META_FILE, UNIT};
use super::tailer::Tailer;
use crate::error::OpenError;
use crate::pod::{check_creatable, check_payload, PayloadType, Pod};
use crate::typed::{Loan, Receiver, Sender};

/// Where an entry's payload starts: an 8-byte unit boundary past the 32-byte entry header.
const ENTRY_ALIGN: usize = if ENTRY_HEADER % UNIT == 0 { UNIT } else { 1 };

impl JournalConfig {
    /// A config for a journal of `T` entries: the max entry length is `size_of::<T>()`
    /// unless [`max_entry_len`](Self::max_entry_len) sets it, and a created journal records
    /// `T`'s name, size and alignment in its metadata. Unlike the rest of a config, the type
    /// is checked against an existing journal: [`Journal::create_or_open`] with it fails with
    /// [`OpenError::TypeMismatch`] if the journal records another type, or is an untyped
    /// journal whose entries cannot hold a `T`. Entries are placed at 8-byte aligned
    /// addresses: a type aligned to more (or zero-sized) is refused with
    /// [`OpenError::InvalidConfig`].
    pub fn for_type<T: Pod>() -> JournalConfig {
        let mut c = JournalConfig::default().max_entry_len(std::mem::size_of::<T>() as u64);
        c.payload = Some(PayloadType::of::<T>());
        if let Some(s) = crate::schema::pod_schema_of::<T>() {
            c.schema = Some(std::sync::Arc::new(s));
            c.schema_implied = true;
        }
        c
    }

    /// For a typed config: whether a journal made from it can carry its type.
    pub(super) fn check_creatable(&self) -> Result<(), OpenError> {
        let max = usize::try_from(self.max_entry).unwrap_or(usize::MAX);
        self.payload.as_ref().map_or(Ok(()), |t| check_creatable(t, max, ENTRY_ALIGN))
    }
}

impl Journal {
    /// The journal's payload type check for `t`: see [`Journal::appender_of`].
    fn check_type(&self, t: &PayloadType) -> Result<(), OpenError> {
        let h = self.inner.hdr();
        let max = usize::try_from(h.max_entry).unwrap_or(usize::MAX);
        check_payload(&self.dir().join(META_FILE), h.payload.as_ref(), t, max, ENTRY_ALIGN)
    }

    /// This journal, if a typed `config` may use it.
    pub(super) fn checked_for(self, config: &JournalConfig) -> Result<Journal, OpenError> {
        if let Some(t) = &config.payload {
            self.check_type(t)?;
        }
        if !(config.schema_implied && self.schema().is_none()) {
            let meta = self.dir().join(META_FILE);
            crate::endpoint::channel::check_schema(&meta, self.schema(), config.schema.as_deref())?;
        }
        Ok(self)
    }

    /// The journal's schema, set by its creator (`None`: it has none; see
    /// [`Schema`](crate::Schema)).
    pub fn schema(&self) -> Option<&crate::Schema> {
        self.inner.meta.schema.as_deref()
    }

    /// The payload type the journal's metadata records (`None`: an untyped journal).
    pub fn payload_type(&self) -> Option<crate::pod::StoredPayloadType> {
        self.inner.hdr().payload
    }

    /// A new appender of `T` entries. Fails with [`OpenError::TypeMismatch`] if the journal
    /// records another payload type, or is untyped and its max entry length is smaller than
    /// a `T` (or `T` is aligned to more than 8 bytes); otherwise as [`Journal::appender`].
    pub fn appender_of<T: Pod>(&self) -> Result<TypedAppender<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Sender::new(self.appender()?))
    }

    /// A tailer of `T` entries from the oldest retained entry. Fails as
    /// [`Journal::appender_of`] does; otherwise as [`Journal::tailer`].
    pub fn tailer_of<T: Pod>(&self) -> Result<TypedTailer<T>, OpenError> {
        self.typed_tailer(|j| j.tailer())
    }

    /// A tailer of `T` entries from global index `index` (see [`Journal::tailer_at`]).
    pub fn tailer_at_of<T: Pod>(&self, index: u64) -> Result<TypedTailer<T>, OpenError> {
        self.typed_tailer(|j| j.tailer_at(index))
    }

    /// A tailer of the `T` entries appended from now on (see [`Journal::tailer_at_end`]).
    pub fn tailer_at_end_of<T: Pod>(&self) -> Result<TypedTailer<T>, OpenError> {
        self.typed_tailer(|j| j.tailer_at_end())
    }

    /// The named durable reader `name`, reading `T` entries (see [`Journal::reader`]; its
    /// position is acknowledged with [`ack`](Receiver::ack)).
    pub fn reader_of<T: Pod>(&self, name: &str) -> Result<TypedTailer<T>, OpenError> {
        self.typed_tailer(|j| j.reader(name))
    }

    fn typed_tailer<T: Pod>(
        &self,
        open: impl FnOnce(&Journal) -> Result<Tailer, OpenError>,
    ) -> Result<TypedTailer<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Receiver::new(open(self)?))
    }
}

/// Appends `T` entries: an [`Appender`] that sends the bytes of a `T` (`send`, returning
/// the entry's global index) or lends room for one to build in place (`loan`, a
/// [`TypedLoan`]).
pub type TypedAppender<T> = Sender<Appender, T>;

/// Room for one `T` entry lent by [`TypedAppender`]'s `loan` (`DerefMut<Target = T>`),
/// published by its `send` (returning the entry's global index). Dropped unsent, the entry
/// is abandoned, as a byte [`Loan`](super::Loan)'s.
pub type TypedLoan<'a, T> = Loan<super::Loan<'a>, T>;

/// Reads `T` entries: a [`Tailer`] whose receives (`try_recv`, `recv`, `recv_timeout`)
/// return a `T` copy.
///
/// An entry that is not exactly `size_of::<T>()` bytes (appended by a byte appender, or
/// damaged) is reported as `Corrupt` (with the values `index`, `len` and `size`) and
/// skipped: the next receive goes on with the entry after it.
pub type TypedTailer<T> = Receiver<Tailer, T>;

impl<T: Pod> Receiver<Tailer, T> {
    /// For a named reader: persists its position (see [`Tailer::ack`]).
    pub fn ack(&self) {
        self.bytes().ack()
    }
}
