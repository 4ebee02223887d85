//! Process identity and liveness.
//!
//! A pid alone is not an identity: pids are reused. shmbus names a process by its pid *and*
//! its start time (field 22 of `/proc/<pid>/stat`, clock ticks since boot). A process is
//! alive when `/proc/<pid>/stat` exists, shows the same start time, and is not a zombie.

use std::io;

use rustix::io::Errno;
use rustix::thread::CpuSet;

/// A process: pid plus start time, which together never repeat within one boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessId {
    /// The process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (0 if it could not be read).
    pub start_time: u64,
}

impl ProcessId {
    /// The calling process. Cached: pid and start time never change for a process
    /// (a forked child has a new pid, which invalidates the cache).
    pub fn current() -> ProcessId {
        use std::sync::Mutex;
        static CACHE: Mutex<Option<ProcessId>> = Mutex::new(None);
        let pid = rustix::process::getpid().as_raw_nonzero().get() as u32;
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = *cache {
            if id.pid == pid {
                return id;
            }
        }
        let start_time = read_stat(pid).map(|s| s.start_time).unwrap_or(0);
        let id = ProcessId { pid, start_time };
        *cache = Some(id);
        id
    }
}

struct Stat {
    state: u8,
    start_time: u64,
}

fn read_stat(pid: u32) -> io::Result<Stat> {
    let text = std::fs::read(format!("/proc/{pid}/stat"))?;
    parse_stat(&text).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable /proc stat"))
}

/// Parses `pid (comm) S ... starttime ...`. `comm` may hold spaces and parentheses, so the
/// fields are counted from the *last* `)`.
fn parse_stat(text: &[u8]) -> Option<Stat> {
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(text.get(close + 1..)?).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.bytes().next()?;
    // After the state (field 3) the start time is field 22: 18 more fields on.
    let start_time = fields.nth(18)?.parse().ok()?;
    Some(Stat { state, start_time })
}

/// Whether the process `id` is still running (a zombie counts as dead).
///
/// A `start_time` of 0 means "unknown": then only the pid is checked.
pub fn process_is_alive(id: ProcessId) -> bool {
    if id.pid == 0 {
        return false;
    }
    match read_stat(id.pid) {
        Ok(stat) => {
            let same = id.start_time == 0 || stat.start_time == id.start_time;
            same && stat.state != b'Z' && stat.state != b'X'
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        // Unreadable /proc (hidepid, other namespace): fall back to kill(pid, 0).
        // A pid beyond `i32::MAX` names no process (and must not reach kill as a negative
        // number, which would name a process group).
        Err(_) => match i32::try_from(id.pid).ok().and_then(rustix::process::Pid::from_raw) {
            // Signal 0 performs only the existence and permission check.
            Some(pid) => matches!(rustix::process::test_kill_process(pid), Ok(()) | Err(Errno::PERM)),
            None => false,
        },
    }
}

/// Fills `buf` with random bytes from the kernel (`getrandom(2)`, flags 0: waits for the
/// entropy pool once at boot, then never blocks). An error if the call fails or returns
/// fewer bytes than asked (possible above 256 bytes); the caller picks a fallback.
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let n = rustix::rand::getrandom(&mut *buf, rustix::rand::GetRandomFlags::empty())?;
    if n != buf.len() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "getrandom returned fewer bytes than asked"));
    }
    Ok(())
}

/// Restricts the calling thread to the CPUs `cpus` (`sched_setaffinity(2)`). CPUs at or
/// beyond `CPU_SETSIZE` are ignored. An error (such as `EINVAL` for a set with no usable
/// CPU) leaves the thread's mask unchanged.
pub fn set_cpu_affinity(cpus: &[usize]) -> io::Result<()> {
    let mut set = CpuSet::new();
    for &cpu in cpus.iter().filter(|&&c| c < CpuSet::MAX_CPU) {
        set.set(cpu);
    }
    // `None`: the calling thread.
    Ok(rustix::thread::sched_setaffinity(None, &set)?)
}

/// Registers fork handlers (`pthread_atfork`): `prepare` runs in the forking thread just
/// before a `fork`, `parent` and `child` just after it in each process. Returns whether they
/// were registered (it fails only on `ENOMEM`). The handlers live for the whole program; they
/// must not unwind, and `child` may only do what is safe in a forked child of a threaded
/// program.
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
pub(crate) fn at_fork(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) -> bool {
    // SAFETY: three plain function pointers that live for the whole program; registering
    // them has no other effect.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_comm_with_spaces_and_parens() {
        let line = b"1234 (a b) c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 999 20 21\n";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.state, b'S');
        assert_eq!(s.start_time, 999);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_stat(b"").is_none());
        assert!(parse_stat(b"12 (x) S 1 2").is_none());
        assert!(parse_stat(b"no paren at all").is_none());
    }

    #[test]
    fn self_is_alive_and_stale_identity_is_not() {
        let me = ProcessId::current();
        assert!(me.start_time > 0);
        assert!(process_is_alive(me));
        assert!(!process_is_alive(ProcessId { pid: me.pid, start_time: me.start_time + 1 }));
        assert!(!process_is_alive(ProcessId { pid: 0, start_time: 0 }));
    }

    #[test]
    fn reaped_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_is_alive(ProcessId { pid, start_time: 0 }));
    }
}
