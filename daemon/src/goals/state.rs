//! The goal loop's durable state and its decisions, as a pure unit: the agent runs the turns,
//! feeds each one's outcome to `LoopState::next`, does what the `Decision` says, and saves the
//! state after every call so a restarted daemon resumes at the right cycle.
//!
//! What a restart resumes: while a loop runs, the saved `cycle` is always the cycle decided on
//! and not yet finished, because finishing a cycle and deciding the next are one call (`next`)
//! whose result is saved at once. So a restart runs that cycle, under its number, whether the
//! daemon stopped during its turn or before it started: a loop capped at N cycles does N
//! cycles of work, none skipped and none counted twice. Only a cycle that keeps bringing the
//! daemon down (`MAX_RESUMES` restarts) is counted as spent, so that such a loop still ends.
//!
//! An approval needed in `code` mode is no stop and no decision: the turn itself waits for it,
//! so the loop is paused while that turn is open and goes on when it ends. Time comes in as
//! milliseconds since the Unix epoch, so every decision here can be tested without a clock.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use cwcode_protocol::{GoalState, TurnOutcome, Usage};
use serde::{Deserialize, Serialize};

use super::checks::CheckFailure;
use super::file::GoalList;
use super::stall::RepeatedFailure;

/// The file in the session directory that holds a session's `LoopState`.
pub const FILE_NAME: &str = "goal_loop.json";

/// Restarts that may run the same cycle again; at the next, the cycle counts as spent and the
/// loop goes on at the one after (or stops at its cap).
pub const MAX_RESUMES: u32 = 3;

/// Consecutive cycles a loop may run unless configured otherwise.
pub const DEFAULT_CAP: u32 = 20;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{} is damaged ({source}): move it aside to forget this session's goal loop",
        .path.display()
    )]
    Corrupt {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot encode the goal loop state: {0}")]
    Encode(#[source] serde_json::Error),
    #[error(transparent)]
    Write(#[from] crate::store::WriteError),
}

/// Why a loop ended. Stored in the state and shown by `goal/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", content = "error", rename_all = "snake_case")]
pub enum StopReason {
    /// Every box in goals.md is checked (or it lists no goal at all), and every verified box
    /// passed its check.
    AllDone,
    /// The loop ran its cap of consecutive cycles with goals still open.
    CapReached,
    /// The storm-breaker stopped a turn (SPEC §7.2), or the same call failed the same way in
    /// several cycles in a row: the model was stuck.
    StormBroken,
    /// The loop's token, cost or wall-clock budget is used up.
    BudgetSpent,
    /// Several cycles in a row checked no box and changed no file.
    Stalled,
    /// `/goal off`, or the user cancelled the loop's turn.
    StoppedByUser,
    /// A turn failed (provider or daemon error); the text says why.
    TurnFailed(String),
}

impl StopReason {
    /// The end state this reason puts the loop in.
    pub fn state(&self) -> GoalState {
        match self {
            StopReason::AllDone => GoalState::Complete,
            StopReason::CapReached => GoalState::Capped,
            StopReason::StormBroken => GoalState::Storm,
            StopReason::BudgetSpent => GoalState::BudgetExhausted,
            StopReason::Stalled => GoalState::Stalled,
            StopReason::StoppedByUser => GoalState::Stopped,
            StopReason::TurnFailed(_) => GoalState::Failed,
        }
    }
}

/// A session's goal loop, as saved in `goal_loop.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoopState {
    pub running: bool,
    /// Cycles started so far, the one running included; the cap counts these. While the loop
    /// runs, this one has not finished yet.
    pub cycle: u32,
    /// Daemon restarts that resumed `cycle` without it finishing.
    pub resumes: u32,
    pub cap: u32,
    pub token_budget: Option<u64>,
    pub cost_budget: Option<f64>,
    /// Wall-clock hours from the start, daemon downtime included.
    pub hours_budget: Option<f64>,
    /// Prompt plus completion tokens of the loop's turns (cached prompt tokens included: the
    /// provider bills them, only cheaper).
    pub tokens_used: u64,
    pub cost_used: f64,
    /// When the loop started and ended, in ms since the Unix epoch.
    pub started_at_ms: u64,
    pub ended_at_ms: Option<u64>,
    pub stop_reason: Option<StopReason>,
    /// Boxes checked when the running cycle started, to tell progress.
    pub done_at_cycle_start: usize,
    /// Consecutive cycles that checked no box and changed no file, and what the model did in
    /// each of them (for the explanation if the loop stalls).
    pub idle_cycles: u32,
    pub idle_attempts: Vec<String>,
    /// Calls that failed the same way in consecutive cycles.
    pub failing_calls: Vec<RepeatedFailure>,
    /// Verified goals (by text) whose check passed in this loop.
    pub passed_checks: Vec<String>,
    /// Checks that failed after the last cycle, for the next cycle's prompt.
    pub failed_checks: Vec<CheckFailure>,
    /// Why a stalled or storm-stopped loop was stopped, in plain words, as given to the user
    /// and kept in the history.
    pub explanation: Option<String>,
    /// The loop's end was announced: `goal off` and the runner may both see it, and it is told
    /// once.
    #[serde(skip)]
    pub announced: bool,
}

impl Default for LoopState {
    fn default() -> Self {
        Self {
            running: false,
            cycle: 0,
            resumes: 0,
            cap: DEFAULT_CAP,
            token_budget: None,
            cost_budget: None,
            hours_budget: None,
            tokens_used: 0,
            cost_used: 0.0,
            started_at_ms: 0,
            ended_at_ms: None,
            stop_reason: None,
            done_at_cycle_start: 0,
            idle_cycles: 0,
            idle_attempts: Vec::new(),
            failing_calls: Vec::new(),
            passed_checks: Vec::new(),
            failed_checks: Vec::new(),
            explanation: None,
            announced: false,
        }
    }
}

/// One tool call of a loop turn, as the journal recorded its end.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallRecord {
    pub tool: String,
    pub arguments: String,
    pub output: String,
    pub failed: bool,
}

