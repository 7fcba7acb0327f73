//! The goal loop's durable state and its decisions, as a pure unit: the agent runs the turns,
//! feeds each one's outcome to `LoopState::next`, does what the `Decision` says, and saves the
//! state after every call so a restarted daemon resumes at the right cycle.
//!
//! An approval needed in `code` mode is no stop and no decision: the turn itself waits for it,
//! so the loop is paused while that turn is open and goes on when it ends.

use std::io;
use std::path::{Path, PathBuf};

use cwcode_protocol::{TurnOutcome, Usage};
use serde::{Deserialize, Serialize};

/// The file in the session directory that holds a session's `LoopState`.
pub const FILE_NAME: &str = "goal_loop.json";

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
    /// Every box in goals.md is checked (or it lists no goal at all).
    AllDone,
    /// The loop ran its cap of consecutive cycles with goals still open.
    CapReached,
    /// The storm-breaker stopped a turn (SPEC §7.2): the model was stuck.
    StormBroken,
    /// The loop's token or cost budget is used up.
    BudgetSpent,
    /// `/goal off`, or the user cancelled the loop's turn.
    StoppedByUser,
    /// A turn failed (provider or daemon error); the text says why.
    TurnFailed(String),
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
    /// Prompt plus completion tokens of the loop's turns (cached prompt tokens included: the
    /// provider bills them, only cheaper).
    pub tokens_used: u64,
    pub cost_used: f64,
    pub stop_reason: Option<StopReason>,
}

impl Default for LoopState {
    fn default() -> Self {
        Self {
            running: false,
            cycle: 0,
            cap: DEFAULT_CAP,
            token_budget: None,
            cost_budget: None,
            tokens_used: 0,
            cost_used: 0.0,
            stop_reason: None,
        }
    }
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
    pub fn start(&mut self, goals: &crate::goals::GoalList) -> Decision {
        self.running = true;
        self.cycle = 0;
        self.tokens_used = 0;
        self.cost_used = 0.0;
        self.stop_reason = None;
        self.advance(goals)
    }

    /// On daemon start: the decision for a loop that was running when the daemon stopped or
    /// crashed (its last cycle counts as spent), or `None` when no loop was running.
    pub fn resume(&mut self, goals: &crate::goals::GoalList) -> Option<Decision> {
        self.running.then(|| self.advance(goals))
    }

