//! The process's waiter thread: sleeps in `futex_waitv` on the event words of every channel
//! an async receive is waiting on, and wakes those receives' [`Waker`]s.
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
//! When the thread wakes, it wakes the wakers of the word that woke it; after `EAGAIN` (some
//! word differs, the kernel does not say which) or a timeout it asks the kernel word by word
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
//! # Limits and fallbacks
//!
//! `futex_waitv` takes 128 words: the control word and 127 channels. Words beyond those are
//! probed every millisecond. Without `futex_waitv` (Linux < 5.16, or `SHMBUS_NO_WAITV=1`)
//! the thread probes every registered word every millisecond; with no pending receive it
//! sleeps on the control word alone, at no cost.
//!
//! # Fork
//!
//! A child made by `fork` has a copy of the registry but not the thread. Handlers installed
//! with `pthread_atfork` when the registry is first used take the registry's lock just
//! before the fork (so the child never inherits it held by the thread) and, in the child,
//! mark the thread as not running: the child's first registration starts its own. The
//! registrations copied from the parent stay (a future copied mid-await must still be
//! woken; a spurious wake-up only makes a future poll again).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::time::Duration;

use crate::event::EventWord;
use crate::sys::futex::WAITV_MAX;
use crate::sys::{
    futex_probe, futex_wait, futex_waitv, futex_wake, monotonic_ns, waitv_supported, Probe, WaitOutcome, WaitvEntry,
};

/// How often words that cannot be slept on exactly (beyond the 128 of one `futex_waitv`, or
/// without it) are probed.
const SLICE: Duration = Duration::from_millis(1);

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

#[derive(Default)]
struct State {
    regs: HashMap<u64, Reg>,
    next_token: u64,
    /// The `(word, armed value)`s the thread sleeps on (or is about to), in its wait's
    /// order after the control word; set under the lock each turn.
    watching: Vec<(usize, u32)>,
    /// The ones it probes every [`SLICE`] instead.
    sliced: Vec<(usize, u32)>,
    /// The registrations (token, `(word, armed value)`) the thread's current sleep covers:
    /// only those register again without waking it. Keyed by token, not by address: a
    /// word unmapped and another mapped at its address (a leaked future) is a new token.
    covered: Vec<(u64, (usize, u32))>,
    /// When the thread's sleep ends (monotonic ns), `None` for never.
    sleep_until: Option<u64>,
    /// The thread is awake and will scan every registration before it sleeps again: a
    /// registration made now needs no control wake-up.
    rescan: bool,
    /// Whether the thread runs.
    started: bool,
}

struct Registry {
    state: Mutex<State>,
    /// Bumped, then woken, when the thread must rebuild its wait.
    control: AtomicU32,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        // SAFETY: the handlers are `extern "C"` functions that live for the whole program
        // and never unwind (see their docs); registering them has no other effect.
        // Failure (ENOMEM) only leaves a forked child as it was without them.
        let _ =
            unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_in_parent), Some(after_fork_in_child)) };
        Registry { state: Mutex::new(State::default()), control: AtomicU32::new(0) }
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

