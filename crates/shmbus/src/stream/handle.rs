//! The [`Stream`] handle: opening a stream (its segment with the ring mapped twice) and
//! the endpoints it makes.

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;

use super::layout::{StreamConfig, StreamLayout};
use super::reader::StreamReader;
use super::shared::{status_of, Mapped, Shared, StreamStatus, READER_SLOT, ROLE_READER, ROLE_WRITER, WRITER_SLOT};
use super::writer::StreamWriter;
use crate::domain::Domain;
use crate::endpoint::channel::Channel;
use crate::error::OpenError;
use crate::pod::PayloadType;
use crate::segment::KIND_OFFSET;
use crate::sys::{Mapping, ReadOnly};

/// A stream: a single-writer single-reader ring of variable-size records. Cheap to clone
/// (the mapping is shared); the endpoints come from [`Stream::writer`] and
/// [`Stream::reader`], one of each at a time across all processes.
#[derive(Debug, Clone)]
pub struct Stream {
    inner: Arc<Mapped>,
}

impl Stream {
    /// Opens stream `name`, creating it with `config` if it does not exist. A capacity set in
    /// `config` must match an existing stream's ([`OpenError::LayoutMismatch`] otherwise); an
    /// unset one accepts it, and creates [`StreamConfig::DEFAULT_CAPACITY`] bytes. The mode
    /// and group apply only when this call creates the stream.
    pub fn create_or_open(domain: &Domain, name: &str, config: &StreamConfig) -> Result<Stream, OpenError> {
        Stream::map(Channel::create_or_open(domain, name, config)?)
    }

    /// Opens the existing stream `name`.
    pub fn open(domain: &Domain, name: &str) -> Result<Stream, OpenError> {
        Stream::map(Channel::open(domain, name)?)
    }

    /// Reads the status of stream `name` without attaching to it: the file is opened and
    /// mapped read-only, so read permission suffices, and nothing is written.
    pub fn status(domain: &Domain, name: &str) -> Result<StreamStatus, OpenError> {
        Ok(status_of(&Channel::<StreamLayout, ReadOnly>::open_read_only(domain, name)?))
    }

    fn map(chan: Channel<StreamLayout>) -> Result<Stream, OpenError> {
        let layout = chan.layout();
        let cap = usize::try_from(layout.capacity)
            .map_err(|_| OpenError::corrupt(chan.path(), "capacity exceeds the address space"))?;
        let ring = Mapping::map_ring(chan.seg().file().as_fd(), KIND_OFFSET as u64 + layout.data_offset, cap)
            .map_err(|e| OpenError::io(chan.path(), e))?;
        Ok(Stream { inner: Arc::new(Mapped { chan, ring }) })
    }

    /// Attaches as the stream's writer, continuing after the last record a previous writer
    /// committed. [`OpenError::Busy`] if a live process (this one included) holds the role.
    pub fn writer(&self) -> Result<StreamWriter, OpenError> {
        StreamWriter::attach(Shared::claim(self.inner.clone(), WRITER_SLOT, ROLE_WRITER)?)
    }

    /// Attaches as the stream's reader, resuming after the last record a previous reader
    /// consumed. [`OpenError::Busy`] if a live process (this one included) holds the role.
    pub fn reader(&self) -> Result<StreamReader, OpenError> {
        StreamReader::attach(Shared::claim(self.inner.clone(), READER_SLOT, ROLE_READER)?)
    }

    /// The stream's schema, set by its creator (`None`: it has none; see [`Schema`](crate::Schema)).
    pub fn schema(&self) -> Option<&crate::Schema> {
        self.inner.chan.schema().map(|s| &**s)
    }

    /// Maps every page of this stream, its ring's two mappings included, into this process
    /// now, so that no write or read of this process takes a page fault the first time it
    /// touches a page (see [`Topic::prefault`](crate::Topic::prefault)).
    pub fn prefault(&self) {
        // The records are read and written through the ring mapping only: of the segment's
        // own mapping, the pages before the data.
        let chan = &self.inner.chan;
        chan.seg().prefault(KIND_OFFSET + chan.layout().data_offset as usize);
        self.inner.ring.populate_write(0, self.inner.ring.len());
    }

    /// Ring size in bytes.
    pub fn capacity(&self) -> usize {
        self.inner.chan.layout().capacity as usize
    }

    /// The largest record payload this stream accepts (`capacity - 8`, at most `u32::MAX`).
    pub fn max_record_len(&self) -> usize {
        self.inner.chan.layout().max_record_len() as usize
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        self.inner.chan.path()
    }

    /// Checks that this stream can carry `t` (see [`Channel::check_type`]).
    pub(super) fn check_type(&self, t: &PayloadType) -> Result<(), OpenError> {
        self.inner.chan.check_type(t)
    }
}

/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<shmbus::stream::StreamWriter>();
/// ```
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<shmbus::stream::StreamReader>();
/// ```
#[allow(dead_code)]
fn endpoints_are_not_sync() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_send_and_the_handle_is_send_and_sync() {
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<StreamWriter>();
        send::<StreamReader>();
        send::<Stream>();
        sync::<Stream>();
        // The endpoints are !Sync: checked by the compile-fail doc tests above.
    }
}
