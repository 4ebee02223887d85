//! Topics both ways: one forwarding thread per local topic (local → Zenoh), one Zenoh
//! subscriber for the prefix (Zenoh → local), and the domain scan that finds new topics.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use shmbus::{DeliveryPolicy, Kind, Publisher, Topic, TopicConfig, TopicRecvTimeoutError, TopicSendError};
use zenoh::qos::CongestionControl;
use zenoh::sample::{Locality, Sample};
use zenoh::Wait;

use crate::stats::{add, bump};
use crate::wire::{self, Attachment, TopicMeta, WireError};
use crate::{spawn, zerr, BridgeError, Shared};

/// How long a forwarding thread's receive waits before it looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// The most own sequence numbers remembered (the forwarding subscriber forgets them as it
/// passes them; this bounds the list if it cannot keep up).
const OWN_MAX: usize = 1 << 16;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One bridged local topic.
struct Link {
    name: String,
    topic: Topic,
    /// The remote-to-local publisher, opened at the first remote message.
    publisher: Mutex<Option<Publisher>>,
    /// Sequence numbers this bridge published, ascending, not yet seen by its forwarding
    /// subscriber: those are not sent back.
    own: Mutex<VecDeque<u64>>,
    /// Cleared when the topic's file is gone from the domain: its thread ends.
    live: std::sync::atomic::AtomicBool,
}

impl Link {
    /// Whether `seq` is a message this bridge published (and forgets it, and every older one).
    fn is_own(&self, seq: u64) -> bool {
        let mut own = lock(&self.own);
        while own.front().is_some_and(|&s| s < seq) {
            own.pop_front();
        }
        if own.front() == Some(&seq) {
            own.pop_front();
            return true;
        }
        false
    }
}

/// The links by topic name, and what the scan decided not to bridge.
#[derive(Default)]
struct Registry {
    links: HashMap<String, Arc<Link>>,
    /// Names in the domain that are not topics (or could not be opened): not retried until
    /// they leave the domain.
    passed: HashSet<String>,
}

