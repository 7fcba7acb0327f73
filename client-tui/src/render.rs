//! Session events and metadata turned into text. Everything here is a pure function returning a
//! `String` (or an [`Output`] saying where the text goes), so it is tested without a terminal; the
//! [`crate::screen`] module decides how the pieces meet on screen.

use std::fmt::Write as _;

use cwcode_protocol::{
    ApprovalDecision, EventKind, Mode, SessionInfo, SessionStatus, TurnOutcome, Usage,
};
use serde_json::Value;

/// Tool arguments and results are cut to this many characters on one-line summaries.
const SUMMARY_CHARS: usize = 160;
/// Lines of one argument shown in an approval request; enough to judge a typical edit, while a
/// whole generated file would push the question off the screen.
const APPROVAL_VALUE_LINES: usize = 40;

/// ANSI styling, off when stdout is not a terminal or `NO_COLOR` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
}

impl Style {
    #[cfg(test)]
    pub const PLAIN: Style = Style { color: false };

    fn wrap(self, code: &str, text: &str) -> String {
        if self.color && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub fn dim(self, text: &str) -> String {
        self.wrap("2", text)
    }

    pub fn bold(self, text: &str) -> String {
        self.wrap("1", text)
    }

    pub fn red(self, text: &str) -> String {
        self.wrap("31", text)
    }

    pub fn green(self, text: &str) -> String {
        self.wrap("32", text)
    }

    pub fn yellow(self, text: &str) -> String {
        self.wrap("33", text)
    }
}

/// Which stream a piece of streamed text belongs to. A change of stream starts a new line, so
/// reasoning, the answer and a tool's output never run into each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Answer,
    Reasoning,
    ToolOutput,
}

/// What one event looks like on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Streamed text, appended where the cursor is.
    Inline(Stream, String),
    /// One or more whole lines, started on a fresh line (no trailing newline).
    Block(String),
    /// Nothing to show, but a streamed answer ends here.
    EndLine,
    Nothing,
}

/// Renders one event. `own_prompt` is true for the prompt events of a turn this client sent:
/// the user just typed that text, so it is not echoed back.
pub fn event(kind: &EventKind, own_prompt: bool, style: Style) -> Output {
    match kind {
        EventKind::AssistantDelta { text } => Output::Inline(Stream::Answer, text.clone()),
        EventKind::ReasoningDelta { text } => Output::Inline(Stream::Reasoning, style.dim(text)),
        EventKind::ToolOutputDelta { text, .. } => {
            Output::Inline(Stream::ToolOutput, style.dim(text))
        }
        EventKind::AssistantMessage { .. } => Output::EndLine,
        EventKind::PromptQueued { turn, prompt } => Output::Block(if own_prompt {
            style.dim(&format!("· queued as turn {turn}, after the running one"))
        } else {
            style.dim(&format!(
                "· turn {turn} queued: {}",
                shorten(first_line(prompt), SUMMARY_CHARS)
            ))
        }),
        EventKind::TurnStarted { prompt, .. } => {
            if own_prompt {
                Output::Nothing
            } else {
                Output::Block(style.bold(&user_prompt(prompt)))
            }
        }
        EventKind::ToolCallStarted {
            name, arguments, ..
        } => Output::Block(format!(
            "{} {}",
            style.yellow(&format!("▶ {name}")),
            inline_arguments(arguments, SUMMARY_CHARS)
        )),
        EventKind::ToolCallFinished {
            name,
            output,
            is_error,
            ..
        } => Output::Block(tool_finished(name, output, *is_error, style)),
        EventKind::ApprovalRequested {
            tool, arguments, ..
        } => Output::Block(approval_details(tool, arguments, style)),
        EventKind::ApprovalResolved {
            decision, reason, ..
        } => Output::Block(approval_resolved(*decision, reason.as_deref(), style)),
        EventKind::ModeChanged { mode } => {
            Output::Block(style.dim(&format!("· mode is now {mode}: {}", mode_meaning(*mode))))
        }
        EventKind::TurnFinished {
            turn,
            outcome,
            usage,
            error,
        } => Output::Block(turn_summary(
            *turn,
            *outcome,
            usage,
            error.as_deref(),
            style,
        )),
        EventKind::SubscriptionEnded { reason } => {
            Output::Block(style.dim(&format!("· event stream ended: {reason}")))
        }
        // The prompt and the approval question already show the state.
        EventKind::StatusChanged { .. } => Output::Nothing,
    }
}

