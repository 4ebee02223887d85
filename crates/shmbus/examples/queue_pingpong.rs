//! Ping-pong over two queues (the mutex-queue reference's shape), against the floor: a raw
//! cache-line ping-pong between the same two threads over the same kind of shared mapping.
//!
//! Both sides spin (no sleeping), one message in flight. Prints the one-way latency
//! (round trip / 2) p50 and p99 per message size, and the ratio to the floor's p50.
//!
//! Run: `cargo run --release --example queue_pingpong [round_trips]`
//! (uses `/dev/shm` or `SHMBUS_ROOT`; cross-process numbers are the bench crate's job).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use shmbus::queue::{Queue, QueueConfig};
use shmbus::Domain;

#[repr(align(128))]
struct Line(AtomicU64);

/// The CPUs this process may use, read once before anything is pinned (threads inherit
/// their creator's affinity).
fn allowed_cpus() -> &'static [usize] {
    static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    CPUS.get_or_init(|| {
        // SAFETY: sched_getaffinity fills a zeroed cpu_set_t we own.
        let allowed = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            set
        };
        // SAFETY: CPU_ISSET only reads the set.
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &allowed) }).collect()
    })
}

/// Pins the calling thread to the `i`-th allowed CPU, so every measurement has the same
/// placement: the two sides on two different CPUs.
fn pin(i: usize) {
    let cpus = allowed_cpus();
    // SAFETY: plain libc calls on a zeroed cpu_set_t we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[i % cpus.len()], &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn percentiles(mut v: Vec<u64>) -> (u64, u64) {
    v.sort_unstable();
    (v[v.len() / 2], v[v.len() * 99 / 100])
}

/// One-way ns (p50, p99) of a cache-line ping-pong.
fn floor(n: usize) -> (u64, u64) {
    let (a, b) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
    let mut samples = Vec::with_capacity(n);
    std::thread::scope(|s| {
        s.spawn(|| {
            pin(1);
            for i in 1..=n as u64 {
                while a.0.load(Ordering::Acquire) != i {
                    std::hint::spin_loop();
                }
                b.0.store(i, Ordering::Release);
            }
        });
        pin(0);
        for i in 1..=n as u64 {
            let t = Instant::now();
            a.0.store(i, Ordering::Release);
            while b.0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            samples.push(t.elapsed().as_nanos() as u64 / 2);
        }
    });
    percentiles(samples)
}

/// One-way ns (p50, p99) of a ping-pong of `size`-byte messages over two queues.
fn queues(domain: &Domain, size: usize, n: usize) -> (u64, u64) {
    let cfg = QueueConfig::default().capacity(64).max_message_len(size);
    let ping = Queue::create_or_open(domain, &format!("ping{size}"), &cfg).unwrap();
    let pong = Queue::create_or_open(domain, &format!("pong{size}"), &cfg).unwrap();
    let mut samples = Vec::with_capacity(n);
    std::thread::scope(|s| {
        let (ping2, pong2) = (ping.clone(), pong.clone());
        s.spawn(move || {
            pin(1);
            let mut rx = ping2.consumer().unwrap();
            let mut tx = pong2.producer().unwrap();
            let mut buf = Vec::with_capacity(size);
            for _ in 0..n {
                while rx.try_recv_into(&mut buf).is_err() {
                    std::hint::spin_loop();
                }
                while tx.try_send(&buf).is_err() {
                    std::hint::spin_loop();
                }
            }
        });
        pin(0);
        let mut tx = ping.producer().unwrap();
        let mut rx = pong.consumer().unwrap();
        let msg = vec![7u8; size];
        let mut buf = Vec::with_capacity(size);
        for _ in 0..n {
            let t = Instant::now();
            while tx.try_send(&msg).is_err() {
                std::hint::spin_loop();
            }
            while rx.try_recv_into(&mut buf).is_err() {
                std::hint::spin_loop();
            }
            samples.push(t.elapsed().as_nanos() as u64 / 2);
        }
    });
    let _ = std::fs::remove_file(ping.path());
    let _ = std::fs::remove_file(pong.path());
    percentiles(samples)
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    if allowed_cpus().len() < 2 {
        eprintln!("needs two CPUs: spinning ping-pong on one CPU measures the scheduler");
        return;
    }
    let domain = Domain::new("pingpong").unwrap();
    let (f50, f99) = floor(n);
    println!("{:>8} {:>10} {:>10} {:>8}", "bytes", "p50 ns", "p99 ns", "p50/floor");
    println!("{:>8} {:>10} {:>10} {:>8}", "floor", f50, f99, "1.00");
    for size in [32, 64, 128, 256, 1024, 4096] {
        let (p50, p99) = queues(&domain, size, n);
        println!("{size:>8} {p50:>10} {p99:>10} {:>8.2}", p50 as f64 / f50.max(1) as f64);
    }
}
