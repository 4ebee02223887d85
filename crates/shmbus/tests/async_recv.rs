//! Async receive (feature `tokio`): every kind's `recv_async` in order across processes or
//! threads, cancellation (a dropped future loses nothing), the async wait and
//! `tokio::select!` over three channels, the `Stream` adapter, receives and waits polled by
//! hand (`RecvState`, `WaitState`), `&Subscriber`, and idle waiters using no CPU.
//!
//! `without_waitv_*` runs some of these again in a child with `SHMBUS_NO_WAITV=1`, the
//! waiter thread's fallback for kernels without `futex_waitv`.
#![cfg(not(loom))]

mod common;

use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{child_command, child_role, Scratch};
use shmbus::journal::{Journal, JournalConfig, RollCycle};
use shmbus::r#async::{self as aio, AsyncRecv};
use shmbus::{
    Domain, Pool, PoolConfig, PoolTrySendError, Queue, QueueConfig, Stream, StreamConfig, StreamRecvError, Topic,
    TopicConfig, WaitError, WaitSet, Waitable,
};

const N: u64 = 10_000;
const ROOT: &str = "SHMBUS_ASYNC_TEST_ROOT";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap()
}

fn domain_at(root: &std::path::Path) -> Domain {
    Domain::with_root("async", root).unwrap()
}

/// Sends `N` numbered messages with `send`, pausing now and then so that the receiver
/// finds the channel empty and really waits.
fn send_numbered(mut send: impl FnMut(&[u8])) {
    for i in 0..N {
        send(&i.to_le_bytes());
        if i % 100 == 99 {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

fn number(data: &[u8]) -> u64 {
    u64::from_le_bytes(data.try_into().expect("an 8-byte message"))
}

/// Child entry point: does nothing unless run as a child.
#[test]
fn child_main() {
    let Some(role) = child_role() else { return };
    let root = PathBuf::from(std::env::var(ROOT).unwrap());
    let d = domain_at(&root);
    match role.as_str() {
        "topic-pub" => {
            let mut p = Topic::open(&d, "t").unwrap().publisher().unwrap();
            send_numbered(|m| {
                p.send(m).unwrap();
            });
        }
        "idle" => idle_child(&root),
        "idle-many" => idle_many_child(&root),
        "fork" => fork_child(&d),
        "stream-writer" => {
            let mut w = Stream::open(&d, "s").unwrap().writer().unwrap();
            w.send(b"last words").unwrap();
            // Until the parent SIGKILLs it.
            std::thread::sleep(Duration::from_secs(60));
        }
        "queue-prod" => {
            let mut p = Queue::open(&d, "q").unwrap().producer().unwrap();
            send_numbered(|m| p.send(m).unwrap());
        }
        other => panic!("unknown role {other}"),
    }
}

/// Child role `fork`: awaits a receive (so this process's waiter thread runs and sleeps on
/// the topic), then forks. The forked process opens its own subscriber and awaits a message
/// published after the fork; it exits 0 if it gets it within 10 s, 1 if not. Exits with
/// the forked process's status.
fn fork_child(d: &Domain) {
    let topic = Topic::open(d, "f").unwrap();
    let mut sub = topic.subscriber().unwrap();
    let mut p = topic.publisher().unwrap();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        p.send(b"before fork").unwrap();
        p
    });
    let m = rt().block_on(sub.recv_async()).unwrap();
    assert_eq!(m.data(), b"before fork");
    let mut p = sender.join().unwrap();
    // SAFETY: fork(2); the forked process runs only the code below and leaves by `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // Any panic too ends in `_exit(1)`: the forked process has only this thread, and a
        // panic caught by the test harness's copy would end it with status 0.
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut sub = topic.subscriber().unwrap();
            rt().block_on(async { tokio::time::timeout(Duration::from_secs(10), sub.recv_async()).await })
                .is_ok_and(|m| m.is_ok_and(|m| m.data() == b"after fork"))
        }));
        // SAFETY: ends the forked process without running the test harness's code.
        unsafe { libc::_exit(if got.unwrap_or(false) { 0 } else { 1 }) };
    }
    // Until the forked process is done: it receives whichever of these follows its
    // subscribe.
    let mut status = 0;
    loop {
        p.send(b"after fork").unwrap();
        // SAFETY: waitpid(2) on our own child, status into a local.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(r >= 0, "waitpid failed");
        if r == pid {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the forked process's await did not wake: {status:#x}"
    );
}

