//! The process's waiter threads: they sleep in `futex_waitv` on the event words of every
//! channel an async receive is waiting on, and wake those receives' [`Waker`]s.
//!
//! # Protocol
//!
//! A future that found nothing *arms* its channel's event word itself, exactly as a blocking
//! receiver does (`EventWord::arm` on the value it loaded before its receive attempt: the
//! waiters flag makes senders' `FUTEX_WAKE` happen), and registers `(word, armed value,
//! waker)`. The thread sleeps in `futex_waitv` on every registered `(word, armed value)` and
//! a private control word. A notification after the future's load changes the word: the
//! future's `arm` fails (it tries again), or the kernel refuses the thread's sleep
//! (`EAGAIN`), or the notifier sees the flag and wakes the thread. No wake-up is lost; see
//! `event.rs` for the handshake.
//!
//! Each of the threads below ("Shards") does this for its own registrations. When the
//! thread wakes, it wakes the wakers of the word that woke it; after `EAGAIN` (some word
//! differs, the kernel does not say which) or a timeout it asks the kernel word by word
//! ([`futex_probe`]). The control word wakes it when a registration names a `(word, value)`
//! it is not asleep on, or an earlier re-check time, unless the thread is awake and about
//! to scan every registration anyway (as it is right after waking futures).
//!
//! # Memory
//!
//! The thread never dereferences a channel's word: only the kernel reads it (`futex_waitv`,
//! [`futex_probe`]), with its own fault handling. So a registration that outlives its
//! endpoint's mapping (a future leaked with `mem::forget`) costs an `EFAULT`, after which
//! its registration is dropped; it cannot crash the process.
//!
//! # Shards
//!
//! `futex_waitv` takes 128 words: a control word and 127 channels. So the registrations are
//! split into *shards* of at most 127 distinct words, each with its own control word and
//! thread; all of a word's registrations are in the shard the word was given to when its
//! first one came (the first shard with room, else a new one), until its last one goes.
//! One lock guards every shard: the threads take it only when they wake. A shard's thread
//! is started by its first registration; with nothing to wait for it sleeps on its control
//! word alone, and after [`IDLE_EXIT`] of that it ends, so a burst of awaits on many
//! channels leaves no threads behind. The shard's next registration starts it again.
//! Without `futex_waitv` (Linux < 5.16, or `SHMBUS_NO_WAITV=1`) each thread probes its
//! shard's words every millisecond instead.
//!
//! # Fork
//!
//! A child made by `fork` has a copy of the registry but not the threads. Handlers installed
//! with `pthread_atfork` when the registry is first used take the registry's lock just
//! before the fork (so the child never inherits it held by a thread) and, in the child,
//! mark every thread as not running: a shard's next registration starts its thread. The
//! registrations copied from the parent stay (a future copied mid-await must still be
//! woken; a spurious wake-up only makes a future poll again).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::time::Duration;

use crate::event::EventWord;
use crate::sys::futex::WAITV_MAX;
use crate::sys::{
    futex_probe, futex_wait, futex_waitv, futex_wake, monotonic_ns, waitv_supported, Probe, WaitOutcome, WaitvEntry,
};

/// How often words that cannot be slept on exactly (without `futex_waitv`) are probed.
const SLICE: Duration = Duration::from_millis(1);

/// The most distinct words one shard holds: one `futex_waitv` less its control word.
const SHARD_WORDS: usize = WAITV_MAX - 1;

/// How long a shard's thread stays with nothing to wait for before it ends (the shard's
/// next registration starts it again): long enough that a process awaiting now and then
/// keeps its thread, short enough that a burst of awaits leaves no threads behind.
const IDLE_EXIT: Duration = Duration::from_secs(5);

/// One pending receive (or one channel of an async wait).
struct Reg {
    /// The channel's event word, as an address (never dereferenced here: module docs).
    word: usize,
    /// The value the future armed the word with.
    armed: u32,
    /// `None` once woken, until the future registers again.
    waker: Option<Waker>,
    /// When to wake it regardless, for a re-check (monotonic ns).
    recheck_at: Option<u64>,
}

