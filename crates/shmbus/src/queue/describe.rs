//! What a queue tells tools about itself (`shmbus ls`, `info`, `clean`).

use super::shared::{undelivered, ROLE_CONSUMER, ROLE_PRODUCER};
use crate::kind::Kind;

/// The queue in the kind registry (`admin`).
pub(crate) struct QueueKind;

impl crate::describe::KindInfo for QueueKind {
    fn kind(&self) -> Kind {
        Kind::Queue
    }

    fn role_name(&self, role: u32) -> Option<&'static str> {
        match role {
            ROLE_PRODUCER => Some("producer"),
            ROLE_CONSUMER => Some("consumer"),
            _ => None,
        }
    }

    fn param_keys(&self) -> &'static [&'static str] {
        &["capacity", "max_element_size", "stride"]
    }

    /// Messages sent and not received.
    fn pending(
        &self,
        seg: crate::segment::Segment<crate::sys::ReadOnly>,
    ) -> Result<Option<crate::describe::Pending>, crate::OpenError> {
        Ok(Some(crate::describe::Pending::Messages(undelivered(seg)?)))
    }

    /// `history` is the capacity and `last_seq` the messages sent so far; the status has the
    /// depth and the crash counters.
    fn describe(&self, domain: &crate::Domain, name: &str) -> Result<crate::describe::Description, crate::OpenError> {
        let st = super::Queue::status(domain, name)?;
        Ok(crate::describe::Description {
            max_message_len: Some(st.max_message_len as u64),
            history: Some(st.capacity),
            last_seq: Some(st.sent),
            senders: Some(st.producers),
            receivers: Some(st.consumers),
            status: vec![
                ("depth", st.depth.into()),
                ("capacity", st.capacity.into()),
                ("max_element_size", st.max_message_len.into()),
                ("producers", st.producers.into()),
                ("consumers", st.consumers.into()),
                ("sent", st.sent.into()),
                ("received", st.received.into()),
                ("abandoned", st.abandoned.into()),
                ("lost", st.lost.into()),
            ],
            detail: format!(
                "depth {}/{}, {} producer(s), {} consumer(s)",
                st.depth, st.capacity, st.producers, st.consumers
            ),
            ..Default::default()
        })
    }
}
