//! Drawing: the header, the transcript, the todo list, the goal loop's banner, the completion
//! list, the input (or the
//! approval prompt, or the rewind picker) and the status line, or the session picker. Pure
//! functions of the state, drawn into whatever backend the terminal has (a test backend in the
//! snapshot tests).

use std::time::Instant;

use cwcode_protocol::{Mode, SessionStatus, TodoStatus};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::app::{Answer, App, Connection, Pending, Phase, Reported};
use crate::format::{self, money, percent, shorten, tokens};
use crate::picker::{Item, Picker};
use crate::rewind::RewindPicker;
use crate::wrap::{self, sanitize};

const DIM: Style = Style::new().fg(Color::DarkGray);
/// The goal loop's banner: turns start on their own while it runs, so it stands out.
const BANNER: Style = Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD);
const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
const MAX_INPUT_ROWS: usize = 8;
const MAX_COMPLETIONS: usize = 8;
const MAX_TODOS: usize = 8;
const MAX_CHECKPOINTS: usize = 10;
const PROMPT: &str = "› ";
/// A figure the provider did not report (never shown as 0).
const NOT_REPORTED: &str = "not reported";

pub fn draw(frame: &mut Frame<'_>, app: &mut App, now: Instant) {
    let area = frame.area();
    if area.height < 4 || area.width < 10 {
        frame.render_widget(Paragraph::new("cwcode: the window is too small"), area);
        return;
    }
    let [header, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(frame, app, header);
    draw_status(frame, app, status, now);
    if let Some(setup) = &app.setup {
        let lines = setup.lines(body.width as usize);
        frame.render_widget(
            Paragraph::new(lines).wrap(ratatui::widgets::Wrap { trim: false }),
            body,
        );
        return;
    }
    if let Some(picker) = &app.picker {
        draw_picker(frame, picker, body);
        return;
    }
    if app.phase != Phase::Attached {
        let text = match (&app.connection, app.phase) {
            (Connection::Connecting, _) => "connecting to cwcoded…",
            (_, Phase::Opening) => "opening the session…",
            _ => "",
        };
        frame.render_widget(Paragraph::new(Line::styled(text, DIM)), body);
        return;
    }

    let width = body.width as usize;
    let todo_lines = todo_lines(app);
    let banner: Vec<Line<'static>> = app
        .goal
        .iter()
        .map(|goal| {
            let banner = goal.banner(app.approval().is_some());
            Line::styled(shorten(&banner, width), BANNER)
        })
        .collect();
    // An approval asked meanwhile (a prompt from another terminal) comes before the picker.
    let rewind = app.rewind.as_ref().filter(|_| app.approval().is_none());
    let (completions, input_lines, cursor, input_rows) = match rewind {
        Some(picker) => {
            let lines = rewind_lines(picker, width);
            let rows = lines.len();
            (Vec::new(), lines, None, rows)
        }
        None => {
            let (lines, cursor) = input_lines(app, width);
            let rows = lines.len().min(MAX_INPUT_ROWS);
            (completion_lines(app, width), lines, cursor, rows)
        }
    };
    let [transcript, todos, goal, popup, rule, input] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(todo_lines.len() as u16),
        Constraint::Length(banner.len() as u16),
        Constraint::Length(completions.len() as u16),
        Constraint::Length(1),
        Constraint::Length(input_rows as u16),
    ])
    .areas(body);
    draw_transcript(frame, app, transcript);
    frame.render_widget(Paragraph::new(todo_lines), todos);
    frame.render_widget(Paragraph::new(banner), goal);
    frame.render_widget(Paragraph::new(completions), popup);
    frame.render_widget(Paragraph::new(Line::styled("─".repeat(width), DIM)), rule);
    // Keep the cursor's row in view when the input is taller than its area.
    let first = match cursor {
        Some((row, _)) if row >= input_rows => row + 1 - input_rows,
        _ => 0,
    };
    let shown: Vec<Line<'static>> = input_lines
        .into_iter()
        .skip(first)
        .take(input_rows)
        .collect();
    frame.render_widget(Paragraph::new(shown), input);
    if let Some((row, col)) = cursor {
        let y = input.y + (row - first) as u16;
        let x = input.x + (col as u16).min(input.width.saturating_sub(1));
        frame.set_cursor_position((x, y));
    }
}

