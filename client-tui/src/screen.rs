//! The one writer to stdout. The event printer and the input loop both write here, under one
//! lock, so streamed text, whole lines and the prompt never cut into each other: the screen
//! remembers whether the cursor is at the start of a line and whether a prompt is showing.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::render::{Output, Stream, Style};

pub type SharedScreen = Arc<Mutex<Screen>>;

/// Locks the screen. A panic while writing cannot leave it inconsistent beyond a missing
/// newline, so a poisoned lock is used as is rather than taking the program down.
pub fn lock(screen: &SharedScreen) -> MutexGuard<'_, Screen> {
    screen
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub struct Screen {
    out: Box<dyn Write + Send>,
    pub style: Style,
    /// Whether stdin is a terminal: then the user's Enter moves the cursor to a new line, and a
    /// prompt is worth showing. With piped input nothing is echoed and no prompt is drawn.
    interactive: bool,
    at_line_start: bool,
    stream: Option<Stream>,
    prompt_visible: bool,
    /// Prompts this client is sending whose turn number is not known yet.
    own_prompts: VecDeque<String>,
    /// Turns this client sent.
    own_turns: Vec<u32>,
}

impl Screen {
    pub fn new(out: Box<dyn Write + Send>, style: Style, interactive: bool) -> Self {
        Self {
            out,
            style,
            interactive,
            at_line_start: true,
            stream: None,
            prompt_visible: false,
            own_prompts: VecDeque::new(),
            own_turns: Vec::new(),
        }
    }

    pub fn shared(self) -> SharedScreen {
        Arc::new(Mutex::new(self))
    }

    // Write errors are ignored on purpose: when stdout is gone there is nobody to tell, and the
    // session itself must not be disturbed by a closed terminal.
    fn write(&mut self, text: &str) {
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
    }

    fn start_line(&mut self) {
        if !self.at_line_start {
            self.write("\n");
            self.at_line_start = true;
        }
        self.stream = None;
        self.prompt_visible = false;
    }

    pub fn show(&mut self, output: Output) {
        match output {
            Output::Inline(stream, text) => self.inline(stream, &text),
            Output::Block(text) => self.line(&text),
            Output::EndLine => self.start_line(),
            Output::Nothing => {}
        }
    }

    fn inline(&mut self, stream: Stream, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.stream != Some(stream) || self.prompt_visible {
            self.start_line();
        }
        self.write(text);
        self.stream = Some(stream);
        // Escape codes after the last newline do not move the cursor off the line start.
        self.at_line_start = text.trim_end_matches("\x1b[0m").ends_with('\n');
    }

    /// Whole lines, on a fresh line.
    pub fn line(&mut self, text: &str) {
        self.start_line();
        self.write(text);
        self.write("\n");
    }

    pub fn error(&mut self, text: &str) {
        let label = self.style.red("error:");
        self.line(&format!("{label} {text}"));
    }

    /// Draws `prompt` unless one is already showing; a no-op when stdin is not a terminal.
    pub fn prompt(&mut self, prompt: &str) {
        if !self.interactive || self.prompt_visible {
            return;
        }
        self.start_line();
        self.write(prompt);
        self.at_line_start = false;
        self.prompt_visible = true;
    }

    /// An approval question: the prompt itself on a terminal (redrawn whenever output pushed
    /// it away), otherwise a line of its own, printed once, so a transcript of a piped session
    /// still shows what was asked.
    pub fn ask(&mut self, question: &str, first_time: bool) {
        if self.interactive {
            self.prompt(question);
        } else if first_time {
            self.line(question.trim_end());
        }
    }

    /// The user pressed Enter: the terminal echoed the line and its newline.
    pub fn input_echoed(&mut self) {
        if self.interactive {
            self.at_line_start = true;
            self.prompt_visible = false;
            self.stream = None;
        }
    }

    /// Ends whatever line is open, e.g. after the terminal echoed `^C` or at Ctrl+D.
    pub fn end_line(&mut self) {
        self.start_line();
    }

