//! Quick stream measurements against their floors (threads, spinning; not a substitute for
//! `shmbus-bench`): one-way latency vs a raw cache-line ping-pong for 32 and 256 B records,
//! and 64 KiB record bandwidth vs a one-core memcpy.
//!
//! ```text
//! cargo run --release --example stream_bench
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use shmbus::stream::{Stream, StreamConfig};
use shmbus::{Domain, WaitPolicy};

const ROUNDS: u64 = 200_000;

#[repr(align(128))]
struct Line(AtomicU64);

/// Median one-way latency (ns) of a raw ping-pong over two cache lines.
fn raw_pingpong() -> f64 {
    let lines = Arc::new([Line(AtomicU64::new(0)), Line(AtomicU64::new(0))]);
    let l2 = lines.clone();
    let t = std::thread::spawn(move || {
        for i in 1..=ROUNDS {
            while l2[0].0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            l2[1].0.store(i, Ordering::Release);
        }
    });
    let mut samples = Vec::with_capacity(ROUNDS as usize);
    for i in 1..=ROUNDS {
        let t0 = Instant::now();
        lines[0].0.store(i, Ordering::Release);
        while lines[1].0.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        samples.push(t0.elapsed().as_nanos() as f64 / 2.0);
    }
    t.join().unwrap();
    median(samples)
}

/// Median one-way latency (ns) of a record of `size` bytes over a pair of streams.
fn stream_pingpong(d: &Domain, size: usize) -> f64 {
    let cfg = StreamConfig::default().capacity(1 << 16);
    let mut ping = Stream::create_or_open(d, &format!("ping{size}"), &cfg).unwrap().writer().unwrap();
    let mut pong_r = Stream::create_or_open(d, &format!("pong{size}"), &cfg).unwrap().reader().unwrap();
    let mut ping_r = Stream::open(d, &format!("ping{size}")).unwrap().reader().unwrap();
    let mut pong = Stream::open(d, &format!("pong{size}")).unwrap().writer().unwrap();
    for e in [&mut ping_r, &mut pong_r] {
        e.set_wait_policy(WaitPolicy::SPIN);
    }
    let t = std::thread::spawn(move || {
        for _ in 0..ROUNDS {
            let rec = ping_r.recv_ref().unwrap();
            let mut g = pong.try_loan(rec.len()).unwrap();
            g.copy_from_slice(&rec);
            g.send();
            rec.consume();
        }
    });
    let msg = vec![7u8; size];
    let mut samples = Vec::with_capacity(ROUNDS as usize);
    for _ in 0..ROUNDS {
        let t0 = Instant::now();
        ping.try_send(&msg).unwrap();
        pong_r.recv_ref().unwrap().consume();
        samples.push(t0.elapsed().as_nanos() as f64 / 2.0);
    }
    t.join().unwrap();
    median(samples)
}

/// Bandwidth (GB/s) of 64 KiB records through a 4 MiB stream, and of memcpy on one core.
fn bandwidth(d: &Domain) -> (f64, f64, f64) {
    const REC: usize = 64 << 10;
    const TOTAL: usize = 4 << 30;
    let mut w = Stream::create_or_open(d, "bw", &StreamConfig::default().capacity(4 << 20)).unwrap().writer().unwrap();
    let mut r = Stream::open(d, "bw").unwrap().reader().unwrap();
    r.set_wait_policy(WaitPolicy::SPIN);
    w.set_wait_policy(WaitPolicy::SPIN);
    let src = vec![1u8; REC];
    let t = std::thread::spawn(move || {
        let mut dst = vec![0u8; REC];
        for _ in 0..TOTAL / REC {
            let rec = r.recv_ref().unwrap();
            dst.copy_from_slice(&rec); // the reader copies out, as `read_into` would
            rec.consume();
        }
        std::hint::black_box(&dst);
    });
    let t0 = Instant::now();
    for _ in 0..TOTAL / REC {
        w.send(&src).unwrap();
    }
    t.join().unwrap();
    let stream = TOTAL as f64 / t0.elapsed().as_secs_f64() / 1e9;
    // The same through one thread (write one record, read it): no scheduler in the way on a
    // loaded machine; two copies per record (in and out), so 0.5x memcpy is the ceiling.
    let mut w = Stream::create_or_open(d, "bw1", &StreamConfig::default().capacity(4 << 20)).unwrap().writer().unwrap();
    let mut r = Stream::open(d, "bw1").unwrap().reader().unwrap();
    let mut dst = vec![0u8; REC];
    let t0 = Instant::now();
    for _ in 0..TOTAL / REC {
        w.try_send(&src).unwrap();
        let rec = r.try_recv_ref().unwrap();
        dst.copy_from_slice(&rec);
        rec.consume();
    }
    std::hint::black_box(&dst);
    let single = TOTAL as f64 / t0.elapsed().as_secs_f64() / 1e9;
    // memcpy floor: one core copying 64 KiB blocks through a 4 MiB buffer.
    let mut ring = vec![0u8; 4 << 20];
    let t0 = Instant::now();
    for i in 0..TOTAL / REC {
        let at = (i * REC) % ring.len();
        ring[at..at + REC].copy_from_slice(std::hint::black_box(&src));
    }
    std::hint::black_box(&ring);
    let memcpy = TOTAL as f64 / t0.elapsed().as_secs_f64() / 1e9;
    (stream, single, memcpy)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let root = std::env::temp_dir().join(format!("shmbus-stream-bench-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let d = Domain::with_root("bench", &root).unwrap();
    let raw = raw_pingpong();
    println!("raw cache-line ping-pong: one-way p50 {raw:.0} ns");
    for size in [32, 256] {
        let s = stream_pingpong(&d, size);
        println!("stream {size:>3} B record:     one-way p50 {s:.0} ns ({:.2}x raw)", s / raw);
    }
    let (stream, single, memcpy) = bandwidth(&d);
    println!("64 KiB records, two threads: {stream:.2} GB/s ({:.2}x memcpy)", stream / memcpy);
    println!("64 KiB records, one thread:  {single:.2} GB/s ({:.2}x memcpy)", single / memcpy);
    println!("one-core memcpy:             {memcpy:.2} GB/s");
    let _ = std::fs::remove_dir_all(&root);
}
