//! The built-in entry cipher: XChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`) with a
//! [`Keyring`] of numbered 256-bit keys, so keys can rotate while old entries stay readable.
//!
//! A sealed payload is `key id (u32 LE) | nonce (24 random bytes) | ciphertext | tag (16)`:
//! [`XChaCha20Poly1305Cipher::OVERHEAD`] = 44 bytes over the (compressed) plaintext. The
//! nonce comes from `getrandom(2)`: 192 random bits never repeat in practice, even when a
//! position of the journal is written twice (an abandoned or recovered entry). The
//! associated data binds the entry to its place: the journal's position nonce (its random
//! id, the cycle and the in-cycle index), the entry's global index and the key id. An entry
//! copied to another index or another journal, a flipped byte anywhere in the payload, or
//! a wrong key all fail authentication; the plaintext is never released then.
//!
//! Key file (see `docs/journal.md`): one key per line, `<id> <64 hex digits>`, `#` comments
//! and blank lines ignored; the last key is the current one (new entries are sealed with
//! it); the others only open older entries.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};

use super::shared::{CipherError, EntryCipher};

/// A set of numbered 32-byte keys; one of them is current (used to seal).
#[derive(Clone)]
pub struct Keyring {
    keys: BTreeMap<u32, [u8; 32]>,
    current: u32,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key bytes.
        f.debug_struct("Keyring")
            .field("ids", &self.keys.keys().collect::<Vec<_>>())
            .field("current", &self.current)
            .finish()
    }
}

/// Why a key file could not be loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum KeyFileError {
    /// The file could not be read.
    Io(io::Error),
    /// Group or others may read (or write) the file: its mode, to be `0600` or stricter.
    TooOpen {
        /// The permission bits found.
        mode: u32,
    },
    /// Line `line` (1-based; 0: the whole file) is not `<id> <64 hex digits>`: `what` says why.
    Syntax {
        /// The line number.
        line: usize,
        /// What is wrong.
        what: &'static str,
    },
    /// Key id `id` appears twice (the second time on line `line`).
    DuplicateId {
        /// The id.
        id: u32,
        /// The line of the second one.
        line: usize,
    },
    /// The file holds no key.
    Empty,
    /// The path is not a regular file (a FIFO, device, directory or socket).
    NotAFile,
    /// The file belongs to a user this process does not trust (the project's trust rules:
    /// itself, root and `SHMBUS_TRUST_UIDS`): whoever owns a key file chooses the key.
    Untrusted {
        /// The owner, in words (`uid N (name)`).
        owner: String,
    },
    /// The file is larger than a key file may be ([`Keyring::MAX_FILE_LEN`] bytes): it is
    /// refused whole, never read in part (a key past the limit would be ignored).
    TooLarge {
        /// The key file.
        path: std::path::PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
}

impl fmt::Display for KeyFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFileError::Io(e) => write!(f, "cannot read the key file: {e}"),
            KeyFileError::TooOpen { mode } => write!(
                f,
                "the key file is readable or writable by group or others (mode {mode:04o}); make it private with chmod 600"
            ),
            KeyFileError::Syntax { line: 0, what } => write!(f, "key file: {what}"),
            KeyFileError::Syntax { line, what } => {
                write!(f, "key file line {line}: {what}; each line is `<id> <64 hex digits>`")
            }
            KeyFileError::DuplicateId { id, line } => write!(f, "key file line {line}: key id {id} appears twice"),
            KeyFileError::Empty => f.write_str("the key file holds no key; each line is `<id> <64 hex digits>`"),
            KeyFileError::NotAFile => f.write_str("the key file is not a regular file"),
            KeyFileError::Untrusted { owner } => write!(
                f,
                "the key file belongs to {owner}, whom this process does not trust (whoever owns it chooses the key); \
                 own it yourself, or trust that user with {}",
                crate::domain::TRUST_ENV
            ),
            KeyFileError::TooLarge { path, limit } => write!(
                f,
                "the key file {} is larger than {limit} bytes, the most a key file may hold; it was not read \
                 (a key file is one `<id> <64 hex digits>` line per key: remove the keys no entry uses)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for KeyFileError {}

impl crate::error::Failure for KeyFileError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            KeyFileError::Io(e) if e.kind() == io::ErrorKind::NotFound => ErrorKind::NotFound,
            KeyFileError::Io(e) if e.kind() == io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
            KeyFileError::Io(_) => ErrorKind::Io,
            KeyFileError::Untrusted { .. } | KeyFileError::TooOpen { .. } => ErrorKind::Untrusted,
            KeyFileError::NotAFile => ErrorKind::Incompatible,
            _ => ErrorKind::InvalidConfig,
        }
    }
}

