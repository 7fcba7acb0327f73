//! The interface's state and what keys and daemon replies do to it. Nothing here awaits or
//! draws: a key or a reply changes the state and may queue [`Request`]s in the outbox, which
//! the main loop hands to the daemon task. So every behaviour is tested with plain calls.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crossterm::event::{
    Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEventKind,
};
use cwcode_protocol::{
    ApprovalDecision, ApprovalRespondParams, CreateSessionParams, ErrorCode, EventKind,
    GoalStartParams, GoalStatus, Mode, ProfileInfo, SessionInfo, SessionStatus, TodoItem,
};

use crate::commands::{self, Candidate, Command, Input};
use crate::daemon::{Action, GoalCall, Open, Reply, Request};
use crate::editor::Editor;
use crate::format;
use crate::picker::{Choice, Picker};
use crate::reports;
use crate::rewind::RewindPicker;
use crate::transcript::{Tone, Transcript};

/// Two Ctrl+C presses this close together, on an empty input, quit.
const DOUBLE_INTERRUPT: Duration = Duration::from_secs(2);
/// Rows the mouse wheel scrolls.
const WHEEL_ROWS: usize = 3;

/// How the program was asked to find its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Startup {
    /// No flag: the picker when this directory has sessions, else a new one.
    Choose,
    New,
    Continue,
    Session(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Connecting,
    Picking,
    Opening,
    Attached,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    Connecting,
    Connected,
    Lost(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// The user left; the session keeps running in the daemon.
    Detached(SessionInfo),
    /// The user left before opening any session.
    Quit,
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub request_id: String,
    pub tool: String,
}

/// Where the approval prompt is.
#[derive(Debug, Clone)]
pub enum Answer {
    Choosing,
    /// `n` was pressed: the reason is being typed.
    Reason(Editor),
    /// Sent; the daemon's ApprovalResolved will clear it.
    Sent,
}

/// The goal loop while it runs, as the banner above the input shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoalLoop {
    pub cycle: u32,
    pub cap: u32,
    /// Goals done and in all, once a cycle has ended or the status has said.
    pub progress: Option<(usize, usize)>,
}

impl GoalLoop {
    pub fn banner(&self) -> String {
        let progress = self
            .progress
            .map(|(done, total)| format!(" · {done} of {total} done"))
            .unwrap_or_default();
        format!(
            "goal loop · cycle {}/{}{progress} · /goal off stops it",
            self.cycle, self.cap
        )
    }
}

pub struct App {
    pub cwd: String,
    startup: Startup,
    /// Profile and mode asked for on the command line, for new sessions.
    new_profile: Option<String>,
    new_mode: Option<Mode>,
    pub phase: Phase,
    pub connection: Connection,
    pub session: Option<SessionInfo>,
    pub transcript: Transcript,
    pub editor: Editor,
    pub picker: Option<Picker>,
    /// `/rewind`'s list of checkpoints, in place of the input while it is open.
    pub rewind: Option<RewindPicker>,
    pub approvals: VecDeque<Pending>,
    pub answer: Answer,
    pub completion_selected: usize,
    /// The input for which the completion list was dismissed with Esc.
    completion_dismissed: Option<String>,
    pub profiles: Vec<ProfileInfo>,
    show_profiles: bool,
    pub status: SessionStatus,
    /// When the running turn started, as seen by this client.
    pub turn_started: Option<Instant>,
    /// Tokens summed over the finished turns: the cache hit ratio and the cost.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    /// The size of the last request: its prompt plus its answer.
    pub context_tokens: u64,
    pub todos: Vec<TodoItem>,
    /// Whether the todo list is shown above the input (when there is one); `/todo` toggles it.
    pub show_todos: bool,
    /// Set by the goal events (the replay rebuilds it on attach), and made exact by one
    /// `goal/status` once the replay is over.
    pub goal: Option<GoalLoop>,
    /// The journal's last `seq` at attach time: events up to it are the replay.
    replay_until: u64,
    pub caught_up: bool,
    pub expanded: bool,
    /// The first transcript row shown, when scrolled up; `None` follows the bottom.
    pub scroll: Option<usize>,
    /// Transcript rows and viewport height as last drawn, for scrolling by pages.
    pub last_rows: usize,
    pub last_height: usize,
    last_interrupt: Option<Instant>,
    /// A one-line hint in the status line, until the next key.
    pub flash: Option<String>,
    pub outbox: Vec<Request>,
    pub exit: Option<Exit>,
}

impl App {
    pub fn new(
        cwd: String,
        startup: Startup,
        new_profile: Option<String>,
        new_mode: Option<Mode>,
    ) -> Self {
        Self {
            cwd,
            startup,
            new_profile,
            new_mode,
            phase: Phase::Connecting,
            connection: Connection::Connecting,
            session: None,
            transcript: Transcript::default(),
            editor: Editor::new(),
            picker: None,
            rewind: None,
            approvals: VecDeque::new(),
            answer: Answer::Choosing,
            completion_selected: 0,
            completion_dismissed: None,
            profiles: Vec::new(),
            show_profiles: false,
            status: SessionStatus::Idle,
            turn_started: None,
            prompt_tokens: 0,
            cached_tokens: 0,
            completion_tokens: 0,
            context_tokens: 0,
            todos: Vec::new(),
            show_todos: true,
            goal: None,
            replay_until: 0,
            caught_up: false,
            expanded: false,
            scroll: None,
            last_rows: 0,
            last_height: 0,
            last_interrupt: None,
            flash: None,
            outbox: Vec::new(),
            exit: None,
        }
    }

    fn session_id(&self) -> Option<String> {
        self.session.as_ref().map(|session| session.id.clone())
    }

    pub fn mode(&self) -> Mode {
        self.session
            .as_ref()
            .map_or(Mode::Code, |session| session.mode)
    }

    pub fn busy(&self) -> bool {
        self.status != SessionStatus::Idle
    }

    /// The session's profile, once the profiles are known.
    pub fn profile(&self) -> Option<&ProfileInfo> {
        let name = &self.session.as_ref()?.profile;
        self.profiles.iter().find(|profile| &profile.name == name)
    }

    /// What the session cost so far, when its profile has prices (per million tokens).
    pub fn cost(&self) -> Option<f64> {
        let prices = self.profile()?.prices?;
        let missed = self.prompt_tokens.saturating_sub(self.cached_tokens);
        Some(
            (self.cached_tokens as f64 * prices.input_hit
                + missed as f64 * prices.input_miss
                + self.completion_tokens as f64 * prices.output)
                / 1e6,
        )
    }

    /// The approval the prompt asks about: the oldest, once the replay is over (answering an
    /// old request while replaying would answer from a stale screen).
    pub fn approval(&self) -> Option<&Pending> {
        if self.phase == Phase::Attached && self.caught_up {
            self.approvals.front()
        } else {
            None
        }
    }

    pub fn completions(&self) -> Vec<Candidate> {
        if self.phase != Phase::Attached || self.approval().is_some() {
            return Vec::new();
        }
        let text = self.editor.text();
        if self.completion_dismissed.as_deref() == Some(text.as_str()) {
            return Vec::new();
        }
        commands::complete(&text, &self.profiles)
    }

    fn new_session_params(&self) -> CreateSessionParams {
        CreateSessionParams {
            cwd: self.cwd.clone(),
            profile: self.new_profile.clone(),
            mode: self.new_mode,
            title: None,
        }
    }

    fn note(&mut self, text: impl Into<String>, tone: Tone) {
        self.transcript.note(text, tone);
    }

    // ---- daemon replies -------------------------------------------------------------------

