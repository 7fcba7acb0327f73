//! The first run's setup: when no provider profile has a key, pick one of the daemon's
//! profiles and paste its key, which the daemon stores in config.json (mode 0600). Pure state
//! and its lines on screen; the app sends the key and reads the answer.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use cwcode_protocol::{ProfileInfo, SetKeyParams};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::format::shorten;
use crate::wrap;

const DIM: Style = Style::new().fg(Color::DarkGray);
const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
const ERROR: Style = Style::new().fg(Color::Red);
/// Dots shown for a pasted key at most; the count says the rest.
const DOTS_AT_MOST: usize = 32;
/// A key longer than this is not a key (a whole file pasted by mistake): refused.
const KEY_AT_MOST: usize = 4096;

pub enum Step {
    Choosing,
    /// The key being pasted or typed; never drawn, only counted.
    Key(String),
    /// Sent to the daemon; its answer ends the setup or brings the key step back.
    Storing,
}

/// What a key did to the setup.
pub enum Outcome {
    Nothing,
    /// The user gave up: leave, saying how to do it by hand.
    Leave,
    Store(SetKeyParams),
}

pub struct Setup {
    /// The profiles that need a key, as the daemon lists them.
    pub profiles: Vec<ProfileInfo>,
    pub selected: usize,
    pub step: Step,
    pub error: Option<String>,
    /// What to tell the user when the key is only in this terminal's environment.
    pub key_here: Option<String>,
}

impl Setup {
    /// The setup, when it is needed: no default profile is ready (none is the default, so the
    /// daemon could start no session without naming one, or the default has no key) and some
    /// profile wants a key. A profile asked for on the command line is the user's choice; its
    /// own error says what it lacks.
    pub fn offer(
        profiles: &[ProfileInfo],
        profile_asked: bool,
        env: fn(&str) -> Option<String>,
    ) -> Option<Self> {
        let default_ready = profiles
            .iter()
            .any(|profile| profile.is_default && profile.has_key);
        if profile_asked || default_ready {
            return None;
        }
        let wanting: Vec<ProfileInfo> = profiles
            .iter()
            .filter(|profile| !profile.has_key)
            .cloned()
            .collect();
        if wanting.is_empty() {
            return None;
        }
        let key_here = wanting.iter().find_map(|profile| {
            let variable = profile.key_only_in(&|name| env(name))?;
            Some(profile.key_only_in_client_advice(variable))
        });
        Some(Self {
            profiles: wanting,
            selected: 0,
            step: Step::Choosing,
            error: None,
            key_here,
        })
    }

    pub fn chosen(&self) -> Option<&ProfileInfo> {
        self.profiles.get(self.selected)
    }