impl Keyring {
    /// The most bytes a key file may hold (1 MiB: some fifteen thousand keys). A larger file
    /// is refused with [`KeyFileError::TooLarge`], never read in part.
    pub const MAX_FILE_LEN: u64 = 1 << 20;

    /// A keyring of one key, `id`, which is current.
    pub fn new(id: u32, key: [u8; 32]) -> Keyring {
        Keyring { keys: BTreeMap::from([(id, key)]), current: id }
    }

    /// Adds (or replaces) key `id` and makes it the current one.
    pub fn rotate(&mut self, id: u32, key: [u8; 32]) {
        self.keys.insert(id, key);
        self.current = id;
    }

    /// The id new entries are sealed with.
    pub fn current_id(&self) -> u32 {
        self.current
    }

    /// Every key id, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.keys.keys().copied()
    }

    /// Parses a key file's text (format in the module docs).
    pub fn parse(text: &str) -> Result<Keyring, KeyFileError> {
        let mut keys = BTreeMap::new();
        let mut current = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let mut parts = l.split_ascii_whitespace();
            let (Some(id), Some(hex), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(KeyFileError::Syntax { line, what: "expected two fields" });
            };
            let id: u32 =
                id.parse().map_err(|_| KeyFileError::Syntax { line, what: "the id is not a number 0..=4294967295" })?;
            let key = parse_hex_key(hex).ok_or(KeyFileError::Syntax { line, what: "the key is not 64 hex digits" })?;
            if keys.insert(id, key).is_some() {
                return Err(KeyFileError::DuplicateId { id, line });
            }
            current = Some(id);
        }
        let current = current.ok_or(KeyFileError::Empty)?;
        Ok(Keyring { keys, current })
    }

    /// Loads a key file, refusing one that is not a regular file, that group or others may
    /// read or write, or that belongs to a user the trust policy (`SHMBUS_TRUST_UIDS`,
    /// docs/trust.md) does not accept. The checks are made on the opened descriptor (what
    /// is checked is what is read); a symlink is followed.
    pub fn load(path: &Path) -> Result<Keyring, KeyFileError> {
        use std::io::Read;
        // Non-blocking: opening a FIFO must not hang; it is refused below.
        let mut f = crate::sys::fs::open_read_nonblocking(path).map_err(KeyFileError::Io)?;
        let meta = f.metadata().map_err(KeyFileError::Io)?;
        if !meta.is_file() {
            return Err(KeyFileError::NotAFile);
        }
        let trust =
            crate::domain::TrustPolicy::from_env().map_err(|e| KeyFileError::Io(io::Error::other(e.to_string())))?;
        if !trust.trusts(meta.uid()) {
            return Err(KeyFileError::Untrusted { owner: crate::sys::fs::describe_uid(meta.uid()) });
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(KeyFileError::TooOpen { mode });
        }
        // A key file is a few lines: refuse a huge one whole rather than read it into memory,
        // and never read it in part (the keys past the cut would be ignored, the last one
        // sealing new entries among them). One byte more than the limit is read to tell a
        // file of exactly the limit from a longer one, whatever its size said (it may grow).
        let too_large = || KeyFileError::TooLarge { path: path.to_owned(), limit: Keyring::MAX_FILE_LEN };
        if meta.len() > Keyring::MAX_FILE_LEN {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        (&mut f).take(Keyring::MAX_FILE_LEN + 1).read_to_end(&mut bytes).map_err(KeyFileError::Io)?;
        if bytes.len() as u64 > Keyring::MAX_FILE_LEN {
            return Err(too_large());
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| KeyFileError::Syntax { line: 0, what: "the file is not UTF-8 text" })?;
        Keyring::parse(&text)
    }
}

