//! `fanout`: the cost of one `publish` on a topic with K subscriber processes attached and
//! reading, to show that publish cost does not grow with the number of subscribers.
//!
//! What is timed: each `publish` call (or `loan` + write two bytes + `send` with
//! `--payload touch`) alone, between two `CLOCK_MONOTONIC` reads, in the publisher process
//! pinned to the first CPU. The subscribers are real processes, pinned to the second CPU,
//! each reading in order (spinning on `try_recv_into` / `try_recv_pinned`, or sleeping in
//! the blocking receive with `--mode block`); they skip ahead when they lag. The clock's own
//! cost (the median of back-to-back reads) is reported as `clock_ns` and is included in
//! every sample.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::json;
use shmbus::time::monotonic_ns;
use shmbus::topic::{DeliveryPolicy, Topic, TopicConfig, TopicRecvTimeoutError, TopicTryRecvError};

use crate::affinity;
use crate::child::{self, Helper};
use crate::transports::shmbus_kinds::{policy, ScratchRoot, BLOCK_SLICE};
use crate::transports::{Mode, Payload};

/// The hidden subcommand of a subscriber process.
pub const SUBSCRIBER_ROLE: &str = "__fanout-subscriber";

/// History of the measured topic.
const HISTORY: usize = 256;

/// One run, as asked for.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Subscriber processes.
    pub subscribers: usize,
    /// Message size.
    pub size: usize,
    /// Recorded publishes.
    pub iters: u64,
    /// Unrecorded publishes first.
    pub warmup: u64,
    /// How subscribers wait.
    pub mode: Mode,
    /// copy: `send` and copying reads; touch: loan/send and pinned reads.
    pub payload: Payload,
    /// A `block` topic with reliable subscribers (lossless) instead of an `overwrite` one.
    pub reliable: bool,
    /// Give up when subscribers do not finish for this long.
    pub timeout: Duration,
}

/// What a run measured.
#[derive(Debug)]
pub struct Outcome {
    /// The configuration.
    pub config: Config,
    /// ns per publish call.
    pub hist: Histogram<u64>,
    /// Median cost of two back-to-back clock reads.
    pub clock_ns: u64,
    /// Fewest and most messages any subscriber received.
    pub received: (u64, u64),
    /// Messages the subscribers skipped (lagged), summed.
    pub lagged: u64,
    /// Whether publisher and subscribers were pinned to different CPUs.
    pub pinned: bool,
}

