//! What the input's Enter does: a prompt is sent, a slash command is run.

use cwcode_protocol::{CreateSessionParams, GoalStartParams};

use super::{App, Connection, HintEnd};
use crate::commands::{self as slash, Command, Input};
use crate::daemon::{GoalCall, Open, Request};
use crate::format;
use crate::shell::ShellRun;
use crate::transcript::Tone;

pub(super) const CANCELLING: &str = "cancelling the turn…";
/// The `!command` outputs that go with the next prompt at most; older ones are dropped.
const SHELL_OUTPUTS_KEPT: usize = 5;

/// The command of a `!command` input: one line after the `!`.
fn shell_command(text: &str) -> Option<&str> {
    let command = text.trim().strip_prefix('!')?.trim();
    (!command.is_empty() && !command.contains('\n')).then_some(command)
}

impl App {
    pub(super) fn submit(&mut self) {
        let text = self.editor.text();
        if let Some(command) = shell_command(&text) {
            self.run_shell(command.to_owned(), &text);
            return;
        }
        if let Some((command, arguments)) = self.custom.invocation(&text) {
            let prompt = command.prompt(arguments);
            self.send(prompt, &text);
            return;
        }
        match slash::parse_input(&text) {
            Input::Empty => {}
            Input::Prompt(prompt) => self.send(prompt.clone(), &prompt),
            Input::Command(Command::Init(notes)) => self.send(slash::init_prompt(&notes), &text),
            Input::Command(command) => {
                self.editor.take();
                self.command(command);
            }
        }
    }

    fn command(&mut self, command: Command) {
        if self.draft.is_some() {
            self.draft_command(command);
            return;
        }
        let Some(session_id) = self.session_id() else {
            return;
        };
        match command {
            Command::ShowMode
            | Command::Model
            | Command::Sessions
            | Command::MemoryList
            | Command::MemoryRecall(_)
            | Command::MemoryDelete(_)
            | Command::Help
            | Command::Detach
            | Command::Invalid(_) => self.command_anywhere(command),
            Command::SetMode(mode) if mode == self.intended_mode() => {
                self.note(format!("already in {mode} mode"), Tone::Info);
            }
            Command::SetMode(mode) => self.request_mode(mode),
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
            // A prompt: `submit` sends it, with what was typed kept for the history.
            Command::Init(_) => {}
            Command::New => self.new_session(self.like_this_session()),
            Command::Cancel => self.cancel(),
        }
    }

    /// A command typed before the first prompt: the ones about the session to be created
    /// change what it will be; the ones about its work have nothing to act on yet.
    fn draft_command(&mut self, command: Command) {
        match command {
            Command::ShowMode
            | Command::Model
            | Command::Sessions
            | Command::MemoryList
            | Command::MemoryRecall(_)
            | Command::MemoryDelete(_)
            | Command::Help
            | Command::Detach
            | Command::Invalid(_) => self.command_anywhere(command),
            Command::SetMode(mode) => {
                self.request_mode(mode);
                self.note(format!("mode is now {mode}"), Tone::Info);
            }
            Command::SetProfile(profile) => {
                if let Some(draft) = &mut self.draft {
                    draft.params.profile = Some(profile.clone());
                }
                if let Some(session) = &mut self.session {
                    session.profile = profile.clone();
                }
                self.note(
                    format!("profile is now {profile}: the session starts on it"),
                    Tone::Info,
                );
                self.warn_key_only_here();
            }
            Command::New => self.note("this is a new session already", Tone::Info),
            _ => self.note(
                "nothing to act on yet: the session is created with the first prompt",
                Tone::Info,
            ),
        }
    }

    /// The commands that need no session, run through the ordinary path with a draft too.
    fn command_anywhere(&mut self, command: Command) {
        match command {
            Command::ShowMode => {
                let mode = self.intended_mode();
                self.note(
                    format!(
                        "mode is {mode}: {} (Shift+Tab toggles plan and code; /mode plan|code|yolo)",
                        format::mode_meaning(mode)
                    ),
                    Tone::Info,
                );
            }
            Command::Model if self.profiles.is_empty() => {
                self.show_profiles = true;
                self.outbox.push(Request::ListProfiles);
            }
            Command::Model => self.show_model(),
            Command::Sessions => self.outbox.push(Request::ListSessions),
            Command::MemoryList => self.outbox.push(Request::MemoryList {
                workspace: self.workspace(),
            }),
            Command::MemoryRecall(query) => self.outbox.push(Request::MemoryRecall {
                query,
                workspace: self.workspace(),
            }),
            Command::MemoryDelete(id) => self.outbox.push(Request::MemoryDelete { id }),
            Command::Detach => self.detach(),
            Command::Help => self.help(),
            Command::Invalid(message) => self.note(message, Tone::Error),
            _ => {}
        }
    }