/// A prompt in the transcript: `› first line`, later lines indented under it.
pub fn user_prompt(prompt: &str) -> String {
    let mut out = String::new();
    for (index, line) in prompt.trim_end().lines().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        out.push_str(if index == 0 { "› " } else { "  " });
        out.push_str(line);
    }
    if out.is_empty() {
        out.push('›');
    }
    out
}

pub fn mode_meaning(mode: Mode) -> &'static str {
    match mode {
        Mode::Plan => "read-only tools, the agent proposes changes",
        Mode::Code => "changes wait for your approval",
        Mode::Yolo => "every tool runs without asking",
    }
}

fn tool_finished(name: &str, output: &str, is_error: bool, style: Style) -> String {
    let mark = if is_error {
        style.red("✗")
    } else {
        style.green("✓")
    };
    let head = shorten(first_line(output.trim_start()), SUMMARY_CHARS);
    let more = output.trim().lines().count().saturating_sub(1);
    let mut line = if head.is_empty() {
        format!("{mark} {name}")
    } else {
        format!("{mark} {name}: {head}")
    };
    if more > 0 {
        line.push_str(&style.dim(&format!(" (+{more} lines)")));
    }
    line
}

/// The tool and its arguments, in full enough to decide on (long values are cut per line count).
pub fn approval_details(tool: &str, arguments: &str, style: Style) -> String {
    let mut out = style.yellow(&format!("? {tool} needs your approval"));
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) if !map.is_empty() => {
            for (key, value) in &map {
                let text = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let lines: Vec<&str> = text.lines().collect();
                if lines.len() <= 1 {
                    let _ = write!(out, "\n    {key}: {text}");
                    continue;
                }
                let _ = write!(out, "\n    {key}:");
                for line in lines.iter().take(APPROVAL_VALUE_LINES) {
                    let _ = write!(out, "\n      {line}");
                }
                if lines.len() > APPROVAL_VALUE_LINES {
                    let hidden = lines.len() - APPROVAL_VALUE_LINES;
                    let _ = write!(
                        out,
                        "\n      {}",
                        style.dim(&format!("… {hidden} more lines"))
                    );
                }
            }
        }
        // Not an object (or not JSON at all: models do send broken arguments): show it raw.
        _ => {
            for line in arguments.lines().take(APPROVAL_VALUE_LINES) {
                let _ = write!(out, "\n    {line}");
            }
        }
    }
    out
}

/// The question the input line answers.
pub fn approval_question(tool: &str) -> String {
    format!("approve {tool}? [y]es / [a]lways / [n]o (reason…) ")
}

fn approval_resolved(decision: ApprovalDecision, reason: Option<&str>, style: Style) -> String {
    match (decision, reason) {
        (ApprovalDecision::Approve, _) => style.dim("· approved"),
        (ApprovalDecision::Always, _) => {
            style.dim("· approved, and this tool is allowed for the rest of the session")
        }
        (ApprovalDecision::Deny, Some(reason)) => style.dim(&format!("· denied: {reason}")),
        (ApprovalDecision::Deny, None) => style.dim("· denied"),
    }
}

/// The line that ends a turn: how it ended, the tokens it used, and why it failed if it did.
pub fn turn_summary(
    turn: u32,
    outcome: TurnOutcome,
    usage: &Usage,
    error: Option<&str>,
    style: Style,
) -> String {
    let (mark, word) = match outcome {
        TurnOutcome::Completed => (style.green("✓"), "completed"),
        TurnOutcome::Cancelled => (style.yellow("■"), "cancelled"),
        TurnOutcome::Failed => (style.red("✗"), "failed"),
        TurnOutcome::Interrupted => (style.red("✗"), "interrupted (the daemon stopped)"),
    };
    let tokens = format!(
        "turn {turn} {word} · {} in, {} cached · {} out",
        usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens
    );
    let mut line = format!("{mark} {}", style.dim(&tokens));
    if let Some(error) = error {
        let _ = write!(line, "\n  {}", style.red(error));
    }
    line
}

