//! The queue handle: opening a queue, its status, and the endpoints it makes.

use std::path::Path;
use std::sync::Arc;

use super::consumer::Consumer;
#[cfg(doc)] // for intra-doc links
use super::error::QueueTryRecvError;
use super::layout::{QueueConfig, QueueLayout};
use super::producer::Producer;
use super::shared::{status_of, QueueStatus, Shared, ROLE_CONSUMER, ROLE_PRODUCER};
use crate::domain::Domain;
use crate::endpoint::channel::Channel;
use crate::error::OpenError;
use crate::pod::PayloadType;
use crate::sys::{process_is_alive, ProcessId, ReadOnly};

/// An open queue. Cheap to keep; make endpoints with [`Queue::producer`] and
/// [`Queue::consumer`] (each takes one of the segment's participant entries).
#[derive(Debug, Clone)]
pub struct Queue {
    shared: Arc<Shared>,
}

impl Queue {
    /// Opens the queue `name` in `domain`, creating it if it does not exist. A layout value
    /// set in `config` must match an existing queue (else [`OpenError::LayoutMismatch`]); one
    /// left unset accepts the existing queue's, or takes its default when the queue is
    /// created. Mode and group apply only when the queue is created.
    pub fn create_or_open(domain: &Domain, name: &str, config: &QueueConfig) -> Result<Queue, OpenError> {
        Ok(Queue { shared: Arc::new(Channel::create_or_open(domain, name, config)?) })
    }

    /// Opens the existing queue `name` in `domain`.
    pub fn open(domain: &Domain, name: &str) -> Result<Queue, OpenError> {
        Ok(Queue { shared: Arc::new(Channel::open(domain, name)?) })
    }

    /// A snapshot of the queue `name` in `domain` for tools: depth, layout, live producers and
    /// consumers, crash counters. Needs read permission only: it maps the queue read-only,
    /// registers nothing and writes nothing. Reads `/proc` once per participant entry in use.
    pub fn status(domain: &Domain, name: &str) -> Result<QueueStatus, OpenError> {
        // Loads only: `status_of` reads the control block, one cell stamp and the table.
        Ok(status_of(&Channel::<QueueLayout, ReadOnly>::open_read_only(domain, name)?))
    }

    /// Checks that this queue can carry `t` (see [`Channel::check_type`]).
    pub(super) fn check_type(&self, t: &PayloadType) -> Result<(), OpenError> {
        self.shared.check_type(t)
    }

    /// A new producer endpoint.
    pub fn producer(&self) -> Result<Producer, OpenError> {
        Ok(Producer { ep: self.shared.register(ROLE_PRODUCER)? })
    }

    /// A new consumer endpoint.
    pub fn consumer(&self) -> Result<Consumer, OpenError> {
        let ep = self.shared.register(ROLE_CONSUMER)?;
        Ok(Consumer { scratch: Vec::new(), held: None, ep })
    }

    /// The queue's schema, set by its creator (`None`: it has none; see [`Schema`](crate::Schema)).
    pub fn schema(&self) -> Option<&crate::Schema> {
        self.shared.schema().map(|s| &**s)
    }

    /// Maps every page of this queue into this process now, so that no send or receive of
    /// this process takes a page fault the first time it touches a page (see
    /// [`Topic::prefault`](crate::Topic::prefault)).
    pub fn prefault(&self) {
        self.shared.prefault();
    }

    /// Messages the queue holds.
    pub fn capacity(&self) -> u64 {
        self.shared.layout().capacity
    }

    /// Largest message, in bytes.
    pub fn max_message_len(&self) -> usize {
        self.shared.layout().max
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        self.shared.path()
    }

    /// Reclaims what dead participants held (their entries and claims) now, instead of when
    /// a blocked endpoint finds them. Returns how many entries were reclaimed.
    pub fn reclaim_dead(&self) -> usize {
        self.shared.ring().reclaim_dead(ProcessId::current(), process_is_alive)
    }
}

/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<shmbus::queue::Producer>();
/// ```
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<shmbus::queue::Consumer>();
/// ```
#[allow(dead_code)]
fn endpoints_are_not_sync() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_send_not_sync() {
        fn send<T: Send>() {}
        send::<Producer>();
        send::<Consumer>();
        send::<Queue>();
        // `Cell` in the endpoint makes it !Sync; checked by the compile-fail doc test below.
    }
}
