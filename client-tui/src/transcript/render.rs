//! Entries into wrapped, styled lines.

use cwcode_protocol::TurnOutcome;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::{Approval, Kind, Tone, ToolEntry};
use crate::diff::{self, Diff, DiffLine};
use crate::format::{outcome_word, percent, shorten, tokens};
use crate::highlight;
use crate::markdown;
use crate::wrap::{self, sanitize, wrap_line};

/// Lines of a finished tool's result shown before it is collapsed.
pub(super) const RESULT_LINES: usize = 6;
/// Lines of a running tool's streamed output shown (its tail).
/// The lines of a prompt shown before the rest is folded.
const PROMPT_LINES: usize = 12;
const STREAM_TAIL: usize = 5;
/// Lines of reasoning shown while it streams (its tail).
const REASONING_TAIL: usize = 4;
/// Diff lines shown collapsed, and while an approval waits (the user must see what to approve).
const DIFF_LINES: usize = 16;
const DIFF_LINES_AWAITING: usize = 60;

const DIM: Style = Style::new().fg(Color::DarkGray);
const REASONING: Style = Style::new()
    .fg(Color::DarkGray)
    .add_modifier(Modifier::ITALIC);
const ADDED: Style = Style::new().fg(Color::Green);
const REMOVED: Style = Style::new().fg(Color::Red);
const WARN: Style = Style::new().fg(Color::Yellow);
const ERROR: Style = Style::new().fg(Color::Red);

pub(super) fn render(
    kind: &Kind,
    previous: Option<&Kind>,
    width: usize,
    expanded: bool,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    // Air before each exchange and each answer; tools and their notes stay together.
    let gap = previous.is_some()
        && match kind {
            Kind::Prompt(_) | Kind::Answer(_) => true,
            Kind::Note { .. } => !matches!(previous, Some(Kind::Note { .. })),
            Kind::Reasoning { .. } => !matches!(previous, Some(Kind::Prompt(_))),
            Kind::Tool(_) => !matches!(previous, Some(Kind::Tool(_))),
            Kind::Queued { .. } | Kind::TurnEnd { .. } => false,
        };
    if gap {
        out.push(Line::default());
    }
    match kind {
        Kind::Prompt(text) => {
            let text = sanitize(text);
            let bold = Style::new().add_modifier(Modifier::BOLD);
            let lines: Vec<&str> = text.trim_end().split('\n').collect();
            // An attached file or a command's output makes a long prompt: its head is enough.
            let shown = if expanded {
                lines.len()
            } else {
                lines.len().min(PROMPT_LINES)
            };
            for (index, line) in lines.iter().take(shown).enumerate() {
                let marker = if index == 0 { "› " } else { "  " };
                let line = Line::from(vec![
                    Span::styled(
                        marker,
                        Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
                    ),
                    Span::styled((*line).to_owned(), bold),
                ]);
                out.extend(wrap_line(line, width, 2));
            }
            if shown < lines.len() {
                let line = Line::styled(
                    format!("  … +{} lines · ctrl+o to show", lines.len() - shown),
                    DIM,
                );
                out.extend(wrap_line(line, width, 2));
            }
        }
        Kind::Queued { turn, text } => {
            let first = sanitize(text).lines().next().unwrap_or_default().to_owned();
            let line = Line::styled(format!("⋯ queued as turn {turn}: {first}"), DIM);
            out.extend(wrap_line(line, width, 2));
        }
        Kind::Reasoning { text, done } => {
            let text = sanitize(text);
            let lines: Vec<&str> = text.trim().lines().collect();
            if *done && !expanded {
                let line = Line::styled(
                    format!("✻ thought for {} lines · ctrl+o to show", lines.len()),
                    REASONING,
                );
                out.extend(wrap_line(line, width, 2));
            } else {
                let shown = if *done || expanded {
                    &lines[..]
                } else {
                    &lines[lines.len().saturating_sub(REASONING_TAIL)..]
                };
                for (index, line) in shown.iter().enumerate() {
                    let marker = if index == 0 { "✻ " } else { "  " };
                    let line = Line::styled(format!("{marker}{line}"), REASONING);
                    out.extend(wrap_line(line, width, 2));
                }
            }
        }
        Kind::Answer(text) => out.extend(markdown::render(text, width)),
        Kind::Tool(tool) => render_tool(tool, width, expanded, &mut out),
        Kind::Note { text, tone } => {
            let style = match tone {
                Tone::Info => DIM,
                Tone::Plain => Style::new(),
                Tone::Warn => WARN,
                Tone::Error => ERROR,
            };
            for (index, line) in sanitize(text).split('\n').enumerate() {
                let marker = if index == 0 { "· " } else { "  " };
                let line = Line::styled(format!("{marker}{line}"), style);
                out.extend(wrap_line(line, width, 2));
            }
        }
        Kind::TurnEnd {
            turn,
            outcome,
            usage,
            error,
        } => {
            let (mark, style) = match outcome {
                TurnOutcome::Completed => ("✓", DIM),
                TurnOutcome::Cancelled => ("■", WARN),
                _ => ("✗", ERROR),
            };
            let mut text = format!("{mark} turn {turn} {}", outcome_word(*outcome));
            if usage.prompt_tokens > 0 {
                text.push_str(&format!(
                    " · {} in, {} cached · {} out",
                    tokens(usage.prompt_tokens),
                    percent(usage.cached_tokens, usage.prompt_tokens),
                    tokens(usage.completion_tokens)
                ));
            }
            out.extend(wrap_line(Line::styled(text, style), width, 2));
            if let Some(error) = error {
                let line = Line::styled(format!("  {}", sanitize(error)), ERROR);
                out.extend(wrap_line(line, width, 2));
            }
        }
    }
    out
}

