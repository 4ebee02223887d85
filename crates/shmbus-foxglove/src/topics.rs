//! The domain's topics as Foxglove channels, and the streams that feed them.
//!
//! Every selected topic of the domain is one `RawChannel` of the server's context, which
//! advertises it to every client (with the topic's schema and message encoding) and
//! unadvertises it when the channel is closed. A topic is read only while some client is
//! subscribed to it: the first client subscription starts a thread that opens a shmbus
//! subscriber on the topic and hands each message to the channel (the SDK copies it into
//! the queue of each subscribed client); the last unsubscribe makes that thread drop its
//! subscriber and end. The thread waits in the subscriber's blocking receive (a futex
//! wait), waking at most every [`POLL`] to look whether it is still wanted.
//!
//! **Invariant: one stream thread per topic at most.** A topic's [`Stream`] holds the set of
//! subscribed clients and whether its thread runs, under one lock: a subscription starts a
//! thread only when none runs, and a thread ends only after it has seen, under that lock,
//! that no client is left (so a client that subscribes while the thread is on its way out
//! either keeps it or starts the next one, never a second beside it).

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use foxglove::websocket::{ChannelView, Client, ClientId, ServerListener};
use foxglove::{ChannelId, Context, PartialMetadata, RawChannel};
use shmbus::{Domain, Kind, Topic, TopicRecvTimeoutError, WaitPolicy};

use crate::select::Selection;

/// How long a stream thread's receive waits before it looks whether it is still wanted.
const POLL: Duration = Duration::from_millis(100);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Who is subscribed to a topic, and whether its stream thread runs (see the module docs).
#[derive(Debug, Default)]
struct Stream {
    clients: HashSet<ClientId>,
    running: bool,
}

/// One advertised topic.
#[derive(Debug)]
struct Link {
    name: String,
    topic: Topic,
    channel: Arc<RawChannel>,
    /// The channel file's (device, inode): a topic removed and made again under the same
    /// name between two scans is a new topic.
    file: (u64, u64),
    stream: Mutex<Stream>,
}

#[derive(Debug, Default)]
struct Registry {
    by_name: HashMap<String, Arc<Link>>,
    by_channel: HashMap<ChannelId, Arc<Link>>,
    /// Names that could not be shown (not a topic, or not openable), warned about once,
    /// until they leave the domain or their file changes.
    passed: HashMap<String, (u64, u64)>,
}

/// The topics of one domain, shown to the clients of one server.
#[derive(Debug)]
pub struct Topics {
    domain: Domain,
    selection: Selection,
    ctx: Arc<Context>,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, sampled once at start: shmbus stamps messages on
    /// the monotonic clock, Foxglove shows Unix-epoch times.
    clock_offset_ns: i128,
    registry: Mutex<Registry>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    stopping: AtomicBool,
}