fn run_child(role: &str, root: &Scratch) -> std::process::Child {
    child_command("child_main", role, &[(ROOT, root.path().display().to_string())]).spawn().unwrap()
}

/// A process forked after using async receive awaits receives of its own: it has no waiter
/// thread at first, and its first registration starts one (`pthread_atfork`).
#[test]
#[cfg_attr(tsan, ignore = "ThreadSanitizer ends a child that starts a thread after a multi-threaded fork")]
fn a_forked_process_awaits_receives_of_its_own() {
    let root = Scratch::new("async-fork");
    let d = domain_at(root.path());
    Topic::create_or_open(&d, "f", &TopicConfig::default().max_message_len(16).history(16)).unwrap();
    let out = run_child("fork", &root).wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn topic_subscriber_receives_10000_in_order_from_another_process() {
    let root = Scratch::new("async-topic");
    let d = domain_at(root.path());
    let cfg = TopicConfig::default().max_message_len(8).history(16384);
    let mut sub = Topic::create_or_open(&d, "t", &cfg).unwrap().subscriber().unwrap();
    let mut child = run_child("topic-pub", &root);
    rt().block_on(async {
        for i in 0..N {
            let m = sub.recv_async().await.unwrap();
            assert_eq!(number(m.data()), i);
        }
    });
    assert!(child.wait().unwrap().success());
}

#[test]
fn queue_consumer_receives_10000_in_order_from_another_process() {
    let root = Scratch::new("async-queue");
    let d = domain_at(root.path());
    let mut c = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(64).max_message_len(8))
        .unwrap()
        .consumer()
        .unwrap();
    let mut child = run_child("queue-prod", &root);
    rt().block_on(async {
        for i in 0..N {
            assert_eq!(number(&c.recv_async().await.unwrap()), i);
        }
    });
    assert!(child.wait().unwrap().success());
}

#[test]
fn stream_reader_receives_10000_in_order_and_its_stream_ends_when_the_writer_goes() {
    let root = Scratch::new("async-stream");
    let d = root.domain("s");
    let mut r = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(4096)).unwrap().reader().unwrap();
    let mut w = Stream::open(&d, "s").unwrap().writer().unwrap();
    let t = std::thread::spawn(move || send_numbered(|m| w.send(m).unwrap()));
    rt().block_on(async {
        let mut items = r.stream();
        for i in 0..N {
            assert_eq!(number(&items.next().await.unwrap().unwrap()), i);
        }
        t.join().unwrap();
        // The writer is gone: the stream yields `Disconnected` once, then ends.
        assert_eq!(items.next().await.unwrap(), Err(StreamRecvError::Disconnected));
        assert!(items.next().await.is_none());
    });
}

#[test]
fn a_stream_reader_waiting_async_finds_its_sigkilled_writer_gone() {
    let root = Scratch::new("async-stream-kill");
    let d = domain_at(root.path());
    let mut r = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(4096)).unwrap().reader().unwrap();
    let mut child = run_child("stream-writer", &root);
    assert!(r.wait_for_writer_timeout(Duration::from_secs(30)), "the writer attaches");
    rt().block_on(async {
        let got = tokio::time::timeout(Duration::from_secs(30), r.recv_async()).await;
        assert_eq!(got.expect("the writer's record").unwrap(), b"last words");
        // SIGKILL: the writer notifies nobody; the waiting receive must still end.
        child.kill().unwrap();
        child.wait().unwrap();
        let gone = tokio::time::timeout(Duration::from_secs(30), r.recv_async()).await;
        assert_eq!(gone.expect("a receive that ends"), Err(StreamRecvError::Disconnected));
    });
}