fn clock_cost() -> u64 {
    let mut v: Vec<u64> = (0..10_001)
        .map(|_| {
            let a = monotonic_ns();
            let b = monotonic_ns();
            b - a
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2]
}

/// Publisher side. Errors are one line.
pub fn run(config: Config) -> Result<Outcome, String> {
    let cpus = affinity::pick_pair().map_err(|e| format!("cannot read CPU affinity: {e}"))?;
    if let Some((p, _)) = cpus {
        affinity::pin_current_thread(p).map_err(|e| format!("cannot pin to CPU {p}: {e}"))?;
    } else {
        eprintln!("shmbus-bench: note: only one CPU available; publisher and subscribers are not pinned");
    }
    let (root, handoff) = ScratchRoot::create("fanout").map_err(|e| format!("cannot make a scratch root: {e}"))?;
    let domain = root.domain().map_err(|e| format!("cannot open the scratch domain: {e}"))?;
    let mut topic_config = TopicConfig::default().max_message_len(config.size).history(HISTORY);
    if config.reliable {
        topic_config = topic_config.policy(DeliveryPolicy::Block);
    }
    let topic =
        Topic::create_or_open(&domain, "fanout", &topic_config).map_err(|e| format!("cannot create the topic: {e}"))?;
    let mut publisher = topic.publisher().map_err(|e| format!("cannot publish: {e}"))?;
    let total = config.warmup + config.iters;
    let mut args = vec![
        format!("--root={}", handoff.args[0]),
        format!("--size={}", config.size),
        format!("--last={total}"),
        format!("--mode={}", config.mode.as_str()),
        format!("--payload={}", config.payload.as_str()),
    ];
    if config.reliable {
        args.push("--reliable".into());
    }
    if let Some((_, s)) = cpus {
        args.push(format!("--cpu={s}"));
    }
    let mut helpers: Vec<Helper> = Vec::with_capacity(config.subscribers);
    for _ in 0..config.subscribers {
        match child::spawn(SUBSCRIBER_ROLE, &args) {
            Ok(h) => helpers.push(h),
            Err(e) => {
                child::kill_all(&mut helpers);
                return Err(format!("cannot start a subscriber process: {e}"));
            }
        }
    }
    let result = publish_all(&config, &domain, &mut publisher, &mut helpers, total);
    let result = result.and_then(|(hist, clock_ns)| {
        let (mut lo, mut hi, mut lagged) = (u64::MAX, 0, 0);
        for h in &mut helpers {
            let line = h.line().map_err(|e| format!("subscriber: {e}"))?;
            let mut it = line.split_whitespace();
            let (Some("received"), Some(r), Some("lagged"), Some(l)) = (it.next(), it.next(), it.next(), it.next())
            else {
                return Err(format!("a subscriber reported {line:?}"));
            };
            let r: u64 = r.parse().map_err(|_| format!("a subscriber reported {line:?}"))?;
            lagged += l.parse::<u64>().map_err(|_| format!("a subscriber reported {line:?}"))?;
            lo = lo.min(r);
            hi = hi.max(r);
            match h.wait_exit(config.timeout) {
                Ok(Some(s)) if s.success() => {}
                Ok(Some(s)) => return Err(format!("a subscriber process failed ({s})")),
                _ => return Err("a subscriber process did not exit".into()),
            }
        }
        Ok(Outcome { config, hist, clock_ns, received: (lo, hi), lagged, pinned: cpus.is_some() })
    });
    if result.is_err() {
        child::kill_all(&mut helpers);
    }
    result
}

fn publish_all(
    config: &Config,
    domain: &shmbus::Domain,
    publisher: &mut shmbus::topic::Publisher,
    helpers: &mut [Helper],
    total: u64,
) -> Result<(Histogram<u64>, u64), String> {
    for h in helpers.iter_mut() {
        let l = h.line().map_err(|e| format!("subscriber: {e}"))?;
        if l != "ready" {
            return Err(format!("a subscriber said {l:?} instead of ready"));
        }
    }
    let subscribers = Topic::status(domain, "fanout").map_err(|e| format!("status: {e}"))?.subscribers;
    if subscribers != config.subscribers {
        return Err(format!("{subscribers} subscribers attached, expected {}", config.subscribers));
    }
    let clock_ns = clock_cost();
    let n = config.size;
    let mut msg: Vec<u8> = (0..n).map(|i| i as u8).collect();
    let mut hist = Histogram::<u64>::new(3).expect("3 significant figures is valid");
    for i in 0..total {
        msg[0] = i as u8;
        let t0 = monotonic_ns();
        match config.payload {
            Payload::Copy => publisher.send(&msg).map(drop),
            Payload::Touch => publisher.loan().and_then(|mut loan| {
                loan[0] = i as u8;
                loan[n - 1] = i as u8;
                loan.truncate(n);
                loan.send().map(drop)
            }),
        }
        .map_err(|e| format!("publish {i}: {e}"))?;
        let t1 = monotonic_ns();
        if i >= config.warmup {
            hist.record((t1 - t0).max(1)).map_err(|e| format!("histogram: {e:?}"))?;
        }
    }
    Ok((hist, clock_ns))
}

/// Subscriber process arguments.
#[derive(Debug)]
pub struct SubscriberConfig {
    /// Scratch root holding the topic.
    pub root: String,
    /// Message size.
    pub size: usize,
    /// Sequence number of the last message: exit after receiving it.
    pub last: u64,
    /// How to wait.
    pub mode: Mode,
    /// Copy out or pin and look at two bytes.
    pub payload: Payload,
    /// CPU to pin to.
    pub cpu: Option<usize>,
    /// Subscribe reliably (the topic's policy is `block`).
    pub reliable: bool,
}

/// Subscriber side: reads in order until message `last`, then prints
/// `received R lagged L`.
pub fn subscriber(config: SubscriberConfig) -> Result<(), String> {
    let ppid = std::os::unix::process::parent_id();
    let (_root, domain) = crate::transports::shmbus_kinds::child_domain(config.root, config.cpu)?;
    let sub = Topic::open(&domain, "fanout")
        .and_then(|t| if config.reliable { t.reliable_subscriber() } else { t.subscriber() })
        .map_err(|e| format!("subscriber: cannot subscribe: {e}"))?;
    if !config.reliable {
        // A reliable one starts at the next message anyway, and the publisher waits for it.
        sub.seek(1);
    }
    sub.set_wait_policy(policy(config.mode));
    let mut buf = Vec::with_capacity(config.size);
    let (mut received, mut lagged, mut spins) = (0u64, 0u64, 0u32);
    let mut seen = 0u8;
    println!("ready");
    loop {
        let step = match (config.mode, config.payload) {
            (Mode::Spin, Payload::Copy) => Step::from_try(sub.try_recv_into(&mut buf).map(|m| m.seq())),
            (Mode::Spin, Payload::Touch) => Step::from_try(sub.try_recv_ref().map(|s| {
                seen ^= s[0] ^ s[s.len() - 1];
                s.seq()
            })),
            (Mode::Block | Mode::Async, Payload::Copy) => {
                Step::from_timeout(sub.recv_into_timeout(&mut buf, BLOCK_SLICE).map(|m| m.seq()))
            }
            (Mode::Block | Mode::Async, Payload::Touch) => {
                Step::from_timeout(sub.recv_ref_timeout(BLOCK_SLICE).map(|s| {
                    seen ^= s[0] ^ s[s.len() - 1];
                    s.seq()
                }))
            }
        };
        match step {
            Step::Msg(seq) => {
                received += 1;
                if seq >= config.last {
                    break;
                }
            }
            Step::Lagged(missed) => lagged += missed,
            Step::Nothing => {
                spins = spins.wrapping_add(1);
                std::hint::spin_loop();
                if (config.mode != Mode::Spin || spins % (1 << 16) == 0) && !child::parent_alive(ppid) {
                    return Err("subscriber: the publisher process is gone".into());
                }
            }
            Step::Failed(e) => return Err(format!("subscriber: {e}")),
        }
    }
    std::hint::black_box(seen);
    println!("received {received} lagged {lagged}");
    Ok(())
}

/// What one receive of a subscriber came to: nothing now (an empty poll or a timed-out
/// slice) is the same for the spinning and the blocking modes.
enum Step {
    Msg(u64),
    Nothing,
    Lagged(u64),
    Failed(String),
}

impl Step {
    fn from_try(r: Result<u64, TopicTryRecvError>) -> Step {
        match r {
            Ok(seq) => Step::Msg(seq),
            Err(TopicTryRecvError::Empty) => Step::Nothing,
            Err(TopicTryRecvError::Lagged { missed }) => Step::Lagged(missed),
            Err(e) => Step::Failed(e.to_string()),
        }
    }

    fn from_timeout(r: Result<u64, TopicRecvTimeoutError>) -> Step {
        match r {
            Ok(seq) => Step::Msg(seq),
            Err(TopicRecvTimeoutError::Timeout) => Step::Nothing,
            Err(TopicRecvTimeoutError::Lagged { missed }) => Step::Lagged(missed),
            Err(e) => Step::Failed(e.to_string()),
        }
    }
}

/// The run as one JSON object.
pub fn json(o: &Outcome) -> String {
    let h = &o.hist;
    let c = &o.config;
    json!({
        "subscribers": c.subscribers,
        "size": c.size,
        "iters": c.iters,
        "warmup": c.warmup,
        "mode": c.mode.as_str(),
        "payload": c.payload.as_str(),
        "reliable": c.reliable,
        "pinned": o.pinned,
        "p50_ns": h.value_at_quantile(0.50),
        "p90_ns": h.value_at_quantile(0.90),
        "p99_ns": h.value_at_quantile(0.99),
        "p999_ns": h.value_at_quantile(0.999),
        "max_ns": h.max(),
        "min_ns": h.min(),
        "mean_ns": h.mean().round() as u64,
        "clock_ns": o.clock_ns,
        "received_min": o.received.0,
        "received_max": o.received.1,
        "lagged": o.lagged,
    })
    .to_string()
}

/// The run as one readable line.
pub fn line(o: &Outcome) -> String {
    let h = &o.hist;
    let c = &o.config;
    format!(
        "fanout {} subscribers {} {} {} B  {} publishes  ns per publish: p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  mean {:.0}  (clock {} ns included; received {}..{}, lagged {})",
        c.subscribers,
        c.mode.as_str(),
        c.payload.as_str(),
        c.size,
        c.iters,
        h.value_at_quantile(0.50),
        h.value_at_quantile(0.90),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max(),
        h.mean(),
        o.clock_ns,
        o.received.0,
        o.received.1,
        o.lagged,
    )
}
