//! A stream between two processes: this program forks itself into a writer and a reader.
//!
//! The writer sends variable-size records (reserve → fill in place → commit); the reader
//! reads them in place, checks them and consumes them. Run:
//!
//! ```text
//! SHMBUS_ROOT=/tmp cargo run --example stream
//! ```

use std::process::Command;
use std::time::Duration;

use shmbus::stream::{Stream, StreamConfig, StreamRecvTimeoutError};
use shmbus::Domain;

const RECORDS: u32 = 10_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let domain = Domain::new("example")?;
    if std::env::args().nth(1).as_deref() == Some("reader") {
        return reader(&domain);
    }

    // Create the stream (1 MiB ring) and attach as its writer.
    let mut writer =
        Stream::create_or_open(&domain, "stream-example", &StreamConfig::default().capacity(1 << 20))?.writer()?;
    // Start the reader process.
    let mut child = Command::new(std::env::current_exe()?).arg("reader").spawn()?;
    // A writer whose ring fills before any reader attached gets `Disconnected`: wait for it.
    if !writer.wait_for_reader_timeout(Duration::from_secs(10)) {
        return Err("the reader process did not attach".into());
    }

    for i in 0..RECORDS {
        let len = 8 + (i as usize * 37) % 4000;
        let mut loan = writer.loan(len)?; // waits while the ring is full
        loan[..4].copy_from_slice(&i.to_le_bytes());
        loan[4..8].copy_from_slice(&(len as u32).to_le_bytes());
        loan[8..].fill(i as u8);
        loan.send();
    }
    writer.send(b"bye")?; // the copy convenience
    drop(writer); // the reader sees Disconnected once it has read everything

    let status = child.wait()?;
    std::fs::remove_file(domain.channel_path("stream-example")?)?;
    if !status.success() {
        return Err(format!("reader failed: {status}").into());
    }
    println!("writer: sent {RECORDS} records");
    Ok(())
}

fn reader(domain: &Domain) -> Result<(), Box<dyn std::error::Error>> {
    let mut reader = Stream::open(domain, "stream-example")?.reader()?;
    let (mut n, mut bytes) = (0u32, 0usize);
    loop {
        let record = match reader.recv_ref_timeout(Duration::from_secs(10)) {
            Ok(r) => r,
            Err(StreamRecvTimeoutError::Disconnected) => break, // writer gone and nothing left
            Err(e) => return Err(e.into()),
        };
        if &*record == b"bye" {
            record.consume();
            continue;
        }
        let i = u32::from_le_bytes(record[..4].try_into()?);
        let len = u32::from_le_bytes(record[4..8].try_into()?) as usize;
        assert_eq!((i, len), (n, record.len()), "records arrive in order, whole");
        assert!(record[8..].iter().all(|&b| b == i as u8));
        bytes += record.len();
        record.consume(); // hands the space back to the writer
        n += 1;
    }
    println!("reader: received {n} records, {bytes} bytes");
    if n != RECORDS {
        return Err(format!("expected {RECORDS} records, got {n}").into());
    }
    Ok(())
}