    /// The directory the session works in: where its notes and `!command`s belong.
    pub(super) fn workspace(&self) -> String {
        self.session
            .as_ref()
            .map_or_else(|| self.cwd.clone(), |session| session.cwd.clone())
    }

    /// A new session with this one's profile and mode.
    fn like_this_session(&self) -> CreateSessionParams {
        let current = self.session.as_ref();
        CreateSessionParams {
            cwd: self.cwd.clone(),
            profile: current.map(|s| s.profile.clone()),
            mode: current.map(|s| s.mode),
            title: None,
        }
    }

    fn help(&mut self) {
        let mut text = slash::HELP.to_owned();
        for spec in slash::COMMANDS {
            let usage = format!("/{} {}", spec.name, spec.args);
            text.push_str(&format!("\n  {:<20} {}", usage.trim_end(), spec.about));
        }
        text.push_str("\n  //text               send a prompt that starts with /");
        text.push_str(&self.custom.help());
        self.note(text, Tone::Info);
    }

    pub(super) fn show_model(&mut self) {
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

    /// `!command`: run here in the workspace; the reply shows its output and keeps it for the
    /// next prompt.
    fn run_shell(&mut self, command: String, typed: &str) {
        let cwd = self.workspace();
        self.editor.take();
        self.editor.remember(typed);
        self.note(format!("! {command}"), Tone::Info);
        self.outbox.push(Request::Shell { command, cwd });
    }

    /// A `!command` ended: its output is shown, and goes with the next prompt (only the newest
    /// few, so a run of commands cannot grow the prompt without end).
    pub(super) fn on_shell(&mut self, run: &ShellRun) {
        let output = run.output.trim_end();
        let shown = if output.is_empty() {
            format!("({}, no output)", run.outcome)
        } else {
            format!("{output}\n({})", run.outcome)
        };
        self.note(shown, Tone::Plain);
        if self.shell_outputs.len() == SHELL_OUTPUTS_KEPT {
            self.shell_outputs.pop_front();
        }
        self.shell_outputs.push_back(run.for_the_model());
        self.flash = Some("the output goes with your next prompt".to_owned());
    }

    /// Sends `prompt`, typed as `typed` (what the input's history keeps); while the daemon is
    /// away the input keeps it.
    fn send(&mut self, prompt: String, typed: &str) {
        if self.connection != Connection::Connected {
            self.hint_until(
                "not connected to cwcoded: the prompt is kept",
                HintEnd::Reconnected,
            );
            return;
        }
        if self
            .draft
            .as_ref()
            .is_some_and(|draft| draft.sent.is_some())
        {
            self.flash = Some("creating the session…".to_owned());
            return;
        }
        // What `!command`s printed comes first, as what the user looked at before asking.
        let prompt = if self.shell_outputs.is_empty() {
            prompt
        } else {
            let mut text: Vec<String> = self.shell_outputs.drain(..).collect();
            text.push(prompt);
            text.join("\n\n")
        };
        if let Some(draft) = &mut self.draft {
            let mut params = draft.params.clone();
            params.title = Some(super::title_from(&prompt));
            draft.sent = Some(typed.to_owned());
            self.outbox
                .push(Request::Open(Open::New { params, prompt }));
        } else {
            let Some(session_id) = self.session_id() else {
                return;
            };
            let workspace = self.workspace();
            self.outbox.push(Request::Send {
                session_id,
                text: prompt,
                workspace,
            });
        }
        self.editor.take();
        self.editor.remember(typed);
        self.scroll = None;
    }

    /// Leaves the interface; the session keeps running in the daemon (a draft just goes).
    pub(super) fn detach(&mut self) {
        if self.session.is_some() {
            self.exit = Some(self.leaving());
        }
    }

    pub(super) fn cancel(&mut self) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        if self.busy() || !self.approvals.is_empty() {
            self.outbox.push(Request::Cancel { session_id });
            self.hint_until(CANCELLING, HintEnd::TurnEnds);
        }
    }
}