/// A future tries once per wake-up, not in a spin: one attempt a liveness interval after the
/// writer's death must see it (the writer watch reads its clock only every 64th poll of a
/// spin, which a retry every interval would take 64 intervals to make).
#[test]
fn one_attempt_an_interval_after_a_sigkill_finds_the_writer_gone() {
    let root = Scratch::new("async-stream-kill-once");
    let d = domain_at(root.path());
    let mut r = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(4096)).unwrap().reader().unwrap();
    let mut child = run_child("stream-writer", &root);
    assert!(r.wait_for_writer_timeout(Duration::from_secs(30)), "the writer attaches");
    let (mut state, mut cx) = (aio::RecvState::default(), Context::from_waker(Waker::noop()));
    let first = loop {
        match r.poll_recv(&mut state, &mut cx) {
            Poll::Ready(v) => break v,
            Poll::Pending => std::thread::sleep(Duration::from_millis(1)),
        }
    };
    assert_eq!(first.unwrap(), b"last words");
    assert!(r.poll_recv(&mut state, &mut cx).is_pending(), "the writer lives: nothing yet");
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(shmbus::stream::LIVENESS_INTERVAL);
    assert_eq!(r.poll_recv(&mut state, &mut cx), Poll::Ready(Err(StreamRecvError::Disconnected)));
}

#[test]
fn pool_worker_receives_10000_jobs_in_order() {
    let root = Scratch::new("async-pool");
    let d = root.domain("p");
    let mut disp = Pool::create_or_open(&d, "p", &PoolConfig::default().max_workers(2).max_job_len(8))
        .and_then(|p| p.dispatcher())
        .unwrap();
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    let t = std::thread::spawn(move || {
        let mut ws = WaitSet::new();
        send_numbered(|m| loop {
            match disp.try_send(m) {
                Ok(_) => break,
                Err(PoolTrySendError::AllBusy | PoolTrySendError::NoWorkers) => {
                    let _ = ws.wait_timeout(&[&disp], Duration::from_millis(10));
                }
                Err(e) => panic!("{e}"),
            }
        });
    });
    rt().block_on(async {
        for i in 0..N {
            let job = w.recv_async().await.unwrap();
            assert_eq!(number(job.data()), i);
        }
    });
    t.join().unwrap();
}

#[test]
fn journal_tailer_receives_10000_in_order() {
    let (dir, _scratch) = common::fresh_dir("async-journal");
    let cfg = JournalConfig::default()
        .cycle_bytes(1 << 20)
        .chunk_bytes(64 << 10)
        .max_entry_len(64 << 10)
        .roll(RollCycle::Never);
    let j = Journal::create_or_open(&dir, &cfg).unwrap();
    let mut tailer = j.tailer().unwrap();
    let mut a = j.appender().unwrap();
    let t = std::thread::spawn(move || {
        send_numbered(|m| {
            a.send(m).unwrap();
        })
    });
    rt().block_on(async {
        for i in 0..N {
            let e = tailer.recv_async().await.unwrap();
            assert_eq!((e.index(), number(e.data())), (i, i));
        }
    });
    t.join().unwrap();
}

