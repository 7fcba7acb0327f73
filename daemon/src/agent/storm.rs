//! The storm-breaker (SPEC §7.2): a model that repeats the same failing call, or the same call
//! that changes nothing, burns tokens without progress. Three identical outcomes in a row stop
//! the turn with an explanation the user can act on.

use cwcode_protocol::ToolCall;

use crate::util::{normalise_arguments, shorten};

/// How many identical outcomes in a row stop the turn.
pub const REPEAT_LIMIT: u32 = 3;

/// What a finished call achieved, as far as the storm-breaker cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Made,
    Failed,
    /// It succeeded and changed nothing (an edit leaving the file as it was).
    ChangedNothing,
}

#[derive(Debug, Default)]
pub struct StormBreaker {
    last: Option<Outcome>,
    repeats: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    tool: String,
    arguments: String,
    result: String,
    failed: bool,
}

impl StormBreaker {
    /// Notes one finished call. Returns the explanation to give the user when this call makes
    /// the third identical failure (or no-op) in a row.
    pub fn observe(&mut self, call: &ToolCall, output: &str, progress: Progress) -> Option<String> {
        if progress == Progress::Made {
            self.last = None;
            self.repeats = 0;
            return None;
        }
        let outcome = Outcome {
            tool: call.name.clone(),
            arguments: normalise_arguments(&call.arguments),
            result: output.to_owned(),
            failed: progress == Progress::Failed,
        };
        if self.last.as_ref() == Some(&outcome) {
            self.repeats += 1;
        } else {
            self.last = Some(outcome);
            self.repeats = 1;
        }
        (self.repeats >= REPEAT_LIMIT).then(|| self.explain())
    }

    fn explain(&self) -> String {
        let Some(outcome) = &self.last else {
            return String::new();
        };
        let what = if outcome.failed {
            format!(
                "`{}` failed {REPEAT_LIMIT} times in a row, called the same way and failing the same way each time",
                outcome.tool
            )
        } else {
            format!(
                "`{}` was called {REPEAT_LIMIT} times in a row the same way and changed nothing each time",
                outcome.tool
            )
        };
        format!(
            "I stopped here: {what}, so repeating it would not help.\n\nThe call: {} {}\nWhat it returned:\n{}\n\nCould you clarify what you want, or fix what blocks it (a missing file, a command that needs different permissions, an instruction I misread)? Then I'll continue.",
            outcome.tool,
            shorten(&outcome.arguments, 600),
            shorten(&outcome.result, 1200)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(arguments: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: "bash".into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn three_identical_failures_stop_and_name_the_tool_and_error() {
        let mut breaker = StormBreaker::default();
        let failing = call(r#"{"command":"make"}"#);
        assert!(
            breaker
                .observe(&failing, "no rule to make target", Progress::Failed)
                .is_none()
        );
        // The same arguments, formatted differently, are the same call.
        assert!(
            breaker
                .observe(
                    &call(r#"{ "command": "make" }"#),
                    "no rule to make target",
                    Progress::Failed
                )
                .is_none()
        );
        let explanation = breaker
            .observe(&failing, "no rule to make target", Progress::Failed)
            .unwrap();
        assert!(
            explanation.contains("`bash` failed 3 times"),
            "{explanation}"
        );
        assert!(explanation.contains("no rule to make target"));
        assert!(explanation.contains("make"));
    }

    #[test]
    fn a_success_or_a_different_error_resets_the_count() {
        let mut breaker = StormBreaker::default();
        let failing = call(r#"{"command":"make"}"#);
        breaker.observe(&failing, "error A", Progress::Failed);
        breaker.observe(&failing, "error A", Progress::Failed);
        assert!(
            breaker
                .observe(&failing, "error B", Progress::Failed)
                .is_none()
        );
        breaker.observe(&failing, "error B", Progress::Failed);
        assert!(breaker.observe(&failing, "fine", Progress::Made).is_none());
        assert!(
            breaker
                .observe(&failing, "error B", Progress::Failed)
                .is_none()
        );
    }

    #[test]
    fn three_no_op_edits_stop_too() {
        let mut breaker = StormBreaker::default();
        let edit = ToolCall {
            id: "e".into(),
            name: "edit_file".into(),
            arguments: r#"{"path":"a","old_string":"x","new_string":"x"}"#.into(),
        };
        let output = "No change: the replacements leave `a` as it was; nothing was written.";
        breaker.observe(&edit, output, Progress::ChangedNothing);
        breaker.observe(&edit, output, Progress::ChangedNothing);
        let explanation = breaker
            .observe(&edit, output, Progress::ChangedNothing)
            .unwrap();
        assert!(explanation.contains("changed nothing"), "{explanation}");
    }

    #[test]
    fn a_success_is_progress_whatever_its_text_says() {
        let mut breaker = StormBreaker::default();
        let read = call(r#"{"command":"cat notes"}"#);
        for _ in 0..REPEAT_LIMIT {
            assert!(
                breaker
                    .observe(&read, "No change yet, says the note", Progress::Made)
                    .is_none()
            );
        }
    }
}
