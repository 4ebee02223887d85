//! Appenders: claiming, loaning, sending, growing files ahead, rolling cycles.

use std::io;
use std::marker::PhantomData;
use std::ops::DerefMut;
use std::sync::Arc;
use std::time::Duration;

use crate::endpoint::registration::register_shared;
use crate::sync::Ordering;
use crate::sys::time::TscRealtime;
use crate::sys::ProcessId;

use super::files::{self, growth_size, CycleFiles, DATA_START_BYTES, INDEX_START_BYTES};
use super::format::{
    data_file_name, entry_crc, entry_crc_parts, entry_nonce, entry_units, find_next_entry, index_file_name, pos_parts,
    pos_word, read_entry, MetaHeader, ScannedEntry, CRC_FROM, CYCLE_HEADER_PAGE, ENTRY_HEADER, FLAG_KEYED, FLAG_LZ4,
    FLAG_SEALED, KEYED_FORMAT_VERSION, META_SIZE, UNIT,
};
use super::protocol;

use super::cycles::{abandon_at, seal};
use super::error::JournalSendError;
use super::retention::Retention;
use super::shared::{realtime_ns, EntryCipher, Inner, BUSY, ROLE_APPENDER};
use crate::error::{Corrupt, OpenError};
use crate::kind::Kind;
use crate::lend::{LendOr, Lender, LentMut};

/// Writes entries. `Send`; one per thread.
#[derive(Debug)]
pub struct Appender {
    inner: Arc<Inner>,
    slot: usize,
    cy: Arc<CycleFiles>,
    alloc: u64,
    ialloc: u64,
    compress: bool,
    scratch: Vec<u8>,
    syncer: Option<Syncer>,
    pretouch: bool,
    /// The claimed end at which to consult the pretoucher again (see `request_pretouch`).
    pretouch_at: u64,
    pretoucher: Option<Pretoucher>,
    /// CPUs the pretoucher runs on (`None`: the CPU affinity of the thread that starts it).
    pretouch_cpus: Option<Vec<usize>>,
    cipher: Option<Arc<dyn EntryCipher>>,
    /// Entry timestamps: `CLOCK_REALTIME` through the time-stamp counter.
    clock: TscRealtime,
}

/// How many chunks ahead of the claimed end the pretoucher keeps the file grown: with one,
/// a fast appender (large entries) overtakes it while it pre-faults the chunk.
const PRETOUCH_AHEAD: u64 = 2;

/// The pretoucher's growth step on tmpfs.
const TMPFS_GROW_STEP: u64 = 2 << 20;

/// A huge page: growth past it keeps the file's end on its boundaries.
const HUGE_PAGE: u64 = 2 << 20;

/// The data-area size near `want` (and at least `need`) at which the file ends on a 2 MiB
/// boundary, once past 2 MiB: the data area starts after the 4 KiB header page, and a
/// growth step that left a 4 KiB page at the start of the next 2 MiB of the file would keep
/// a huge-page tmpfs from giving that range a 2 MiB page. Rounded down when that still
/// holds `need`, else up.
fn huge_aligned(need: u64, want: u64) -> u64 {
    if want < HUGE_PAGE {
        return want;
    }
    let header = CYCLE_HEADER_PAGE as u64;
    let down = (header + want) / HUGE_PAGE * HUGE_PAGE - header;
    if down >= need {
        down
    } else {
        down + HUGE_PAGE
    }
}

/// A helper thread that grows and pre-faults the next chunk of the current cycle while the
/// appender still writes the current one, so the hot path never waits for the kernel to
/// allocate and zero pages (Chronicle's "pretoucher").
#[derive(Debug)]
struct Pretoucher {
    tx: Option<std::sync::mpsc::SyncSender<(Arc<CycleFiles>, u64)>>,
    thread: Option<std::thread::JoinHandle<()>>,
    requested: (u64, u64),
}

