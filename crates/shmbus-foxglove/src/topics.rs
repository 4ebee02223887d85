//! The domain's topics as the protocol's channels, the clients that see them, and the
//! streams that feed them.
//!
//! Every selected topic of the domain is one channel, advertised to every client (with the
//! topic's schema and message encoding) and unadvertised when the topic goes. A topic is
//! read only while some client is subscribed to it: the first subscription starts a thread
//! that opens a shmbus subscriber on the topic and hands each message to the outbox of each
//! subscribed client (which writes it to the client's socket itself when the client keeps
//! up: see `outbox`); the last unsubscribe makes that thread drop its subscriber and end.
//! The thread waits in the subscriber's blocking receive (a futex wait), waking at most
//! every [`POLL`] to look whether it is still wanted.
//!
//! **Invariant: one stream thread per topic at most.** A topic's [`Stream`] holds its
//! subscriptions and whether its thread runs, under one lock: a subscription starts a thread
//! only when none runs, and a thread ends only after it has seen, under that lock, that no
//! subscription is left (so a client that subscribes while the thread is on its way out
//! either keeps it or starts the next one, never a second beside it).
//!
//! **Order.** The registry's lock is held while a channel is advertised or unadvertised to
//! the clients and while a client is sent the channels there are, so every client sees each
//! channel advertised once, before any message of it, and unadvertised at most once.
//! Lock order: the registry, then a topic's stream, then an outbox.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use foxglove::protocol::v1::client::subscribe::Subscription;
use foxglove::protocol::v1::schema::Schema;
use foxglove::protocol::v1::server::{Advertise, Channel, ServerInfo, Unadvertise};
use foxglove::protocol::v1::JsonMessage;
use shmbus::{Domain, Kind, Topic, TopicRecvTimeoutError, WaitPolicy};

use crate::outbox::{frame_head, Outbox, BINARY, MAX_HEAD};
use crate::select::Selection;

/// How long a stream thread's receive waits before it looks whether it is still wanted.
const POLL: Duration = Duration::from_millis(100);

/// Bytes of a `messageData` message before its payload: opcode, subscription id, log time
/// (the protocol's binary layout, written here rather than through the SDK's encoder, which
/// would copy the payload once per client).
const MESSAGE_DATA_HEAD: usize = 1 + 4 + 8;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One client's subscription to a topic.
#[derive(Debug)]
struct Sub {
    client: u64,
    id: u32,
    out: Arc<Outbox>,
}

/// A topic's subscriptions, and whether its stream thread runs (see the module docs).
#[derive(Debug, Default)]
struct Stream {
    subs: Vec<Sub>,
    running: bool,
}

/// One advertised topic.
#[derive(Debug)]
struct Link {
    name: String,
    topic: Topic,
    /// The channel as advertised.
    channel: Channel<'static>,
    /// The channel file's (device, inode): a topic removed and made again under the same
    /// name between two scans is a new topic.
    file: (u64, u64),
    stream: Mutex<Stream>,
}

impl Link {
    fn id(&self) -> u64 {
        self.channel.id
    }
}

/// A connected client.
#[derive(Debug)]
struct Client {
    out: Arc<Outbox>,
    /// Its subscriptions: subscription id → channel id.
    subs: HashMap<u32, u64>,
}

#[derive(Debug, Default)]
struct Registry {
    by_name: HashMap<String, Arc<Link>>,
    by_channel: HashMap<u64, Arc<Link>>,
    /// Names that could not be shown (not a topic, or not openable), warned about once,
    /// until they leave the domain or their file changes.
    passed: HashMap<String, (u64, u64)>,
    clients: HashMap<u64, Client>,
    /// The last channel id and client id given (ids start at 1 and are never reused).
    last_channel: u64,
    last_client: u64,
}

impl Registry {
    /// Sends `json` to every client.
    fn broadcast(&self, json: &str) {
        for c in self.clients.values() {
            c.out.send_json(json);
        }
    }
}

/// The topics of one domain, shown to the clients of one server.
#[derive(Debug)]
pub struct Topics {
    domain: Domain,
    selection: Selection,
    /// The server's name, as `serverInfo` gives it.
    name: String,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, sampled once at start: shmbus stamps messages on
    /// the monotonic clock, Foxglove shows Unix-epoch times.
    clock_offset_ns: i128,
    registry: Mutex<Registry>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    stopping: AtomicBool,
}