/// A word's place: its shard, and how many registrations name it.
struct WordHome {
    shard: usize,
    regs: usize,
}

#[derive(Default)]
struct State {
    shards: Vec<Shard>,
    /// Every registered word's shard.
    homes: HashMap<usize, WordHome>,
    next_token: u64,
}

/// Up to [`SHARD_WORDS`] words' registrations and the thread that sleeps on them.
struct Shard {
    /// Bumped, then woken, when the thread must rebuild its wait. Leaked: the kernel may
    /// read it for as long as the process lives.
    control: &'static AtomicU32,
    regs: HashMap<u64, Reg>,
    /// How many distinct words are given to this shard.
    words: usize,
    /// The `(word, armed value)`s the thread sleeps on (or is about to), in its wait's
    /// order after the control word; set under the lock each turn.
    watching: Vec<(usize, u32)>,
    /// The ones it probes every [`SLICE`] instead (without `futex_waitv`).
    sliced: Vec<(usize, u32)>,
    /// The registrations (token → `(word, armed value)`) the thread's current sleep covers:
    /// only those register again without waking it. Keyed by token, not by address: a
    /// word unmapped and another mapped at its address (a leaked future) is a new token.
    covered: HashMap<u64, (usize, u32)>,
    /// When the thread's sleep ends (monotonic ns), `None` for never.
    sleep_until: Option<u64>,
    /// The thread is awake and will scan every registration before it sleeps again: a
    /// registration made now needs no control wake-up.
    rescan: bool,
    /// Whether the thread runs.
    started: bool,
}

impl Shard {
    fn new() -> Shard {
        Shard {
            control: Box::leak(Box::new(AtomicU32::new(0))),
            regs: HashMap::new(),
            words: 0,
            watching: Vec::new(),
            sliced: Vec::new(),
            covered: HashMap::new(),
            sleep_until: None,
            rescan: false,
            started: false,
        }
    }
}

impl State {
    /// The shard of `word`, counting one more registration of it: the word's shard if it
    /// has one, else the first with room for another word, else a new one.
    fn home(&mut self, word: usize) -> usize {
        if let Some(h) = self.homes.get_mut(&word) {
            h.regs += 1;
            return h.shard;
        }
        let shard = match self.shards.iter().position(|s| s.words < SHARD_WORDS) {
            Some(i) => i,
            None => {
                self.shards.push(Shard::new());
                self.shards.len() - 1
            }
        };
        self.shards[shard].words += 1;
        self.homes.insert(word, WordHome { shard, regs: 1 });
        shard
    }

    /// Counts one registration of `word` less; its last one frees its place in its shard.
    fn leave(&mut self, word: usize) {
        if let Some(h) = self.homes.get_mut(&word) {
            h.regs -= 1;
            if h.regs == 0 {
                let shard = h.shard;
                self.homes.remove(&word);
                self.shards[shard].words -= 1;
            }
        }
    }

    /// Removes registration `token` of shard `shard`, if it is there. Returns the shard's
    /// control word if its thread must be woken ([`kick`]): it sleeps on this registration
    /// and on no other, so that it starts counting towards [`IDLE_EXIT`].
    #[must_use]
    fn remove(&mut self, shard: usize, token: u64) -> Option<&'static AtomicU32> {
        let sh = self.shards.get_mut(shard)?;
        let last = sh.covered.remove(&token).is_some() && sh.covered.is_empty() && !sh.rescan && sh.started;
        let control = sh.control;
        if let Some(reg) = sh.regs.remove(&token) {
            self.leave(reg.word);
        }
        last.then_some(control)
    }
}

/// Wakes a shard's thread to rebuild its wait (without the registry's lock).
fn kick(control: &AtomicU32) {
    // SeqCst: pairs with the SeqCst load of `control` the thread sleeps on.
    control.fetch_add(1, Ordering::SeqCst);
    futex_wake(control, 1);
}