    /// After each loop turn: counts its tokens and cost, then decides. goals.md is re-read by the
    /// caller just before, so boxes checked by the model or by hand are honoured.
    pub fn next(&mut self, goals: &crate::goals::GoalList, last_turn: &TurnSummary) -> Decision {
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
            TurnOutcome::Completed => self.advance(goals),
            TurnOutcome::Interrupted => Decision::Suspend,
            TurnOutcome::Cancelled => self.finish(StopReason::StoppedByUser),
            TurnOutcome::StormBroken => self.finish(StopReason::StormBroken),
            TurnOutcome::Failed => self.finish(StopReason::TurnFailed(
                last_turn
                    .error
                    .clone()
                    .unwrap_or_else(|| "the turn failed without saying why".to_owned()),
            )),
        }
    }

    /// Ends a running loop from outside (`/goal off`); false when none was running. A turn in
    /// flight still reports to `next`, which then answers `Stop` with this reason.
    pub fn stop(&mut self, reason: StopReason) -> bool {
        if !self.running {
            return false;
        }
        self.running = false;
        self.stop_reason = Some(reason);
        true
    }

    fn advance(&mut self, goals: &crate::goals::GoalList) -> Decision {
        if goals.left_count() == 0 {
            return self.finish(StopReason::AllDone);
        }
        if self.budget_spent() {
            return self.finish(StopReason::BudgetSpent);
        }
        if self.cycle >= self.cap {
            return self.finish(StopReason::CapReached);
        }
        self.cycle += 1;
        Decision::Continue { cycle: self.cycle }
    }

    fn budget_spent(&self) -> bool {
        self.token_budget
            .is_some_and(|budget| self.tokens_used >= budget)
            || self
                .cost_budget
                .is_some_and(|budget| self.cost_used >= budget)
    }

    fn finish(&mut self, reason: StopReason) -> Decision {
        self.running = false;
        self.stop_reason = Some(reason.clone());
        Decision::Stop(reason)
    }

    /// The plain-language account of a loop, for the final event and message: why it ended,
    /// which goals are left, and what it used.
    pub fn summary(&self, goals: &crate::goals::GoalList) -> String {
        let total = goals.items.len();
        let cycles = plural(self.cycle, "cycle");
        let mut text = match &self.stop_reason {
            None if self.running => {
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
            StopReason::StormBroken => {
                "the storm-breaker stopped a turn that kept repeating a failing tool call"
                    .to_owned()
            }
            StopReason::BudgetSpent => match (self.token_budget, self.cost_budget) {
                (Some(budget), _) if self.tokens_used >= budget => {
                    format!("its budget of {budget} tokens is spent")
                }
                (_, Some(budget)) => format!("its budget of {} is spent", dollars(budget)),
                _ => "its budget is spent".to_owned(),
            },
            StopReason::StoppedByUser => "the user stopped it".to_owned(),
            StopReason::TurnFailed(error) => format!("a turn failed: {error}"),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goals::GoalList;

    fn turn(outcome: TurnOutcome) -> TurnSummary {
        TurnSummary {
            outcome,
            usage: Usage {
                prompt_tokens: 1000,
                completion_tokens: 200,
                cached_tokens: 800,
            },
            cost: 0.01,
            error: None,
        }
    }

    fn goals(done: usize, left: usize) -> GoalList {
        let mut text = String::from("# Goals\n");
        for index in 0..done {
            text.push_str(&format!("- [x] done {index}\n"));
        }
        for index in 0..left {
            text.push_str(&format!("- [ ] open {index}\n"));
        }
        GoalList::parse(&text)
    }

    #[test]
    fn a_loop_continues_cycle_by_cycle_and_stops_when_every_box_is_checked() {
        let mut state = LoopState::default();
        assert_eq!(state.cap, 20);
        assert_eq!(state.start(&goals(0, 3)), Decision::Continue { cycle: 1 });
        let completed = turn(TurnOutcome::Completed);
        assert_eq!(
            state.next(&goals(1, 2), &completed),
            Decision::Continue { cycle: 2 }
        );
        assert_eq!(
            state.next(&goals(2, 1), &completed),
            Decision::Continue { cycle: 3 }
        );
        assert_eq!(
            state.next(&goals(3, 0), &completed),
            Decision::Stop(StopReason::AllDone)
        );
        assert!(!state.running);
        assert_eq!(state.cycle, 3);
        assert_eq!(state.tokens_used, 3 * 1200);
        assert!((state.cost_used - 0.03).abs() < 1e-9);
        assert_eq!(state.stop_reason, Some(StopReason::AllDone));
    }

    #[test]
    fn a_loop_with_nothing_left_stops_before_its_first_cycle() {
        let mut state = LoopState::default();
        assert_eq!(
            state.start(&goals(2, 0)),
            Decision::Stop(StopReason::AllDone)
        );
        assert_eq!(state.cycle, 0);
        assert_eq!(
            state.start(&goals(0, 0)),
            Decision::Stop(StopReason::AllDone)
        );
        assert!(state.summary(&goals(0, 0)).contains("lists no goals"));
    }

    #[test]
    fn a_loop_that_never_finishes_stops_at_the_cap() {
        let mut state = LoopState {
            cap: 3,
            ..LoopState::default()
        };
        let open = goals(0, 2);
        let completed = turn(TurnOutcome::Completed);
        assert_eq!(state.start(&open), Decision::Continue { cycle: 1 });
        assert_eq!(
            state.next(&open, &completed),
            Decision::Continue { cycle: 2 }
        );
        assert_eq!(
            state.next(&open, &completed),
            Decision::Continue { cycle: 3 }
        );
        assert_eq!(
            state.next(&open, &completed),
            Decision::Stop(StopReason::CapReached)
        );
        assert_eq!(state.cycle, 3);
        let summary = state.summary(&open);
        assert!(
            summary.starts_with("Goal loop stopped after 3 cycles: it reached its cap of 3 cycles. 0 of 2 goals done. Left:\n- open 0\n- open 1\n"),
            "{summary}"
        );
    }

    #[test]
    fn the_last_cycle_checking_the_last_box_is_all_done_not_the_cap() {
        let mut state = LoopState {
            cap: 1,
            ..LoopState::default()
        };
        state.start(&goals(0, 1));
        assert_eq!(
            state.next(&goals(1, 0), &turn(TurnOutcome::Completed)),
            Decision::Stop(StopReason::AllDone)
        );
    }

    #[test]
    fn the_storm_breaker_stops_the_loop() {
        let mut state = LoopState::default();
        state.start(&goals(0, 1));
        assert_eq!(
            state.next(&goals(0, 1), &turn(TurnOutcome::StormBroken)),
            Decision::Stop(StopReason::StormBroken)
        );
        assert!(state.summary(&goals(0, 1)).contains("storm-breaker"));
    }

    #[test]
    fn a_token_budget_stops_the_loop_once_spent() {
        let mut state = LoopState {
            token_budget: Some(2000),
            ..LoopState::default()
        };
        let open = goals(0, 1);
        state.start(&open);
        let completed = turn(TurnOutcome::Completed);
        assert_eq!(
            state.next(&open, &completed),
            Decision::Continue { cycle: 2 }
        );
        assert_eq!(
            state.next(&open, &completed),
            Decision::Stop(StopReason::BudgetSpent)
        );
        assert_eq!(state.tokens_used, 2400);
        assert!(
            state
                .summary(&open)
                .contains("its budget of 2000 tokens is spent")
        );
    }

    #[test]
    fn a_cost_budget_stops_the_loop_once_spent() {
        let mut state = LoopState {
            cost_budget: Some(0.05),
            ..LoopState::default()
        };
        let open = goals(0, 1);
        state.start(&open);
        let completed = TurnSummary {
            cost: 0.03,
            ..turn(TurnOutcome::Completed)
        };
        assert_eq!(
            state.next(&open, &completed),
            Decision::Continue { cycle: 2 }
        );
        assert_eq!(
            state.next(&open, &completed),
            Decision::Stop(StopReason::BudgetSpent)
        );
        let summary = state.summary(&open);
        assert!(
            summary.contains("its budget of $0.05 is spent"),
            "{summary}"
        );
        assert!(summary.ends_with("Used 2400 tokens ($0.06)."), "{summary}");
    }

    #[test]
    fn a_tiny_cost_is_not_shown_as_free() {
        let state = LoopState {
            cost_used: 0.0012,
            stop_reason: Some(StopReason::StoppedByUser),
            ..LoopState::default()
        };
        assert!(state.summary(&goals(0, 0)).ends_with("($0.0012)."));
    }

    #[test]
    fn goal_off_during_a_turn_stops_with_the_users_reason() {
        let mut state = LoopState::default();
        let open = goals(0, 1);
        state.start(&open);
        assert!(state.stop(StopReason::StoppedByUser));
        assert!(!state.stop(StopReason::StoppedByUser), "already stopped");
        // The cancelled turn still reports, and its tokens still count.
        assert_eq!(
            state.next(&open, &turn(TurnOutcome::Cancelled)),
            Decision::Stop(StopReason::StoppedByUser)
        );
        assert_eq!(state.tokens_used, 1200);
        assert!(state.summary(&open).contains("the user stopped it"));
    }

    #[test]
    fn cancelling_the_loops_turn_stops_the_loop() {
        let mut state = LoopState::default();
        state.start(&goals(0, 1));
        assert_eq!(
            state.next(&goals(0, 1), &turn(TurnOutcome::Cancelled)),
            Decision::Stop(StopReason::StoppedByUser)
        );
    }

    #[test]
    fn a_failed_turn_stops_the_loop_with_its_error() {
        let mut state = LoopState::default();
        state.start(&goals(0, 1));
        let failed = TurnSummary {
            error: Some("provider answered 401: invalid key".to_owned()),
            ..turn(TurnOutcome::Failed)
        };
        let reason = StopReason::TurnFailed("provider answered 401: invalid key".to_owned());
        assert_eq!(
            state.next(&goals(0, 1), &failed),
            Decision::Stop(reason.clone())
        );
        assert!(
            state
                .summary(&goals(0, 1))
                .contains("a turn failed: provider answered 401: invalid key")
        );
        let mut other = LoopState::default();
        other.start(&goals(0, 1));
        assert!(matches!(
            other.next(&goals(0, 1), &turn(TurnOutcome::Failed)),
            Decision::Stop(StopReason::TurnFailed(error)) if !error.is_empty()
        ));
    }

    #[test]
    fn a_daemon_stop_suspends_and_the_restart_resumes_at_the_next_cycle_with_counts_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let open = goals(1, 2);
        let mut state = LoopState {
            cap: 5,
            token_budget: Some(1_000_000),
            ..LoopState::default()
        };
        state.start(&open);
        state.next(&open, &turn(TurnOutcome::Completed));
        state.save(&path).unwrap();

        // SIGTERM during cycle 2: the turn ends interrupted.
        let mut state = LoopState::load(&path).unwrap();
        assert_eq!(
            state.next(&open, &turn(TurnOutcome::Interrupted)),
            Decision::Suspend
        );
        assert!(state.running);
        state.save(&path).unwrap();

        let mut restarted = LoopState::load(&path).unwrap();
        assert_eq!(restarted, state);
        assert_eq!(
            restarted.resume(&open),
            Some(Decision::Continue { cycle: 3 })
        );
        assert_eq!(restarted.tokens_used, 2400);
        assert_eq!(restarted.token_budget, Some(1_000_000));
        restarted.save(&path).unwrap();

        // kill -9 during cycle 3: nothing reported; the restart goes on at 4, then hits the cap.
        let mut crashed = LoopState::load(&path).unwrap();
        assert_eq!(crashed.resume(&open), Some(Decision::Continue { cycle: 4 }));
        assert_eq!(crashed.resume(&open), Some(Decision::Continue { cycle: 5 }));
        assert_eq!(
            crashed.resume(&open),
            Some(Decision::Stop(StopReason::CapReached))
        );
        assert_eq!(crashed.resume(&open), None, "a stopped loop is not resumed");
    }

    #[test]
    fn goals_checked_while_the_daemon_was_down_finish_the_loop_on_resume() {
        let mut state = LoopState::default();
        state.start(&goals(0, 1));
        assert_eq!(
            state.resume(&goals(1, 0)),
            Some(Decision::Stop(StopReason::AllDone))
        );
    }

    #[test]
    fn a_missing_file_is_a_loop_that_never_ran_and_every_reason_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert_eq!(LoopState::load(&path).unwrap(), LoopState::default());
        for reason in [
            StopReason::AllDone,
            StopReason::CapReached,
            StopReason::StormBroken,
            StopReason::BudgetSpent,
            StopReason::StoppedByUser,
            StopReason::TurnFailed("boom".to_owned()),
        ] {
            let state = LoopState {
                cycle: 7,
                cost_used: 0.125,
                stop_reason: Some(reason),
                ..LoopState::default()
            };
            state.save(&path).unwrap();
            assert_eq!(LoopState::load(&path).unwrap(), state);
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(r#""stopReason": {"#) && text.contains(r#""reason": "turn_failed""#),
            "{text}"
        );
    }

    #[test]
    fn a_hand_trimmed_or_damaged_file_is_handled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        std::fs::write(&path, r#"{"running": true, "cycle": 4}"#).unwrap();
        let state = LoopState::load(&path).unwrap();
        assert!(state.running);
        assert_eq!((state.cycle, state.cap), (4, DEFAULT_CAP));
        std::fs::write(&path, "{not json").unwrap();
        let error = LoopState::load(&path).unwrap_err();
        assert!(error.to_string().contains("move it aside"), "{error}");
    }

    #[test]
    fn a_nonsensical_cost_is_not_counted() {
        let mut state = LoopState::default();
        state.start(&goals(0, 1));
        let odd = TurnSummary {
            cost: f64::NAN,
            ..turn(TurnOutcome::Completed)
        };
        state.next(&goals(0, 1), &odd);
        assert_eq!(state.cost_used, 0.0);
    }
}
