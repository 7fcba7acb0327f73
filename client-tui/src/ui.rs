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

use crate::app::{Answer, App, Connection, Phase};
use crate::format::{self, money, percent, shorten, tokens};
use crate::picker::{Item, Picker};
use crate::rewind::RewindPicker;
use crate::wrap;

const DIM: Style = Style::new().fg(Color::DarkGray);
/// The goal loop's banner: turns start on their own while it runs, so it stands out.
const BANNER: Style = Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD);
const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
const MAX_INPUT_ROWS: usize = 8;
const MAX_COMPLETIONS: usize = 8;
const MAX_TODOS: usize = 8;
const MAX_CHECKPOINTS: usize = 10;
const PROMPT: &str = "› ";

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
        .map(|goal| Line::styled(shorten(&goal.banner(), width), BANNER))
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
            spans.push(Span::styled(
                format!(" · session {}", short_id(&session.id)),
                DIM,
            ));
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
            let line = Line::from(vec![
                Span::styled(
                    format!("? allow {}{count}  ", pending.tool),
                    Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
                ),
                key("y"),
                Span::raw(" yes  "),
                key("a"),
                Span::raw(format!(" always ({} in this session)  ", pending.tool)),
                key("n"),
                Span::raw(" no, say why  "),
                key("esc"),
                Span::raw(" cancel the turn"),
            ]);
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

fn piece(priority: u8, span: Span<'static>) -> Piece {
    Piece { priority, span }
}

