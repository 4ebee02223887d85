//! What every part of a journal shares: the state behind a [`Journal`](super::Journal)
//! handle that its appenders, tailers, recovery, retention and tiering work on, and the
//! entry cipher they seal and open with.

use std::fmt;
use std::path::PathBuf;

use super::files::MetaFile;

/// On-the-fly encryption of entry payloads. shmbus has one built in,
/// [`XChaCha20Poly1305Cipher`](super::XChaCha20Poly1305Cipher) with a rotating
/// [`Keyring`](super::Keyring); implement this for another AEAD.
///
/// The journal guarantees a nonce that is unique for every entry of every journal
/// (`docs/journal-format.md`: the journal's random id, the cycle and the in-cycle index) and passes the
/// entry's global index as associated data, so a sealed entry cannot be moved to another
/// position undetected. Sealing happens after compression.
pub trait EntryCipher: Send + Sync {
    /// Bytes `seal` adds (the authentication tag).
    fn overhead(&self) -> usize;
    /// Encrypts and authenticates `plain` with `aad` into `out` (`plain.len() +
    /// overhead()` bytes).
    fn seal(&self, nonce: &[u8; 24], aad: &[u8], plain: &[u8], out: &mut [u8]);
    /// Checks and decrypts `sealed` into `out` (`sealed.len() - overhead()` bytes).
    /// `false`: wrong key, or the entry was tampered with.
    fn open(&self, nonce: &[u8; 24], aad: &[u8], sealed: &[u8], out: &mut [u8]) -> bool;
    /// The id of the key `seal` uses, if this cipher numbers its keys. `Some` promises that
    /// every sealed payload starts with that id (4 bytes, little-endian): the journal flags
    /// such entries so a reader without the key can say which key it needs.
    fn key_id(&self) -> Option<u32> {
        None
    }
    /// [`open`](EntryCipher::open) saying why it failed. The default maps `false` to
    /// [`CipherError::Unauthenticated`].
    fn open_entry(&self, nonce: &[u8; 24], aad: &[u8], sealed: &[u8], out: &mut [u8]) -> Result<(), CipherError> {
        if self.open(nonce, aad, sealed, out) {
            Ok(())
        } else {
            Err(CipherError::Unauthenticated)
        }
    }
}

/// Why an [`EntryCipher`] refused to open an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CipherError {
    /// The entry was sealed with key `key_id`, which this cipher does not hold.
    UnknownKey {
        /// The entry's key id.
        key_id: u32,
    },
    /// Authentication failed: a wrong key, or the entry was changed or moved.
    Unauthenticated,
}

impl fmt::Debug for dyn EntryCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EntryCipher {{ overhead: {} }}", self.overhead())
    }
}

/// `CLOCK_REALTIME` in nanoseconds: the clock of journal timestamps (meaningful across
/// reboots and hosts, which replay needs).
pub fn realtime_ns() -> u64 {
    crate::sys::time::realtime_ns()
}

/// The mode of a directory the journal creates: search permission for whoever may read
/// its files (0600 → 0700, 0640 → 0750, 0644 → 0755), sticky when every user may write it
/// (0666 → 1777).
pub(super) fn dir_mode(file_mode: u32) -> u32 {
    let m = file_mode & 0o777;
    let d = m | 0o700 | ((m & 0o044) >> 2);
    // Writable by every user: sticky, so nobody removes or replaces files they do not own
    // (the trust policy refuses such a directory without it).
    if d & 0o002 != 0 {
        d | 0o1000
    } else {
        d
    }
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) dir: PathBuf,
    pub(super) meta: MetaFile,
    pub(super) mode: u32,
    /// Whose journal files this process uses (see docs/trust.md, "Journals").
    pub(super) trust: crate::domain::TrustPolicy,
}

pub(super) const BUSY: u64 = 1 << 63;
pub(super) const ROLE_APPENDER: u32 = 1;
