//! The input loop: what a typed line means (a prompt, a slash command, an approval answer), and
//! the loop that reads lines, notices from the event printer and Ctrl+C without ever blocking
//! the printer.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cwcode_protocol::{
    ApprovalDecision, ApprovalRespondParams, Client, ClientError, ErrorCode, Mode, SessionStatus,
};
use tokio::signal::unix::Signal;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::printer::Notice;
use crate::render;
use crate::screen::{self, Screen, SharedScreen};

/// Two Ctrl+C presses this close together, with no turn running, quit.
const DOUBLE_INTERRUPT: Duration = Duration::from_secs(2);

/// Joins lines ending in `\` into one multi-line input.
#[derive(Debug, Default)]
pub struct LineJoiner {
    pending: Option<String>,
}

impl LineJoiner {
    /// Feeds one raw line (its newline optional). Returns the whole input once a line does not
    /// end in a backslash; the backslashes that continued it become newlines.
    pub fn push(&mut self, raw: &str) -> Option<String> {
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        match line.strip_suffix('\\') {
            Some(head) => {
                let pending = self.pending.get_or_insert_with(String::new);
                pending.push_str(head);
                pending.push('\n');
                None
            }
            None => {
                let mut text = self.pending.take().unwrap_or_default();
                text.push_str(line);
                Some(text)
            }
        }
    }

    pub fn is_continuing(&self) -> bool {
        self.pending.is_some()
    }

    /// Drops a half-typed multi-line input; true when there was one.
    pub fn discard(&mut self) -> bool {
        self.pending.take().is_some()
    }
}

/// What one complete input means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Empty,
    /// Text for the model (or, while an approval waits, the answer to it).
    Text(String),
    Command(Command),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    SetMode(Mode),
    ShowMode,
    Cancel,
    Detach,
    Sessions,
    Help,
    /// A mistyped command, with the message that says how to type it.
    Invalid(String),
}

pub fn parse_input(text: &str) -> Input {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Input::Empty;
    }
    // `//…` is the way to send a prompt that starts with a slash.
    if let Some(escaped) = trimmed.strip_prefix("//") {
        return Input::Text(format!("/{escaped}"));
    }
    let Some(command) = trimmed.strip_prefix('/') else {
        return Input::Text(trimmed.to_owned());
    };
    let (name, argument) = match command.split_once(char::is_whitespace) {
        Some((name, argument)) => (name, argument.trim()),
        None => (command, ""),
    };
    Input::Command(match name {
        "mode" if argument.is_empty() => Command::ShowMode,
        "mode" => match argument.parse() {
            Ok(mode) => Command::SetMode(mode),
            Err(error) => Command::Invalid(format!("{error} (e.g. `/mode plan`)")),
        },
        "cancel" => Command::Cancel,
        "detach" | "quit" | "exit" | "q" => Command::Detach,
        "sessions" => Command::Sessions,
        "help" | "?" => Command::Help,
        _ => Command::Invalid(format!(
            "unknown command /{name}: /help lists them (start a prompt with // to send a leading /)"
        )),
    })
}

/// Reads an answer to an approval question: `y`/`yes`, `a`/`always`, or `n`/`no` optionally
/// followed by the reason the model is told. `None` when the line is none of these: approving
/// is never a default, so anything unclear is asked again.
pub fn parse_approval(text: &str) -> Option<(ApprovalDecision, Option<String>)> {
    let text = text.trim();
    let word_end = text
        .find(|c: char| !c.is_alphabetic())
        .unwrap_or(text.len());
    let (word, rest) = text.split_at(word_end);
    let rest = rest.trim_start_matches(|c: char| c.is_whitespace() || ",:;.-".contains(c));
    match word.to_lowercase().as_str() {
        "y" | "yes" if rest.is_empty() => Some((ApprovalDecision::Approve, None)),
        "a" | "always" if rest.is_empty() => Some((ApprovalDecision::Always, None)),
        "n" | "no" => Some((
            ApprovalDecision::Deny,
            (!rest.is_empty()).then(|| rest.to_owned()),
        )),
        _ => None,
    }
}

