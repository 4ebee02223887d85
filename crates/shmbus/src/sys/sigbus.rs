//! Containing SIGBUS on shmbus mappings.
//!
//! # The problem
//! A shared file mapping outlives the file's size: when another process shrinks the file
//! (`ftruncate`, `truncate -s 0`), every page of the mapping past the new end of file is
//! gone, and the next load or store there raises `SIGBUS` (`si_code == BUS_ADRERR`), whose
//! default action kills the process (exit status 135). tmpfs raises the same signal when it
//! has no memory left to back a page of a sparse file. No check before the access can rule it
//! out: the file may shrink between the check and the access.
//!
//! # What this module does
//! It contains the fault instead of preventing it:
//!
//! * A **registry** of the live shmbus mappings (address, length, protection, a fault
//!   counter). [`Mapping`](super::Mapping) registers itself when made and removes itself in
//!   `Drop`, before `munmap`. The registry is a linked list of fixed chunks of slots; a slot
//!   is claimed with a compare-and-swap, and a chunk, once linked, is never freed, so the
//!   signal handler can walk the list at any instant without locks. It grows by one chunk of
//!   [`SLOTS_PER_CHUNK`] slots whenever all slots are taken: there is no limit on the number
//!   of mappings, and the memory of the largest number ever live at once is kept.
//! * A **process-wide SIGBUS handler**, installed once, the first time a mapping is made
//!   (`sigaction` with `SA_SIGINFO | SA_ONSTACK | SA_RESTART`; the previous action is saved
//!   first). On a fault (`BUS_ADRERR`) whose address lies inside a registered mapping, it
//!   counts the fault (in the mapping's slot and in a process-wide counter) and maps an
//!   anonymous zero page (`MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED`, with the mapping's own
//!   protection) over the faulting page, then returns: the access is restarted and completes,
//!   reading zeros. A store there lands in that private page and is never seen by another
//!   process. The channel code treats shared memory as untrusted input already, so zeros are
//!   one more value that its validation rejects or waits on;
//!   [`Mapping::was_truncated`](super::Mapping::was_truncated) tells it why.
//! * **Chaining**: any other SIGBUS (another mapping, an address of no mapping, a hardware
//!   memory error, a signal sent with `kill`) goes to the previous action exactly as the
//!   kernel would have delivered it: an `SA_SIGINFO` handler gets the same arguments, a plain
//!   handler the signal number; `SIG_IGN` ignores a sent signal, while a real fault restores
//!   the default action and re-raises (the kernel never lets a fault be ignored); `SIG_DFL`
//!   restores the default action and re-raises, so the process dies by SIGBUS as before.
//!
//! The handler does only async-signal-safe work: atomic loads and read-modify-writes, and
//! raw system calls (`mmap`, `sigaction`, `tgkill` through `raise`). It allocates nothing and
//! takes no lock, and it saves and restores `errno`.
//!
//! # Opting out
//! An application that manages SIGBUS itself sets `SHMBUS_NO_SIGBUS_HANDLER=1` in the
//! environment or calls [`disable_handler`] before opening its first channel. shmbus then
//! never installs its handler (or, if it had, puts the previous action back), and a truncated
//! file kills a reader as it would any program. The application's own handler can still
//! contain faults on shmbus mappings by calling [`contain_fault`] first.
//!
//! # Limits
//! * An application that installs its own SIGBUS handler *after* shmbus replaced it loses the
//!   containment (unless its handler calls [`contain_fault`]); one installed *before* is
//!   chained to.
//! * The previous action is read once, at installation; a handler another thread installs
//!   concurrently with shmbus's first mapping may be missed.
//! * A page that faulted stays a private zero page for the life of the mapping, even if the
//!   file grows again: reopen the channel to see the file again.
//! * Concurrent faults on the same page from two threads each map a zero page; a store made
//!   through the first one may be lost. Both threads read zeros or their own stores, never
//!   the file.

// libc throughout: the handler runs in async-signal context and rustix has no `sigaction`.
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

/// Slots per chunk of the registry.
pub const SLOTS_PER_CHUNK: usize = 128;

/// The environment variable that, set to anything but `0` or the empty string, keeps shmbus
/// from installing its SIGBUS handler.
pub const OPT_OUT_ENV: &str = "SHMBUS_NO_SIGBUS_HANDLER";