fn parse_hex_key(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut key = [0u8; 32];
    for (k, pair) in key.iter_mut().zip(b.chunks_exact(2)) {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        *k = (hi << 4 | lo) as u8;
    }
    Some(key)
}

/// The built-in [`EntryCipher`]: XChaCha20-Poly1305 with a [`Keyring`] (module docs: the
/// sealed layout and what is authenticated). Give the same keyring (or a superset) to the
/// appenders and the tailers.
pub struct XChaCha20Poly1305Cipher {
    keys: BTreeMap<u32, XChaCha20Poly1305>,
    current: u32,
}

impl fmt::Debug for XChaCha20Poly1305Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XChaCha20Poly1305Cipher")
            .field("ids", &self.keys.keys().collect::<Vec<_>>())
            .field("current", &self.current)
            .finish()
    }
}

const ID: usize = 4;
const NONCE: usize = 24;
const TAG: usize = 16;

impl XChaCha20Poly1305Cipher {
    /// Bytes a sealed payload adds: key id (4), nonce (24), tag (16).
    pub const OVERHEAD: usize = ID + NONCE + TAG;

    /// A cipher sealing with `keys`' current key and opening with any of them.
    pub fn new(keys: &Keyring) -> XChaCha20Poly1305Cipher {
        let keys2 = keys.keys.iter().map(|(id, k)| (*id, XChaCha20Poly1305::new(k.into()))).collect();
        XChaCha20Poly1305Cipher { keys: keys2, current: keys.current }
    }

    /// The associated data: the journal's position nonce, the caller's (the global index)
    /// and the key id.
    fn aad(pos: &[u8; 24], aad: &[u8], id: u32) -> Vec<u8> {
        let mut v = Vec::with_capacity(24 + aad.len() + 4);
        v.extend_from_slice(pos);
        v.extend_from_slice(aad);
        v.extend_from_slice(&id.to_le_bytes());
        v
    }
}

impl EntryCipher for XChaCha20Poly1305Cipher {
    fn overhead(&self) -> usize {
        Self::OVERHEAD
    }

    fn key_id(&self) -> Option<u32> {
        Some(self.current)
    }

    fn seal(&self, nonce: &[u8; 24], aad: &[u8], plain: &[u8], out: &mut [u8]) {
        assert_eq!(out.len(), plain.len() + Self::OVERHEAD, "seal: output of the wrong size");
        let Some(c) = self.keys.get(&self.current) else {
            unreachable!("a keyring's current key is in it");
        };
        let (id, rest) = out.split_at_mut(ID);
        let (n, rest) = rest.split_at_mut(NONCE);
        let (body, tag) = rest.split_at_mut(plain.len());
        id.copy_from_slice(&self.current.to_le_bytes());
        if crate::sys::process::random_bytes(n).is_err() {
            // No getrandom(2) (pre-3.17 kernel or seccomp): the journal's position nonce
            // is unique per entry too, mixed with the clock so that a rewritten position
            // still gets a fresh nonce.
            n.copy_from_slice(nonce);
            for (b, t) in n.iter_mut().zip(crate::sys::monotonic_ns().to_le_bytes()) {
                *b ^= t;
            }
        }
        body.copy_from_slice(plain);
        let a = Self::aad(nonce, aad, self.current);
        let Ok(t) = c.encrypt_in_place_detached(XNonce::from_slice(n), &a, body) else {
            unreachable!("XChaCha20-Poly1305 seals any entry a journal can hold");
        };
        tag.copy_from_slice(&t);
    }

    fn open(&self, nonce: &[u8; 24], aad: &[u8], sealed: &[u8], out: &mut [u8]) -> bool {
        self.open_entry(nonce, aad, sealed, out).is_ok()
    }

