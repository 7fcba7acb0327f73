//! The transcript: the session's events folded into entries (prompts, reasoning, answers, tool
//! calls with their diffs, output and approvals, notes, turn summaries), and those entries
//! rendered to wrapped lines. Each entry caches its lines until it changes or the width does,
//! so a long session costs nothing per frame but the entry that is streaming.

use std::collections::HashMap;

use cwcode_protocol::event::retrying_line;
use cwcode_protocol::{ApprovalDecision, EventKind, RewindResult, TurnOutcome, Usage};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::diff::{self, Diff, DiffLine, FileViews};
use crate::format::{self, outcome_word, percent, shorten, tokens};
use crate::markdown;
use crate::wrap::{self, sanitize, wrap_line};

/// Lines of a finished tool's result shown before it is collapsed.
const RESULT_LINES: usize = 6;
/// Lines of a running tool's streamed output shown (its tail).
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Info,
    /// Something asked for and worth reading (a /cache table): not dimmed.
    Plain,
    Warn,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Approval {
    None,
    Waiting,
    Approved,
    Always,
    Denied(Option<String>),
}

#[derive(Debug, Clone)]
struct ToolEntry {
    name: String,
    arguments: String,
    diff: Option<Diff>,
    output: String,
    result: Option<(String, bool)>,
    approval: Approval,
}

#[derive(Debug, Clone)]
enum Kind {
    Prompt(String),
    Queued {
        turn: u32,
        text: String,
    },
    Reasoning {
        text: String,
        done: bool,
    },
    Answer(String),
    Tool(Box<ToolEntry>),
    Note {
        text: String,
        tone: Tone,
    },
    TurnEnd {
        turn: u32,
        outcome: TurnOutcome,
        usage: Usage,
        error: Option<String>,
    },
}

#[derive(Debug, Clone)]
struct Entry {
    kind: Kind,
    lines: Option<Vec<Line<'static>>>,
}

#[derive(Debug, Default)]
pub struct Transcript {
    entries: Vec<Entry>,
    views: FileViews,
    /// The answer and reasoning entries of the model answer now streaming.
    answer: Option<usize>,
    reasoning: Option<usize>,
    tools: HashMap<String, usize>,
    /// Approval request id → tool call id.
    requests: HashMap<String, String>,
    /// What the cached lines were rendered for.
    width: usize,
    expanded: bool,
}

impl Transcript {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn push(&mut self, kind: Kind) -> usize {
        self.entries.push(Entry { kind, lines: None });
        self.entries.len() - 1
    }

    fn touch(&mut self, index: usize) -> Option<&mut Kind> {
        let entry = self.entries.get_mut(index)?;
        entry.lines = None;
        Some(&mut entry.kind)
    }

    pub fn note(&mut self, text: impl Into<String>, tone: Tone) {
        self.push(Kind::Note {
            text: text.into(),
            tone,
        });
    }

    /// Ends the model answer being streamed: its reasoning collapses.
    fn end_answer(&mut self) {
        if let Some(index) = self.reasoning.take()
            && let Some(Kind::Reasoning { done, .. }) = self.touch(index)
        {
            *done = true;
        }
        self.answer = None;
    }

    fn tool(&mut self, call_id: &str) -> Option<&mut ToolEntry> {
        let index = *self.tools.get(call_id)?;
        match self.touch(index)? {
            Kind::Tool(tool) => Some(tool),
            _ => None,
        }
    }

