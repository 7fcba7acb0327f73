//! Verified goals (`- [ ] … (verify: CMD)`): which checked boxes still have to pass their
//! command, and what the loop remembers of passed and failed checks, both bounded.

use serde::{Deserialize, Serialize};

use super::file::{Goal, GoalList};
use super::state::LoopState;

/// Verified goals remembered as passed; a loop with more re-checks the oldest.
const MAX_PASSED_CHECKS: usize = 200;
/// Failed checks reported to the next cycle; more are summed up by the boxes left open.
const MAX_REPORTED_CHECKS: usize = 4;

/// A verified goal whose command failed: what the next cycle is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckFailure {
    pub goal: String,
    pub command: String,
    /// The command's output, bounded.
    pub output: String,
}

impl LoopState {
    /// The verified goals that are checked and have not passed their check in this loop.
    pub fn pending_checks<'a>(&self, goals: &'a GoalList) -> Vec<&'a Goal> {
        goals
            .items
            .iter()
            .filter(|goal| goal.done && goal.verify.is_some())
            .filter(|goal| !self.passed_checks.contains(&goal.text))
            .collect()
    }

    pub fn check_passed(&mut self, goal: &str) {
        if self.passed_checks.len() >= MAX_PASSED_CHECKS {
            self.passed_checks.remove(0);
        }
        self.passed_checks.push(goal.to_owned());
    }

    pub fn check_failed(&mut self, failure: CheckFailure) {
        self.failed_checks
            .retain(|known| known.goal != failure.goal);
        if self.failed_checks.len() >= MAX_REPORTED_CHECKS {
            self.failed_checks.remove(0);
        }
        self.failed_checks.push(failure);
    }

    /// Every box is checked and every verified one passed its check.
    pub fn is_complete(&self, goals: &GoalList) -> bool {
        goals.left_count() == 0 && self.pending_checks(goals).is_empty()
    }
}

#[cfg(test)]
#[path = "checks_tests.rs"]
mod tests;
