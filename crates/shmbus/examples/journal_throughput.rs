//! Rough journal speed check (mode `none`): one appender's rate for 40 B and 32 KiB entries
//! against memcpy, and append→tail one-way latency against a shared-memory ping-pong.
//! Not a benchmark harness (that is `shmbus-bench journal`); it prints numbers only.
//!
//! `cargo run --release --example journal_throughput [DIR]`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use shmbus::journal::{Journal, JournalConfig, RollCycle};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("shmbus-journal-speed-{}", std::process::id())));
    let opts = JournalConfig::default()
        .roll(RollCycle::Never)
        .cycle_bytes(4 << 30)
        .chunk_bytes(64 << 20)
        .max_entry_len(64 << 10);
    let j = Journal::create_or_open(&dir, &opts)?;
    let mut a = j.appender()?;
    let msg = [7u8; 40];
    for _ in 0..100_000 {
        a.send(&msg)?;
    }
    let n = 5_000_000u64;
    let t = Instant::now();
    for _ in 0..n {
        a.send(&msg)?;
    }
    let dt = t.elapsed();
    println!("40 B append: {:.1} M entries/s", n as f64 / dt.as_secs_f64() / 1e6);
    if std::env::var_os("ONLY40").is_some() {
        return Ok(());
    }

    let big = vec![3u8; 32 << 10];
    let m = 20_000u64;
    let t = Instant::now();
    for _ in 0..m {
        a.send(&big)?;
    }
    let jb = (m * big.len() as u64) as f64 / t.elapsed().as_secs_f64() / 1e9;
    let mut dst = vec![0u8; 64 << 20];
    let t = Instant::now();
    let mut copied = 0u64;
    while copied < m * big.len() as u64 {
        for c in dst.chunks_mut(big.len()) {
            c.copy_from_slice(&big);
            copied += big.len() as u64;
        }
    }
    std::hint::black_box(&dst);
    let mb = copied as f64 / t.elapsed().as_secs_f64() / 1e9;
    println!("32 KiB append: {jb:.2} GB/s, memcpy {mb:.2} GB/s, ratio {:.2}", jb / mb);

    // Latency: append → a spinning tailer in another thread sees it (same clock).
    let mut tailer = j.tailer_at_end()?;
    tailer.set_wait_policy(shmbus::WaitPolicy::SPIN);
    let rounds = 100_000usize;
    let h = std::thread::spawn(move || {
        let mut lat = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let e = tailer.recv_ref().unwrap();
            let now = shmbus::journal::realtime_ns();
            lat.push(now.saturating_sub(u64::from_le_bytes(e.data()[..8].try_into().unwrap())));
        }
        lat
    });
    for _ in 0..rounds {
        let ts = shmbus::journal::realtime_ns();
        let mut p = [0u8; 40];
        p[..8].copy_from_slice(&ts.to_le_bytes());
        a.send(&p)?;
        let s = Instant::now();
        while s.elapsed().as_nanos() < 2000 {
            std::hint::spin_loop();
        }
    }
    let mut lat = h.join().expect("tailer");
    lat.sort_unstable();
    println!("append→tail one-way p50 {} ns, p99 {} ns", lat[lat.len() / 2], lat[lat.len() * 99 / 100]);

    // Floor: one-way cache-line ping-pong between two threads.
    let flag = Arc::new(AtomicU64::new(0));
    let f2 = flag.clone();
    let r = 200_000u64;
    let h = std::thread::spawn(move || {
        for i in 0..r {
            while f2.load(Ordering::Acquire) != 2 * i + 1 {
                std::hint::spin_loop();
            }
            f2.store(2 * i + 2, Ordering::Release);
        }
    });
    let t = Instant::now();
    for i in 0..r {
        flag.store(2 * i + 1, Ordering::Release);
        while flag.load(Ordering::Acquire) != 2 * i + 2 {
            std::hint::spin_loop();
        }
    }
    h.join().expect("ponger");
    println!("cache-line ping-pong one-way: {} ns", t.elapsed().as_nanos() as u64 / r / 2);
    drop((a, j));
    if std::env::args().nth(1).is_none() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
