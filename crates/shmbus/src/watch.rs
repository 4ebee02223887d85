//! Discovery events: what comes and goes in a domain, as it happens.
//!
//! [`Domain::watch`] returns a [`DomainWatch`], a stream of [`DomainEvent`]s: a channel
//! `created` or `removed`, a participant (an endpoint's process) `joined` or `left`;
//! [`DomainWatch::all`] watches every domain under a root, those made later too. Events
//! start from the moment of the call: what exists then is the watch's starting point, not
//! reported (list it with [`DomainDir::channel_names`](crate::domain::DomainDir::channel_names)
//! or the `admin` functions first).
//!
//! * **Channels** are seen through inotify on the domain directory (and on the root, for the
//!   directory itself appearing or going): a channel created or removed wakes the watch at
//!   once, with no polling loop. A channel removed and made again under the same name is
//!   `removed`, then `created` (its creator differs).
//! * **Participants** are read from each channel's participant table, every
//!   [`participant_interval`](DomainWatch::set_participant_interval) (100 ms by default) while
//!   the watch is being waited on. A participant is live while its entry is taken and its
//!   process runs: one killed by SIGKILL is `left` at the first look after its death, even
//!   though its entry waits to be reclaimed. So a join or a leave is reported within one
//!   interval plus one look at the domain (which reads every channel's table). A participant
//!   that joins and leaves within one interval is not seen.
//!
//! Names and files are read as the `admin` functions read them: never through a symlink,
//! only in a directory the domain's trust policy accepts. A channel that cannot be read (a
//! file that is not a channel, another user's, damaged) is reported `created` with no kind,
//! and its participants are not read.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crate::admin;
use crate::domain::Domain;
use crate::error::OpenError;
use crate::kind::Kind;
use crate::sys::watch::DirWatch;
use crate::sys::{fs, ProcessId};

/// How often, by default, a waiting [`DomainWatch`] reads the participant tables.
pub const PARTICIPANT_INTERVAL: Duration = Duration::from_millis(100);

/// What happened (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A channel appeared in the domain.
    Created,
    /// A channel left the domain (removed, or the domain directory went away).
    Removed,
    /// A process took a participant entry of a channel (made an endpoint).
    Joined,
    /// A participant let go of its entry, or its process died.
    Left,
}

impl EventKind {
    /// `created`, `removed`, `joined` or `left`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Created => "created",
            EventKind::Removed => "removed",
            EventKind::Joined => "joined",
            EventKind::Left => "left",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One discovery event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainEvent {
    /// What happened.
    pub what: EventKind,
    /// The domain's name.
    pub domain: String,
    /// The channel's name.
    pub channel: String,
    /// The channel's kind (`None`: the file could not be read as a channel).
    pub kind: Option<Kind>,
    /// For `joined` and `left`: the participant's role ("publisher", "consumer", …; see
    /// [`admin::role_name`]), `None` for a role number this version does not know.
    pub role: Option<&'static str>,
    /// For `joined` and `left`: the participant's process (its pid in its own PID namespace).
    pub process: Option<ProcessId>,
}

impl fmt::Display for DomainEvent {
    /// `created topic robot1/imu`, `joined topic robot1/imu publisher pid 1234`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind.map_or("?", |k| k.as_str());
        write!(f, "{} {} {}/{}", self.what, kind, self.domain, self.channel)?;
        if let Some(p) = self.process {
            write!(f, " {} pid {}", self.role.unwrap_or("?"), p.pid)?;
        }
        Ok(())
    }
}

/// A participant as the watch tells one from another: its entry, process and role.
type Participant = (usize, ProcessId, u32);

/// What the watch knows of one channel.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Known {
    kind: Option<Kind>,
    /// The creator and the creation time, to tell a channel made again under the same name.
    creator: Option<(ProcessId, u64)>,
    live: BTreeSet<Participant>,
}

/// What a watch looks at.
#[derive(Debug)]
enum Target {
    /// One domain.
    One(Domain),
    /// Every domain under a root, as [`Domain::list`] finds them.
    All(std::path::PathBuf),
}