    /// Called before sending a prompt, so its turn events can be recognised even when they
    /// arrive before the daemon's answer to the send.
    pub fn expect_own_prompt(&mut self, prompt: &str) {
        self.own_prompts.push_back(prompt.to_owned());
    }

    /// The send answered: the turn number is now known (or the send failed: `turn` is `None`).
    pub fn own_prompt_sent(&mut self, prompt: &str, turn: Option<u32>) {
        if let Some(index) = self.own_prompts.iter().position(|text| text == prompt) {
            self.own_prompts.remove(index);
        }
        if let Some(turn) = turn
            && !self.own_turns.contains(&turn)
        {
            self.own_turns.push(turn);
        }
    }

    /// Whether a turn's prompt event belongs to a prompt this client sent.
    pub fn claim_own_turn(&mut self, turn: u32, prompt: &str) -> bool {
        if self.own_turns.contains(&turn) {
            return true;
        }
        match self.own_prompts.iter().position(|text| text == prompt) {
            Some(index) => {
                self.own_prompts.remove(index);
                self.own_turns.push(turn);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose bytes the test can read after handing it to the screen.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Capture {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn screen(interactive: bool) -> (Screen, Capture) {
        let capture = Capture::default();
        let screen = Screen::new(Box::new(capture.clone()), Style::PLAIN, interactive);
        (screen, capture)
    }

    #[test]
    fn streamed_text_then_a_block_starts_a_new_line() {
        let (mut screen, out) = screen(true);
        screen.show(Output::Inline(Stream::Answer, "Hello".into()));
        screen.show(Output::Inline(Stream::Answer, " world".into()));
        screen.show(Output::Block("▶ bash ls".into()));
        screen.show(Output::Inline(Stream::ToolOutput, "a\n".into()));
        screen.show(Output::Block("✓ bash: a".into()));
        assert_eq!(out.text(), "Hello world\n▶ bash ls\na\n✓ bash: a\n");
    }

    #[test]
    fn a_change_of_stream_breaks_the_line() {
        let (mut screen, out) = screen(true);
        screen.show(Output::Inline(Stream::Reasoning, "thinking".into()));
        screen.show(Output::Inline(Stream::Answer, "answer".into()));
        screen.show(Output::EndLine);
        screen.show(Output::EndLine);
        assert_eq!(out.text(), "thinking\nanswer\n");
    }

    #[test]
    fn output_while_the_prompt_shows_moves_below_it() {
        let (mut screen, out) = screen(true);
        screen.prompt("> ");
        screen.prompt("> ");
        screen.show(Output::Inline(Stream::Answer, "hi".into()));
        screen.show(Output::EndLine);
        screen.prompt("> ");
        screen.input_echoed();
        screen.line("· mode is now plan");
        assert_eq!(out.text(), "> \nhi\n> · mode is now plan\n");
    }

    #[test]
    fn piped_input_draws_no_prompt_but_shows_questions() {
        let (mut screen, out) = screen(false);
        screen.prompt("> ");
        screen.ask("approve bash? ", true);
        screen.ask("approve bash? ", false);
        assert_eq!(out.text(), "approve bash?\n");
    }

    #[test]
    fn own_turns_are_recognised_before_and_after_the_send_answers() {
        let (mut screen, _) = screen(true);
        screen.expect_own_prompt("fix it");
        assert!(screen.claim_own_turn(1, "fix it"));
        screen.own_prompt_sent("fix it", Some(1));
        assert!(screen.claim_own_turn(1, "fix it"));
        screen.expect_own_prompt("again");
        screen.own_prompt_sent("again", Some(2));
        assert!(screen.claim_own_turn(2, "again"));
        // Another client typing the same words later is not mistaken for us.
        assert!(!screen.claim_own_turn(3, "again"));
        screen.expect_own_prompt("lost");
        screen.own_prompt_sent("lost", None);
        assert!(!screen.claim_own_turn(4, "lost"));
    }
}