#[test]
fn typed_receivers_await_values_in_order() {
    let root = Scratch::new("async-typed");
    let d = root.domain("typed");
    let q = Queue::create_or_open(&d, "q", &QueueConfig::for_type::<u64>().capacity(64)).unwrap();
    let (mut tx, mut rx) = (q.producer_of::<u64>().unwrap(), q.consumer_of::<u64>().unwrap());
    let t = Topic::create_or_open(&d, "t", &TopicConfig::for_type::<u64>().history(2048)).unwrap();
    let (mut publ, mut sub) = (t.publisher_of::<u64>().unwrap(), t.subscriber_of::<u64>().unwrap());
    let sender = std::thread::spawn(move || {
        for i in 0..1000u64 {
            tx.send(&i).unwrap();
            publ.send(&(i * 3)).unwrap();
            if i % 100 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    rt().block_on(async {
        let mut values = sub.stream();
        for i in 0..1000u64 {
            assert_eq!(rx.recv_async().await.unwrap(), i);
            assert_eq!(values.next().await.unwrap().unwrap(), i * 3);
        }
    });
    sender.join().unwrap();
}

/// Polls `fut` once with a waker that does nothing.
fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn a_dropped_receive_loses_no_message() {
    let root = Scratch::new("async-cancel");
    let d = root.domain("c");
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(8).max_message_len(8)).unwrap();
    let (mut p, mut c) = (q.producer().unwrap(), q.consumer().unwrap());
    let t = Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(8)).unwrap();
    let (mut publ, mut sub) = (t.publisher().unwrap(), t.subscriber().unwrap());

    // Pending, then dropped; the message sent after is received by the next receive.
    {
        let mut f = pin!(c.recv_async());
        assert!(poll_once(f.as_mut()).is_pending());
        let mut g = pin!(sub.recv_async());
        assert!(poll_once(g.as_mut()).is_pending());
    }
    p.send(b"one").unwrap();
    publ.send(b"uno").unwrap();
    assert_eq!(c.try_recv().unwrap(), b"one");
    assert_eq!(sub.try_recv().unwrap().data(), b"uno");

    // A timeout drops the future while it waits; the next `recv_async` gets the message.
    rt().block_on(async {
        for round in 0..20u64 {
            let r = tokio::time::timeout(Duration::from_millis(1), c.recv_async()).await;
            assert!(r.is_err(), "round {round}: nothing was sent yet");
            p.send(&round.to_le_bytes()).unwrap();
            assert_eq!(number(&c.recv_async().await.unwrap()), round);
        }
    });
}

/// A waker that counts its wakes, for polling by hand.
#[derive(Default)]
struct Count {
    wakes: std::sync::Mutex<u64>,
    moved: std::sync::Condvar,
}

impl std::task::Wake for Count {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        *self.wakes.lock().unwrap() += 1;
        self.moved.notify_all();
    }
}

impl Count {
    fn get(&self) -> u64 {
        *self.wakes.lock().unwrap()
    }

    /// Waits until the count is past `seen`.
    fn wait_past(&self, seen: u64) {
        let (n, timeout) =
            self.moved.wait_timeout_while(self.wakes.lock().unwrap(), Duration::from_secs(30), |n| *n <= seen).unwrap();
        assert!(!timeout.timed_out(), "woken (count {})", *n);
    }
}

/// A binding's pattern: the endpoint lent to each poll only, the state kept apart, and now
/// and then a state dropped while it waits (a cancelled receive). Every message arrives, in
/// order, each woken by the waiter thread.
#[test]
fn receives_and_waits_polled_by_hand_are_woken_and_lose_nothing() {
    let root = Scratch::new("async-by-hand");
    let d = root.domain("h");
    let cfg = QueueConfig::default().capacity(64).max_message_len(8);
    let mut c = Queue::create_or_open(&d, "q", &cfg).unwrap().consumer().unwrap();
    let mut p = Queue::open(&d, "q").unwrap().producer().unwrap();
    let mut c2 = Queue::create_or_open(&d, "q2", &cfg).unwrap().consumer().unwrap();
    let mut p2 = Queue::open(&d, "q2").unwrap().producer().unwrap();
    let t = std::thread::spawn(move || {
        send_numbered(|m| p.send(m).unwrap());
        send_numbered(|m| p2.send(m).unwrap());
    });
    let count = std::sync::Arc::new(Count::default());
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);

    let (mut state, mut next, mut waits) = (aio::RecvState::default(), 0, 0u64);
    while next < N {
        let seen = count.get();
        match c.poll_recv(&mut state, &mut cx) {
            Poll::Ready(m) => {
                assert_eq!(number(&m.unwrap()), next);
                next += 1;
            }
            Poll::Pending => {
                waits += 1;
                if waits % 5 == 0 {
                    state = aio::RecvState::default(); // cancelled: poll again with a new one
                } else {
                    count.wait_past(seen);
                }
            }
        }
    }
    assert!(waits > 0, "the receive had to wait");

    let (mut state, mut next) = (aio::WaitState::default(), 0);
    while next < N {
        let seen = count.get();
        let chans: [&dyn Waitable; 2] = [&c, &c2];
        match state.poll(&chans, &mut cx) {
            Poll::Ready(ready) => {
                assert_eq!(ready.unwrap(), vec![1]);
                while let Ok(m) = c2.try_recv() {
                    assert_eq!(number(&m), next);
                    next += 1;
                }
            }
            Poll::Pending => count.wait_past(seen),
        }
    }
    t.join().unwrap();
}