    pub fn apply(&mut self, event: &EventKind) {
        match event {
            EventKind::PromptQueued { turn, prompt } => {
                self.push(Kind::Queued {
                    turn: *turn,
                    text: prompt.clone(),
                });
            }
            EventKind::TurnStarted { turn, prompt } => {
                self.end_answer();
                // A queued prompt moves to where its turn starts.
                if let Some(index) = self.entries.iter().position(
                    |entry| matches!(entry.kind, Kind::Queued { turn: t, .. } if t == *turn),
                ) {
                    self.remove(index);
                }
                self.push(Kind::Prompt(prompt.clone()));
            }
            EventKind::ReasoningDelta { text } => match self.reasoning {
                Some(index) => {
                    if let Some(Kind::Reasoning { text: all, .. }) = self.touch(index) {
                        all.push_str(text);
                    }
                }
                None => {
                    self.reasoning = Some(self.push(Kind::Reasoning {
                        text: text.clone(),
                        done: false,
                    }));
                }
            },
            EventKind::AssistantDelta { text } => {
                // The answer has begun: the thinking before it is over.
                if let Some(index) = self.reasoning
                    && let Some(Kind::Reasoning { done, .. }) = self.touch(index)
                {
                    *done = true;
                }
                match self.answer {
                    Some(index) => {
                        if let Some(Kind::Answer(all)) = self.touch(index) {
                            all.push_str(text);
                        }
                    }
                    None => self.answer = Some(self.push(Kind::Answer(text.clone()))),
                }
            }
            EventKind::AssistantMessage {
                content, reasoning, ..
            } => {
                // Deltas normally brought the text already; a daemon that sent none still shows it.
                if self.reasoning.is_none()
                    && let Some(reasoning) = reasoning.as_ref().filter(|r| !r.trim().is_empty())
                {
                    self.push(Kind::Reasoning {
                        text: reasoning.clone(),
                        done: true,
                    });
                }
                if self.answer.is_none() && !content.trim().is_empty() {
                    self.push(Kind::Answer(content.clone()));
                }
                self.end_answer();
            }
            EventKind::StreamRestarted { reason } => {
                // What streamed since the last complete answer is void; the retry streams anew.
                let mut void: Vec<usize> = self.answer.into_iter().chain(self.reasoning).collect();
                void.sort_unstable();
                for index in void.into_iter().rev() {
                    self.remove(index);
                }
                self.answer = None;
                self.reasoning = None;
                self.note(
                    format!("the provider connection broke ({reason}); retrying"),
                    Tone::Warn,
                );
            }
            EventKind::ProviderRetrying {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            } => self.note(
                retrying_line(*attempt, *max_attempts, *delay_ms, reason),
                Tone::Warn,
            ),
            EventKind::ToolCallStarted {
                call_id,
                name,
                arguments,
            } => {
                self.end_answer();
                self.start_tool(call_id, name, arguments);
            }
            EventKind::ToolOutputDelta { call_id, text } => {
                if let Some(tool) = self.tool(call_id) {
                    tool.output.push_str(text);
                }
            }
            EventKind::ToolCallFinished {
                call_id,
                name,
                output,
                is_error,
            } => {
                if !self.tools.contains_key(call_id) {
                    self.start_tool(call_id, name, "");
                }
                let mut arguments = String::new();
                if let Some(tool) = self.tool(call_id) {
                    tool.result = Some((output.clone(), *is_error));
                    if tool.approval == Approval::Waiting {
                        tool.approval = Approval::None;
                    }
                    arguments = tool.arguments.clone();
                }
                self.views.learn(name, &arguments, output, *is_error);
            }
            EventKind::ApprovalRequested {
                request_id,
                call_id,
                tool,
                arguments,
            } => {
                if !self.tools.contains_key(call_id) {
                    self.start_tool(call_id, tool, arguments);
                }
                self.requests.insert(request_id.clone(), call_id.clone());
                if let Some(tool) = self.tool(call_id) {
                    tool.approval = Approval::Waiting;
                }
            }
            EventKind::ApprovalResolved {
                request_id,
                decision,
                reason,
            } => {
                let Some(call_id) = self.requests.remove(request_id) else {
                    return;
                };
                if let Some(tool) = self.tool(&call_id) {
                    tool.approval = match decision {
                        ApprovalDecision::Approve => Approval::Approved,
                        ApprovalDecision::Always => Approval::Always,
                        ApprovalDecision::Deny => Approval::Denied(reason.clone()),
                    };
                }
            }
            EventKind::ModeChanged { mode } => self.note(
                format!(
                    "mode is now {mode}: {}",
                    format::mode_meaning(*mode)
                ),
                Tone::Info,
            ),
            EventKind::Compacted {
                kept_messages,
                tokens_before,
                tokens_after,
                ..
            } => self.note(
                format!(
                    "older turns were summarised to fit the context: {} → {} tokens, the last {kept_messages} messages kept",
                    tokens(*tokens_before),
                    tokens(*tokens_after)
                ),
                Tone::Info,
            ),
            EventKind::CheckpointCreated { turn, files } => self.note(
                format!(
                    "checkpoint of prompt {turn}: {} · /rewind {turn} puts it back",
                    format::files(files, usize::MAX)
                ),
                Tone::Info,
            ),
            EventKind::Rewound { result } => {
                self.note(
                    format!(
                        "rewound to before prompt {}: {} · /rewind undo reverts it",
                        result.turn,
                        format::rewind_effect(result)
                    ),
                    Tone::Warn,
                );
                self.rewind_failures(result);
            }
            EventKind::RewindUndone { result } => {
                self.note(
                    format!(
                        "undid the rewind to before prompt {}: {}",
                        result.turn,
                        format::rewind_effect(result)
                    ),
                    Tone::Warn,
                );
                self.rewind_failures(result);
            }
            EventKind::GoalCycleStarted { cycle, cap } => self.note(
                format!("goal loop: cycle {cycle} of at most {cap} starts on the open goals"),
                Tone::Info,
            ),
            EventKind::GoalCycleFinished { cycle, done, left } => self.note(
                format!(
                    "goal loop: cycle {cycle} ended · {done} of {} goals done",
                    done + left
                ),
                Tone::Info,
            ),
            // The summary says why it stopped and what is left: worth reading, not dimmed.
            EventKind::GoalLoopStopped {
                reason, summary, ..
            } => self.note(
                if summary.trim().is_empty() {
                    format!("goal loop stopped: {reason}")
                } else {
                    summary.trim_end().to_owned()
                },
                Tone::Warn,
            ),
            EventKind::Error { message } => self.note(message.clone(), Tone::Error),
            EventKind::StormBroken { tool, .. } => self.note(
                format!("the storm-breaker stopped a loop of failing {tool} calls"),
                Tone::Warn,
            ),
            EventKind::TurnFinished {
                turn,
                outcome,
                usage,
                error,
            } => {
                self.end_answer();
                // A turn that ends withdraws the approvals it was waiting for.
                for call_id in std::mem::take(&mut self.requests).into_values() {
                    if let Some(tool) = self.tool(&call_id)
                        && tool.approval == Approval::Waiting
                    {
                        tool.approval = Approval::None;
                    }
                }
                self.push(Kind::TurnEnd {
                    turn: *turn,
                    outcome: *outcome,
                    usage: *usage,
                    error: error.clone(),
                });
            }
            _ => {}
        }
    }

