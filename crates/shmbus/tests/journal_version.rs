//! Format versions: new journals are version 2 (keyed entries may be in them, so a library
//! reading only version 1 refuses them instead of cutting those entries off in recovery);
//! version 1 journals are still read and appended to, in version 1, but never get keyed
//! entries; unknown versions are refused.

#![cfg(not(loom))]

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use common::fresh_dir;
use shmbus::journal::format::{self, data_file_name, JOURNAL_FORMAT_VERSION};
use shmbus::journal::{
    Journal, JournalConfig, JournalSendError, JournalTryRecvError, Keyring, RollCycle, XChaCha20Poly1305Cipher,
};
use shmbus::OpenError;

fn opts() -> JournalConfig {
    JournalConfig::default().cycle_bytes(64 << 10).chunk_bytes(16 << 10).max_entry_len(1024).roll(RollCycle::Never)
}

fn u32_at(path: &Path, off: u64) -> u32 {
    let mut b = [0u8; 4];
    std::fs::File::open(path).unwrap().read_exact_at(&mut b, off).unwrap();
    u32::from_le_bytes(b)
}

/// Rewrites the version of a metadata or cycle header (`crc_end`: 120 or 56) with its CRC.
fn set_version(path: &Path, crc_end: usize, version: u32) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = vec![0u8; crc_end];
    f.read_exact_at(&mut b, 0).unwrap();
    b[8..12].copy_from_slice(&version.to_le_bytes());
    f.write_all_at(&b[8..12], 8).unwrap();
    f.write_all_at(&crc32c::crc32c(&b).to_le_bytes(), crc_end as u64).unwrap();
}

fn keyed() -> Arc<XChaCha20Poly1305Cipher> {
    Arc::new(XChaCha20Poly1305Cipher::new(&Keyring::new(5, [9; 32])))
}

fn read_all(j: &Journal, cipher: bool) -> Vec<Vec<u8>> {
    let mut t = j.tailer().unwrap();
    if cipher {
        t.set_cipher(Some(keyed()));
    }
    let mut out = Vec::new();
    loop {
        match t.try_recv() {
            Ok(e) => out.push(e.into_data()),
            Err(JournalTryRecvError::Empty) => return out,
            Err(e) => panic!("{e:?}"),
        }
    }
}

#[test]
fn new_journals_are_version_2_and_take_keyed_entries() {
    assert_eq!(JOURNAL_FORMAT_VERSION, 2);
    let (dir, _s) = fresh_dir("jv-new");
    let j = Journal::create_or_open(&dir, &opts()).unwrap();
    let mut a = j.appender().unwrap();
    a.set_cipher(Some(keyed()));
    a.send(b"sealed").unwrap();
    assert_eq!(u32_at(&dir.join(format::META_FILE), 8), 2);
    assert_eq!(u32_at(&dir.join(data_file_name(0)), 8), 2);
    assert_eq!(Journal::status(&dir).unwrap().format_version, 2);
    assert_eq!(read_all(&j, true), [b"sealed".to_vec()]);
}

#[test]
fn version_1_journals_are_read_and_appended_in_version_1_without_keyed_entries() {
    let (dir, _s) = fresh_dir("jv-old");
    {
        let j = Journal::create_or_open(&dir, &opts()).unwrap();
        j.appender().unwrap().send(b"old entry").unwrap();
    }
    // What an older library made: version 1 everywhere.
    set_version(&dir.join(format::META_FILE), 120, 1);
    set_version(&dir.join(data_file_name(0)), 56, 1);
    let j = Journal::open(&dir).unwrap();
    assert_eq!(Journal::status(&dir).unwrap().format_version, 1);
    let mut a = j.appender().unwrap();
    // Keyed entries: refused, nothing appended.
    a.set_cipher(Some(keyed()));
    match a.send(b"secret") {
        Err(e @ JournalSendError::KeyedOnOldFormat { version: 1 }) => {
            assert!(e.to_string().contains("new journal"), "{e}")
        }
        other => panic!("expected KeyedOnOldFormat, got {other:?}"),
    }
    a.set_cipher(None);
    // Plain entries, enough to roll: the new cycles are version 1 too.
    let entry = vec![3u8; 1000];
    for _ in 0..100 {
        a.send(&entry).unwrap();
    }
    let st = Journal::status(&dir).unwrap();
    assert!(st.cycles.len() >= 2, "rolled");
    for c in &st.cycles {
        assert_eq!(u32_at(&dir.join(data_file_name(c.cycle)), 8), 1, "cycle {}", c.cycle);
    }
    let all = read_all(&j, false);
    assert_eq!(all.len(), 101);
    assert_eq!(all[0], b"old entry");
    drop((a, j));

    // A version this library does not know (a newer one): refused, named.
    set_version(&dir.join(format::META_FILE), 120, 3);
    match Journal::open(&dir) {
        Err(OpenError::VersionMismatch { found: 3, supported: 2, .. }) => {}
        other => panic!("expected VersionMismatch, got {other:?}"),
    }
}

#[test]
fn a_cycle_of_another_version_than_its_journal_is_corrupt() {
    let (dir, _s) = fresh_dir("jv-mixed");
    {
        let j = Journal::create_or_open(&dir, &opts()).unwrap();
        j.appender().unwrap().send(b"x").unwrap();
    }
    set_version(&dir.join(data_file_name(0)), 56, 1);
    let st = Journal::status(&dir).unwrap();
    assert_eq!(st.unreadable_cycles.len(), 1, "{:?}", st.unreadable_cycles);
}
