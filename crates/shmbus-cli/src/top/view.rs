//! The state of the live view and what each key does to it; drawing is in `ui`.
//!
//! Rows are kept in one list, replaced at every sample; what is shown is that list
//! filtered and sorted ([`App::visible`]). The selection and the detail pane name a row by
//! its [`Key`], so they follow it when the order changes.

use std::cmp::Ordering;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::sample::{Key, Metrics, Row, Sample};

/// A column the table can be sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Domain, then name.
    Name,
    /// Kind.
    Kind,
    /// Messages per second.
    Rate,
    /// Bytes per second.
    Bandwidth,
    /// Slowest receiver's lag.
    Lag,
    /// Drops per second.
    Drops,
    /// Blocked sends per second.
    Full,
    /// Futex calls per second.
    Futex,
    /// Median latency.
    P50,
    /// 99th percentile latency.
    P99,
}

impl SortKey {
    /// Every sort column, in the order `s` / `>` steps through them.
    pub const ALL: [SortKey; 10] = [
        SortKey::Name,
        SortKey::Kind,
        SortKey::Rate,
        SortKey::Bandwidth,
        SortKey::Lag,
        SortKey::Drops,
        SortKey::Full,
        SortKey::Futex,
        SortKey::P50,
        SortKey::P99,
    ];

    /// Its column's title.
    pub fn title(self) -> &'static str {
        match self {
            SortKey::Name => "CHANNEL",
            SortKey::Kind => "KIND",
            SortKey::Rate => "MSG/s",
            SortKey::Bandwidth => "B/s",
            SortKey::Lag => "LAG",
            SortKey::Drops => "DROP/s",
            SortKey::Full => "FULL/s",
            SortKey::Futex => "FTX/s",
            SortKey::P50 => "P50",
            SortKey::P99 => "P99",
        }
    }

    /// Text sorts A to Z, numbers largest first, until `r` reverses it.
    fn descending_by_default(self) -> bool {
        !matches!(self, SortKey::Name | SortKey::Kind)
    }

    fn step(self, by: isize) -> SortKey {
        let n = SortKey::ALL.len() as isize;
        let i = SortKey::ALL.iter().position(|&k| k == self).unwrap_or(0) as isize;
        SortKey::ALL[(i + by).rem_euclid(n) as usize]
    }

    /// The number this column sorts by (`None` sorts below every number).
    fn value(self, m: &Metrics) -> Option<f64> {
        match self {
            SortKey::Name | SortKey::Kind => None,
            SortKey::Rate => Some(m.rate),
            SortKey::Bandwidth => Some(m.bandwidth),
            SortKey::Lag => m.max_lag.map(|l| l as f64),
            SortKey::Drops => Some(m.drops_per_s),
            SortKey::Full => Some(m.full_per_s),
            SortKey::Futex => Some(m.futex_per_s),
            SortKey::P50 => m.p50.map(|v| v as f64),
            SortKey::P99 => m.p99.map(|v| v as f64),
        }
    }

    fn compare(self, a: &Row, b: &Row) -> Ordering {
        let by_name = || a.key.to_string().cmp(&b.key.to_string());
        match self {
            SortKey::Name => by_name(),
            SortKey::Kind => a.kind.cmp(&b.kind).then_with(by_name),
            _ => {
                let v = |r: &Row| r.metrics.as_ref().and_then(|m| self.value(m));
                match (v(a), v(b)) {
                    (Some(x), Some(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
                    (x, y) => x.is_some().cmp(&y.is_some()),
                }
            }
        }
    }
}

/// What the event loop should do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Redraw and go on.
    Continue,
    /// Leave, exit status 0.
    Quit,
}

/// The live view's state.
#[derive(Debug)]
pub struct App {
    /// Every row of the last sample.
    pub rows: Vec<Row>,
    /// The sort column.
    pub sort: SortKey,
    /// Largest (or Z) first.
    pub descending: bool,
    /// The filter in effect: a substring of `domain/name` (empty: none).
    pub filter: String,
    /// The filter being typed after `/`, not applied yet.
    pub editing: Option<String>,
    /// The selected row.
    pub selected: Option<Key>,
    /// The row whose detail pane is open.
    pub detail: Option<Key>,
    /// A one-line message for the status line, until the next key.
    pub status: Option<String>,
    /// Whether the status line shows every key.
    pub help: bool,
    /// Seconds between samples.
    pub interval_s: f64,
    /// Samples taken.
    pub samples: u64,
    /// The latest discovery event (a channel created or removed, a participant joined or
    /// left), for the status line.
    pub event: Option<String>,
}