impl Pretoucher {
    fn spawn(hdr: MetaHeader, cpus: Option<Vec<usize>>) -> Option<Pretoucher> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<(Arc<CycleFiles>, u64)>(1);
        let thread = std::thread::Builder::new()
            .name("shmbus-journal-pretouch".into())
            .spawn(move || {
                if let Some(cpus) = cpus {
                    pin_current_thread(&cpus);
                }
                while let Ok((cy, want)) = rx.recv() {
                    // On tmpfs, fallocate itself allocates and zeroes the pages, under the
                    // inode lock: grow in small steps, each published before the next, so
                    // an appender close behind never waits long. Elsewhere fallocate is
                    // cheap and one step measured better (ext4, 32 KiB entries: 2 MiB steps
                    // halved the throughput; the cause was not pinned down).
                    let step = if cy.tmpfs { TMPFS_GROW_STEP.min(hdr.chunk_bytes) } else { want };
                    let mut next = cy.alloc().load(Ordering::Acquire);
                    while next < want {
                        next = (next / step + 1).saturating_mul(step).min(want);
                        if grow_cycle_data(&cy, &hdr, None, next, true).is_err() {
                            break;
                        }
                    }
                }
            })
            .ok()?;
        Some(Pretoucher { tx: Some(tx), thread: Some(thread), requested: (u64::MAX, 0) })
    }
}

/// Restricts the calling thread to `cpus` (see [`Appender::set_pretouch_cpus`]). Best effort:
/// CPUs beyond `CPU_SETSIZE` are ignored, and a set the kernel refuses leaves the inherited
/// mask in place.
fn pin_current_thread(cpus: &[usize]) {
    let _ = crate::sys::process::set_cpu_affinity(cpus);
}

impl Drop for Pretoucher {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Grows cycle `cy`'s data area to about `want` bytes (see [`huge_aligned`]), and at least
/// `need`: extends the file, publishes the
/// new `alloc`, then (with `populate`) pre-faults the new pages. Idempotent; any number of
/// growers may race. `alloc` is published before the pre-faulting, so an appender that
/// catches up with the pretoucher never waits for it: it faults the pages it touches
/// itself (populating is only a performance hint, never needed for correctness).
fn grow_cycle_data(cy: &CycleFiles, h: &MetaHeader, need: Option<u64>, want: u64, populate: bool) -> io::Result<()> {
    // Pairs with the Release fetch_max below (here or in another grower).
    let old = cy.alloc().load(Ordering::Acquire);
    // `need`: what the caller must have (another grower may have grown the file that far
    // meanwhile); `None` (the pretoucher): `want`, give or take the alignment.
    let need = match need {
        Some(n) if n <= old => return Ok(()),
        Some(n) => n,
        None => match huge_aligned(0, want) {
            near if near <= old => return Ok(()),
            near => near,
        },
    };
    if want <= old {
        return Ok(());
    }
    let want = huge_aligned(need, want).min(h.cycle_bytes);
    // `alloc <= file size - header page` always holds, so only `old..want` is new.
    files::grow_from(&cy.data_file, CYCLE_HEADER_PAGE as u64 + old, CYCLE_HEADER_PAGE as u64 + want)?;
    if h.durability == 1 {
        crate::sys::fs::fdatasync(&cy.data_file)?;
    }
    // Release: pairs with the Acquire loads of `alloc` (readers' bounds, appenders): the
    // file is this long before anyone may claim or read below `want`.
    cy.alloc().fetch_max(want, Ordering::AcqRel);
    if populate {
        cy.data.populate_write(CYCLE_HEADER_PAGE + old as usize, (want - old) as usize);
    }
    Ok(())
}

#[derive(Debug)]
struct Syncer {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Appender {
    pub(super) fn new(inner: Arc<Inner>) -> Result<Appender, OpenError> {
        // Dead appenders' claims are abandoned before this one appends, whether or not the
        // table is full.
        inner.reclaim();
        let table = inner.meta.participants();
        let meta = inner.dir.join(super::format::META_FILE);
        let me = ProcessId::current();
        let slot = register_shared(table, me, ROLE_APPENDER, 0..table.len(), || inner.reclaim(), &meta)?;
        let c = inner.current_cycle();
        let cy = match inner.open_or_create_cycle(c, realtime_ns()) {
            Ok(cy) => cy,
            Err(e) => {
                table.release(slot);
                return Err(e);
            }
        };
        let syncer = match inner.hdr().durability {
            2 => {
                let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let (s2, i2) = (stop.clone(), inner.clone());
                let period = Duration::from_millis(inner.hdr().periodic_ms);
                let thread = std::thread::Builder::new()
                    .name("shmbus-journal-sync".into())
                    .spawn(move || {
                        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                            std::thread::park_timeout(period);
                            let c = i2.meta.current().load(Ordering::Acquire);
                            for name in [data_file_name(c), index_file_name(c)] {
                                if let Ok(f) = files::open_rw(&i2.dir.join(name)) {
                                    let _ = crate::sys::fs::fdatasync(&f);
                                }
                            }
                            let _ = i2.meta.map.msync_range(0, META_SIZE);
                        }
                    })
                    .map_err(|e| OpenError::io(&inner.dir, e));
                let thread = match thread {
                    Ok(t) => t,
                    Err(e) => {
                        table.release(slot);
                        return Err(e);
                    }
                };
                Some(Syncer { stop, thread: Some(thread) })
            }
            _ => None,
        };
        Ok(Appender {
            inner,
            slot,
            cy: Arc::new(cy),
            alloc: 0,
            ialloc: 0,
            compress: false,
            scratch: Vec::new(),
            syncer,
            pretouch: true,
            pretouch_at: 0,
            pretoucher: None,
            pretouch_cpus: None,
            cipher: None,
            clock: TscRealtime::new(),
        })
    }

