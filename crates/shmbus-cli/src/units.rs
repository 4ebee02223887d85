//! Sizes, durations and points in time as users type them: one parser for every flag.
//!
//! * Sizes: `4096`, `4K`, `64KiB`, `1M`, `1MiB`, `2G`, `2GiB` (`B` allowed): `K`, `M`, `G` are
//!   powers of 1024 whether or not the `i` is written. `KB`/`MB`/`GB` are refused, since they
//!   mean powers of 1000 to some readers.
//! * Durations: a number (fractions allowed) and a unit: `ns`, `us` (or `µs`), `ms`, `s`, `m`
//!   (or `min`), `h`, `d`. A bare number is in the flag's own unit (`--timeout-ms 250` is 250
//!   ms, `--max-age-secs 90` is 90 s), so existing scripts keep working.
//! * Times (`--from-ts`, CLOCK_REALTIME): nanoseconds since the Unix epoch (`1763978400000000000`),
//!   RFC 3339 (`2026-11-24T10:00:00Z`, `2026-11-24T11:00:00.250+01:00`), or a duration ago
//!   (`-10s`, `-1.5h`: now minus that).
//!
//! Every parser returns a message for clap to show on the `shmbus:` line.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The result of a parser: the message names what was wrong and what is accepted.
type Parsed<T> = std::result::Result<T, String>;

/// A byte count (or, with `/s` after it, a byte rate) as people read it, in the units sizes
/// are typed in: `100 B`, `12.0 KiB`, `4.50 MiB`, `1.20 GiB` (powers of 1024).
pub fn iec_bytes(b: f64) -> String {
    const KIB: f64 = 1024.0;
    // Each unit up to 1000 of it ("1000.0 KiB" would read as a typo for MiB).
    if b < 1000.0 {
        format!("{b:.0} B")
    } else if b < 1000.0 * KIB {
        format!("{:.1} KiB", b / KIB)
    } else if b < 1000.0 * KIB * KIB {
        format!("{:.2} MiB", b / (KIB * KIB))
    } else {
        format!("{:.2} GiB", b / (KIB * KIB * KIB))
    }
}

/// A size in bytes (or a count): `4096`, `4K`, `64KiB`, `1M`, `2GiB`.
pub fn size(s: &str) -> Parsed<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let shift = match suffix.trim_start().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "kb" | "mb" | "gb" => {
            return Err(format!("{s:?}: write K/KiB, M/MiB or G/GiB (powers of 1024)"));
        }
        _ => return Err(format!("{s:?} is not a size: a whole number with K, M or G (powers of 1024), e.g. 64KiB")),
    };
    if digits.is_empty() {
        return Err(format!("{s:?} is not a size: a whole number with K, M or G (powers of 1024), e.g. 64KiB"));
    }
    let n: u64 = digits.parse().map_err(|_| format!("{s} is too large"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s} is too large"))
}

/// [`size`] for a `usize` field.
pub fn size_usize(s: &str) -> Parsed<usize> {
    usize::try_from(size(s)?).map_err(|_| format!("{s} is too large"))
}

