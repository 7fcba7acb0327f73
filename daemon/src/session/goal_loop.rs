//! The goal loop in a session (SPEC §1, §5): consecutive turns, each prompted with the
//! unchecked goals of `goals.md`, until every box is checked or a limit stops it. The loop's
//! state lives on disk, so a restarted daemon resumes it at the next cycle.

use std::path::{Path, PathBuf};

use cwcode_protocol::{EventKind, GoalItem, GoalStartParams, GoalStatus};

use crate::agent::{self, TurnEnv};
use crate::goals::{self, Decision, GoalList, LoopState, StopReason, TurnSummary};

use super::{Session, SessionError, Work, accounting};
use crate::agent::history::Conversation;

pub const GOALS_FILE: &str = "goals.md";
const STATE_FILE: &str = "goal_loop.json";

pub fn state_path(session_dir: &Path) -> PathBuf {
    session_dir.join(STATE_FILE)
}

fn goals_error(error: impl std::fmt::Display) -> SessionError {
    SessionError::Goals(error.to_string())
}

impl Session {
    fn goals_file(&self) -> PathBuf {
        Path::new(&self.control().info.cwd).join(GOALS_FILE)
    }

    fn goals(&self) -> Result<GoalList, SessionError> {
        GoalList::load(&self.goals_file()).map_err(goals_error)
    }

    fn save_goal_state(&self, state: &LoopState) -> Result<(), SessionError> {
        state.save(&state_path(&self.dir)).map_err(goals_error)
    }

    pub fn goal_status(&self) -> Result<GoalStatus, SessionError> {
        let goals = self.goals()?;
        let state = self.goal_state();
        Ok(GoalStatus {
            running: state.running,
            cycle: state.cycle,
            cap: state.cap,
            goals_file: self.goals_file().display().to_string(),
            goals: goals
                .items
                .iter()
                .map(|goal| GoalItem {
                    text: goal.text.clone(),
                    done: goal.done,
                })
                .collect(),
            done: goals.done_count(),
            left: goals.left_count(),
            tokens_used: state.tokens_used,
            cost_used: state.cost_used,
            token_budget: state.token_budget,
            cost_budget: state.cost_budget,
            stop_reason: state
                .stop_reason
                .as_ref()
                .map(|reason| state.reason_text(reason)),
            summary: state.summary(&goals),
        })
    }

    /// Appends `- [ ] TEXT` to goals.md, keeping whatever the user wrote there.
    pub fn goal_add(&self, text: &str) -> Result<GoalStatus, SessionError> {
        goals::append(&self.goals_file(), text).map_err(goals_error)?;
        self.goal_status()
    }

    pub fn goal_start(&self, params: GoalStartParams) -> Result<GoalStatus, SessionError> {
        if params.cost_budget.is_some() && self.prices().is_none() {
            return Err(SessionError::Goals(format!(
                "a cost budget needs prices: add \"pricing\" to profile `{}` in config.json, or use a token budget",
                self.control().info.profile
            )));
        }
        let goals = self.goals()?;
        let decision = {
            let mut state = self.goal_state();
            if state.running {
                return Err(SessionError::Goals(
                    "the goal loop is already running: `goal status` shows where it is".to_owned(),
                ));
            }
            if let Some(cap) = params.cap {
                state.cap = cap;
            }
            state.token_budget = params.token_budget;
            state.cost_budget = params.cost_budget;
            let decision = state.start(&goals);
            self.save_goal_state(&state)?;
            decision
        };
        self.follow(decision, &goals)?;
        self.goal_status()
    }

    /// Stops the loop: no further cycle starts, and a cycle in flight is cancelled.
    pub fn goal_stop(&self) -> Result<GoalStatus, SessionError> {
        let goals = self.goals()?;
        let was_running = {
            let mut state = self.goal_state();
            let was_running = state.stop(StopReason::StoppedByUser);
            self.save_goal_state(&state)?;
            was_running
        };
        if was_running {
            // A cycle in flight reports to the runner, which announces the stop; between
            // cycles nobody else will.
            if !self.control().goal_turn_running {
                self.announce_stop(&goals)?;
            }
            self.cancel();
        }
        self.goal_status()
    }

    /// Queues the decided cycle, or announces the end of the loop.
    fn follow(&self, decision: Decision, goals: &GoalList) -> Result<(), SessionError> {
        match decision {
            Decision::Continue { cycle } => self.enqueue(Work::GoalCycle { cycle }),
            Decision::Stop(_) => self.announce_stop(goals),
            Decision::Suspend => Ok(()),
        }
    }

    fn announce_stop(&self, goals: &GoalList) -> Result<(), SessionError> {
        let (reason, summary) = {
            let state = self.goal_state();
            let reason = state
                .stop_reason
                .as_ref()
                .map_or_else(String::new, |reason| state.reason_text(reason));
            (reason, state.summary(goals))
        };
        self.log
            .publish(EventKind::GoalLoopStopped { reason, summary })?;
        Ok(())
    }

    /// On daemon start: picks a loop that was running back up at its next cycle.
    pub(super) fn resume_goal_loop(&self) -> Result<(), SessionError> {
        let goals = self.goals()?;
        let decision = {
            let mut state = self.goal_state();
            let Some(decision) = state.resume(&goals) else {
                return Ok(());
            };
            self.save_goal_state(&state)?;
            decision
        };
        tracing::info!(session = %self.id, ?decision, "resuming the goal loop");
        self.follow(decision, &goals)
    }

    /// One cycle: a turn prompted with the open goals, then the decision about the next.
    pub(super) async fn run_goal_cycle(
        &self,
        env: &TurnEnv,
        conversation: &mut Conversation,
        cycle: u32,
    ) -> Result<(), SessionError> {
        let goals = self.goals()?;
        let cap = {
            let state = self.goal_state();
            if !state.running {
                return Ok(());
            }
            state.cap
        };
        let prompt = goals::continuation_message(&goals, GOALS_FILE, cycle, cap);
        let turn = {
            let mut control = self.control();
            control.goal_turn_running = true;
            let turn = control.next_turn;
            control.next_turn += 1;
            turn
        };
        self.log
            .publish(EventKind::GoalCycleStarted { cycle, cap })?;
        let report = agent::run_turn(env, conversation, turn, prompt).await;
        self.control().goal_turn_running = false;
        let report = report?;
        let cost = self.prices().map_or(0.0, |prices| {
            accounting::price(turn, &report.usage, &prices).total
        });
        let summary = TurnSummary {
            outcome: report.outcome,
            usage: report.usage,
            cost,
            error: report.error,
        };
        let goals = self.goals()?;
        self.log.publish(EventKind::GoalCycleFinished {
            cycle,
            done: goals.done_count(),
            left: goals.left_count(),
        })?;
        let decision = {
            let mut state = self.goal_state();
            let decision = state.next(&goals, &summary);
            self.save_goal_state(&state)?;
            decision
        };
        self.follow(decision, &goals)
    }
}
