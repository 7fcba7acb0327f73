//! The goal loop's durable state and its decisions, as a pure unit: the agent runs the turns,
//! feeds each one's outcome to `LoopState::next`, does what the `Decision` says, and saves the
//! state after every call so a restarted daemon resumes at the right cycle.
//!
//! An approval needed in `code` mode is no stop and no decision: the turn itself waits for it,
//! so the loop is paused while that turn is open and goes on when it ends. Time comes in as
//! milliseconds since the Unix epoch, so every decision here can be tested without a clock.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use cwcode_protocol::{GoalState, TurnOutcome, Usage};
use serde::{Deserialize, Serialize};

use super::file::{Goal, GoalList};
use crate::util::{normalise_arguments, shorten};

/// The file in the session directory that holds a session's `LoopState`.
pub const FILE_NAME: &str = "goal_loop.json";

/// Consecutive cycles a loop may run unless configured otherwise.
pub const DEFAULT_CAP: u32 = 20;

/// Cycles in a row without progress (no box checked, no file changed) that stall the loop; the
/// same failing call in this many cycles in a row is a storm.
pub const STALL_LIMIT: u32 = 3;

/// Failing calls followed from cycle to cycle; more in one cycle are not followed.
const MAX_FOLLOWED_FAILURES: usize = 16;
/// Verified goals remembered as passed; a loop with more re-checks the oldest.
const MAX_PASSED_CHECKS: usize = 200;
/// Failed checks reported to the next cycle; more are summed up by the boxes left open.
const MAX_REPORTED_CHECKS: usize = 4;

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

/// A verified goal whose command failed: what the next cycle is told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckFailure {
    pub goal: String,
    pub command: String,
    /// The command's output, bounded.
    pub output: String,
}

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

/// A session's goal loop, as saved in `goal_loop.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoopState {
    pub running: bool,
    /// Cycles started so far, the one running included; the cap counts these.
    pub cycle: u32,
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
    /// `resume` picks it up at the next cycle when the daemon starts again.
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
    /// crashed (its last cycle counts as spent), or `None` when no loop was running.
    pub fn resume(&mut self, goals: &GoalList, now_ms: u64) -> Option<Decision> {
        self.running.then(|| self.advance(goals, now_ms))
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
        self.done_at_cycle_start = goals.done_count();
        Decision::Continue { cycle: self.cycle }
    }

    /// Notes whether the cycle made progress and which calls failed, and says whether the loop
    /// is stuck: the same failure in several cycles in a row (a storm), or no progress at all.
    fn observe_cycle(&mut self, goals: &GoalList, turn: &TurnSummary) -> Option<StopReason> {
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

    fn wall_clock_spent(&self, now_ms: u64) -> bool {
        self.deadline_ms()
            .is_some_and(|deadline| now_ms >= deadline)
    }

    fn budget_spent(&self, now_ms: u64) -> bool {
        self.token_budget
            .is_some_and(|budget| self.tokens_used >= budget)
            || self
                .cost_budget
                .is_some_and(|budget| self.cost_used >= budget)
            || self.wall_clock_spent(now_ms)
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

fn hours_to_ms(hours: f64) -> u64 {
    let ms = hours * 3_600_000.0;
    if ms.is_finite() && ms > 0.0 {
        // Saturates for absurd budgets, which is what they mean.
        ms as u64
    } else {
        0
    }
}

fn hours_text(hours: f64) -> String {
    if hours >= 1.0 {
        format!("{hours} h")
    } else {
        format!("{} s", (hours * 3600.0).round())
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