impl App {
    /// A view refreshing every `interval_s`, sorted by name.
    pub fn new(interval_s: f64) -> App {
        App {
            rows: Vec::new(),
            sort: SortKey::Name,
            descending: false,
            filter: String::new(),
            editing: None,
            selected: None,
            detail: None,
            status: None,
            help: false,
            interval_s,
            samples: 0,
            event: None,
        }
    }

    /// Takes in a new sample: its rows replace the old ones; a detail pane whose channel is
    /// gone closes, with a message.
    pub fn update(&mut self, sample: Sample) {
        self.rows = sample.rows;
        self.samples += 1;
        if let Some(open) = &self.detail {
            if !self.rows.iter().any(|r| &r.key == open) {
                self.status = Some(format!("channel {open} is gone"));
                self.detail = None;
            }
        }
        if let Some(w) = sample.warnings.first() {
            self.status = Some(w.clone());
        }
        self.fix_selection();
    }

    /// A sample could not be taken: say why, keep the rows.
    pub fn failed(&mut self, error: String) {
        self.status = Some(error);
    }

    /// The rows shown: filtered and sorted.
    pub fn visible(&self) -> Vec<&Row> {
        let mut rows: Vec<&Row> = self.rows.iter().filter(|r| r.key.to_string().contains(&self.filter)).collect();
        rows.sort_by(|a, b| {
            let o = self.sort.compare(a, b);
            let o = if self.descending { o.reverse() } else { o };
            // Ties: by name, always A to Z, so equal rows do not swap between refreshes.
            o.then_with(|| a.key.to_string().cmp(&b.key.to_string()))
        });
        rows
    }

    /// The position of the selected row in [`App::visible`].
    pub fn selected_index(&self, visible: &[&Row]) -> Option<usize> {
        let sel = self.selected.as_ref()?;
        visible.iter().position(|r| &r.key == sel)
    }

    /// The row of the open detail pane.
    pub fn detail_row(&self) -> Option<&Row> {
        let open = self.detail.as_ref()?;
        self.rows.iter().find(|r| &r.key == open)
    }

    /// Keeps the selection on a visible row: the first when it has none or its row is
    /// hidden or gone.
    fn fix_selection(&mut self) {
        let first = {
            let visible = self.visible();
            if self.selected_index(&visible).is_some() {
                return;
            }
            visible.first().map(|r| r.key.clone())
        };
        self.selected = first;
    }

    fn move_selection(&mut self, by: isize) {
        let next = {
            let visible = self.visible();
            if visible.is_empty() {
                return;
            }
            let at = self.selected_index(&visible).map_or(0, |i| i as isize + by);
            visible[at.clamp(0, visible.len() as isize - 1) as usize].key.clone()
        };
        self.selected = Some(next);
    }

    fn set_sort(&mut self, key: SortKey) {
        self.sort = key;
        self.descending = key.descending_by_default();
    }

    /// What key `k` does.
    pub fn key(&mut self, k: KeyEvent) -> Action {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(k.code, KeyCode::Char('c') | KeyCode::Char('C')) {
            return Action::Quit;
        }
        self.status = None;
        if let Some(text) = &mut self.editing {
            match k.code {
                KeyCode::Enter => {
                    self.filter = std::mem::take(text);
                    self.editing = None;
                }
                KeyCode::Esc => {
                    self.filter.clear();
                    self.editing = None;
                }
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Char(c) if !ctrl => text.push(c),
                _ => {}
            }
            self.fix_selection();
            return Action::Continue;
        }
        match k.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Esc if self.detail.is_some() => self.detail = None,
            KeyCode::Esc => return Action::Quit,
            KeyCode::Backspace => self.detail = None,
            KeyCode::Char('s') | KeyCode::Char('>') => self.set_sort(self.sort.step(1)),
            KeyCode::Char('S') | KeyCode::Char('<') => self.set_sort(self.sort.step(-1)),
            KeyCode::Char('r') => self.descending = !self.descending,
            KeyCode::Char('/') => self.editing = Some(self.filter.clone()),
            KeyCode::Char('?') => self.help = !self.help,
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::PageUp => self.move_selection(-10),
            KeyCode::PageDown => self.move_selection(10),
            KeyCode::Home => self.move_selection(isize::MIN / 2),
            KeyCode::End => self.move_selection(isize::MAX / 2),
            KeyCode::Enter => self.detail = self.selected.clone(),
            _ => {}
        }
        self.fix_selection();
        Action::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::sample::History;