    pub fn on_reply(&mut self, reply: Reply, now: Instant) {
        match reply {
            Reply::Connected => {
                self.connection = Connection::Connected;
                self.outbox.push(Request::ListProfiles);
                match self.startup.clone() {
                    Startup::Choose | Startup::Continue => self.outbox.push(Request::ListSessions),
                    Startup::New => self.open(Open::New(self.new_session_params())),
                    Startup::Session(id) => self.open(Open::Existing(id)),
                }
            }
            Reply::ConnectFailed(message) => self.exit = Some(Exit::Failed(message)),
            Reply::Lost(reason) => {
                self.connection = Connection::Lost(reason.clone());
                self.note(
                    format!("lost the connection to cwcoded ({reason}); reconnecting…"),
                    Tone::Warn,
                );
            }
            Reply::Reconnected => {
                self.connection = Connection::Connected;
                self.note("reconnected to cwcoded", Tone::Info);
            }
            Reply::Sessions(sessions) => self.on_sessions(&sessions),
            Reply::Attached(info) => self.on_attached(info),
            Reply::Event(event) => self.on_event(event.seq, &event.kind, now),
            Reply::ModeSet(info) => {
                if let Some(session) = &mut self.session
                    && session.id == info.id
                {
                    session.mode = info.mode;
                }
            }
            // The `profile_changed` event that follows says so in the transcript.
            Reply::ProfileSet(info) => {
                if let Some(session) = &mut self.session
                    && session.id == info.id
                {
                    session.profile = info.profile;
                }
            }
            Reply::Cancelled(true) => self.flash = Some("cancelling the turn…".to_owned()),
            Reply::Cancelled(false) => self.flash = Some("no turn is running".to_owned()),
            Reply::Profiles(profiles) => {
                self.profiles = profiles;
                if std::mem::take(&mut self.show_profiles) {
                    self.show_model();
                }
            }
            Reply::Checkpoints(checkpoints) => {
                if checkpoints.is_empty() {
                    self.note(
                        "no checkpoints yet: each prompt gets one, /rewind goes back before it",
                        Tone::Info,
                    );
                } else {
                    self.rewind = Some(RewindPicker::new(checkpoints));
                }
            }
            Reply::Rewound(result) => self.on_rewound(&result.prompt, result.turn),
            Reply::RewindUndone(result) => {
                // The prompt the rewind gave back would now be sent a second time.
                if self.editor.text().trim() == result.prompt.trim() {
                    self.editor.take();
                }
                self.flash = Some(format!("rewind to before prompt {} undone", result.turn));
            }
            Reply::Cache(report) => self.note(reports::cache_table(&report), Tone::Plain),
            Reply::Cost(report) => self.note(reports::cost_table(&report), Tone::Plain),
            Reply::Goal {
                session_id,
                call,
                status,
            } => {
                if self.session_id().as_deref() == Some(session_id.as_str()) {
                    self.on_goal_status(call, &status);
                }
            }
            Reply::Failed {
                action,
                message,
                code,
            } => self.on_failed(action, message, code),
            Reply::Notice(text) => self.note(text, Tone::Info),
        }
    }

    fn open(&mut self, open: Open) {
        // The picker (at startup, or /sessions) and the current session stay on screen until
        // the new one is open, so a failure can be shown where the choice was made.
        if self.phase == Phase::Connecting {
            self.phase = Phase::Opening;
        }
        self.outbox.push(Request::Open(open));
    }

    fn on_sessions(&mut self, sessions: &[SessionInfo]) {
        if self.phase != Phase::Connecting {
            // `/sessions`.
            self.picker = Some(Picker::new(sessions, &self.cwd));
            return;
        }
        let here = sessions.iter().find(|session| session.cwd == self.cwd);
        match (&self.startup, here) {
            (Startup::Continue, Some(session)) => self.open(Open::Existing(session.id.clone())),
            (Startup::Continue, None) => {
                self.exit = Some(Exit::Failed(format!(
                    "no session has {} as its workspace yet: run `cwcode` there to start one, or `cwcode --session ID` (see `cwcode-cli ls`)",
                    self.cwd
                )));
            }
            (_, Some(_)) => {
                self.phase = Phase::Picking;
                self.picker = Some(Picker::new(sessions, &self.cwd));
            }
            (_, None) => self.open(Open::New(self.new_session_params())),
        }
    }

    fn on_attached(&mut self, info: SessionInfo) {
        self.phase = Phase::Attached;
        self.picker = None;
        self.rewind = None;
        self.transcript = Transcript::default();
        self.approvals.clear();
        self.answer = Answer::Choosing;
        self.status = info.status;
        self.turn_started = None;
        self.prompt_tokens = 0;
        self.cached_tokens = 0;
        self.completion_tokens = 0;
        self.context_tokens = 0;
        self.todos.clear();
        self.goal = None;
        self.replay_until = info.last_seq;
        self.caught_up = false;
        self.scroll = None;
        let empty = info.last_seq == 0;
        self.session = Some(info);
        if empty {
            self.catch_up();
        }
    }

    /// The replay is over: what it rebuilt is made exact where events alone cannot tell (a
    /// loop the daemon resumed after a restart, goals checked by hand).
    fn catch_up(&mut self) {
        self.caught_up = true;
        if let Some(session_id) = self.session_id() {
            self.outbox.push(Request::GoalStatus {
                session_id,
                call: GoalCall::Sync,
            });
        }
    }

    fn on_goal_status(&mut self, call: GoalCall, status: &GoalStatus) {
        self.goal = status.running.then(|| GoalLoop {
            // An event read meanwhile may be newer than this answer: the cycle never goes back.
            cycle: self
                .goal
                .map_or(status.cycle, |goal| goal.cycle.max(status.cycle)),
            cap: status.cap,
            progress: Some((status.done, status.done + status.left)),
        });
        match call {
            GoalCall::Sync => {}
            GoalCall::Show => self.note(reports::goal_status(status), Tone::Plain),
            GoalCall::Add => {
                let next = if status.running {
                    "the running loop takes it up at its next cycle"
                } else {
                    "/goal on works through them"
                };
                self.note(
                    format!(
                        "goal added to {}: {} of {} open · {next}",
                        status.goals_file,
                        status.left,
                        status.done + status.left
                    ),
                    Tone::Info,
                );
            }
            // Its cycles and its end are events, which the transcript shows.
            GoalCall::Start if status.running => {
                self.flash = Some("goal loop started · /goal off stops it".to_owned());
            }
            GoalCall::Start => {}
            // Whether it was running is not told by the answer, and the loop's own stop event
            // may have cleared the banner already: the transcript has the summary if it ran.
            GoalCall::Stop => {
                self.flash =
                    Some("the goal loop is off · /goal status shows where it got".to_owned());
            }
        }
    }

    fn on_event(&mut self, seq: u64, kind: &EventKind, now: Instant) {
        if self.phase != Phase::Attached {
            return;
        }
        if !self.caught_up && seq >= self.replay_until {
            self.catch_up();
        }
        self.transcript.apply(kind);
        match kind {
            EventKind::TurnStarted { prompt, .. } => {
                self.editor.remember(prompt);
                self.turn_started = Some(now);
            }
            EventKind::AssistantMessage {
                usage: Some(usage), ..
            } => self.context_tokens = usage.prompt_tokens + usage.completion_tokens,
            EventKind::ApprovalRequested {
                request_id, tool, ..
            } => self.approvals.push_back(Pending {
                request_id: request_id.clone(),
                tool: tool.clone(),
            }),
            EventKind::ApprovalResolved { request_id, .. } => self.forget_approval(request_id),
            EventKind::ModeChanged { mode } => {
                if let Some(session) = &mut self.session {
                    session.mode = *mode;
                }
            }
            EventKind::ProfileChanged { profile } => {
                if let Some(session) = &mut self.session {
                    session.profile = profile.clone();
                }
                let model = self
                    .profile()
                    .map(|info| format!(" ({})", info.model))
                    .unwrap_or_default();
                self.note(
                    format!("profile is now {profile}{model}: the next request goes there"),
                    Tone::Info,
                );
            }
            EventKind::StatusChanged { status } => {
                self.status = *status;
                if *status == SessionStatus::Idle {
                    self.turn_started = None;
                }
            }
            EventKind::TodoUpdated { todos } => self.todos = todos.clone(),
            EventKind::GoalCycleStarted { cycle, cap } => {
                self.goal = Some(GoalLoop {
                    cycle: *cycle,
                    cap: *cap,
                    progress: self.goal.and_then(|goal| goal.progress),
                });
            }
            EventKind::GoalCycleFinished { done, left, .. } => {
                if let Some(goal) = &mut self.goal {
                    goal.progress = Some((*done, done + left));
                }
            }
            EventKind::GoalLoopStopped { .. } => self.goal = None,
            EventKind::Compacted { tokens_after, .. } => self.context_tokens = *tokens_after,
            EventKind::TurnFinished { usage, .. } => {
                self.prompt_tokens += usage.prompt_tokens;
                self.cached_tokens += usage.cached_tokens;
                self.completion_tokens += usage.completion_tokens;
                if self.context_tokens == 0 {
                    self.context_tokens = usage.prompt_tokens;
                }
                self.turn_started = None;
                // A finished turn withdraws whatever it was asking.
                self.approvals.clear();
                self.answer = Answer::Choosing;
            }
            _ => {}
        }
    }

    /// The rewind is done (the files and history are back): prompt `turn`'s text returns to
    /// the input, to be edited and sent again. A draft there goes to the history, not away.
    fn on_rewound(&mut self, prompt: &str, turn: u32) {
        self.rewind = None;
        let draft = self.editor.take();
        if !draft.trim().is_empty() && draft != prompt {
            self.editor.remember(&draft);
        }
        self.editor.set_text(prompt);
        self.completion_selected = 0;
        self.scroll = None;
        self.flash = Some(format!(
            "prompt {turn} is back in the input: edit it and press Enter · /rewind undo reverts"
        ));
    }

