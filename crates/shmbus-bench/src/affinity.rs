//! CPU pinning with `sched_getaffinity` / `sched_setaffinity`.

use std::io;

/// The CPUs this process may run on, in increasing order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a writable cpu_set_t of the size we pass; pid 0 is the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * std::mem::size_of_val(&set);
    // SAFETY: every index is below the set's capacity in bits.
    Ok((0..max).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of_val(&set) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu} is beyond the affinity mask")));
    }
    // SAFETY: `cpu` was checked against the set's capacity above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size we pass; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The (ping, echo) CPUs: the first two this process may use, or `None` with only one.
pub fn pick_pair() -> io::Result<Option<(usize, usize)>> {
    let cpus = allowed_cpus()?;
    Ok(match cpus.as_slice() {
        [a, b, ..] => Some((*a, *b)),
        _ => None,
    })
}
