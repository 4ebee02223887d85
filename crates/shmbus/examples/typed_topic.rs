//! A typed topic: camera frames as a `#[repr(C)]` struct, built in place in shared memory by
//! the publisher (zero copy) and read in place by the subscriber (`&Frame`, pinned). The
//! topic records the type in its header, so a process that opens it with another type gets
//! a clear error instead of garbage. Run with `cargo run --example typed_topic` (set
//! `SHMBUS_ROOT` to keep it out of /dev/shm).

use shmbus::topic::{Topic, TopicConfig};
use shmbus::{Domain, OpenError, Pod};

const WIDTH: usize = 640;
const HEIGHT: usize = 480;

/// One grey-scale frame and its metadata, laid out as a C struct would be.
#[derive(Clone, Copy)]
#[repr(C)]
struct Frame {
    timestamp_ns: u64,
    number: u32,
    exposure_us: u32,
    pixels: [[u8; WIDTH]; HEIGHT],
}
// SAFETY: repr(C); integers and bytes only, every bit pattern valid; no padding
// (8 + 4 + 4 + 640 * 480, a multiple of the alignment 8); no pointers.
unsafe impl Pod for Frame {}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let domain = Domain::new(&format!("example-{}", std::process::id()))?;
    let camera = Topic::create_or_open(&domain, "camera", &TopicConfig::for_type::<Frame>().history(4))?;

    let viewer = camera.subscriber_of::<Frame>()?;
    let mut publisher = camera.publisher_of::<Frame>()?;

    for n in 1..=3u32 {
        // Build the frame in its slot: nothing is copied.
        let mut frame = publisher.loan()?;
        frame.timestamp_ns = 1_000_000 * n as u64;
        frame.number = n;
        frame.exposure_us = 500;
        for (y, row) in frame.pixels.iter_mut().enumerate() {
            row.fill((y + n as usize) as u8);
        }
        frame.send()?;
    }

    for _ in 0..3 {
        // A `&Frame` in shared memory, pinned while `frame` lives.
        let frame = viewer.recv_ref()?;
        println!(
            "frame {} seq {} ({} bytes) exposure {} us, pixel[100][0] = {}",
            frame.number,
            frame.seq(),
            std::mem::size_of::<Frame>(),
            frame.exposure_us,
            frame.pixels[100][0]
        );
    }

    // Another type on the same topic is refused, naming both.
    match camera.subscriber_of::<[u64; 4]>() {
        Err(e @ OpenError::TypeMismatch { .. }) => println!("refused: {e}"),
        other => return Err(format!("expected a type mismatch, got {:?}", other.map(|_| ())).into()),
    }
    std::fs::remove_dir_all(domain.dir())?;
    Ok(())
}
