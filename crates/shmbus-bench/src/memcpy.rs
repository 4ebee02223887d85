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

/// Result of [`memcpy_streaming`].
#[derive(Debug, Clone, Copy)]
pub struct StreamingResult {
    /// Total bytes copied (the size of the destination).
    pub total: u64,
    /// Seconds the copies took.
    pub secs: f64,
}

impl StreamingResult {
    /// Bandwidth in MiB/s (2^20 bytes per second), counting each byte copied once.
    pub fn mib_per_s(&self) -> f64 {
        self.total as f64 / self.secs / (1u64 << 20) as f64
    }
}

/// The streaming yardstick for a writer of fresh memory (a journal): `total` bytes copied
/// on the calling thread in `piece`-byte pieces from one source buffer, sequentially into
/// one destination of `total` bytes that is written (pre-faulted) before the clock starts.
/// Unlike [`memcpy_bandwidth`], which copies one buffer over and over inside the caches,
/// this one is bound by the one-core bandwidth to memory, as a journal writing hundreds of
/// MiB is; it excludes page faults (the destination is already mapped).
pub fn memcpy_streaming(piece: usize, total: u64) -> StreamingResult {
    streaming(piece, total, Dest::Prefaulted)
}

/// [`memcpy_streaming`] into a fresh destination (anonymous memory never touched before,
/// 4 KiB pages): the copy takes one page fault per page, as a writer of new file pages
/// does. Not the yardstick of the target; it shows what the faults alone cost here.
pub fn memcpy_streaming_fresh(piece: usize, total: u64) -> StreamingResult {
    streaming(piece, total, Dest::Fresh)
}

/// [`memcpy_streaming_fresh`] into fresh memory that asked for 2 MiB pages
/// (`MADV_HUGEPAGE`): what fresh memory costs a writer on huge pages (a journal on a tmpfs
/// mounted with `huge=`), i.e. how fast the kernel allocates and zeroes them on this machine.
pub fn memcpy_streaming_fresh_huge(piece: usize, total: u64) -> StreamingResult {
    streaming(piece, total, Dest::FreshHuge)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dest {
    Prefaulted,
    Fresh,
    FreshHuge,
}

fn streaming(piece: usize, total: u64, dest: Dest) -> StreamingResult {
    let piece = piece.max(1);
    let pieces = (total / piece as u64).max(1) as usize;
    let src: Vec<u8> = (0..piece).map(|i| (i * 7) as u8).collect();
    // A zeroed allocation this large is fresh anonymous memory (calloc → mmap), untouched.
    let mut dst = vec![0u8; pieces * piece];
    match dest {
        Dest::Prefaulted => dst.fill(1),
        Dest::Fresh => {}
        Dest::FreshHuge => {
            // madvise wants a page-aligned start; the allocation's first bytes are its
            // allocator's header page, so advise from the next page boundary on.
            // SAFETY: sysconf has no preconditions.
            let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1);
            let skip = dst.as_ptr().align_offset(page).min(dst.len());
            let len = (dst.len() - skip) / page * page;
            // SAFETY: advice on the vector's own, not yet touched, pages; contents unchanged.
            unsafe { libc::madvise(dst.as_mut_ptr().add(skip).cast(), len, libc::MADV_HUGEPAGE) };
        }
    }
    std::hint::black_box(&mut dst);
    let start = Instant::now();
    for c in dst.chunks_exact_mut(piece) {
        std::hint::black_box(&mut *c).copy_from_slice(std::hint::black_box(&src));
    }
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(&dst);
    StreamingResult { total: (pieces * piece) as u64, secs }
}

/// The cross-core copy floor: the least any shared-memory channel can cost to move `total`
/// bytes in `piece`-byte records from one CPU to another. Two threads pinned to `cpus` share
/// a plain ring of `capacity` bytes (whole records) and two counters on lines of their own;
/// the writer copies each record in, the reader copies it out — exactly the two copies of a
/// stream, with nothing else: no framing, no validation, no liveness. MB/s (10^6 bytes/s)
/// of payload, from the first record written to the last one read.
pub fn cross_core_copy_mb_per_s(piece: usize, capacity: usize, total: u64, cpus: Option<(usize, usize)>) -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    #[repr(align(128))]
    struct Counter(AtomicU64);
    struct Ring(*mut u8);
    // SAFETY: the writer only writes slots the reader has released and the reader only reads
    // slots the writer has published (the counters below, Release/Acquire); the buffer
    // outlives both threads (joined before it is freed).
    unsafe impl Send for Ring {}
    // SAFETY: as above.
    unsafe impl Sync for Ring {}
    impl Ring {
        fn at(&self, off: usize) -> *mut u8 {
            self.0.wrapping_add(off)
        }
    }

    let piece = piece.max(1);
    let slots = (capacity / piece).max(1) as u64;
    let records = (total / piece as u64).max(1);
    let mut buf = vec![0u8; slots as usize * piece];
    buf.fill(1); // fault the ring in before timing
    let ring = Ring(buf.as_mut_ptr());
    let (head, tail) = (Counter(AtomicU64::new(0)), Counter(AtomicU64::new(0)));
    let start = std::sync::Barrier::new(2);
    let pin = |cpu: Option<usize>| {
        if let Some(c) = cpu {
            let _ = crate::affinity::pin_current_thread(c);
        }
    };
    let secs = std::thread::scope(|s| {
        s.spawn(|| {
            pin(cpus.map(|c| c.0));
            let src: Vec<u8> = (0..piece).map(|i| (i * 7) as u8).collect();
            start.wait();
            for i in 0..records {
                while i - tail.0.load(Ordering::Acquire) >= slots {
                    std::hint::spin_loop();
                }
                let at = (i % slots) as usize * piece;
                // SAFETY: slot `at..at + piece` is inside the ring and released by the reader.
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), ring.at(at), piece) };
                head.0.store(i + 1, Ordering::Release);
            }
        });
        let reader = s.spawn(|| {
            pin(cpus.map(|c| c.1));
            let mut dst = vec![0u8; piece];
            start.wait();
            let t0 = std::time::Instant::now();
            for i in 0..records {
                while head.0.load(Ordering::Acquire) <= i {
                    std::hint::spin_loop();
                }
                let at = (i % slots) as usize * piece;
                // SAFETY: slot `at..at + piece` is inside the ring and published by the writer.
                unsafe { std::ptr::copy_nonoverlapping(ring.at(at), dst.as_mut_ptr(), piece) };
                std::hint::black_box(&mut dst);
                tail.0.store(i + 1, Ordering::Release);
            }
            t0.elapsed().as_secs_f64()
        });
        reader.join().expect("reader thread")
    });
    drop(buf);
    records as f64 * piece as f64 / secs / 1e6
}
