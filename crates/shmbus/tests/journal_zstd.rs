//! zstd-compressed archives (`Journal::tier_zstd`): entries appended with lz4 and the
//! built-in cipher, tiered with zstd, read back whole by tailers, named readers, time search
//! and status; retention deletes the compressed files; a damaged or hostile `.zst` is an
//! unreadable cycle with a typed error, never garbage, never a panic, never an allocation
//! past the cycle's size.

#![cfg(not(loom))]

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::fresh_dir;
use shmbus::journal::format::{data_file_name, index_file_name};
use shmbus::journal::{
    Journal, JournalConfig, JournalTierError, JournalTryRecvError, Keyring, Retention, RollCycle,
    XChaCha20Poly1305Cipher,
};

fn cipher() -> Arc<XChaCha20Poly1305Cipher> {
    Arc::new(XChaCha20Poly1305Cipher::new(&Keyring::new(7, [0x5a; 32])))
}

fn entry(i: u64) -> Vec<u8> {
    // Compressible (lz4 applies), distinct per index.
    let mut e = format!("entry {i:06} ").into_bytes();
    e.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, 200 + (i % 300) as usize));
    e
}

/// A journal of several 64 KiB cycles of lz4-compressed, encrypted entries.
fn filled(tag: &str) -> (PathBuf, common::Scratch, Journal, u64) {
    let (dir, s) = fresh_dir(tag);
    let opts =
        JournalConfig::default().cycle_bytes(64 << 10).chunk_bytes(16 << 10).max_entry_len(4096).roll(RollCycle::Never);
    let j = Journal::create_or_open(&dir, &opts).unwrap();
    let mut a = j.appender().unwrap();
    a.set_compression(true);
    a.set_cipher(Some(cipher()));
    let n = 3000;
    for i in 0..n {
        assert_eq!(a.send(&entry(i)).unwrap(), i);
    }
    (dir, s, j, n)
}