/// Whether this Ctrl+C follows another one closely enough to mean "quit".
pub fn is_double_interrupt(previous: Option<Instant>, now: Instant) -> bool {
    previous.is_some_and(|previous| now.saturating_duration_since(previous) <= DOUBLE_INTERRUPT)
}

/// The daemon's own words for an RPC error (they say what to fix); the full text otherwise.
pub fn describe_error(error: &ClientError) -> String {
    match error {
        ClientError::Rpc { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// The user left; the session keeps running in the daemon.
    Detached,
    /// The daemon or the connection went away.
    Lost(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingApproval {
    request_id: String,
    tool: String,
    arguments: String,
}

pub struct Repl {
    client: Arc<Client>,
    screen: SharedScreen,
    session_id: String,
    mode: Mode,
    /// Highest turn number known to exist (sent, queued or started) and highest finished: the
    /// session is busy while the first is larger. Comparing numbers, not waiting for one event,
    /// is immune to a turn finishing before the daemon's answer to our `send` arrives.
    highest_turn: u32,
    finished_turn: u32,
    approvals: VecDeque<PendingApproval>,
    /// The request whose question is on screen.
    asked: Option<String>,
    /// The approval whose details the printer showed last, so the question can follow without
    /// repeating them.
    just_requested: Option<String>,
    caught_up: bool,
    joiner: LineJoiner,
    last_interrupt: Option<Instant>,
    interactive: bool,
    stdin_closed: bool,
}

impl Repl {
    pub fn new(
        client: Arc<Client>,
        screen: SharedScreen,
        session_id: String,
        mode: Mode,
        turns: u32,
        interactive: bool,
    ) -> Self {
        Self {
            client,
            screen,
            session_id,
            mode,
            highest_turn: turns,
            // Replayed TurnFinished events bring this up to date before any prompt is drawn.
            finished_turn: 0,
            approvals: VecDeque::new(),
            asked: None,
            just_requested: None,
            caught_up: false,
            joiner: LineJoiner::default(),
            last_interrupt: None,
            interactive,
            stdin_closed: false,
        }
    }

    fn screen(&self) -> std::sync::MutexGuard<'_, Screen> {
        screen::lock(&self.screen)
    }

    fn busy(&self) -> bool {
        self.highest_turn > self.finished_turn
    }

    fn note(&self, text: &str) {
        let mut screen = self.screen();
        let text = screen.style.dim(text);
        screen.line(&text);
    }

    pub async fn run(
        mut self,
        mut lines: UnboundedReceiver<std::io::Result<String>>,
        mut notices: UnboundedReceiver<Notice>,
        mut interrupts: Signal,
    ) -> Exit {
        loop {
            if self.stdin_closed && self.caught_up {
                // Piped input ran out: let the turns it sent finish, then leave.
                if !self.approvals.is_empty() {
                    self.note("· stdin is closed, so this approval cannot be answered here");
                    return Exit::Detached;
                }
                if !self.busy() {
                    return Exit::Detached;
                }
            }
            self.refresh_prompt();
            tokio::select! {
                notice = notices.recv() => match notice {
                    Some(Notice::Ended(reason)) => return Exit::Lost(reason),
                    Some(notice) => self.on_notice(notice),
                    None => return Exit::Lost("the event printer stopped".to_owned()),
                },
                line = lines.recv(), if !self.stdin_closed => match line {
                    Some(Ok(line)) => {
                        self.screen().input_echoed();
                        if self.on_line(&line).await == Flow::Detach {
                            return Exit::Detached;
                        }
                    }
                    Some(Err(error)) => {
                        self.screen().error(&format!("cannot read stdin: {error}"));
                        self.stdin_closed = true;
                    }
                    None if self.interactive => {
                        // Ctrl+D: the terminal echoes nothing, so end the prompt's line.
                        self.screen().end_line();
                        return Exit::Detached;
                    }
                    None => self.stdin_closed = true,
                },
                _ = interrupts.recv() => {
                    if self.on_interrupt().await == Flow::Detach {
                        return Exit::Detached;
                    }
                }
            }
        }
    }

    /// Shows what input is expected now: an approval question, the prompt, or nothing while a
    /// turn runs.
    fn refresh_prompt(&mut self) {
        if !self.caught_up {
            return;
        }
        if let Some(front) = self.approvals.front().cloned() {
            let mut screen = screen::lock(&self.screen);
            let first_time = self.asked.as_deref() != Some(front.request_id.as_str());
            if first_time {
                // Details again unless the printer has just shown them for this very request.
                if self.just_requested.as_deref() != Some(front.request_id.as_str()) {
                    let details =
                        render::approval_details(&front.tool, &front.arguments, screen.style);
                    screen.line(&details);
                }
                self.asked = Some(front.request_id.clone());
            }
            screen.ask(&render::approval_question(&front.tool), first_time);
            return;
        }
        if self.busy() {
            return;
        }
        let prompt = if self.joiner.is_continuing() {
            "… "
        } else {
            "> "
        };
        self.screen().prompt(prompt);
    }

    fn on_notice(&mut self, notice: Notice) {
        self.just_requested = None;
        match notice {
            Notice::TurnKnown(turn) => self.highest_turn = self.highest_turn.max(turn),
            Notice::TurnFinished(turn) => {
                self.finished_turn = self.finished_turn.max(turn);
                self.highest_turn = self.highest_turn.max(turn);
                // Approvals belong to the turn that asked; a cancelled turn withdraws its own
                // without a resolution event.
                self.approvals.clear();
                self.asked = None;
            }
            Notice::ApprovalRequested {
                request_id,
                tool,
                arguments,
            } => {
                if self.caught_up {
                    self.just_requested = Some(request_id.clone());
                }
                self.approvals.push_back(PendingApproval {
                    request_id,
                    tool,
                    arguments,
                });
            }
            Notice::ApprovalResolved(request_id) => self.forget_approval(&request_id),
            Notice::ModeChanged(mode) => self.mode = mode,
            Notice::CaughtUp => self.caught_up = true,
            Notice::Ended(_) => {}
        }
    }

    fn forget_approval(&mut self, request_id: &str) {
        self.approvals
            .retain(|approval| approval.request_id != request_id);
        if self.asked.as_deref() == Some(request_id) {
            self.asked = None;
        }
    }

    async fn on_line(&mut self, raw: &str) -> Flow {
        let Some(text) = self.joiner.push(raw) else {
            return Flow::Continue;
        };
        let answering = self.caught_up && !self.approvals.is_empty();
        match parse_input(&text) {
            Input::Command(command) => return self.command(command).await,
            Input::Empty if answering => {
                self.note("· answer y, a or n: nothing runs without a yes");
            }
            Input::Empty => {}
            Input::Text(text) if answering => self.answer(&text).await,
            Input::Text(text) => self.send(text).await,
        }
        Flow::Continue
    }

    async fn answer(&mut self, text: &str) {
        let Some(approval) = self.approvals.front().cloned() else {
            return;
        };
        let Some((decision, reason)) = parse_approval(text) else {
            self.note(
                "· answer y (run it), a (always allow this tool in this session), or n [reason] (refuse)",
            );
            return;
        };
        let params = ApprovalRespondParams {
            session_id: self.session_id.clone(),
            request_id: approval.request_id.clone(),
            decision,
            reason,
        };
        match self.client.respond_approval(&params).await {
            Ok(()) => self.forget_approval(&approval.request_id),
            Err(error) => {
                self.screen().error(&describe_error(&error));
                if error.rpc_code() == Some(ErrorCode::ApprovalNotFound.code()) {
                    // Answered elsewhere or withdrawn: stop asking.
                    self.forget_approval(&approval.request_id);
                }
            }
        }
    }

    async fn send(&mut self, prompt: String) {
        self.screen().expect_own_prompt(&prompt);
        match self.client.send(&self.session_id, &prompt).await {
            Ok(sent) => {
                self.screen().own_prompt_sent(&prompt, Some(sent.turn));
                self.highest_turn = self.highest_turn.max(sent.turn);
            }
            Err(error) => {
                let mut screen = self.screen();
                screen.own_prompt_sent(&prompt, None);
                screen.error(&describe_error(&error));
            }
        }
    }

    async fn command(&mut self, command: Command) -> Flow {
        match command {
            Command::Detach => return Flow::Detach,
            Command::Help => self.screen().line(render::help()),
            Command::ShowMode => self.note(&format!(
                "· mode is {}: {} (change it with /mode plan|code|yolo)",
                self.mode,
                render::mode_meaning(self.mode)
            )),
            Command::SetMode(mode) if mode == self.mode => {
                self.note(&format!("· already in {mode} mode"));
            }
            Command::SetMode(mode) => match self.client.set_mode(&self.session_id, mode).await {
                // The ModeChanged event announces it, to every attached client alike.
                Ok(info) => self.mode = info.mode,
                Err(error) => self.screen().error(&describe_error(&error)),
            },
            Command::Cancel => self.cancel().await,
            Command::Sessions => match self.client.list_sessions().await {
                Ok(sessions) => {
                    let table = render::session_table(&sessions, &self.session_id);
                    self.screen().line(&table);
                }
                Err(error) => self.screen().error(&describe_error(&error)),
            },
            Command::Invalid(message) => self.screen().error(&message),
        }
        Flow::Continue
    }

    async fn cancel(&mut self) {
        match self.client.cancel(&self.session_id).await {
            Ok(result) if result.cancelled => self.note("· cancelling the turn…"),
            Ok(_) => {
                self.note("· no turn is running");
                self.resync().await;
            }
            Err(error) => self.screen().error(&describe_error(&error)),
        }
    }

    /// Trusts the daemon over our count of turns when it says nothing runs: were a turn's end
    /// never journalled, the prompt would otherwise stay hidden for good.
    async fn resync(&mut self) {
        if let Ok(info) = self.client.get_session(&self.session_id).await
            && info.status == SessionStatus::Idle
            && info.turns <= self.highest_turn
        {
            self.finished_turn = self.highest_turn;
            self.approvals.clear();
            self.asked = None;
        }
    }

    async fn on_interrupt(&mut self) -> Flow {
        // The terminal echoed `^C` after whatever was typed.
        self.screen().end_line();
        if self.busy() {
            self.last_interrupt = None;
            self.cancel().await;
            return Flow::Continue;
        }
        if self.joiner.discard() {
            self.note("· multi-line input discarded");
            return Flow::Continue;
        }
        let now = Instant::now();
        if is_double_interrupt(self.last_interrupt, now) {
            return Flow::Detach;
        }
        self.last_interrupt = Some(now);
        self.note("· press Ctrl+C again within 2 s to quit (the session stays), or Ctrl+D");
        Flow::Continue
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Detach,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_ending_in_a_backslash_continue() {
        let mut joiner = LineJoiner::default();
        assert_eq!(joiner.push("first \\\n"), None);
        assert!(joiner.is_continuing());
        assert_eq!(joiner.push("second\\\r\n"), None);
        assert_eq!(
            joiner.push("third\n"),
            Some("first \nsecond\nthird".to_owned())
        );
        assert!(!joiner.is_continuing());
        assert_eq!(joiner.push("single"), Some("single".to_owned()));
        // A backslash followed by a space is text, not a continuation.
        assert_eq!(joiner.push("a \\ \n"), Some("a \\ ".to_owned()));
    }

    #[test]
    fn a_discarded_continuation_starts_over() {
        let mut joiner = LineJoiner::default();
        assert!(!joiner.discard());
        assert_eq!(joiner.push("half\\"), None);
        assert!(joiner.discard());
        assert_eq!(joiner.push("fresh"), Some("fresh".to_owned()));
    }

    #[test]
    fn plain_text_is_a_prompt() {
        assert_eq!(
            parse_input("  fix the tests \n"),
            Input::Text("fix the tests".to_owned())
        );
        assert_eq!(parse_input("   \n"), Input::Empty);
        assert_eq!(
            parse_input("//etc/hosts is odd"),
            Input::Text("/etc/hosts is odd".to_owned())
        );
    }

    #[test]
    fn slash_commands() {
        assert_eq!(
            parse_input("/mode plan"),
            Input::Command(Command::SetMode(Mode::Plan))
        );
        assert_eq!(
            parse_input("/mode  YOLO "),
            Input::Command(Command::SetMode(Mode::Yolo))
        );
        assert_eq!(parse_input("/mode"), Input::Command(Command::ShowMode));
        assert_eq!(parse_input("/cancel"), Input::Command(Command::Cancel));
        for detach in ["/detach", "/quit", "/exit", "/q"] {
            assert_eq!(parse_input(detach), Input::Command(Command::Detach));
        }
        assert_eq!(parse_input("/sessions"), Input::Command(Command::Sessions));
        assert_eq!(parse_input("/help"), Input::Command(Command::Help));
    }

    #[test]
    fn mistyped_commands_say_how_to_fix_them() {
        let Input::Command(Command::Invalid(message)) = parse_input("/mode fast") else {
            panic!("expected an invalid command");
        };
        assert!(message.contains("expected plan, code or yolo"), "{message}");
        let Input::Command(Command::Invalid(message)) = parse_input("/etc/passwd") else {
            panic!("expected an invalid command");
        };
        assert!(message.contains("unknown command /etc/passwd"), "{message}");
        assert!(message.contains("//"), "{message}");
    }

    #[test]
    fn approval_answers() {
        assert_eq!(parse_approval("y"), Some((ApprovalDecision::Approve, None)));
        assert_eq!(
            parse_approval(" Yes \n"),
            Some((ApprovalDecision::Approve, None))
        );
        assert_eq!(parse_approval("a"), Some((ApprovalDecision::Always, None)));
        assert_eq!(
            parse_approval("always"),
            Some((ApprovalDecision::Always, None))
        );
        assert_eq!(parse_approval("n"), Some((ApprovalDecision::Deny, None)));
        assert_eq!(parse_approval("NO"), Some((ApprovalDecision::Deny, None)));
        assert_eq!(
            parse_approval("n because the tests would break"),
            Some((
                ApprovalDecision::Deny,
                Some("because the tests would break".to_owned())
            ))
        );
        assert_eq!(
            parse_approval("no: use the helper"),
            Some((ApprovalDecision::Deny, Some("use the helper".to_owned())))
        );
    }

    #[test]
    fn unclear_approval_answers_are_asked_again() {
        for unclear in [
            "",
            "ok",
            "nope",
            "yes but not there",
            "yolo",
            "approve",
            "1",
        ] {
            assert_eq!(parse_approval(unclear), None, "{unclear:?}");
        }
    }

    #[test]
    fn double_interrupt_window() {
        let start = Instant::now();
        assert!(!is_double_interrupt(None, start));
        assert!(is_double_interrupt(
            Some(start),
            start + Duration::from_millis(1500)
        ));
        assert!(!is_double_interrupt(
            Some(start),
            start + Duration::from_millis(2500)
        ));
    }

    #[test]
    fn rpc_errors_show_the_daemons_words() {
        let error = ClientError::Rpc {
            code: -32006,
            message: "no profile is configured: add one to ~/.cwcode/config.json".to_owned(),
            data: None,
        };
        assert_eq!(
            describe_error(&error),
            "no profile is configured: add one to ~/.cwcode/config.json"
        );
    }
}
