//! The live view's terminal: raw mode on the alternate screen, given back on every way out
//! (return, error, panic, SIGTERM / SIGHUP / SIGINT), and the event loop.

use std::io::{self, Stdout};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use crossterm::cursor::{Hide, Show};
use crossterm::event::{self, Event, KeyEventKind};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use shmbus::watch::EventKind;

use super::sample::Sampler;
use super::ui;
use super::view::{Action, App};
use crate::{Ctx, Result};

/// Whether the terminal is in raw mode on the alternate screen (what [`restore`] undoes).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The last of SIGTERM, SIGHUP or SIGINT received (0: none).
static SIGNALLED: AtomicI32 = AtomicI32::new(0);

/// The longest the loop waits for a key before it looks at [`SIGNALLED`] again.
const SIGNAL_POLL: Duration = Duration::from_millis(200);

extern "C" fn on_signal(sig: libc::c_int) {
    // An atomic store is async-signal-safe; the loop does the rest.
    SIGNALLED.store(sig, Ordering::Relaxed);
}

/// Leaves the alternate screen and raw mode, once, whoever calls first.
fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        let _ = crossterm::execute!(io::stdout(), LeaveAlternateScreen, Show);
    }
}

/// The terminal while the view runs; dropping it gives the terminal back.
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    input: Keyboard,
}

impl Screen {
    fn enter() -> io::Result<Screen> {
        let input = Keyboard::open()?;
        // A panic prints its message (the hook `main` set) on the normal screen, not into
        // the alternate one that is about to vanish.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
            // SAFETY: `on_signal` only stores to an atomic, which is async-signal-safe.
            unsafe { libc::signal(sig, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t) };
        }
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let entered = crossterm::execute!(io::stdout(), EnterAlternateScreen, Hide)
            .and_then(|()| Terminal::new(CrosstermBackend::new(io::stdout())));
        match entered {
            Ok(terminal) => Ok(Screen { terminal, input }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// Runs the live view until a quit key or signal: a sample every `interval`, and at once
/// when a channel is created or removed (the domain watch: no rescanning in between); a
/// redraw after each sample, key, resize and discovery event (the latest is on the status
/// line).
pub fn run(ctx: &Ctx, sampler: &mut Sampler, interval: Duration) -> Result<()> {
    let mut screen = Screen::enter()?;
    let mut app = App::new(interval.as_secs_f64());
    let mut watch = sampler.watch(ctx, interval);
    let mut next = Instant::now();
    let mut dirty = true;
    loop {
        let due = watch.as_ref().and_then(|w| w.participants_due()).is_some_and(|d| d.is_zero());
        if due || screen.input.watch_ready {
            screen.input.watch_ready = false;
            loop {
                match watch.as_mut().map(|w| w.try_next()) {
                    Some(Ok(Some(e))) => {
                        if matches!(e.what, EventKind::Created | EventKind::Removed) {
                            next = Instant::now();
                        }
                        app.event = Some(e.to_string());
                        dirty = true;
                    }
                    // The view goes on, refreshing on its clock only.
                    Some(Err(e)) => {
                        app.status = Some(format!("no longer watching for channels: {e}"));
                        watch = None;
                        dirty = true;
                    }
                    _ => break,
                }
            }
        }
        if SIGNALLED.load(Ordering::Relaxed) != 0 {
            return Ok(());
        }
        if Instant::now() >= next {
            match sampler.sample(ctx) {
                Ok(s) => app.update(s),
                Err(e) => app.failed(e.to_string()),
            }
            next = Instant::now() + interval;
            dirty = true;
        }
        if dirty {
            screen.terminal.draw(|f| ui::draw(f, &app))?;
            dirty = false;
        }
        let mut wait = next.saturating_duration_since(Instant::now()).min(SIGNAL_POLL);
        if let Some(d) = watch.as_ref().and_then(|w| w.participants_due()) {
            wait = wait.min(d);
        }
        let watch_fd = watch.as_ref().map(|w| w.as_fd().as_raw_fd());
        if screen.input.wait(wait, watch_fd)? == Input::HungUp {
            // The terminal is gone (its window closed, the session ended): nobody can see the
            // view or quit it, so it ends here.
            return Ok(());
        }
        // Only now that the terminal is known to be alive: crossterm reads a hung-up terminal
        // in a loop that never returns.
        while event::poll(Duration::ZERO)? {
            match event::read()? {
                Event::Key(k) if k.kind != KeyEventKind::Release => {
                    if app.key(k) == Action::Quit {
                        return Ok(());
                    }
                    dirty = true;
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
    }
}

/// What waiting on the terminal found.
#[derive(Debug, PartialEq, Eq)]
enum Input {
    /// Input to read, or the wait ended (time up, a signal).
    Ready,
    /// The terminal hung up.
    HungUp,
}

/// The terminal the keys come from: standard input when it is one, else `/dev/tty`, as
/// crossterm reads it.
struct Keyboard {
    /// Kept open for the descriptor when it is `/dev/tty`.
    _tty: Option<std::fs::File>,
    fd: libc::c_int,
    /// The last wait found the domain watch's descriptor readable.
    watch_ready: bool,
}

impl Keyboard {
    fn open() -> io::Result<Keyboard> {
        // SAFETY: isatty only inspects descriptor 0.
        if unsafe { libc::isatty(0) } == 1 {
            return Ok(Keyboard { _tty: None, fd: 0, watch_ready: false });
        }
        let tty = std::fs::File::open("/dev/tty")?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&tty);
        Ok(Keyboard { _tty: Some(tty), fd, watch_ready: false })
    }

    /// Waits up to `timeout` for input, or for the domain watch's descriptor `watch` to be
    /// readable (noted in `watch_ready`); a signal ends the wait early (the loop looks at
    /// [`SIGNALLED`] next).
    fn wait(&mut self, timeout: Duration, watch: Option<libc::c_int>) -> io::Result<Input> {
        let mut p = [
            libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: watch.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
        ];
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: two valid pollfds (a negative descriptor is ignored), alive for the call.
        let n = unsafe { libc::poll(p.as_mut_ptr(), 2, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(Input::Ready) } else { Err(e) };
        }
        self.watch_ready = p[1].revents & libc::POLLIN != 0;
        if p[0].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return Ok(Input::HungUp);
        }
        Ok(Input::Ready)
    }
}
