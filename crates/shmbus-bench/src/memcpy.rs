//! One-core `memcpy` bandwidth: the yardstick for throughput ratios.

use std::time::{Duration, Instant};

/// Result of [`memcpy_bandwidth`].
#[derive(Debug, Clone, Copy)]
pub struct MemcpyResult {
    /// Bytes per copy.
    pub size: usize,
    /// Copies timed.
    pub copies: u64,
    /// Bandwidth in MB/s (10^6 bytes per second), counting each byte copied once.
    pub mb_per_s: f64,
}

/// Copies a `size`-byte buffer into another, over and over on the calling thread, for at
/// least `min_time` (after one untimed warm-up copy), and returns the bandwidth.
pub fn memcpy_bandwidth(size: usize, min_time: Duration) -> MemcpyResult {
    let src: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let mut dst = vec![0u8; size];
    dst.copy_from_slice(&src);
    // Batches of copies between clock reads, so small sizes are not dominated by the clock.
    let batch = (1 << 24) / size.max(1) + 1;
    let mut copies = 0u64;
    let start = Instant::now();
    let elapsed = loop {
        for _ in 0..batch {
            std::hint::black_box(&mut dst).copy_from_slice(std::hint::black_box(&src));
        }
        copies += batch as u64;
        let e = start.elapsed();
        if e >= min_time {
            break e;
        }
    };
    std::hint::black_box(&dst);
    MemcpyResult { size, copies, mb_per_s: (copies as f64 * size as f64) / elapsed.as_secs_f64() / 1e6 }
}