/// `&Subscriber` awaits while a sample of the subscriber is held, as its blocking receives
/// can, and several futures may wait on one subscriber.
#[test]
fn a_shared_subscriber_awaits_while_a_sample_is_held() {
    let root = Scratch::new("async-shared-sub");
    let d = root.domain("s");
    let t = Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64).history(16384)).unwrap();
    let (mut publ, sub) = (t.publisher().unwrap(), t.subscriber().unwrap());
    publ.send(&[7; 64]).unwrap();
    let held = sub.try_recv_ref().unwrap();
    let sender = std::thread::spawn(move || {
        send_numbered(|m| {
            publ.send(m).unwrap();
        })
    });
    rt().block_on(async {
        let (mut a, mut b) = (&sub, &sub);
        let mut next = 0;
        while next < N {
            let m = tokio::select! {
                m = a.recv_async() => m,
                m = b.recv_async() => m,
            };
            assert_eq!(number(m.unwrap().data()), next);
            next += 1;
        }
    });
    assert_eq!(&held[..], &[7; 64]);
    drop(held);
    sender.join().unwrap();
}

#[test]
fn a_leaked_future_whose_channel_is_gone_does_not_hold_up_the_others() {
    let root = Scratch::new("async-leak");
    let d = root.domain("leak");
    let cfg = QueueConfig::default().capacity(8).max_message_len(8);
    for round in 0..20u64 {
        // A pending receive, leaked; its consumer (and mapping) then goes. The next queue
        // may well be mapped at the same address, with an event word of the same value.
        {
            let q = Queue::create_or_open(&d, &format!("gone{round}"), &cfg).unwrap();
            let mut c = q.consumer().unwrap();
            let mut f = Box::pin(c.recv_async());
            assert!(poll_once(f.as_mut()).is_pending());
            std::mem::forget(f);
        }
        let q = Queue::create_or_open(&d, &format!("live{round}"), &cfg).unwrap();
        let (mut p, mut c) = (q.producer().unwrap(), q.consumer().unwrap());
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(2));
            p.send(&round.to_le_bytes()).unwrap();
        });
        let got = rt().block_on(async { tokio::time::timeout(Duration::from_secs(30), c.recv_async()).await });
        assert_eq!(number(&got.expect("the live receive is woken").unwrap()), round);
        t.join().unwrap();
    }
}