    fn forget_approval(&mut self, request_id: &str) {
        let was_front = self
            .approvals
            .front()
            .is_some_and(|pending| pending.request_id == request_id);
        self.approvals
            .retain(|pending| pending.request_id != request_id);
        if was_front {
            self.answer = Answer::Choosing;
        }
    }

    fn on_failed(&mut self, action: Action, message: String, code: Option<i32>) {
        match action {
            Action::Open if self.picker.is_some() => {
                if let Some(picker) = &mut self.picker {
                    picker.error = Some(message);
                }
            }
            Action::Open if self.phase != Phase::Attached => {
                self.exit = Some(Exit::Failed(message));
            }
            Action::ListSessions if self.phase == Phase::Connecting => {
                self.exit = Some(Exit::Failed(message));
            }
            Action::Rewind | Action::UndoRewind => {
                let message = if code == Some(ErrorCode::SessionBusy.code()) {
                    // The daemon's advice names cwcode-cli; here it is a key away.
                    "a turn is running or queued: rewind once it has ended (Esc cancels a running turn)"
                        .to_owned()
                } else {
                    message
                };
                match &mut self.rewind {
                    Some(picker) if action == Action::Rewind => picker.failed(message),
                    _ => self.note(message, Tone::Error),
                }
            }
            Action::Respond { request_id } => {
                if code == Some(ErrorCode::ApprovalNotFound.code()) {
                    // Answered from another terminal, or withdrawn: stop asking.
                    self.forget_approval(&request_id);
                } else {
                    self.answer = Answer::Choosing;
                    self.note(message, Tone::Error);
                }
            }
            _ => self.note(message, Tone::Error),
        }
    }

    // ---- terminal input -------------------------------------------------------------------

    pub fn on_terminal(&mut self, event: TermEvent, now: Instant) {
        match event {
            TermEvent::Key(key) if key.kind != KeyEventKind::Release => self.on_key(key, now),
            TermEvent::Paste(text) => self.on_paste(&text),
            TermEvent::Mouse(mouse) => match mouse.kind {
                MouseEventKind::ScrollUp => self.scroll_up(WHEEL_ROWS),
                MouseEventKind::ScrollDown => self.scroll_down(WHEEL_ROWS),
                _ => {}
            },
            _ => {}
        }
    }

    fn on_paste(&mut self, text: &str) {
        if let Some(picker) = &mut self.picker {
            text.chars()
                .filter(|c| !c.is_control())
                .for_each(|c| picker.type_char(c));
        } else if let Answer::Reason(editor) = &mut self.answer {
            editor.paste(text);
        } else if self.approval().is_none() && self.rewind.is_none() {
            self.editor.paste(text);
        }
    }