/// The header printed once, on start.
pub fn header(info: &SessionInfo, attached: bool) -> String {
    let verb = if attached { "attached to" } else { "new" };
    format!(
        "cwcode · {verb} session {} · {} mode · profile {} · {}",
        info.id, info.mode, info.profile, info.cwd
    )
}

pub fn hint(style: Style) -> String {
    style.dim("type a prompt; /help for commands; Ctrl+D or /detach leaves the session running")
}

/// What `/detach` prints: the session lives on and this is how to come back.
pub fn detached(session_id: &str, cwd: &str) -> String {
    format!(
        "detached: session {session_id} keeps running in cwcoded\n  reattach with `cwcode --session {session_id}` (or `cwcode --continue` in {cwd})"
    )
}

pub fn session_table(sessions: &[SessionInfo], current: &str) -> String {
    if sessions.is_empty() {
        return "no sessions".to_owned();
    }
    let mut out = format!(
        "  {:<12}  {:<17}  {:<4}  {:>5}  {:<19}  {}",
        "ID", "STATUS", "MODE", "TURNS", "UPDATED", "WORKSPACE"
    );
    for session in sessions {
        let marker = if session.id == current { '*' } else { ' ' };
        let _ = write!(
            out,
            "\n{marker} {:<12}  {:<17}  {:<4}  {:>5}  {:<19}  {}",
            session.id.get(..12).unwrap_or(&session.id),
            status_word(session.status),
            session.mode,
            session.turns,
            session.updated.get(..19).unwrap_or(&session.updated),
            session.cwd
        );
    }
    out.push_str(
        "\n(attach to one with `cwcode --session ID`; a unique prefix of the id is enough)",
    );
    out
}

fn status_word(status: SessionStatus) -> &'static str {
    match status {
        SessionStatus::Idle => "idle",
        SessionStatus::Running => "running",
        SessionStatus::AwaitingApproval => "awaiting_approval",
    }
}

/// Tool arguments on one line: a lone string argument as itself (`▶ bash cargo test`), otherwise
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
    shorten(&text, max_chars)
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

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

pub fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

pub fn help() -> &'static str {
    "Type a prompt and press Enter; end a line with \\ to continue it on the next line.
While a turn runs its answer streams here; lines you type meanwhile are queued as the next turns.
When a tool needs approval, answer the question:
  y              run it
  a              run it, and allow this tool without asking for the rest of the session
  n [reason]     refuse; the reason (e.g. `n use the test helper instead`) goes to the model
Commands:
  /mode plan|code|yolo  plan: read-only tools · code: changes need approval · yolo: ask nothing
  /cancel               stop the running turn (Ctrl+C does the same)
  /sessions             list the daemon's sessions
  /detach, /quit        leave; the session keeps running in cwcoded (so does Ctrl+D)
  /help                 this text
  //text                send a prompt that starts with `/`
