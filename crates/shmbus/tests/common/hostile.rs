//! The hostile-memory harness shared by the `hostile_*` suites: a writable mapping of a
//! channel file to scribble over, the scribbling loop, the watchdog on each call, and the
//! bounded collection of a child's output.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{child_command, wait_with_deadline, Rng};

/// A channel file mapped shared into this process, for scribbling.
pub struct SharedMap {
    base: *mut u8,
    len: usize,
}

impl SharedMap {
    pub fn new(path: &Path) -> SharedMap {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        // SAFETY: a fresh shared mapping of the whole file; unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        SharedMap { base: p as *mut u8, len }
    }

    /// Stores `v` in the `width`-byte (8 or 4) word at `offset`.
    pub fn store(&self, offset: usize, width: usize, v: u64) {
        assert!(offset + width <= self.len && offset % width == 0);
        // SAFETY: in bounds and aligned (checked above); atomics, as the channel's own accesses.
        unsafe {
            match width {
                8 => (*(self.base.add(offset) as *const AtomicU64)).store(v, Ordering::Relaxed),
                _ => (*(self.base.add(offset) as *const AtomicU32)).store(v as u32, Ordering::Relaxed),
            }
        }
    }

    /// The mapped length (the file's size when mapped).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn load(&self, offset: usize) -> u64 {
        assert!(offset + 8 <= self.len && offset % 8 == 0);
        // SAFETY: in bounds and aligned.
        unsafe { (*(self.base.add(offset) as *const AtomicU64)).load(Ordering::Relaxed) }
    }

    pub fn zero(&self, offset: usize, len: usize) {
        assert!(offset + len <= self.len);
        // SAFETY: in bounds; no process uses the channel while it is restored.
        unsafe { std::ptr::write_bytes(self.base.add(offset), 0, len) };
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// Writes `value(rng, width)` into random words of `words` (offset, width) until `until`, in
/// bursts with pauses that let the children run; returns how many writes.
pub fn scribble(
    map: &SharedMap,
    words: &[(usize, usize)],
    rng: &mut Rng,
    until: Instant,
    mut value: impl FnMut(&mut Rng, usize) -> u64,
) -> u64 {
    let mut n = 0u64;
    while Instant::now() < until {
        for _ in 0..64 {
            let (off, width) = words[rng.below(words.len() as u64) as usize];
            let v = value(rng, width);
            map.store(off, width, v);
            n += 1;
        }
        // Let the children run between bursts (this machine may have two cores).
        std::thread::sleep(Duration::from_micros(50));
    }
    n
}

/// Runs `f` and fails the child (one line, exit 3) if it overran `timeout` by `slack`.
pub fn timed<T>(what: &str, timeout: Duration, slack: Duration, f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let r = f();
    let took = t0.elapsed();
    if took > timeout + slack {
        println!("HUNG: {what} took {took:?} with a timeout of {timeout:?}");
        std::process::exit(3);
    }
    r
}

/// Starts this test binary's `child_entry` as `role` in the scratch root `root`.
pub fn spawn(role: &str, root: &Path) -> Child {
    child_command("child_entry", role, &[("SHMBUS_ROOT", root.display().to_string())])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a child (bounded), and checks it exited 0, not by a signal, having printed at
/// most `limit` bytes; returns its stdout and stderr.
pub fn finish(mut child: Child, role: &str, limit: usize) -> String {
    // Read the pipes while waiting, so a child that prints too much cannot block on them.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = (&mut out).take(limit as u64 * 64).read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = (&mut err).take(limit as u64 * 64).read_to_end(&mut v);
        v
    });
    let st = wait_with_deadline(&mut child, 30, role);
    let (out, err) = (t_out.join().unwrap(), t_err.join().unwrap());
    let text = format!("{}{}", String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    assert!(st.signal().is_none(), "{role} died by signal {:?}: {text}", st.signal());
    assert_eq!(st.code(), Some(0), "{role} failed: {text}");
    assert!(out.len() + err.len() <= limit, "{role} printed {} bytes", out.len() + err.len());
    text
}

/// Replays the committed fuzz corpus `fuzz/corpus/<name>` (at least `min_inputs` files) through
/// `exercise`, then `mutations` random mutations of its inputs: up to `max_appended` junk bytes
/// appended (so later words are reached too), then 1 to 8 bytes changed. The seed comes from
/// `SHMBUS_FUZZ_SEED` (else the clock) and is printed by `Rng` on failure.
pub fn replay_corpus(
    name: &str,
    min_inputs: usize,
    mutations: usize,
    max_appended: u64,
    mut exercise: impl FnMut(&[u8]),
) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(name);
    let mut corpus: Vec<Vec<u8>> =
        std::fs::read_dir(&dir).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
    corpus.sort();
    assert!(corpus.len() >= min_inputs, "the {name} corpus holds a handful of inputs");
    for input in &corpus {
        exercise(input);
    }
    let mut rng = Rng::from_var_or_clock("SHMBUS_FUZZ_SEED");
    for _ in 0..mutations {
        let mut input = corpus[rng.below(corpus.len() as u64) as usize].clone();
        for _ in 0..rng.below(max_appended + 1) {
            input.push(rng.next() as u8);
        }
        for _ in 0..1 + rng.below(8) {
            if input.is_empty() {
                break;
            }
            let i = rng.below(input.len() as u64) as usize;
            input[i] = rng.next() as u8;
        }
        exercise(&input);
    }
}
