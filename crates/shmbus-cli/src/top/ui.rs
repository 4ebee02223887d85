//! Drawing the live view: a title line, the channel table, the detail pane when open, and
//! a status line. Everything fits [`MIN_WIDTH`] × [`MIN_HEIGHT`]; a smaller terminal gets
//! one message saying so instead.

use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TableRow, Sparkline, Table, TableState, Wrap};
use ratatui::Frame;

use super::format::{bytes, count, nanos};
use super::sample::{Metrics, Row};
use super::view::{App, SortKey};

/// The smallest terminal drawn: the detail pane's participant columns need 80.
pub const MIN_WIDTH: u16 = 80;
/// The smallest terminal drawn: the title, a few rows, the detail pane and the status line.
pub const MIN_HEIGHT: u16 = 16;

/// The channel table's columns: title, width, and the sort key it shows (`None`: not
/// sortable). The first takes what the others leave.
const COLUMNS: [(&str, u16, Option<SortKey>); 11] = [
    ("CHANNEL", 12, Some(SortKey::Name)),
    ("KIND", 7, Some(SortKey::Kind)),
    ("MSG/s", 5, Some(SortKey::Rate)),
    ("B/s", 5, Some(SortKey::Bandwidth)),
    ("S/R", 5, None),
    ("LAG", 5, Some(SortKey::Lag)),
    ("DROP/s", 6, Some(SortKey::Drops)),
    ("FULL/s", 6, Some(SortKey::Full)),
    ("FTX/s", 5, Some(SortKey::Futex)),
    ("P50", 5, Some(SortKey::P50)),
    ("P99", 5, Some(SortKey::P99)),
];

/// Every key, for the status line after `?`.
const HELP: &str = "q quit  s/S or </> sort  r reverse  / filter  Up/Down select  Enter detail  Esc back";

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = format!(
            "terminal too small: {}x{} (need {MIN_WIDTH}x{MIN_HEIGHT}); enlarge it, or q to quit",
            area.width, area.height
        );
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return;
    }
    let visible = app.visible();
    let detail = app.detail_row();
    let table_height = match detail {
        // The header and up to five rows, the rest for the pane.
        Some(_) => (visible.len() as u16 + 1).clamp(2, 6),
        None => area.height.saturating_sub(2),
    };
    let [title, table, pane, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(table_height),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(title_line(app, visible.len())), title);
    draw_table(frame, app, &visible, table);
    if let Some(row) = detail {
        draw_detail(frame, row, pane);
    }
    frame.render_widget(Paragraph::new(status_line(app, &visible)), status);
}

fn title_line(app: &App, shown: usize) -> Line<'static> {
    let order = if app.descending { "desc" } else { "asc" };
    let mut text = format!(
        "shmbus top | {shown} of {} | every {}s | sort: {} {order}",
        app.rows.len(),
        app.interval_s,
        app.sort.title()
    );
    if !app.filter.is_empty() {
        text.push_str(&format!(" | filter: {}", app.filter));
    }
    Line::from(Span::styled(text, Style::default().add_modifier(Modifier::BOLD)))
}

fn status_line(app: &App, visible: &[&Row]) -> Line<'static> {
    if let Some(text) = &app.editing {
        return Line::from(format!("filter: {text}_   (Enter applies, Esc clears)"));
    }
    if let Some(s) = &app.status {
        return Line::from(Span::styled(s.clone(), Style::default().add_modifier(Modifier::BOLD)));
    }
    if app.help {
        return Line::from(HELP);
    }
    let selected = app.selected_index(visible).map(|i| visible[i]);
    if let Some(e) = selected.and_then(|r| r.error.as_ref()) {
        return Line::from(format!("error: {e}"));
    }
    if app.samples == 0 {
        return Line::from("reading the channels…   q quit  ? help");
    }
    if app.rows.is_empty() {
        return Line::from("no channels   q quit  ? help");
    }
    match &app.event {
        Some(e) => Line::from(format!("q quit  s sort  / filter  Enter detail  ? help   | {e}")),
        None => Line::from("q quit  s sort  / filter  Enter detail  ? help"),
    }
}