impl Topics {
    /// The topics of `domain` that `selection` shows, served under `name`.
    pub fn new(domain: Domain, selection: Selection, name: String) -> Arc<Topics> {
        let real = i128::from(shmbus::journal::realtime_ns());
        let mono = i128::from(shmbus::time::monotonic_ns());
        Arc::new(Topics {
            domain,
            selection,
            name,
            clock_offset_ns: real - mono,
            registry: Mutex::default(),
            threads: Mutex::default(),
            stopping: AtomicBool::new(false),
        })
    }

    /// Looks at the domain's files: advertises the selected topics new to it, unadvertises
    /// those gone (or replaced by a new file of the same name).
    pub fn scan(&self) {
        let names = match self.domain.channel_names() {
            Ok(n) => n,
            // No domain directory (yet, or any more): no topics.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                eprintln!("shmbus-foxglove: cannot list domain {}: {e}", self.domain.name());
                return;
            }
        };
        let files: HashMap<String, (u64, u64)> = names
            .into_iter()
            .filter(|n| self.selection.shows(n))
            .filter_map(|n| {
                let path = self.domain.channel_path(&n).ok()?;
                let meta = std::fs::symlink_metadata(path).ok()?;
                Some((n, (meta.dev(), meta.ino())))
            })
            .collect();
        {
            let mut reg = lock(&self.registry);
            reg.passed.retain(|n, file| files.get(n) == Some(file));
            let gone: Vec<Arc<Link>> =
                reg.by_name.values().filter(|l| files.get(&l.name) != Some(&l.file)).cloned().collect();
            if !gone.is_empty() {
                let ids: HashSet<u64> = gone.iter().map(|l| l.id()).collect();
                for l in &gone {
                    reg.by_name.remove(&l.name);
                    reg.by_channel.remove(&l.id());
                    // Its stream ends at its next look.
                    lock(&l.stream).subs.clear();
                    eprintln!("shmbus-foxglove: topic {} removed", l.name);
                }
                for c in reg.clients.values_mut() {
                    c.subs.retain(|_, ch| !ids.contains(ch));
                }
                reg.broadcast(&Unadvertise::new(ids).to_string());
            }
        }
        for (name, file) in files {
            {
                let reg = lock(&self.registry);
                if reg.by_name.contains_key(&name) || reg.passed.contains_key(&name) {
                    continue;
                }
            }
            // Opened without the lock (it reads the channel's file); numbered and advertised
            // under it.
            let opened = self.open(&name);
            let mut reg = lock(&self.registry);
            let id = reg.last_channel + 1;
            match opened.and_then(|(topic, schema)| advert(id, &name, schema).map(|c| (topic, c))) {
                Ok((topic, channel)) => {
                    reg.last_channel = id;
                    eprintln!(
                        "shmbus-foxglove: topic {name} advertised ({})",
                        topic.schema().map_or_else(|| "no schema".to_owned(), ToString::to_string)
                    );
                    reg.broadcast(&Advertise::new([channel.clone()]).to_string());
                    let link = Arc::new(Link { name: name.clone(), topic, channel, file, stream: Mutex::default() });
                    reg.by_channel.insert(id, link.clone());
                    reg.by_name.insert(name, link);
                }
                Err(why) => {
                    if let Some(why) = why {
                        eprintln!("shmbus-foxglove: {name}: {why}; not shown");
                    }
                    reg.passed.insert(name, file);
                }
            }
        }
    }

    /// Opens topic `name` (`Err(None)`: not a topic, passed over quietly; `Err(Some(why))`: a
    /// topic that cannot be shown), with its schema as the protocol has it: the message
    /// encoding, and the schema (name, encoding, data) if there is one.
    fn open(&self, name: &str) -> Result<(Topic, Encoding), Option<String>> {
        let report = shmbus::admin::inspect_channel(&self.domain, name).map_err(|e| Some(e.to_string()))?;
        if report.header.kind != Kind::Topic {
            return Err(None);
        }
        let topic = Topic::open(&self.domain, name).map_err(|e| Some(e.to_string()))?;
        // A topic without a schema is a channel with no schema and an empty message
        // encoding, as in shmbus's MCAP files: nothing is known about its bytes.
        let schema = match topic.schema() {
            Some(s) => (
                s.message_encoding().to_owned(),
                if !s.encoding().is_empty() {
                    Some(Schema::new(s.name().to_owned(), s.encoding().to_owned(), s.data().to_vec()))
                } else if !s.name().is_empty() {
                    Some(Schema::new(s.name().to_owned(), String::new(), Vec::new()))
                } else {
                    None
                },
            ),
            None => (String::new(), None),
        };
        Ok((topic, schema))
    }

    /// Registers a client whose handshake is done: sends it `serverInfo` and the channels
    /// there are. Its id; `None` once the server is stopping.
    pub fn add_client(&self, out: Arc<Outbox>) -> Option<u64> {
        let mut reg = lock(&self.registry);
        // Under the lock `stop` sweeps the clients with: none is registered after it.
        if self.stopping.load(Ordering::Relaxed) {
            return None;
        }
        reg.last_client += 1;
        let id = reg.last_client;
        out.send_json(&ServerInfo::new(self.name.clone()).to_string());
        if !reg.by_channel.is_empty() {
            let mut channels: Vec<&Arc<Link>> = reg.by_channel.values().collect();
            channels.sort_by_key(|l| l.id());
            out.send_json(&Advertise::new(channels.into_iter().map(|l| l.channel.clone())).to_string());
        }
        reg.clients.insert(id, Client { out, subs: HashMap::new() });
        Some(id)
    }

    /// Clients registered now.
    pub fn clients(&self) -> usize {
        lock(&self.registry).clients.len()
    }

    /// Forgets client `id` and ends its subscriptions.
    pub fn remove_client(&self, id: u64) {
        let mut reg = lock(&self.registry);
        let Some(client) = reg.clients.remove(&id) else { return };
        for (sub, channel) in client.subs {
            if let Some(link) = reg.by_channel.get(&channel) {
                lock(&link.stream).subs.retain(|s| !(s.client == id && s.id == sub));
            }
        }
    }

    /// Client `id`'s subscriptions: each one made, or why not (one line per refusal).
    pub fn subscribe(self: &Arc<Self>, id: u64, subs: &[Subscription]) -> Vec<String> {
        let mut refused = Vec::new();
        let mut reg = lock(&self.registry);
        for s in subs {
            let Some(link) = reg.by_channel.get(&s.channel_id).cloned() else {
                refused.push(format!("subscription {}: no channel {}", s.id, s.channel_id));
                continue;
            };
            let Some(client) = reg.clients.get_mut(&id) else { return refused };
            if client.subs.contains_key(&s.id) {
                refused.push(format!("subscription {}: that id is in use", s.id));
                continue;
            }
            if client.subs.values().any(|&c| c == s.channel_id) {
                refused.push(format!("subscription {}: already subscribed to channel {}", s.id, s.channel_id));
                continue;
            }
            client.subs.insert(s.id, s.channel_id);
            let out = client.out.clone();
            let mut st = lock(&link.stream);
            st.subs.push(Sub { client: id, id: s.id, out });
            if st.running || self.stopping.load(Ordering::Relaxed) {
                continue;
            }
            st.running = true;
            drop(st);
            let (t, l) = (self.clone(), link.clone());
            let spawned = std::thread::Builder::new().name(format!("fox-{}", link.name)).spawn(move || t.stream(&l));
            match spawned {
                Ok(h) => {
                    let mut threads = lock(&self.threads);
                    threads.retain(|h| !h.is_finished());
                    threads.push(h);
                }
                Err(e) => {
                    eprintln!("shmbus-foxglove: topic {}: cannot start its stream: {e}", link.name);
                    lock(&link.stream).running = false;
                }
            }
        }
        refused
    }

    /// Ends client `id`'s subscriptions `ids`: why not, for those it does not have.
    pub fn unsubscribe(&self, id: u64, ids: &[u32]) -> Vec<String> {
        let mut refused = Vec::new();
        let mut reg = lock(&self.registry);
        let reg = &mut *reg;
        let Some(client) = reg.clients.get_mut(&id) else { return refused };
        for &sub in ids {
            let Some(channel) = client.subs.remove(&sub) else {
                refused.push(format!("unsubscribe: no subscription {sub}"));
                continue;
            };
            if let Some(link) = reg.by_channel.get(&channel) {
                lock(&link.stream).subs.retain(|s| !(s.client == id && s.id == sub));
            }
        }
        refused
    }

    /// A message's publish time (CLOCK_MONOTONIC) on the Unix epoch.
    fn unix_ns(&self, mono_ns: u64) -> u64 {
        u64::try_from((i128::from(mono_ns) + self.clock_offset_ns).max(0)).unwrap_or(u64::MAX)
    }

    /// Feeds `link`'s channel from a shmbus subscriber until no client is subscribed to it.
    fn stream(&self, link: &Link) {
        let name = &link.name;
        let sub = match link.topic.subscriber() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("shmbus-foxglove: topic {name}: cannot subscribe: {e}");
                lock(&link.stream).running = false;
                return;
            }
        };
        // Sleep at once when there is nothing: no spinning beside the publishers.
        sub.set_wait_policy(WaitPolicy::BLOCK);
        let mut lagged = 0u64;
        loop {
            {
                let mut st = lock(&link.stream);
                if st.subs.is_empty() || self.stopping.load(Ordering::Relaxed) {
                    st.running = false;
                    break;
                }
            }
            match sub.recv_ref_timeout(POLL) {
                Ok(sample) => self.deliver(link, &sample, self.unix_ns(sample.ts_ns())),
                Err(TopicRecvTimeoutError::Timeout) => {}
                Err(TopicRecvTimeoutError::Lagged { missed }) => {
                    if lagged == 0 {
                        eprintln!("shmbus-foxglove: topic {name}: fell behind its publishers, {missed} message(s) skipped (counted until it is unsubscribed)");
                    }
                    lagged += missed;
                }
                Err(TopicRecvTimeoutError::Truncated) => {
                    eprintln!("shmbus-foxglove: topic {name}: its file was cut short; no longer streamed");
                    lock(&link.stream).running = false;
                    break;
                }
                Err(e) => eprintln!("shmbus-foxglove: topic {name}: {e}"),
            }
        }
        if lagged > 0 {
            eprintln!("shmbus-foxglove: topic {name}: {lagged} message(s) skipped while streamed");
        }
    }

    /// Ends every stream and waits for their threads; tells every client the server is
    /// going (a WebSocket close, 1001).
    pub fn stop(&self) {
        {
            let reg = lock(&self.registry);
            self.stopping.store(true, Ordering::Relaxed);
            for c in reg.clients.values() {
                c.out.send_going_away();
            }
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
    }

    /// Hands one message to every client subscribed to `link`: its frame is written to each
    /// client's socket straight from the topic's memory while the client keeps up; the first
    /// client that cannot take all of it at once makes the one copy all of them queue.
    fn deliver(&self, link: &Link, data: &[u8], log_time: u64) {
        let mut shared: Option<bytes::Bytes> = None;
        let st = lock(&link.stream);
        for s in &st.subs {
            let mut head = [0u8; MAX_HEAD + MESSAGE_DATA_HEAD];
            let (ws, n) = frame_head(BINARY, MESSAGE_DATA_HEAD + data.len());
            head[..n].copy_from_slice(&ws[..n]);
            head[n] = 1; // messageData
            head[n + 1..n + 5].copy_from_slice(&s.id.to_le_bytes());
            head[n + 5..n + 13].copy_from_slice(&log_time.to_le_bytes());
            s.out.send_data(&head[..n + MESSAGE_DATA_HEAD], data, || {
                shared.get_or_insert_with(|| bytes::Bytes::copy_from_slice(data)).clone()
            });
        }
    }
}

/// A channel's message encoding and schema, as the protocol has them.
type Encoding = (String, Option<Schema<'static>>);

/// Channel `id`'s advertisement for topic `name` with its message encoding and schema
/// (`Err(Some(why))` when the protocol cannot carry them).
fn advert(id: u64, name: &str, (encoding, schema): Encoding) -> Result<Channel<'static>, Option<String>> {
    let mut b = Channel::builder(id, name.to_owned(), encoding);
    if let Some(s) = schema {
        b = b.with_schema(s);
    }
    b.build().map_err(|e| Some(format!("cannot advertise it: {e}")))
}
