//! What a journal's directory is stored on, read from the mount table: the filesystem type
//! and, on tmpfs, whether fresh pages come as 2 MiB huge pages.
//!
//! It matters for speed: every byte appended lands in a page the kernel has to allocate and
//! zero first. With 4 KiB pages that costs one page fault per 4 KiB, which bounds large
//! entries well below memory bandwidth; with 2 MiB pages the faults are 512 times fewer.
//! See "Storage and huge pages" in docs/journal.md.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The filesystem under a journal (see [`Storage::of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// Filesystem type as the mount table names it: "ext4", "xfs", "tmpfs", …
    pub fs_type: String,
    /// On tmpfs, the mount's `huge=` policy ("never" when the option is absent); `None` on
    /// other filesystems.
    pub tmpfs_huge: Option<String>,
}

impl Storage {
    /// The filesystem `dir` is on, from `/proc/self/mountinfo`.
    pub fn of(dir: &Path) -> io::Result<Storage> {
        let dev = std::fs::metadata(dir)?.dev();
        let table = std::fs::read_to_string("/proc/self/mountinfo")?;
        Storage::from_mountinfo(&table, dev_major(dev), dev_minor(dev)).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("{}: not in the mount table", dir.display()))
        })
    }

    /// Whether fresh data pages are 2 MiB pages: `Some(true)` on tmpfs mounted with
    /// `huge=always` or `huge=within_size`, `Some(false)` on other tmpfs mounts (`advise`
    /// included: the journal allocates with `fallocate`, which does not see the advice),
    /// `None` elsewhere, where the kernel decides (ext4 and XFS use large folios on recent
    /// kernels, which the journal asks for with `MADV_HUGEPAGE`).
    pub fn huge_pages(&self) -> Option<bool> {
        self.tmpfs_huge.as_deref().map(|h| matches!(h, "always" | "within_size" | "force"))
    }

    /// A short name for reports: the filesystem type, with "+huge" for tmpfs with huge pages.
    pub fn label(&self) -> String {
        match self.huge_pages() {
            Some(true) => format!("{}+huge", self.fs_type),
            _ => self.fs_type.clone(),
        }
    }

    /// Parses a `/proc/<pid>/mountinfo` table and returns the entry of device
    /// `major:minor`. Format (proc(5)): `id parent major:minor root mountpoint options
    /// [optional fields...] - fstype source superoptions`.
    fn from_mountinfo(table: &str, major: u32, minor: u32) -> Option<Storage> {
        let want = format!("{major}:{minor}");
        // Stacked mounts of one device share the superblock and so its options: any
        // matching line answers; take the last (the most recent mount).
        let line = table.lines().rfind(|l| l.split(' ').nth(2) == Some(want.as_str()))?;
        let mut after = line.split(" - ").nth(1)?.split(' ');
        let fs_type = after.next()?.to_owned();
        let _source = after.next();
        let options = after.next().unwrap_or("");
        let tmpfs_huge = (fs_type == "tmpfs")
            .then(|| options.split(',').find_map(|o| o.strip_prefix("huge=")).unwrap_or("never").to_owned());
        Some(Storage { fs_type, tmpfs_huge })
    }
}

/// The major number of a `dev_t` (glibc's encoding, as `major(3)`).
fn dev_major(dev: u64) -> u32 {
    (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)) as u32
}

/// The minor number of a `dev_t` (as `minor(3)`).
fn dev_minor(dev: u64) -> u32 {
    ((dev & 0xff) | ((dev >> 12) & !0xff)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
25 22 0:21 / /dev/shm rw,nosuid,nodev shared:2 - tmpfs tmpfs rw,size=1024k,inode64
31 22 0:40 / /srv/journal rw,relatime shared:9 - tmpfs tmpfs rw,size=8388608k,inode64,huge=within_size
32 22 0:41 / /srv/advised rw,relatime - tmpfs none rw,huge=advise
40 22 0:40 /sub /mnt/bind\\040dir rw,relatime shared:9 - tmpfs tmpfs rw,size=8388608k,inode64,huge=within_size
";

    #[test]
    fn reads_type_and_huge_policy() {
        let ext4 = Storage::from_mountinfo(TABLE, 253, 0).unwrap();
        assert_eq!(ext4, Storage { fs_type: "ext4".into(), tmpfs_huge: None });
        assert_eq!(ext4.huge_pages(), None);
        assert_eq!(ext4.label(), "ext4");

        let shm = Storage::from_mountinfo(TABLE, 0, 21).unwrap();
        assert_eq!(shm.tmpfs_huge.as_deref(), Some("never"));
        assert_eq!(shm.huge_pages(), Some(false));
        assert_eq!(shm.label(), "tmpfs");

        let huge = Storage::from_mountinfo(TABLE, 0, 40).unwrap();
        assert_eq!(huge.tmpfs_huge.as_deref(), Some("within_size"));
        assert_eq!(huge.huge_pages(), Some(true));
        assert_eq!(huge.label(), "tmpfs+huge");

        assert_eq!(Storage::from_mountinfo(TABLE, 0, 41).unwrap().huge_pages(), Some(false));
        assert_eq!(Storage::from_mountinfo(TABLE, 9, 9), None);
    }

    #[test]
    fn hostile_lines_do_not_panic() {
        for t in ["", "x", "1 2 0:40", "1 2 0:40 / / rw - ", "1 2 0:40 / / rw -tmpfs", "- - -"] {
            let _ = Storage::from_mountinfo(t, 0, 40);
        }
    }

    #[test]
    fn device_numbers_match_glibc() {
        // makedev(253, 0) and makedev(0, 40), and a large pair using the high bits.
        assert_eq!((dev_major(0xfd00), dev_minor(0xfd00)), (253, 0));
        assert_eq!((dev_major(40), dev_minor(40)), (0, 40));
        let dev = (0x1234u64 & 0xfff) << 8 | (0x1234u64 & !0xfff) << 32 | (0x56789 & 0xff) | (0x56789u64 & !0xff) << 12;
        assert_eq!((dev_major(dev), dev_minor(dev)), (0x1234, 0x56789));
    }

    #[test]
    fn finds_the_running_system_root() {
        let s = Storage::of(Path::new("/")).expect("the root is mounted");
        assert!(!s.fs_type.is_empty());
    }
}
