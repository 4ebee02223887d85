//! The topic kind for `pub` and `sub`.

use std::time::Duration;

use shmbus::topic::{Publisher, Subscriber, Topic, TopicConfig, TopicRecvTimeoutError};
use shmbus::Domain;

use crate::pubsub::{From, PubArgs, Recv, Sink, Source, SubArgs};
use crate::{CliError, Result};

/// Opens the topic, creating it if missing. Sizes not given accept an existing topic's (or
/// take the library's defaults); sizes given must match an existing topic, and so must a
/// schema.
pub fn publisher(domain: &Domain, args: &PubArgs, schema: Option<shmbus::Schema>) -> Result<TopicSink> {
    let mut config = TopicConfig::default();
    if let Some(len) = args.slot_size {
        config = config.max_message_len(len);
    }
    if let Some(history) = args.history {
        config = config.history(history);
    }
    if let Some(s) = schema {
        config = config.schema(s);
    }
    let publisher = Topic::create_or_open(domain, &args.name, &config)?.publisher()?;
    Ok(TopicSink { publisher, timeout: args.timeout_ms.map(Duration::from_millis) })
}

/// A topic publisher with `pub --timeout-ms` (which only a `block` topic waits for).
pub struct TopicSink {
    publisher: Publisher,
    timeout: Option<Duration>,
}

impl Sink for TopicSink {
    fn send(&mut self, data: &[u8]) -> Result<()> {
        match self.timeout {
            None => self.publisher.send(data).map(drop).map_err(|e| CliError::during("publish failed", e)),
            Some(t) => {
                self.publisher.send_timeout(data, t).map(drop).map_err(|e| CliError::during("publish failed", e))
            }
        }
    }

    fn max_len(&self) -> usize {
        self.publisher.max_message_len()
    }
}

/// Subscribes to the topic at the position `--from` / `--latest` ask for.
pub fn subscriber(domain: &Domain, args: &SubArgs) -> Result<Subscriber> {
    let topic = Topic::open(domain, &args.name)?;
    let sub = if args.reliable { topic.reliable_subscriber()? } else { topic.subscriber()? };
    match args.from {
        Some(From::Seq(seq)) => sub.seek(seq),
        Some(From::Oldest) => sub.seek_oldest(),
        Some(From::Latest) => sub.seek_latest(),
        Some(From::Back(n)) => sub.seek(topic.last_seq().saturating_add(1).saturating_sub(n)),
        None if args.latest => sub.seek_latest(),
        None => {}
    }
    Ok(sub)
}

impl Source for Subscriber {
    fn recv(&mut self, buf: &mut Vec<u8>, timeout: Option<Duration>) -> Result<Recv> {
        let r = match timeout {
            None => self.recv_into(buf).map_err(TopicRecvTimeoutError::from),
            Some(t) => self.recv_into_timeout(buf, t),
        };
        match r {
            Ok(m) => Ok(Recv::Msg { seq: m.seq(), ts_ns: m.ts_ns() }),
            Err(TopicRecvTimeoutError::Lagged { missed }) => Ok(Recv::Gap(missed)),
            Err(TopicRecvTimeoutError::Timeout) => Ok(Recv::Timeout),
            Err(TopicRecvTimeoutError::Evicted) => Ok(Recv::Evicted),
            Err(e) => Err(CliError::during("receive failed", e)),
        }
    }
}