    fn rewind_failures(&mut self, result: &RewindResult) {
        if !result.failed.is_empty() {
            self.note(
                format!("could not put back: {}", result.failed.join("; ")),
                Tone::Error,
            );
        }
    }

    fn start_tool(&mut self, call_id: &str, name: &str, arguments: &str) {
        let diff = diff::for_call(name, arguments, &self.views);
        let index = self.push(Kind::Tool(Box::new(ToolEntry {
            name: name.to_owned(),
            arguments: arguments.to_owned(),
            diff,
            output: String::new(),
            result: None,
            approval: Approval::None,
        })));
        self.tools.insert(call_id.to_owned(), index);
    }

    /// Removes an entry, keeping the indexes that point past it right.
    fn remove(&mut self, index: usize) {
        self.entries.remove(index);
        let shift = |slot: &mut Option<usize>| {
            *slot = match *slot {
                Some(i) if i == index => None,
                Some(i) if i > index => Some(i - 1),
                other => other,
            }
        };
        shift(&mut self.answer);
        shift(&mut self.reasoning);
        self.tools.retain(|_, i| *i != index);
        for i in self.tools.values_mut() {
            if *i > index {
                *i -= 1;
            }
        }
    }

    /// Renders what is stale and returns the total number of rows.
    pub fn layout(&mut self, width: usize, expanded: bool) -> usize {
        if width != self.width || expanded != self.expanded {
            self.width = width;
            self.expanded = expanded;
            for entry in &mut self.entries {
                entry.lines = None;
            }
        }
        let mut total = 0;
        for index in 0..self.entries.len() {
            if self.entries[index].lines.is_none() {
                let previous = index.checked_sub(1).map(|i| &self.entries[i].kind);
                let lines = render(&self.entries[index].kind, previous, width, expanded);
                self.entries[index].lines = Some(lines);
            }
            total += self.entries[index].lines.as_ref().map_or(0, Vec::len);
        }
        total
    }

    /// The rows from `top`, at most `height` of them, as laid out by the last [`Self::layout`].
    pub fn rows(&self, top: usize, height: usize) -> Vec<Line<'static>> {
        let mut out = Vec::with_capacity(height);
        let mut skip = top;
        for entry in &self.entries {
            let Some(lines) = &entry.lines else { continue };
            if skip >= lines.len() {
                skip -= lines.len();
                continue;
            }
            for line in &lines[skip..] {
                if out.len() == height {
                    return out;
                }
                out.push(line.clone());
            }
            skip = 0;
        }
        out
    }
}