    /// The largest entry [`Appender::send`] takes, in bytes (the journal's `max_entry_len`).
    pub fn max_entry_len(&self) -> usize {
        usize::try_from(self.inner.hdr().max_entry).unwrap_or(usize::MAX)
    }

    /// Compress entries of at least 64 bytes with lz4 in [`Appender::send`] when that
    /// makes them smaller (flagged per entry; readers decompress transparently).
    pub fn set_compression(&mut self, on: bool) {
        self.compress = on;
    }

    /// Copies `data` in as one entry and publishes it. Returns its global index. Never
    /// waits (the journal is unbounded); an entry that readers abandoned because this
    /// appender stalled is sent again, a few times, before [`JournalSendError::Abandoned`].
    pub fn send(&mut self, data: &[u8]) -> Result<u64, JournalSendError> {
        if !self.compress && self.cipher.is_none() {
            let mut abandoned = 0;
            for _ in 0..8 {
                match self.copy_append(data)? {
                    Ok(i) => return Ok(i),
                    Err(JournalSendError::Abandoned { index }) => abandoned = index,
                    Err(e) => return Err(e),
                }
            }
            return Err(JournalSendError::Abandoned { index: abandoned });
        }
        let mut buf = std::mem::take(&mut self.scratch);
        let r = self.transform_append(data, &mut buf);
        self.scratch = buf;
        r
    }

    /// Encrypts entries from now on with `cipher` (see [`EntryCipher`]); `None` stops.
    /// Tailers need the same cipher ([`Tailer::set_cipher`](super::Tailer::set_cipher)).
    pub fn set_cipher(&mut self, cipher: Option<Arc<dyn EntryCipher>>) {
        self.cipher = cipher;
    }

    /// The slow path of `send`: compress and/or seal.
    fn transform_append(&mut self, data: &[u8], buf: &mut Vec<u8>) -> Result<u64, JournalSendError> {
        let mut flags = 0;
        let mut body = data;
        if self.compress && data.len() >= 64 {
            buf.resize(lz4_flex::block::get_maximum_output_size(data.len()), 0);
            if let Ok(n) = lz4_flex::block::compress_into(data, buf) {
                if n < data.len() {
                    flags |= FLAG_LZ4;
                    body = &buf[..n];
                }
            }
        }
        let max = self.inner.hdr().max_entry;
        if data.len() as u64 > max {
            return Err(JournalSendError::TooLarge { len: data.len(), max });
        }
        let version = self.inner.hdr().version;
        if version < KEYED_FORMAT_VERSION && self.cipher.as_ref().is_some_and(|c| c.key_id().is_some()) {
            return Err(JournalSendError::KeyedOnOldFormat { version });
        }
        let mut abandoned = 0;
        for _ in 0..8 {
            let r = match self.cipher.clone() {
                None => {
                    let mut res = self.reserve_inner(body.len())?;
                    res.copy_from_slice(body);
                    res.commit_inner(flags, data.len() as u32, Some(body))
                }
                Some(c) => {
                    let mut res = self.reserve_inner(body.len() + c.overhead())?;
                    let nonce = entry_nonce(&res.app.inner.hdr().id, res.app.cy.num, res.n as u32);
                    let aad = res.index().to_le_bytes();
                    c.seal(&nonce, &aad, body, &mut res);
                    let keyed = if c.key_id().is_some() { FLAG_KEYED } else { 0 };
                    res.commit_inner(flags | FLAG_SEALED | keyed, data.len() as u32, None)
                }
            };
            match r {
                Ok(i) => return Ok(i),
                Err(JournalSendError::Abandoned { index }) => abandoned = index,
                Err(e) => return Err(e),
            }
        }
        Err(JournalSendError::Abandoned { index: abandoned })
    }