Ctrl+C twice within 2 s, when no turn runs, quits (the session stays, as with /detach)."
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Style = Style::PLAIN;

    fn info() -> SessionInfo {
        SessionInfo {
            id: "0198a1b2c3d4e5f6".to_owned(),
            title: "proj".to_owned(),
            cwd: "/home/u/proj".to_owned(),
            profile: "fake".to_owned(),
            mode: Mode::Code,
            status: SessionStatus::Idle,
            created: "2025-01-02T03:04:05.678Z".to_owned(),
            updated: "2025-01-02T03:04:05.678Z".to_owned(),
            turns: 2,
            last_seq: 40,
        }
    }

    #[test]
    fn deltas_stream_inline_and_reasoning_is_dimmed() {
        let answer = EventKind::AssistantDelta {
            text: "Hel".to_owned(),
        };
        assert_eq!(
            event(&answer, false, PLAIN),
            Output::Inline(Stream::Answer, "Hel".to_owned())
        );
        let reasoning = EventKind::ReasoningDelta {
            text: "hmm".to_owned(),
        };
        assert_eq!(
            event(&reasoning, false, Style { color: true }),
            Output::Inline(Stream::Reasoning, "\x1b[2mhmm\x1b[0m".to_owned())
        );
        let output = EventKind::ToolOutputDelta {
            call_id: "c".to_owned(),
            text: "ok\n".to_owned(),
        };
        assert_eq!(
            event(&output, false, PLAIN),
            Output::Inline(Stream::ToolOutput, "ok\n".to_owned())
        );
    }

    #[test]
    fn tool_call_started_shows_name_and_arguments() {
        let kind = EventKind::ToolCallStarted {
            call_id: "c1".to_owned(),
            name: "bash".to_owned(),
            arguments: r#"{"command":"cargo test"}"#.to_owned(),
        };
        assert_eq!(
            event(&kind, false, PLAIN),
            Output::Block("▶ bash cargo test".to_owned())
        );
        let kind = EventKind::ToolCallStarted {
            call_id: "c2".to_owned(),
            name: "read_file".to_owned(),
            arguments: r#"{"path":"src/main.rs","offset":10}"#.to_owned(),
        };
        // Key order follows serde_json's map, which a workspace feature could change.
        let Output::Block(line) = event(&kind, false, PLAIN) else {
            panic!("expected a block");
        };
        assert!(line.starts_with("▶ read_file "), "{line}");
        assert!(
            line.contains("offset=10") && line.contains("path=src/main.rs"),
            "{line}"
        );
    }

    #[test]
    fn inline_arguments_handle_odd_input() {
        assert_eq!(inline_arguments("not json {", 50), "not json {");
        assert_eq!(inline_arguments("[1,2]", 50), "[1,2]");
        let pairs = inline_arguments(r#"{"path":"a b","content":"x\ny"}"#, 80);
        assert!(pairs.contains(r#"path="a b""#), "{pairs}");
        assert!(pairs.contains("content=<2 lines>"), "{pairs}");
        assert_eq!(
            inline_arguments(r#"{"command":"echo a\necho b"}"#, 80),
            "echo a … (+1 lines)"
        );
        assert_eq!(inline_arguments(r#"{"command":"abcdef"}"#, 3), "abc…");
    }

    #[test]
    fn tool_call_finished_shows_mark_and_first_line() {
        let ok = EventKind::ToolCallFinished {
            call_id: "c".to_owned(),
            name: "bash".to_owned(),
            output: "test result: ok\nmore\nlines".to_owned(),
            is_error: false,
        };
        assert_eq!(
            event(&ok, false, PLAIN),
            Output::Block("✓ bash: test result: ok (+2 lines)".to_owned())
        );
        let failed = EventKind::ToolCallFinished {
            call_id: "c".to_owned(),
            name: "edit".to_owned(),
            output: "stale hashes".to_owned(),
            is_error: true,
        };
        assert_eq!(
            event(&failed, false, PLAIN),
            Output::Block("✗ edit: stale hashes".to_owned())
        );
        let empty = EventKind::ToolCallFinished {
            call_id: "c".to_owned(),
            name: "write".to_owned(),
            output: String::new(),
            is_error: false,
        };
        assert_eq!(
            event(&empty, false, PLAIN),
            Output::Block("✓ write".to_owned())
        );
    }

    #[test]
    fn turn_summary_has_outcome_tokens_and_error() {
        let usage = Usage {
            prompt_tokens: 1200,
            completion_tokens: 30,
            cached_tokens: 1024,
        };
        assert_eq!(
            turn_summary(3, TurnOutcome::Completed, &usage, None, PLAIN),
            "✓ turn 3 completed · 1200 in, 1024 cached · 30 out"
        );
        assert_eq!(
            turn_summary(
                4,
                TurnOutcome::Failed,
                &Usage::default(),
                Some("provider said 401: bad key"),
                PLAIN
            ),
            "✗ turn 4 failed · 0 in, 0 cached · 0 out\n  provider said 401: bad key"
        );
        assert!(turn_summary(5, TurnOutcome::Cancelled, &usage, None, PLAIN).contains("cancelled"));
    }

    #[test]
    fn own_prompts_are_not_echoed_but_others_are() {
        let started = EventKind::TurnStarted {
            turn: 2,
            prompt: "fix it\nplease".to_owned(),
        };
        assert_eq!(event(&started, true, PLAIN), Output::Nothing);
        assert_eq!(
            event(&started, false, PLAIN),
            Output::Block("› fix it\n  please".to_owned())
        );
        let queued = EventKind::PromptQueued {
            turn: 3,
            prompt: "next".to_owned(),
        };
        assert_eq!(
            event(&queued, true, PLAIN),
            Output::Block("· queued as turn 3, after the running one".to_owned())
        );
        assert_eq!(
            event(&queued, false, PLAIN),
            Output::Block("· turn 3 queued: next".to_owned())
        );
    }

    #[test]
    fn approval_details_show_each_argument_and_cut_long_ones() {
        let text = approval_details("bash", r#"{"command":"rm -rf target"}"#, PLAIN);
        assert_eq!(
            text,
            "? bash needs your approval\n    command: rm -rf target"
        );
        let long: String = (1..=50).map(|n| format!("line {n}\n")).collect();
        let arguments = serde_json::json!({ "path": "a.txt", "content": long }).to_string();
        let text = approval_details("write", &arguments, PLAIN);
        assert!(text.contains("\n    path: a.txt"));
        assert!(text.contains("\n    content:\n      line 1\n"));
        assert!(text.contains("      line 40\n      … 10 more lines"));
        assert!(!text.contains("line 41"));
        let raw = approval_details("bash", "not json", PLAIN);
        assert_eq!(raw, "? bash needs your approval\n    not json");
    }

    #[test]
    fn approval_resolution_says_what_was_decided() {
        let deny = EventKind::ApprovalResolved {
            request_id: "r".to_owned(),
            decision: ApprovalDecision::Deny,
            reason: Some("use the helper".to_owned()),
        };
        assert_eq!(
            event(&deny, false, PLAIN),
            Output::Block("· denied: use the helper".to_owned())
        );
        let always = EventKind::ApprovalResolved {
            request_id: "r".to_owned(),
            decision: ApprovalDecision::Always,
            reason: None,
        };
        assert!(
            matches!(event(&always, false, PLAIN), Output::Block(text) if text.contains("rest of the session"))
        );
    }

    #[test]
    fn quiet_events() {
        let status = EventKind::StatusChanged {
            status: SessionStatus::Running,
        };
        assert_eq!(event(&status, false, PLAIN), Output::Nothing);
        let message = EventKind::AssistantMessage {
            content: "done".to_owned(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: None,
        };
        assert_eq!(event(&message, false, PLAIN), Output::EndLine);
    }

    #[test]
    fn header_and_detach_name_the_session() {
        assert_eq!(
            header(&info(), false),
            "cwcode · new session 0198a1b2c3d4e5f6 · code mode · profile fake · /home/u/proj"
        );
        assert!(header(&info(), true).contains("attached to session 0198a1b2c3d4e5f6"));
        let text = detached("0198a1b2c3d4e5f6", "/home/u/proj");
        assert!(text.contains("cwcode --session 0198a1b2c3d4e5f6"));
        assert!(text.contains("keeps running"));
    }

    #[test]
    fn session_table_marks_the_current_session() {
        let mut other = info();
        other.id = "0198ffffffffffffffff".to_owned();
        other.status = SessionStatus::AwaitingApproval;
        let table = session_table(&[info(), other], "0198a1b2c3d4e5f6");
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[1].starts_with("* 0198a1b2c3d4"));
        assert!(lines[2].starts_with("  0198ffffffff  awaiting_approval"));
        assert!(lines[1].contains("2025-01-02T03:04:05  /home/u/proj"));
        assert_eq!(session_table(&[], "x"), "no sessions");
    }

    #[test]
    fn shorten_counts_characters_not_bytes() {
        assert_eq!(shorten("héllo wörld", 5), "héllo…");
        assert_eq!(shorten("short", 10), "short");
    }
}