// Slot states, in the low two bits of `Slot::state`; the bits above count generations so that
// the handler can tell a slot that changed while it read it (a seqlock).
const FREE: u64 = 0;
const BUSY: u64 = 1;
const LIVE: u64 = 2;
const TAG_MASK: u64 = 3;
const GEN_ONE: u64 = 4;

/// One registered mapping. Its fields are atomics only so that the handler may read them
/// while another thread writes them; the seqlock in `state` says whether a read was
/// consistent.
#[derive(Debug)]
pub(crate) struct Slot {
    state: AtomicU64,
    start: AtomicUsize,
    len: AtomicUsize,
    prot: AtomicUsize,
    faults: AtomicU64,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            state: AtomicU64::new(FREE),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            prot: AtomicUsize::new(0),
            faults: AtomicU64::new(0),
        }
    }

    /// Faults contained in the mapping registered here (while it is registered).
    pub(crate) fn faults(&self) -> u64 {
        // Relaxed: a counter; the handler increments it before it maps the zero page (see
        // `handle`), so a thread that reads the zero page finds it incremented.
        self.faults.load(Ordering::Relaxed)
    }
}

struct Chunk {
    slots: [Slot; SLOTS_PER_CHUNK],
    next: AtomicPtr<Chunk>,
}

impl Chunk {
    const fn new() -> Chunk {
        Chunk { slots: [const { Slot::new() }; SLOTS_PER_CHUNK], next: AtomicPtr::new(ptr::null_mut()) }
    }
}

static FIRST: Chunk = Chunk::new();