    fn open_entry(&self, nonce: &[u8; 24], aad: &[u8], sealed: &[u8], out: &mut [u8]) -> Result<(), CipherError> {
        if sealed.len() < Self::OVERHEAD || out.len() != sealed.len() - Self::OVERHEAD {
            return Err(CipherError::Unauthenticated);
        }
        let (id, rest) = sealed.split_at(ID);
        let (n, rest) = rest.split_at(NONCE);
        let (body, tag) = rest.split_at(rest.len() - TAG);
        let id = u32::from_le_bytes([id[0], id[1], id[2], id[3]]);
        let c = self.keys.get(&id).ok_or(CipherError::UnknownKey { key_id: id })?;
        out.copy_from_slice(body);
        let a = Self::aad(nonce, aad, id);
        if c.decrypt_in_place_detached(XNonce::from_slice(n), &a, out, Tag::from_slice(tag)).is_err() {
            // Release nothing of a payload that failed authentication.
            out.fill(0);
            return Err(CipherError::Unauthenticated);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_parse_strictly() {
        let k = Keyring::parse(
            "# keys\n1 00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF\n\n7 ".to_string().as_str(),
        );
        assert!(matches!(k, Err(KeyFileError::Syntax { line: 4, .. })), "{k:?}");
        let hex = "ab".repeat(32);
        let k = Keyring::parse(&format!("1 {hex}\n2 {hex}\n")).unwrap();
        assert_eq!(k.current_id(), 2);
        assert_eq!(k.ids().collect::<Vec<_>>(), [1, 2]);
        assert!(matches!(
            Keyring::parse(&format!("1 {hex}\n1 {hex}")),
            Err(KeyFileError::DuplicateId { id: 1, line: 2 })
        ));
        assert!(matches!(Keyring::parse("1 abc"), Err(KeyFileError::Syntax { line: 1, .. })));
        assert!(matches!(Keyring::parse(&format!("x {hex}")), Err(KeyFileError::Syntax { line: 1, .. })));
        assert!(matches!(Keyring::parse(&format!("1 {}", "zz".repeat(32))), Err(KeyFileError::Syntax { .. })));
        assert!(matches!(Keyring::parse("# nothing\n"), Err(KeyFileError::Empty)));
    }

    #[test]
    fn seal_open_round_trip_and_refusals() {
        let c = XChaCha20Poly1305Cipher::new(&Keyring::new(3, [7; 32]));
        let pos = [1u8; 24];
        let plain = b"hello journal";
        let mut sealed = vec![0u8; plain.len() + XChaCha20Poly1305Cipher::OVERHEAD];
        c.seal(&pos, &5u64.to_le_bytes(), plain, &mut sealed);
        assert_eq!(&sealed[..4], &3u32.to_le_bytes());
        let mut out = vec![0u8; plain.len()];
        c.open_entry(&pos, &5u64.to_le_bytes(), &sealed, &mut out).unwrap();
        assert_eq!(out, plain);
        // Another index, another position, a flipped byte, another key: refused.
        assert!(matches!(
            c.open_entry(&pos, &6u64.to_le_bytes(), &sealed, &mut out),
            Err(CipherError::Unauthenticated)
        ));
        assert!(matches!(
            c.open_entry(&[2; 24], &5u64.to_le_bytes(), &sealed, &mut out),
            Err(CipherError::Unauthenticated)
        ));
        assert_eq!(out, [0u8; 13], "nothing of a refused entry is released");
        for i in 4..sealed.len() {
            let mut t = sealed.clone();
            t[i] ^= 0x20;
            assert!(
                matches!(c.open_entry(&pos, &5u64.to_le_bytes(), &t, &mut out), Err(CipherError::Unauthenticated)),
                "byte {i}"
            );
        }
        let wrong = XChaCha20Poly1305Cipher::new(&Keyring::new(3, [8; 32]));
        assert!(matches!(
            wrong.open_entry(&pos, &5u64.to_le_bytes(), &sealed, &mut out),
            Err(CipherError::Unauthenticated)
        ));
        let other = XChaCha20Poly1305Cipher::new(&Keyring::new(4, [7; 32]));
        assert!(matches!(
            other.open_entry(&pos, &5u64.to_le_bytes(), &sealed, &mut out),
            Err(CipherError::UnknownKey { key_id: 3 })
        ));
        // Random nonces: sealing the same entry twice differs.
        let mut again = vec![0u8; sealed.len()];
        c.seal(&pos, &5u64.to_le_bytes(), plain, &mut again);
        assert_ne!(again, sealed);
    }
}
