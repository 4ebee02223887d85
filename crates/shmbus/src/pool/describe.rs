//! What a pool tells tools about itself (`shmbus ls`, `info`, `clean`).

use super::layout::PoolLayout;
use crate::error::OpenError;

/// The pool in the kind registry (`admin`).
#[cfg(not(loom))]
pub(crate) struct PoolKind;

#[cfg(not(loom))]
impl crate::describe::KindInfo for PoolKind {
    fn kind(&self) -> crate::kind::Kind {
        crate::kind::Kind::Pool
    }

    fn role_name(&self, role: u32) -> Option<&'static str> {
        match role {
            super::shared::ROLE_DISPATCHER => Some("dispatcher"),
            super::shared::ROLE_WORKER => Some("worker"),
            _ => None,
        }
    }

    fn param_keys(&self) -> &'static [&'static str] {
        &["max_workers", "max_job_size"]
    }

    /// Jobs dispatched and not taken, or lost with their worker and not yet reported.
    fn pending(
        &self,
        seg: crate::segment::Segment<crate::sys::ReadOnly>,
    ) -> Result<Option<crate::describe::Pending>, OpenError> {
        Ok(Some(crate::describe::Pending::Jobs(super::shared::undelivered_jobs(seg)?)))
    }

    /// The endpoints are counted after the status is read, in the same mapping: every
    /// endpoint the status shows alive is counted.
    fn describe(&self, domain: &crate::Domain, name: &str) -> Result<crate::describe::Description, OpenError> {
        let chan = crate::endpoint::channel::Channel::<PoolLayout, crate::sys::ReadOnly>::open_read_only(domain, name)?;
        let st = super::shared::status_of(&chan);
        let live = |role| crate::describe::live_in_role(chan.seg(), role);
        let dispatcher = st.dispatcher_pid.map(|pid| (pid, st.dispatcher_alive));
        let dispatcher_note = match dispatcher {
            Some((pid, true)) => format!("{pid} (alive)"),
            Some((pid, false)) => format!("{pid} (dead)"),
            None => "-".into(),
        };
        Ok(crate::describe::Description {
            max_message_len: Some(st.max_job_len as u64),
            senders: Some(live(super::shared::ROLE_DISPATCHER)),
            receivers: Some(live(super::shared::ROLE_WORKER)),
            status: vec![
                ("max_workers", st.max_workers.into()),
                ("max_job_size", st.max_job_len.into()),
                ("workers", st.workers.into()),
                ("workers_idle", st.idle.into()),
                ("workers_busy", st.busy.into()),
                ("dispatcher_pid", st.dispatcher_pid.into()),
                ("dispatcher_alive", dispatcher.map(|d| d.1).into()),
                ("jobs_dispatched", st.dispatched.into()),
                ("jobs_lost", st.lost.into()),
            ],
            detail: format!(
                "workers {}/{} ({} idle, {} busy), dispatcher {dispatcher_note}",
                st.workers, st.max_workers, st.idle, st.busy
            ),
            ..Default::default()
        })
    }
}