fn read_all(j: &Journal) -> Vec<(u64, Vec<u8>)> {
    let mut t = j.tailer().unwrap();
    t.set_cipher(Some(cipher()));
    let mut out = Vec::new();
    loop {
        match t.try_recv() {
            Ok(e) => out.push((e.index(), e.into_data())),
            Err(JournalTryRecvError::Empty) => return out,
            Err(e) => panic!("{e:?}"),
        }
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn archived_cycles_compressed_with_zstd_read_back_whole() {
    let (dir, _s, j, n) = filled("jz-round");
    // A named reader part way through, before tiering.
    let mut r = j.reader("half").unwrap();
    r.set_cipher(Some(cipher()));
    for _ in 0..700 {
        r.try_recv().unwrap();
        r.ack();
    }
    drop(r);
    let before = Journal::status(&dir).unwrap();
    assert!(before.cycles.len() >= 4, "several cycles: {}", before.cycles.len());
    assert!(j.tier_zstd("cold", 1, 23).is_err_and(|e| matches!(e, JournalTierError::BadLevel { level: 23 })));
    let rep = j.tier_zstd("cold", 1, 3).unwrap();
    assert_eq!(rep.moved_cycles.len(), before.cycles.len() - 1);
    // Only compressed files in the archive; only the current cycle hot.
    let cold = dir.join("cold");
    let archived = names(&cold);
    assert!(archived.iter().all(|n| n.ends_with(".sbjd.zst") || n.ends_with(".sbji.zst")), "{archived:?}");
    assert_eq!(archived.len(), 2 * rep.moved_cycles.len());
    let cur = before.cycles.last().unwrap().cycle;
    assert!(names(&dir).contains(&data_file_name(cur)));

    // Every reader: a tailer (this handle and a fresh one, as another process would open
    // it), the named reader, time search, status.
    let want: Vec<(u64, Vec<u8>)> = (0..n).map(|i| (i, entry(i))).collect();
    assert_eq!(read_all(&j), want);
    let other = Journal::open(&dir).unwrap();
    assert_eq!(read_all(&other), want);
    let mut r = other.reader("half").unwrap();
    r.set_cipher(Some(cipher()));
    let next = r.try_recv().unwrap();
    assert_eq!((next.index(), next.data()), (700, &entry(700)[..]));
    drop(r);
    let mid = read_all(&other)[300].0;
    let mut t = other.tailer_at(mid).unwrap();
    t.set_cipher(Some(cipher()));
    assert_eq!(t.try_recv().unwrap().data(), &entry(mid)[..]);
    let st = Journal::status(&dir).unwrap();
    assert!(st.unreadable_cycles.is_empty(), "{:?}", st.unreadable_cycles);
    assert_eq!(st.next_index, n);
    let zst_bytes: u64 = archived.iter().map(|f| std::fs::metadata(cold.join(f)).unwrap().len()).sum();
    assert_eq!(st.archive_file_bytes, zst_bytes, "status counts the compressed files");
    assert!(st.cycles.iter().filter(|c| c.archived).count() == rep.moved_cycles.len());

    // Retention deletes compressed archived cycles too.
    let gc = j.gc_with(Retention { max_cycles: Some(1), max_age: None }).unwrap();
    assert_eq!(gc.removed_cycles, rep.moved_cycles);
    assert!(names(&cold).is_empty(), "{:?}", names(&cold));
}

/// Rewrites `len` bytes at `off` of `path`.
fn patch(path: &Path, off: u64, bytes: &[u8]) {
    std::fs::OpenOptions::new().write(true).open(path).unwrap().write_all_at(bytes, off).unwrap();
}

#[test]
fn a_damaged_or_hostile_zst_is_an_unreadable_cycle_not_garbage() {
    let (dir, _s, j, n) = filled("jz-bad");
    let before = Journal::status(&dir).unwrap();
    j.tier_zstd("cold", 1, 3).unwrap();
    let cold = dir.join("cold");
    let first = before.cycles[0].clone();
    let zdata = cold.join(format!("{}.zst", data_file_name(first.cycle)));
    let good = std::fs::read(&zdata).unwrap();

    let unreadable = |why: &str| {
        let st = Journal::status(&dir).unwrap();
        assert_eq!(st.unreadable_cycles.len(), 1, "{why}: {:?}", st.unreadable_cycles);
        let (c, msg) = &st.unreadable_cycles[0];
        assert_eq!(*c, first.cycle, "{why}");
        // A tailer steps over the cycle, reporting it, and reads everything after it.
        let mut t = Journal::open(&dir).unwrap().tailer().unwrap();
        t.set_cipher(Some(cipher()));
        let mut got = Vec::new();
        let mut reported = 0;
        loop {
            match t.try_recv() {
                Ok(e) => got.push(e.index()),
                Err(JournalTryRecvError::Empty) => break,
                Err(_) => reported += 1,
            }
        }
        assert!(reported >= 1, "{why}: the unreadable cycle is reported");
        let after: Vec<u64> = (first.first_index + first.entries..n).collect();
        assert_eq!(got, after, "{why}: every entry after it, none of it");
        msg.clone()
    };

    // One byte changed in the middle: the checksum (or the decoder) catches it.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    std::fs::write(&zdata, &bad).unwrap();
    let msg = unreadable("flipped byte");
    assert!(msg.contains("damaged"), "{msg}");

    // Cut short.
    std::fs::write(&zdata, &good[..good.len() / 2]).unwrap();
    unreadable("truncated");

    // Not zstd at all.
    std::fs::write(&zdata, b"hello, not zstd").unwrap();
    let msg = unreadable("not zstd");
    assert!(msg.contains("not a zstd frame"), "{msg}");

    // A frame claiming more than a cycle file holds: refused before decompressing.
    let huge = zstd::bulk::compress(&vec![0u8; 8 << 20], 1).unwrap();
    std::fs::write(&zdata, &huge).unwrap();
    let msg = unreadable("too large");
    assert!(msg.contains("more than a cycle file"), "{msg}");

    // A frame without a recorded size (a decompression bomb would be one): refused.
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    enc.include_contentsize(false).unwrap();
    std::io::Write::write_all(&mut enc, &vec![0u8; 1 << 20]).unwrap();
    std::fs::write(&zdata, enc.finish().unwrap()).unwrap();
    let msg = unreadable("no size");
    assert!(msg.contains("records no decompressed size"), "{msg}");

    // The original back: readable again; its index file damaged too: still read (the
    // index is a hint).
    std::fs::write(&zdata, &good).unwrap();
    let zindex = cold.join(format!("{}.zst", index_file_name(first.cycle)));
    patch(&zindex, 8, &[0xff; 4]);
    let st = Journal::status(&dir).unwrap();
    assert_eq!(st.unreadable_cycles.len(), 1, "the damaged index file makes the cycle unreadable: {st:?}");
    std::fs::remove_file(&zindex).unwrap();
    // Without its index the cycle is read from the data file (the index is rebuilt, next
    // to it).
    let all = read_all(&Journal::open(&dir).unwrap());
    assert_eq!(all.len() as u64, n);
}