#[test]
fn select_and_wait_over_three_queues_lose_nothing() {
    let root = Scratch::new("async-select");
    let d = root.domain("sel");
    let cfg = QueueConfig::default().capacity(1024).max_message_len(8);
    let names = ["a", "b", "c"];
    let mut consumers: Vec<_> =
        names.iter().map(|n| Queue::create_or_open(&d, n, &cfg).unwrap().consumer().unwrap()).collect();
    let mut producers: Vec<_> = names.iter().map(|n| Queue::open(&d, n).unwrap().producer().unwrap()).collect();
    const PER: u64 = 1000;
    let t = std::thread::spawn(move || {
        for i in 0..PER {
            // Each queue in turn, in an order that changes.
            for k in 0..3 {
                let q = (i as usize + k) % 3;
                producers[q].send(&i.to_le_bytes()).unwrap();
            }
            if i % 50 == 0 {
                std::thread::sleep(Duration::from_micros(300));
            }
        }
    });
    let [ca, cb, cc] = &mut consumers[..] else { unreachable!() };
    rt().block_on(async {
        // `tokio::select!` drops the receives that lose each round: none may take a message.
        let mut next = [0u64; 3];
        while next.iter().any(|&n| n < PER / 2) {
            let (q, m) = tokio::select! {
                m = ca.recv_async(), if next[0] < PER / 2 => (0, m),
                m = cb.recv_async(), if next[1] < PER / 2 => (1, m),
                m = cc.recv_async(), if next[2] < PER / 2 => (2, m),
            };
            assert_eq!(number(&m.unwrap()), next[q], "queue {q}");
            next[q] += 1;
        }
        // The rest through the async wait set.
        while next.iter().any(|&n| n < PER) {
            let chans: [&dyn Waitable; 3] = [&*ca, &*cb, &*cc];
            let ready = aio::wait(&chans).await.unwrap();
            assert!(!ready.is_empty());
            for q in ready {
                let c = [&mut *ca, &mut *cb, &mut *cc].into_iter().nth(q).unwrap();
                while let Ok(m) = c.try_recv() {
                    assert_eq!(number(&m), next[q], "queue {q}");
                    next[q] += 1;
                }
            }
        }
        assert!(!ca.is_ready() && !cb.is_ready() && !cc.is_ready());
        assert_eq!(aio::wait(&[]).await, Err(WaitError::Empty));
    });
    t.join().unwrap();
}

#[test]
fn tasks_on_the_multi_thread_runtime_receive_from_their_own_consumers() {
    let root = Scratch::new("async-mt");
    let d = root.domain("mt");
    let cfg = QueueConfig::default().capacity(64).max_message_len(8);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let tasks: Vec<_> = (0..4)
        .map(|k| {
            let mut c = Queue::create_or_open(&d, &format!("q{k}"), &cfg).unwrap().consumer().unwrap();
            // Spawned: the futures and streams are `Send`.
            rt.spawn(async move {
                let mut items = c.stream();
                for i in 0..1000u64 {
                    assert_eq!(number(&items.next().await.unwrap().unwrap()), i, "queue {k}");
                }
            })
        })
        .collect();
    let mut producers: Vec<_> =
        (0..4).map(|k| Queue::open(&d, &format!("q{k}")).unwrap().producer().unwrap()).collect();
    for i in 0..1000u64 {
        for p in &mut producers {
            p.send(&i.to_le_bytes()).unwrap();
        }
        if i % 100 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    rt.block_on(async {
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(60), t).await.expect("every task finishes").unwrap();
        }
    });
}

#[test]
fn the_async_wait_takes_more_channels_than_one_futex_waitv() {
    let root = Scratch::new("async-many");
    let d = root.domain("many");
    let cfg = QueueConfig::default().capacity(2).max_message_len(8);
    const COUNT: usize = 130;
    let mut consumers: Vec<_> =
        (0..COUNT).map(|k| Queue::create_or_open(&d, &format!("q{k}"), &cfg).unwrap().consumer().unwrap()).collect();
    let mut producers: Vec<_> =
        (0..COUNT).map(|k| Queue::open(&d, &format!("q{k}")).unwrap().producer().unwrap()).collect();
    let (tx, rx) = std::sync::mpsc::channel::<usize>();
    let t = std::thread::spawn(move || {
        for k in rx {
            std::thread::sleep(Duration::from_millis(5));
            producers[k].send(b"x").unwrap();
        }
    });
    rt().block_on(async {
        // Some of these are past the 127 channels one futex_waitv watches (which ones
        // depends on the registry's order): a second waiter thread sleeps on those.
        for k in [0, 64, 126, 127, 128, COUNT - 1] {
            tx.send(k).unwrap();
            let ready = {
                let chans: Vec<&dyn Waitable> = consumers.iter().map(|c| c as &dyn Waitable).collect();
                tokio::time::timeout(Duration::from_secs(30), aio::wait(&chans)).await
            };
            assert_eq!(ready.expect("a wait that ends").unwrap(), vec![k]);
            assert_eq!(consumers[k].try_recv().unwrap(), b"x");
        }
    });
    drop(tx);
    t.join().unwrap();
}

