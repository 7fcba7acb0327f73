//! The loop in plain words: why it ended, which goals are left and what it used, for the final
//! event, `goal status` and the TUI banner.

use super::file::GoalList;
use super::stall::STALL_LIMIT;
use super::state::{LoopState, StopReason};

impl LoopState {
    /// The plain-language account of a loop, for the final event and message: why it ended,
    /// which goals are left, and what it used.
    pub fn summary(&self, goals: &GoalList) -> String {
        let total = goals.items.len();
        let cycles = plural(self.cycle, "cycle");
        let mut text = match &self.stop_reason {
            _ if self.running => {
                format!("Goal loop running: cycle {} of {}.", self.cycle, self.cap)
            }
            None => "Goal loop not started.".to_owned(),
            Some(StopReason::AllDone) if total == 0 => {
                format!("Goal loop stopped after {cycles}: goals.md lists no goals.")
            }
            Some(StopReason::AllDone) => {
                format!("Goal loop finished after {cycles}: all {total} goals are done.")
            }
            Some(reason) => format!(
                "Goal loop stopped after {cycles}: {}. {} of {total} goals done.",
                self.reason_text(reason),
                goals.done_count()
            ),
        };
        let mut left = goals.unchecked().peekable();
        if left.peek().is_some() {
            text.push_str(" Left:");
            for goal in left {
                text.push_str("\n- ");
                text.push_str(&goal.text);
            }
            text.push('\n');
        } else {
            text.push(' ');
        }
        text.push_str(&format!("Used {} tokens", self.tokens_used));
        if self.cost_used > 0.0 {
            text.push_str(&format!(" ({})", dollars(self.cost_used)));
        }
        text.push('.');
        text
    }

    pub fn reason_text(&self, reason: &StopReason) -> String {
        match reason {
            StopReason::AllDone => "every goal is done".to_owned(),
            StopReason::CapReached => {
                format!("it reached its cap of {}", plural(self.cap, "cycle"))
            }
            StopReason::StormBroken if self.explanation.is_some() => {
                format!("the same call failed the same way in {STALL_LIMIT} cycles in a row")
            }
            StopReason::StormBroken => {
                "the storm-breaker stopped a turn that kept repeating a failing tool call"
                    .to_owned()
            }
            StopReason::Stalled => {
                format!("{STALL_LIMIT} cycles in a row checked no box and changed no file")
            }
            StopReason::BudgetSpent => match (self.token_budget, self.cost_budget) {
                (Some(budget), _) if self.tokens_used >= budget => {
                    format!("its budget of {budget} tokens is spent")
                }
                (_, Some(budget)) if self.cost_used >= budget => {
                    format!("its budget of {} is spent", dollars(budget))
                }
                _ => match self.hours_budget {
                    Some(hours) => {
                        format!("its wall-clock budget of {} is spent", hours_text(hours))
                    }
                    None => "its budget is spent".to_owned(),
                },
            },
            StopReason::StoppedByUser => "the user stopped it".to_owned(),
            StopReason::TurnFailed(error) => format!("a turn failed: {error}"),
        }
    }
}

fn hours_text(hours: f64) -> String {
    if hours >= 1.0 {
        format!("{hours} h")
    } else {
        format!("{} s", (hours * 3600.0).round())
    }
}

/// Cents, unless that would show a small loop as free.
fn dollars(amount: f64) -> String {
    if amount < 0.005 {
        format!("${amount:.4}")
    } else {
        format!("${amount:.2}")
    }
}

fn plural(count: u32, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}
