//! Which channel a verb works on: `--domain D NAME`, `D/NAME`, or `NAME` with the domain
//! from `$SHMBUS_DOMAIN`, read here and nowhere else; and the one message for a channel that
//! is not there.
//!
//! Listings print a channel as `D/NAME`, so that form pastes back into any verb. A channel
//! or domain name never holds a `/` (`shmbus::name`), so the first `/` splits the two
//! without ambiguity.

use shmbus::Domain;

use crate::{CliError, Result, DOMAIN_ENV};

/// A channel named on the command line, its domain resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// The domain's name.
    pub domain: String,
    /// The channel's name in it.
    pub name: String,
}

/// The channel that `--domain` (`flag`) and the NAME argument (`name`, maybe `D/NAME`)
/// say, the domain defaulting to `$SHMBUS_DOMAIN`.
///
/// A usage error (exit 2) when no domain is given anywhere, when `D/NAME` has an empty
/// part, or when `--domain` and `D/NAME` name two different domains (both are named).
pub fn channel(flag: Option<&str>, name: &str) -> Result<Channel> {
    let env = std::env::var(DOMAIN_ENV).ok().filter(|d| !d.is_empty());
    channel_with_env(flag, name, env.as_deref())
}

/// [`channel`] with the environment's domain given.
fn channel_with_env(flag: Option<&str>, name: &str, env: Option<&str>) -> Result<Channel> {
    let Some((domain, rest)) = name.split_once('/') else {
        let Some(domain) = flag.or(env) else {
            return Err(CliError::usage(format!(
                "no domain for channel '{name}': give --domain D, name it D/{name}, or set {DOMAIN_ENV}"
            )));
        };
        return Ok(Channel { domain: domain.to_owned(), name: name.to_owned() });
    };
    if domain.is_empty() || rest.is_empty() {
        return Err(CliError::usage(format!("'{name}': give a channel as D/NAME, both parts non-empty")));
    }
    // The environment is only a default: `D/NAME` overrides it. `--domain` is said on this
    // command line, so a different one is a contradiction, not a default.
    match flag {
        Some(f) if f != domain => Err(CliError::usage(format!(
            "--domain {f} and channel {name} name two domains; give the domain once (--domain {f} {rest}, or {name})"
        ))),
        _ => Ok(Channel { domain: domain.to_owned(), name: rest.to_owned() }),
    }
}

/// The domain of a verb that names channels of one domain (`record`): `--domain`, else
/// the domain of the first `D/NAME`, else `$SHMBUS_DOMAIN`; each name resolved against it.
pub fn channels(flag: Option<&str>, names: &[String]) -> Result<(String, Vec<String>)> {
    let env = std::env::var(DOMAIN_ENV).ok().filter(|d| !d.is_empty());
    channels_with_env(flag, names, env.as_deref())
}

/// [`channels`] with the environment's domain given.
fn channels_with_env(flag: Option<&str>, names: &[String], env: Option<&str>) -> Result<(String, Vec<String>)> {
    let first = names.iter().find_map(|n| n.split_once('/')).map(|(d, _)| d).filter(|d| !d.is_empty());
    let Some(domain) = flag.or(first).or(env) else {
        return Err(CliError::usage(format!("no domain: give --domain D, or set {DOMAIN_ENV}")));
    };
    let out = names.iter().map(|n| channel_with_env(Some(domain), n, None).map(|c| c.name)).collect::<Result<_>>()?;
    Ok((domain.to_owned(), out))
}

/// Whether a verb can be told to wait for its channel (`--wait`), for the hint of
/// [`missing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitHint {
    /// The verb has `--wait SECS`: suggest it.
    Offer,
    /// The verb has no `--wait`.
    None,
}

/// The one message, on every verb, for a channel that does not exist.
pub fn missing(domain: &str, name: &str, wait: WaitHint) -> CliError {
    let hint = match wait {
        WaitHint::Offer => ", or --wait SECS for it to appear",
        WaitHint::None => "",
    };
    CliError::msg(format!("no channel {domain}/{name} (check the domain and --root/SHMBUS_ROOT{hint})"))
}

/// The one message for a channel that `--wait` waited for in vain.
pub fn missing_after_wait(domain: &str, name: &str, wait: std::time::Duration) -> CliError {
    CliError::msg(format!(
        "no channel {domain}/{name} appeared within --wait {} s (is its creator running, with the same domain and root?)",
        wait.as_secs_f64()
    ))
}

/// The one message for a domain named on the command line (`--domain D`) that has no
/// directory under `root`: says so and lists the domains there are.
pub fn missing_domain(root: &std::path::Path, name: &str) -> CliError {
    let mut there: Vec<String> = Domain::list(root).unwrap_or_default().iter().map(|d| d.name().to_owned()).collect();
    there.sort();
    let there = if there.is_empty() {
        format!("there are no domains under {}", root.display())
    } else {
        format!("domains under {}: {}", root.display(), there.join(", "))
    };
    CliError::msg(format!("no domain {name} ({there})"))
}

/// Fails with [`missing`] unless channel `name` exists in `domain` (any kind, any state:
/// opening it is for the verb, which reports what is wrong with it in its own words).
pub fn require(domain: &Domain, name: &str, wait: WaitHint) -> Result<()> {
    match shmbus::admin::inspect_channel(domain, name) {
        Err(shmbus::OpenError::NotFound { .. }) => Err(missing(domain.name(), name, wait)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch(d: &str, n: &str) -> Channel {
        Channel { domain: d.into(), name: n.into() }
    }

    #[test]
    fn d_slash_name_and_domain_flag_agree_or_conflict() {
        assert_eq!(channel_with_env(Some("a"), "t", None).unwrap(), ch("a", "t"));
        assert_eq!(channel_with_env(None, "a/t", None).unwrap(), ch("a", "t"));
        assert_eq!(channel_with_env(Some("a"), "a/t", None).unwrap(), ch("a", "t"));
        assert_eq!(channel_with_env(None, "t", Some("e")).unwrap(), ch("e", "t"));
        assert_eq!(channel_with_env(None, "a/t", Some("e")).unwrap(), ch("a", "t"), "D/NAME beats the env");
        let e = channel_with_env(Some("b"), "a/t", None).unwrap_err();
        assert_eq!(e.1, 2);
        assert!(e.0.contains("--domain b") && e.0.contains("a/t"), "{e}");
        for bad in ["/t", "a/", "/"] {
            assert_eq!(channel_with_env(None, bad, None).unwrap_err().1, 2, "{bad}");
        }
        let e = channel_with_env(None, "t", None).unwrap_err();
        assert!(e.1 == 2 && e.0.contains("--domain") && e.0.contains(DOMAIN_ENV), "{e}");
    }

    #[test]
    fn a_verb_of_one_domain_takes_it_from_the_flag_then_the_first_d_slash_name_then_the_env() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ok = |flag, v: &[&str], env| channels_with_env(flag, &names(v), env).unwrap();
        assert_eq!(ok(Some("a"), &["t", "a/u"], Some("e")), ("a".into(), names(&["t", "u"])));
        assert_eq!(ok(None, &["t", "a/u"], Some("e")), ("a".into(), names(&["t", "u"])), "D/NAME beats the env");
        assert_eq!(ok(None, &["t", "u"], Some("e")), ("e".into(), names(&["t", "u"])));
        assert_eq!(channels_with_env(None, &names(&["a/t", "b/u"]), None).unwrap_err().1, 2);
        assert_eq!(channels_with_env(None, &names(&["t"]), None).unwrap_err().1, 2);
    }
}
