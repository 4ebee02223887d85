//! WaitSet over stream endpoints: readers wake when a record is committed, a writer when
//! space is freed; nothing is ready spuriously.

use std::path::PathBuf;
use std::time::Duration;

use shmbus::stream::{StreamConfig, StreamReader, StreamWriter};
use shmbus::{Domain, WaitError, WaitSet, Waitable};

struct TempRoot(PathBuf);
impl TempRoot {
    fn new(tag: &str) -> TempRoot {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let p = std::env::temp_dir().join(format!("shmbus-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempRoot(p)
    }
}
impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn waitset_wakes_the_reader_of_the_stream_that_got_a_record() {
    let root = TempRoot::new("stream-ws");
    let d = Domain::with_root("test", &root.0).unwrap();
    let cfg = StreamConfig::new(1 << 16);
    let mut ra = StreamReader::create(&d, "a", &cfg).unwrap();
    let mut rb = StreamReader::create(&d, "b", &cfg).unwrap();
    let mut writers = [StreamWriter::open(&d, "a").unwrap(), StreamWriter::open(&d, "b").unwrap()];
    let mut ws = WaitSet::new();
    assert_eq!(ws.wait(&[&ra, &rb], Some(Duration::from_millis(20))).unwrap_err(), WaitError::Timeout);

    // A writer thread writes to the stream it is told to, a little after being told.
    let (tx, rx) = std::sync::mpsc::channel::<(usize, u32)>();
    let t = std::thread::spawn(move || {
        for (idx, round) in rx {
            std::thread::sleep(Duration::from_millis(2));
            writers[idx].write(&round.to_le_bytes()).unwrap();
        }
    });
    for round in 0..50u32 {
        let idx = (round % 2) as usize;
        tx.send((idx, round)).unwrap();
        let ready = ws.wait(&[&ra, &rb], Some(Duration::from_secs(10))).unwrap().to_vec();
        assert_eq!(ready, vec![idx], "round {round}");
        let r = if idx == 0 { &mut ra } else { &mut rb };
        let rec = r.try_read().unwrap();
        assert_eq!(&*rec, &round.to_le_bytes());
        rec.consume();
        assert!(!ra.is_ready() && !rb.is_ready());
    }
    drop(tx);
    t.join().unwrap();
}

#[test]
fn waitset_wakes_a_writer_when_space_is_freed() {
    let root = TempRoot::new("stream-ws-w");
    let d = Domain::with_root("test", &root.0).unwrap();
    let cap = 1 << 16;
    let mut w = StreamWriter::create(&d, "s", &StreamConfig::new(cap)).unwrap();
    let mut r = StreamReader::open(&d, "s").unwrap();
    w.set_writable_len(1000);
    assert!(w.is_ready());
    while w.try_write(&[0u8; 1000]).is_ok() {}
    assert!(!w.is_ready());
    let mut ws = WaitSet::new();
    assert_eq!(ws.wait(&[&w], Some(Duration::from_millis(20))).unwrap_err(), WaitError::Timeout);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(5));
        r.try_read().unwrap().consume();
        r
    });
    assert_eq!(ws.wait(&[&w], Some(Duration::from_secs(10))).unwrap(), &[0]);
    w.try_write(&[1u8; 1000]).unwrap();
    drop(t.join().unwrap());
}