/// `pthread_atfork`'s child handler: the child has no waiter thread; its next registration
/// starts one, which scans every registration (the parent's copied ones too). Then releases
/// the lock taken by [`before_fork`].
extern "C" fn after_fork_in_child() {
    let _ = HELD_ACROSS_FORK.try_with(|held| {
        if let Some(mut st) = held.borrow_mut().take() {
            st.started = false;
            st.rescan = false;
            st.sleep_until = None;
            st.watching.clear();
            st.sliced.clear();
            st.covered.clear();
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
    token: Option<u64>,
}

impl Registration {
    /// Asks for `waker` to be woken when `event` moves from `armed` (a value the caller
    /// armed it with: `EventWord::arm`), or at `recheck_at`.
    pub(crate) fn register(&mut self, event: &EventWord, armed: u32, recheck_at: Option<u64>, waker: &Waker) {
        let r = registry();
        let word = event as *const EventWord as usize;
        let mut st = lock(r);
        let token = match self.token.and_then(|t| st.regs.get_mut(&t).map(|reg| (t, reg))) {
            Some((t, reg)) => {
                reg.word = word;
                reg.armed = armed;
                reg.recheck_at = recheck_at;
                match &mut reg.waker {
                    Some(w) if w.will_wake(waker) => {}
                    w => *w = Some(waker.clone()),
                }
                t
            }
            None => {
                let t = st.next_token;
                st.next_token += 1;
                st.regs.insert(t, Reg { word, armed, waker: Some(waker.clone()), recheck_at });
                t
            }
        };
        self.token = Some(token);
        let key = (word, armed);
        let earlier = recheck_at.is_some_and(|at| st.sleep_until.is_none_or(|until| at < until));
        let kick = !st.rescan && (!st.covered.contains(&(token, key)) || earlier);
        if !st.started {
            match std::thread::Builder::new().name("shmbus-async-waiter".into()).spawn(run) {
                Ok(_) => st.started = true,
                Err(_) => {
                    // No thread (the process is out of threads): have the future poll again
                    // rather than sleep for ever; the next registration tries again.
                    drop(st);
                    waker.wake_by_ref();
                    return;
                }
            }
        }
        drop(st);
        if kick {
            // SeqCst: pairs with the SeqCst load of `control` the thread sleeps on.
            r.control.fetch_add(1, Ordering::SeqCst);
            futex_wake(&r.control, 1);
        }
    }

    /// Keeps the registration without a waker (the thread leaves it alone): for an adapter
    /// that waits on the same channel again soon ([`RecvStream`](super::RecvStream)) and so
    /// reuses its entry.
    pub(crate) fn idle(&mut self) {
        if let Some(t) = self.token {
            if let Some(reg) = lock(registry()).regs.get_mut(&t) {
                reg.waker = None;
            }
        }
    }

    /// Removes the registration, if any: its waker is not woken after this returns.
    pub(crate) fn cancel(&mut self) {
        if let Some(t) = self.token.take() {
            let mut st = lock(registry());
            st.regs.remove(&t);
            // The thread may sleep on the word until its next turn: only the kernel reads
            // it, and any new registration (a new token) wakes the thread to rebuild.
            st.covered.retain(|&(c, _)| c != t);
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
    lock(registry()).regs.len()
}

fn run() {
    let r = registry();
    let mut entries: Vec<WaitvEntry> = Vec::with_capacity(16);
    let mut to_wake: Vec<Waker> = Vec::new();
    loop {
        let mut st = lock(r);
        // SeqCst: pairs with the SeqCst increment in `register`.
        let gen = r.control.load(Ordering::SeqCst);
        let exact = waitv_supported();
        let now = monotonic_ns();
        let mut until: Option<u64> = None;
        entries.clear();
        entries.push(WaitvEntry::new(&r.control, gen));
        let State { regs, watching, sliced, covered, .. } = &mut *st;
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
            covered.push((token, key));
            if watching.contains(&key) || sliced.contains(&key) {
                continue;
            }
            if exact && entries.len() < WAITV_MAX {
                entries.push(WaitvEntry::from_ptr(reg.word as *const AtomicU32, reg.armed));
                watching.push(key);
            } else {
                sliced.push(key);
            }
        }
        if !to_wake.is_empty() {
            // Woken outside the lock (a waker may run code that registers); then a new turn.
            st.rescan = true;
            drop(st);
            to_wake.drain(..).for_each(Waker::wake);
            continue;
        }
        if !st.sliced.is_empty() {
            let at = now.saturating_add(SLICE.as_nanos() as u64);
            until = Some(until.map_or(at, |u| u.min(at)));
        }
        st.sleep_until = until;
        // From here registrations wake the thread (the scan above is the last before the
        // sleep); under the same lock as the scan, so none falls between.
        st.rescan = false;
        drop(st);
        let outcome = if exact {
            // SAFETY: entry 0 is the static control word; the others are registered words,
            // built with `from_ptr`: the kernel reads them with its own fault handling, so
            // a word unmapped since (its future leaked) is an `EFAULT`, handled below.
            unsafe { futex_waitv(&entries, until) }
        } else {
            let timeout = until.map(|at| Duration::from_nanos(at.saturating_sub(monotonic_ns())));
            Ok(futex_wait(&r.control, gen, timeout))
        };
        let mut st = lock(r);
        let State { regs, watching, sliced, .. } = &mut *st;
        // Which (word, value)s moved: the one that woke us, or ask the kernel for each.
        let moved = |key: (usize, u32)| futex_probe(key.0, key.1);
        let woken: Vec<((usize, u32), Probe)> = match outcome {
            Ok(WaitOutcome::WokenAt(0)) => Vec::new(),
            Ok(WaitOutcome::WokenAt(i)) => watching.get(i - 1).map(|&k| (k, Probe::Differs)).into_iter().collect(),
            // EAGAIN (some word differs), a signal, a timeout (the sliced words are due), or
            // an error (EFAULT: a word is gone).
            _ => watching
                .iter()
                .chain(sliced.iter())
                .map(|&k| (k, moved(k)))
                .filter(|(_, p)| *p != Probe::Same)
                .collect(),
        };
        for (key, probe) in woken {
            regs.retain(|_, reg| {
                if (reg.word, reg.armed) != key && !(probe == Probe::Differs && reg.word == key.0) {
                    return true;
                }
                to_wake.extend(reg.waker.take());
                // A word that is gone takes its registrations along: a live future
                // registers again when polled.
                probe != Probe::Unmapped
            });
        }
        // The next turn scans everything: the futures woken now may register meanwhile
        // (after an error the thread naps first, which their registrations cut short).
        st.rescan = outcome.is_ok();
        drop(st);
        to_wake.drain(..).for_each(Waker::wake);
        if outcome.is_err() {
            // Not a busy loop if the kernel keeps refusing the wait for another reason.
            futex_wait(&r.control, gen, Some(SLICE));
        }
    }
}
