//! Futex wait and wake on words in shared memory, and `futex_waitv` for waiting on many.
//!
//! All operations here are *shared* futexes (no `FUTEX_PRIVATE_FLAG`): the words live in
//! `MAP_SHARED` mappings and the waiter and waker are usually different processes. The kernel
//! keys a shared futex by (inode, page offset), so two mappings of one file at different
//! addresses still meet on the same futex.

use std::io;
use std::sync::atomic::{AtomicI8, AtomicU32, Ordering};
use std::time::Duration;

use rustix::io::Errno;
use rustix::thread::futex::{self, ClockId, Timespec};

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// Woken, or the word already differed from the expected value, or a signal arrived:
    /// the caller must re-check its condition either way.
    Woken,
    /// For `futex_waitv`: the index of the word that woke us.
    WokenAt(usize),
    /// The timeout passed.
    TimedOut,
}

fn timespec(d: Duration) -> Timespec {
    Timespec { tv_sec: d.as_secs().min(i64::MAX as u64) as i64, tv_nsec: i64::from(d.subsec_nanos()) }
}

/// Sleeps while `*word == expected`, at most `timeout` (relative) if given.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> WaitOutcome {
    let ts = timeout.map(timespec);
    // Shared (no `Flags::PRIVATE`): the word lives in a mapping shared across processes.
    match futex::wait(word, futex::Flags::empty(), expected, ts.as_ref()) {
        Ok(()) => WaitOutcome::Woken,
        Err(Errno::TIMEDOUT) => WaitOutcome::TimedOut,
        // EAGAIN: value already changed. EINTR: signal. Either way: re-check.
        Err(_) => WaitOutcome::Woken,
    }
}

/// Wakes up to `n` waiters sleeping on `word`. Returns how many were woken.
pub fn futex_wake(word: &AtomicU32, n: u32) -> usize {
    // Shared (no `Flags::PRIVATE`), as in `futex_wait`.
    futex::wake(word, futex::Flags::empty(), n.min(i32::MAX as u32)).unwrap_or(0)
}

/// One entry of a `futex_waitv` call: the kernel's `struct futex_waitv`.
#[repr(transparent)]
#[derive(Debug, Clone, Copy)]
pub struct WaitvEntry(futex::Wait);

/// Most words one `futex_waitv` call accepts (`FUTEX_WAITV_MAX`).
pub const WAITV_MAX: usize = 128;

impl WaitvEntry {
    /// An entry that sleeps while `*word == expected`.
    ///
    /// The entry holds the word's address: it must only be passed to [`futex_waitv`] while the
    /// word is still mapped.
    pub fn new(word: &AtomicU32, expected: u32) -> Self {
        let mut w = futex::Wait::new();
        w.val = u64::from(expected);
        w.uaddr = futex::WaitPtr::new(word.as_ptr().cast());
        // A 32-bit word; no `WaitFlags::PRIVATE`: words are shared.
        w.flags = futex::WaitFlags::SIZE_U32;
        Self(w)
    }

    /// [`WaitvEntry::new`] from an address that is not dereferenced here: for a waiter that
    /// may find the word unmapped by the time it waits (the kernel then fails the wait with
    /// `EFAULT`, see [`futex_waitv`]).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub fn from_ptr(word: *const AtomicU32, expected: u32) -> Self {
        let mut w = futex::Wait::new();
        w.val = u64::from(expected);
        w.uaddr = futex::WaitPtr::new(word.cast_mut().cast());
        w.flags = futex::WaitFlags::SIZE_U32;
        Self(w)
    }
}

/// What [`futex_probe`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
pub enum Probe {
    /// The word holds the expected value (or a signal interrupted the probe: ask again).
    Same,
    /// The word holds another value.
    Differs,
    /// Nothing is mapped at the address any more.
    Unmapped,
}

/// Asks the kernel whether the futex word at address `word` still holds `expected`: a shared
/// `FUTEX_WAIT` that times out at once. The kernel reads the word with its own fault
/// handling, so this is safe for an address whose mapping may be gone (a dangling address
/// gives [`Probe::Unmapped`]); nothing is written, and nothing is dereferenced here (hence
/// an address, not a pointer).
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
pub fn futex_probe(word: usize, expected: u32) -> Probe {
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: FUTEX_WAIT only reads `*word`, in the kernel, which turns a fault into EFAULT;
    // `zero` outlives the call; the unused arguments are null/zero as futex(2) allows.
    // (rustix's futex takes `&AtomicU32`, which would claim the word is mapped.)
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const u32,
            libc::FUTEX_WAIT,
            expected,
            &zero as *const libc::timespec,
            0usize,
            0u32,
        )
    };
    if r == 0 {
        return Probe::Same;
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN) => Probe::Differs,
        Some(libc::EFAULT) => Probe::Unmapped,
        _ => Probe::Same,
    }
}