fn draw_header(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let mut spans = vec![Span::styled(
        "cwcode",
        Style::new().add_modifier(Modifier::BOLD),
    )];
    match &app.session {
        Some(session) => {
            let which = if app.is_draft() {
                " · new session (created with the first prompt)".to_owned()
            } else {
                format!(" · session {}", short_id(&session.id))
            };
            spans.push(Span::styled(which, DIM));
            if !session.title.is_empty() {
                spans.push(Span::styled(format!(" · {}", session.title), DIM));
            }
            spans.push(Span::styled(format!(" · {}", session.cwd), DIM));
        }
        None => spans.push(Span::styled(format!(" · {}", app.cwd), DIM)),
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn short_id(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

fn draw_transcript(frame: &mut Frame<'_>, app: &mut App, area: Rect) {
    let height = area.height as usize;
    let total = app.transcript.layout(area.width as usize, app.expanded);
    let bottom = total.saturating_sub(height);
    let top = match app.scroll {
        Some(top) if top < bottom => top,
        _ => {
            app.scroll = None;
            bottom
        }
    };
    app.last_rows = total;
    app.last_height = height;
    let mut rows = app.transcript.rows(top, height);
    if app.transcript.is_empty() {
        rows.push(Line::styled(
            "type a prompt and press Enter · /help for keys and commands",
            DIM,
        ));
    }
    if app.scroll.is_some() && !rows.is_empty() {
        let below = total.saturating_sub(top + height);
        let last = rows.len() - 1;
        rows[last] = Line::styled(
            format!("↓ {below} more lines · PgDn, Ctrl+End"),
            Style::new().fg(Color::Black).bg(Color::Yellow),
        );
    }
    frame.render_widget(Paragraph::new(rows), area);
}

fn todo_lines(app: &App) -> Vec<Line<'static>> {
    if app.todos.is_empty() || !app.show_todos {
        return Vec::new();
    }
    let done = app
        .todos
        .iter()
        .filter(|todo| todo.status == TodoStatus::Completed)
        .count();
    let total = app.todos.len();
    if done == total {
        // Finished work keeps one row, until the model starts a new list.
        return vec![Line::styled(
            format!("todo · all {total} done · /todo hides"),
            DIM,
        )];
    }
    let mut lines = vec![Line::styled(
        format!("todo · {done} of {total} done · /todo hides"),
        DIM,
    )];
    for todo in app.todos.iter().take(MAX_TODOS) {
        let (mark, style) = match todo.status {
            TodoStatus::Completed => ("☑", DIM.add_modifier(Modifier::CROSSED_OUT)),
            TodoStatus::InProgress => ("◐", Style::new().add_modifier(Modifier::BOLD)),
            TodoStatus::Pending => ("☐", Style::new()),
        };
        lines.push(Line::styled(
            format!("  {mark} {}", wrap::sanitize(&todo.content)),
            style,
        ));
    }
    if app.todos.len() > MAX_TODOS {
        lines.push(Line::styled(
            format!("  … {} more", app.todos.len() - MAX_TODOS),
            DIM,
        ));
    }
    lines
}

fn completion_lines(app: &App, width: usize) -> Vec<Line<'static>> {
    let candidates = app.completions();
    let label_width = candidates
        .iter()
        .map(|c| wrap::width(&c.label))
        .max()
        .unwrap_or(0);
    let selected = app
        .completion_selected
        .min(candidates.len().saturating_sub(1));
    candidates
        .iter()
        .enumerate()
        .take(MAX_COMPLETIONS)
        .map(|(index, candidate)| {
            let text = format!("  {:<label_width$}  {}", candidate.label, candidate.about);
            let text = shorten(&text, width);
            if index == selected {
                Line::styled(text, SELECTED)
            } else {
                Line::styled(text, DIM)
            }
        })
        .collect()
}

/// `/rewind`'s list: a checkpoint a row (prompt number, time, the prompt's first line, the
/// files it changed), the selected one highlighted, and what the keys do.
fn rewind_lines(picker: &RewindPicker, width: usize) -> Vec<Line<'static>> {
    let mut lines = vec![Line::styled(
        "Rewind to before which prompt? Its files and the history go back; the prompt returns to the input",
        Style::new().add_modifier(Modifier::BOLD),
    )];
    let first = picker.selected.saturating_sub(MAX_CHECKPOINTS - 1);
    let shown = || {
        picker
            .checkpoints
            .iter()
            .enumerate()
            .skip(first)
            .take(MAX_CHECKPOINTS)
    };
    // The files make a column on the right, at most a third of the width.
    let files_room = (width / 3).max(12);
    let files_width = shown()
        .map(|(_, checkpoint)| wrap::width(&format::files(&checkpoint.files, files_room)))
        .max()
        .unwrap_or(0);
    for (index, checkpoint) in shown() {
        let time = checkpoint
            .time
            .get(..16)
            .unwrap_or(&checkpoint.time)
            .replace('T', " ");
        // The marker as well as the highlight: a screen read as text still shows the choice.
        let marker = if index == picker.selected { "›" } else { " " };
        let lead = format!("{marker} {:>3}  {time}  ", checkpoint.turn);
        let files = format::files(&checkpoint.files, files_room);
        let room = width.saturating_sub(wrap::width(&lead) + files_width + 2);
        let text = wrap::sanitize(&checkpoint.prompt);
        let mut prompt_lines = text.trim().lines();
        let mut prompt = prompt_lines.next().unwrap_or_default().to_owned();
        if prompt_lines.next().is_some() {
            prompt.push_str(" …");
        }
        let prompt = shorten(&prompt, room);
        let pad = " ".repeat(room.saturating_sub(wrap::width(&prompt)) + 2);
        let text = shorten(&format!("{lead}{prompt}{pad}{files}"), width);
        lines.push(if index == picker.selected {
            Line::styled(text, SELECTED)
        } else {
            Line::raw(text)
        });
    }
    if let Some(error) = &picker.error {
        lines.push(Line::styled(error.clone(), Style::new().fg(Color::Red)));
    }
    lines.push(match picker.rewinding {
        Some(turn) => Line::styled(
            format!("rewinding to before prompt {turn}…"),
            Style::new().fg(Color::Yellow),
        ),
        None => Line::styled(
            "↑↓ choose · Enter rewinds · Esc closes · /rewind undo reverts a rewind until the next prompt",
            DIM,
        ),
    });
    lines
        .into_iter()
        .flat_map(|line| wrap::wrap_line(line, width, 2))
        .collect()
}