struct Registry {
    state: Mutex<State>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        // The handlers never unwind (see their docs). Failure (ENOMEM) only leaves a forked
        // child as it was without them.
        let _ = crate::sys::process::at_fork(before_fork, after_fork_in_parent, after_fork_in_child);
        Registry { state: Mutex::new(State::default()) }
    })
}

thread_local! {
    /// The registry's lock, held by this thread from just before a `fork` it makes until
    /// just after (module docs, "Fork").
    static HELD_ACROSS_FORK: RefCell<Option<MutexGuard<'static, State>>> = const { RefCell::new(None) };
}

/// `pthread_atfork`'s prepare handler: takes the registry's lock, so that the child's copy
/// of it is not held by a thread the child does not have. Never unwinds: `lock` recovers
/// from poisoning, and the cell is only borrowed by these handlers, one at a time.
extern "C" fn before_fork() {
    // `try_with`: a fork made while this thread's locals are being destroyed forks as if
    // the handlers were not there.
    let _ = HELD_ACROSS_FORK.try_with(|held| *held.borrow_mut() = Some(lock(registry())));
}

/// `pthread_atfork`'s parent handler: releases the lock taken by [`before_fork`].
extern "C" fn after_fork_in_parent() {
    let _ = HELD_ACROSS_FORK.try_with(|held| drop(held.borrow_mut().take()));
}

/// `pthread_atfork`'s child handler: the child has no waiter threads; a shard's next
/// registration starts its thread, which scans every registration of the shard (the
/// parent's copied ones too). Then releases the lock taken by [`before_fork`].
extern "C" fn after_fork_in_child() {
    let _ = HELD_ACROSS_FORK.try_with(|held| {
        if let Some(mut st) = held.borrow_mut().take() {
            for sh in &mut st.shards {
                sh.started = false;
                sh.rescan = false;
                sh.sleep_until = None;
                sh.watching.clear();
                sh.sliced.clear();
                sh.covered.clear();
            }
        }
    });
}

fn lock(r: &Registry) -> MutexGuard<'_, State> {
    // A panic while holding the lock (a waker's `clone` panicking) leaves the state
    // consistent: every change is a single map or vector operation.
    r.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// A future's place in the registry: removed when dropped, so a dropped future leaves
/// nothing behind.
#[derive(Debug, Default)]
pub(crate) struct Registration {
    /// Its shard and token.
    token: Option<(usize, u64)>,
}

impl Registration {
    /// Asks for `waker` to be woken when `event` moves from `armed` (a value the caller
    /// armed it with: `EventWord::arm`), or at `recheck_at`.
    pub(crate) fn register(&mut self, event: &EventWord, armed: u32, recheck_at: Option<u64>, waker: &Waker) {
        let word = event as *const EventWord as usize;
        let mut old_kick = None;
        let mut st = lock(registry());
        // The registration kept from an earlier wait, and its word then, if it is still there
        // and its shard is this word's (a registration moves with its word).
        let kept = self.token.and_then(|(shard, t)| {
            let old = st.shards.get(shard)?.regs.get(&t)?.word;
            (old == word || st.homes.get(&word).is_some_and(|h| h.shard == shard)).then_some((shard, t, old))
        });
        let (shard, token) = match kept {
            Some((shard, t, old)) => {
                if old != word {
                    st.leave(old);
                    st.home(word);
                }
                let reg = st.shards[shard].regs.get_mut(&t).unwrap_or_else(|| unreachable!("kept above"));
                reg.word = word;
                reg.armed = armed;
                reg.recheck_at = recheck_at;
                match &mut reg.waker {
                    Some(w) if w.will_wake(waker) => {}
                    w => *w = Some(waker.clone()),
                }
                (shard, t)
            }
            None => {
                // The old shard's thread, if this leaves it nothing to sleep on, is woken
                // below with this one's (if the two differ).
                old_kick = self.token.take().and_then(|(shard, t)| st.remove(shard, t));
                let t = st.next_token;
                st.next_token += 1;
                let shard = st.home(word);
                st.shards[shard].regs.insert(t, Reg { word, armed, waker: Some(waker.clone()), recheck_at });
                (shard, t)
            }
        };
        self.token = Some((shard, token));
        let sh = &mut st.shards[shard];
        let key = (word, armed);
        let earlier = recheck_at.is_some_and(|at| sh.sleep_until.is_none_or(|until| at < until));
        let wake_thread = !sh.rescan && (sh.covered.get(&token) != Some(&key) || earlier);
        let control = sh.control;
        if !sh.started {
            sh.started =
                std::thread::Builder::new().name("shmbus-async-waiter".into()).spawn(move || run(shard)).is_ok();
        }
        let started = sh.started;
        drop(st);
        if let Some(old) = old_kick.filter(|&old| !std::ptr::eq(old, control)) {
            kick(old);
        }
        if !started {
            // No thread (the process is out of threads): have the future poll again rather
            // than sleep for ever; the next registration tries again.
            waker.wake_by_ref();
        } else if wake_thread {
            kick(control);
        }
    }

