//! The topic kind for `pub` and `sub`.

use std::time::Duration;

use shmbus::topic::{Publisher, RecvError, Subscriber, Topic, TopicConfig};
use shmbus::{Domain, OpenError};

use crate::pubsub::{PubArgs, Recv, Sink, Source, SubArgs};
use crate::{CliError, Result};

/// Slot size of a topic `pub` creates when none is given.
pub const DEFAULT_SLOT_SIZE: usize = 4096;
/// History of a topic `pub` creates when none is given.
pub const DEFAULT_HISTORY: usize = 16;

/// Opens the topic, creating it if missing. Sizes not given are taken from an existing
/// topic (or the defaults); sizes given must match an existing topic.
pub fn publisher(domain: &Domain, args: &PubArgs) -> Result<Publisher> {
    let config = match Topic::open(domain, &args.name) {
        Ok(t) => {
            let st = t.status();
            TopicConfig::new(
                args.slot_size.unwrap_or(st.slot_size as usize),
                args.history.unwrap_or(st.history as usize),
            )
            .spare_slots(st.slots.saturating_sub(st.history) as usize)
        }
        Err(OpenError::NotFound { .. }) => {
            TopicConfig::new(args.slot_size.unwrap_or(DEFAULT_SLOT_SIZE), args.history.unwrap_or(DEFAULT_HISTORY))
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Topic::create_or_open(domain, &args.name, &config)?.publisher()?)
}

impl Sink for Publisher {
    fn send(&mut self, data: &[u8]) -> Result<()> {
        self.publish(data).map(drop).map_err(|e| CliError::msg(format!("publish failed: {e}")))
    }

    fn max_len(&self) -> usize {
        self.slot_size()
    }
}

/// Subscribes to the topic at the position `--from` / `--latest` ask for.
pub fn subscriber(domain: &Domain, args: &SubArgs) -> Result<Subscriber> {
    let sub = Topic::open(domain, &args.name)?.subscriber()?;
    if let Some(seq) = args.from {
        sub.seek(seq);
    } else if args.latest {
        sub.seek_latest();
    }
    Ok(sub)
}

impl Source for Subscriber {
    fn recv(&mut self, buf: &mut Vec<u8>, timeout: Option<Duration>) -> Result<Recv> {
        match self.recv_into_timeout(buf, timeout) {
            Ok(m) => Ok(Recv::Msg { seq: m.seq, ts_ns: m.ts_ns }),
            Err(RecvError::Lagged { missed }) => Ok(Recv::Gap(missed)),
            Err(RecvError::Timeout) => Ok(Recv::Timeout),
            Err(e) => Err(CliError::msg(format!("receive failed: {e}"))),
        }
    }
}
