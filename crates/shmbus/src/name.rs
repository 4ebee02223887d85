//! Channel and domain names.
//!
//! A name is 1..=64 characters of `[A-Za-z0-9._-]` and does not start with a dot. That
//! keeps every name a plain file name: no separator, no `..`, nothing hidden, so a name can
//! never point outside the domain directory.

use std::fmt;

/// Longest accepted name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameError {
    /// The name as given.
    pub name: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid name {:?}: {}; use 1 to {MAX_NAME_LEN} characters of A-Z a-z 0-9 . _ - not starting with a dot",
            self.name, self.reason
        )
    }
}

impl std::error::Error for NameError {}

/// Prefix of a domain directory's name under the root: domain `robot1` is the directory
/// `shmbus.robot1`.
pub const DOMAIN_DIR_PREFIX: &str = "shmbus.";

/// Whether `path` is a channel file in a domain (`<root>/shmbus.<domain>/<channel>`), the
/// only files `shmbus clean` looks at, by its name alone (nothing is opened).
pub fn is_channel_path(path: &std::path::Path) -> bool {
    let valid = |p: Option<&std::ffi::OsStr>| p.and_then(|n| n.to_str()).map(str::to_owned);
    let file = valid(path.file_name());
    let dir = valid(path.parent().and_then(|p| p.file_name()));
    match (file, dir) {
        (Some(file), Some(dir)) => {
            validate_name(&file).is_ok()
                && dir.strip_prefix(DOMAIN_DIR_PREFIX).is_some_and(|d| validate_name(d).is_ok())
        }
        _ => false,
    }
}

/// Checks a channel or domain name.
pub fn validate_name(name: &str) -> Result<(), NameError> {
    let err = |reason| Err(NameError { name: name.chars().take(80).collect(), reason });
    if name.is_empty() {
        return err("it is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return err("it is longer than 64 characters");
    }
    if name.starts_with('.') {
        return err("it starts with a dot");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return err("it contains a character outside A-Z a-z 0-9 . _ -");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_names() {
        for n in ["a", "imu", "cam.front-left_0", &"x".repeat(64), "A9", "a..b"] {
            validate_name(n).unwrap();
        }
    }

    #[test]
    fn refuses_everything_else() {
        for n in ["", ".hidden", "..", "a/b", "../etc", "a b", "ü", "a\0b", &"x".repeat(65), "a\\b", "*"] {
            let e = validate_name(n).unwrap_err();
            assert!(e.to_string().contains("invalid name"), "{e}");
        }
    }
}
