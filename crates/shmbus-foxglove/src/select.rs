//! Which topics are shown: `--topics GLOB` picks them (all when none is given) and
//! `--allow NAME` is the list of the only ones a client may see and subscribe to.
//!
//! A glob matches a whole topic name; `*` stands for any run of characters (none
//! included), `?` for one, anything else for itself.

/// The topic selection of one server.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    globs: Vec<String>,
    allow: Vec<String>,
}

impl Selection {
    /// `globs` (empty: every topic) narrowed to `allow` (empty: no narrowing).
    pub fn new(globs: Vec<String>, allow: Vec<String>) -> Selection {
        Selection { globs, allow }
    }

    /// Whether topic `name` is advertised to clients (and so may be subscribed to).
    pub fn shows(&self, name: &str) -> bool {
        let picked = self.globs.is_empty() || self.globs.iter().any(|g| glob(g.as_bytes(), name.as_bytes()));
        let allowed = self.allow.is_empty() || self.allow.iter().any(|a| a == name);
        picked && allowed
    }
}

/// Whether `pat` matches all of `name`: iterative, with one backtrack point (the last `*`).
fn glob(pat: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pat.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob(b"cam*", b"cam.front"));
        assert!(glob(b"*", b""));
        assert!(glob(b"*.front", b"cam.front"));
        assert!(glob(b"c?m", b"cam"));
        assert!(glob(b"a*b*c", b"axxbyyc"));
        assert!(!glob(b"cam", b"camera"));
        assert!(!glob(b"a*b", b"axxc"));
        assert!(!glob(b"?", b""));
    }

    #[test]
    fn allow_narrows_the_globs() {
        let s = Selection::new(vec!["cam*".into()], vec!["cam.front".into(), "imu".into()]);
        assert!(s.shows("cam.front"));
        assert!(!s.shows("cam.back"));
        assert!(!s.shows("imu"));
        let all = Selection::default();
        assert!(all.shows("anything"));
    }
}