    pub fn on_key(&mut self, key: KeyEvent, now: Instant) {
        self.flash = None;
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            self.interrupt(now);
            return;
        }
        self.last_interrupt = None;
        if self.picker.is_some() {
            self.picker_key(key);
            return;
        }
        if self.phase != Phase::Attached {
            return;
        }
        // Keys that work whatever has the focus; the rest go to the approval or the input.
        match key.code {
            KeyCode::BackTab => self.cycle_mode(),
            KeyCode::PageUp => self.scroll_up(self.page()),
            KeyCode::PageDown => self.scroll_down(self.page()),
            KeyCode::End if ctrl => self.scroll = None,
            KeyCode::Home if ctrl => self.scroll = Some(0),
            KeyCode::Char('o') if ctrl => self.expanded = !self.expanded,
            _ if self.approval().is_some() => self.approval_key(key),
            _ if self.rewind.is_some() => self.rewind_key(key),
            _ => self.input_key(key),
        }
    }

    fn interrupt(&mut self, now: Instant) {
        if self.phase != Phase::Attached && self.picker.is_some() {
            self.exit = Some(Exit::Quit);
            return;
        }
        if let Some(picker) = &mut self.picker
            && !picker.filter.is_empty()
        {
            picker.filter.clear();
            return;
        }
        if matches!(self.answer, Answer::Reason(_)) {
            self.answer = Answer::Choosing;
            return;
        }
        if self.rewind.take().is_some() {
            return;
        }
        if !self.editor.is_empty() {
            self.editor.take();
            self.last_interrupt = None;
            return;
        }
        let twice = self
            .last_interrupt
            .is_some_and(|before| now.saturating_duration_since(before) <= DOUBLE_INTERRUPT);
        if twice {
            self.exit = Some(match &self.session {
                Some(session) => Exit::Detached(session.clone()),
                None => Exit::Quit,
            });
        } else {
            self.last_interrupt = Some(now);
            self.flash = Some("press Ctrl+C again to quit (the session keeps running)".to_owned());
        }
    }

    fn picker_key(&mut self, key: KeyEvent) {
        let Some(picker) = &mut self.picker else {
            return;
        };
        match key.code {
            KeyCode::Esc => {
                if self.phase == Phase::Attached {
                    self.picker = None;
                } else {
                    self.exit = Some(Exit::Quit);
                }
            }
            KeyCode::Up => picker.up(),
            KeyCode::Down | KeyCode::Tab => picker.down(),
            KeyCode::Backspace => picker.backspace(),
            KeyCode::Enter => match picker.choose() {
                Some(Choice::New) => self.open(Open::New(self.new_session_params())),
                Some(Choice::Attach(id)) => {
                    if self.session.as_ref().is_some_and(|s| s.id == id) {
                        self.picker = None;
                    } else {
                        self.open(Open::Existing(id));
                    }
                }
                None => {}
            },
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                picker.type_char(c);
            }
            _ => {}
        }
    }

    fn approval_key(&mut self, key: KeyEvent) {
        let Some(pending) = self.approval().cloned() else {
            return;
        };
        if key.code == KeyCode::Esc && !matches!(self.answer, Answer::Reason(_)) {
            self.cancel();
            return;
        }
        match &mut self.answer {
            Answer::Sent => {}
            Answer::Choosing => match key.code {
                KeyCode::Char('y' | 'Y') => self.respond(&pending, ApprovalDecision::Approve, None),
                KeyCode::Char('a' | 'A') => self.respond(&pending, ApprovalDecision::Always, None),
                KeyCode::Char('n' | 'N') => self.answer = Answer::Reason(Editor::new()),
                _ => {
                    self.flash = Some(format!(
                        "answer y (run {}), a (always allow it here) or n (refuse, with a reason)",
                        pending.tool
                    ));
                }
            },
            Answer::Reason(editor) => match key.code {
                KeyCode::Esc => self.answer = Answer::Choosing,
                KeyCode::Enter => {
                    let reason = editor.text().trim().to_owned();
                    let reason = (!reason.is_empty()).then_some(reason);
                    self.respond(&pending, ApprovalDecision::Deny, reason);
                }
                _ => edit(editor, key),
            },
        }
    }

    fn rewind_key(&mut self, key: KeyEvent) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        let Some(picker) = &mut self.rewind else {
            return;
        };
        match key.code {
            KeyCode::Esc => self.rewind = None,
            KeyCode::Up => picker.up(),
            KeyCode::Down | KeyCode::Tab => picker.down(),
            KeyCode::Home => picker.first(),
            KeyCode::End => picker.last(),
            KeyCode::Enter => {
                if let Some(turn) = picker.choose() {
                    self.outbox.push(Request::Rewind { session_id, turn });
                }
            }
            _ => {}
        }
    }

    fn respond(&mut self, pending: &Pending, decision: ApprovalDecision, reason: Option<String>) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        self.answer = Answer::Sent;
        self.outbox.push(Request::Respond(ApprovalRespondParams {
            session_id,
            request_id: pending.request_id.clone(),
            decision,
            reason,
        }));
    }

    fn input_key(&mut self, key: KeyEvent) {
        let candidates = self.completions();
        let popup = !candidates.is_empty();
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        match key.code {
            KeyCode::Esc if popup => self.completion_dismissed = Some(self.editor.text()),
            KeyCode::Esc => self.cancel(),
            KeyCode::Tab if popup => {
                let selected = &candidates[self.completion_selected.min(candidates.len() - 1)];
                self.editor.set_text(&selected.replacement);
                self.completion_selected = 0;
            }
            KeyCode::Up if popup => {
                self.completion_selected = self.completion_selected.saturating_sub(1);
            }
            KeyCode::Down if popup => {
                self.completion_selected = (self.completion_selected + 1).min(candidates.len() - 1);
            }
            KeyCode::Enter if alt || shift => self.editor.newline(),
            KeyCode::Enter if popup => {
                let typed = self.editor.text();
                let exact = commands::COMMANDS
                    .iter()
                    .any(|spec| typed.trim() == format!("/{}", spec.name));
                let selected = &candidates[self.completion_selected.min(candidates.len() - 1)];
                if !exact {
                    self.editor.set_text(&selected.replacement);
                }
                self.completion_selected = 0;
                // A command that needs an argument waits for it.
                if exact || !selected.replacement.ends_with(' ') {
                    self.submit();
                }
            }
            KeyCode::Enter => self.submit(),
            KeyCode::Char('j') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.editor.newline();
            }
            KeyCode::Char('d')
                if key.modifiers.contains(KeyModifiers::CONTROL) && self.editor.is_empty() =>
            {
                if let Some(session) = &self.session {
                    self.exit = Some(Exit::Detached(session.clone()));
                }
            }
            _ => {
                let before = self.editor.text();
                edit(&mut self.editor, key);
                if self.editor.text() != before {
                    self.completion_selected = 0;
                }
            }
        }
    }

    fn submit(&mut self) {
        let text = self.editor.text();
        match commands::parse_input(&text) {
            Input::Empty => {}
            Input::Prompt(prompt) => {
                let Some(session_id) = self.session_id() else {
                    return;
                };
                if self.connection != Connection::Connected {
                    self.flash = Some("not connected to cwcoded: the prompt is kept".to_owned());
                    return;
                }
                self.editor.take();
                self.editor.remember(&prompt);
                self.scroll = None;
                self.outbox.push(Request::Send {
                    session_id,
                    text: prompt,
                });
            }
            Input::Command(command) => {
                self.editor.take();
                self.command(command);
            }
        }
    }

    fn command(&mut self, command: Command) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        match command {
            Command::ShowMode => {
                let mode = self.mode();
                self.note(
                    format!(
                        "mode is {mode}: {} (Shift+Tab cycles; /mode plan|code|yolo)",
                        format::mode_meaning(mode)
                    ),
                    Tone::Info,
                );
            }
            Command::SetMode(mode) if mode == self.mode() => {
                self.note(format!("already in {mode} mode"), Tone::Info);
            }
            Command::SetMode(mode) => self.outbox.push(Request::SetMode { session_id, mode }),
            Command::Model => {
                if self.profiles.is_empty() {
                    self.show_profiles = true;
                    self.outbox.push(Request::ListProfiles);
                } else {
                    self.show_model();
                }
            }
            Command::SetProfile(profile)
                if self.session.as_ref().is_some_and(|s| s.profile == profile) =>
            {
                self.note(format!("already on profile {profile}"), Tone::Info);
            }
            Command::SetProfile(profile) => self.outbox.push(Request::SetProfile {
                session_id,
                profile,
            }),
            Command::Checkpoints => self.outbox.push(Request::Checkpoints { session_id }),
            Command::Rewind(turn) => self.outbox.push(Request::Rewind { session_id, turn }),
            Command::UndoRewind => self.outbox.push(Request::UndoRewind { session_id }),
            Command::Compact => {
                self.outbox.push(Request::Compact { session_id });
                self.note(
                    "compacting: the model summarises the older turns (after any queued prompt)…",
                    Tone::Info,
                );
            }
            Command::Cache => self.outbox.push(Request::Cache { session_id }),
            Command::Cost => self.outbox.push(Request::Cost { session_id }),
            Command::GoalAdd(text) => self.outbox.push(Request::GoalAdd { session_id, text }),
            Command::GoalOn { cap } => self.outbox.push(Request::GoalStart(GoalStartParams {
                session_id,
                cap,
                ..GoalStartParams::default()
            })),
            Command::GoalOff => self.outbox.push(Request::GoalStop { session_id }),
            Command::GoalStatus => self.outbox.push(Request::GoalStatus {
                session_id,
                call: GoalCall::Show,
            }),
            Command::Todo if self.todos.is_empty() => self.note(
                "no todo list: the model keeps one (todo_write) when a task has several steps",
                Tone::Info,
            ),
            Command::Todo => {
                self.show_todos = !self.show_todos;
                self.flash = Some(
                    if self.show_todos {
                        "todo list shown"
                    } else {
                        "todo list hidden: /todo shows it again"
                    }
                    .to_owned(),
                );
            }
            Command::Sessions => self.outbox.push(Request::ListSessions),
            Command::New => {
                let current = self.session.as_ref();
                let params = CreateSessionParams {
                    cwd: self.cwd.clone(),
                    profile: current.map(|s| s.profile.clone()),
                    mode: current.map(|s| s.mode),
                    title: None,
                };
                self.open(Open::New(params));
            }
            Command::Cancel => self.cancel(),
            Command::Detach => {
                if let Some(session) = &self.session {
                    self.exit = Some(Exit::Detached(session.clone()));
                }
            }
            Command::Help => {
                let mut text = commands::HELP.to_owned();
                for spec in commands::COMMANDS {
                    let usage = format!("/{} {}", spec.name, spec.args);
                    text.push_str(&format!("\n  {:<20} {}", usage.trim_end(), spec.about));
                }
                text.push_str("\n  //text               send a prompt that starts with /");
                self.note(text, Tone::Info);
            }
            Command::Invalid(message) => self.note(message, Tone::Error),
        }
    }

    fn show_model(&mut self) {
        let current = self.session.as_ref().map(|s| s.profile.clone());
        let mut text = String::from("profiles (from config.json):");
        for profile in &self.profiles {
            let marker = if Some(&profile.name) == current.as_ref() {
                "*"
            } else {
                " "
            };
            let key = if profile.has_key {
                ""
            } else {
                " · no API key"
            };
            let default = if profile.is_default {
                " · default"
            } else {
                ""
            };
            text.push_str(&format!(
                "\n{marker} {} — {} at {}{default}{key}",
                profile.name, profile.model, profile.base_url
            ));
        }
        text.push_str("\n/model NAME switches this session to that profile from its next request.");
        self.note(text, Tone::Info);
    }

    fn cancel(&mut self) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        if self.busy() || !self.approvals.is_empty() {
            self.outbox.push(Request::Cancel { session_id });
            self.flash = Some("cancelling the turn…".to_owned());
        }
    }

    fn cycle_mode(&mut self) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        let mode = commands::next_mode(self.mode());
        self.outbox.push(Request::SetMode { session_id, mode });
    }

    fn page(&self) -> usize {
        self.last_height.saturating_sub(2).max(1)
    }

    fn scroll_up(&mut self, rows: usize) {
        let bottom = self.last_rows.saturating_sub(self.last_height);
        let top = self.scroll.unwrap_or(bottom);
        self.scroll = Some(top.saturating_sub(rows));
    }

    fn scroll_down(&mut self, rows: usize) {
        let Some(top) = self.scroll else { return };
        let bottom = self.last_rows.saturating_sub(self.last_height);
        // Reaching the bottom resumes following it.
        self.scroll = (top + rows < bottom).then_some(top + rows);
    }
}

