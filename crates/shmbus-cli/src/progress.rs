//! Progress on stderr for the verbs that go through large journals: `record`, `replay` and
//! `journal dump`.
//!
//! A bar is drawn only when all of these hold, and nothing is written otherwise:
//! * stderr is a terminal (a pipe or file never gets bar bytes);
//! * the verb's output is not `--json` and the user did not pass `--quiet`;
//! * `journal dump`'s stdout is not the terminal too (its entries would fight with the bar);
//! * the work is large: more than [`LARGE_ENTRIES`] entries or [`LARGE_BYTES`] bytes (a
//!   recording with no `--count` gets its counter once it grows past that).
//!
//! The bar is cleared when the verb ends, however it ends.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// More entries than this is a large journal.
pub const LARGE_ENTRIES: u64 = 10_000;
/// More payload bytes than this (64 MiB) is a large journal.
pub const LARGE_BYTES: u64 = 64 << 20;

/// Whether a bar may be drawn at all: stderr is a terminal and the user did not ask for
/// quiet or JSON output.
pub fn allowed(quiet: bool, json: bool) -> bool {
    !quiet && !json && std::io::stderr().is_terminal()
}

/// Whether `entries` entries or `bytes` bytes are large enough for a bar.
fn large(entries: u64, bytes: u64) -> bool {
    entries > LARGE_ENTRIES || bytes > LARGE_BYTES
}

fn bar(len: Option<u64>, template: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// A bar on stderr, or none; cleared when dropped.
#[derive(Default)]
struct Shown(Option<ProgressBar>);

impl Shown {
    /// Runs `f` (which writes to stderr) with the bar out of the way.
    fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }
}

impl Drop for Shown {
    fn drop(&mut self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

/// A bar over a journal's indices (`dump`, `replay`), or nothing.
pub struct Progress {
    bar: Shown,
    first: u64,
}

impl Progress {
    /// A bar of the entries from `first` to `next` (exclusive) holding `bytes` bytes, labelled
    /// `what`, if [`allowed`] says so and the journal is large.
    pub fn over_journal(allowed: bool, what: &str, first: u64, next: u64, bytes: u64) -> Progress {
        let n = next.saturating_sub(first);
        let bar = (allowed && large(n, bytes)).then(|| {
            let b = bar(Some(n), "{prefix} [{bar:40}] {pos}/{len} entries ({per_sec}, {eta} left)");
            b.set_prefix(what.to_owned());
            b
        });
        Progress { bar: Shown(bar), first }
    }

    /// The entry at journal index `index` is done.
    pub fn at(&self, index: u64) {
        if let Some(b) = &self.bar.0 {
            b.set_position(index.saturating_sub(self.first).saturating_add(1));
        }
    }

    /// Runs `f` (which writes to stderr) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }
}

/// `record`'s counter: a bar of `--count` when that is large, else a running count that
/// appears once the recording has grown large.
pub struct Counter {
    allowed: bool,
    entries: u64,
    bytes: u64,
    bar: Shown,
}

impl Counter {
    /// A counter towards `total` messages (`--count`), if any.
    pub fn new(allowed: bool, total: Option<u64>) -> Counter {
        let bar = total
            .filter(|&n| allowed && large(n, 0))
            .map(|n| bar(Some(n), "recording [{bar:40}] {pos}/{len} messages ({per_sec}, {eta} left)"));
        Counter { allowed, entries: 0, bytes: 0, bar: Shown(bar) }
    }

    /// One more message of `len` bytes recorded.
    pub fn add(&mut self, len: usize) {
        self.entries += 1;
        self.bytes = self.bytes.saturating_add(len as u64);
        if self.bar.0.is_none() && self.allowed && large(self.entries, self.bytes) {
            let b = bar(None, "{spinner} recording: {pos} messages, {msg} ({per_sec})");
            b.enable_steady_tick(std::time::Duration::from_millis(200));
            self.bar.0 = Some(b);
        }
        if let Some(b) = &self.bar.0 {
            b.set_position(self.entries);
            if b.length().is_none() {
                b.set_message(indicatif::HumanBytes(self.bytes).to_string());
            }
        }
    }

    /// Runs `f` (which writes to stderr) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }
}