/// The input area's lines, and the cursor (row, column) when it is shown.
fn input_lines(app: &App, width: usize) -> (Vec<Line<'static>>, Option<(usize, usize)>) {
    let Some(pending) = app.approval() else {
        let (rows, cursor) = app.editor.layout(width, PROMPT);
        return (rows, Some(cursor));
    };
    let waiting = app.approvals.len();
    let count = if waiting > 1 {
        format!(" (1 of {waiting})")
    } else {
        String::new()
    };
    let key = |k: &str| {
        Span::styled(
            k.to_owned(),
            Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        )
    };
    match &app.answer {
        Answer::Choosing => {
            let line: Line = [
                Span::styled(
                    format!("? allow {}{count}  ", pending.tool),
                    Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
                ),
                key("y"),
                Span::raw(" yes  "),
            ]
            .into_iter()
            .chain(always_choices(pending, key))
            .chain([
                key("n"),
                Span::raw(" no, say why  "),
                key("esc"),
                Span::raw(" cancel the turn"),
            ])
            .collect::<Vec<_>>()
            .into();
            (wrap::wrap_line(line, width, 2), None)
        }
        Answer::Reason(editor) => {
            let mut lines = vec![Line::styled(
                format!(
                    "✗ deny {} — why? the model is told (Enter sends, empty is fine; Esc goes back)",
                    pending.tool
                ),
                Style::new().fg(Color::Red),
            )];
            let (rows, (row, col)) = editor.layout(width, PROMPT);
            let offset = lines.len();
            lines.extend(rows);
            (lines, Some((row + offset, col)))
        }
        Answer::Sent => (
            vec![Line::styled(format!("… answering {}", pending.tool), DIM)],
            None,
        ),
    }
}

/// One piece of the status line; when the line is too narrow, the pieces of lowest priority
/// go first.
struct Piece {
    priority: u8,
    span: Span<'static>,
}

