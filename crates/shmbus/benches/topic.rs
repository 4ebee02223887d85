//! Topic micro-benchmarks in one process (criterion, `harness = false`): the cost of the
//! send and receive calls themselves, without another process or core in the loop.
//! Cross-process latency is `shmbus-bench`'s job.
//!
//! ```sh
//! cargo bench -p shmbus --bench topic
//! ```
//!
//! * `publish/copy/{8,4096}`: `Publisher::send` of an 8-byte / 4 KiB message (history 64,
//!   one subscriber attached and idle, so the publisher wraps around the history).
//! * `publish/loan_send/{8,4096}`: `loan`, write the first and last byte, `truncate`, `send`.
//! * `recv/try_recv_into/{8,4096}`: re-reads one committed message by copy (`seek` back,
//!   then `try_recv_into` into a reused buffer).
//! * `recv/try_recv_pinned/{8,4096}`: the same message pinned by `try_recv_ref` (zero copy),
//!   first and last byte read, sample dropped (unpinned). (The benchmark ids keep their
//!   names, so that results stay comparable.)
//!
//! Under `cargo test` the bench target is only built and run once per benchmark in test
//! mode (criterion's `--test` handling), so it costs next to nothing there.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use shmbus::topic::{Topic, TopicConfig};
use shmbus::Domain;

const SIZES: [usize; 2] = [8, 4096];

/// A scratch root on tmpfs, removed on drop.
struct Root(PathBuf);

impl Root {
    fn new(tag: &str) -> Root {
        let base =
            if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let path = base.join(format!("shmbus-criterion-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create scratch root");
        Root(path)
    }

    fn domain(&self) -> Domain {
        Domain::with_root("bench", &self.0).expect("valid domain")
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn publish(c: &mut Criterion) {
    let root = Root::new("publish");
    let d = root.domain();
    let mut g = c.benchmark_group("publish");
    for size in SIZES {
        let topic =
            Topic::create_or_open(&d, &format!("pub{size}"), &TopicConfig::default().max_message_len(size).history(64))
                .unwrap();
        let mut publisher = topic.publisher().unwrap();
        let _idle = topic.subscriber().unwrap();
        let msg = vec![7u8; size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(BenchmarkId::new("copy", size), &size, |b, _| {
            b.iter(|| publisher.send(black_box(&msg)).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("loan_send", size), &size, |b, &n| {
            b.iter(|| {
                let mut loan = publisher.loan().unwrap();
                loan[0] = 1;
                loan[n - 1] = 2;
                loan.truncate(n);
                loan.send().unwrap()
            })
        });
    }
    g.finish();
}

fn recv(c: &mut Criterion) {
    let root = Root::new("recv");
    let d = root.domain();
    let mut g = c.benchmark_group("recv");
    for size in SIZES {
        let topic = Topic::create_or_open(
            &d,
            &format!("recv{size}"),
            &TopicConfig::default().max_message_len(size).history(64),
        )
        .unwrap();
        let mut publisher = topic.publisher().unwrap();
        let sub = topic.subscriber().unwrap();
        let seq = publisher.send(&vec![3u8; size]).unwrap();
        let mut buf = Vec::with_capacity(size);
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(BenchmarkId::new("try_recv_into", size), &size, |b, _| {
            b.iter(|| {
                sub.seek(seq);
                sub.try_recv_into(black_box(&mut buf)).unwrap()
            })
        });
        g.bench_with_input(BenchmarkId::new("try_recv_pinned", size), &size, |b, _| {
            b.iter(|| {
                sub.seek(seq);
                let s = sub.try_recv_ref().unwrap();
                black_box((s[0], s[s.len() - 1]))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, publish, recv);
criterion_main!(benches);
