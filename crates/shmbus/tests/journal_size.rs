//! Small journals stay small: a new cycle's files start at a few hundred KiB and grow
//! geometrically up to the growth chunk (docs/journal.md, "Sizes on disk"). Measured on the
//! filesystem of the temporary directory, both as apparent length and as allocated blocks
//! (`st_blocks`): `fallocate` allocates, so a preallocated file shows in both.

#![cfg(not(loom))]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::fresh_dir;
use shmbus::journal::{Journal, JournalConfig, JournalTryRecvError, RollCycle};

/// (apparent bytes, allocated bytes) of every file in `dir`.
fn dir_size(dir: &Path) -> (u64, u64) {
    let mut total = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let m = e.unwrap().metadata().unwrap();
        assert!(m.is_file(), "only files in a journal directory");
        total.0 += m.len();
        total.1 += m.blocks() * 512;
    }
    total
}

fn file_size(path: &Path) -> (u64, u64) {
    let m = std::fs::metadata(path).unwrap();
    (m.len(), m.blocks() * 512)
}

/// The bound docs/journal.md promises for a one-entry journal with the default configuration.
const ONE_ENTRY_BOUND: u64 = 512 << 10;

#[test]
fn one_entry_journal_is_small_on_disk() {
    let (dir, _s) = fresh_dir("jsize-one");
    let j = Journal::create_or_open(&dir, &JournalConfig::default()).unwrap();
    let mut a = j.appender().unwrap();
    a.send(b"hello").unwrap();
    drop(a);
    drop(j);
    let (apparent, allocated) = dir_size(&dir);
    eprintln!("one-entry journal: {apparent} bytes apparent, {allocated} bytes allocated");
    assert!(apparent < ONE_ENTRY_BOUND, "apparent size {apparent} bytes, bound {ONE_ENTRY_BOUND}");
    assert!(allocated < ONE_ENTRY_BOUND, "allocated {allocated} bytes, bound {ONE_ENTRY_BOUND}");
    // The metadata file is fixed; the cycle files are at their start sizes.
    assert_eq!(file_size(&dir.join("000000000000.sbjd")).0, 4096 + (256 << 10));
    assert_eq!(file_size(&dir.join("000000000000.sbji")).0, 64 << 10);
    // And it reads back.
    let mut t = Journal::open(&dir).unwrap().tailer().unwrap();
    assert_eq!(t.try_recv().unwrap().data(), b"hello");
}

#[test]
fn files_grow_geometrically_and_readers_follow() {
    let (dir, _s) = fresh_dir("jsize-grow");
    let opts = JournalConfig::default().roll(RollCycle::Never);
    let j = Journal::create_or_open(&dir, &opts).unwrap();
    // A reader on its own handle (own mappings, learns the file size by fstat, as a reader
    // in another process does), opened before the files grow.
    let reader = Journal::open(&dir).unwrap();
    let mut t = reader.tailer().unwrap();
    let mut a = j.appender().unwrap();
    let entry = vec![7u8; 1000];
    let data = dir.join("000000000000.sbjd");
    // (bytes written, data file size) after each step.
    let mut sizes = vec![(0u64, file_size(&data).0)];
    let mut read = 0u64;
    // 8 MiB of entries, in steps: the data file doubles as it fills.
    for i in 0..8 * 1024u64 {
        let mut e = entry.clone();
        e[..8].copy_from_slice(&i.to_le_bytes());
        a.send(&e).unwrap();
        if i % 256 == 255 {
            sizes.push(((i + 1) * 1032, file_size(&data).0));
            loop {
                match t.try_recv() {
                    Ok(got) => {
                        assert_eq!(got.data()[..8], read.to_le_bytes(), "entries in order, none lost");
                        assert_eq!(got.len(), 1000);
                        read += 1;
                    }
                    Err(JournalTryRecvError::Empty) => break,
                    Err(e) => panic!("reader: {e:?}"),
                }
            }
        }
    }
    sizes.dedup_by_key(|s| s.1);
    eprintln!("(written, data file size) while 8 MiB were appended: {sizes:?}");
    assert!(sizes.len() >= 5, "grew in several steps: {sizes:?}");
    // While smaller than the chunk (16 MiB) the file about doubles once two thirds are used
    // (the appender and its pretoucher may each grow it once): never more than four times
    // what is written (plus the 2 MiB alignment); past it, a few chunks ahead at most.
    let chunk = 16u64 << 20;
    for &(written, len) in &sizes[1..] {
        assert!(len > written, "the file holds what was written: {sizes:?}");
        let bound = if len <= chunk { 4 * written + (2 << 20) } else { 4 * written + 3 * chunk };
        assert!(len <= bound, "{len} bytes for {written} written: {sizes:?}");
    }
    assert_eq!(read, 8 * 1024, "the reader followed the growth");
    // Allocated like the apparent size (`fallocate`), give or take the filesystem's own
    // metadata blocks.
    let (len, blocks) = file_size(&data);
    assert!(blocks <= len + (1 << 20), "allocated {blocks} bytes, apparent {len}");
}