fn render(
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
            for (index, line) in text.trim_end().split('\n').enumerate() {
                let marker = if index == 0 { "› " } else { "  " };
                let line = Line::from(vec![
                    Span::styled(
                        marker,
                        Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
                    ),
                    Span::styled(line.to_owned(), bold),
                ]);
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
        Approval::Always => body.push(Line::styled(
            "approved; this tool no longer asks in this session",
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
                Line::styled(format!("{}+ {}", number(n), sanitize(text)), ADDED)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(transcript: &mut Transcript, width: usize, expanded: bool) -> Vec<String> {
        let total = transcript.layout(width, expanded);
        transcript
            .rows(0, total)
            .iter()
            .map(|line| line.to_string().trim_end().to_owned())
            .collect()
    }

    fn delta(text: &str) -> EventKind {
        EventKind::AssistantDelta {
            text: text.to_owned(),
        }
    }

    #[test]
    fn streamed_answers_and_reasoning_fold_into_entries() {
        let mut transcript = Transcript::default();
        transcript.apply(&EventKind::TurnStarted {
            turn: 1,
            prompt: "hi".into(),
        });
        transcript.apply(&EventKind::ReasoningDelta {
            text: "thinking\nmore".into(),
        });
        assert_eq!(
            texts(&mut transcript, 40, false),
            ["› hi", "✻ thinking", "  more"]
        );
        transcript.apply(&delta("Hello "));
        transcript.apply(&delta("there"));
        assert_eq!(
            texts(&mut transcript, 40, false),
            [
                "› hi",
                "✻ thought for 2 lines · ctrl+o to show",
                "",
                "Hello there"
            ]
        );
        assert_eq!(
            texts(&mut transcript, 40, true)[1..3],
            ["✻ thinking".to_owned(), "  more".to_owned()]
        );
    }

    #[test]
    fn a_complete_message_without_deltas_still_shows() {
        let mut transcript = Transcript::default();
        transcript.apply(&EventKind::AssistantMessage {
            content: "whole".into(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: None,
            stats: None,
        });
        assert_eq!(texts(&mut transcript, 40, false), ["whole"]);
        // With deltas, the message adds nothing.
        transcript.apply(&delta("streamed"));
        transcript.apply(&EventKind::AssistantMessage {
            content: "streamed".into(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: None,
            stats: None,
        });
        assert_eq!(texts(&mut transcript, 40, false), ["whole", "", "streamed"]);
    }

    #[test]
    fn a_restarted_stream_drops_the_partial_answer() {
        let mut transcript = Transcript::default();
        transcript.apply(&delta("half an ans"));
        transcript.apply(&EventKind::StreamRestarted {
            reason: "connection reset".into(),
        });
        transcript.apply(&delta("whole answer"));
        assert_eq!(
            texts(&mut transcript, 80, false),
            [
                "· the provider connection broke (connection reset); retrying",
                "",
                "whole answer"
            ]
        );
    }

    #[test]
    fn a_retry_is_shown_with_its_wait_reason_and_count() {
        let mut transcript = Transcript::default();
        transcript.apply(&EventKind::ProviderRetrying {
            attempt: 2,
            max_attempts: 5,
            delay_ms: 4000,
            reason: "the provider sent nothing for 60 s".into(),
        });
        assert_eq!(
            texts(&mut transcript, 80, false),
            ["· retrying in 4 s: the provider sent nothing for 60 s (attempt 2 of 5)"]
        );
    }

    #[test]
    fn long_tool_output_is_collapsed_until_expanded() {
        let mut transcript = Transcript::default();
        transcript.apply(&EventKind::ToolCallStarted {
            call_id: "c".into(),
            name: "bash".into(),
            arguments: r#"{"command":"seq 10"}"#.into(),
        });
        for n in 1..=10 {
            transcript.apply(&EventKind::ToolOutputDelta {
                call_id: "c".into(),
                text: format!("{n}\n"),
            });
        }
        assert_eq!(
            texts(&mut transcript, 40, false),
            [
                "○ bash seq 10",
                "  ⎿ … 5 lines above",
                "    6",
                "    7",
                "    8",
                "    9",
                "    10"
            ]
        );
        transcript.apply(&EventKind::ToolCallFinished {
            call_id: "c".into(),
            name: "bash".into(),
            output: (1..=10).map(|n| format!("{n}\n")).collect(),
            is_error: false,
        });
        let collapsed = texts(&mut transcript, 40, false);
        assert_eq!(collapsed.len(), 1 + RESULT_LINES + 1);
        assert_eq!(collapsed.last().unwrap(), "    … +4 lines · ctrl+o to show");
        assert_eq!(texts(&mut transcript, 40, true).len(), 1 + 1 + 10);
    }

    #[test]
    fn a_queued_prompt_moves_to_where_its_turn_starts() {
        let mut transcript = Transcript::default();
        transcript.apply(&EventKind::TurnStarted {
            turn: 1,
            prompt: "first".into(),
        });
        transcript.apply(&EventKind::PromptQueued {
            turn: 2,
            prompt: "second".into(),
        });
        transcript.apply(&delta("answer one"));
        assert_eq!(
            texts(&mut transcript, 40, false),
            ["› first", "⋯ queued as turn 2: second", "", "answer one"]
        );
        transcript.apply(&EventKind::TurnStarted {
            turn: 2,
            prompt: "second".into(),
        });
        assert_eq!(
            texts(&mut transcript, 40, false),
            ["› first", "", "answer one", "", "› second"]
        );
    }

    #[test]
    fn a_command_waiting_for_approval_is_shown_whole() {
        let mut transcript = Transcript::default();
        let arguments = serde_json::json!({"command": "cargo build &&\ncargo test"}).to_string();
        transcript.apply(&EventKind::ToolCallStarted {
            call_id: "c".into(),
            name: "bash".into(),
            arguments: arguments.clone(),
        });
        transcript.apply(&EventKind::ApprovalRequested {
            request_id: "r".into(),
            call_id: "c".into(),
            tool: "bash".into(),
            arguments,
        });
        assert_eq!(
            texts(&mut transcript, 60, false),
            [
                "? bash cargo build && … (+1 lines)",
                "  ⎿ command: cargo build &&",
                "      cargo test",
                "    waiting for your approval"
            ]
        );
    }

    #[test]
    fn compaction_and_errors_outside_a_turn_are_said() {
        let mut transcript = Transcript::default();
        transcript.apply(&EventKind::Compacted {
            summary: "the user wants…".into(),
            kept_messages: 6,
            tokens_before: 120_000,
            tokens_after: 9_000,
        });
        transcript.apply(&EventKind::Error {
            message: "compaction failed: the provider timed out".into(),
        });
        assert_eq!(
            texts(&mut transcript, 100, false),
            [
                "· older turns were summarised to fit the context: 120k → 9.0k tokens, the last 6 messages kept",
                "· compaction failed: the provider timed out"
            ]
        );
    }

    #[test]
    fn checkpoints_and_rewinds_are_a_line_each() {
        let mut transcript = Transcript::default();
        transcript.apply(&EventKind::CheckpointCreated {
            turn: 2,
            files: vec!["main.rs".into()],
        });
        let result = RewindResult {
            turn: 2,
            prompt: "change the greeting".into(),
            restored: vec!["main.rs".into()],
            removed: vec!["new.txt".into()],
            failed: vec!["locked.txt: permission denied".into()],
        };
        transcript.apply(&EventKind::Rewound {
            result: result.clone(),
        });
        transcript.apply(&EventKind::RewindUndone {
            result: RewindResult {
                failed: Vec::new(),
                ..result
            },
        });
        assert_eq!(
            texts(&mut transcript, 200, false),
            [
                "· checkpoint of prompt 2: main.rs · /rewind 2 puts it back",
                "· rewound to before prompt 2: restored main.rs; removed new.txt · /rewind undo reverts it",
                "· could not put back: locked.txt: permission denied",
                "· undid the rewind to before prompt 2: restored main.rs; removed new.txt",
            ]
        );
    }

    #[test]
    fn the_goal_loop_says_each_cycle_and_how_it_ended() {
        let mut transcript = Transcript::default();
        transcript.apply(&EventKind::GoalCycleStarted { cycle: 2, cap: 20 });
        transcript.apply(&EventKind::GoalCycleFinished {
            cycle: 2,
            done: 3,
            left: 2,
        });
        transcript.apply(&EventKind::GoalLoopStopped {
            reason: "the cap of 2 cycles was reached".into(),
            summary: "Goal loop stopped after 2 cycles: the cap of 2 cycles was reached. 3 of 5 goals done.".into(),
            state: cwcode_protocol::GoalState::Capped,
        });
        transcript.apply(&EventKind::GoalLoopStopped {
            reason: "stopped by the user".into(),
            summary: String::new(),
            state: cwcode_protocol::GoalState::Stopped,
        });
        assert_eq!(
            texts(&mut transcript, 200, false),
            [
                "· goal loop: cycle 2 of at most 20 starts on the open goals",
                "· goal loop: cycle 2 ended · 3 of 5 goals done",
                "· Goal loop stopped after 2 cycles: the cap of 2 cycles was reached. 3 of 5 goals done.",
                "· goal loop stopped: stopped by the user",
            ]
        );
    }
}