    fn copy_append(&mut self, data: &[u8]) -> Result<Result<u64, JournalSendError>, JournalSendError> {
        let mut res = self.reserve_inner(data.len())?;
        crate::copy::copy_to_fresh(&mut res, data);
        Ok(res.commit_inner(0, data.len() as u32, Some(data)))
    }

    /// Claims room for an entry of exactly `len` bytes, to be written in place (the
    /// [`Loan`] derefs to them) and published with [`Loan::send`] (zero-copy). Loaned
    /// entries are never compressed or encrypted. There is no `Loan::truncate`: an entry's
    /// header must say the size it was claimed with.
    pub fn loan(&mut self, len: usize) -> Result<Loan<'_>, JournalSendError> {
        self.reserve_inner(len)
    }

    fn reserve_inner(&mut self, len: usize) -> Result<Loan<'_>, JournalSendError> {
        let max = self.inner.hdr().max_entry;
        if len as u64 > max {
            return Err(JournalSendError::TooLarge { len, max });
        }
        // A file cut under us: never write through it again (one load of a global that is 0
        // unless a fault was ever contained in this process).
        if let Some((path, cycle)) = self.truncated_file() {
            return Err(JournalSendError::Truncated { path, cycle, index: None });
        }
        let units = entry_units(len);
        // Honest appenders move a cycle on once per roll and lose a claim CAS only to
        // another claim: bounds far above both keep a damaged or hostile position word
        // (sealing every new cycle, changing under every CAS) from holding this call.
        let (mut rolls, mut tries) = (0u32, 0u32);
        loop {
            tries += 1;
            if tries > 1_000_000 || rolls > 64 {
                return Err(JournalSendError::Damaged(Corrupt::new(
                    Kind::Journal,
                    "the current cycle's position word keeps changing or sealing without entries being \
                     claimed (damaged, or written by something that is not an appender)",
                )));
            }
            let ts = self.clock.now_ns();
            if ts >= self.cy.hdr.bucket_end {
                seal(&self.cy);
            }
            let w = self.cy.pos().load(Ordering::Acquire);
            let (sealed, n, u) = pos_parts(w);
            if sealed {
                rolls += 1;
                self.advance()?;
                continue;
            }
            if u + units > self.cy.cap_units || n + 1 >= self.cy.max_entries {
                seal(&self.cy);
                continue;
            }
            let end = (u + units) * UNIT as u64;
            if end > self.alloc {
                self.grow_data(end)?;
            }
            if self.pretouch && end >= self.pretouch_at {
                self.request_pretouch(end);
            }
            if (n + 1) * 4 > self.ialloc {
                self.grow_index((n + 1) * 4)?;
            }
            // Bytes past the claimed end are zero in a sound cycle (one load of the line we
            // are about to write anyway). Sound entries there mean the position word is
            // behind (damaged or overwritten): it is moved past them first. Anything else
            // there is bytes we cannot account for (maybe the inside of an entry): the
            // cycle is sealed and the next one used. Nothing is ever written over them.
            if self.cy.entry_word(u * UNIT as u64).load(Ordering::Relaxed) != 0 {
                if !self.repair_position(w) {
                    seal(&self.cy);
                }
                continue;
            }
            // Record the claim before making it, for whoever reclaims us if we die.
            let aux = &self.inner.meta.participants().entry(self.slot).aux;
            aux[1].store(w, Ordering::Relaxed);
            aux[2].store(units, Ordering::Relaxed);
            aux[0].store(BUSY | self.cy.num, Ordering::Release);
            // Pairs with the Acquire loads of `pos` by readers and reclaimers: our aux
            // stores above happen-before anyone sees the claim.
            if !protocol::try_claim(self.cy.pos(), w, units) {
                continue;
            }
            // Word 0 of the entry stays 0 until `commit` (see `protocol::commit_entry`).
            let off = u * UNIT as u64;
            if let Some(s) = self.cy.index_slot(n) {
                s.store((u + 1) as u32, Ordering::Relaxed);
            }
            return Ok(Loan { app: self, off, n, units, len, ts, done: false, _life: PhantomData });
        }
    }

    /// See [`files::truncated_file`]: the metadata file or the current cycle's files were
    /// cut by another process while mapped here.
    #[inline]
    fn truncated_file(&self) -> Option<(std::path::PathBuf, Option<u64>)> {
        files::truncated_file(&self.inner.dir, &self.inner.meta, &self.cy)
    }

    /// The position word `w` is behind sound entries (each checked: header, index,
    /// checksum): moves it past them with one CAS. `true` if it moved (by us or anyone).
    #[cold]
    fn repair_position(&self, w: u64) -> bool {
        let (_, n0, u0) = pos_parts(w);
        let (mut n, mut u) = (n0, u0);
        let max = self.inner.hdr().max_entry;
        let backed = self.cy.backed_bytes().min(self.cy.cap_units * UNIT as u64);
        while n + 1 < self.cy.max_entries {
            let at = u * UNIT as u64;
            if at + ENTRY_HEADER as u64 > backed {
                break;
            }
            // SAFETY: `at..backed` lies inside the mapping and the bytes the file holds
            // (`backed_bytes` is from fstat); only read, and every entry accepted is validated.
            let data = unsafe { std::slice::from_raw_parts(self.cy.data_ptr(at), (backed - at) as usize) };
            match read_entry(data, 0, n, max) {
                Ok((ScannedEntry::Committed { units, .. } | ScannedEntry::Abandoned { units, .. }, ..)) => {
                    n += 1;
                    u += units;
                }
                Err(_) => break,
            }
        }
        if n == n0 {
            // Not a sound entry where the word points: it may point into the middle of one
            // (a lowered word). Find the real end from the cycle's start, stepping over
            // damaged ranges; never move the word back.
            let Some((ln, lu)) = self.last_sound_entry(backed, max) else { return false };
            if ln <= n0 || lu <= u0 {
                return false;
            }
            (n, u) = (ln, lu);
        }
        // AcqRel: as a claim. Fails if anyone changed the word meanwhile (then retry anyway).
        let _ = self.cy.pos().compare_exchange(w, pos_word(false, n, u), Ordering::AcqRel, Ordering::Relaxed);
        true
    }

    /// (entries, units) just past the last sound entry of the cycle's first `backed` bytes.
    #[cold]
    fn last_sound_entry(&self, backed: u64, max: u64) -> Option<(u64, u64)> {
        // SAFETY: as in `repair_position`: inside the mapping and the file; only read.
        let data = unsafe { std::slice::from_raw_parts(self.cy.data_ptr(0), backed as usize) };
        let (mut i, mut off, mut last) = (0u64, 0u64, None);
        while i < self.cy.max_entries {
            match read_entry(data, off, i, max) {
                Ok((ScannedEntry::Committed { units, .. } | ScannedEntry::Abandoned { units, .. }, ..)) => {
                    i += 1;
                    off += units * UNIT as u64;
                    last = Some((i, off / UNIT as u64));
                }
                Err(_) => match find_next_entry(data, off, i + 1, self.cy.max_entries, max) {
                    Some((j, o)) => (i, off) = (j, o),
                    None => break,
                },
            }
        }
        last
    }

    fn advance(&mut self) -> Result<(), JournalSendError> {
        let current = self.inner.current_cycle();
        let next = if current > self.cy.num { current } else { self.cy.num + 1 };
        let created = next > current;
        self.cy = Arc::new(self.inner.open_or_create_after(next, realtime_ns(), Some(&self.cy))?);
        self.alloc = 0;
        self.ialloc = 0;
        self.pretouch_at = 0;
        // The retention in force now (`Journal::set_retention` may have changed it).
        let r = self.inner.retention();
        if created && r != Retention::default() {
            let _ = self.inner.gc(r);
        }
        Ok(())
    }

    /// Makes sure the data area is backed by the file up to `end`, growing it if needed, and
    /// sets `alloc` to what is known backed. The shared `alloc` word is only a hint: a
    /// corrupt or hostile one must not make us write past the end of the file (SIGBUS), so
    /// what we write into is always checked against the file's real size (an `fstat` only
    /// when the file grew past what we saw last).
    fn grow_data(&mut self, end: u64) -> Result<(), JournalSendError> {
        let shared = self.cy.alloc().load(Ordering::Acquire);
        if end > shared || !self.cy.backed(end) {
            let h = *self.inner.hdr();
            // On tmpfs `fallocate` zeroes every page it adds, on this thread: an appender that
            // has overtaken its pretoucher grows by one step only and leaves the rest to it
            // (a chunk and more at once stalled appends for milliseconds). Elsewhere growth
            // is cheap: a chunk ahead.
            // Sizes double from the file's start size up to the chunk (`growth_size`), then
            // move in chunks, a chunk ahead of `end`.
            let want = if self.cy.tmpfs && self.pretouch {
                growth_size(end, DATA_START_BYTES, TMPFS_GROW_STEP.min(h.chunk_bytes), h.cycle_bytes)
            } else if shared < h.chunk_bytes {
                growth_size(end.max(shared.saturating_mul(2)), DATA_START_BYTES, h.chunk_bytes, h.cycle_bytes)
            } else {
                growth_size(end.saturating_add(h.chunk_bytes), DATA_START_BYTES, h.chunk_bytes, h.cycle_bytes)
            };
            // No pre-faulting here, on the hot path: the pretoucher does it (if it is on),
            // else the pages fault in one by one as they are written.
            grow_cycle_data(&self.cy, &h, Some(end), want, !self.pretouch).map_err(JournalSendError::Io)?;
            if !self.cy.backed(end) {
                // `alloc` claimed room the file does not have, so growth skipped it: extend
                // the file from its real size.
                let from = CYCLE_HEADER_PAGE as u64 + self.cy.backed_bytes();
                files::grow_from(&self.cy.data_file, from, CYCLE_HEADER_PAGE as u64 + want)
                    .map_err(JournalSendError::Io)?;
                if !self.cy.backed(end) {
                    return Err(JournalSendError::Io(io::Error::other(
                        "the cycle's data file cannot be grown to hold the entry",
                    )));
                }
            }
        }
        self.alloc = self.cy.alloc().load(Ordering::Acquire).min(self.cy.backed_bytes());
        Ok(())
    }

    /// Asks the pretoucher to grow and pre-fault the file ahead once we are within
    /// `PRETOUCH_AHEAD` chunks of its end (or, while the file is smaller than three times
    /// that, within a third of its size: then it at most doubles the file), and sets
    /// `pretouch_at`, so that the hot path calls this only every so often (not on every
    /// append while the pretoucher is busy).
    #[cold]
    fn request_pretouch(&mut self, end: u64) {
        let h = *self.inner.hdr();
        // The pretoucher may have grown the file already: look at the shared word (only to
        // decide whether to ask for more; what we write into is checked in `grow_data`).
        let alloc = self.cy.alloc().load(Ordering::Acquire);
        // `PRETOUCH_AHEAD` chunks ahead of the claimed end; while the file is smaller than
        // that, a third of it (small journals stay small: the file doubles once two thirds
        // of it are claimed).
        let ahead = (PRETOUCH_AHEAD * h.chunk_bytes).min(alloc / 3).max(UNIT as u64);
        if end.saturating_add(ahead) <= alloc {
            // Far enough from the end: next time when we come within `ahead` of it.
            self.pretouch_at = alloc - ahead + 1;
            return;
        }
        // Consult again after a sixteenth of that (the request may be refused while the
        // pretoucher is busy; growing is done by the appender itself if it catches up).
        self.pretouch_at = end.saturating_add((ahead / 16).max(UNIT as u64));
        // At most double the file (doubling up to a chunk, then whole chunks).
        let chunks = (end.div_ceil(h.chunk_bytes) + PRETOUCH_AHEAD + 1).saturating_mul(h.chunk_bytes);
        let doubled = growth_size(alloc.saturating_mul(2), DATA_START_BYTES, h.chunk_bytes, h.cycle_bytes);
        let want = chunks.min(doubled).min(h.cycle_bytes);
        if want <= alloc {
            return;
        }
        if self.pretoucher.is_none() {
            self.pretoucher = Pretoucher::spawn(h, self.pretouch_cpus.clone());
            if self.pretoucher.is_none() {
                self.pretouch = false;
                return;
            }
        }
        let Some(p) = self.pretoucher.as_mut() else {
            return;
        };
        if p.requested.0 == self.cy.num && p.requested.1 >= want {
            return;
        }
        if let Some(tx) = &p.tx {
            if tx.try_send((self.cy.clone(), want)).is_ok() {
                p.requested = (self.cy.num, want);
            }
        }
    }

    /// Turns the background pretoucher off (on by default): growth and page faults then
    /// happen on the appending thread when it reaches the end of the backed file.
    pub fn set_pretouch(&mut self, on: bool) {
        self.pretouch = on;
        self.pretouch_at = 0;
        if !on {
            self.pretoucher = None;
        }
    }

    /// Runs the pretoucher on `cpus`. By default it inherits the CPU affinity of the thread
    /// that starts it (the appending thread, at its first append near the end of the file),
    /// so it never leaves the cores the application was confined to; an appender pinned to
    /// one core then takes the pretoucher's page faults on that same core. Give it other
    /// cores here (never isolated ones another process depends on). Takes effect when the
    /// pretoucher next starts: now, if it is running.
    pub fn set_pretouch_cpus(&mut self, cpus: &[usize]) {
        self.pretouch_cpus = Some(cpus.to_vec());
        self.pretoucher = None;
        self.pretouch_at = 0;
    }

    fn grow_index(&mut self, end: u64) -> Result<(), JournalSendError> {
        self.ialloc = self.cy.ialloc().load(Ordering::Acquire);
        if end <= self.ialloc {
            return Ok(());
        }
        let h = self.inner.hdr();
        // Like the data file: doubling from its start size up to the chunk, then chunks; a
        // step ahead.
        let want =
            growth_size(end.saturating_add(end.min(h.chunk_bytes)), INDEX_START_BYTES, h.chunk_bytes, h.index_bytes());
        // `ialloc <=` the index file's size always holds, so only `ialloc..want` is new.
        files::grow_from(&self.cy.index_file, self.ialloc, want).map_err(JournalSendError::Io)?;
        // Pairs with the Acquire load in `CycleFiles::index_slot`.
        self.cy.ialloc().fetch_max(want, Ordering::AcqRel);
        self.ialloc = want;
        Ok(())
    }
}