    /// Keeps the registration without a waker (the thread leaves it alone): for an adapter
    /// that waits on the same channel again soon ([`RecvStream`](super::RecvStream)) and so
    /// reuses its entry.
    pub(crate) fn idle(&mut self) {
        if let Some((shard, t)) = self.token {
            if let Some(reg) = lock(registry()).shards.get_mut(shard).and_then(|sh| sh.regs.get_mut(&t)) {
                reg.waker = None;
            }
        }
    }

    /// Removes the registration, if any: its waker is not woken after this returns.
    pub(crate) fn cancel(&mut self) {
        if let Some((shard, t)) = self.token.take() {
            // The thread may sleep on the word until its next turn: only the kernel reads
            // it, and any new registration (a new token) wakes the thread to rebuild. It is
            // woken now only if this was all it slept on.
            let last = lock(registry()).remove(shard, t);
            if let Some(control) = last {
                kick(control);
            }
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The number of registrations, for tests.
#[cfg(test)]
pub(crate) fn pending() -> usize {
    lock(registry()).shards.iter().map(|sh| sh.regs.len()).sum()
}

/// The registered words, the words the shards count, and the shards, for tests.
#[cfg(test)]
pub(crate) fn words() -> (usize, usize, usize) {
    let st = lock(registry());
    (st.homes.len(), st.shards.iter().map(|sh| sh.words).sum(), st.shards.len())
}

/// The thread of shard `shard`.
fn run(shard: usize) {
    let r = registry();
    let control = lock(r).shards[shard].control;
    let mut entries: Vec<WaitvEntry> = Vec::with_capacity(16);
    let mut to_wake: Vec<Waker> = Vec::new();
    let mut seen: HashSet<(usize, u32)> = HashSet::new();
    let mut moved: HashMap<usize, Vec<(u32, Probe)>> = HashMap::new();
    let mut gone: Vec<usize> = Vec::new();
    // Since when no registration of the shard has waited (monotonic ns).
    let mut idle_since: Option<u64> = None;
    loop {
        let mut st = lock(r);
        let sh = &mut st.shards[shard];
        // SeqCst: pairs with the SeqCst increment in `register`.
        let gen = control.load(Ordering::SeqCst);
        let exact = waitv_supported();
        let now = monotonic_ns();
        let mut until: Option<u64> = None;
        entries.clear();
        entries.push(WaitvEntry::new(control, gen));
        seen.clear();
        let Shard { regs, watching, sliced, covered, .. } = sh;
        watching.clear();
        sliced.clear();
        covered.clear();
        for (&token, reg) in regs.iter_mut() {
            if reg.waker.is_none() {
                continue;
            }
            if reg.recheck_at.is_some_and(|at| at <= now) {
                to_wake.extend(reg.waker.take());
                continue;
            }
            if let Some(at) = reg.recheck_at {
                until = Some(until.map_or(at, |u| u.min(at)));
            }
            let key = (reg.word, reg.armed);
            covered.insert(token, key);
            if !seen.insert(key) {
                continue;
            }
            // A shard holds at most SHARD_WORDS words, but a word may be registered with
            // two armed values at once (two futures that loaded it at different times).
            if exact && entries.len() < WAITV_MAX {
                entries.push(WaitvEntry::from_ptr(reg.word as *const AtomicU32, reg.armed));
                watching.push(key);
            } else {
                sliced.push(key);
            }
        }
        if !to_wake.is_empty() {
            // Woken outside the lock (a waker may run code that registers); then a new turn.
            sh.rescan = true;
            drop(st);
            to_wake.drain(..).for_each(Waker::wake);
            continue;
        }
        if !sh.sliced.is_empty() {
            let at = now.saturating_add(SLICE.as_nanos() as u64);
            until = Some(until.map_or(at, |u| u.min(at)));
        }
        if sh.covered.is_empty() {
            // Nothing waits: after IDLE_EXIT of that, the thread ends, under the lock, so a
            // registration either wakes it before or starts a new one after.
            let end = idle_since.get_or_insert(now).saturating_add(IDLE_EXIT.as_nanos() as u64);
            if now >= end {
                sh.started = false;
                sh.sleep_until = None;
                sh.rescan = false;
                return;
            }
            until = Some(until.map_or(end, |u| u.min(end)));
        } else {
            idle_since = None;
        }
        sh.sleep_until = until;
        // From here registrations wake the thread (the scan above is the last before the
        // sleep); under the same lock as the scan, so none falls between.
        sh.rescan = false;
        drop(st);
        let outcome = if exact {
            // SAFETY: entry 0 is the shard's leaked control word; the others are registered
            // words, built with `from_ptr`: the kernel reads them with its own fault
            // handling, so a word unmapped since (its future leaked) is an `EFAULT`, handled
            // below.
            unsafe { futex_waitv(&entries, until) }
        } else {
            let timeout = until.map(|at| Duration::from_nanos(at.saturating_sub(monotonic_ns())));
            Ok(futex_wait(control, gen, timeout))
        };
        let mut st = lock(r);
        let sh = &mut st.shards[shard];
        // Which (word, value)s moved, by word: the one that woke us, or ask the kernel for
        // each.
        moved.clear();
        match outcome {
            Ok(WaitOutcome::WokenAt(0)) => {}
            Ok(WaitOutcome::WokenAt(i)) => {
                if let Some(&(word, armed)) = sh.watching.get(i - 1) {
                    moved.entry(word).or_default().push((armed, Probe::Differs));
                }
            }
            // EAGAIN (some word differs), a signal, a timeout (the sliced words are due), or
            // an error (EFAULT: a word is gone).
            _ => {
                for &(word, armed) in sh.watching.iter().chain(sh.sliced.iter()) {
                    match futex_probe(word, armed) {
                        Probe::Same => {}
                        p => moved.entry(word).or_default().push((armed, p)),
                    }
                }
            }
        }
        if !moved.is_empty() {
            sh.regs.retain(|_, reg| {
                let Some(probes) = moved.get(&reg.word) else { return true };
                // Woken: its very (word, value) moved, or its word holds another value now.
                let hits = || probes.iter().filter(|&&(armed, p)| armed == reg.armed || p == Probe::Differs);
                if hits().next().is_none() {
                    return true;
                }
                let unmapped = hits().any(|&(_, p)| p == Probe::Unmapped);
                to_wake.extend(reg.waker.take());
                // A word that is gone takes its registrations along: a live future
                // registers again when polled.
                if unmapped {
                    gone.push(reg.word);
                }
                !unmapped
            });
        }
        // The next turn scans everything: the futures woken now may register meanwhile
        // (after an error the thread naps first, which their registrations cut short).
        sh.rescan = outcome.is_ok();
        for word in gone.drain(..) {
            st.leave(word);
        }
        drop(st);
        to_wake.drain(..).for_each(Waker::wake);
        if outcome.is_err() {
            // Not a busy loop if the kernel keeps refusing the wait for another reason.
            futex_wait(control, gen, Some(SLICE));
        }
    }
}