/// The chunk after `c`, if linked.
fn next_chunk(c: &'static Chunk) -> Option<&'static Chunk> {
    // Acquire: pairs with the Release compare-exchange that links a chunk in `register`, so
    // the chunk's initialized slots are visible.
    let p = c.next.load(Ordering::Acquire);
    // SAFETY: a linked chunk is a leaked Box, never freed: valid for 'static.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Registers the mapping `start..start+len` with protection `prot` (for the zero pages the
/// handler maps over it), installing the handler on first use. Returns the slot, to pass to
/// [`unregister`] before the range is unmapped.
pub(crate) fn register(start: *mut u8, len: usize, prot: libc::c_int) -> &'static Slot {
    ensure_installed();
    let mut chunk: &'static Chunk = &FIRST;
    loop {
        for slot in &chunk.slots {
            // Relaxed first look; the compare-exchange decides.
            let s = slot.state.load(Ordering::Relaxed);
            if s & TAG_MASK != FREE {
                continue;
            }
            // Acquire: pairs with the Release store of FREE in `unregister`, so the previous
            // owner's writes are done before ours.
            if slot.state.compare_exchange(s, s | BUSY, Ordering::Acquire, Ordering::Relaxed).is_err() {
                continue;
            }
            slot.start.store(start as usize, Ordering::Relaxed);
            // The kernel maps whole pages: a fault in the last, partly used page is ours too.
            slot.len.store(len.div_ceil(super::page_size()) * super::page_size(), Ordering::Relaxed);
            slot.prot.store(prot as usize, Ordering::Relaxed);
            slot.faults.store(0, Ordering::Relaxed);
            // Release: pairs with the Acquire load of `state` in `find`, publishing the
            // fields above.
            slot.state.store((s & !TAG_MASK) + GEN_ONE + LIVE, Ordering::Release);
            return slot;
        }
        chunk = match next_chunk(chunk) {
            Some(next) => next,
            None => {
                let fresh = Box::into_raw(Box::new(Chunk::new()));
                // Release: pairs with the Acquire load in `next_chunk`.
                match chunk.next.compare_exchange(ptr::null_mut(), fresh, Ordering::Release, Ordering::Acquire) {
                    // SAFETY: just linked; never freed from now on.
                    Ok(_) => unsafe { &*fresh },
                    Err(theirs) => {
                        // SAFETY: `fresh` came from Box::into_raw above and was not linked.
                        drop(unsafe { Box::from_raw(fresh) });
                        // SAFETY: another thread linked this leaked chunk; never freed.
                        unsafe { &*theirs }
                    }
                }
            }
        };
    }
}

/// Removes a registration made by [`register`]. Call before unmapping the range, so that a
/// fault on whatever is mapped there next is never taken for one of ours.
pub(crate) fn unregister(slot: &'static Slot) {
    let s = slot.state.load(Ordering::Relaxed);
    debug_assert_eq!(s & TAG_MASK, LIVE);
    // Release: pairs with the Acquire compare-exchange in `register` (the next owner) and
    // makes the generation change visible to `find`'s second load.
    slot.state.store((s & !TAG_MASK) + GEN_ONE + FREE, Ordering::Release);
}

/// Whether `start..start+len` lies inside one live registration: in a mapping shmbus made
/// (a channel's segment, a journal file, a ring), not in the heap.
pub(crate) fn covers(start: usize, len: usize) -> bool {
    find(start).is_some_and(|(s, l, _, _)| start.checked_add(len).is_some_and(|end| end <= s + l))
}

/// The live registration containing `addr`: (start, len, prot, slot).
fn find(addr: usize) -> Option<(usize, usize, libc::c_int, &'static Slot)> {
    let mut chunk: &'static Chunk = &FIRST;
    loop {
        for slot in &chunk.slots {
            // Acquire: pairs with the Release store of LIVE in `register`.
            let s1 = slot.state.load(Ordering::Acquire);
            if s1 & TAG_MASK != LIVE {
                continue;
            }
            let start = slot.start.load(Ordering::Relaxed);
            let len = slot.len.load(Ordering::Relaxed);
            let prot = slot.prot.load(Ordering::Relaxed) as libc::c_int;
            // Acquire fence: the field loads above happen before the second load of
            // `state` (the seqlock reader's check).
            fence(Ordering::Acquire);
            if slot.state.load(Ordering::Relaxed) != s1 {
                continue;
            }
            if addr >= start && addr - start < len {
                return Some((start, len, prot, slot));
            }
        }
        chunk = next_chunk(chunk)?;
    }
}

// ---------------------------------------------------------------------------------------
// The handler

/// Faults contained since the process started, in all mappings.
static FAULTS: AtomicU64 = AtomicU64::new(0);
/// The page size, set before the handler is installed.
static PAGE: AtomicUsize = AtomicUsize::new(0);
/// Whether our handler is the installed one.
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Set by [`disable_handler`] (or the environment variable): never install.
static DISABLED: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// The action that was installed before ours, written once before ours is installed and
/// only read afterwards.
struct Previous {
    action: UnsafeCell<MaybeUninit<libc::sigaction>>,
    ready: AtomicBool,
}

// SAFETY: `action` is written once, inside `INSTALL.call_once`, before `ready` is set with
// Release; it is read only after an Acquire load of `ready` returned true.
unsafe impl Sync for Previous {}

static PREVIOUS: Previous = Previous { action: UnsafeCell::new(MaybeUninit::uninit()), ready: AtomicBool::new(false) };

impl Previous {
    fn get(&self) -> Option<&libc::sigaction> {
        // Acquire: pairs with the Release store of `ready` in `install`.
        if !self.ready.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: written and initialized before `ready` was set; never written again.
        Some(unsafe { (*self.action.get()).assume_init_ref() })
    }
}

/// Faults on shmbus mappings contained in this process so far (each is one page of a
/// mapping whose file shrank, or that tmpfs could not back, replaced by zeros).
#[inline]
pub fn contained_faults() -> u64 {
    FAULTS.load(Ordering::Relaxed)
}

/// Whether shmbus's SIGBUS handler is installed in this process.
pub fn handler_installed() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

/// Whether the application opted out of shmbus's SIGBUS handler
/// ([`disable_sigbus_handler`](crate::disable_sigbus_handler) or `SHMBUS_NO_SIGBUS_HANDLER`).
pub fn handler_disabled() -> bool {
    DISABLED.load(Ordering::SeqCst) || opted_out_by_env()
}

/// Keeps shmbus from installing its SIGBUS handler, for applications that manage SIGBUS
/// themselves (the same as setting `SHMBUS_NO_SIGBUS_HANDLER=1`). Call it before opening
/// the first channel. If the handler is installed already, the action it replaced is put
/// back, unless someone replaced shmbus's handler since (then it is left alone).
///
/// Afterwards a truncated channel file kills a process that touches it, as it kills any
/// program, unless the application's own handler calls [`contain_fault`].
pub fn disable_handler() {
    DISABLED.store(true, Ordering::SeqCst);
    // Run the Once if it has not run, so that a later mapping does not install.
    INSTALL.call_once(|| {});
    if !INSTALLED.swap(false, Ordering::AcqRel) {
        return;
    }
    let Some(prev) = PREVIOUS.get() else { return };
    // SAFETY: reading the current action into a local.
    let mut cur: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: sigaction with a null new action only reads the current one into `cur`.
    if unsafe { libc::sigaction(libc::SIGBUS, ptr::null(), &mut cur) } != 0 {
        return;
    }
    if cur.sa_sigaction == on_sigbus as *const () as libc::sighandler_t {
        // SAFETY: `prev` is the action read from the kernel at installation.
        unsafe { libc::sigaction(libc::SIGBUS, prev, ptr::null_mut()) };
    }
}

fn opted_out_by_env() -> bool {
    std::env::var_os(OPT_OUT_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Installs the handler unless the application opted out; runs once per process.
pub(crate) fn ensure_installed() {
    INSTALL.call_once(|| {
        if DISABLED.load(Ordering::SeqCst) || opted_out_by_env() {
            DISABLED.store(true, Ordering::SeqCst);
            return;
        }
        PAGE.store(super::page_size(), Ordering::Relaxed);
        // SAFETY: sigaction with a null new action only reads the current one.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `old` is a valid out-pointer.
        if unsafe { libc::sigaction(libc::SIGBUS, ptr::null(), &mut old) } != 0 {
            return; // cannot read it: leave SIGBUS alone
        }
        // SAFETY: written once, here, before `ready` is published; nobody reads it before.
        unsafe { (*PREVIOUS.action.get()).write(old) };
        // Release: pairs with the Acquire load in `Previous::get`.
        PREVIOUS.ready.store(true, Ordering::Release);

        // SAFETY: a zeroed sigaction is a valid starting point (empty flags); the fields
        // that matter are set below.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        // SAFETY: `sa_mask` is a valid sigset_t owned by `new`. SIGBUS itself is blocked
        // while the handler runs (no SA_NODEFER).
        unsafe { libc::sigemptyset(&mut new.sa_mask) };
        // SAFETY: `new` is a fully initialized action whose handler has the SA_SIGINFO
        // signature.
        if unsafe { libc::sigaction(libc::SIGBUS, &new, ptr::null_mut()) } == 0 {
            INSTALLED.store(true, Ordering::Release);
        }
    });
}

/// The installed handler.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: errno is thread-local and always valid to read.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: `info` is the kernel's siginfo for this delivery.
    if !unsafe { contain_fault(info) } {
        // SAFETY: same arguments as the kernel gave us.
        unsafe { chain(sig, info, ctx) };
    }
    // SAFETY: errno is thread-local; restoring it is what an interrupted function expects.
    unsafe { *libc::__errno_location() = saved };
}

/// If `info` describes a fault (`BUS_ADRERR`) inside a live shmbus mapping, replaces the
/// faulting page with a zero page of the mapping's protection, counts it, and returns true:
/// returning from the signal handler then restarts the access, which completes. Returns false
/// for anything else, which the caller handles as it would without shmbus.
///
/// For applications that keep their own SIGBUS handler
/// ([`disable_sigbus_handler`](crate::disable_sigbus_handler)): call this first from it and
/// return at once when it says true. Async-signal-safe.
///
/// # Safety
/// `info` must be null or point to a valid `siginfo_t`, as the kernel passes to an
/// `SA_SIGINFO` handler for SIGBUS.
pub unsafe fn contain_fault(info: *const libc::siginfo_t) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: the caller guarantees `info` is valid.
    let info = unsafe { &*info };
    if info.si_signo != libc::SIGBUS || info.si_code != libc::BUS_ADRERR {
        // Sent with kill/tgkill/sigqueue (si_code <= 0), or another cause (alignment, a
        // hardware memory error): not ours to hide.
        return false;
    }
    // SAFETY: for a SIGBUS with a fault si_code, `si_addr` is the field the kernel filled.
    let addr = unsafe { info.si_addr() } as usize;
    let Some((start, len, prot, slot)) = find(addr) else { return false };
    let page = match PAGE.load(Ordering::Relaxed) {
        0 => 4096,
        p => p,
    };
    let at = addr & !(page - 1);
    // The registered range is whole pages (mmap results); stay inside it regardless.
    if at < start || at + page > start + len {
        return false;
    }
    // Count before mapping: a thread that reads the zero page afterwards then sees the count
    // (the mmap below is a full barrier in practice: it changes this process's page tables).
    slot.faults.fetch_add(1, Ordering::SeqCst);
    FAULTS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: `at..at+page` lies inside a live shmbus mapping (registered and not yet
    // unregistered, and the access that faulted is a borrow of it), so MAP_FIXED replaces
    // only pages shmbus owns; the replacement is an anonymous private zero page.
    // The raw system call (every argument widened to a full register), not the libc wrapper,
    // which tools such as sanitizers intercept.
    let p = unsafe {
        libc::syscall(
            libc::SYS_mmap,
            at as libc::c_long,
            page as libc::c_long,
            prot as libc::c_long,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED) as libc::c_long,
            -1 as libc::c_long,
            0 as libc::c_long,
        )
    };
    // On failure (no memory for a page table) returning would fault again for ever: let the
    // previous action have it.
    p as usize == at
}

/// Delivers a SIGBUS we do not contain to the action that was installed before ours, as the
/// kernel would have.
///
/// # Safety
/// The arguments are those the kernel passed to the handler.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // A fault (positive si_code) cannot be ignored: the kernel kills the process whatever the
    // action; a signal sent with kill (si_code <= 0) can.
    // SAFETY: `info` is null or valid (the kernel's).
    let is_fault = !info.is_null() && unsafe { (*info).si_code } > 0;
    let Some(prev) = PREVIOUS.get() else {
        // SAFETY: async-signal-safe calls; see `die_by_default`.
        unsafe { die_by_default(sig) };
        return;
    };
    let handler = prev.sa_sigaction;
    if handler == libc::SIG_DFL {
        // SAFETY: as above.
        unsafe { die_by_default(sig) };
    } else if handler == libc::SIG_IGN {
        if is_fault {
            // SAFETY: as above.
            unsafe { die_by_default(sig) };
        }
    } else {
        if prev.sa_flags & libc::SA_RESETHAND != 0 {
            // A one-shot handler: the kernel would have reset the action before calling it.
            // SAFETY: a zeroed sigaction is SIG_DFL with no flags.
            let dfl: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: installs the default action; `dfl` is valid.
            unsafe { libc::sigaction(sig, &dfl, ptr::null_mut()) };
        }
        if prev.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: the previous action declared the SA_SIGINFO signature; it gets the
            // kernel's own arguments.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(handler) };
            f(sig, info, ctx);
        } else {
            // SAFETY: a handler without SA_SIGINFO has the one-argument signature.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            f(sig);
        }
    }
}

