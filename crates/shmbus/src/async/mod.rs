//! Async receive (feature `tokio`): `recv_async().await` on every receiving endpoint, an
//! async wait over many channels, and `Stream` adapters.
//!
//! ```no_run
//! use shmbus::r#async::AsyncRecv;
//! # use shmbus::{Domain, Topic};
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let d = Domain::new("robot1")?;
//! let mut imu = Topic::open(&d, "imu")?.subscriber()?;
//! let msg = imu.recv_async().await?;
//! # let _ = msg; Ok(()) }
//! ```
//!
//! # How it wakes
//!
//! A receive future first tries to receive. Finding nothing, it arms its channel's event
//! word (as a blocking receiver does), registers the word and its
//! [`Waker`](std::task::Waker) with the process's *waiter thread*, one per process (one more
//! per 127 channels waited on at once), started on first use, and returns `Pending`. The
//! thread sleeps in `futex_waitv` on the event words of every channel with a pending receive.
//! The waiters flag the future set makes a sender's `FUTEX_WAKE` happen, only while someone
//! waits, and none at all otherwise. When a word moves, the thread wakes that channel's
//! wakers; the futures try again. Idle waiters cost no CPU: the
//! thread sleeps in the kernel until a notification or a registration arrives.
//!
//! The core is runtime-agnostic (std wakers only): it works under tokio, async-std, smol or
//! a hand-written executor. It is tested under tokio, whence the feature's name.
//!
//! # Polling by hand
//!
//! [`recv_async`](AsyncRecv::recv_async)'s future borrows its endpoint, and [`wait`]'s its
//! channels, from the first poll to the last. A caller that can lend them only for each
//! poll (a binding to another language's event loop, whose endpoint sits behind a lock)
//! keeps the wait's state apart instead: [`AsyncRecv::poll_recv`] with a [`RecvState`],
//! [`WaitState::poll`] for the wait. Each poll is exactly a poll of the future; dropping
//! the state removes its registration.
//!
//! # Cancellation
//!
//! Every future here is cancellation-safe: a message is taken only inside the `poll` that
//! returns it, so a future dropped before completing (a lost `tokio::select!` branch, a
//! timeout) consumes nothing; the next receive gets the message. Dropping a future removes
//! its registration.
//!
//! # Limits
//!
//! * The receive futures borrow the endpoint mutably. The topic
//!   [`Subscriber`](crate::Subscriber), whose receives take `&self`, also awaits through a
//!   shared reference: `let mut s = &sub; s.recv_async().await` (while samples are held).
//! * Copy and `_into`-less forms only: the zero-copy `_ref` receives return an item that
//!   borrows the endpoint, which an owned future cannot hand out across `await` points
//!   without tying the endpoint up for the item's life; use `try_recv_ref` after
//!   [`wait`] says the channel is ready.
//! * One `futex_waitv` watches 127 channels besides the thread's control word; channels
//!   beyond those, and every channel on kernels without `futex_waitv` (before Linux 5.16, or
//!   with `SHMBUS_NO_WAITV=1`), are probed every millisecond while a receive waits on them
//!   (up to 1 ms of extra latency, and a thousand wake-ups a second of the thread).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::endpoint::receive::{Receive, Waited};
use crate::sys::monotonic_ns;
use crate::wait::Wait as HowLong;
use crate::waitset::{WaitError, Waitable};

mod waiter;

use waiter::Registration;

mod sealed {
    pub trait Sealed {}
}

/// A receiving endpoint that can be awaited: [`Subscriber`](crate::Subscriber) (and
/// `&Subscriber`), [`Consumer`](crate::Consumer), [`StreamReader`](crate::StreamReader),
/// [`Worker`](crate::Worker), [`Tailer`](crate::Tailer), a service's
/// [`Server`](crate::Server) (its requests) and [`Client`](crate::Client) (its responses;
/// [`Client::call_async`](crate::Client::call_async) awaits one call), and their typed receivers
/// ([`TypedSubscriber<T>`](crate::TypedSubscriber), …), whose items are the typed `try_recv`'s.
pub trait AsyncRecv: Waitable + Sized + sealed::Sealed {
    /// What a receive returns (the owned item of the blocking `recv`).
    type Item;
    /// What a receive fails with (the blocking `recv`'s error).
    type Error;