impl Topics {
    /// The topics of `domain` that `selection` shows, as channels of `ctx`.
    pub fn new(domain: Domain, selection: Selection, ctx: Arc<Context>) -> Arc<Topics> {
        let real = i128::from(shmbus::journal::realtime_ns());
        let mono = i128::from(shmbus::time::monotonic_ns());
        Arc::new(Topics {
            domain,
            selection,
            ctx,
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
        let gone: Vec<Arc<Link>> = {
            let mut reg = lock(&self.registry);
            reg.passed.retain(|n, file| files.get(n) == Some(file));
            let gone: Vec<Arc<Link>> =
                reg.by_name.values().filter(|l| files.get(&l.name) != Some(&l.file)).cloned().collect();
            for l in &gone {
                reg.by_name.remove(&l.name);
                reg.by_channel.remove(&l.channel.id());
            }
            gone
        };
        for l in gone {
            // Unadvertises it; the SDK calls on_unsubscribe for each client subscribed to it,
            // which ends its stream.
            l.channel.close();
            lock(&l.stream).clients.clear();
            eprintln!("shmbus-foxglove: topic {} removed", l.name);
        }
        for (name, file) in files {
            {
                let reg = lock(&self.registry);
                if reg.by_name.contains_key(&name) || reg.passed.contains_key(&name) {
                    continue;
                }
            }
            match self.open(&name, file) {
                Ok(link) => {
                    let mut reg = lock(&self.registry);
                    reg.by_channel.insert(link.channel.id(), link.clone());
                    reg.by_name.insert(name, link);
                }
                Err(why) => {
                    if let Some(why) = why {
                        eprintln!("shmbus-foxglove: {name}: {why}; not shown");
                    }
                    lock(&self.registry).passed.insert(name, file);
                }
            }
        }
    }

    /// Opens topic `name` and advertises it as a channel (`Err(None)`: not a topic, passed
    /// over quietly; `Err(Some(why))`: a topic that cannot be shown).
    fn open(&self, name: &str, file: (u64, u64)) -> Result<Arc<Link>, Option<String>> {
        let report = shmbus::admin::inspect_channel(&self.domain, name).map_err(|e| Some(e.to_string()))?;
        if report.header.kind != Kind::Topic {
            return Err(None);
        }
        let topic = Topic::open(&self.domain, name).map_err(|e| Some(e.to_string()))?;
        let builder = self.ctx.channel_builder(name);
        // A topic without a schema is a channel with no schema and an empty message
        // encoding, as in shmbus's MCAP files: nothing is known about its bytes.
        let builder = match topic.schema() {
            Some(s) => builder.message_encoding(s.message_encoding()).schema(
                (!s.encoding().is_empty())
                    .then(|| foxglove::Schema::new(s.name(), s.encoding(), s.data().to_vec()))
                    .or_else(|| (!s.name().is_empty()).then(|| foxglove::Schema::new(s.name(), "", Vec::new()))),
            ),
            None => builder.message_encoding(""),
        };
        let channel = builder.build_raw().map_err(|e| Some(format!("cannot advertise it: {e}")))?;
        eprintln!(
            "shmbus-foxglove: topic {name} advertised ({})",
            topic.schema().map_or_else(|| "no schema".to_owned(), ToString::to_string)
        );
        Ok(Arc::new(Link { name: name.to_owned(), topic, channel, file, stream: Mutex::default() }))
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
                if st.clients.is_empty() || self.stopping.load(Ordering::Relaxed) {
                    st.running = false;
                    break;
                }
            }
            match sub.recv_ref_timeout(POLL) {
                Ok(sample) => {
                    let time = self.unix_ns(sample.ts_ns());
                    link.channel.log_with_meta(&sample, PartialMetadata::with_log_time(time));
                }
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

    /// Ends every stream and waits for their threads.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
    }

    fn link(&self, channel: ChannelId) -> Option<Arc<Link>> {
        lock(&self.registry).by_channel.get(&channel).cloned()
    }
}

/// The SDK's hooks: a topic is streamed while some client is subscribed to it.
#[derive(Debug)]
pub struct Listener(pub Arc<Topics>);

impl ServerListener for Listener {
    fn on_subscribe(&self, client: Client, channel: ChannelView) {
        let topics = &self.0;
        let Some(link) = topics.link(channel.id()) else { return };
        let mut st = lock(&link.stream);
        st.clients.insert(client.id());
        if st.running || topics.stopping.load(Ordering::Relaxed) {
            return;
        }
        st.running = true;
        drop(st);
        let (t, l) = (topics.clone(), link.clone());
        let spawned = std::thread::Builder::new().name(format!("fox-{}", link.name)).spawn(move || t.stream(&l));
        match spawned {
            Ok(h) => {
                let mut threads = lock(&topics.threads);
                threads.retain(|h| !h.is_finished());
                threads.push(h);
            }
            Err(e) => {
                eprintln!("shmbus-foxglove: topic {}: cannot start its stream: {e}", link.name);
                lock(&link.stream).running = false;
            }
        }
    }

    fn on_unsubscribe(&self, client: Client, channel: ChannelView) {
        // A channel closed by `scan` is out of the registry already; `scan` clears its
        // clients itself.
        if let Some(link) = self.0.link(channel.id()) {
            lock(&link.stream).clients.remove(&client.id());
        }
    }
}
