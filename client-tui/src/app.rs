//! The interface's state and what keys and daemon replies do to it. Nothing here awaits or
//! draws: a key or a reply changes the state and may queue [`Request`]s in the outbox, which
//! the main loop hands to the daemon task. So every behaviour is tested with plain calls.
//! What daemon replies do is in `replies`, what keys do in `keys`, slash commands in `commands`.

use std::collections::VecDeque;
use std::time::Instant;

use cwcode_protocol::{
    CreateSessionParams, Mode, ProfileInfo, SessionInfo, SessionStatus, TodoItem,
};

use crate::commands::Candidate;
use crate::custom::CustomCommands;
use crate::daemon::Request;
use crate::editor::Editor;
use crate::picker::Picker;
use crate::rewind::RewindPicker;
use crate::setup::Setup;
use crate::transcript::{Tone, Transcript};

#[cfg(test)]
mod command_tests;
mod commands;
#[cfg(test)]
mod daily_tests;
mod first_run;
mod keys;
mod replies;
#[cfg(test)]
mod session_tests;
#[cfg(test)]
mod setup_tests;
#[cfg(test)]
mod tests;

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
    /// What "always" offers first, as `cargo test *`; the whole tool when absent.
    pub suggested_pattern: Option<String>,
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
    /// The token and wall-clock budgets left (`None`: no such budget) when `goal/status` last
    /// answered: what is left now is at most that.
    pub budget_left: (Option<u64>, Option<u64>),
}

impl GoalLoop {
    /// The loop's state (running, or waiting for the approval the prompt below asks), where it
    /// is, and the budget left.
    pub fn banner(&self, awaiting_approval: bool) -> String {
        let state = if awaiting_approval {
            "awaiting approval"
        } else {
            "running"
        };
        let progress = self
            .progress
            .map(|(done, total)| format!(" · {done} of {total} done"))
            .unwrap_or_default();
        let (tokens, seconds) = self.budget_left;
        let budget: Vec<String> = [
            tokens.map(|tokens| format!("{} tokens", compact_count(tokens))),
            seconds.map(|seconds| format!("{}h{:02}m", seconds / 3600, seconds % 3600 / 60)),
        ]
        .into_iter()
        .flatten()
        .collect();
        let budget = if budget.is_empty() {
            String::new()
        } else {
            format!(" · ≤ {} left", budget.join(", "))
        };
        format!(
            "goal loop {state} · cycle {}/{}{progress}{budget} · /goal off stops it",
            self.cycle, self.cap
        )
    }
}

/// `1234567` as `1.2M`, `45600` as `45.6k`: a budget at a glance.
fn compact_count(count: u64) -> String {
    match count {
        0..1_000 => count.to_string(),
        1_000..1_000_000 => format!("{:.1}k", count as f64 / 1e3),
        _ => format!("{:.1}M", count as f64 / 1e6),
    }
}

/// A session to be created at the first prompt.
#[derive(Debug, Clone)]
struct Draft {
    params: CreateSessionParams,
    /// The first prompt, as typed, once it went to the daemon with the request to create the
    /// session: it returns to the input if that fails.
    sent: Option<String>,
}

/// A session's title: its first prompt's first line, shortened (as `cwcode-cli run` does).
pub fn title_from(prompt: &str) -> String {
    const LONGEST: usize = 60;
    let line = prompt.trim().lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(LONGEST) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// Whether the provider reported the usage of the session's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reported {
    /// Every request's (or there were none yet).
    All,
    /// Some requests': the figures are a lower bound.
    Partly,
    /// No request's: there are no figures, which is not 0.
    Nothing,
}