/// The "always" keys of the approval prompt: for the offered pattern and for the whole tool, or
/// only the whole tool when the call offers no pattern.
fn always_choices(pending: &Pending, key: impl Fn(&str) -> Span<'static>) -> Vec<Span<'static>> {
    match &pending.suggested_pattern {
        Some(pattern) => vec![
            key("a"),
            Span::raw(format!(" always `{}`  ", sanitize(pattern))),
            key("A"),
            Span::raw(format!(" every {} call  ", pending.tool)),
        ],
        None => vec![
            key("a"),
            Span::raw(format!(" always ({} in this session)  ", pending.tool)),
        ],
    }
}

fn piece(priority: u8, span: Span<'static>) -> Piece {
    Piece { priority, span }
}

fn draw_status(frame: &mut Frame<'_>, app: &App, area: Rect, now: Instant) {
    let width = area.width as usize;
    let mut pieces: Vec<Piece> = Vec::new();
    // During the first run's setup there is no session to describe yet, nor keys but its own.
    let session = app.session.as_ref().filter(|_| app.setup.is_none());
    if let Some(session) = session {
        // The mode the user chose shows at once; the daemon's confirmation follows.
        let mode = app.intended_mode();
        let (label, style) = match mode {
            Mode::Plan => (" PLAN ", Style::new().fg(Color::Black).bg(Color::Cyan)),
            Mode::Code => (" CODE ", Style::new().fg(Color::Black).bg(Color::Green)),
            Mode::Yolo => (" YOLO ", Style::new().fg(Color::White).bg(Color::Red)),
        };
        pieces.push(piece(
            10,
            Span::styled(label, style.add_modifier(Modifier::BOLD)),
        ));
        // Nothing asks before a tool runs: said where the eye goes, as long as there is room.
        if mode == Mode::Yolo {
            pieces.push(piece(
                9,
                Span::styled(
                    "every tool runs unasked",
                    Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
                ),
            ));
        }
        let profile = app.profile();
        let model = profile.map_or("…", |profile| profile.model.as_str());
        pieces.push(piece(
            5,
            Span::raw(format!("{} · {model}", session.profile)),
        ));
        let window = profile
            .and_then(|profile| profile.context_window)
            .map(|window| format!("/{}", tokens(window)))
            .unwrap_or_default();
        pieces.push(piece(
            6,
            Span::raw(format!("ctx {}{window}", tokens(app.context_tokens))),
        ));
        // Figures the provider did not report are not 0: said so (`n/r` where room is short, as
        // in `/cache`), or marked as a lower bound.
        let reported = app.usage_reported();
        let cache = match reported {
            Reported::Nothing => "n/r".to_owned(),
            Reported::All | Reported::Partly => percent(app.cached_tokens, app.prompt_tokens),
        };
        pieces.push(piece(6, Span::raw(format!("cache {cache}"))));
        if let Some((cost, currency)) = app.cost() {
            let cost = match reported {
                Reported::Nothing => NOT_REPORTED.to_owned(),
                Reported::Partly => format!("≥{} {currency}", money(cost)),
                Reported::All => format!("{} {currency}", money(cost)),
            };
            pieces.push(piece(4, Span::raw(format!("cost {cost}"))));
        }
    }
    pieces.push(piece(
        8,
        match &app.connection {
            Connection::Connecting => Span::styled("○ connecting", Style::new().fg(Color::Yellow)),
            Connection::Connected => Span::styled("● connected", Style::new().fg(Color::Green)),
            Connection::Lost(_) => Span::styled("✗ daemon lost", Style::new().fg(Color::Red)),
        },
    ));
    let activity = match (app.status, app.turn_started) {
        (SessionStatus::AwaitingApproval, _) => Some("awaiting approval".to_owned()),
        (SessionStatus::Running, Some(start)) => Some(format!(
            "working {}s",
            now.saturating_duration_since(start).as_secs()
        )),
        (SessionStatus::Running, None) => Some("working".to_owned()),
        (SessionStatus::Idle, _) => None,
    };
    if let Some(activity) = activity {
        pieces.push(piece(
            9,
            Span::styled(activity, Style::new().fg(Color::Yellow)),
        ));
    }
    // The right end: a hint the user needs now, else the keys worth knowing.
    let right = match &app.flash {
        Some(flash) => Some(piece(
            9,
            Span::styled(flash.clone(), Style::new().fg(Color::Yellow)),
        )),
        None if app.phase != Phase::Attached || app.setup.is_some() => None,
        None if app.busy() => Some(piece(1, Span::styled("esc cancel · shift+tab mode", DIM))),
        None => Some(piece(1, Span::styled("shift+tab mode · /help", DIM))),
    };
    const SEPARATOR: &str = " │ ";
    let needed = |pieces: &[Piece], right: &Option<Piece>| {
        let left: usize = pieces.iter().map(|p| wrap::width(&p.span.content)).sum();
        let separators = wrap::width(SEPARATOR) * pieces.len().saturating_sub(1);
        // At least two spaces between the figures and the hint.
        let right = right
            .as_ref()
            .map_or(0, |p| wrap::width(&p.span.content) + 2);
        left + separators + right
    };
    let mut right = right;
    while needed(&pieces, &right) > width {
        let lowest_left = pieces.iter().map(|p| p.priority).min().unwrap_or(u8::MAX);
        match &right {
            Some(r) if r.priority <= lowest_left => right = None,
            _ if pieces.len() > 1 => {
                let index = pieces
                    .iter()
                    .rposition(|p| p.priority == lowest_left)
                    .unwrap_or(0);
                pieces.remove(index);
            }
            _ => break,
        }
    }
    let mut spans = Vec::new();
    // The mode badge is set off by its colour; the figures after it by separators.
    let badge = session.is_some();
    for (index, piece) in pieces.into_iter().enumerate() {
        match index {
            0 => {}
            1 if badge => spans.push(Span::raw(" ")),
            _ => spans.push(Span::styled(SEPARATOR, DIM)),
        }
        spans.push(piece.span);
    }
    if let Some(right) = right {
        let used: usize = spans.iter().map(|s| wrap::width(&s.content)).sum();
        let right_width = wrap::width(&right.span.content);
        spans.push(Span::raw(
            " ".repeat(width.saturating_sub(used + right_width)),
        ));
        spans.push(right.span);
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_picker(frame: &mut Frame<'_>, picker: &Picker, area: Rect) {
    let width = area.width as usize;
    let mut lines = vec![
        Line::styled(
            "Pick a session · type to filter by id, title or directory · Enter opens · Esc leaves",
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Line::from(vec![
            Span::styled("filter: ", DIM),
            Span::raw(picker.filter.clone()),
        ]),
        Line::default(),
    ];
    let visible = picker.visible();
    if visible.is_empty() {
        lines.push(Line::styled(
            format!(
                "no session matches; Enter attaches to id {}",
                picker.filter.trim()
            ),
            DIM,
        ));
    }
    // A session with a preview takes two rows: the list scrolls so the selected one shows.
    let rows_of = |item: &Item| match item {
        Item::Session(session) if picker.preview(&session.id).is_some() => 2,
        _ => 1,
    };
    let room = (area.height as usize)
        .saturating_sub(lines.len() + 2)
        .max(1);
    let mut first = picker.selected.min(visible.len().saturating_sub(1));
    let mut used = visible.get(first).map_or(0, |item| rows_of(item));
    while first > 0 && used + rows_of(visible[first - 1]) <= room {
        first -= 1;
        used += rows_of(visible[first]);
    }
    let mut left = room;
    for (index, item) in visible.iter().enumerate().skip(first) {
        let rows = rows_of(item);
        if rows > left && index != first {
            break;
        }
        left = left.saturating_sub(rows);
        let text = match item {
            Item::New => format!("+ new session in {}", picker.cwd),
            Item::Session(session) => {
                let status = match session.status {
                    SessionStatus::Idle => "idle",
                    SessionStatus::Running => "running",
                    SessionStatus::AwaitingApproval => "needs approval",
                };
                let updated = session
                    .updated
                    .get(..16)
                    .unwrap_or(&session.updated)
                    .replace('T', " ");
                let mut text = format!(
                    "  {:<12}  {:<14}  {:<4}  {:>3} turns  {updated}  {}",
                    short_id(&session.id),
                    status,
                    session.mode,
                    session.turns,
                    session.title
                );
                if session.cwd != picker.cwd {
                    text.push_str(&format!("  ({})", session.cwd));
                }
                text
            }
        };
        let text = shorten(&text, width);
        lines.push(if index == picker.selected {
            Line::styled(text, SELECTED)
        } else {
            Line::raw(text)
        });
        if let Item::Session(session) = item
            && let Some(preview) = picker.preview(&session.id)
        {
            lines.push(Line::styled(shorten(&format!("    {preview}"), width), DIM));
        }
    }
    if let Some(error) = &picker.error {
        lines.push(Line::default());
        lines.push(Line::styled(error.clone(), Style::new().fg(Color::Red)));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

#[cfg(test)]
#[path = "ui_tests.rs"]
mod tests;