/// A stream of a domain's [`DomainEvent`]s (see the [module docs](self)), from
/// [`Domain::watch`], or of every domain's under a root ([`DomainWatch::all`]). Blocking:
/// [`next_timeout`](Self::next_timeout), [`try_next`](Self::try_next), or the [`Iterator`],
/// whose `next` waits as long as it takes.
pub struct DomainWatch {
    target: Target,
    watch: DirWatch,
    /// By domain, then channel name.
    known: BTreeMap<(String, String), Known>,
    pending: VecDeque<DomainEvent>,
    interval: Duration,
    /// Whether participants are read at all ([`DomainWatch::channels_only`]).
    participants: bool,
    /// When the participant tables were last read.
    looked: Instant,
}

impl fmt::Debug for DomainWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DomainWatch").field("target", &self.target).field("channels", &self.known.len()).finish()
    }
}

impl Domain {
    /// A stream of what comes and goes in this domain from now on: channels created and
    /// removed, participants joined and left (see [`crate::watch`]). The domain directory
    /// need not exist yet; the root must.
    pub fn watch(&self) -> Result<DomainWatch, OpenError> {
        DomainWatch::start(Target::One(self.clone()))
    }
}

impl DomainWatch {
    /// [`Domain::watch`] for every domain under `root` (the trust policy of
    /// `SHMBUS_TRUST`, as [`Domain::list`]), those made later included.
    pub fn all(root: impl Into<std::path::PathBuf>) -> Result<DomainWatch, OpenError> {
        DomainWatch::start(Target::All(root.into()))
    }

    fn start(target: Target) -> Result<DomainWatch, OpenError> {
        let root = target.root().to_path_buf();
        let watch = DirWatch::new().map_err(|e| OpenError::io(&root, e))?;
        let mut w = DomainWatch {
            target,
            watch,
            known: BTreeMap::new(),
            pending: VecDeque::new(),
            interval: PARTICIPANT_INTERVAL,
            participants: true,
            looked: Instant::now(),
        };
        // The starting point: what is there now is not reported.
        w.look()?;
        w.pending.clear();
        Ok(w)
    }
}

impl Target {
    fn root(&self) -> &std::path::Path {
        match self {
            Target::One(d) => d.root(),
            Target::All(root) => root,
        }
    }
}

impl DomainWatch {
    /// How often a waiting watch reads the participant tables (default
    /// [`PARTICIPANT_INTERVAL`]): the bound on how late a join or leave is reported, and
    /// what a wait costs (one look at every channel of the domain per interval).
    pub fn set_participant_interval(&mut self, interval: Duration) {
        self.interval = interval.max(Duration::from_millis(1));
    }

    /// Reports channels only: no participant table is read, and a wait sleeps until a
    /// name changes in the domain (for a tool that wants to know which channels exist, not
    /// who uses them).
    pub fn channels_only(&mut self) {
        self.participants = false;
        for known in self.known.values_mut() {
            known.live.clear();
        }
    }

    /// The next event if one is there now, after one look at the domain; `None` if not.
    pub fn try_next(&mut self) -> Result<Option<DomainEvent>, OpenError> {
        if self.pending.is_empty() {
            // What is queued on the descriptor is covered by the look that follows.
            self.watch.drain().map_err(|e| OpenError::io(self.target.root(), e))?;
            self.look()?;
        }
        Ok(self.pending.pop_front())
    }

    /// How long until the participant tables are due for a look (zero: now; `None` for a
    /// [`channels_only`](Self::channels_only) watch). With the descriptor ([`AsFd`]), what
    /// an event loop needs to wait for the watch itself: call [`try_next`](Self::try_next)
    /// when the descriptor is readable or this has passed.
    pub fn participants_due(&self) -> Option<Duration> {
        self.participants.then(|| (self.looked + self.interval).saturating_duration_since(Instant::now()))
    }