impl Drop for Appender {
    fn drop(&mut self) {
        self.syncer.take();
        self.inner.meta.participants().entry(self.slot).aux[0].store(0, Ordering::Release);
        self.inner.meta.participants().release(self.slot);
    }
}

/// Room for one entry, claimed by [`Appender::loan`]: write it through the `DerefMut` to
/// `[u8]` (exactly the length asked for), then [`Loan::send`]. Dropped unsent, the entry
/// is abandoned: readers skip it, nothing is published.
///
/// `A` is how the loan holds its appender: borrowed (the default) or owned ([`OwnedLoan`],
/// from [`Appender::loan_owned`]).
#[derive(Debug)]
pub struct Loan<'a, A: DerefMut<Target = Appender> + 'a = &'a mut Appender> {
    app: A,
    off: u64,
    n: u64,
    units: u64,
    len: usize,
    ts: u64,
    done: bool,
    _life: PhantomData<&'a mut Appender>,
}

/// A journal [`Loan`] that owns its appender, lent by a [`Lender`](crate::lend::Lender)
/// ([`Appender::loan_owned`]).
pub type OwnedLoan = Loan<'static, LentMut<Appender>>;

impl Appender {
    /// [`loan`](Self::loan) for an appender owned by a [`Lender`]: the loan owns it, lent
    /// exclusively, so it may be kept past the call, by a binding for instance.
    pub fn loan_owned(lender: &Lender<Appender>, len: usize) -> Result<OwnedLoan, LendOr<JournalSendError>> {
        let (lent, (off, n, units, len, ts)) = lender.lend_mut_after(|a| {
            // The claim moves to the owned loan: this one must not abandon it.
            let l = std::mem::ManuallyDrop::new(a.loan(len)?);
            Ok((l.off, l.n, l.units, l.len, l.ts))
        })?;
        Ok(Loan { app: lent, off, n, units, len, ts, done: false, _life: PhantomData })
    }
}