fn draw_status(frame: &mut Frame<'_>, app: &App, area: Rect, now: Instant) {
    let width = area.width as usize;
    let mut pieces: Vec<Piece> = Vec::new();
    if let Some(session) = &app.session {
        let (label, style) = match session.mode {
            Mode::Plan => (" PLAN ", Style::new().fg(Color::Black).bg(Color::Cyan)),
            Mode::Code => (" CODE ", Style::new().fg(Color::Black).bg(Color::Green)),
            Mode::Yolo => (" YOLO ", Style::new().fg(Color::White).bg(Color::Red)),
        };
        pieces.push(piece(
            10,
            Span::styled(label, style.add_modifier(Modifier::BOLD)),
        ));
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
        pieces.push(piece(
            6,
            Span::raw(format!(
                "cache {}",
                percent(app.cached_tokens, app.prompt_tokens)
            )),
        ));
        if let Some(cost) = app.cost() {
            pieces.push(piece(4, Span::raw(format!("cost {}", money(cost)))));
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
        None if app.phase != Phase::Attached => None,
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
    let badge = app.session.is_some();
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
    let room = (area.height as usize)
        .saturating_sub(lines.len() + 2)
        .max(1);
    let first = picker.selected.saturating_sub(room - 1);
    for (index, item) in visible.iter().enumerate().skip(first).take(room) {
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
    }
    if let Some(error) = &picker.error {
        lines.push(Line::default());
        lines.push(Line::styled(error.clone(), Style::new().fg(Color::Red)));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use cwcode_protocol::{ApprovalDecision, EventKind, TurnOutcome, Usage};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;
    use crate::daemon::Reply;
    use crate::fixtures::{CWD, attached_app, checkpoint, feed, session};

    fn screen(app: &mut App, now: Instant, width: u16, height: u16) -> Terminal<TestBackend> {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|frame| draw(frame, app, now)).unwrap();
        terminal
    }

    fn key(app: &mut App, code: KeyCode, now: Instant) {
        app.on_key(KeyEvent::new(code, KeyModifiers::NONE), now);
    }

    fn type_text(app: &mut App, text: &str, now: Instant) {
        for c in text.chars() {
            key(app, KeyCode::Char(c), now);
        }
    }

    fn started(prompt: &str) -> EventKind {
        EventKind::TurnStarted {
            turn: 1,
            prompt: prompt.to_owned(),
        }
    }

    fn running() -> EventKind {
        EventKind::StatusChanged {
            status: SessionStatus::Running,
        }
    }

    const READ_OUTPUT: &str = "1:k3d|fn total(items: &[Item]) -> u32 {\n2:p0q|    items.iter().map(|i| i.price).sum()\n3:z9x|}";

    #[test]
    fn streaming_answer() {
        let start = Instant::now();
        let mut app = attached_app(start);
        feed(
            &mut app,
            start,
            [
                running(),
                started("how do I build this?"),
                EventKind::ReasoningDelta {
                    text: "The user asks about the build.\nCargo is used.".to_owned(),
                },
                EventKind::AssistantDelta {
                    text: "The build has **two** steps:\n\n1. compile the `shop` crate\n"
                        .to_owned(),
                },
                EventKind::AssistantDelta {
                    text: "2. run the tests\n\n```sh\ncargo build\ncargo te".to_owned(),
                },
            ],
        );
        let terminal = screen(&mut app, start + Duration::from_secs(3), 80, 16);
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn tool_call_with_diff() {
        let now = Instant::now();
        let mut app = attached_app(now);
        feed(
            &mut app,
            now,
            [
                started("prices are in cents, fix total"),
                EventKind::ToolCallStarted {
                    call_id: "c1".to_owned(),
                    name: "read_file".to_owned(),
                    arguments: r#"{"path":"src/cart.rs"}"#.to_owned(),
                },
                EventKind::ToolCallFinished {
                    call_id: "c1".to_owned(),
                    name: "read_file".to_owned(),
                    output: READ_OUTPUT.to_owned(),
                    is_error: false,
                },
                EventKind::ToolCallStarted {
                    call_id: "c2".to_owned(),
                    name: "edit_lines".to_owned(),
                    arguments: r#"{"path":"src/cart.rs","edits":[{"line":2,"hash":"p0q","new_text":"    let cents: u32 = items.iter().map(|i| i.price).sum();\n    cents / 100"}]}"#.to_owned(),
                },
                EventKind::ToolCallFinished {
                    call_id: "c2".to_owned(),
                    name: "edit_lines".to_owned(),
                    output: "Edited `src/cart.rs`: replaced line 2 with 2 lines. Those lines now read:\n2:aaa|    let cents: u32 = items.iter().map(|i| i.price).sum();\n3:bbb|    cents / 100".to_owned(),
                    is_error: false,
                },
                EventKind::AssistantDelta {
                    text: "`total` now returns whole units.".to_owned(),
                },
                EventKind::TurnFinished {
                    turn: 1,
                    outcome: TurnOutcome::Completed,
                    usage: Usage {
                        prompt_tokens: 5200,
                        completion_tokens: 140,
                        cached_tokens: 4096,
                    },
                    error: None,
                },
            ],
        );
        let terminal = screen(&mut app, now, 72, 16);
        insta::assert_snapshot!(terminal.backend());
    }

    fn awaiting_approval(now: Instant) -> App {
        let mut app = attached_app(now);
        let arguments =
            r#"{"path":"README.md","old_string":"Run `make`.","new_string":"Run `cargo build`."}"#;
        feed(
            &mut app,
            now,
            [
                running(),
                started("update the readme"),
                EventKind::ToolCallStarted {
                    call_id: "c1".to_owned(),
                    name: "edit_file".to_owned(),
                    arguments: arguments.to_owned(),
                },
                EventKind::ApprovalRequested {
                    request_id: "r1".to_owned(),
                    call_id: "c1".to_owned(),
                    tool: "edit_file".to_owned(),
                    arguments: arguments.to_owned(),
                },
                EventKind::StatusChanged {
                    status: SessionStatus::AwaitingApproval,
                },
            ],
        );
        app
    }

    #[test]
    fn approval_prompt() {
        let now = Instant::now();
        let mut app = awaiting_approval(now);
        let terminal = screen(&mut app, now, 100, 10);
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn approval_denied_with_a_reason() {
        let now = Instant::now();
        let mut app = awaiting_approval(now);
        key(&mut app, KeyCode::Char('n'), now);
        type_text(&mut app, "keep make", now);
        let terminal = screen(&mut app, now, 100, 10);
        insta::assert_snapshot!("approval_reason", terminal.backend());
        key(&mut app, KeyCode::Enter, now);
        feed(
            &mut app,
            now,
            [EventKind::ApprovalResolved {
                request_id: "r1".to_owned(),
                decision: ApprovalDecision::Deny,
                reason: Some("keep make".to_owned()),
            }],
        );
        let terminal = screen(&mut app, now, 100, 10);
        insta::assert_snapshot!("approval_denied", terminal.backend());
    }

    #[test]
    fn plan_mode_status_line() {
        let now = Instant::now();
        let mut app = attached_app(now);
        let usage = Usage {
            prompt_tokens: 18_400,
            completion_tokens: 900,
            cached_tokens: 17_920,
        };
        feed(
            &mut app,
            now,
            [
                EventKind::ModeChanged { mode: Mode::Plan },
                started("plan the refactor"),
                EventKind::AssistantMessage {
                    content: "Plan: split `cart.rs` into two modules.".to_owned(),
                    reasoning: None,
                    tool_calls: Vec::new(),
                    usage: Some(usage),
                    stats: None,
                },
                EventKind::TurnFinished {
                    turn: 1,
                    outcome: TurnOutcome::Completed,
                    usage,
                    error: None,
                },
            ],
        );
        let terminal = screen(&mut app, now, 110, 10);
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn status_line_follows_a_profile_change() {
        let now = Instant::now();
        let mut app = attached_app(now);
        let mut profiles = app.profiles.clone();
        profiles.push(cwcode_protocol::ProfileInfo {
            name: "local".to_owned(),
            base_url: "http://localhost:11434/v1".to_owned(),
            model: "qwen3-coder".to_owned(),
            has_key: true,
            is_default: false,
            context_window: None,
            prices: None,
        });
        app.on_reply(Reply::Profiles(profiles), now);
        feed(
            &mut app,
            now,
            [EventKind::ProfileChanged {
                profile: "local".to_owned(),
            }],
        );
        let terminal = screen(&mut app, now, 110, 10);
        let text = format!("{:?}", terminal.backend());
        assert!(text.contains("local · qwen3-coder"), "{text}");
        assert!(!text.contains("deepseek-chat"), "{text}");
    }

    #[test]
    fn slash_completion() {
        let now = Instant::now();
        let mut app = attached_app(now);
        type_text(&mut app, "/m", now);
        key(&mut app, KeyCode::Down, now);
        let terminal = screen(&mut app, now, 72, 8);
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn session_picker() {
        let now = Instant::now();
        let mut app = App::new(CWD.to_owned(), crate::app::Startup::Choose, None, None);
        app.on_reply(crate::daemon::Reply::Connected, now);
        let mut other = session("0198ffeeddccbbaa", "/home/dev/blog", "typo in post");
        other.status = SessionStatus::Running;
        let mut older = session("0198a1b2c3d4e5f6", CWD, "fix the cart");
        older.turns = 12;
        older.updated = "2026-01-01T10:00:00.000Z".to_owned();
        let sessions = vec![
            session("0198bbbbcccc0000", CWD, "add coupons"),
            other,
            older,
        ];
        app.on_reply(crate::daemon::Reply::Sessions(sessions), now);
        let terminal = screen(&mut app, now, 100, 10);
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn scrolled_up_the_view_stays_put_while_output_streams_and_says_what_is_below() {
        let now = Instant::now();
        let mut app = attached_app(now);
        let numbers: String = (1..=40).map(|n| format!("line {n}\n\n")).collect();
        feed(&mut app, now, [EventKind::AssistantDelta { text: numbers }]);
        screen(&mut app, now, 40, 12);
        key(&mut app, KeyCode::PageUp, now);
        let before = screen(&mut app, now, 40, 12).backend().to_string();
        feed(
            &mut app,
            now,
            [EventKind::AssistantDelta {
                text: "more\n\nand more".to_owned(),
            }],
        );
        let after = screen(&mut app, now, 40, 12).backend().to_string();
        let first_rows = |text: &str| text.lines().take(8).collect::<Vec<_>>().join("\n");
        assert_eq!(first_rows(&before), first_rows(&after));
        assert!(
            after.contains("↓ 10 more lines · PgDn, Ctrl+End"),
            "{after}"
        );
        // Paged back to the bottom, it follows again.
        key(&mut app, KeyCode::PageDown, now);
        key(&mut app, KeyCode::PageDown, now);
        assert_eq!(app.scroll, None);
        let bottom = screen(&mut app, now, 40, 12).backend().to_string();
        assert!(bottom.contains("and more"), "{bottom}");
    }

    #[test]
    fn the_todo_list_shows_while_the_model_keeps_one() {
        let now = Instant::now();
        let mut app = attached_app(now);
        let todo = |content: &str, status| cwcode_protocol::TodoItem {
            content: content.to_owned(),
            status,
        };
        feed(
            &mut app,
            now,
            [EventKind::TodoUpdated {
                todos: vec![
                    todo("read the cart", TodoStatus::Completed),
                    todo("fix the rounding", TodoStatus::InProgress),
                    todo("run the tests", TodoStatus::Pending),
                ],
            }],
        );
        let shown = screen(&mut app, now, 60, 12).backend().to_string();
        for row in [
            "todo · 1 of 3 done · /todo hides",
            "☑ read the cart",
            "◐ fix the rounding",
            "☐ run the tests",
        ] {
            assert!(shown.contains(row), "{row:?} missing:\n{shown}");
        }
        // Hidden with /todo, until shown again.
        type_text(&mut app, "/todo", now);
        key(&mut app, KeyCode::Enter, now);
        let shown = screen(&mut app, now, 60, 12).backend().to_string();
        assert!(!shown.contains("fix the rounding"), "{shown}");
        type_text(&mut app, "/todo", now);
        key(&mut app, KeyCode::Enter, now);
        // All done: the list steps aside to one row.
        feed(
            &mut app,
            now,
            [EventKind::TodoUpdated {
                todos: vec![todo("run the tests", TodoStatus::Completed)],
            }],
        );
        let shown = screen(&mut app, now, 60, 12).backend().to_string();
        assert!(!shown.contains("run the tests"), "{shown}");
        assert!(shown.contains("todo · all 1 done"), "{shown}");
    }

    fn finished(turn: u32) -> EventKind {
        EventKind::TurnFinished {
            turn,
            outcome: TurnOutcome::Completed,
            usage: Usage {
                prompt_tokens: 5200,
                completion_tokens: 40,
                cached_tokens: 4096,
            },
            error: None,
        }
    }

    #[test]
    fn rewind_picker() {
        let now = Instant::now();
        let mut app = attached_app(now);
        feed(
            &mut app,
            now,
            [
                started("add tests for the greeting and run them all"),
                EventKind::AssistantDelta {
                    text: "Added `tests/greeting.rs`; all 4 tests pass.".to_owned(),
                },
                EventKind::CheckpointCreated {
                    turn: 3,
                    files: vec!["tests/greeting.rs".to_owned(), "Cargo.toml".to_owned()],
                },
                finished(3),
            ],
        );
        type_text(&mut app, "/rewind", now);
        key(&mut app, KeyCode::Enter, now);
        app.on_reply(
            Reply::Checkpoints(vec![
                checkpoint(1, "say hello", &[]),
                checkpoint(
                    2,
                    "change the greeting in main.rs\nand the name",
                    &["main.rs"],
                ),
                checkpoint(
                    3,
                    "add tests for the greeting and run them all",
                    &["tests/greeting.rs", "Cargo.toml", "README.md", "main.rs"],
                ),
            ]),
            now,
        );
        key(&mut app, KeyCode::Down, now);
        let terminal = screen(&mut app, now, 100, 14);
        insta::assert_snapshot!(terminal.backend());

        // Chosen: the picker waits for the daemon, then says what went wrong, as it is.
        key(&mut app, KeyCode::Enter, now);
        let shown = screen(&mut app, now, 100, 14).backend().to_string();
        assert!(shown.contains("rewinding to before prompt 2…"), "{shown}");
        app.on_reply(
            Reply::Failed {
                action: crate::daemon::Action::Rewind,
                message: "cannot restore main.rs: permission denied".to_owned(),
                code: Some(cwcode_protocol::ErrorCode::Checkpoint.code()),
            },
            now,
        );
        let shown = screen(&mut app, now, 100, 14).backend().to_string();
        assert!(
            shown.contains("cannot restore main.rs: permission denied"),
            "{shown}"
        );
        assert!(shown.contains("↑↓ choose · Enter rewinds"), "{shown}");
    }

    #[test]
    fn cache_report() {
        let now = Instant::now();
        let mut app = attached_app(now);
        let turn = |turn, prompt, cached, shared| cwcode_protocol::TurnCache {
            turn,
            requests: 2,
            prompt_tokens: prompt,
            cached_tokens: cached,
            completion_tokens: 120,
            hit_ratio: cached as f64 / prompt as f64,
            last_request_bytes: 24_310,
            last_shared_prefix_bytes: shared,
        };
        app.on_reply(
            Reply::Cache(cwcode_protocol::CacheReport {
                session_id: "0198a1b2c3d4e5f6".to_owned(),
                turns: vec![
                    turn(1, 9_800, 4_096, 20_100),
                    turn(2, 11_200, 10_880, 24_000),
                ],
                prompt_tokens: 21_000,
                cached_tokens: 14_976,
                completion_tokens: 240,
                hit_ratio: 0.713,
                first_request_bytes: 19_870,
            }),
            now,
        );
        let terminal = screen(&mut app, now, 80, 10);
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn long_input_wraps_and_the_cursor_follows() {
        let now = Instant::now();
        let mut app = attached_app(now);
        type_text(&mut app, "first line", now);
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT), now);
        type_text(
            &mut app,
            "a second line that is longer than the window",
            now,
        );
        let mut terminal = screen(&mut app, now, 30, 8);
        insta::assert_snapshot!(terminal.backend());
        // After "than the window" on the wrapped row.
        terminal.backend_mut().assert_cursor_position((18, 6));
    }

    #[test]
    fn goal_loop_banner() {
        let now = Instant::now();
        let mut app = attached_app(now);
        feed(
            &mut app,
            now,
            [
                EventKind::GoalCycleStarted { cycle: 2, cap: 20 },
                EventKind::GoalCycleFinished {
                    cycle: 2,
                    done: 2,
                    left: 3,
                },
                EventKind::GoalCycleStarted { cycle: 3, cap: 20 },
                running(),
            ],
        );
        let terminal = screen(&mut app, now, 80, 10);
        insta::assert_snapshot!(terminal.backend());
        // Stopped: the banner goes and the summary stays in the transcript.
        feed(
            &mut app,
            now,
            [EventKind::GoalLoopStopped {
                reason: "stopped by the user".to_owned(),
                summary:
                    "Goal loop stopped after 3 cycles: stopped by the user. 2 of 5 goals done."
                        .to_owned(),
                state: cwcode_protocol::GoalState::Stopped,
            }],
        );
        let shown = screen(&mut app, now, 80, 10).backend().to_string();
        assert!(!shown.contains("/goal off stops it"), "{shown}");
        assert!(
            shown.contains("Goal loop stopped after 3 cycles"),
            "{shown}"
        );
    }
}