fn render_tool(tool: &ToolEntry, width: usize, expanded: bool, out: &mut Vec<Line<'static>>) {
    let (bullet, bullet_style) = match (&tool.result, &tool.approval) {
        (Some((_, true)), _) | (None, Approval::Denied(_)) => ("●", ERROR),
        (Some(_), _) => ("●", ADDED),
        (None, Approval::Waiting) => ("?", WARN),
        (None, _) => ("○", WARN),
    };
    let mut header = vec![
        Span::styled(format!("{bullet} "), bullet_style),
        Span::styled(tool.name.clone(), Style::new().add_modifier(Modifier::BOLD)),
    ];
    let room = width.saturating_sub(wrap::width(&tool.name) + 3).max(10);
    match &tool.diff {
        Some(diff) => {
            let path = arg_path(&tool.arguments).unwrap_or_default();
            header.push(Span::raw(format!(" {path} ")));
            header.push(Span::styled(format!("+{}", diff.added), ADDED));
            header.push(Span::raw(" "));
            header.push(Span::styled(format!("-{}", diff.removed), REMOVED));
        }
        None => {
            let summary = inline_arguments(&tool.arguments, room);
            if !summary.is_empty() {
                header.push(Span::raw(format!(" {summary}")));
            }
        }
    }
    // A call waiting for approval shows all of what it would do; others only when expanded.
    let waiting = tool.approval == Approval::Waiting;
    let show_arguments = tool.diff.is_none()
        && !tool.arguments.is_empty()
        && (expanded || (waiting && !fits_one_line(&tool.arguments, room)));
    out.extend(wrap_line(Line::from(header), width, 2));

    let mut body: Vec<Line<'static>> = Vec::new();
    if let Some(diff) = &tool.diff {
        let limit = if expanded {
            usize::MAX
        } else if waiting {
            DIFF_LINES_AWAITING
        } else {
            DIFF_LINES
        };
        body.extend(diff_lines(diff, limit));
    } else if show_arguments {
        for (key, value) in arguments(&tool.arguments) {
            let text = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
            for (index, line) in sanitize(&text).split('\n').enumerate() {
                let lead = if index == 0 {
                    format!("{key}: ")
                } else {
                    "  ".to_owned()
                };
                body.push(Line::styled(format!("{lead}{line}"), DIM));
            }
        }
    }
    match &tool.approval {
        Approval::Waiting => body.push(Line::styled("waiting for your approval", WARN)),
        Approval::Always(None) => body.push(Line::styled(
            "approved; this tool no longer asks in this session",
            DIM,
        )),
        Approval::Always(Some(pattern)) => body.push(Line::styled(
            format!(
                "approved; `{}` no longer asks in this session",
                sanitize(pattern)
            ),
            DIM,
        )),
        Approval::Denied(Some(reason)) => {
            body.push(Line::styled(format!("denied: {}", sanitize(reason)), ERROR));
        }
        Approval::Denied(None) => body.push(Line::styled("denied", ERROR)),
        Approval::Approved | Approval::None => {}
    }
    match &tool.result {
        Some((output, is_error)) => {
            let style = if *is_error { ERROR } else { DIM };
            let lines = result_lines(&tool.name, &sanitize(output), *is_error, expanded);
            // An edit's diff says what changed; its report would only repeat it.
            let limit = if expanded {
                usize::MAX
            } else if tool.diff.is_some() && !is_error {
                1
            } else {
                RESULT_LINES
            };
            body.extend(collapsed(&lines, limit, style));
        }
        None if !tool.output.is_empty() => {
            let output = sanitize(&tool.output);
            let lines: Vec<&str> = output.trim_end().lines().collect();
            let tail = if expanded {
                0
            } else {
                lines.len().saturating_sub(STREAM_TAIL)
            };
            if tail > 0 {
                body.push(Line::styled(format!("… {tail} lines above"), DIM));
            }
            body.extend(
                lines[tail..]
                    .iter()
                    .map(|line| Line::styled(line.to_string(), DIM)),
            );
        }
        None => {}
    }
    for (index, line) in body.into_iter().enumerate() {
        let lead = if index == 0 { "  ⎿ " } else { "    " };
        let mut spans = vec![Span::styled(lead, DIM)];
        spans.extend(
            line.spans
                .into_iter()
                .map(|span| span.patch_style(line.style)),
        );
        out.extend(wrap_line(Line::from(spans), width, 4));
    }
}