    /// The next event, waiting up to `timeout` for one; `None` if none came.
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<DomainEvent>, OpenError> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(Some(e));
            }
            let now = Instant::now();
            let left = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(now));
            if left.is_zero() {
                // No time to wait: one look, as `try_next` (which a zero timeout is).
                return if timeout.is_zero() { self.try_next() } else { Ok(None) };
            }
            // Sleep until a name changes or the participants are due (an hour at most: a
            // wait of `Duration::MAX` is not one `poll(2)` can take); look only then.
            let due = self.participants_due().unwrap_or(Duration::MAX);
            let changed = match due.is_zero() {
                true => false,
                false => {
                    let nap = left.min(due).min(Duration::from_secs(3600));
                    self.watch.wait(nap).map_err(|e| OpenError::io(self.target.root(), e))?
                }
            };
            if changed || self.participants_due().is_some_and(|d| d.is_zero()) {
                self.look()?;
            }
        }
    }

    /// One look at the domain: adds the watches (before reading, so that nothing made in
    /// between is missed) and queues what changed since the last look.
    fn look(&mut self) -> Result<(), OpenError> {
        let root = self.target.root().to_path_buf();
        let root_fd = fs::open_dir(&root).map_err(|e| OpenError::io(&root, e))?;
        self.watch.add(root_fd.as_fd()).map_err(|e| OpenError::io(&root, e))?;
        let domains = match &self.target {
            Target::One(d) => vec![d.clone()],
            Target::All(root) => Domain::list(root).map_err(|e| OpenError::io(root, e))?,
        };
        let mut now: BTreeMap<(String, String), Known> = BTreeMap::new();
        for domain in &domains {
            let dir = match domain.open_dir() {
                Ok(dir) => dir,
                Err(OpenError::NotFound { .. }) => continue,
                // One domain that cannot be read (another user's, a symlink) does not stop a
                // watch of them all.
                Err(_) if matches!(self.target, Target::All(_)) => continue,
                Err(e) => return Err(e),
            };
            self.watch.add(dir.fd()).map_err(|e| OpenError::io(dir.path(), e))?;
            let names = dir.channel_names().map_err(|e| OpenError::io(dir.path(), e))?;
            for name in names {
                let known = match admin::inspect_in(&dir, &name) {
                    Ok(r) => Known {
                        kind: Some(r.header.kind),
                        creator: Some((r.header.creator, r.header.created_ns)),
                        live: match self.participants {
                            true => r.live.iter().map(|p| (p.index, p.process, p.role)).collect(),
                            false => BTreeSet::new(),
                        },
                    },
                    Err(OpenError::NotFound { .. }) => continue, // removed meanwhile
                    Err(_) => Known { kind: None, creator: None, live: BTreeSet::new() },
                };
                now.insert((domain.name().to_owned(), name), known);
            }
        }
        self.looked = Instant::now();
        let old = std::mem::take(&mut self.known);
        for (key, was) in &old {
            match now.get(key) {
                Some(is) if is.creator == was.creator && is.kind == was.kind => self.participants(key, was, is),
                _ => self.gone(key, was),
            }
        }
        for (key, is) in &now {
            let same = old.get(key).is_some_and(|was| was.creator == is.creator && was.kind == is.kind);
            if !same {
                self.push(EventKind::Created, key, is.kind, None);
                let empty = Known { kind: is.kind, creator: is.creator, live: BTreeSet::new() };
                self.participants(key, &empty, is);
            }
        }
        self.known = now;
        Ok(())
    }

    /// A channel gone: its participants leave, then it is removed.
    fn gone(&mut self, key: &(String, String), was: &Known) {
        for p in &was.live {
            self.push(EventKind::Left, key, was.kind, Some(*p));
        }
        self.push(EventKind::Removed, key, was.kind, None);
    }

    /// The joins and leaves between two looks at one channel.
    fn participants(&mut self, key: &(String, String), was: &Known, is: &Known) {
        for p in was.live.difference(&is.live) {
            self.push(EventKind::Left, key, is.kind, Some(*p));
        }
        for p in is.live.difference(&was.live) {
            self.push(EventKind::Joined, key, is.kind, Some(*p));
        }
    }

    fn push(
        &mut self,
        what: EventKind,
        (domain, channel): &(String, String),
        kind: Option<Kind>,
        p: Option<Participant>,
    ) {
        let role = p.and_then(|(_, _, role)| kind.and_then(|k| admin::role_name(k, role)));
        self.pending.push_back(DomainEvent {
            what,
            domain: domain.clone(),
            channel: channel.clone(),
            kind,
            role,
            process: p.map(|(_, process, _)| process),
        });
    }
}

impl AsFd for DomainWatch {
    /// The inotify descriptor the watch sleeps on: readable when a name in the domain (or
    /// the domain directory) changed.
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.watch.as_fd()
    }
}

impl Iterator for DomainWatch {
    type Item = Result<DomainEvent, OpenError>;

    /// The next event, waiting as long as it takes (never `None`).
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.next_timeout(Duration::from_secs(3600)) {
                Ok(Some(e)) => return Some(Ok(e)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