/// Restores the default action for `sig` and raises it again: it is delivered as soon as the
/// handler returns (the signal is blocked while it runs), and kills the process as it would
/// have without shmbus (for a fault, the restarted access also faults again).
///
/// # Safety
/// Async-signal-safe; call only from the SIGBUS handler.
unsafe fn die_by_default(sig: libc::c_int) {
    // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask and no flags.
    let dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: installs the default action from a valid struct.
    unsafe { libc::sigaction(sig, &dfl, ptr::null_mut()) };
    INSTALLED.store(false, Ordering::Release);
    // SAFETY: raise is async-signal-safe.
    unsafe { libc::raise(sig) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake address in the kernel's half of the address space, where no user mapping can
    /// be: registering it never shadows a real mapping of a concurrent test.
    fn fake(i: usize) -> *mut u8 {
        (0xffff_8000_0000_0000usize + i * (1 << 20)) as *mut u8
    }

    #[test]
    fn registry_finds_and_forgets() {
        let start = fake(0);
        let slot = register(start, 64, libc::PROT_READ);
        let (s, l, p, found) = find(start as usize + 10).expect("registered");
        assert_eq!((s, l, p), (start as usize, crate::sys::page_size(), libc::PROT_READ));
        assert!(ptr::eq(found, slot));
        assert!(find(start as usize + crate::sys::page_size()).is_none());
        unregister(slot);
        assert!(find(start as usize + 10).is_none());
    }

    #[test]
    fn registry_grows_past_one_chunk() {
        let n = SLOTS_PER_CHUNK * 2 + 3;
        let slots: Vec<_> = (1..=n).map(|i| register(fake(i), 16, libc::PROT_READ)).collect();
        for i in 1..=n {
            let (s, ..) = find(fake(i) as usize + 3).expect("every registration is found");
            assert_eq!(s, fake(i) as usize);
        }
        for s in slots {
            unregister(s);
        }
        assert!(find(fake(n) as usize).is_none());
    }

    #[test]
    fn a_signal_sent_with_kill_is_not_contained() {
        // SAFETY: a zeroed siginfo is a valid value; we fill the fields that are read.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        info.si_signo = libc::SIGBUS;
        info.si_code = 0; // SI_USER
                          // SAFETY: `info` is a valid siginfo.
        assert!(!unsafe { contain_fault(&info) });
        // SAFETY: null is allowed.
        assert!(!unsafe { contain_fault(ptr::null()) });
    }
}