/// A tool's result as shown: `N:HASH|` anchors (there for the model) become plain line
/// numbers, a file read is summed up until expanded, and an edit's report loses the lines it
/// echoes back (the diff shows them).
fn result_lines(tool: &str, output: &str, is_error: bool, expanded: bool) -> Vec<String> {
    let lines = output.trim_end().lines();
    if is_error {
        return lines.map(str::to_owned).collect();
    }
    match tool {
        "read_file" if !expanded => {
            let (anchored, notes): (Vec<&str>, Vec<&str>) =
                lines.partition(|line| diff::parse_anchored(line).is_some());
            let mut out = Vec::with_capacity(notes.len() + 1);
            if !anchored.is_empty() {
                out.push(format!("{} lines · ctrl+o to show", anchored.len()));
            }
            out.extend(notes.into_iter().map(str::to_owned));
            out
        }
        "edit_lines" if !expanded => {
            let report = output
                .split(" Those lines now read:")
                .next()
                .unwrap_or_default();
            vec![report.trim().to_owned()]
        }
        _ => lines
            .map(|line| match diff::parse_anchored(line) {
                Some((number, content)) => format!("{number:>4} {content}"),
                None => line.to_owned(),
            })
            .collect(),
    }
}

/// The first `limit` lines, and a count of the rest.
fn collapsed(lines: &[String], limit: usize, style: Style) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = lines
        .iter()
        .take(limit)
        .map(|line| Line::styled(line.clone(), style))
        .collect();
    if lines.len() > limit {
        out.push(Line::styled(
            format!("… +{} lines · ctrl+o to show", lines.len() - limit),
            DIM,
        ));
    }
    out
}

