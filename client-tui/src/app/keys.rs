//! What keys, pastes and the mouse do to the interface.

use std::time::{Duration, Instant};

use crossterm::event::{
    Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEventKind,
};
use cwcode_protocol::{ApprovalDecision, ApprovalRespondParams};

use super::{Answer, App, Exit, Pending, Phase};
use crate::commands;
use crate::daemon::{Open, Request};
use crate::editor::Editor;
use crate::picker::Choice;

/// Two Ctrl+C presses this close together, on an empty input, quit.
const DOUBLE_INTERRUPT: Duration = Duration::from_secs(2);
/// Rows the mouse wheel scrolls.
const WHEEL_ROWS: usize = 3;

impl App {
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
        if let Some(setup) = &mut self.setup {
            setup.paste(text);
        } else if let Some(picker) = &mut self.picker {
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
        self.hint_end = None;
        if self.setup.is_some() {
            self.setup_key(key);
            return;
        }
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
            KeyCode::BackTab => self.toggle_mode(),
            KeyCode::PageUp => self.scroll_up(self.page()),
            KeyCode::PageDown => self.scroll_down(self.page()),
            KeyCode::End if ctrl => self.scroll = None,
            KeyCode::Home if ctrl => self.scroll = Some(0),
            KeyCode::Char('o') if ctrl => self.expanded = !self.expanded,
            // Behind these the input takes no keys, so Ctrl+D edits nothing there: it leaves (an
            // approval keeps waiting in the daemon for whoever attaches next).
            KeyCode::Char('d') if ctrl && self.input_hidden() => self.detach(),
            _ if self.approval().is_some() => self.approval_key(key),
            _ if self.rewind.is_some() => self.rewind_key(key),
            _ => self.input_key(key),
        }
    }

    /// Whether an approval or the rewind picker stands in place of the input, and no deny
    /// reason is half typed.
    fn input_hidden(&self) -> bool {
        let typing_reason = matches!(&self.answer, Answer::Reason(editor) if !editor.is_empty());
        (self.approval().is_some() && !typing_reason) || self.rewind.is_some()
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
            self.exit = Some(self.leaving());
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
                Some(Choice::New) => self.new_session(self.new_session_params()),
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
                KeyCode::Char('a') => {
                    let pattern = pending.suggested_pattern.clone();
                    self.respond_always(&pending, pattern);
                }
                KeyCode::Char('A') => self.respond_always(&pending, None),
                KeyCode::Char('n' | 'N') => self.answer = Answer::Reason(Editor::new()),
                _ => {
                    let always = match &pending.suggested_pattern {
                        Some(pattern) => format!(
                            "a (always for `{pattern}`), A (always for every {} call)",
                            pending.tool
                        ),
                        None => "a (always allow it here)".to_owned(),
                    };
                    self.flash = Some(format!(
                        "answer y (run {}), {always} or n (refuse, with a reason)",
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
        self.send_answer(pending, decision, reason, None);
    }

    /// "Always": for the calls matching `pattern`, or for every call of the tool without one.
    fn respond_always(&mut self, pending: &Pending, pattern: Option<String>) {
        self.send_answer(pending, ApprovalDecision::Always, None, pattern);
    }

    fn send_answer(
        &mut self,
        pending: &Pending,
        decision: ApprovalDecision,
        reason: Option<String>,
        pattern: Option<String>,
    ) {
        let Some(session_id) = self.session_id() else {
            return;
        };
        self.answer = Answer::Sent;
        self.outbox.push(Request::Respond(ApprovalRespondParams {
            session_id,
            request_id: pending.request_id.clone(),
            decision,
            reason,
            pattern,
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
                let typed_name = typed.trim().strip_prefix('/').unwrap_or_default();
                let exact = commands::COMMANDS
                    .iter()
                    .any(|spec| typed_name == spec.name)
                    || self.custom.find(typed_name).is_some();
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
                self.detach();
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

    fn toggle_mode(&mut self) {
        let mode = commands::next_mode(self.intended_mode());
        self.request_mode(mode);
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