    /// One receive that does not wait: `Err(None)` when there is nothing now.
    #[doc(hidden)]
    fn try_recv_now(&mut self) -> Result<Self::Item, Option<Self::Error>>;

    /// Whether nothing can be received after `e` (a truncated file, a writer gone).
    #[doc(hidden)]
    fn ends(e: &Self::Error) -> bool;

    /// How often a waiting receive tries again although nothing was notified, for a peer's
    /// death that only a receive attempt finds (the stream's writer). `None`: never.
    #[doc(hidden)]
    fn retry_interval(&self) -> Option<std::time::Duration> {
        None
    }

    /// Receives the next item, waiting as long as it takes without blocking the thread: the
    /// async form of the endpoint's `recv`, with its item and error. Cancellation-safe.
    fn recv_async(&mut self) -> Recv<'_, Self> {
        Recv { ep: self, wait: Waiting::default() }
    }

    /// The items as a [`futures_core::Stream`] of `Result<Item, Error>`: the async form of
    /// the endpoint's `iter()`. It ends after an error nothing can follow (as `iter()` does);
    /// otherwise it never ends.
    fn stream(&mut self) -> RecvStream<'_, Self> {
        RecvStream { ep: self, wait: Waiting::default(), done: false }
    }

    /// One poll of a receive whose state the caller keeps apart from the endpoint (see
    /// [`RecvState`]): what each poll of [`recv_async`](AsyncRecv::recv_async)'s future
    /// does. `Ready` with the item or the error; or `Pending`, with `cx`'s waker registered
    /// to be woken when a receive may succeed (or a re-check is due), then poll again.
    ///
    /// Cancellation-safe: an item is taken only by the poll that returns it, so dropping
    /// `state` between polls loses nothing. After `Ready`, `state` may serve the endpoint's
    /// next receive (it keeps its entry with the waiter thread, without a waker, as
    /// [`stream`](AsyncRecv::stream) does). One state per waiting receive: a state polled
    /// for two receives in turn wakes only the last one's waker.
    fn poll_recv(&mut self, state: &mut RecvState, cx: &mut Context<'_>) -> Poll<Result<Self::Item, Self::Error>> {
        let r = poll_recv(self, &mut state.wait, cx);
        if r.is_ready() {
            state.wait.reg.idle();
        }
        r
    }
}

/// The state of a receive polled by hand with [`AsyncRecv::poll_recv`]: its registration
/// with the waiter thread and its re-check clock, owned apart from the endpoint, which is
/// lent to each poll only. Dropping it removes the registration.
#[derive(Debug, Default)]
pub struct RecvState {
    wait: Waiting,
}

/// The registration of one waiting future, and its re-check clock.
#[derive(Debug, Default)]
struct Waiting {
    reg: Registration,
    /// When the endpoint's `recheck` is next due (monotonic ns), while it asks for one.
    next_recheck: Option<u64>,
}

impl Waiting {
    /// The re-check time to register, after calling `recheck` on each channel whose
    /// interval has ended. `Err(())`: a re-check made one ready; try again first.
    fn recheck(&mut self, channels: &[&dyn Waitable]) -> Result<Option<u64>, ()> {
        let Some(interval) = channels.iter().filter_map(|c| c.recheck_interval()).min() else {
            self.next_recheck = None;
            return Ok(None);
        };
        let now = monotonic_ns();
        let step = interval.as_nanos().min(u64::MAX as u128) as u64;
        match self.next_recheck {
            Some(at) if at > now => Ok(Some(at)),
            Some(_) => {
                self.next_recheck = Some(now.saturating_add(step));
                let mut any = false;
                for c in channels.iter().filter(|c| c.recheck_interval().is_some()) {
                    any |= c.recheck();
                }
                if any {
                    Err(())
                } else {
                    Ok(self.next_recheck)
                }
            }
            // The first wait: the interval starts now, as for a blocking receive.
            None => {
                self.next_recheck = Some(now.saturating_add(step));
                Ok(self.next_recheck)
            }
        }
    }
}

