//! Undoing the ping-pong driver's pinning between runs.
//!
//! [`crate::driver::run`] pins the calling thread to the first CPU of the pair it picks, and
//! the next run would then see only that CPU. Subcommands that run the driver several times
//! (`queue-table`, `journal`) take the process's CPU set once at the start and give it back
//! to the thread before every run.

use crate::affinity;

/// The CPUs the process was allowed at start.
#[derive(Debug, Clone)]
pub struct CpuSet {
    cpus: Vec<usize>,
}

impl CpuSet {
    /// The calling thread's CPUs now.
    pub fn current() -> Result<CpuSet, String> {
        Ok(CpuSet { cpus: affinity::allowed_cpus().map_err(|e| format!("cannot read CPU affinity: {e}"))? })
    }

    /// The CPUs, in increasing order.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Lets the calling thread run on every CPU of the set again (children inherit it).
    pub fn restore(&self) -> Result<(), String> {
        // SAFETY: cpu_set_t is a plain bit array; all-zero is a valid (empty) set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let bits = 8 * std::mem::size_of_val(&set);
        for &c in self.cpus.iter().filter(|&&c| c < bits) {
            // SAFETY: `c` is below the set's capacity.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        // SAFETY: `set` is a valid cpu_set_t of the size we pass; pid 0 is the calling thread.
        if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } != 0 {
            return Err(format!("cannot set CPU affinity: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

/// The spin floor's median one-way latency (64 B, 20,000 round trips) on the CPU pair the
/// driver picks now: the yardstick printed beside results, because on a VM the distance
/// between the two vCPUs (and with it the floor) can change from one run to the next.
pub fn floor_p50_ns(cpu_set: &CpuSet) -> Result<u64, String> {
    use crate::transports::{floor::Floor, Mode, Params, Payload};
    cpu_set.restore()?;
    let o = crate::driver::run(crate::driver::Config {
        transport: &Floor,
        params: Params { size: 64, mode: Mode::Spin, payload: Payload::Copy },
        iters: 20_000,
        warmup: 2_000,
        timeout: std::time::Duration::from_secs(10),
        echo_exit_after: None,
    })?;
    Ok(o.hist.value_at_quantile(0.5))
}
