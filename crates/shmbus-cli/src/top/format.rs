//! Numbers in at most five characters, for the narrow columns of `top`.

/// A count or rate: `7`, `0.5`, `950`, `1.2k`, `12k`, `123k`, `1.2M`, … (`-` for none).
pub fn count(v: Option<f64>) -> String {
    let Some(v) = v else { return "-".into() };
    if !v.is_finite() || v < 0.0 {
        return "?".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    if v < 9.95 && v.fract() != 0.0 {
        return format!("{v:.1}");
    }
    // Below 999.5, so that rounding cannot print "1000".
    if v < 999.5 {
        return format!("{v:.0}");
    }
    scaled(v, 1000.0, &["k", "M", "G", "T", "P", "E"])
}

/// A byte count or byte rate in IEC units, as every size the CLI reads and prints: `512`,
/// `1.5Ki`, `12Mi`, … (`-` for none).
pub fn bytes(v: Option<f64>) -> String {
    let Some(v) = v else { return "-".into() };
    if !v.is_finite() || v < 0.0 {
        return "?".into();
    }
    if v < 999.5 {
        return format!("{v:.0}");
    }
    scaled(v, 1024.0, &["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])
}

/// `v` (≥ 1000) divided by powers of `base` to below 1000 with the matching suffix, in at
/// most 5 chars.
fn scaled(mut v: f64, base: f64, suffixes: &[&str]) -> String {
    for s in suffixes {
        v /= base;
        // Rounding 999.96 up would print "1000k": move on to the next suffix instead.
        if v < 9.95 {
            return format!("{v:.1}{s}");
        }
        if v < 999.5 {
            return format!("{v:.0}{s}");
        }
    }
    "huge".into()
}

/// A duration in ns: `850ns`, `9.9us`, `123us`, `1.2ms`, `3.0s` (`-` for none).
pub fn nanos(v: Option<u64>) -> String {
    let Some(ns) = v else { return "-".into() };
    let f = ns as f64;
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=9_949 => format!("{:.1}us", f / 1e3),
        9_950..=999_499 => format!("{:.0}us", f / 1e3),
        999_500..=9_949_999 => format!("{:.1}ms", f / 1e6),
        9_950_000..=999_499_999 => format!("{:.0}ms", f / 1e6),
        _ => format!("{:.1}s", f / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_fit_five_columns() {
        for (v, s) in [
            (0.0, "0"),
            (0.3, "0.3"),
            (7.0, "7"),
            (950.0, "950"),
            (999.6, "1.0k"),
            (1_234.0, "1.2k"),
            (99_960.0, "100k"),
            (999_600.0, "1.0M"),
            (12_345_678.0, "12M"),
        ] {
            assert_eq!(count(Some(v)), s, "{v}");
        }
        assert_eq!(count(None), "-");
        assert_eq!(count(Some(f64::NAN)), "?");
        assert_eq!(bytes(Some(1_536.0)), "1.5Ki");
        assert_eq!(bytes(Some(2.0 * 1024.0 * 1024.0 * 1024.0)), "2.0Gi");
        assert_eq!(bytes(Some(1_000.0)), "1.0Ki");
        assert_eq!(bytes(Some(999.0 * 1024.0)), "999Ki");
        assert_eq!(bytes(Some(1_023.0 * 1024.0)), "1.0Mi");
    }

    #[test]
    fn durations_fit_five_columns() {
        for (v, s) in [
            (850, "850ns"),
            (1_000, "1.0us"),
            (9_949, "9.9us"),
            (9_950, "10us"),
            (123_000, "123us"),
            (999_499, "999us"),
            (999_500, "1.0ms"),
            (12_000_000, "12ms"),
            (3_000_000_000, "3.0s"),
        ] {
            assert_eq!(nanos(Some(v)), s, "{v}");
            assert!(nanos(Some(v)).len() <= 5);
        }
    }
}
