//! Topics both ways: one forwarding thread per local topic (local → Zenoh), one Zenoh
//! subscriber for the prefix (Zenoh → local), and the domain scan that finds new topics.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use shmbus::topic::Message;
use shmbus::{
    DeliveryPolicy, Kind, Publisher, Topic, TopicConfig, TopicRecvTimeoutError, TopicSendError, TopicTryRecvError,
};
use zenoh::qos::CongestionControl;
use zenoh::sample::{Locality, Sample};
use zenoh::Wait;

use crate::stats::{add, bump};
use crate::wire::{self, Attachment, BatchItem, TopicBatch, TopicMeta, WireError};
use crate::{spawn, zerr, BridgeError, Shared};

/// How long a forwarding thread's receive waits before it looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// The most own sequence numbers remembered (the forwarding subscriber forgets them as it
/// passes them; this bounds the list if it cannot keep up).
const OWN_MAX: usize = 1 << 16;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A local receive that failed without ending the topic.
enum Failure {
    Lagged(u64),
    Other(String),
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
        // The bridge reads or writes every slot of the topic for as long as it runs: its page
        // faults go now, not into the first pass of messages (a 1 MiB slot is 256 faults).
        // A topic made for a remote message is linked in Zenoh's receive callback, which a
        // large topic's prefault (up to --max-remote-topic) would hold up: it goes to a thread
        // of its own (it changes no byte, so publishing meanwhile is safe), joined at stop
        // like the forwarding threads.
        if remote.is_some() {
            let topic = link.topic.clone();
            let t = spawn(format!("bridge-pf-{name}"), move || topic.prefault());
            lock(&self.threads).push(t);
        } else {
            link.topic.prefault();
        }
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
        let clamp = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        let (max, history) = (clamp(link.topic.max_message_len()), clamp(link.topic.history()));
        let mut waiting: Vec<Message> = Vec::new();
        while !sh.stopping() && link.live.load(std::sync::atomic::Ordering::Relaxed) {
            waiting.clear();
            match sub.recv_timeout(POLL) {
                Ok(m) => waiting.push(m),
                Err(TopicRecvTimeoutError::Timeout) => continue,
                Err(TopicRecvTimeoutError::Lagged { missed }) => self.recv_failed(name, Failure::Lagged(missed)),
                Err(TopicRecvTimeoutError::Truncated) => return self.gone(name),
                Err(e) => self.recv_failed(name, Failure::Other(e.to_string())),
            };
            if waiting.is_empty() {
                continue;
            }
            // What else is waiting goes in the same sample (a batch), up to its limits.
            let mut bytes = waiting[0].len();
            while waiting.len() < wire::MAX_BATCH && bytes < wire::BATCH_BYTES {
                match sub.try_recv() {
                    Ok(m) => {
                        bytes += m.len();
                        waiting.push(m);
                    }
                    Err(TopicTryRecvError::Empty) => break,
                    Err(TopicTryRecvError::Lagged { missed }) => self.recv_failed(name, Failure::Lagged(missed)),
                    Err(TopicTryRecvError::Truncated) => return self.gone(name),
                    Err(e) => {
                        self.recv_failed(name, Failure::Other(e.to_string()));
                        break;
                    }
                }
            }
            waiting.retain(|m| {
                let own = link.is_own(m.seq());
                if own {
                    bump(&sh.counters.echoes_skipped);
                }
                !own
            });
            let (n, bytes) = (waiting.len() as u64, waiting.iter().map(|m| m.len() as u64).sum::<u64>());
            let put = match waiting.len() {
                0 => continue,
                1 => {
                    let m = waiting.pop().unwrap_or_else(|| unreachable!("one message"));
                    let meta = TopicMeta {
                        origin: sh.id,
                        seq: m.seq(),
                        ts_mono_ns: m.ts_ns(),
                        ts_real_ns: mono_to_real(m.ts_ns()),
                        max_message_len: max,
                        history,
                        policy: policy as u8,
                    };
                    zpub.put(m.into_data()).attachment(meta.encode().to_vec()).wait()
                }
                _ => {
                    let batch = TopicBatch {
                        origin: sh.id,
                        max_message_len: max,
                        history,
                        policy: policy as u8,
                        items: waiting
                            .iter()
                            .map(|m| BatchItem {
                                seq: m.seq(),
                                ts_mono_ns: m.ts_ns(),
                                ts_real_ns: mono_to_real(m.ts_ns()),
                                len: m.len() as u32,
                            })
                            .collect(),
                    };
                    let mut payload = Vec::with_capacity(bytes as usize);
                    for m in &waiting {
                        payload.extend_from_slice(m.data());
                    }
                    zpub.put(payload).attachment(batch.encode()).wait()
                }
            };
            if n == 1 {
                // Zenoh's sender was just woken to write this message, on a CPU it may share
                // with this thread: let it write now rather than after this thread's way
                // back to its wait (batches mean load, and go on without a yield).
                yield_cpu();
            }
            match put {
                Ok(()) => {
                    add(&sh.counters.forwarded, n);
                    add(&sh.counters.forwarded_bytes, bytes);
                }
                Err(e) => {
                    add(&sh.counters.send_failed, n);
                    sh.log.warn(format!("put {name}"), || format!("topic {name}: zenoh put: {e}"));
                }
            }
        }
    }

    /// Counts a failed local receive.
    fn recv_failed(&self, name: &str, f: Failure) {
        let sh = &self.shared;
        match f {
            Failure::Lagged(missed) => add(&sh.counters.local_lagged, missed),
            Failure::Other(e) => {
                sh.log.warn(format!("recv {name}"), || format!("topic {name}: {e}"));
                bump(&sh.counters.send_failed);
            }
        }
    }

    /// The topic's file was cut: its thread ends.
    fn gone(&self, name: &str) {
        self.shared.log.warn(format!("gone {name}"), || format!("topic {name} was cut short; no longer bridged"));
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
        match sample.attachment().map(|a| wire::decode(&a.to_bytes())) {
            Some(Ok(Attachment::Topic(m))) => {
                if m.origin == sh.id {
                    return;
                }
                if let Some(link) = self.remote_link(name, &m) {
                    // Straight from Zenoh's buffers (a large message comes in fragments)
                    // into the loaned slot: one copy.
                    let z = sample.payload();
                    self.publish_with(&link, z.len(), |mut dst| {
                        for part in z.slices() {
                            let (head, rest) = dst.split_at_mut(part.len().min(dst.len()));
                            head.copy_from_slice(&part[..head.len()]);
                            dst = rest;
                        }
                    });
                    // The local subscribers just woken run before the rest of Zenoh's receive
                    // work on a CPU they may share with it (a batch means load: no yield).
                    yield_cpu();
                }
            }
            Some(Ok(Attachment::Batch(b))) => {
                if b.origin == sh.id {
                    return;
                }
                let payload = sample.payload().to_bytes();
                if b.payload_len() != payload.len() as u64 {
                    return self.bad(key, WireError::Field("batch lengths do not add up to the payload"));
                }
                let Some(link) = self.remote_link(name, &b.meta()) else { return };
                let mut at = 0;
                for it in &b.items {
                    let len = it.len as usize;
                    self.publish(&link, &payload[at..at + len]);
                    at += len;
                }
            }
            Some(Ok(Attachment::Entry(_))) => self.bad(key, WireError::Kind(2)),
            Some(Err(e)) => self.bad(key, e),
            None => self.bad(key, WireError::Missing),
        }
    }

    /// The link a remote message goes to (`None`: counted as `open_failed`).
    fn remote_link(self: &Arc<Self>, name: &str, meta: &TopicMeta) -> Option<Arc<Link>> {
        let link = self.link(name, Some(meta)).ok();
        if link.is_none() {
            bump(&self.shared.counters.open_failed);
        }
        link
    }

    fn bad(&self, key: &str, e: WireError) {
        bump(&self.shared.counters.bad_attachment);
        self.shared.log.warn(format!("attachment {key}"), || format!("remote key {key}: {e}; dropped"));
    }

    /// Publishes a remote message into the local topic, remembering its sequence number so
    /// that the forwarding subscriber does not send it back.
    fn publish(&self, link: &Link, data: &[u8]) {
        self.publish_with(link, data.len(), |dst| dst.copy_from_slice(data));
    }

    /// [`publish`](Self::publish) of `len` bytes that `fill` writes into the loaned slot.
    fn publish_with(&self, link: &Link, len: usize, fill: impl FnOnce(&mut [u8])) {
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
        if len > max {
            bump(&c.too_large);
            return sh.log.warn(format!("large {name}"), || {
                format!("topic {name}: a remote message of {len} bytes is larger than its {max}-byte slots; dropped")
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
        fill(&mut loan[..len]);
        loan.truncate(len);
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
                add(&c.received_bytes, len as u64);
            }
            Err(e) => {
                bump(&c.send_failed);
                sh.log.warn(format!("send {name}"), || format!("topic {name}: {e}"));
            }
        }
    }
}

/// Lets the threads waiting for this CPU run first (see docs/bridge.md, "Speed").
fn yield_cpu() {
    // SAFETY: sched_yield has no preconditions.
    unsafe { libc::sched_yield() };
}

/// A CLOCK_MONOTONIC time of this host on CLOCK_REALTIME.
fn mono_to_real(mono: u64) -> u64 {
    let (real_now, mono_now) = (shmbus::journal::realtime_ns(), shmbus::time::monotonic_ns());
    real_now.saturating_sub(mono_now.saturating_sub(mono))
}
