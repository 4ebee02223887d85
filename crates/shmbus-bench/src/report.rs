//! Printing a run: one JSON object, or one readable line.

use serde_json::json;

use crate::driver::Outcome;
use crate::memcpy::MemcpyResult;

/// The latency summary of a run, in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Percentiles and extremes.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
    /// Smallest.
    pub min: u64,
    /// Mean, rounded.
    pub mean: u64,
}

impl Summary {
    /// Reads the summary off a run's histogram.
    pub fn of(o: &Outcome) -> Summary {
        let h = &o.hist;
        Summary {
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            min: h.min(),
            mean: h.mean().round() as u64,
        }
    }
}

/// The run as one JSON object (a single line).
pub fn json(o: &Outcome) -> String {
    let s = Summary::of(o);
    let p = &o.config.params;
    json!({
        "transport": o.config.transport.name(),
        "mode": p.mode.as_str(),
        "payload": p.payload.as_str(),
        "size": p.size,
        "iters": o.config.iters,
        "warmup": o.config.warmup,
        "pinned": o.cpus.is_some(),
        "p50_ns": s.p50,
        "p90_ns": s.p90,
        "p99_ns": s.p99,
        "p999_ns": s.p999,
        "max_ns": s.max,
        "min_ns": s.min,
        "mean_ns": s.mean,
    })
    .to_string()
}

/// The run as one readable line.
pub fn line(o: &Outcome) -> String {
    let s = Summary::of(o);
    let p = &o.config.params;
    let cpus = match o.cpus {
        Some((a, b)) => format!("cpus {a},{b}"),
        None => "unpinned".to_string(),
    };
    format!(
        "{:<12} {:<5} {:<5} {:>8} B  {} iters  {}  one-way ns: p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  mean {}",
        o.config.transport.name(),
        p.mode.as_str(),
        p.payload.as_str(),
        p.size,
        o.config.iters,
        cpus,
        s.p50,
        s.p90,
        s.p99,
        s.p999,
        s.max,
        s.mean,
    )
}

/// A memcpy measurement as JSON.
pub fn memcpy_json(r: &MemcpyResult) -> String {
    json!({
        "size": r.size,
        "copies": r.copies,
        "mb_per_s": r.mb_per_s.round() as u64,
    })
    .to_string()
}

/// A memcpy measurement as one line.
pub fn memcpy_line(r: &MemcpyResult) -> String {
    format!("memcpy {} B: {:.0} MB/s ({} copies, one core)", r.size, r.mb_per_s, r.copies)
}
