//! Journals on a tmpfs mounted with 2 MiB pages (`huge=within_size`): the storage report
//! says so, fresh data pages really are mapped 2 MiB at a time, and entries round-trip
//! across huge-page boundaries. Mounting needs root (or CAP_SYS_ADMIN); without it the test
//! says why and checks only what it can.

#![cfg(not(loom))]

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use common::fresh_dir;
use shmbus::journal::{Journal, JournalConfig, JournalTryRecvError, RollCycle};

/// A tmpfs mounted for the test's lifetime.
struct Mount(std::path::PathBuf);

impl Mount {
    fn tmpfs(at: &Path, options: &str) -> std::io::Result<Mount> {
        std::fs::create_dir_all(at)?;
        let target = CString::new(at.as_os_str().as_bytes()).unwrap();
        let opts = CString::new(options).unwrap();
        // SAFETY: valid NUL-terminated strings; no other memory is passed.
        let r = unsafe { libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, opts.as_ptr().cast()) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mount(at.to_owned()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let target = CString::new(self.0.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path; MNT_DETACH lets it go even if something still holds it.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Kilobytes of this process's shared memory mapped with 2 MiB page-table entries.
fn shmem_pmd_mapped_kib() -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps_rollup").expect("smaps_rollup");
    smaps
        .lines()
        .find_map(|l| l.strip_prefix("ShmemPmdMapped:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A fresh directory with a tmpfs mounted on it with `options`, or `None` (said on stderr)
/// where this process may not mount. Bind the result in this order: bindings drop in reverse,
/// so the mount goes before the scratch directory under it.
fn mounted_tmpfs(tag: &str, options: &str) -> Option<(common::Scratch, std::path::PathBuf, Mount)> {
    let (dir, scratch) = fresh_dir(tag);
    match Mount::tmpfs(&dir, options) {
        Ok(m) => Some((scratch, dir, m)),
        Err(e) => {
            eprintln!("skipped: cannot mount a tmpfs here ({e}); needs root or CAP_SYS_ADMIN");
            None
        }
    }
}

#[test]
fn huge_page_tmpfs_is_reported_and_used() {
    let Some((_c, dir, mnt)) = mounted_tmpfs("jt-huge", "huge=within_size,size=256m") else { return };
    let jdir = dir.join("j");
    let opts = JournalConfig::default().cycle_bytes(64 << 20).chunk_bytes(4 << 20).roll(RollCycle::Never);
    let j = Journal::create_or_open(&jdir, &opts).unwrap();
    let info = Journal::status(j.dir()).unwrap();
    let storage = info.storage.expect("the mount table names the test mount");
    assert_eq!(storage.fs_type, "tmpfs");
    assert_eq!(storage.tmpfs_huge.as_deref(), Some("within_size"));
    assert_eq!(storage.huge_pages(), Some(true));

    let before = shmem_pmd_mapped_kib();
    let mut a = j.appender().unwrap();
    // 12 MiB of 32 KiB entries: several 2 MiB pages, entries straddling their boundaries.
    let entry = |i: u64| -> Vec<u8> { (0..32 * 1024).map(|k| (i as usize * 13 + k) as u8).collect() };
    for i in 0..384u64 {
        assert_eq!(a.send(&entry(i)).unwrap(), i);
    }
    let after = shmem_pmd_mapped_kib();
    assert!(
        after >= before + 4096,
        "expected the journal's data pages mapped 2 MiB at a time: ShmemPmdMapped {before} -> {after} kB"
    );
    let mut t = j.tailer().unwrap();
    for i in 0..384u64 {
        let e = t.try_recv_ref().expect("every entry is there");
        assert_eq!(e.index(), i);
        assert_eq!(e.data(), &entry(i)[..]);
    }
    assert!(matches!(t.try_recv_ref(), Err(JournalTryRecvError::Empty)));
    drop((t, a, j));
    drop(mnt);
}

/// An appender racing its pretoucher on huge-page tmpfs (both growing the file, the appender
/// one 2 MiB step at a time when it overtakes) while a tailer thread reads along: every
/// 32 KiB entry (copied with non-temporal stores) arrives whole and in order.
#[test]
fn large_entries_with_a_live_tailer_while_the_file_grows() {
    let Some((_c, dir, mnt)) = mounted_tmpfs("jt-huge-live", "huge=within_size,size=256m") else { return };
    let opts = JournalConfig::default().cycle_bytes(128 << 20).chunk_bytes(8 << 20).roll(RollCycle::Never);
    let j = Journal::create_or_open(dir.join("j"), &opts).unwrap();
    const N: u64 = 1500;
    let entry = |i: u64| -> Vec<u8> { (0..32 * 1024).map(|k| (i as usize * 29 + k * 3) as u8).collect() };
    let mut t = j.tailer().unwrap();
    let reader = std::thread::spawn(move || {
        for i in 0..N {
            let e = t.recv_ref_timeout(std::time::Duration::from_secs(30)).expect("no entry for 30 s");
            assert_eq!(e.index(), i);
            assert!(e.data() == &entry(i)[..], "entry {i} differs");
        }
    });
    let mut a = j.appender().unwrap();
    for i in 0..N {
        assert_eq!(a.send(&entry(i)).unwrap(), i);
    }
    reader.join().unwrap();
    drop((a, j));
    drop(mnt);
}

#[test]
fn plain_tmpfs_reports_small_pages() {
    let Some((_c, dir, _mnt)) = mounted_tmpfs("jt-small", "size=128m") else { return };
    let j = Journal::create_or_open(dir.join("j"), &JournalConfig::default()).unwrap();
    let storage = Journal::status(j.dir()).unwrap().storage.unwrap();
    assert_eq!(storage.label(), "tmpfs");
    // Without the option the policy is the kernel's default for tmpfs mounts.
    assert!(storage.tmpfs_huge.is_some());
}