/// A diff's new line after its gutter, coloured as its file's language: the green `+` gutter
/// says it is new, the colours say what it is (removed lines stay red, context dim). Without a
/// known language it keeps the gutter's colour.
fn coloured_line(gutter: Span<'static>, text: &str, path: &str, plain: Style) -> Line<'static> {
    let mut spans = vec![gutter];
    match highlight::file_line(text, path) {
        Some(pieces) => spans.extend(
            pieces
                .into_iter()
                .map(|(style, piece)| Span::styled(piece, style)),
        ),
        None => spans.push(Span::styled(text.to_owned(), plain)),
    }
    Line::from(spans)
}

fn diff_lines(diff: &Diff, limit: usize) -> Vec<Line<'static>> {
    let number_width = diff
        .lines
        .iter()
        .filter_map(|line| match line {
            DiffLine::Context(n, _) | DiffLine::Removed(n, _) | DiffLine::Added(n, _) => *n,
            _ => None,
        })
        .max()
        .map_or(0, |n| n.to_string().len());
    let number = |n: &Option<usize>| match n {
        Some(n) => format!("{n:>number_width$} "),
        None if number_width > 0 => " ".repeat(number_width + 1),
        None => String::new(),
    };
    let mut out: Vec<Line<'static>> = diff
        .lines
        .iter()
        .take(limit)
        .map(|line| match line {
            DiffLine::Context(n, text) => {
                Line::styled(format!("{}  {}", number(n), sanitize(text)), DIM)
            }
            DiffLine::Removed(n, text) => {
                Line::styled(format!("{}- {}", number(n), sanitize(text)), REMOVED)
            }
            DiffLine::Added(n, text) => {
                let gutter = Span::styled(format!("{}+ ", number(n)), ADDED);
                coloured_line(gutter, &sanitize(text), &diff.path, ADDED)
            }
            DiffLine::Gap => Line::styled("⋯", DIM),
            DiffLine::Note(text) => Line::styled(text.clone(), REASONING),
        })
        .collect();
    if diff.lines.len() > limit {
        out.push(Line::styled(
            format!(
                "… +{} diff lines · ctrl+o to show",
                diff.lines.len() - limit
            ),
            DIM,
        ));
    }
    out
}

fn arguments(arguments: &str) -> Vec<(String, Value)> {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => map.into_iter().collect(),
        Ok(other) => vec![("arguments".to_owned(), other)],
        Err(_) => vec![("arguments".to_owned(), Value::String(arguments.to_owned()))],
    }
}

fn arg_path(arguments: &str) -> Option<String> {
    let value: Value = serde_json::from_str(arguments).ok()?;
    value["path"].as_str().map(str::to_owned)
}

/// Whether the one-line summary of the arguments shows them whole.
fn fits_one_line(arguments: &str, room: usize) -> bool {
    let whole = inline_arguments(arguments, usize::MAX);
    let multi_line = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => map
            .values()
            .any(|value| value.as_str().is_some_and(|text| text.contains('\n'))),
        _ => arguments.contains('\n'),
    };
    !multi_line && whole.chars().count() <= room
}

/// Tool arguments on one line: a lone string argument as itself (`bash cargo test`), otherwise
/// `key=value` pairs, cut to `max_chars`.
pub fn inline_arguments(arguments: &str, max_chars: usize) -> String {
    let text = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => {
            let mut values = map.values();
            match (values.next(), values.next()) {
                (Some(Value::String(only)), None) => one_line(only),
                _ => map
                    .iter()
                    .map(|(key, value)| format!("{key}={}", inline_value(value)))
                    .collect::<Vec<_>>()
                    .join(" "),
            }
        }
        Ok(other) => other.to_string(),
        Err(_) => one_line(arguments),
    };
    shorten(&sanitize(&text), max_chars)
}

fn inline_value(value: &Value) -> String {
    match value {
        Value::String(text) if !text.is_empty() && !text.contains(char::is_whitespace) => {
            text.clone()
        }
        Value::String(text) if !text.contains('\n') => Value::String(text.clone()).to_string(),
        Value::String(text) => format!("<{} lines>", text.lines().count()),
        other => other.to_string(),
    }
}

/// The first line, with a marker when more follow.
fn one_line(text: &str) -> String {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    match lines.count() {
        0 => first.to_owned(),
        more => format!("{first} … (+{more} lines)"),
    }
}