    fn row(domain: &str, name: &str, rate: Option<f64>) -> Row {
        Row {
            key: Key { domain: Some(domain.into()), name: name.into() },
            kind: Some("topic".into()),
            error: None,
            senders: Some(1),
            receivers: Some(1),
            metrics: rate.map(|rate| Metrics { rate, ..Metrics::default() }),
            participants: Vec::new(),
            journal: None,
            history: History::default(),
            schema: None,
            note: None,
        }
    }

    fn press(app: &mut App, code: KeyCode) -> Action {
        app.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn names(app: &App) -> Vec<String> {
        app.visible().iter().map(|r| r.key.name.clone()).collect()
    }

    fn app_with(rows: Vec<Row>) -> App {
        let mut app = App::new(1.0);
        app.update(Sample { rows, ..Sample::default() });
        app
    }

    #[test]
    fn sorts_by_name_then_steps_to_rate_largest_first_and_reverses() {
        let mut app = app_with(vec![row("d", "b", Some(5.0)), row("d", "a", Some(1.0)), row("d", "c", None)]);
        assert_eq!(names(&app), ["a", "b", "c"]);
        press(&mut app, KeyCode::Char('s'));
        assert_eq!(app.sort, SortKey::Kind);
        press(&mut app, KeyCode::Char('>'));
        assert_eq!((app.sort, app.descending), (SortKey::Rate, true));
        assert_eq!(names(&app), ["b", "a", "c"], "no rate yet sorts last");
        press(&mut app, KeyCode::Char('r'));
        assert_eq!(names(&app), ["c", "a", "b"]);
        press(&mut app, KeyCode::Char('<'));
        press(&mut app, KeyCode::Char('S'));
        assert_eq!(app.sort, SortKey::Name);
        press(&mut app, KeyCode::Char('S'));
        assert_eq!(app.sort, SortKey::P99, "steps wrap around");
    }

    #[test]
    fn a_filter_applies_on_enter_and_esc_clears_it() {
        let mut app = app_with(vec![row("d", "imu", None), row("d", "camera", None)]);
        press(&mut app, KeyCode::Char('/'));
        for c in "im".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        assert_eq!(names(&app).len(), 2, "not applied while typed");
        assert_eq!(press(&mut app, KeyCode::Char('q')), Action::Continue, "q is text in the filter");
        press(&mut app, KeyCode::Backspace);
        press(&mut app, KeyCode::Enter);
        assert_eq!(names(&app), ["imu"]);
        assert_eq!(app.selected.as_ref().unwrap().name, "imu");
        press(&mut app, KeyCode::Char('/'));
        press(&mut app, KeyCode::Esc);
        assert_eq!(names(&app).len(), 2);
        assert_eq!(press(&mut app, KeyCode::Esc), Action::Quit);
    }

    #[test]
    fn the_detail_pane_opens_on_enter_and_closes_when_its_channel_goes() {
        let mut app = app_with(vec![row("d", "a", None), row("d", "b", None)]);
        press(&mut app, KeyCode::Down);
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.detail_row().unwrap().key.name, "b");
        assert_eq!(press(&mut app, KeyCode::Esc), Action::Continue, "Esc closes the pane first");
        assert!(app.detail.is_none());
        press(&mut app, KeyCode::Enter);
        app.update(Sample { rows: vec![row("d", "a", None)], ..Sample::default() });
        assert!(app.detail.is_none());
        assert_eq!(app.status.as_deref(), Some("channel d/b is gone"));
        assert_eq!(app.selected.as_ref().unwrap().name, "a");
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(app.key(ctrl_c), Action::Quit);
    }
}