impl<'a, A: DerefMut<Target = Appender> + 'a> std::ops::Deref for Loan<'a, A> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: as in `deref_mut`; only read, through `&self`.
        unsafe { std::slice::from_raw_parts(self.app.cy.data_ptr(self.off + ENTRY_HEADER as u64), self.len) }
    }
}

impl<'a, A: DerefMut<Target = Appender> + 'a> std::ops::DerefMut for Loan<'a, A> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: `off + 32 + len` lies within the claimed units, which are backed (grown
        // before the claim) and ours alone until sent: no reader reads them before the
        // Release CAS to COMMITTED, no other appender can claim them.
        unsafe { std::slice::from_raw_parts_mut(self.app.cy.data_ptr_mut(self.off + ENTRY_HEADER as u64), self.len) }
    }
}

impl<'a, A: DerefMut<Target = Appender> + 'a> Loan<'a, A> {
    /// The global index this entry will have.
    pub fn index(&self) -> u64 {
        self.app.cy.hdr.first_index + self.n
    }

    /// Publishes the entry. Returns its global index. Fails with
    /// [`JournalSendError::Abandoned`] when readers gave up on it (it stayed loaned longer
    /// than the journal's abandon timeout; send it again) and with
    /// [`JournalSendError::Truncated`] when a file it was written to was cut.
    pub fn send(self) -> Result<u64, JournalSendError> {
        let len = self.len as u32;
        self.commit_inner(0, len, None)
    }

    /// `src`: the payload bytes just written (the caller's copy), to checksum instead of
    /// reading the mapped entry back; `None` for payloads written in place.
    fn commit_inner(mut self, flags: u64, raw_len: u32, src: Option<&[u8]>) -> Result<u64, JournalSendError> {
        self.done = true;
        let cy = &self.app.cy;
        let p = cy.data_ptr_mut(self.off);
        let len = self.len as u32;
        let idx = self.n as u32;
        let mut head = [0u8; ENTRY_HEADER - CRC_FROM];
        head[0..4].copy_from_slice(&len.to_le_bytes());
        head[4..8].copy_from_slice(&raw_len.to_le_bytes());
        head[8..12].copy_from_slice(&idx.to_le_bytes());
        head[12..20].copy_from_slice(&self.ts.to_le_bytes());
        // SAFETY: header bytes 12..32 of our claimed entry; ours until commit.
        unsafe { std::ptr::copy_nonoverlapping(head.as_ptr(), p.add(CRC_FROM), head.len()) };
        let crc = match src {
            Some(payload) => {
                debug_assert_eq!(payload.len(), self.len);
                entry_crc_parts(flags, &head, payload)
            }
            None => {
                // SAFETY: bytes CRC_FROM..32+len of our entry, written by us and stable.
                let covered = unsafe {
                    std::slice::from_raw_parts(p.add(CRC_FROM) as *const u8, ENTRY_HEADER - CRC_FROM + self.len)
                };
                entry_crc(flags, covered)
            }
        };
        // SAFETY: header bytes 8..12 of our entry.
        unsafe { std::ptr::write(p.add(8) as *mut u32, crc.to_le()) };
        let hw = cy.entry_word(self.off);
        // Release (inside): every byte above happens-before a reader that sees COMMITTED.
        let committed = protocol::commit_entry(hw, self.units, flags);
        let aux = &self.app.inner.meta.participants().entry(self.app.slot).aux;
        aux[0].store(0, Ordering::Release);
        let index = cy.hdr.first_index + self.n;
        self.app.inner.meta.event().notify();
        // After the commit store: a cut before or during the writes above sent them to a
        // private zero page (the SIGBUS containment), so the entry is not in the file and
        // success must not be reported. One load of a global while no fault was contained.
        if let Some((path, cycle)) = self.app.truncated_file() {
            return Err(JournalSendError::Truncated { path, cycle, index: Some(index) });
        }
        if !committed {
            return Err(JournalSendError::Abandoned { index });
        }
        if self.app.inner.hdr().durability == 1 {
            let _ = cy.data.msync_range(CYCLE_HEADER_PAGE + self.off as usize, (self.units * UNIT as u64) as usize);
        }
        Ok(index)
    }
}

impl<'a, A: DerefMut<Target = Appender> + 'a> Drop for Loan<'a, A> {
    fn drop(&mut self) {
        if !self.done {
            abandon_at(&self.app.cy, self.off / UNIT as u64, self.units);
            self.app.inner.meta.participants().entry(self.app.slot).aux[0].store(0, Ordering::Release);
            self.app.inner.meta.event().notify();
        }
    }
}
