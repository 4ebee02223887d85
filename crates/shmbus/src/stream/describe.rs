//! What a stream tells tools about itself (`shmbus ls`, `info`, `clean`).

use super::layout::StreamLayout;
use crate::kind::Kind;

/// The stream in the kind registry (`admin`).
pub(crate) struct StreamKind;

/// `pid (alive)`, `pid (dead)` or `-`.
fn endpoint_note(e: Option<super::EndpointStatus>) -> String {
    match e {
        Some(e) if e.alive => format!("{} (alive)", e.pid),
        Some(e) => format!("{} (dead)", e.pid),
        None => "-".into(),
    }
}

impl crate::describe::KindInfo for StreamKind {
    fn kind(&self) -> Kind {
        Kind::Stream
    }

    fn role_name(&self, role: u32) -> Option<&'static str> {
        match role {
            super::shared::ROLE_WRITER => Some("writer"),
            super::shared::ROLE_READER => Some("reader"),
            _ => None,
        }
    }

    fn param_keys(&self) -> &'static [&'static str] {
        &["capacity", "data_offset"]
    }

    /// Bytes committed and not consumed (record headers and padding included).
    fn pending(
        &self,
        seg: crate::segment::Segment<crate::sys::ReadOnly>,
    ) -> Result<Option<crate::describe::Pending>, crate::OpenError> {
        Ok(Some(crate::describe::Pending::Bytes(super::shared::unread_bytes(seg)?)))
    }

    /// The endpoints are counted after the status is read, in the same mapping: every
    /// endpoint the status shows alive is counted.
    fn describe(&self, domain: &crate::Domain, name: &str) -> Result<crate::describe::Description, crate::OpenError> {
        let chan =
            crate::endpoint::channel::Channel::<StreamLayout, crate::sys::ReadOnly>::open_read_only(domain, name)?;
        let (st, layout) = (super::shared::status_of(&chan), chan.layout());
        let live = |role| crate::describe::live_in_role(chan.seg(), role);
        let (writer, reader) = (st.writer, st.reader);
        Ok(crate::describe::Description {
            max_message_len: Some(layout.max_record_len()),
            senders: Some(live(super::shared::ROLE_WRITER)),
            receivers: Some(live(super::shared::ROLE_READER)),
            status: vec![
                ("capacity", st.capacity.into()),
                ("bytes_used", st.used.into()),
                ("writer_pid", writer.map(|w| w.pid).into()),
                ("writer_alive", writer.map(|w| w.alive).into()),
                ("reader_pid", reader.map(|r| r.pid).into()),
                ("reader_alive", reader.map(|r| r.alive).into()),
                ("head", st.head.into()),
                ("tail", st.tail.into()),
            ],
            detail: format!(
                "used {}/{} B, writer {}, reader {}",
                st.used,
                st.capacity,
                endpoint_note(writer),
                endpoint_note(reader)
            ),
            ..Default::default()
        })
    }
}
