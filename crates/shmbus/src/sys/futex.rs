//! Futex wait and wake on words in shared memory, and `futex_waitv` for waiting on many.
//!
//! All operations here are *shared* futexes (no `FUTEX_PRIVATE_FLAG`): the words live in
//! `MAP_SHARED` mappings and the waiter and waker are usually different processes. The kernel
//! keys a shared futex by (inode, page offset), so two mappings of one file at different
//! addresses still meet on the same futex.

use std::io;
use std::sync::atomic::{AtomicI8, AtomicU32, Ordering};
use std::time::Duration;

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

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// Sleeps while `*word == expected`, at most `timeout` (relative) if given.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> WaitOutcome {
    let ts = timeout.map(timespec);
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid aligned u32 for the duration of the call; the kernel only
    // reads it. `ts_ptr` is null or points to a live timespec.
    let r = unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, ts_ptr, std::ptr::null::<u32>(), 0u32)
    };
    if r == 0 {
        return WaitOutcome::Woken;
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::ETIMEDOUT) => WaitOutcome::TimedOut,
        // EAGAIN: value already changed. EINTR: signal. Either way: re-check.
        _ => WaitOutcome::Woken,
    }
}

/// Wakes up to `n` waiters sleeping on `word`. Returns how many were woken.
pub fn futex_wake(word: &AtomicU32, n: u32) -> usize {
    // SAFETY: `word` is a valid aligned u32; FUTEX_WAKE does not access memory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            n.min(i32::MAX as u32),
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    r.max(0) as usize
}

/// One entry of a `futex_waitv` call: the kernel's `struct futex_waitv`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct WaitvEntry {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// `FUTEX2_SIZE_U32`: the waited word is 32 bits. (No `FUTEX2_PRIVATE`: words are shared.)
const FUTEX2_SIZE_U32: u32 = 0x02;
/// Most words one `futex_waitv` call accepts (`FUTEX_WAITV_MAX`).
pub const WAITV_MAX: usize = 128;
const SYS_FUTEX_WAITV: libc::c_long = 449;

impl WaitvEntry {
    /// An entry that sleeps while `*word == expected`.
    ///
    /// The entry holds the word's address: it must only be passed to [`futex_waitv`] while the
    /// word is still mapped.
    pub fn new(word: &AtomicU32, expected: u32) -> Self {
        Self { val: expected as u64, uaddr: word.as_ptr() as u64, flags: FUTEX2_SIZE_U32, reserved: 0 }
    }
}

/// Sleeps until any of `entries` is woken or differs from its expected value, or until the
/// absolute `CLOCK_MONOTONIC` deadline `deadline_ns` (if given).
///
/// # Safety
/// Every entry must have been built by [`WaitvEntry::new`] from a word that is still mapped
/// for the whole call.
pub unsafe fn futex_waitv(entries: &[WaitvEntry], deadline_ns: Option<u64>) -> io::Result<WaitOutcome> {
    assert!(entries.len() <= WAITV_MAX, "futex_waitv takes at most {WAITV_MAX} words");
    let ts = deadline_ns.map(|ns| timespec(Duration::from_nanos(ns)));
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `entries` is a valid array of `struct futex_waitv` (repr(C), same layout);
    // the caller guarantees every address is mapped; `ts_ptr` is null or a live timespec.
    let r = unsafe {
        libc::syscall(
            SYS_FUTEX_WAITV,
            entries.as_ptr(),
            entries.len() as libc::c_uint,
            0u32,
            ts_ptr,
            libc::CLOCK_MONOTONIC,
        )
    };
    if r >= 0 {
        return Ok(WaitOutcome::WokenAt(r as usize));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ETIMEDOUT) => Ok(WaitOutcome::TimedOut),
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(WaitOutcome::Woken),
        _ => Err(err),
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
                // SAFETY: a null array with zero entries; the kernel reads nothing.
                let r = unsafe {
                    libc::syscall(
                        SYS_FUTEX_WAITV,
                        std::ptr::null::<WaitvEntry>(),
                        0u32,
                        0u32,
                        std::ptr::null::<libc::timespec>(),
                        0,
                    )
                };
                !(r == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS))
            };
            STATE.store(yes as i8, Ordering::Relaxed);
            yes
        }
    }
}