struct Topics {
    shared: Arc<Shared>,
    registry: Mutex<Registry>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

pub(crate) fn start(
    shared: &Arc<Shared>,
    threads: &mut Vec<JoinHandle<()>>,
    zenoh: &mut Vec<Box<dyn std::any::Any + Send>>,
) -> Result<(), BridgeError> {
    if shared.options.topics.is_empty() {
        return Ok(());
    }
    let topics = Arc::new(Topics { shared: shared.clone(), registry: Mutex::default(), threads: Mutex::default() });
    if shared.options.direction.incoming() {
        let t = topics.clone();
        let sub = shared
            .session
            .declare_subscriber(format!("{}/*", shared.prefix))
            .allowed_origin(Locality::Remote)
            .callback(move |sample| t.incoming(&sample))
            .wait()
            .map_err(zerr)?;
        zenoh.push(Box::new(sub));
    }
    let t = topics.clone();
    threads.push(spawn("bridge-scan".into(), move || t.scan_loop()));
    Ok(())
}

impl Topics {
    fn scan_loop(self: Arc<Self>) {
        let sh = &self.shared;
        while !sh.stopping() {
            self.scan();
            std::thread::sleep(sh.options.scan_interval);
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
    }

    /// Opens the allowed topics new to the domain, and lets go of those removed from it.
    fn scan(self: &Arc<Self>) {
        let sh = &self.shared;
        let names = match sh.options.domain.channel_names() {
            Ok(n) => n,
            Err(e) => {
                sh.log.warn("scan".into(), || format!("cannot list domain {}: {e}", sh.options.domain.name()));
                return;
            }
        };
        let present: HashSet<&str> = names.iter().map(String::as_str).collect();
        {
            let mut reg = lock(&self.registry);
            reg.passed.retain(|n| present.contains(n.as_str()));
            reg.links.retain(|n, link| {
                let keep = present.contains(n.as_str());
                if !keep {
                    link.live.store(false, std::sync::atomic::Ordering::Relaxed);
                }
                keep
            });
        }
        for name in names {
            if !sh.options.topics.allows(&name) {
                continue;
            }
            {
                let reg = lock(&self.registry);
                if reg.links.contains_key(&name) || reg.passed.contains(&name) {
                    continue;
                }
            }
            match shmbus::admin::inspect_channel(&sh.options.domain, &name) {
                Ok(r) if r.header.kind == Kind::Topic => {
                    let _ = self.link(&name, None);
                }
                Ok(_) => {
                    lock(&self.registry).passed.insert(name);
                }
                // Maybe a channel still being created: tried again at every scan.
                Err(e) => sh.log.warn(format!("open {name}"), || format!("topic {name}: {e}; not bridged for now")),
            }
        }
    }

    /// The link of topic `name`, opened (or, for a remote message, created with the
    /// sender's parameters) if new.
    fn link(self: &Arc<Self>, name: &str, remote: Option<&TopicMeta>) -> Result<Arc<Link>, ()> {
        let sh = &self.shared;
        let mut reg = lock(&self.registry);
        if let Some(l) = reg.links.get(name) {
            return Ok(l.clone());
        }
        let opened = match remote {
            None => Topic::open(&sh.options.domain, name),
            Some(m) => {
                let bytes = u64::from(m.max_message_len).saturating_mul(u64::from(m.history) + 1);
                if bytes > sh.options.max_remote_topic_bytes {
                    let limit = sh.options.max_remote_topic_bytes;
                    sh.log.warn(format!("huge {name}"), || {
                        format!(
                            "topic {name}: a remote sender asks for {} x {} B slots, over the {limit} B limit (--max-remote-topic); not created",
                            m.history, m.max_message_len
                        )
                    });
                    return Err(());
                }
                let policy = DeliveryPolicy::from_u64(u64::from(m.policy)).unwrap_or(DeliveryPolicy::Overwrite);
                let config = TopicConfig::default()
                    .max_message_len(m.max_message_len as usize)
                    .history(m.history as usize)
                    .policy(policy);
                // An existing topic keeps its own parameters: open it as it is.
                match Topic::open(&sh.options.domain, name) {
                    Err(shmbus::OpenError::NotFound { .. }) => Topic::create_or_open(&sh.options.domain, name, &config),
                    other => other,
                }
            }
        };
        let topic = match opened {
            Ok(t) => t,
            Err(e) => {
                sh.log.warn(format!("open {name}"), || format!("topic {name}: {e}; its messages are dropped"));
                reg.passed.remove(name);
                return Err(());
            }
        };
        let link = Arc::new(Link {
            name: name.to_owned(),
            topic,
            publisher: Mutex::new(None),
            own: Mutex::new(VecDeque::new()),
            live: std::sync::atomic::AtomicBool::new(true),
        });
        reg.links.insert(name.to_owned(), link.clone());
        drop(reg);
        if sh.options.direction.outgoing() {
            let (me, l) = (self.clone(), link.clone());
            let t = spawn(format!("bridge-out-{name}"), move || me.forward(&l));
            lock(&self.threads).push(t);
        }
        Ok(link)
    }

    /// Local → Zenoh for one topic, until the bridge stops or the topic leaves the domain.
    fn forward(&self, link: &Link) {
        let sh = &self.shared;
        let name = &link.name;
        let policy = link.topic.policy();
        let sub = match policy {
            DeliveryPolicy::Overwrite => link.topic.subscriber(),
            _ => link.topic.reliable_subscriber(),
        };
        let sub = match sub {
            Ok(s) => s,
            Err(e) => return sh.log.warn(format!("sub {name}"), || format!("topic {name}: cannot subscribe: {e}")),
        };
        // Sleep at once when there is nothing: this thread shares its CPU with Zenoh's (and,
        // where the bridge is pinned, with the local publishers'); a spin would take the
        // time they need to produce what it waits for.
        sub.set_wait_policy(shmbus::WaitPolicy::BLOCK);
        // A lossy topic's forwarding drops when Zenoh's queues are full, as the topic itself
        // would; a lossless one waits.
        let congestion = match policy {
            DeliveryPolicy::Overwrite => CongestionControl::Drop,
            _ => CongestionControl::Block,
        };
        let zpub = sh
            .session
            .declare_publisher(format!("{}/{}", sh.prefix, name))
            .congestion_control(congestion)
            .express(sh.options.express)
            .allowed_destination(Locality::Remote)
            .wait();
        let zpub = match zpub {
            Ok(p) => p,
            Err(e) => return sh.log.warn(format!("zpub {name}"), || format!("topic {name}: zenoh publisher: {e}")),
        };
        let (max, history) = (link.topic.max_message_len(), link.topic.history());
        let clamp = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        while !sh.stopping() && link.live.load(std::sync::atomic::Ordering::Relaxed) {
            let msg = match sub.recv_timeout(POLL) {
                Ok(m) => m,
                Err(TopicRecvTimeoutError::Timeout) => continue,
                Err(TopicRecvTimeoutError::Lagged { missed }) => {
                    add(&sh.counters.local_lagged, missed);
                    continue;
                }
                Err(TopicRecvTimeoutError::Truncated) => {
                    sh.log.warn(format!("gone {name}"), || format!("topic {name} was cut short; no longer bridged"));
                    return;
                }
                Err(e) => {
                    sh.log.warn(format!("recv {name}"), || format!("topic {name}: {e}"));
                    bump(&sh.counters.send_failed);
                    continue;
                }
            };
            if link.is_own(msg.seq()) {
                bump(&sh.counters.echoes_skipped);
                continue;
            }
            let meta = TopicMeta {
                origin: sh.id,
                seq: msg.seq(),
                ts_mono_ns: msg.ts_ns(),
                ts_real_ns: mono_to_real(msg.ts_ns()),
                max_message_len: clamp(max),
                history: clamp(history),
                policy: policy as u8,
            };
            let len = msg.len() as u64;
            match zpub.put(msg.into_data()).attachment(meta.encode().to_vec()).wait() {
                Ok(()) => {
                    bump(&sh.counters.forwarded);
                    add(&sh.counters.forwarded_bytes, len);
                }
                Err(e) => {
                    bump(&sh.counters.send_failed);
                    sh.log.warn(format!("put {name}"), || format!("topic {name}: zenoh put: {e}"));
                }
            }
        }
    }

    /// Zenoh → local: one remote sample.
    fn incoming(self: &Arc<Self>, sample: &Sample) {
        let sh = &self.shared;
        let c = &sh.counters;
        let key = sample.key_expr().as_str();
        let name = key.strip_prefix(sh.prefix.as_str()).and_then(|k| k.strip_prefix('/')).unwrap_or(key);
        if shmbus::validate_name(name).is_err() || !sh.options.topics.allows(name) {
            bump(&c.not_allowed);
            return sh.log.warn(format!("key {key}"), || format!("remote key {key}: not an allowed topic; dropped"));
        }
        let meta = match sample.attachment().map(|a| wire::decode(&a.to_bytes())) {
            Some(Ok(Attachment::Topic(m))) => m,
            Some(Ok(Attachment::Entry(_))) => return self.bad(key, WireError::Kind(2)),
            Some(Err(e)) => return self.bad(key, e),
            None => return self.bad(key, WireError::Missing),
        };
        if meta.origin == sh.id {
            return;
        }
        let Ok(link) = self.link(name, Some(&meta)) else {
            bump(&c.open_failed);
            return;
        };
        let payload = sample.payload().to_bytes();
        self.publish(&link, &payload);
    }

    fn bad(&self, key: &str, e: WireError) {
        bump(&self.shared.counters.bad_attachment);
        self.shared.log.warn(format!("attachment {key}"), || format!("remote key {key}: {e}; dropped"));
    }

    /// Publishes a remote message into the local topic, remembering its sequence number so
    /// that the forwarding subscriber does not send it back.
    fn publish(&self, link: &Link, data: &[u8]) {
        let sh = &self.shared;
        let c = &sh.counters;
        let name = &link.name;
        let mut slot = lock(&link.publisher);
        if slot.is_none() {
            match link.topic.publisher() {
                Ok(p) => *slot = Some(p),
                Err(e) => {
                    bump(&c.open_failed);
                    return sh.log.warn(format!("pub {name}"), || format!("topic {name}: cannot publish: {e}"));
                }
            }
        }
        let Some(publisher) = slot.as_mut() else { return };
        let max = publisher.max_message_len();
        if data.len() > max {
            bump(&c.too_large);
            return sh.log.warn(format!("large {name}"), || {
                format!(
                    "topic {name}: a remote message of {} bytes is larger than its {max}-byte slots; dropped",
                    data.len()
                )
            });
        }
        // The loan waits (or fails) as the topic's policy says, holding no lock but the
        // publisher's; the send is quick, under the lock the forwarding subscriber checks.
        let mut loan = match publisher.loan() {
            Ok(l) => l,
            Err(TopicSendError::Full { .. }) => {
                bump(&c.full);
                return sh
                    .log
                    .warn(format!("full {name}"), || format!("topic {name} is full; remote messages dropped"));
            }
            Err(e) => {
                bump(&c.send_failed);
                return sh.log.warn(format!("send {name}"), || format!("topic {name}: {e}"));
            }
        };
        loan[..data.len()].copy_from_slice(data);
        loan.truncate(data.len());
        let mut own = lock(&link.own);
        match loan.send() {
            Ok(seq) => {
                if sh.options.direction.outgoing() {
                    if own.len() >= OWN_MAX {
                        own.pop_front();
                    }
                    own.push_back(seq);
                }
                bump(&c.received);
                add(&c.received_bytes, data.len() as u64);
            }
            Err(e) => {
                bump(&c.send_failed);
                sh.log.warn(format!("send {name}"), || format!("topic {name}: {e}"));
            }
        }
    }
}

/// A CLOCK_MONOTONIC time of this host on CLOCK_REALTIME.
fn mono_to_real(mono: u64) -> u64 {
    let (real_now, mono_now) = (shmbus::journal::realtime_ns(), shmbus::time::monotonic_ns());
    real_now.saturating_sub(mono_now.saturating_sub(mono))
}
