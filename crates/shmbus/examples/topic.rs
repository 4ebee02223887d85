//! The README's quick start: a camera frame and an IMU reading, one subscriber sleeping on
//! both topics with a `WaitSet`. Run with `cargo run --example topic` (set `SHMBUS_ROOT` to
//! keep it out of /dev/shm).

use std::time::Duration;

use shmbus::topic::{Topic, TopicConfig};
use shmbus::{Domain, WaitSet};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let domain = Domain::new(&format!("example-{}", std::process::id()))?;
    let imu = Topic::create_or_open(&domain, "imu", &TopicConfig::default().max_message_len(64).history(16))?;
    let image = Topic::create_or_open(&domain, "image", &TopicConfig::default().max_message_len(6_220_800).history(4))?;

    // Subscribe first: a subscriber receives what is published after it subscribed.
    let imu_sub = imu.subscriber()?;
    let image_sub = image.subscriber()?;

    // A publisher (in real life another process).
    let mut camera = image.publisher()?;
    let mut frame = camera.loan()?; // zero copy: write the frame in place
    frame[0] = 42;
    frame.send()?; // the whole slot; `frame.truncate(len)` first sends less
    imu.publisher()?.send(b"accel 0.1 0.2 9.8")?;

    // Sleep on both topics at once, then drain whatever is ready.
    let mut ws = WaitSet::new();
    let mut seen = 0;
    while seen < 2 {
        let ready = ws.wait_timeout(&[&imu_sub, &image_sub], Duration::from_secs(5))?.to_vec();
        if ready.contains(&0) {
            for m in imu_sub.try_iter() {
                let m = m?;
                println!("imu {}: {}", m.seq(), String::from_utf8_lossy(m.data()));
                seen += 1;
            }
        }
        if ready.contains(&1) {
            while let Ok(sample) = image_sub.try_recv_ref() {
                // pinned: never overwritten while held
                println!("frame {} ({} bytes) first byte {}", sample.seq(), sample.len(), sample[0]);
                seen += 1;
            }
        }
    }
    std::fs::remove_dir_all(domain.dir())?;
    Ok(())
}
