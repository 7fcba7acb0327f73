//! The loop's budgets: tokens, cost and wall-clock hours, what is used and left, and whether
//! one is spent. The wall clock runs from the loop's start, daemon downtime included.

use super::state::LoopState;

impl LoopState {
    /// When the wall-clock budget runs out, in ms since the epoch.
    pub fn deadline_ms(&self) -> Option<u64> {
        self.hours_budget
            .map(|hours| self.started_at_ms.saturating_add(hours_to_ms(hours)))
    }

    /// Wall-clock ms the loop ran (to its end, once it ended).
    pub fn elapsed_ms(&self, now_ms: u64) -> u64 {
        if self.started_at_ms == 0 {
            return 0;
        }
        self.ended_at_ms
            .unwrap_or(now_ms)
            .saturating_sub(self.started_at_ms)
    }

    pub fn tokens_left(&self) -> Option<u64> {
        self.token_budget
            .map(|budget| budget.saturating_sub(self.tokens_used))
    }

    pub fn cost_left(&self) -> Option<f64> {
        self.cost_budget
            .map(|budget| (budget - self.cost_used).max(0.0))
    }

    pub fn ms_left(&self, now_ms: u64) -> Option<u64> {
        self.deadline_ms()
            .map(|deadline| deadline.saturating_sub(self.ended_at_ms.unwrap_or(now_ms)))
    }

    pub(super) fn wall_clock_spent(&self, now_ms: u64) -> bool {
        self.deadline_ms()
            .is_some_and(|deadline| now_ms >= deadline)
    }

    pub(super) fn budget_spent(&self, now_ms: u64) -> bool {
        self.token_budget
            .is_some_and(|budget| self.tokens_used >= budget)
            || self
                .cost_budget
                .is_some_and(|budget| self.cost_used >= budget)
            || self.wall_clock_spent(now_ms)
    }
}

fn hours_to_ms(hours: f64) -> u64 {
    let ms = hours * 3_600_000.0;
    if ms.is_finite() && ms > 0.0 {
        // Saturates for absurd budgets, which is what they mean.
        ms as u64
    } else {
        0
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
