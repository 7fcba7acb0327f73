//! Stall and storm detection across cycles: a cycle that checks no box and changes no file is
//! no progress, and the same failing call in consecutive cycles is a storm; either, often
//! enough in a row, stops the loop with a plain account of what the model tried.

use serde::{Deserialize, Serialize};

use super::file::GoalList;
use super::state::{LoopState, StopReason, TurnSummary};
use crate::util::{normalise_arguments, shorten};

/// Cycles in a row without progress (no box checked, no file changed) that stall the loop; the
/// same failing call in this many cycles in a row is a storm.
pub const STALL_LIMIT: u32 = 3;

/// Failing calls followed from cycle to cycle; more in one cycle are not followed.
const MAX_FOLLOWED_FAILURES: usize = 16;

/// A failing call seen in consecutive cycles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepeatedFailure {
    pub tool: String,
    pub arguments: String,
    pub output: String,
    /// Consecutive cycles in which it failed this way.
    pub cycles: u32,
}

impl LoopState {
    /// Notes whether the cycle made progress and which calls failed, and says whether the loop
    /// is stuck: the same failure in several cycles in a row (a storm), or no progress at all.
    pub(super) fn observe_cycle(
        &mut self,
        goals: &GoalList,
        turn: &TurnSummary,
    ) -> Option<StopReason> {
        let mut failing: Vec<RepeatedFailure> = Vec::new();
        for call in turn.calls.iter().filter(|call| call.failed) {
            let arguments = normalise_arguments(&call.arguments);
            let same = |known: &&RepeatedFailure| {
                known.tool == call.tool
                    && known.arguments == arguments
                    && known.output == call.output
            };
            if failing.iter().any(|known| same(&known)) || failing.len() >= MAX_FOLLOWED_FAILURES {
                continue;
            }
            let before = self
                .failing_calls
                .iter()
                .find(same)
                .map_or(0, |known| known.cycles);
            failing.push(RepeatedFailure {
                tool: call.tool.clone(),
                arguments,
                output: call.output.clone(),
                cycles: before + 1,
            });
        }
        self.failing_calls = failing;
        if let Some(storm) = self
            .failing_calls
            .iter()
            .find(|failure| failure.cycles >= STALL_LIMIT)
        {
            self.explanation = Some(storm_explanation(storm));
            return Some(StopReason::StormBroken);
        }

        let progress = goals.done_count() > self.done_at_cycle_start || turn.files_changed;
        if progress {
            self.idle_cycles = 0;
            self.idle_attempts.clear();
            return None;
        }
        self.idle_cycles += 1;
        if self.idle_attempts.len() >= STALL_LIMIT as usize {
            self.idle_attempts.remove(0);
        }
        self.idle_attempts
            .push(format!("cycle {}: {}", self.cycle, attempt_text(turn)));
        if self.idle_cycles < STALL_LIMIT {
            return None;
        }
        self.explanation = Some(stall_explanation(&self.idle_attempts, goals));
        Some(StopReason::Stalled)
    }
}

/// What the model did in a cycle, in one line: its calls and the start of its answer.
fn attempt_text(turn: &TurnSummary) -> String {
    let mut parts: Vec<String> = turn
        .calls
        .iter()
        .take(6)
        .map(|call| {
            let outcome = if call.failed { " (failed)" } else { "" };
            format!(
                "{} {}{outcome}",
                call.tool,
                shorten(&normalise_arguments(&call.arguments), 80)
            )
        })
        .collect();
    if turn.calls.len() > 6 {
        parts.push(format!("{} more calls", turn.calls.len() - 6));
    }
    let calls = if parts.is_empty() {
        "called no tool".to_owned()
    } else {
        format!("called {}", parts.join(", "))
    };
    let answer = turn.answer.split_whitespace().collect::<Vec<_>>().join(" ");
    if answer.is_empty() {
        calls
    } else {
        format!("{calls}; said \"{}\"", shorten(&answer, 160))
    }
}

fn stall_explanation(attempts: &[String], goals: &GoalList) -> String {
    let mut text = format!(
        "I stopped the goal loop: {STALL_LIMIT} cycles in a row checked no box in goals.md and \
         changed no file, so more cycles would only spend tokens. What I tried:\n"
    );
    for attempt in attempts {
        text.push_str(&format!("- {attempt}\n"));
    }
    let mut left = goals.unchecked().peekable();
    if left.peek().is_some() {
        text.push_str("Still open:\n");
        for goal in left.take(10) {
            text.push_str(&format!("- {}\n", goal.text));
        }
    }
    text.push_str(
        "Could you say what blocks these goals, split them into smaller ones, or check a box \
         yourself if it is done? Then start the loop again.",
    );
    text
}

fn storm_explanation(storm: &RepeatedFailure) -> String {
    format!(
        "I stopped the goal loop: `{}` failed the same way in {} cycles in a row, called the \
         same way each time, so another cycle would not help.\n\nThe call: {} {}\nWhat it \
         returned:\n{}\n\nCould you fix what blocks it (a missing file or tool, a command that \
         needs other permissions, a goal I misread)? Then start the loop again.",
        storm.tool,
        storm.cycles,
        storm.tool,
        shorten(&storm.arguments, 600),
        shorten(&storm.output, 1200)
    )
}

#[cfg(test)]
#[path = "stall_tests.rs"]
mod tests;