/// Editing keys shared by the prompt and the deny reason.
fn edit(editor: &mut Editor, key: KeyEvent) {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    match key.code {
        KeyCode::Char('a') if ctrl => editor.home(),
        KeyCode::Char('e') if ctrl => editor.end(),
        KeyCode::Char('u') if ctrl => editor.kill_to_start(),
        KeyCode::Char('k') if ctrl => editor.kill_to_end(),
        KeyCode::Char('w') if ctrl => editor.delete_word(),
        KeyCode::Backspace if alt || ctrl => editor.delete_word(),
        KeyCode::Char(c) if !ctrl && !alt => editor.insert_char(c),
        KeyCode::Backspace => editor.backspace(),
        KeyCode::Delete => editor.delete(),
        KeyCode::Left => editor.left(),
        KeyCode::Right => editor.right(),
        KeyCode::Home => editor.home(),
        KeyCode::End => editor.end(),
        KeyCode::Up => editor.up(),
        KeyCode::Down => editor.down(),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use cwcode_protocol::{
        CacheReport, CostReport, Event, GoalItem, RewindResult, TodoStatus, TurnCache, TurnOutcome,
        Usage,
    };

    use super::*;
    use crate::fixtures::{CWD, attached_app, checkpoint, feed, session};

    fn press(app: &mut App, code: KeyCode, now: Instant) {
        app.on_key(KeyEvent::new(code, KeyModifiers::NONE), now);
    }

    fn ctrl(app: &mut App, c: char, now: Instant) {
        app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL), now);
    }

    fn type_text(app: &mut App, text: &str, now: Instant) {
        text.chars().for_each(|c| press(app, KeyCode::Char(c), now));
    }

    fn approval_requested(request_id: &str) -> EventKind {
        EventKind::ApprovalRequested {
            request_id: request_id.to_owned(),
            call_id: format!("call-{request_id}"),
            tool: "bash".to_owned(),
            arguments: r#"{"command":"rm -rf target"}"#.to_owned(),
        }
    }

    /// The transcript as text, a row a line.
    fn transcript_text(app: &mut App) -> String {
        let rows = app.transcript.layout(200, false);
        let lines: Vec<String> = app
            .transcript
            .rows(0, rows)
            .iter()
            .map(|line| line.to_string())
            .collect();
        lines.join("\n")
    }

    fn run_command(app: &mut App, command: &str, now: Instant) {
        type_text(app, command, now);
        press(app, KeyCode::Enter, now);
    }

    fn rewind_result(turn: u32, prompt: &str) -> RewindResult {
        RewindResult {
            turn,
            prompt: prompt.to_owned(),
            restored: vec!["main.rs".to_owned()],
            removed: Vec::new(),
            failed: Vec::new(),
        }
    }

    fn started_app(startup: Startup, sessions: Vec<SessionInfo>, now: Instant) -> App {
        let mut app = App::new(CWD.to_owned(), startup, None, None);
        app.on_reply(Reply::Connected, now);
        app.on_reply(Reply::Sessions(sessions), now);
        app
    }

    fn opened(app: &App) -> Vec<String> {
        app.outbox
            .iter()
            .filter_map(|request| match request {
                Request::Open(Open::Existing(id)) => Some(id.clone()),
                Request::Open(Open::New(params)) => Some(format!("new in {}", params.cwd)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn without_flags_the_picker_opens_only_when_this_directory_has_sessions() {
        let now = Instant::now();
        let app = started_app(
            Startup::Choose,
            vec![session("elsewhere", "/other", "")],
            now,
        );
        assert_eq!(opened(&app), [format!("new in {CWD}")]);
        assert!(app.picker.is_none());

        let mut app = started_app(Startup::Choose, vec![session("mine", CWD, "")], now);
        assert_eq!(app.phase, Phase::Picking);
        assert!(opened(&app).is_empty());
        press(&mut app, KeyCode::Enter, now);
        assert_eq!(opened(&app), ["mine"]);
    }

    #[test]
    fn an_unknown_id_typed_in_the_picker_is_reported_there() {
        let now = Instant::now();
        let mut app = started_app(Startup::Choose, vec![session("mine", CWD, "")], now);
        type_text(&mut app, "zzz", now);
        press(&mut app, KeyCode::Enter, now);
        assert_eq!(opened(&app), ["zzz"]);
        app.on_reply(
            Reply::Failed {
                action: Action::Open,
                message: "no session matches `zzz`".to_owned(),
                code: Some(ErrorCode::SessionNotFound.code()),
            },
            now,
        );
        assert!(app.exit.is_none());
        let error = app.picker.as_ref().and_then(|picker| picker.error.clone());
        assert_eq!(error.as_deref(), Some("no session matches `zzz`"));
    }

    #[test]
    fn continue_opens_the_latest_session_here_or_says_how_to_start_one() {
        let now = Instant::now();
        let sessions = vec![
            session("other", "/other", ""),
            session("latest", CWD, ""),
            session("older", CWD, ""),
        ];
        let app = started_app(Startup::Continue, sessions, now);
        assert_eq!(opened(&app), ["latest"]);
        let app = started_app(Startup::Continue, Vec::new(), now);
        let Some(Exit::Failed(message)) = &app.exit else {
            panic!("expected a failure, got {:?}", app.exit);
        };
        assert!(
            message.contains("no session has /home/dev/shop"),
            "{message}"
        );
    }

    #[test]
    fn a_session_that_cannot_be_opened_ends_the_program_with_the_reason() {
        let now = Instant::now();
        let mut app = App::new(CWD.to_owned(), Startup::Session("nope".into()), None, None);
        app.on_reply(Reply::Connected, now);
        assert_eq!(opened(&app), ["nope"]);
        app.on_reply(
            Reply::Failed {
                action: Action::Open,
                message: "no session matches `nope`".to_owned(),
                code: Some(ErrorCode::SessionNotFound.code()),
            },
            now,
        );
        assert_eq!(
            app.exit,
            Some(Exit::Failed("no session matches `nope`".to_owned()))
        );
    }

    #[test]
    fn enter_sends_the_prompt_and_alt_enter_adds_a_line() {
        let now = Instant::now();
        let mut app = attached_app(now);
        type_text(&mut app, "fix", now);
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT), now);
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT), now);
        type_text(&mut app, "the tests", now);
        press(&mut app, KeyCode::Enter, now);
        let [Request::Send { text, .. }] = &app.outbox[..] else {
            panic!("expected one send: {:?}", app.outbox);
        };
        assert_eq!(text, "fix\n\nthe tests");
        assert!(app.editor.is_empty());
        // Up brings it back.
        press(&mut app, KeyCode::Up, now);
        assert_eq!(app.editor.text(), "fix\n\nthe tests");
    }

    #[test]
    fn a_prompt_typed_while_the_daemon_is_away_is_kept() {
        let now = Instant::now();
        let mut app = attached_app(now);
        app.on_reply(Reply::Lost("connection reset".to_owned()), now);
        type_text(&mut app, "hello", now);
        press(&mut app, KeyCode::Enter, now);
        assert!(app.outbox.is_empty());
        assert_eq!(app.editor.text(), "hello");
        assert!(
            app.flash
                .as_deref()
                .unwrap_or_default()
                .contains("not connected")
        );
        app.on_reply(Reply::Reconnected, now);
        press(&mut app, KeyCode::Enter, now);
        assert_eq!(app.outbox.len(), 1);
    }

    #[test]
    fn shift_tab_asks_for_the_next_mode() {
        let now = Instant::now();
        let mut app = attached_app(now);
        press(&mut app, KeyCode::BackTab, now);
        assert!(matches!(
            app.outbox[..],
            [Request::SetMode {
                mode: Mode::Yolo,
                ..
            }]
        ));
        // The daemon's event, seen by every attached client, is what changes the mode.
        feed(&mut app, now, [EventKind::ModeChanged { mode: Mode::Yolo }]);
        assert_eq!(app.mode(), Mode::Yolo);
    }

    #[test]
    fn esc_cancels_a_running_turn_only() {
        let now = Instant::now();
        let mut app = attached_app(now);
        press(&mut app, KeyCode::Esc, now);
        assert!(app.outbox.is_empty());
        feed(
            &mut app,
            now,
            [EventKind::StatusChanged {
                status: SessionStatus::Running,
            }],
        );
        press(&mut app, KeyCode::Esc, now);
        assert!(matches!(app.outbox[..], [Request::Cancel { .. }]));
    }

    #[test]
    fn approvals_are_answered_with_y_a_or_n_and_a_reason() {
        let now = Instant::now();
        let mut app = attached_app(now);
        feed(
            &mut app,
            now,
            [approval_requested("r1"), approval_requested("r2")],
        );
        // Typing is not an answer: nothing is approved by accident.
        press(&mut app, KeyCode::Char('x'), now);
        assert!(app.outbox.is_empty());
        assert!(app.flash.is_some());
        press(&mut app, KeyCode::Char('y'), now);
        let Some(Request::Respond(params)) = app.outbox.pop() else {
            panic!("expected an answer");
        };
        assert_eq!(
            (params.request_id.as_str(), params.decision),
            ("r1", ApprovalDecision::Approve)
        );
        // Answered once: more keys wait for the daemon's word.
        press(&mut app, KeyCode::Char('y'), now);
        assert!(app.outbox.is_empty());
        feed(
            &mut app,
            now,
            [EventKind::ApprovalResolved {
                request_id: "r1".to_owned(),
                decision: ApprovalDecision::Approve,
                reason: None,
            }],
        );
        assert_eq!(app.approval().map(|p| p.request_id.as_str()), Some("r2"));
        press(&mut app, KeyCode::Char('n'), now);
        type_text(&mut app, "not target", now);
        press(&mut app, KeyCode::Enter, now);
        let Some(Request::Respond(params)) = app.outbox.pop() else {
            panic!("expected a denial");
        };
        assert_eq!(params.decision, ApprovalDecision::Deny);
        assert_eq!(params.reason.as_deref(), Some("not target"));
    }

    #[test]
    fn an_approval_answered_elsewhere_is_no_longer_asked() {
        let now = Instant::now();
        let mut app = attached_app(now);
        feed(&mut app, now, [approval_requested("r1")]);
        press(&mut app, KeyCode::Char('a'), now);
        app.on_reply(
            Reply::Failed {
                action: Action::Respond {
                    request_id: "r1".to_owned(),
                },
                message: "no pending approval r1".to_owned(),
                code: Some(ErrorCode::ApprovalNotFound.code()),
            },
            now,
        );
        assert!(app.approval().is_none());
    }

    #[test]
    fn approvals_in_the_replay_are_asked_only_once_it_is_over() {
        let now = Instant::now();
        let mut app = attached_app(now);
        let mut info = session("0198a1b2c3d4e5f6", CWD, "shop");
        info.last_seq = 2;
        app.on_reply(Reply::Attached(info), now);
        let event = |seq, kind| {
            Reply::Event(Event {
                seq,
                time: String::new(),
                kind,
            })
        };
        app.on_reply(event(1, approval_requested("r1")), now);
        assert!(app.approval().is_none());
        app.on_reply(
            event(
                2,
                EventKind::StatusChanged {
                    status: SessionStatus::AwaitingApproval,
                },
            ),
            now,
        );
        assert_eq!(app.approval().map(|p| p.request_id.as_str()), Some("r1"));
    }

    #[test]
    fn a_finished_turn_withdraws_its_approvals_and_counts_the_cache() {
        let now = Instant::now();
        let mut app = attached_app(now);
        feed(
            &mut app,
            now,
            [
                approval_requested("r1"),
                EventKind::TurnFinished {
                    turn: 1,
                    outcome: TurnOutcome::Cancelled,
                    usage: Usage {
                        prompt_tokens: 1000,
                        completion_tokens: 10,
                        cached_tokens: 250,
                    },
                    error: None,
                },
                EventKind::TurnFinished {
                    turn: 2,
                    outcome: TurnOutcome::Completed,
                    usage: Usage {
                        prompt_tokens: 1000,
                        completion_tokens: 10,
                        cached_tokens: 750,
                    },
                    error: None,
                },
            ],
        );
        assert!(app.approval().is_none());
        assert_eq!((app.cached_tokens, app.prompt_tokens), (1000, 2000));
    }

    #[test]
    fn ctrl_c_clears_the_input_then_quits_when_pressed_twice() {
        let start = Instant::now();
        let mut app = attached_app(start);
        type_text(&mut app, "draft", start);
        ctrl(&mut app, 'c', start);
        assert!(app.editor.is_empty());
        assert!(app.exit.is_none());
        ctrl(&mut app, 'c', start);
        assert!(app.exit.is_none());
        // Too slow: it only warns again.
        ctrl(&mut app, 'c', start + Duration::from_secs(3));
        assert!(app.exit.is_none());
        ctrl(&mut app, 'c', start + Duration::from_secs(4));
        assert!(matches!(app.exit, Some(Exit::Detached(_))));
    }

    #[test]
    fn sessions_opens_the_picker_and_choosing_another_attaches_to_it() {
        let now = Instant::now();
        let mut app = attached_app(now);
        type_text(&mut app, "/sessions", now);
        press(&mut app, KeyCode::Enter, now);
        assert!(matches!(app.outbox[..], [Request::ListSessions]));
        app.outbox.clear();
        app.on_reply(
            Reply::Sessions(vec![
                session("0198a1b2c3d4e5f6", CWD, "shop"),
                session("0198ffff", CWD, "other"),
            ]),
            now,
        );
        assert!(app.picker.is_some());
        press(&mut app, KeyCode::Down, now);
        press(&mut app, KeyCode::Enter, now);
        assert_eq!(opened(&app), ["0198ffff"]);
        app.on_reply(Reply::Attached(session("0198ffff", CWD, "other")), now);
        assert!(app.picker.is_none());
        assert_eq!(
            app.session.as_ref().map(|s| s.id.as_str()),
            Some("0198ffff")
        );
    }

    #[test]
    fn model_lists_profiles_and_says_how_to_switch() {
        let now = Instant::now();
        let mut app = attached_app(now);
        run_command(&mut app, "/model", now);
        let text = transcript_text(&mut app);
        assert!(
            text.contains("* deepseek — deepseek-chat at https://api.deepseek.com"),
            "{text}"
        );
        assert!(text.contains("/model NAME switches"), "{text}");
        assert!(!text.contains("cannot switch"), "{text}");
    }

    /// The fixture's session, which also knows a second profile, `local`.
    fn app_with_two_profiles(now: Instant) -> App {
        let mut app = attached_app(now);
        let mut profiles = app.profiles.clone();
        profiles.push(ProfileInfo {
            name: "local".to_owned(),
            base_url: "http://localhost:11434/v1".to_owned(),
            model: "qwen3-coder".to_owned(),
            has_key: true,
            is_default: false,
            context_window: None,
            prices: None,
        });
        app.on_reply(Reply::Profiles(profiles), now);
        app
    }

    #[test]
    fn model_name_switches_the_profile() {
        let now = Instant::now();
        let mut app = app_with_two_profiles(now);
        run_command(&mut app, "/model local", now);
        let [
            Request::SetProfile {
                session_id,
                profile,
            },
        ] = &app.outbox[..]
        else {
            panic!("expected one setProfile: {:?}", app.outbox);
        };
        assert_eq!(session_id, "0198a1b2c3d4e5f6");
        assert_eq!(profile, "local");
        app.outbox.clear();

        let mut info = app.session.clone().unwrap();
        info.profile = "local".to_owned();
        app.on_reply(Reply::ProfileSet(info), now);
        assert_eq!(app.session.as_ref().unwrap().profile, "local");
        assert_eq!(app.profile().unwrap().model, "qwen3-coder");
        // The journalled event says it, once.
        feed(
            &mut app,
            now,
            [EventKind::ProfileChanged {
                profile: "local".to_owned(),
            }],
        );
        let text = transcript_text(&mut app);
        assert_eq!(text.matches("profile is now local").count(), 1, "{text}");
        assert!(
            text.contains("profile is now local (qwen3-coder)"),
            "{text}"
        );

        // The same profile again asks nothing.
        run_command(&mut app, "/profile local", now);
        assert!(app.outbox.is_empty());
        assert!(transcript_text(&mut app).contains("already on profile local"));
    }

    #[test]
    fn a_refused_switch_shows_the_daemons_message() {
        let now = Instant::now();
        let mut app = app_with_two_profiles(now);
        run_command(&mut app, "/model nope", now);
        app.on_reply(
            Reply::Failed {
                action: Action::SetProfile,
                message: "unknown profile `nope`: config.json has deepseek, local".to_owned(),
                code: None,
            },
            now,
        );
        assert_eq!(app.session.as_ref().unwrap().profile, "deepseek");
        let text = transcript_text(&mut app);
        assert!(text.contains("unknown profile `nope`"), "{text}");
    }

    #[test]
    fn another_clients_switch_updates_the_session() {
        let now = Instant::now();
        let mut app = app_with_two_profiles(now);
        feed(
            &mut app,
            now,
            [EventKind::ProfileChanged {
                profile: "local".to_owned(),
            }],
        );
        assert_eq!(app.session.as_ref().unwrap().profile, "local");
        assert_eq!(app.profile().unwrap().model, "qwen3-coder");
        assert!(transcript_text(&mut app).contains("profile is now local (qwen3-coder)"));
    }

    #[test]
    fn paging_up_stops_following_and_paging_back_down_resumes() {
        let now = Instant::now();
        let mut app = attached_app(now);
        app.last_rows = 100;
        app.last_height = 20;
        press(&mut app, KeyCode::PageUp, now);
        assert_eq!(app.scroll, Some(62));
        press(&mut app, KeyCode::PageDown, now);
        assert_eq!(app.scroll, None);
        app.on_terminal(
            TermEvent::Mouse(crossterm::event::MouseEvent {
                kind: MouseEventKind::ScrollUp,
                column: 0,
                row: 0,
                modifiers: KeyModifiers::NONE,
            }),
            now,
        );
        assert_eq!(app.scroll, Some(77));
        // Sending a prompt jumps back to the bottom.
        type_text(&mut app, "go", now);
        press(&mut app, KeyCode::Enter, now);
        assert_eq!(app.scroll, None);
    }

    #[test]
    fn pasted_text_keeps_its_newlines_and_is_not_sent() {
        let now = Instant::now();
        let mut app = attached_app(now);
        app.on_terminal(TermEvent::Paste("line one\nline two".to_owned()), now);
        assert_eq!(app.editor.text(), "line one\nline two");
        assert!(app.outbox.is_empty());
    }

    #[test]
    fn tab_completes_a_command_and_enter_runs_it() {
        let now = Instant::now();
        let mut app = attached_app(now);
        type_text(&mut app, "/mo", now);
        press(&mut app, KeyCode::Tab, now);
        assert_eq!(app.editor.text(), "/mode ");
        type_text(&mut app, "p", now);
        press(&mut app, KeyCode::Enter, now);
        assert!(matches!(
            app.outbox[..],
            [Request::SetMode {
                mode: Mode::Plan,
                ..
            }]
        ));
        app.outbox.clear();
        type_text(&mut app, "/det", now);
        press(&mut app, KeyCode::Enter, now);
        assert!(matches!(app.exit, Some(Exit::Detached(_))));
    }

    #[test]
    fn rewind_picks_a_checkpoint_and_its_prompt_comes_back_to_the_input() {
        let now = Instant::now();
        let mut app = attached_app(now);
        run_command(&mut app, "/rewind", now);
        assert!(matches!(app.outbox[..], [Request::Checkpoints { .. }]));
        app.outbox.clear();
        app.on_reply(
            Reply::Checkpoints(vec![
                checkpoint(1, "say hello", &[]),
                checkpoint(2, "change the greeting\nand the name", &["main.rs"]),
                checkpoint(3, "add a test", &["tests/a.rs"]),
            ]),
            now,
        );
        // Newest first: one Down is prompt 2.
        press(&mut app, KeyCode::Down, now);
        press(&mut app, KeyCode::Enter, now);
        let [Request::Rewind { turn: 2, .. }] = app.outbox[..] else {
            panic!("expected a rewind to before prompt 2: {:?}", app.outbox);
        };
        app.outbox.clear();
        // Waiting for the daemon: Enter again asks nothing more.
        press(&mut app, KeyCode::Enter, now);
        assert!(app.outbox.is_empty());
        app.on_reply(
            Reply::Rewound(rewind_result(2, "change the greeting\nand the name")),
            now,
        );
        assert!(app.rewind.is_none());
        assert_eq!(app.editor.text(), "change the greeting\nand the name");
        assert!(
            app.flash
                .as_deref()
                .unwrap_or_default()
                .contains("prompt 2 is back in the input"),
            "{:?}",
            app.flash
        );
        // Every terminal on the session reads the event.
        feed(
            &mut app,
            now,
            [EventKind::Rewound {
                result: rewind_result(2, "change the greeting"),
            }],
        );
        let text = transcript_text(&mut app);
        assert!(
            text.contains("rewound to before prompt 2: restored main.rs"),
            "{text}"
        );
    }

    #[test]
    fn a_draft_typed_while_rewinding_goes_to_the_history() {
        let now = Instant::now();
        let mut app = attached_app(now);
        app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "first", &[])]), now);
        press(&mut app, KeyCode::Enter, now);
        // Closed before the daemon answered, and typed into the input meanwhile.
        press(&mut app, KeyCode::Esc, now);
        assert!(app.rewind.is_none());
        type_text(&mut app, "draft", now);
        app.on_reply(Reply::Rewound(rewind_result(1, "first")), now);
        assert_eq!(app.editor.text(), "first");
        press(&mut app, KeyCode::Up, now);
        assert_eq!(app.editor.text(), "draft");
    }

    #[test]
    fn a_rewind_refused_while_a_turn_runs_says_so_in_the_picker() {
        let now = Instant::now();
        let mut app = attached_app(now);
        app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "first", &[])]), now);
        press(&mut app, KeyCode::Enter, now);
        app.outbox.clear();
        app.on_reply(
            Reply::Failed {
                action: Action::Rewind,
                message: "a turn is running or queued: cancel it (`cwcode-cli cancel`) or wait, then retry".to_owned(),
                code: Some(ErrorCode::SessionBusy.code()),
            },
            now,
        );
        let picker = app.rewind.as_ref().expect("the picker stays open");
        assert_eq!(picker.rewinding, None);
        let error = picker.error.as_deref().unwrap_or_default();
        assert!(error.starts_with("a turn is running or queued"), "{error}");
        assert!(error.contains("Esc cancels"), "{error}");
        // Any other failure is the daemon's word, as it is.
        press(&mut app, KeyCode::Esc, now);
        run_command(&mut app, "/rewind 9", now);
        assert!(matches!(app.outbox[..], [Request::Rewind { turn: 9, .. }]));
        app.on_reply(
            Reply::Failed {
                action: Action::Rewind,
                message: "no checkpoint for prompt 9 (there are 1)".to_owned(),
                code: Some(ErrorCode::Checkpoint.code()),
            },
            now,
        );
        let text = transcript_text(&mut app);
        assert!(text.contains("· no checkpoint for prompt 9"), "{text}");
    }

    #[test]
    fn rewind_without_checkpoints_says_so_and_esc_or_ctrl_c_close_the_picker() {
        let now = Instant::now();
        let mut app = attached_app(now);
        app.on_reply(Reply::Checkpoints(Vec::new()), now);
        assert!(app.rewind.is_none());
        assert!(transcript_text(&mut app).contains("no checkpoints yet"));
        app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "a", &[])]), now);
        ctrl(&mut app, 'c', now);
        assert!(app.rewind.is_none());
        assert!(app.exit.is_none());
        app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "a", &[])]), now);
        // Typing is not for the hidden input.
        type_text(&mut app, "xyz", now);
        app.on_terminal(TermEvent::Paste("pasted".to_owned()), now);
        assert!(app.editor.is_empty());
        press(&mut app, KeyCode::Esc, now);
        assert!(app.rewind.is_none());
        assert!(app.outbox.is_empty());
    }

    #[test]
    fn an_approval_asked_while_the_rewind_picker_is_open_comes_first() {
        let now = Instant::now();
        let mut app = attached_app(now);
        app.on_reply(Reply::Checkpoints(vec![checkpoint(1, "a", &[])]), now);
        feed(&mut app, now, [approval_requested("r1")]);
        press(&mut app, KeyCode::Char('y'), now);
        assert!(matches!(app.outbox[..], [Request::Respond(_)]));
        assert!(app.rewind.is_some());
    }

    #[test]
    fn rewind_undo_takes_back_the_prompt_it_had_returned() {
        let now = Instant::now();
        let mut app = attached_app(now);
        app.on_reply(Reply::Rewound(rewind_result(2, "change it")), now);
        assert_eq!(app.editor.text(), "change it");
        // The input is busy with that prompt: /rewind undo is typed over it.
        app.editor.take();
        run_command(&mut app, "/rewind undo", now);
        assert!(matches!(app.outbox[..], [Request::UndoRewind { .. }]));
        app.editor.set_text("change it");
        app.on_reply(Reply::RewindUndone(rewind_result(2, "change it")), now);
        assert!(app.editor.is_empty());
        // Anything else typed there stays.
        app.editor.set_text("something new");
        app.on_reply(Reply::RewindUndone(rewind_result(2, "change it")), now);
        assert_eq!(app.editor.text(), "something new");
    }

    #[test]
    fn cache_and_cost_are_asked_for_and_shown_in_the_transcript() {
        let now = Instant::now();
        let mut app = attached_app(now);
        run_command(&mut app, "/cache", now);
        run_command(&mut app, "/cost", now);
        assert!(matches!(
            app.outbox[..],
            [Request::Cache { .. }, Request::Cost { .. }]
        ));
        app.on_reply(
            Reply::Cache(CacheReport {
                session_id: "s".to_owned(),
                turns: vec![TurnCache {
                    turn: 1,
                    requests: 1,
                    prompt_tokens: 2_000,
                    cached_tokens: 1_500,
                    completion_tokens: 50,
                    hit_ratio: 0.75,
                    last_request_bytes: 9_000,
                    last_shared_prefix_bytes: 0,
                }],
                prompt_tokens: 2_000,
                cached_tokens: 1_500,
                completion_tokens: 50,
                hit_ratio: 0.75,
                first_request_bytes: 9_000,
            }),
            now,
        );
        app.on_reply(
            Reply::Cost(CostReport {
                session_id: "s".to_owned(),
                profile: "local".to_owned(),
                prices: None,
                turns: Vec::new(),
                total: 0.0,
            }),
            now,
        );
        let text = transcript_text(&mut app);
        assert!(text.contains("    1     1    2.0k    1.5k   75%"), "{text}");
        assert!(text.contains("profile `local` has no prices"), "{text}");
    }

    #[test]
    fn compact_asks_the_daemon_and_the_transcript_tells_the_result() {
        let now = Instant::now();
        let mut app = attached_app(now);
        run_command(&mut app, "/compact", now);
        assert!(matches!(app.outbox[..], [Request::Compact { .. }]));
        feed(
            &mut app,
            now,
            [EventKind::Compacted {
                summary: "so far".to_owned(),
                kept_messages: 4,
                tokens_before: 48_000,
                tokens_after: 6_000,
            }],
        );
        let text = transcript_text(&mut app);
        assert!(text.contains("compacting:"), "{text}");
        assert!(text.contains("48.0k → 6.0k tokens"), "{text}");
        assert_eq!(app.context_tokens, 6_000);
    }

    #[test]
    fn todo_toggles_the_list_once_the_model_keeps_one() {
        let now = Instant::now();
        let mut app = attached_app(now);
        run_command(&mut app, "/todo", now);
        assert!(transcript_text(&mut app).contains("no todo list"));
        assert!(app.show_todos);
        feed(
            &mut app,
            now,
            [EventKind::TodoUpdated {
                todos: vec![TodoItem {
                    content: "fix it".to_owned(),
                    status: TodoStatus::Pending,
                }],
            }],
        );
        run_command(&mut app, "/todo", now);
        assert!(!app.show_todos);
        run_command(&mut app, "/todo", now);
        assert!(app.show_todos);
        assert_eq!(app.flash.as_deref(), Some("todo list shown"));
    }

    #[test]
    fn help_lists_the_new_commands_and_not_the_missing_ones() {
        let now = Instant::now();
        let mut app = attached_app(now);
        run_command(&mut app, "/help", now);
        let text = transcript_text(&mut app);
        for line in [
            "/rewind [N|undo]     put files and history back to before a prompt",
            "/compact             summarise the older turns to free context",
            "/cache               prompt-cache hits, per turn",
            "/cost                what the session cost, per turn",
            "/todo                show or hide the model's todo list",
        ] {
            assert!(text.contains(line), "{line:?} missing:\n{text}");
        }
        assert!(
            text.contains("/goal [TEXT|on|off|status] add a goal to goals.md"),
            "{text}"
        );
        // Not in the daemon's API yet.
        assert!(!text.contains("/memory"), "{text}");
    }

    fn goal_status(running: bool, cycle: u32, done: usize, left: usize) -> GoalStatus {
        GoalStatus {
            running,
            cycle,
            cap: 20,
            goals_file: format!("{CWD}/goals.md"),
            goals: (0..done + left)
                .map(|index| GoalItem {
                    text: format!("goal {index}"),
                    done: index < done,
                    verify: None,
                })
                .collect(),
            done,
            left,
            tokens_used: 31_000,
            cost_used: 0.0,
            token_budget: None,
            cost_budget: None,
            state: cwcode_protocol::GoalState::default(),
            tokens_left: None,
            cost_left: None,
            hours_budget: None,
            seconds_used: 0,
            seconds_left: None,
            stop_reason: None,
            summary: String::new(),
        }
    }

    fn goal_reply(call: GoalCall, status: GoalStatus) -> Reply {
        Reply::Goal {
            session_id: "0198a1b2c3d4e5f6".to_owned(),
            call,
            status,
        }
    }

    #[test]
    fn goal_commands_ask_the_daemon_and_say_what_it_answered() {
        let now = Instant::now();
        let mut app = attached_app(now);
        run_command(&mut app, "/goal coupons apply before tax", now);
        run_command(&mut app, "/goal on --cap 5", now);
        run_command(&mut app, "/goal off", now);
        run_command(&mut app, "/goal", now);
        let [
            Request::GoalAdd { text, .. },
            Request::GoalStart(start),
            Request::GoalStop { .. },
            Request::GoalStatus {
                call: GoalCall::Show,
                ..
            },
        ] = &app.outbox[..]
        else {
            panic!("unexpected requests: {:?}", app.outbox);
        };
        assert_eq!(text, "coupons apply before tax");
        assert_eq!(
            (start.session_id.as_str(), start.cap, start.token_budget),
            ("0198a1b2c3d4e5f6", Some(5), None)
        );

        app.on_reply(goal_reply(GoalCall::Add, goal_status(false, 0, 1, 2)), now);
        let text = transcript_text(&mut app);
        assert!(
            text.contains("goal added to /home/dev/shop/goals.md: 2 of 3 open · /goal on"),
            "{text}"
        );
        app.on_reply(goal_reply(GoalCall::Start, goal_status(true, 1, 1, 2)), now);
        assert_eq!(
            app.goal.map(|goal| goal.banner()).as_deref(),
            Some("goal loop · cycle 1/20 · 1 of 3 done · /goal off stops it")
        );
        app.on_reply(goal_reply(GoalCall::Show, goal_status(true, 1, 1, 2)), now);
        let text = transcript_text(&mut app);
        assert!(text.contains("goal loop running · cycle 1/20"), "{text}");
        assert!(
            text.contains("    ☑ goal 0\n    ☐ goal 1\n    ☐ goal 2"),
            "{text}"
        );
        app.on_reply(goal_reply(GoalCall::Stop, goal_status(false, 1, 1, 2)), now);
        assert_eq!(app.goal, None);
        assert_eq!(
            app.flash.as_deref(),
            Some("the goal loop is off · /goal status shows where it got")
        );
    }

    #[test]
    fn the_goal_banner_follows_the_loop_events() {
        let now = Instant::now();
        let mut app = attached_app(now);
        feed(
            &mut app,
            now,
            [EventKind::GoalCycleStarted { cycle: 1, cap: 8 }],
        );
        assert_eq!(
            app.goal.map(|goal| goal.banner()).as_deref(),
            Some("goal loop · cycle 1/8 · /goal off stops it")
        );
        feed(
            &mut app,
            now,
            [
                EventKind::GoalCycleFinished {
                    cycle: 1,
                    done: 1,
                    left: 4,
                },
                EventKind::GoalCycleStarted { cycle: 2, cap: 8 },
            ],
        );
        assert_eq!(
            app.goal.map(|goal| goal.banner()).as_deref(),
            Some("goal loop · cycle 2/8 · 1 of 5 done · /goal off stops it")
        );
        feed(
            &mut app,
            now,
            [EventKind::GoalLoopStopped {
                reason: "all goals are done".to_owned(),
                summary: "Goal loop finished after 2 cycles: all 5 goals are done.".to_owned(),
                state: cwcode_protocol::GoalState::Complete,
            }],
        );
        assert_eq!(app.goal, None);
        let text = transcript_text(&mut app);
        assert!(
            text.contains("Goal loop finished after 2 cycles: all 5 goals are done."),
            "{text}"
        );
        // A cycle's end after the stop (the one that was cancelled) brings no banner back.
        feed(
            &mut app,
            now,
            [EventKind::GoalCycleFinished {
                cycle: 2,
                done: 5,
                left: 0,
            }],
        );
        assert_eq!(app.goal, None);
    }

    #[test]
    fn on_attach_the_replay_rebuilds_the_banner_and_the_status_makes_it_exact() {
        let now = Instant::now();
        let mut app = attached_app(now);
        let mut info = session("0198a1b2c3d4e5f6", CWD, "shop");
        info.last_seq = 3;
        app.on_reply(Reply::Attached(info), now);
        feed(
            &mut app,
            now,
            [EventKind::GoalCycleStarted { cycle: 1, cap: 20 }],
        );
        // The status is asked for once, when the replay is over.
        assert!(app.outbox.is_empty(), "{:?}", app.outbox);
        feed(
            &mut app,
            now,
            [
                EventKind::GoalCycleStarted { cycle: 1, cap: 20 },
                EventKind::GoalCycleFinished {
                    cycle: 1,
                    done: 1,
                    left: 2,
                },
                EventKind::GoalCycleStarted { cycle: 2, cap: 20 },
            ],
        );
        let [
            Request::GoalStatus {
                call: GoalCall::Sync,
                ..
            },
        ] = &app.outbox[..]
        else {
            panic!("expected one goal/status: {:?}", app.outbox);
        };
        assert_eq!(
            app.goal.map(|goal| goal.banner()).as_deref(),
            Some("goal loop · cycle 2/20 · 1 of 3 done · /goal off stops it")
        );
        // goals.md was edited by hand meanwhile: the status is the truth, and says nothing.
        let before = transcript_text(&mut app);
        app.on_reply(goal_reply(GoalCall::Sync, goal_status(true, 2, 2, 2)), now);
        assert_eq!(
            app.goal.map(|goal| goal.banner()).as_deref(),
            Some("goal loop · cycle 2/20 · 2 of 4 done · /goal off stops it")
        );
        assert_eq!(transcript_text(&mut app), before);
        // An answer about the session left behind changes nothing.
        app.on_reply(
            Reply::Goal {
                session_id: "0198ffff".to_owned(),
                call: GoalCall::Sync,
                status: goal_status(false, 0, 0, 0),
            },
            now,
        );
        assert!(app.goal.is_some());
        // A loop that ended while nobody watched has no banner.
        app.on_reply(goal_reply(GoalCall::Sync, goal_status(false, 2, 2, 2)), now);
        assert_eq!(app.goal, None);
    }
}