/// A state a status-line hint describes; the hint goes when the state does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HintEnd {
    /// "cancelling the turn…"
    TurnEnds,
    /// "not connected…"
    Reconnected,
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
    /// A new session not created yet (`session` holds what it will be): it is created, titled
    /// from the prompt, when the first prompt is sent, so leaving before that leaves nothing.
    draft: Option<Draft>,
    /// The mode last asked of the daemon, and how many of those requests are unanswered: while
    /// any is, a further Shift+Tab moves on from it, not from the mode the session had.
    requested_mode: Mode,
    mode_requests: u32,
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
    /// The user's own slash commands, read at start.
    pub custom: CustomCommands,
    /// The workspace's files, which `@` completes (empty until walked).
    pub files: Vec<String>,
    /// What `!command`s printed since the last prompt: it goes with the next one.
    shell_outputs: VecDeque<String>,
    show_profiles: bool,
    pub status: SessionStatus,
    /// When the running turn started, as seen by this client.
    pub turn_started: Option<Instant>,
    /// Tokens summed over the finished turns: the cache hit ratio and the cost.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    /// Model requests whose usage the provider reported, and those it reported nothing for.
    reported_requests: u32,
    unreported_requests: u32,
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
    /// A hint that can end before the next key, and the state it describes: it goes with that
    /// state unless another hint has replaced it.
    hint_end: Option<(HintEnd, &'static str)>,
    pub outbox: Vec<Request>,
    pub exit: Option<Exit>,
    /// This terminal's environment, where a profile's key variable may be set while the
    /// daemon (started elsewhere, or earlier) has none; tests put their own in.
    pub client_env: fn(&str) -> Option<String>,
    /// The profiles already warned about, since the session was shown.
    key_warned: Vec<String>,
    /// The first run's setup, over everything else while it is open.
    pub setup: Option<Setup>,
    /// Whether the first list of profiles was looked at for the setup: it is offered once.
    setup_offered: bool,
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
            draft: None,
            requested_mode: Mode::Code,
            mode_requests: 0,
            transcript: Transcript::default(),
            editor: Editor::new(),
            picker: None,
            rewind: None,
            approvals: VecDeque::new(),
            answer: Answer::Choosing,
            completion_selected: 0,
            completion_dismissed: None,
            profiles: Vec::new(),
            custom: CustomCommands::default(),
            files: Vec::new(),
            shell_outputs: VecDeque::new(),
            show_profiles: false,
            status: SessionStatus::Idle,
            turn_started: None,
            prompt_tokens: 0,
            cached_tokens: 0,
            completion_tokens: 0,
            reported_requests: 0,
            unreported_requests: 0,
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
            hint_end: None,
            outbox: Vec::new(),
            exit: None,
            client_env: |name| std::env::var(name).ok(),
            key_warned: Vec::new(),
            setup: None,
            setup_offered: false,
        }
    }

    /// The session the daemon knows; `None` while there is only a draft.
    fn session_id(&self) -> Option<String> {
        if self.draft.is_some() {
            return None;
        }
        self.session.as_ref().map(|session| session.id.clone())
    }

    /// Whether the session shown exists only here, until its first prompt.
    pub fn is_draft(&self) -> bool {
        self.draft.is_some()
    }

    /// How leaving ends: a session that exists keeps running, a draft is simply dropped.
    pub fn leaving(&self) -> Exit {
        match &self.session {
            Some(session) if self.draft.is_none() => Exit::Detached(session.clone()),
            _ => Exit::Quit,
        }
    }

    pub fn mode(&self) -> Mode {
        self.session
            .as_ref()
            .map_or(Mode::Code, |session| session.mode)
    }

    /// The mode the user chose: the one asked for while the daemon has not confirmed it yet,
    /// else the session's.
    pub fn intended_mode(&self) -> Mode {
        if self.mode_requests > 0 {
            self.requested_mode
        } else {
            self.mode()
        }
    }

    /// Asks the daemon for `mode`, remembered until every such request is answered.
    fn request_mode(&mut self, mode: Mode) {
        if let Some(draft) = &mut self.draft {
            draft.params.mode = Some(mode);
            if let Some(session) = &mut self.session {
                session.mode = mode;
            }
            return;
        }
        let Some(session_id) = self.session_id() else {
            return;
        };
        self.requested_mode = mode;
        self.mode_requests = self.mode_requests.saturating_add(1);
        self.outbox.push(Request::SetMode { session_id, mode });
    }

    /// A mode request was answered, done or refused (the answers may come in any order).
    fn mode_answered(&mut self) {
        self.mode_requests = self.mode_requests.saturating_sub(1);
    }

    pub fn busy(&self) -> bool {
        self.status != SessionStatus::Idle
    }

    /// The session's profile, once the profiles are known.
    pub fn profile(&self) -> Option<&ProfileInfo> {
        let name = &self.session.as_ref()?.profile;
        self.profiles.iter().find(|profile| &profile.name == name)
    }

    /// What the session cost so far, when its profile has prices (per million tokens), in the
    /// currency of its price table. Only the requests whose usage the provider reported are in
    /// it: see [`App::usage_reported`].
    pub fn cost(&self) -> Option<(f64, &str)> {
        let prices = self.profile()?.prices.as_ref()?;
        let missed = self.prompt_tokens.saturating_sub(self.cached_tokens);
        let cost = (self.cached_tokens as f64 * prices.input_hit
            + missed as f64 * prices.input_miss
            + self.completion_tokens as f64 * prices.output)
            / 1e6;
        Some((cost, prices.currency.as_str()))
    }

    /// How much of the session's usage the provider reported: the token figures (and the
    /// cost) leave out the requests it reported nothing for, so they are not the whole.
    pub fn usage_reported(&self) -> Reported {
        match (self.reported_requests, self.unreported_requests) {
            (_, 0) => Reported::All,
            (0, _) => Reported::Nothing,
            _ => Reported::Partly,
        }
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
        if !text.starts_with('/') {
            return crate::mentions::complete(&text, &self.files);
        }
        let mut candidates = crate::commands::complete(&text, &self.profiles);
        candidates.extend(self.custom.complete(&text));
        candidates
    }

    fn new_session_params(&self) -> CreateSessionParams {
        CreateSessionParams {
            cwd: self.cwd.clone(),
            profile: self.new_profile.clone(),
            mode: self.new_mode,
            title: None,
        }
    }

    /// A hint that stays until the next key or until `end` has happened, whichever is first.
    fn hint_until(&mut self, text: &'static str, end: HintEnd) {
        self.flash = Some(text.to_owned());
        self.hint_end = Some((end, text));
    }

    /// `end` has happened: a hint waiting for it is no longer true.
    fn state_ended(&mut self, end: HintEnd) {
        if let Some((waiting_for, text)) = self.hint_end
            && waiting_for == end
        {
            if self.flash.as_deref() == Some(text) {
                self.flash = None;
            }
            self.hint_end = None;
        }
    }

    fn note(&mut self, text: impl Into<String>, tone: Tone) {
        self.transcript.note(text, tone);
    }
}