/// A duration: a number and a unit (`10ms`, `2s`, `1.5m`, `7d`), or a bare number of `bare`.
pub fn duration(s: &str, bare: Duration) -> Parsed<Duration> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit_ns: f64 = match unit.trim_start() {
        "" => bare.as_nanos() as f64,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "d" => 86_400e9,
        _ => return Err(not_a_duration(s, bare)),
    };
    let value: f64 = number.parse().map_err(|_| not_a_duration(s, bare))?;
    let ns = value * unit_ns;
    // u64 nanoseconds last 584 years: more than any flag means.
    if !ns.is_finite() || ns >= u64::MAX as f64 {
        return Err(format!("{s} is too long"));
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// What a duration flag takes, for its error message.
fn not_a_duration(s: &str, bare: Duration) -> String {
    let bare = match bare {
        b if b == Duration::from_secs(1) => "seconds",
        b if b == Duration::from_millis(1) => "milliseconds",
        _ => "the flag's unit",
    };
    format!("{s:?} is not a duration: a number of {bare}, or a number with ns, us, ms, s, m, h or d (e.g. 10ms, 1.5m)")
}

/// `--count N`, on every verb that takes it: at least 1. `--count 0` is refused rather than
/// read as "nothing" or "for ever": running until stopped is no `--count` at all.
pub fn count(s: &str) -> Parsed<u64> {
    match s.parse::<u64>() {
        Ok(0) => Err("--count is at least 1 (without --count: until stopped)".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a count: give a whole number, at least 1")),
    }
}

/// A duration flag whose bare number is milliseconds, as whole milliseconds (rounded up, so
/// `500us` is 1 ms, not 0).
pub fn millis(s: &str) -> Parsed<u64> {
    let d = duration(s, Duration::from_millis(1))?;
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).map_err(|_| format!("{s} is too long"))
}

/// A duration flag whose bare number is seconds, as whole seconds (rounded up).
pub fn secs(s: &str) -> Parsed<u64> {
    let d = duration(s, Duration::from_secs(1))?;
    Ok(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// A duration flag whose bare number is seconds (fractions allowed).
pub fn secs_duration(s: &str) -> Parsed<Duration> {
    duration(s, Duration::from_secs(1))
}

/// A CLOCK_REALTIME time in nanoseconds since the Unix epoch: nanoseconds, RFC 3339 or
/// `-DURATION` (that long before now).
pub fn time_ns(s: &str) -> Parsed<u64> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map_err(|_| format!("{s} is too large for nanoseconds since 1970"));
    }
    if let Some(ago) = t.strip_prefix('-') {
        if ago.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return Err(format!("{s:?}: a relative time needs a unit, e.g. -10s or -5m"));
        }
        let ago = duration(ago, Duration::from_secs(1))?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let at = now.checked_sub(ago).ok_or_else(|| format!("{s} is before 1970"))?;
        return u64::try_from(at.as_nanos()).map_err(|_| format!("{s} is out of range"));
    }
    let ns = rfc3339_ns(t).ok_or_else(|| {
        format!(
            "{s:?} is not a time: nanoseconds since 1970, RFC 3339 (2026-11-24T10:00:00Z, \
             2026-11-24T11:00:00.5+01:00) or a time ago (-10s)"
        )
    })?;
    u64::try_from(ns).map_err(|_| format!("{s} is out of range (1970 to 2554)"))
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` as nanoseconds since the epoch (negative before
/// 1970); `None` if it is not one.
fn rfc3339_ns(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        part.iter().all(u8::is_ascii_digit).then(|| std::str::from_utf8(part).ok()?.parse().ok())?
    };
    let sep = |at: usize, allowed: &[u8]| b.get(at).is_some_and(|c| allowed.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&month) || day < 1 || day > month_days[month as usize - 1] {
        return None;
    }
    // 60: a leap second, as RFC 3339 allows.
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut at = 19;
    let mut frac_ns: i64 = 0;
    if b.get(at) == Some(&b'.') {
        let digits = b[at + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        for (i, d) in b[at + 1..at + 1 + digits].iter().enumerate() {
            if i < 9 {
                frac_ns += i64::from(d - b'0') * 10i64.pow(8 - i as u32);
            }
        }
        at += 1 + digits;
    }
    let offset_s = match b.get(at..)? {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), ..] if b.len() == at + 6 && sep(at + 3, b":") => {
            let (oh, om) = (num(at + 1, 2)?, num(at + 4, 2)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 3600 + om * 60;
            if *sign == b'+' {
                off
            } else {
                -off
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Some(i128::from(secs) * 1_000_000_000 + i128::from(frac_ns))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iec_bytes_scale_by_1024() {
        assert_eq!(iec_bytes(100.0), "100 B");
        assert_eq!(iec_bytes(12_288.0), "12.0 KiB");
        assert_eq!(iec_bytes(4.5 * 1048576.0), "4.50 MiB");
        assert_eq!(iec_bytes(1.2 * 1073741824.0), "1.20 GiB");
        // Every figure it prints parses back as a size flag takes it.
        assert_eq!(size("12KiB"), Ok(12_288));
    }

    #[test]
    fn sizes() {
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("4K"), Ok(4096));
        assert_eq!(size("4k"), Ok(4096));
        assert_eq!(size("64KiB"), Ok(65536));
        assert_eq!(size("1MiB"), Ok(1 << 20));
        assert_eq!(size("1M"), Ok(1 << 20));
        assert_eq!(size("2G"), Ok(2 << 30));
        assert_eq!(size("2 GiB"), Ok(2 << 30));
        assert_eq!(size("512B"), Ok(512));
        assert_eq!(size_usize("64K"), Ok(65536));
        for bad in ["", "K", "1.5M", "-4", "12X", "0x10", "4 K B"] {
            let e = size(bad).unwrap_err();
            assert!(e.contains("not a size"), "{bad:?}: {e}");
        }
        assert!(size("64KB").unwrap_err().contains("powers of 1024"));
        assert!(size("99999999999999999999").unwrap_err().contains("too large"));
        assert!(size("17179869184G").unwrap_err().contains("too large"));
    }

    #[test]
    fn durations() {
        let ms = Duration::from_millis(1);
        assert_eq!(duration("10ms", ms), Ok(Duration::from_millis(10)));
        assert_eq!(duration("2s", ms), Ok(Duration::from_secs(2)));
        assert_eq!(duration("1.5m", ms), Ok(Duration::from_secs(90)));
        assert_eq!(duration("1min", ms), Ok(Duration::from_secs(60)));
        assert_eq!(duration("2h", ms), Ok(Duration::from_secs(7200)));
        assert_eq!(duration("7d", ms), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(duration("500us", ms), Ok(Duration::from_micros(500)));
        assert_eq!(duration("500µs", ms), Ok(Duration::from_micros(500)));
        assert_eq!(duration("100ns", ms), Ok(Duration::from_nanos(100)));
        assert_eq!(duration("250", ms), Ok(Duration::from_millis(250)));
        assert_eq!(duration("0.5", Duration::from_secs(1)), Ok(Duration::from_millis(500)));
        assert_eq!(millis("250"), Ok(250));
        assert_eq!(millis("2s"), Ok(2000));
        assert_eq!(millis("500us"), Ok(1), "rounded up, never to 0");
        assert_eq!(secs("90"), Ok(90));
        assert_eq!(secs("1.5m"), Ok(90));
        assert_eq!(secs("7d"), Ok(604_800));
        assert_eq!(secs("1ms"), Ok(1));
        for bad in ["", "ms", "10 parsecs", "-5s", "1.2.3s", "10S", "1e3s"] {
            let e = duration(bad, ms).unwrap_err();
            assert!(e.contains("not a duration"), "{bad:?}: {e}");
        }
        assert!(duration("1000000000d", ms).unwrap_err().contains("too long"));
    }

    #[test]
    fn times() {
        assert_eq!(time_ns("1763978400000000000"), Ok(1_763_978_400_000_000_000));
        assert_eq!(time_ns("0"), Ok(0));
        // 2026-11-24T10:00:00Z: 20,781 days after the epoch, plus ten hours.
        let t = (20_781 * 86_400 + 10 * 3600) * 1_000_000_000u64;
        assert_eq!(time_ns("2026-11-24T10:00:00Z"), Ok(t));
        assert_eq!(time_ns("2026-11-24t10:00:00z"), Ok(t));
        assert_eq!(time_ns("2026-11-24 10:00:00Z"), Ok(t));
        assert_eq!(time_ns("2026-11-24T11:30:00+01:30"), Ok(t));
        assert_eq!(time_ns("2026-11-24T08:00:00-02:00"), Ok(t));
        assert_eq!(time_ns("2026-11-24T10:00:00.25Z"), Ok(t + 250_000_000));
        assert_eq!(time_ns("2026-11-24T10:00:00.123456789123Z"), Ok(t + 123_456_789));
        assert_eq!(time_ns("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(time_ns("2024-02-29T00:00:00Z"), Ok(19_782 * 86_400 * 1_000_000_000));
        for bad in [
            "",
            "yesterday",
            "2026-11-24",
            "2026-11-24T10:00:00",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-24T24:00:00Z",
            "2026-11-24T10:00:00.Z",
            "2026-11-24T10:00:00+1:00",
            "99999999999999999999",
        ] {
            assert!(time_ns(bad).is_err(), "{bad:?} accepted");
        }
        for far in ["1969-12-31T23:59:59Z", "2999-01-01T00:00:00Z"] {
            assert!(time_ns(far).unwrap_err().contains("out of range"), "{far}");
        }
        assert!(time_ns("-10").unwrap_err().contains("needs a unit"));
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
        let ago = time_ns("-10s").unwrap();
        // Wide bounds: the two clock reads are not at the same instant.
        assert!(ago <= now - 9_000_000_000 && ago >= now - 3_600_000_000_000, "{ago} vs {now}");
    }
}
