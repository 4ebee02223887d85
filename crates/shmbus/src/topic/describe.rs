//! What a topic tells tools about itself (`shmbus ls`, `info`, `clean`).

use super::shared::history_len;
use crate::kind::Kind;

/// The topic in the kind registry (`admin`).
pub(crate) struct TopicKind;

impl crate::describe::KindInfo for TopicKind {
    fn kind(&self) -> Kind {
        Kind::Topic
    }

    fn role_name(&self, role: u32) -> Option<&'static str> {
        match role {
            super::protocol::ROLE_PUBLISHER => Some("publisher"),
            super::protocol::ROLE_SUBSCRIBER => Some("subscriber"),
            _ => None,
        }
    }

    fn param_keys(&self) -> &'static [&'static str] {
        &["slot_size", "history", "spare_slots", "policy", "reliable_timeout_ms"]
    }

    /// None, by decision: a topic's history is a window no reader is owed (see `admin`).
    fn pending(
        &self,
        _seg: crate::segment::Segment<crate::sys::ReadOnly>,
    ) -> Result<Option<crate::describe::Pending>, crate::OpenError> {
        Ok(None)
    }

    /// No pending data; the messages its history holds now.
    fn contents(
        &self,
        seg: crate::segment::Segment<crate::sys::ReadOnly>,
    ) -> Result<(Option<crate::describe::Pending>, Option<u64>), crate::OpenError> {
        Ok((None, Some(history_len(seg)?)))
    }

    fn describe(&self, domain: &crate::Domain, name: &str) -> Result<crate::describe::Description, crate::OpenError> {
        let st = super::Topic::status(domain, name)?;
        Ok(crate::describe::Description {
            max_message_len: Some(st.max_message_len),
            history: Some(st.history),
            last_seq: Some(st.last_seq),
            senders: Some(st.publishers),
            receivers: Some(st.subscribers),
            status: vec![
                ("slots", st.slots.into()),
                ("pinned_slots", st.pinned_slots.into()),
                ("reliable_subscribers", st.reliable_subscribers.into()),
            ],
            detail: match st.policy {
                super::DeliveryPolicy::Overwrite => String::new(),
                p => format!("policy {}, {} reliable subscriber(s)", p.name(), st.reliable_subscribers),
            },
            ..Default::default()
        })
    }
}
