//! The allowlist: which topic names a bridge forwards, either way.
//!
//! `--topics 'cam/*,imu'` is a comma-separated list of patterns over topic names: `*` stands
//! for any run of characters (none included), `?` for one; anything else is itself. A name
//! is allowed when some pattern matches all of it. Topic names are `[A-Za-z0-9._-]` and
//! flat: `.` is the separator they use for a hierarchy, so a `/` in a pattern stands for a
//! `.` (`cam/*` and `cam.*` both match `cam.front`). A pattern may hold only name
//! characters, `/` and the two wildcards.

use std::fmt;

/// A parsed `--topics` list.
#[derive(Debug, Clone, Default)]
pub struct Allow {
    patterns: Vec<Vec<u8>>,
}

/// A pattern that could match no topic name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    /// The pattern.
    pub pattern: String,
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "topic pattern {:?} can match no topic: use letters, digits, '.', '_', '-', '/' (for '.') and the wildcards '*' and '?', and start with neither '.' nor '/'",
            self.pattern
        )
    }
}

impl std::error::Error for PatternError {}

impl Allow {
    /// Parses a comma-separated list; empty items are skipped.
    pub fn parse(list: &str) -> Result<Allow, PatternError> {
        let mut patterns = Vec::new();
        for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let ok =
                p.bytes().all(|c| c.is_ascii_alphanumeric() || b"._-*?/".contains(&c)) && !p.starts_with(['.', '/']);
            if !ok {
                return Err(PatternError { pattern: p.to_owned() });
            }
            patterns.push(p.bytes().map(|c| if c == b'/' { b'.' } else { c }).collect());
        }
        Ok(Allow { patterns })
    }

    /// Whether no pattern was given (nothing is allowed).
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `name` is allowed.
    pub fn allows(&self, name: &str) -> bool {
        self.patterns.iter().any(|p| glob(p, name.as_bytes()))
    }
}

/// Wildcard match with one backtrack point (the last `*`), linear in practice.
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < s.len() {
        if i < p.len() && (p[i] == b'?' || p[i] == s[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches() {
        let a = Allow::parse("cam*, imu,log.?").unwrap();
        let slash = Allow::parse("cam/*").unwrap();
        assert!(slash.allows("cam.front"));
        assert!(!slash.allows("camera"));
        assert!(a.allows("cam"));
        assert!(a.allows("cam.front"));
        assert!(a.allows("imu"));
        assert!(!a.allows("imu2"));
        assert!(a.allows("log.a"));
        assert!(!a.allows("log.ab"));
        assert!(!a.allows("xcam"));
        let all = Allow::parse("*").unwrap();
        assert!(all.allows("anything-at_all.1"));
        assert!(Allow::parse("").unwrap().is_empty());
        assert!(!Allow::parse("").unwrap().allows("x"));
        assert!(Allow::parse("a*b*c").unwrap().allows("aXbYbZc"));
        assert!(!Allow::parse("a*b*c").unwrap().allows("aXbYbZ"));
    }

    #[test]
    fn refuses_impossible_patterns() {
        assert_eq!(Allow::parse("cam/[ab]").unwrap_err().pattern, "cam/[ab]");
        assert!(Allow::parse(".hidden").is_err());
        assert!(Allow::parse("/x").is_err());
        assert!(Allow::parse("a b").is_err());
    }
}