/// CPU time (user + system) this process has used, and its voluntary context switches.
fn cpu_and_switches() -> (Duration, i64) {
    // SAFETY: getrusage writes a `rusage` into the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable `rusage`.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) }, 0);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(u.ru_utime) + tv(u.ru_stime), u.ru_nvcsw)
}

/// Child: three async receives wait for 1 s on channels nobody sends on; the process's CPU
/// time and voluntary context switches over that second must barely move. In a process of
/// its own, so that the other tests' threads do not count.
fn idle_child(root: &std::path::Path) {
    let d = domain_at(root);
    let mut sub =
        Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(8)).unwrap().subscriber().unwrap();
    let mut c = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(8).max_message_len(8))
        .unwrap()
        .consumer()
        .unwrap();
    let mut r = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(4096)).unwrap().reader().unwrap();
    let _w = Stream::open(&d, "s").unwrap().writer().unwrap();
    let rt = rt();
    let (before, after) = rt.block_on(async {
        // Let the waiter thread start and settle.
        let _ = tokio::time::timeout(Duration::from_millis(50), c.recv_async()).await;
        let before = cpu_and_switches();
        let idle = async {
            let _ = tokio::join!(sub.recv_async(), c.recv_async(), r.recv_async());
        };
        assert!(tokio::time::timeout(Duration::from_secs(1), idle).await.is_err(), "nothing was sent");
        (before, cpu_and_switches())
    });
    let cpu = after.0 - before.0;
    let switches = after.1 - before.1;
    eprintln!("1 s of idle waiting: {cpu:?} of CPU, {switches} voluntary context switches");
    if std::env::var_os("SHMBUS_NO_WAITV").is_none() {
        // The stream reader's wait wakes every 50 ms to look for a dead writer (as the
        // blocking one does): a few dozen switches; the fallback, which probes every
        // millisecond, makes thousands.
        assert!(cpu < Duration::from_millis(100), "{cpu:?} of CPU over 1 s of idle waiting");
        assert!(switches < 400, "{switches} context switches over 1 s of idle waiting");
    } else {
        // The documented cost of the fallback: a probe of each waited-on word every
        // millisecond. Still far from a core.
        assert!(cpu < Duration::from_millis(400), "{cpu:?} of CPU over 1 s of idle waiting without futex_waitv");
    }
}

/// How many channels `idle_many_child` waits on: several waiter threads' worth.
const MANY: usize = 1000;