/// What one loop turn came to.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnSummary {
    pub outcome: TurnOutcome,
    pub usage: Usage,
    /// What the turn cost, 0.0 when the profile has no prices.
    pub cost: f64,
    /// The turn's error, for `TurnOutcome::Failed`.
    pub error: Option<String>,
    /// The turn's checkpoint lists a changed file (an edit, a write, a shell command's change).
    pub files_changed: bool,
    /// The calls the model made, in order.
    pub calls: Vec<CallRecord>,
    /// The model's last answer text.
    pub answer: String,
}

/// What the agent does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start cycle `cycle` (1-based) with `continuation_message`.
    Continue { cycle: u32 },
    /// The loop is over: announce `LoopState::summary`.
    Stop(StopReason),
    /// The daemon is stopping: start nothing and keep the loop running on disk, so that
    /// `resume` runs the interrupted cycle again when the daemon starts again.
    Suspend,
}

/// Milliseconds since the Unix epoch, by the system clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

impl LoopState {
    /// Reads the state; a missing file is a loop that never ran.
    pub fn load(path: &Path) -> Result<Self, StateError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(StateError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        serde_json::from_slice(&bytes).map_err(|source| StateError::Corrupt {
            path: path.to_owned(),
            source,
        })
    }

    /// Replaces the file atomically, so a crash leaves the previous state or this one.
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        let mut bytes = serde_json::to_vec_pretty(self).map_err(StateError::Encode)?;
        bytes.push(b'\n');
        crate::store::atomic_write(path, &bytes, crate::store::Durability::Synced)?;
        Ok(())
    }

    /// Starts a new loop with this state's cap and budgets (set them first): counts start from
    /// zero and the decision is about the first cycle.
    pub fn start(&mut self, goals: &GoalList, now_ms: u64) -> Decision {
        let (cap, token_budget, cost_budget, hours_budget) = (
            self.cap,
            self.token_budget,
            self.cost_budget,
            self.hours_budget,
        );
        *self = Self {
            running: true,
            cap,
            token_budget,
            cost_budget,
            hours_budget,
            started_at_ms: now_ms,
            ..Self::default()
        };
        self.advance(goals, now_ms)
    }

    /// On daemon start: the decision for a loop that was running when the daemon stopped or
    /// crashed, or `None` when no loop was running. The cycle it was in (its turn interrupted,
    /// or decided on and not started yet) runs again under its number, unless the loop has
    /// nothing left to do (boxes checked while the daemon was down, the wall clock spent) or
    /// that cycle was already resumed `MAX_RESUMES` times.
    pub fn resume(&mut self, goals: &GoalList, now_ms: u64) -> Option<Decision> {
        if !self.running {
            return None;
        }
        if self.cycle == 0 || self.resumes >= MAX_RESUMES {
            // A state trimmed by hand, or a cycle that brings the daemon down every time.
            return Some(self.advance(goals, now_ms));
        }
        if self.is_complete(goals) {
            return Some(self.finish(StopReason::AllDone, now_ms));
        }
        if self.budget_spent(now_ms) {
            return Some(self.finish(StopReason::BudgetSpent, now_ms));
        }
        self.resumes += 1;
        Some(Decision::Continue { cycle: self.cycle })
    }

    /// After each loop turn: counts its tokens and cost, then decides. goals.md is re-read by the
    /// caller just before (and the checks of newly checked verified goals run), so boxes checked
    /// by the model or by hand are honoured.
    pub fn next(&mut self, goals: &GoalList, last_turn: &TurnSummary, now_ms: u64) -> Decision {
        self.tokens_used = self
            .tokens_used
            .saturating_add(last_turn.usage.prompt_tokens)
            .saturating_add(last_turn.usage.completion_tokens);
        // A provider reporting a nonsensical price must not poison the saved state (NaN
        // becomes JSON null, which would not load again).
        if last_turn.cost.is_finite() && last_turn.cost > 0.0 {
            self.cost_used += last_turn.cost;
        }
        if !self.running {
            // Stopped while the turn ran (`stop`); the reason is already recorded.
            return Decision::Stop(
                self.stop_reason
                    .clone()
                    .unwrap_or(StopReason::StoppedByUser),
            );
        }
        match last_turn.outcome {
            TurnOutcome::Completed => {
                let stuck = self.observe_cycle(goals, last_turn);
                match stuck {
                    Some(reason) if !self.is_complete(goals) && self.cycle < self.cap => {
                        self.finish(reason, now_ms)
                    }
                    _ => self.advance(goals, now_ms),
                }
            }
            TurnOutcome::Interrupted => Decision::Suspend,
            // The wall-clock budget ends a turn that outlives it by cancelling it.
            TurnOutcome::Cancelled if self.wall_clock_spent(now_ms) => {
                self.finish(StopReason::BudgetSpent, now_ms)
            }
            TurnOutcome::Cancelled => self.finish(StopReason::StoppedByUser, now_ms),
            TurnOutcome::StormBroken => self.finish(StopReason::StormBroken, now_ms),
            TurnOutcome::Failed => self.finish(
                StopReason::TurnFailed(
                    last_turn
                        .error
                        .clone()
                        .unwrap_or_else(|| "the turn failed without saying why".to_owned()),
                ),
                now_ms,
            ),
        }
    }

    /// Before a cycle's turn, once the checks of goals checked meanwhile have run: a loop whose
    /// goals are all done and verified ends here, without spending a turn on nothing.
    pub fn before_turn(&mut self, goals: &GoalList, now_ms: u64) -> Option<Decision> {
        if !self.running || !self.is_complete(goals) {
            return None;
        }
        // The cycle was counted when it was decided; it never ran.
        self.cycle = self.cycle.saturating_sub(1);
        Some(self.finish(StopReason::AllDone, now_ms))
    }

    /// Ends a running loop from outside (`/goal off`); false when none was running. A turn in
    /// flight still reports to `next`, which then answers `Stop` with this reason.
    pub fn stop(&mut self, reason: StopReason) -> bool {
        self.stop_at(reason, now_ms())
    }

    pub fn stop_at(&mut self, reason: StopReason, now_ms: u64) -> bool {
        if !self.running {
            return false;
        }
        self.finish(reason, now_ms);
        true
    }

    /// The machine-readable state; `awaiting_approval` when a running loop's turn waits for one.
    pub fn state(&self, awaiting_approval: bool) -> GoalState {
        match &self.stop_reason {
            _ if self.running && awaiting_approval => GoalState::AwaitingApproval,
            _ if self.running => GoalState::Running,
            Some(reason) => reason.state(),
            None => GoalState::Idle,
        }
    }

    fn advance(&mut self, goals: &GoalList, now_ms: u64) -> Decision {
        if self.is_complete(goals) {
            return self.finish(StopReason::AllDone, now_ms);
        }
        if self.budget_spent(now_ms) {
            return self.finish(StopReason::BudgetSpent, now_ms);
        }
        if self.cycle >= self.cap {
            return self.finish(StopReason::CapReached, now_ms);
        }
        self.cycle += 1;
        self.resumes = 0;
        self.done_at_cycle_start = goals.done_count();
        Decision::Continue { cycle: self.cycle }
    }

    fn finish(&mut self, reason: StopReason, now_ms: u64) -> Decision {
        self.running = false;
        self.ended_at_ms = Some(now_ms);
        if !matches!(reason, StopReason::Stalled | StopReason::StormBroken) {
            self.explanation = None;
        }
        self.stop_reason = Some(reason.clone());
        Decision::Stop(reason)
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
pub(super) mod tests;