/// Sleeps until any of `entries` is woken or differs from its expected value, or until the
/// absolute `CLOCK_MONOTONIC` deadline `deadline_ns` (if given).
///
/// # Safety
/// Every entry must have been built by [`WaitvEntry::new`] from a word that is still mapped
/// for the whole call, or by [`WaitvEntry::from_ptr`]: the kernel only reads the words, with
/// its own fault handling, so a word unmapped since fails the call with `EFAULT` (and a word
/// of another mapping at the same address is merely waited on).
pub unsafe fn futex_waitv(entries: &[WaitvEntry], deadline_ns: Option<u64>) -> io::Result<WaitOutcome> {
    assert!(entries.len() <= WAITV_MAX, "futex_waitv takes at most {WAITV_MAX} words");
    let ts = deadline_ns.map(|ns| timespec(Duration::from_nanos(ns)));
    // SAFETY: `WaitvEntry` is a `repr(transparent)` wrapper of `futex::Wait`, so the two
    // slices have the same layout and length.
    let waiters = unsafe { std::slice::from_raw_parts(entries.as_ptr().cast::<futex::Wait>(), entries.len()) };
    // The caller guarantees every address is mapped for the call.
    match futex::waitv(waiters, futex::WaitvFlags::empty(), ts.as_ref(), ClockId::Monotonic) {
        Ok(i) => Ok(WaitOutcome::WokenAt(i)),
        Err(Errno::TIMEDOUT) => Ok(WaitOutcome::TimedOut),
        Err(Errno::AGAIN) | Err(Errno::INTR) => Ok(WaitOutcome::Woken),
        Err(e) => Err(e.into()),
    }
}

/// Whether this kernel has `futex_waitv` (Linux ≥ 5.16). Probed once.
///
/// Setting the environment variable `SHMBUS_NO_WAITV=1` forces the fallback, so tests can
/// exercise it on any kernel.
pub fn waitv_supported() -> bool {
    // -1 unknown, 0 no, 1 yes
    static STATE: AtomicI8 = AtomicI8::new(-1);
    match STATE.load(Ordering::Relaxed) {
        0 => false,
        1 => true,
        _ => {
            let forced_off = std::env::var_os("SHMBUS_NO_WAITV").is_some_and(|v| v != "0");
            let yes = !forced_off && {
                // A zero-length call is rejected with EINVAL where the syscall exists, ENOSYS
                // where it does not.
                let r = futex::waitv(&[], futex::WaitvFlags::empty(), None, ClockId::Monotonic);
                r != Err(Errno::NOSYS)
            };
            STATE.store(yes as i8, Ordering::Relaxed);
            yes
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_returns_at_once_on_a_changed_word_and_times_out_otherwise() {
        let word = AtomicU32::new(1);
        assert_eq!(futex_wait(&word, 0, Some(Duration::from_secs(5))), WaitOutcome::Woken);
        assert_eq!(futex_wait(&word, 1, Some(Duration::from_millis(1))), WaitOutcome::TimedOut);
        assert_eq!(futex_wake(&word, 1), 0, "nobody waits");
    }

    #[test]
    fn probe_tells_same_from_differs_from_unmapped() {
        let word = AtomicU32::new(5);
        let at = word.as_ptr() as usize;
        assert_eq!(futex_probe(at, 5), Probe::Same);
        assert_eq!(futex_probe(at, 6), Probe::Differs);
        // The first page is never mapped.
        assert_eq!(futex_probe(64, 0), Probe::Unmapped);
    }

    #[test]
    fn wake_reaches_a_waiter() {
        let word = std::sync::Arc::new(AtomicU32::new(0));
        let w = word.clone();
        let waiter = std::thread::spawn(move || {
            while w.load(Ordering::Acquire) == 0 {
                futex_wait(&w, 0, Some(Duration::from_secs(10)));
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        word.store(1, Ordering::Release);
        futex_wake(&word, u32::MAX);
        waiter.join().unwrap();
    }

    #[test]
    fn waitv_reports_changed_words_and_deadlines() {
        if !waitv_supported() {
            eprintln!("futex_waitv is not available here: nothing to check");
            return;
        }
        let (a, b) = (AtomicU32::new(0), AtomicU32::new(7));
        let entries = [WaitvEntry::new(&a, 0), WaitvEntry::new(&b, 7)];
        // SAFETY: both words live for the whole call.
        let past = unsafe { futex_waitv(&entries, Some(crate::sys::monotonic_ns())) }.unwrap();
        assert_eq!(past, WaitOutcome::TimedOut);
        let changed = [WaitvEntry::new(&a, 0), WaitvEntry::new(&b, 8)];
        // SAFETY: as above.
        let r = unsafe { futex_waitv(&changed, Some(crate::sys::monotonic_ns() + 5_000_000_000)) }.unwrap();
        assert_eq!(r, WaitOutcome::Woken, "EAGAIN: a word already differs");
    }
}