/// A number's cell: right-aligned.
fn right(text: String) -> Cell<'static> {
    Cell::from(Line::from(text).alignment(Alignment::Right))
}

/// The cells of one channel's table row after its name and kind.
fn metric_cells(row: &Row) -> Vec<String> {
    let m = row.metrics.as_ref();
    let f = |get: fn(&Metrics) -> f64| count(m.map(get));
    let sr = match (row.senders, row.receivers) {
        (Some(s), Some(r)) => format!("{s}/{r}"),
        _ => "-".into(),
    };
    vec![
        f(|m| m.rate),
        bytes(m.map(|m| m.bandwidth)),
        sr,
        count(m.and_then(|m| m.max_lag).map(|l| l as f64)),
        f(|m| m.drops_per_s),
        f(|m| m.full_per_s),
        f(|m| m.futex_per_s),
        nanos(m.and_then(|m| m.p50)),
        nanos(m.and_then(|m| m.p99)),
    ]
}

fn draw_table(frame: &mut Frame, app: &App, visible: &[&Row], area: Rect) {
    let header = TableRow::new(COLUMNS.iter().enumerate().map(|(i, &(t, _, key))| {
        let cell = if i < 2 { Cell::from(t) } else { right(t.to_string()) };
        if key == Some(app.sort) {
            cell.style(Style::default().add_modifier(Modifier::REVERSED))
        } else {
            cell
        }
    }))
    .style(Style::default().add_modifier(Modifier::BOLD));
    let rows = visible.iter().map(|r| {
        let mut cells = vec![Cell::from(r.key.short()), Cell::from(r.kind.clone().unwrap_or_else(|| "error".into()))];
        if r.error.is_some() {
            cells.push(Cell::from("(unreadable: Enter for why)"));
        } else {
            cells.extend(metric_cells(r).into_iter().map(right));
        }
        TableRow::new(cells)
    });
    let widths = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, &(_, w, _))| if i == 0 { Constraint::Min(w) } else { Constraint::Length(w) });
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
    let mut state = TableState::default().with_selected(app.selected_index(visible));
    frame.render_stateful_widget(table, area, &mut state);
}