/// Child: one async wait on [`MANY`] topics nobody sends on, for 1 s: the process's CPU time
/// and voluntary context switches must barely move (every waiter thread asleep in
/// `futex_waitv`, none probing). Then a message on the last topic and one on the first each
/// end a wait at once, with that topic alone ready. Then, with nothing waiting, the waiter
/// threads end, and the next wait starts one again.
fn idle_many_child(root: &std::path::Path) {
    let d = domain_at(root);
    let cfg = TopicConfig::default().max_message_len(8).history(2);
    let topics: Vec<Topic> = (0..MANY).map(|k| Topic::create_or_open(&d, &format!("t{k}"), &cfg).unwrap()).collect();
    let subs: Vec<_> = topics.iter().map(|t| t.subscriber().unwrap()).collect();
    let chans: Vec<&dyn Waitable> = subs.iter().map(|s| s as &dyn Waitable).collect();
    let rt = rt();
    let (before, after) = rt.block_on(async {
        // One wait throughout: registered, and the waiter threads started and settled,
        // before the second counts.
        let mut wait = pin!(aio::wait(&chans));
        assert!(tokio::time::timeout(Duration::from_millis(200), &mut wait).await.is_err(), "nothing was sent");
        let before = cpu_and_switches();
        assert!(tokio::time::timeout(Duration::from_secs(1), &mut wait).await.is_err(), "nothing was sent");
        // A thread per 127 channels (one `futex_waitv` less its control word).
        assert_eq!(waiter_threads(), MANY.div_ceil(127));
        (before, cpu_and_switches())
    });
    let cpu = after.0 - before.0;
    let switches = after.1 - before.1;
    eprintln!("1 s of idle waiting on {MANY} topics: {cpu:?} of CPU, {switches} voluntary context switches");
    assert!(cpu < Duration::from_millis(100), "{cpu:?} of CPU over 1 s of idle waiting on {MANY} topics");
    assert!(switches < 400, "{switches} context switches over 1 s of idle waiting on {MANY} topics");
    for k in [MANY - 1, 0] {
        let mut p = topics[k].publisher().unwrap();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            p.send(b"x").unwrap();
        });
        let ready = rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), aio::wait(&chans)).await });
        assert_eq!(ready.expect("the wait ends").unwrap(), vec![k]);
        assert_eq!(subs[k].try_recv().unwrap().data(), b"x");
        sender.join().unwrap();
    }
    // Nothing waits now: the threads end after 5 s of that (bounded here by 30 s)...
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while waiter_threads() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} waiter threads stay with nothing to wait for",
            waiter_threads()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // ...and the next wait (on one topic) starts one again, and is woken.
    let mut p = topics[1].publisher().unwrap();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        p.send(b"y").unwrap();
    });
    let ready = rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), aio::wait(&chans[1..2])).await });
    assert_eq!(ready.expect("the wait ends").unwrap(), vec![0]);
    assert_eq!(waiter_threads(), 1);
    sender.join().unwrap();
}

/// How many async waiter threads this process has, by their name (cut to 15 bytes).
fn waiter_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("shmbus-async"))
        .count()
}

fn idle_in_a_child(role: &str, env: &[(&str, String)]) {
    let root = Scratch::new("async-idle");
    let mut env = env.to_vec();
    env.push((ROOT, root.path().display().to_string()));
    let out = child_command("child_main", role, &env).output().unwrap();
    let say = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(out.status.success(), "the idle child failed:\n{}{}", say(&out.stdout), say(&out.stderr));
}

#[test]
fn idle_async_waiters_use_no_cpu() {
    idle_in_a_child("idle", &[]);
}

#[test]
fn idle_async_waiters_without_waitv_use_little_cpu() {
    idle_in_a_child("idle", &[("SHMBUS_NO_WAITV", "1".to_string())]);
}

/// More channels than one `futex_waitv` takes: more waiter threads, all asleep.
#[test]
fn a_thousand_idle_async_waits_use_no_cpu_and_wake_at_once() {
    idle_in_a_child("idle-many", &[]);
}

/// Runs test `name` of this binary again in a child with `SHMBUS_NO_WAITV=1`.
fn without_waitv(name: &str) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("SHMBUS_NO_WAITV", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name} without futex_waitv failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
}

#[test]
fn without_waitv_queue_in_order() {
    if std::env::var_os("SHMBUS_NO_WAITV").is_some() {
        return;
    }
    without_waitv("queue_consumer_receives_10000_in_order_from_another_process");
}

#[test]
fn without_waitv_select_and_wait() {
    if std::env::var_os("SHMBUS_NO_WAITV").is_some() {
        return;
    }
    without_waitv("select_and_wait_over_three_queues_lose_nothing");
}