/// How many times in a row a poll may find the event word moved under it before it yields
/// to the executor instead (a peer that keeps notifying must not hold the thread).
const ARM_TRIES: u32 = 64;

/// try → arm → register → `Pending`, for one endpoint. On `Ready` the registration is left
/// for the caller to settle.
fn poll_recv<E: AsyncRecv>(ep: &mut E, wait: &mut Waiting, cx: &mut Context<'_>) -> Poll<Result<E::Item, E::Error>> {
    for _ in 0..ARM_TRIES {
        // Loaded before the attempt: a notification after the attempt moves the word away
        // from `seen`, so arming fails (and we try again) or the waiter thread's sleep ends.
        let seen = ep.wait_handle().event.load();
        match ep.try_recv_now() {
            Ok(v) => return Poll::Ready(Ok(v)),
            Err(Some(e)) => return Poll::Ready(Err(e)),
            Err(None) => {}
        }
        let Ok(mut recheck_at) = wait.recheck(&[&*ep]) else { continue };
        if let Some(every) = ep.retry_interval() {
            let at = monotonic_ns().saturating_add(every.as_nanos().min(u64::MAX as u128) as u64);
            recheck_at = Some(recheck_at.map_or(at, |r| r.min(at)));
        }
        // Announce the waiter on the word, as a blocking receive does: senders wake it.
        let event = ep.wait_handle().event;
        let Some(armed) = event.arm(seen) else { continue };
        wait.reg.register(event, armed, recheck_at, cx.waker());
        return Poll::Pending;
    }
    cx.waker().wake_by_ref();
    Poll::Pending
}

/// The future of [`AsyncRecv::recv_async`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct Recv<'a, E> {
    ep: &'a mut E,
    wait: Waiting,
}

impl<E: AsyncRecv> Future for Recv<'_, E> {
    type Output = Result<E::Item, E::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let r = poll_recv(this.ep, &mut this.wait, cx);
        if r.is_ready() {
            this.wait.reg.cancel();
        }
        r
    }
}

/// The [`futures_core::Stream`] of [`AsyncRecv::stream`].
#[derive(Debug)]
#[must_use = "streams do nothing unless polled"]
pub struct RecvStream<'a, E> {
    ep: &'a mut E,
    wait: Waiting,
    done: bool,
}

impl<E: AsyncRecv> RecvStream<'_, E> {
    /// The next item: `None` only after an error that ends the stream. Cancellation-safe.
    pub async fn next(&mut self) -> Option<Result<E::Item, E::Error>> {
        std::future::poll_fn(|cx| self.poll_item(cx)).await
    }

    fn poll_item(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<E::Item, E::Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let r = poll_recv(self.ep, &mut self.wait, cx);
        match r {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                // Keeps the registration (without a waker) for the next item's wait.
                self.wait.reg.idle();
                if let Err(e) = &r {
                    self.done = E::ends(e);
                }
                Poll::Ready(Some(r))
            }
        }
    }
}

impl<E: AsyncRecv> futures_core::Stream for RecvStream<'_, E> {
    type Item = Result<E::Item, E::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_item(cx)
    }
}

/// Waits, without blocking the thread, until at least one of `channels` (endpoints of any
/// kinds, receiving or sending) is ready, and returns the indices of all that are: the
/// async [`WaitSet::wait`](crate::WaitSet::wait). It receives nothing, so dropping it loses
/// nothing; receive with `try_recv` (or `try_recv_ref`) after it.
///
/// Errors: [`WaitError::Empty`] for no channel. Any number of channels is accepted (see
/// the module docs for the cost beyond 127).
pub fn wait<'a>(channels: &'a [&'a dyn Waitable]) -> Wait<'a> {
    Wait { channels, state: WaitState::default() }
}

/// The future of [`wait`]. Not `Send`, like the `&dyn Waitable`s it holds: await it on the
/// thread that owns the endpoints (a current-thread runtime, a `LocalSet`, or inside a
/// task's own future).
#[must_use = "futures do nothing unless awaited"]
pub struct Wait<'a> {
    channels: &'a [&'a dyn Waitable],
    state: WaitState,
}

impl std::fmt::Debug for Wait<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wait").field("channels", &self.channels.len()).finish_non_exhaustive()
    }
}