    pub fn key(&mut self, key: KeyEvent) -> Outcome {
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            return match key.code {
                KeyCode::Char('c' | 'd') => Outcome::Leave,
                _ => Outcome::Nothing,
            };
        }
        match &mut self.step {
            Step::Choosing => match key.code {
                KeyCode::Up => self.selected = self.selected.saturating_sub(1),
                KeyCode::Down => {
                    self.selected = (self.selected + 1).min(self.profiles.len().saturating_sub(1));
                }
                KeyCode::Enter => {
                    self.error = None;
                    self.step = Step::Key(String::new());
                }
                KeyCode::Esc => return Outcome::Leave,
                _ => {}
            },
            Step::Key(typed) => match key.code {
                KeyCode::Char(c) => push_key(typed, &c.to_string()),
                KeyCode::Backspace => {
                    typed.pop();
                }
                KeyCode::Esc => {
                    self.error = None;
                    self.step = Step::Choosing;
                }
                KeyCode::Enter => return self.store(),
                _ => {}
            },
            Step::Storing => {}
        }
        Outcome::Nothing
    }

    pub fn paste(&mut self, text: &str) {
        if let Step::Key(typed) = &mut self.step {
            push_key(typed, text);
        }
    }

    fn store(&mut self) -> Outcome {
        let Step::Key(typed) = &self.step else {
            return Outcome::Nothing;
        };
        let key = typed.trim().to_owned();
        if key.is_empty() {
            self.error = Some("paste the key first (Esc goes back to the profiles)".to_owned());
            return Outcome::Nothing;
        }
        if key.len() > KEY_AT_MOST {
            self.error = Some(format!(
                "that is {} bytes, not an API key: Backspace clears it, then paste the key alone",
                key.len()
            ));
            return Outcome::Nothing;
        }
        let Some(profile) = self.chosen().map(|profile| profile.name.clone()) else {
            return Outcome::Nothing;
        };
        self.error = None;
        self.step = Step::Storing;
        Outcome::Store(SetKeyParams { profile, key })
    }

    /// The daemon refused the key: the key step again, with its reason.
    pub fn failed(&mut self, message: String) {
        self.error = Some(message);
        self.step = Step::Key(String::new());
    }

    /// What leaving says: how to do the same by hand.
    pub fn by_hand(&self) -> String {
        let mut message = String::from(
            "no provider profile has an API key yet. Store one with `cwcode-cli config set-key \
             PROFILE` (it reads the key from stdin into config.json, mode 0600), or export the \
             profile's variable where cwcoded starts, then run cwcode again:",
        );
        for profile in &self.profiles {
            message.push_str(&format!("\n  {}", profile.name));
            if let Some(variable) = &profile.key_env {
                message.push_str(&format!(": {variable}"));
            }
        }
        message.push_str("\n`cwcode-cli doctor` checks the result.");
        message
    }

    pub fn lines(&self, width: usize) -> Vec<Line<'static>> {
        let mut lines = vec![
            Line::styled(
                "First run: no provider profile has an API key yet.",
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Line::raw(""),
        ];
        match &self.step {
            Step::Choosing => {
                lines.push(Line::raw(
                    "Pick the profile to use, then paste its key: cwcoded keeps it in config.json (mode 0600).",
                ));
                lines.push(Line::raw(""));
                let name_width = self
                    .profiles
                    .iter()
                    .map(|profile| wrap::width(&profile.name))
                    .max()
                    .unwrap_or(0);
                for (index, profile) in self.profiles.iter().enumerate() {
                    let variable = profile
                        .key_env
                        .as_deref()
                        .map(|variable| format!(" · {variable}"))
                        .unwrap_or_default();
                    let text = format!(
                        "{} {:<name_width$}  {} at {}{variable}",
                        if index == self.selected { "›" } else { " " },
                        profile.name,
                        profile.model,
                        profile.base_url,
                    );
                    let text = shorten(&wrap::sanitize(&text), width);
                    lines.push(if index == self.selected {
                        Line::styled(text, SELECTED)
                    } else {
                        Line::raw(text)
                    });
                }
                lines.push(Line::raw(""));
                lines.push(Line::styled(
                    "↑↓ choose · Enter picks · Esc leaves (and says how to set a key by hand)",
                    DIM,
                ));
            }
            Step::Key(typed) => {
                let name = self.chosen().map_or("", |profile| profile.name.as_str());
                lines.push(Line::raw(format!(
                    "Paste the API key for {name}; it is not shown."
                )));
                lines.push(Line::raw(""));
                let count = typed.chars().count();
                let dots = "•".repeat(count.min(DOTS_AT_MOST));
                let more = if count > DOTS_AT_MOST { "…" } else { "" };
                lines.push(Line::from(vec![
                    Span::raw(format!("key: {dots}{more}")),
                    Span::styled(format!("  ({count} characters)"), DIM),
                ]));
                lines.push(Line::raw(""));
                lines.push(Line::styled(
                    "Enter stores it · Esc goes back to the profiles",
                    DIM,
                ));
            }
            Step::Storing => lines.push(Line::styled("storing the key…", DIM)),
        }
        if let Some(error) = &self.error {
            lines.push(Line::raw(""));
            lines.push(Line::styled(wrap::sanitize(error), ERROR));
        }
        if let Some(advice) = &self.key_here {
            lines.push(Line::raw(""));
            lines.push(Line::styled(advice.clone(), Style::new().fg(Color::Yellow)));
        }
        lines
    }
}

/// Adds pasted or typed text to the key: a key is one line, so line breaks and other control
/// characters (a paste's trailing newline) go.
fn push_key(typed: &mut String, text: &str) {
    typed.extend(text.chars().filter(|c| !c.is_control()));
}
