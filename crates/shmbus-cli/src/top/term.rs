//! The live view's terminal: raw mode on the alternate screen, given back on every way out
//! (return, error, panic, SIGTERM / SIGHUP / SIGINT), and the event loop.

use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use crossterm::cursor::{Hide, Show};
use crossterm::event::{self, Event, KeyEventKind};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

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
}

impl Screen {
    fn enter() -> io::Result<Screen> {
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
            Ok(terminal) => Ok(Screen { terminal }),
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

/// Runs the live view until a quit key or signal: a sample every `interval`, a redraw
/// after each sample, key and resize.
pub fn run(ctx: &Ctx, sampler: &mut Sampler, interval: Duration) -> Result<()> {
    let mut screen = Screen::enter()?;
    let mut app = App::new(interval.as_secs_f64());
    let mut next = Instant::now();
    let mut dirty = true;
    loop {
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
        let wait = next.saturating_duration_since(Instant::now()).min(SIGNAL_POLL);
        if event::poll(wait)? {
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
