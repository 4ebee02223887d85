//! Domains: namespaces of channels, each a directory under the root.
//!
//! The root is `/dev/shm` unless `SHMBUS_ROOT` or [`Domain::with_root`] says otherwise; a
//! domain `robot1` keeps its channels in `<root>/shmbus.robot1/`, one file per channel.

use std::path::{Path, PathBuf};

use crate::error::OpenError;
use crate::name::validate_name;

/// Default root directory for segment files.
pub const DEFAULT_ROOT: &str = "/dev/shm";
/// Environment variable overriding the root directory.
pub const ROOT_ENV: &str = "SHMBUS_ROOT";
/// Prefix of a domain directory's name under the root.
pub const DOMAIN_DIR_PREFIX: &str = "shmbus.";

/// A namespace of channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    name: String,
    root: PathBuf,
}

/// The root in effect: `SHMBUS_ROOT` if set and non-empty, else `/dev/shm`.
pub fn default_root() -> PathBuf {
    match std::env::var_os(ROOT_ENV) {
        Some(r) if !r.is_empty() => PathBuf::from(r),
        _ => PathBuf::from(DEFAULT_ROOT),
    }
}

impl Domain {
    /// The domain `name` under the default root.
    pub fn new(name: &str) -> Result<Domain, OpenError> {
        Domain::with_root(name, default_root())
    }

    /// The domain `name` under an explicit root directory.
    pub fn with_root(name: &str, root: impl Into<PathBuf>) -> Result<Domain, OpenError> {
        validate_name(name)?;
        Ok(Domain { name: name.to_owned(), root: root.into() })
    }

    /// The domain's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory holding this domain's channel files.
    pub fn dir(&self) -> PathBuf {
        self.root.join(format!("{DOMAIN_DIR_PREFIX}{}", self.name))
    }

    /// The file of channel `name` (validated).
    pub fn channel_path(&self, name: &str) -> Result<PathBuf, OpenError> {
        validate_name(name)?;
        Ok(self.dir().join(name))
    }

    /// Creates the domain directory if missing (mode 0755: files inside carry their own mode).
    pub(crate) fn ensure_dir(&self) -> Result<(), OpenError> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = self.dir();
        match std::fs::DirBuilder::new().recursive(true).mode(0o755).create(&dir) {
            Ok(()) => Ok(()),
            Err(e) => Err(OpenError::io(dir, e)),
        }
    }

    /// Every domain under `root`.
    pub fn list(root: &Path) -> std::io::Result<Vec<Domain>> {
        let mut out = Vec::new();
        let entries = match std::fs::read_dir(root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for entry in entries.flatten() {
            let fname = entry.file_name();
            let Some(s) = fname.to_str() else { continue };
            let Some(name) = s.strip_prefix(DOMAIN_DIR_PREFIX) else { continue };
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) && validate_name(name).is_ok() {
                out.push(Domain { name: name.to_owned(), root: root.to_owned() });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Names of the channel files in this domain (validated names only, sorted).
    pub fn channel_names(&self) -> std::io::Result<Vec<String>> {
        let mut out = Vec::new();
        let entries = match std::fs::read_dir(self.dir()) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for entry in entries.flatten() {
            if let Some(s) = entry.file_name().to_str() {
                if validate_name(s).is_ok() && entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
                    out.push(s.to_owned());
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_root() {
        let d = Domain::with_root("robot1", "/r").unwrap();
        assert_eq!(d.dir(), PathBuf::from("/r/shmbus.robot1"));
        assert_eq!(d.channel_path("imu").unwrap(), PathBuf::from("/r/shmbus.robot1/imu"));
        assert!(d.channel_path("../x").is_err());
        assert!(Domain::with_root("a/b", "/r").is_err());
    }
}
