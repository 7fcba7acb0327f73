//! What the daemon's replies and session events do to the interface.

use std::time::Instant;

use cwcode_protocol::{
    CreateSessionParams, ErrorCode, Event, EventKind, GoalStatus, SessionInfo, SessionStatus,
};

use super::commands::CANCELLING;
use super::{Answer, App, Connection, Draft, Exit, GoalLoop, HintEnd, Pending, Phase, Startup};
use crate::daemon::{Action, GoalCall, Open, Reply, Request};
use crate::picker::Picker;
use crate::reports;
use crate::rewind::RewindPicker;
use crate::setup::Setup;
use crate::transcript::{Tone, Transcript};

impl App {
    pub fn on_reply(&mut self, reply: Reply, now: Instant) {
        match reply {
            Reply::Connected => {
                self.connection = Connection::Connected;
                self.outbox.push(Request::ListProfiles);
                match self.startup.clone() {
                    Startup::Choose | Startup::Continue => self.outbox.push(Request::ListSessions),
                    Startup::New => self.new_session(self.new_session_params()),
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
            Reply::Reconnected { restarted } => {
                self.connection = Connection::Connected;
                self.state_ended(HintEnd::Reconnected);
                if restarted {
                    self.note(
                        "cwcoded had stopped unexpectedly: this window started it again",
                        Tone::Warn,
                    );
                }
                // A mode asked for across the break may never have arrived: the session's is
                // the truth again.
                self.mode_requests = 0;
                self.note("reconnected to cwcoded", Tone::Info);
            }
            Reply::Sessions(sessions) => self.on_sessions(&sessions),
            Reply::Shell(run) => self.on_shell(&run),
            Reply::Previews(previews) => {
                if let Some(picker) = &mut self.picker {
                    picker.set_previews(previews);
                }
            }
            Reply::Attached(info) => self.on_attached(info),
            // The session left for a draft may still be streaming until the new one is open.
            Reply::Event(_) if self.draft.is_some() => {}
            Reply::Event(event) => self.on_event(&event, now),
            Reply::ModeSet(info) => {
                if let Some(session) = &mut self.session
                    && session.id == info.id
                {
                    session.mode = info.mode;
                    self.mode_answered();
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
            // The answer may come after the turn's end: then there is nothing left to say.
            Reply::Cancelled(true) if self.busy() => {
                self.hint_until(CANCELLING, HintEnd::TurnEnds);
            }
            Reply::Cancelled(true) => self.state_ended(HintEnd::TurnEnds),
            Reply::Cancelled(false) => self.flash = Some("no turn is running".to_owned()),
            Reply::Profiles(profiles) => {
                self.profiles = profiles;
                if !std::mem::replace(&mut self.setup_offered, true) {
                    self.setup =
                        Setup::offer(&self.profiles, self.new_profile.is_some(), self.client_env);
                }
                self.draft_profile();
                self.warn_key_only_here();
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
            Reply::MemoryNotes(notes) => {
                let workspace = self.workspace();
                self.note(reports::memory_list(&notes, &workspace), Tone::Plain);
            }
            Reply::MemoryRecalled { query, notes } => {
                self.note(reports::memory_recall(&query, &notes), Tone::Plain);
            }
            Reply::MemoryDeleted { id, deleted: true } => {
                self.note(format!("deleted note #{id}"), Tone::Info);
            }
            Reply::MemoryDeleted { id, deleted: false } => self.note(
                format!("there is no note #{id}: /memory lists this workspace's notes"),
                Tone::Error,
            ),
            Reply::KeyStored { profile } => self.key_stored(profile),
            Reply::Notice(text) => self.note(text, Tone::Info),
        }
    }

    pub(super) fn open(&mut self, open: Open) {
        // The picker (at startup, or /sessions) and the current session stay on screen until
        // the new one is open, so a failure can be shown where the choice was made.
        if self.phase == Phase::Connecting {
            self.phase = Phase::Opening;
        }
        self.outbox.push(Request::Open(open));
    }

    /// Shows a new session that exists only here until its first prompt creates it.
    pub(super) fn new_session(&mut self, params: CreateSessionParams) {
        self.reset_view();
        self.caught_up = true;
        self.session = Some(SessionInfo {
            id: String::new(),
            title: String::new(),
            cwd: params.cwd.clone(),
            profile: params.profile.clone().unwrap_or_default(),
            mode: params.mode.unwrap_or_default(),
            status: SessionStatus::Idle,
            created: String::new(),
            updated: String::new(),
            turns: 0,
            last_seq: 0,
            damaged: None,
            goal: None,
        });
        self.draft = Some(Draft { params, sent: None });
        self.draft_profile();
        self.note(
            "new session: it is created with the first prompt, which also gives it its title",
            Tone::Info,
        );
    }

    /// A draft with no profile asked for shows the default one, once the profiles are known.
    fn draft_profile(&mut self) {
        if self.draft.is_none() {
            return;
        }
        let default = self
            .profiles
            .iter()
            .find(|profile| profile.is_default)
            .map(|profile| profile.name.clone());
        if let (Some(session), Some(default)) = (&mut self.session, default)
            && session.profile.is_empty()
        {
            session.profile = default;
        }
        self.warn_key_only_here();
    }

    /// The session's profile has no key in the daemon while this terminal's environment has
    /// it: the daemon was started before the key was set, or from another shell, and its
    /// requests would fail for want of a key. Said once a profile, where the session is read.
    pub(super) fn warn_key_only_here(&mut self) {
        if !self.caught_up {
            return;
        }
        let env = self.client_env;
        let Some(profile) = self.profile() else {
            return;
        };
        let Some(variable) = profile.key_only_in(&|name| env(name)) else {
            return;
        };
        if self.key_warned.contains(&profile.name) {
            return;
        }
        let (name, advice) = (
            profile.name.clone(),
            profile.key_only_in_client_advice(variable),
        );
        self.key_warned.push(name);
        self.note(advice, Tone::Warn);
    }

    fn on_sessions(&mut self, sessions: &[SessionInfo]) {
        if self.phase != Phase::Connecting {
            // `/sessions`.
            self.show_picker(sessions);
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
                self.show_picker(sessions);
            }
            (_, None) => self.new_session(self.new_session_params()),
        }
    }

    /// The picker, and a request for the lines under its sessions.
    fn show_picker(&mut self, sessions: &[SessionInfo]) {
        let picker = Picker::new(sessions, &self.cwd);
        let wanted = picker.wanted_previews();
        if !wanted.is_empty() {
            self.outbox.push(Request::Previews(wanted));
        }
        self.picker = Some(picker);
    }

    fn on_attached(&mut self, info: SessionInfo) {
        self.reset_view();
        self.replay_until = info.last_seq;
        self.status = info.status;
        let empty = info.last_seq == 0;
        self.session = Some(info);
        if empty {
            self.catch_up();
        }
    }

    /// What a session shows of itself goes, for another session (or a draft) to take its place.
    fn reset_view(&mut self) {
        self.draft = None;
        self.phase = Phase::Attached;
        self.picker = None;
        self.rewind = None;
        self.transcript = Transcript::default();
        self.approvals.clear();
        self.answer = Answer::Choosing;
        self.mode_requests = 0;
        self.status = SessionStatus::Idle;
        self.turn_started = None;
        self.prompt_tokens = 0;
        self.cached_tokens = 0;
        self.completion_tokens = 0;
        self.reported_requests = 0;
        self.unreported_requests = 0;
        self.context_tokens = 0;
        self.todos.clear();
        self.goal = None;
        self.replay_until = 0;
        self.caught_up = false;
        self.scroll = None;
        self.key_warned.clear();
    }

    /// The replay is over: what it rebuilt is made exact where events alone cannot tell (a
    /// loop the daemon resumed after a restart, goals checked by hand).
    fn catch_up(&mut self) {
        self.caught_up = true;
        self.warn_key_only_here();
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
            budget_left: (status.tokens_left, status.seconds_left),
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

    fn on_event(&mut self, event: &Event, now: Instant) {
        if self.phase != Phase::Attached {
            return;
        }
        if !self.caught_up && event.seq >= self.replay_until {
            self.catch_up();
        }
        // A sub-agent's requests count too: their tokens are in the turn's.
        match &event.kind {
            EventKind::AssistantMessage { usage, .. } | EventKind::CallAbandoned { usage, .. } => {
                if usage.is_some() {
                    self.reported_requests += 1;
                } else {
                    self.unreported_requests += 1;
                }
            }
            _ => {}
        }
        // A sub-agent's tool calls and approvals show in the transcript; its own text is not
        // the session's answer (the `task` call's result is).
        if event.is_sub_agent_text() {
            return;
        }
        let kind = &event.kind;
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
                request_id,
                tool,
                suggested_pattern,
                ..
            } => self.approvals.push_back(Pending {
                request_id: request_id.clone(),
                tool: tool.clone(),
                suggested_pattern: suggested_pattern.clone(),
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
                self.warn_key_only_here();
            }
            EventKind::StatusChanged { status } => {
                self.status = *status;
                if *status == SessionStatus::Idle {
                    self.turn_started = None;
                    self.state_ended(HintEnd::TurnEnds);
                }
            }
            EventKind::TodoUpdated { todos } => self.todos = todos.clone(),
            EventKind::GoalCycleStarted { cycle, cap } => {
                self.goal = Some(GoalLoop {
                    cycle: *cycle,
                    cap: *cap,
                    progress: self.goal.and_then(|goal| goal.progress),
                    budget_left: self.goal.map_or((None, None), |goal| goal.budget_left),
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
                self.state_ended(HintEnd::TurnEnds);
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
            Action::SetKey if self.setup.is_some() => {
                if let Some(setup) = &mut self.setup {
                    setup.failed(message);
                }
            }
            Action::SetMode => {
                self.mode_answered();
                self.note(message, Tone::Error);
            }
            Action::Open if self.draft.as_ref().is_some_and(|d| d.sent.is_some()) => {
                if let Some(typed) = self.draft.as_mut().and_then(|draft| draft.sent.take()) {
                    self.editor.set_text(&typed);
                }
                self.note(message, Tone::Error);
            }
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
}
