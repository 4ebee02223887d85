//! The process's waiter thread: sleeps in `futex_waitv` on the event words of every channel
//! an async receive is waiting on, and wakes those receives' [`Waker`]s.
//!
//! # Protocol
//!
//! A future that found nothing registers `(word, seen, waker)`, where `seen` is the event
//! word it loaded *before* the receive attempt that found nothing. The thread, under the
//! registry's lock, compares each word with its registrations' `seen` (the waiters flag,
//! bit 0, aside): a difference means a notification came after the attempt, so it wakes the
//! waker at once. Otherwise it sets the waiters flag with `EventWord::arm`, exactly as a
//! blocking waiter does (so senders make their `FUTEX_WAKE` only then), and sleeps on the
//! flagged value. A notification between the future's load and the thread's sleep changes
//! the word: the comparison, the `arm` CAS or the kernel's own comparison sees it. No
//! wake-up is lost; see `event.rs` for the handshake.
//!
//! A private *control* word, always the first entry of the wait, wakes the thread when a
//! registration names a word it is not sleeping on, or an earlier re-check time.
//!
//! # Memory
//!
//! The thread dereferences a channel's word only under the lock and only while a
//! registration names it: a registration belongs to a future that borrows its endpoint
//! (and so its mapping), and is removed under the same lock before the future (and so the
//! borrow) ends. The kernel may still be asleep on a word whose registration is gone; the
//! kernel reads that address itself (a fault is an `EFAULT` return, not a crash), and the
//! next turn drops it.
//!
//! # Limits and fallbacks
//!
//! `futex_waitv` takes 128 words: the control word and 127 channels. Words beyond those are
//! re-checked every millisecond. Without `futex_waitv` (Linux < 5.16, or
//! `SHMBUS_NO_WAITV=1`) the thread re-checks every pending word every millisecond; with no
//! pending receive it sleeps on the control word alone, at no cost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::time::Duration;

use crate::event::EventWord;
use crate::sys::futex::WAITV_MAX;
use crate::sys::{futex_wait, futex_waitv, futex_wake, monotonic_ns, waitv_supported, WaitvEntry};

/// How often words that cannot be slept on exactly (beyond the 128 of one `futex_waitv`, or
/// without it) are re-checked.
const SLICE: Duration = Duration::from_millis(1);

/// One pending receive (or one channel of an async wait).
struct Reg {
    /// The channel's event word, as an address (see the module docs for why it is mapped
    /// whenever it is dereferenced).
    word: usize,
    /// The word as loaded before the attempt that found nothing.
    seen: u32,
    /// `None` once woken, until the future registers again.
    waker: Option<Waker>,
    /// When to wake it regardless, for a re-check (monotonic ns).
    recheck_at: Option<u64>,
}

#[derive(Default)]
struct State {
    regs: HashMap<u64, Reg>,
    next_token: u64,
    /// The words the thread sleeps on (or is about to), set under the lock each turn.
    watching: Vec<usize>,
    /// When the thread's sleep ends (monotonic ns), `None` for never.
    sleep_until: Option<u64>,
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
    REGISTRY.get_or_init(|| Registry { state: Mutex::new(State::default()), control: AtomicU32::new(0) })
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
    /// Asks for `waker` to be woken when `event` moves from `seen`, or at `recheck_at`.
    ///
    /// `event` must stay mapped until this registration is [`cancel`](Self::cancel)led or
    /// dropped: callers hold a borrow of the endpoint for as long as the registration lives.
    pub(crate) fn register(&mut self, event: &EventWord, seen: u32, recheck_at: Option<u64>, waker: &Waker) {
        let r = registry();
        let word = event as *const EventWord as usize;
        let mut st = lock(r);
        let token = match self.token.and_then(|t| st.regs.get_mut(&t).map(|reg| (t, reg))) {
            Some((t, reg)) => {
                reg.word = word;
                reg.seen = seen;
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
                st.regs.insert(t, Reg { word, seen, waker: Some(waker.clone()), recheck_at });
                t
            }
        };
        self.token = Some(token);
        let earlier = recheck_at.is_some_and(|at| st.sleep_until.is_none_or(|until| at < until));
        let kick = !st.watching.contains(&word) || earlier;
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

    /// Keeps the registration (its word stays watched) without a waker: for an adapter that
    /// will wait on the same channel again soon ([`RecvStream`](super::RecvStream)).
    pub(crate) fn idle(&mut self) {
        if let Some(t) = self.token {
            if let Some(reg) = lock(registry()).regs.get_mut(&t) {
                reg.waker = None;
            }
        }
    }

    /// Removes the registration, if any. The thread no longer touches its word after this
    /// returns.
    pub(crate) fn cancel(&mut self) {
        if let Some(t) = self.token.take() {
            let mut st = lock(registry());
            if let Some(reg) = st.regs.remove(&t) {
                // The word's mapping may go now, and another channel may be mapped at the
                // same address later: a registration of that one must wake the thread,
                // whose sleep is keyed to the old file.
                if !st.regs.values().any(|r| r.word == reg.word) {
                    st.watching.retain(|&w| w != reg.word);
                }
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
        let mut sliced = false;
        entries.clear();
        entries.push(WaitvEntry::new(&r.control, gen));
        let State { regs, watching, .. } = &mut *st;
        watching.clear();
        for reg in regs.values_mut() {
            // SAFETY: a registration's word is mapped while it is registered: its future
            // borrows the endpoint and removes the registration under this lock before the
            // borrow ends (module docs, "Memory").
            let event = unsafe { &*(reg.word as *const EventWord) };
            let cur = event.load();
            if reg.waker.is_some() {
                if cur | 1 != reg.seen | 1 || reg.recheck_at.is_some_and(|at| at <= now) {
                    to_wake.extend(reg.waker.take());
                    continue;
                }
                if let Some(at) = reg.recheck_at {
                    until = Some(until.map_or(at, |u| u.min(at)));
                }
            }
            // A woken registration keeps its word watched until its future ends: the next
            // receive on the channel then finds the thread already asleep on it.
            if watching.contains(&reg.word) {
                continue;
            }
            if !exact || entries.len() == WAITV_MAX {
                sliced |= reg.waker.is_some();
                continue;
            }
            match event.arm(cur) {
                Some(armed) => {
                    entries.push(WaitvEntry::new(event.word(), armed));
                    watching.push(reg.word);
                }
                // The word moved since `cur`: look again.
                None => {
                    if let Some(w) = reg.waker.take() {
                        to_wake.push(w);
                    }
                }
            }
        }
        if !to_wake.is_empty() {
            // Woken outside the lock (a waker may run code that registers); then a new turn,
            // which scans every registration again before sleeping.
            drop(st);
            for w in to_wake.drain(..) {
                w.wake();
            }
            continue;
        }
        if sliced {
            let at = now.saturating_add(SLICE.as_nanos() as u64);
            until = Some(until.map_or(at, |u| u.min(at)));
        }
        st.sleep_until = until;
        drop(st);
        if exact {
            // SAFETY: entry 0 is the static control word; the others were armed under the
            // lock from registered words. The kernel may find one unmapped by now (its
            // future ended): that is an `EFAULT` return, handled below, not a fault.
            if unsafe { futex_waitv(&entries, until) }.is_err() {
                // EFAULT (a channel unmapped since), or a kernel refusal: rebuild, without
                // turning an error that repeats into a busy loop.
                futex_wait(&r.control, gen, Some(SLICE));
            }
        } else {
            let timeout = until.map(|at| Duration::from_nanos(at.saturating_sub(monotonic_ns())));
            futex_wait(&r.control, gen, timeout);
        }
    }
}