impl Future for Wait<'_> {
    type Output = Result<Vec<usize>, WaitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.state.poll(this.channels, cx)
    }
}

/// The state of an async wait polled by hand with [`WaitState::poll`]: [`wait`]'s future
/// without its borrow of the channels, which are lent to each poll only (see the module
/// docs). Dropping it removes its registrations.
#[derive(Debug, Default)]
pub struct WaitState {
    regs: Vec<Registration>,
    seen: Vec<u32>,
    ready: Vec<usize>,
    wait: Waiting,
}

impl WaitState {
    /// One poll of an async wait on `channels` (the same ones, in the same order, at every
    /// poll of one wait): what each poll of [`wait`]'s future does. `Ready` with the indices
    /// of the ready channels (the registrations are then removed), or
    /// [`WaitError::Empty`] for no channel; or `Pending`, with `cx`'s waker registered on
    /// every channel. It receives nothing: dropping the state between polls loses nothing.
    pub fn poll(&mut self, channels: &[&dyn Waitable], cx: &mut Context<'_>) -> Poll<Result<Vec<usize>, WaitError>> {
        if channels.is_empty() {
            return Poll::Ready(Err(WaitError::Empty));
        }
        'again: for _ in 0..ARM_TRIES {
            self.seen.clear();
            self.seen.extend(channels.iter().map(|c| c.wait_handle().event.load()));
            self.ready.clear();
            self.ready.extend(channels.iter().enumerate().filter(|(_, c)| c.is_ready()).map(|(i, _)| i));
            if !self.ready.is_empty() {
                self.regs.iter_mut().for_each(Registration::cancel);
                return Poll::Ready(Ok(std::mem::take(&mut self.ready)));
            }
            let Ok(recheck_at) = self.wait.recheck(channels) else { continue };
            // Arm every word first (as `WaitSet::wait` does), then register them all.
            for (c, seen) in channels.iter().zip(self.seen.iter_mut()) {
                let Some(armed) = c.wait_handle().event.arm(*seen) else { continue 'again };
                *seen = armed;
            }
            self.regs.resize_with(channels.len(), Registration::default);
            for ((c, reg), &armed) in channels.iter().zip(&mut self.regs).zip(&self.seen) {
                reg.register(c.wait_handle().event, armed, recheck_at, cx.waker());
            }
            return Poll::Pending;
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Every receiver of the receive contract is awaitable: one attempt is its
/// `recv_with(Wait::Now)` after the hook it owes first ([`Receive::before_attempt`]).
impl<R: Receive + Waitable> sealed::Sealed for R {}

impl<R: Receive + Waitable> AsyncRecv for R {
    type Item = R::Item;
    type Error = R::Error;

    fn try_recv_now(&mut self) -> Result<R::Item, Option<R::Error>> {
        self.before_attempt();
        self.recv_with(HowLong::Now).map_err(Waited::failure)
    }

    fn ends(e: &R::Error) -> bool {
        R::ends(e)
    }

    fn retry_interval(&self) -> Option<std::time::Duration> {
        Receive::retry_interval(self)
    }
}

/// A subscriber receives through `&self`: it awaits as its shared reference does (which
/// awaits while samples of it are held, and from several futures at once).
impl sealed::Sealed for crate::Subscriber {}

impl AsyncRecv for crate::Subscriber {
    type Item = crate::topic::Message;
    type Error = crate::topic::TopicRecvError;

    fn try_recv_now(&mut self) -> Result<Self::Item, Option<Self::Error>> {
        (&*self).try_recv_now()
    }

    fn ends(e: &Self::Error) -> bool {
        <&crate::Subscriber as Receive>::ends(e)
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::Waker;

    use super::*;
    use crate::queue::{Queue, QueueConfig};
    use crate::Domain;

    /// Registrations come and go with the futures: a pending future has one, a dropped or
    /// completed one none; a stream keeps its one between items and drops it with itself.
    #[test]
    fn registrations_live_exactly_as_long_as_their_futures() {
        let dir = std::env::temp_dir().join(format!("shmbus-async-unit-{}", std::process::id()));
        let d = Domain::with_root("unit", &dir).unwrap();
        let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(4).max_message_len(8)).unwrap();
        let (mut p, mut c) = (q.producer().unwrap(), q.consumer().unwrap());
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(waiter::pending(), 0);
        {
            let mut f = pin!(c.recv_async());
            assert!(f.as_mut().poll(&mut cx).is_pending());
            assert_eq!(waiter::pending(), 1);
        }
        assert_eq!(waiter::pending(), 0, "a dropped future deregisters");
        {
            let mut f = pin!(c.recv_async());
            assert!(f.as_mut().poll(&mut cx).is_pending());
            p.send(b"x").unwrap();
            assert_eq!(f.as_mut().poll(&mut cx), Poll::Ready(Ok(b"x".to_vec())));
            assert_eq!(waiter::pending(), 0, "a completed future deregisters");
        }
        {
            let mut s = c.stream();
            assert!(s.poll_item(&mut cx).is_pending());
            p.send(b"y").unwrap();
            assert_eq!(s.poll_item(&mut cx), Poll::Ready(Some(Ok(b"y".to_vec()))));
            assert_eq!(waiter::pending(), 1, "a stream keeps its registration");
        }
        assert_eq!(waiter::pending(), 0);

        // States polled by hand: the same, with the state in place of the future.
        {
            let mut st = RecvState::default();
            assert!(c.poll_recv(&mut st, &mut cx).is_pending());
            assert_eq!(waiter::pending(), 1);
            p.send(b"z").unwrap();
            assert_eq!(c.poll_recv(&mut st, &mut cx), Poll::Ready(Ok(b"z".to_vec())));
            assert_eq!(waiter::pending(), 1, "a state keeps its entry for the next receive");
            assert!(c.poll_recv(&mut st, &mut cx).is_pending());
            assert_eq!(waiter::pending(), 1, "and reuses it");
        }
        assert_eq!(waiter::pending(), 0, "a dropped state deregisters");
        let (mut p2, c2) = {
            let q2 = Queue::create_or_open(&d, "q2", &QueueConfig::default().capacity(4).max_message_len(8)).unwrap();
            (q2.producer().unwrap(), q2.consumer().unwrap())
        };
        {
            let chans: [&dyn Waitable; 2] = [&c, &c2];
            let mut st = WaitState::default();
            assert!(st.poll(&chans, &mut cx).is_pending());
            assert_eq!(waiter::pending(), 2, "one registration per channel");
            p2.send(b"w").unwrap();
            assert_eq!(st.poll(&chans, &mut cx), Poll::Ready(Ok(vec![1])));
            assert_eq!(waiter::pending(), 0, "a finished wait deregisters");
            assert_eq!(st.poll(&[], &mut cx), Poll::Ready(Err(WaitError::Empty)));
        }
        assert_eq!(waiter::words().0, 0, "no word outlives its registrations");

        // More channels than one shard holds, and a wait state moved from one set to an
        // overlapping one: its registrations follow their words between shards, and when
        // it goes, every word's place is given back.
        let cfg = QueueConfig::default().capacity(2).max_message_len(8);
        let many: Vec<_> =
            (0..300).map(|k| Queue::create_or_open(&d, &format!("m{k}"), &cfg).unwrap().consumer().unwrap()).collect();
        {
            let chans = |r: std::ops::Range<usize>| many[r].iter().map(|c| c as &dyn Waitable).collect::<Vec<_>>();
            let mut st = WaitState::default();
            assert!(st.poll(&chans(0..200), &mut cx).is_pending());
            assert_eq!(waiter::pending(), 200);
            assert_eq!(waiter::words(), (200, 200, 2), "200 words in two shards");
            assert!(st.poll(&chans(100..300), &mut cx).is_pending());
            assert_eq!(waiter::pending(), 200);
            let (homes, counted, shards) = waiter::words();
            assert_eq!((homes, counted), (200, 200), "the first set's words were given back");
            assert!(shards <= 3, "{shards} shards for at most 300 words at once");
        }
        assert_eq!(waiter::pending(), 0);
        let (homes, counted, _) = waiter::words();
        assert_eq!((homes, counted), (0, 0), "every word's place is given back");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