fn draw_detail(frame: &mut Frame, row: &Row, area: Rect) {
    let kind = row.kind.as_deref().unwrap_or("unreadable");
    let block = Block::default().borders(Borders::TOP).title(format!(" {} ({kind}) ", row.key));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if let Some(e) = &row.error {
        frame.render_widget(Paragraph::new(format!("cannot read it: {e}")).wrap(Wrap { trim: true }), inner);
        return;
    }
    let [summary, rate, latency, list] =
        Layout::vertical([Constraint::Length(1), Constraint::Length(1), Constraint::Length(1), Constraint::Min(0)])
            .areas(inner);
    frame.render_widget(Paragraph::new(summary_line(row)), summary);
    // The schema and the kind's note, when there are, on the first lines of the list's area.
    let mut list = list;
    for (label, text) in [("schema", &row.schema), ("state", &row.note)] {
        if let Some(text) = text {
            let [line, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(list);
            frame.render_widget(Paragraph::new(format!("{label:<10} {text}")), line);
            list = rest;
        }
    }
    let rate_label = if row.journal.is_some() { "appends/s" } else { "msg/s" };
    sparkline(frame, rate, rate_label, row.history.rate.iter().copied().collect(), |v| count(Some(v as f64)));
    // A 0 in the latency history is an interval without a sample.
    if row.journal.is_some() {
        frame.render_widget(Paragraph::new("latency    (journals have none)"), latency);
    } else {
        sparkline(frame, latency, "p50", row.history.p50.iter().copied().collect(), |v| nanos((v > 0).then_some(v)));
    }
    match &row.journal {
        Some(j) => {
            let header = TableRow::new(["READER", "POSITION", "LAG", "HOLDER"])
                .style(Style::default().add_modifier(Modifier::BOLD));
            let rows = j.readers.iter().map(|r| {
                TableRow::new(vec![
                    r.name.clone(),
                    r.position.to_string(),
                    r.lag.to_string(),
                    r.holder_pid.map_or_else(|| "-".into(), |p| format!("pid {p}")),
                ])
            });
            let widths = [Constraint::Min(16), Constraint::Length(12), Constraint::Length(12), Constraint::Length(12)];
            if j.readers.is_empty() {
                frame.render_widget(Paragraph::new("no named readers"), list);
            } else {
                frame.render_widget(Table::new(rows, widths).header(header).column_spacing(1), list);
            }
        }
        None => {
            let titles =
                ["PID", "PROCESS", "ROLE", "LIVE", "MSG/s", "LAG", "MSGS", "DROPS", "FULL", "WAITS", "FUTEX", "P50"];
            let header =
                TableRow::new(
                    titles.iter().enumerate().map(|(i, &t)| if i < 4 { Cell::from(t) } else { right(t.to_string()) }),
                )
                .style(Style::default().add_modifier(Modifier::BOLD));
            let rows = row.participants.iter().map(|p| {
                let c = &p.counters;
                let text = [
                    p.pid.to_string(),
                    p.process.clone().unwrap_or_else(|| "-".into()),
                    p.role.clone(),
                    if p.alive { "yes" } else { "dead" }.to_string(),
                ];
                let numbers = [
                    count(p.messages_per_s),
                    count(p.lag.map(|l| l as f64)),
                    count(Some(c.messages as f64)),
                    count(Some(p.drops() as f64)),
                    count(Some(c.full as f64)),
                    count(Some(c.blocked as f64)),
                    count(Some((c.futex_waits + c.futex_wakes) as f64)),
                    nanos(p.p50),
                ];
                TableRow::new(text.into_iter().map(Cell::from).chain(numbers.into_iter().map(right)))
            });
            // The columns fill 80 cells with PROCESS at 8; a wider terminal gives PROCESS up to
            // 19, for a CLI participant's verb (`shmbus record`, `shmbus journal tail`).
            let process = 8 + list.width.saturating_sub(80).min(11);
            let widths = [7, process, 10, 4, 5, 5, 5, 5, 5, 5, 5, 5].map(Constraint::Length);
            if row.participants.is_empty() {
                frame.render_widget(Paragraph::new("no participants"), list);
            } else {
                frame.render_widget(Table::new(rows, widths).header(header).column_spacing(1), list);
            }
        }
    }
}

fn summary_line(row: &Row) -> String {
    let m = row.metrics.as_ref();
    if let Some(j) = &row.journal {
        return format!(
            "entries {}..{}  on disk {}B  cycles {}  appenders {}  {:.0} appends/s",
            j.first_index,
            j.next_index,
            bytes(Some(j.file_bytes as f64)),
            j.cycles,
            row.senders.unwrap_or(0),
            m.map_or(0.0, |m| m.rate),
        );
    }
    format!(
        "sent {}/s  received {}/s  {}B/s  waits {}/s  p99 {}",
        count(m.map(|m| m.sent_per_s)),
        count(m.map(|m| m.received_per_s)),
        bytes(m.map(|m| m.bandwidth)),
        count(m.map(|m| m.blocked_per_s)),
        nanos(m.and_then(|m| m.p99)),
    )
}

/// A labelled sparkline of `data` (oldest first), its newest values filling the width, and
/// the newest value as text.
fn sparkline(frame: &mut Frame, area: Rect, label: &str, data: Vec<u64>, show: impl Fn(u64) -> String) {
    let last = data.last().map_or_else(|| "-".into(), |&v| show(v));
    let [text, line] = Layout::horizontal([Constraint::Length(18), Constraint::Min(0)]).areas(area);
    frame.render_widget(Paragraph::new(format!("{label:<10} {last:>6}")), text);
    let width = line.width as usize;
    let newest = &data[data.len().saturating_sub(width)..];
    frame.render_widget(Sparkline::default().data(newest), line);
}
