//! What each channel kind reports to `ls` and `info`.
//!
//! This is the one place that dispatches on [`Kind`]: supporting a new kind in `ls` and
//! `info` is one match arm in [`summarize`] (and its roles in [`role_name`]).

use serde_json::{json, Map, Value};
use shmbus::admin::SegmentReport;
use shmbus::topic::Topic;
use shmbus::{Domain, Kind};

use crate::Result;

/// A channel's kind-specific numbers. Fields a kind does not have stay `None`.
#[derive(Debug, Default)]
pub struct Summary {
    /// Largest message in bytes.
    pub slot_size: Option<u64>,
    /// Messages kept (topic history, queue capacity, …).
    pub history: Option<u64>,
    /// Highest committed sequence number.
    pub last_seq: Option<u64>,
    /// Live writing endpoints.
    pub publishers: Option<usize>,
    /// Live reading endpoints.
    pub subscribers: Option<usize>,
    /// The header's layout parameters, by name.
    pub params: Map<String, Value>,
    /// Everything else the kind knows about its live state, by name.
    pub status: Map<String, Value>,
}

/// Reads the kind-specific state of the channel `name` that `report` describes.
pub fn summarize(domain: &Domain, name: &str, report: &SegmentReport) -> Result<Summary> {
    match report.header.kind {
        Kind::Topic => topic(domain, name, report),
        Kind::Queue => crate::queue::summarize(domain, name, report),
        Kind::Stream | Kind::Pool | Kind::Journal => Ok(generic(report)),
    }
}

/// The name of participant role number `role` in a channel of `kind`.
pub fn role_name(kind: Kind, role: u32) -> String {
    // Role numbers are the library's per-kind participant roles (not exported by it yet).
    match (kind, role) {
        (Kind::Topic, 1) => "publisher".into(),
        (Kind::Topic, 2) => "subscriber".into(),
        (Kind::Queue, 1) => "producer".into(),
        (Kind::Queue, 2) => "consumer".into(),
        (_, r) => format!("role {r}"),
    }
}

fn topic(domain: &Domain, name: &str, report: &SegmentReport) -> Result<Summary> {
    let p = report.header.params;
    let st = Topic::open(domain, name)?.status();
    let mut params = Map::new();
    params.insert("slot_size".into(), json!(p[0]));
    params.insert("history".into(), json!(p[1]));
    params.insert("spare_slots".into(), json!(p[2]));
    let mut status = Map::new();
    status.insert("slots".into(), json!(st.slots));
    status.insert("pinned_slots".into(), json!(st.pinned_slots));
    Ok(Summary {
        slot_size: Some(st.slot_size),
        history: Some(st.history),
        last_seq: Some(st.last_seq),
        publishers: Some(st.publishers),
        subscribers: Some(st.subscribers),
        params,
        status,
    })
}

/// A kind this tool does not know in detail yet: its raw layout parameters.
fn generic(report: &SegmentReport) -> Summary {
    let mut params = Map::new();
    for (i, v) in report.header.params.iter().enumerate().filter(|(_, v)| **v != 0) {
        params.insert(format!("param{i}"), json!(v));
    }
    Summary { params, ..Summary::default() }
}
