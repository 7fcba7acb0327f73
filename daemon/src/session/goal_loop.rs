//! The goal loop in a session (SPEC §1, §5): consecutive turns, each prompted with the
//! unchecked goals of `goals.md`, until every box is checked (and every verified box passed its
//! check) or a limit stops it: the cap, a token, cost or wall-clock budget, a stall, a storm. The
//! loop's state lives on disk, so a restarted daemon resumes it: the cycle a restart
//! interrupted, or kept from starting, runs then under its own number (see `goals::state`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use cwcode_protocol::{
    EventKind, GoalItem, GoalProgress, GoalStartParams, GoalStatus, TurnOutcome, default_currency,
};

use crate::agent::history::Conversation;
use crate::agent::{self, CompactScope, TurnEnv};
use crate::goals::state::now_ms;
use crate::goals::{
    self, CallRecord, CheckFailure, Decision, GoalList, GoalsError, LoopState, StopReason,
    TurnSummary,
};
use crate::journal::Journal;
use crate::provider::{ChatRequest, estimate_request_tokens};
use crate::sandbox::secrets::Redactor;

use super::{Session, SessionError, Work, accounting};

pub const GOALS_FILE: &str = "goals.md";
/// The most of a failed check's output the next cycle is shown, in bytes.
const CHECK_OUTPUT_BYTES: usize = 4000;
/// The most calls of one cycle looked at for stalls and storms.
const MAX_CALLS_PER_CYCLE: usize = 200;
/// The most history, in estimated tokens, a loop carries into a cycle when the profile names no
/// context window (the agent compacts only against a known one): past it the history is
/// compacted first. Without it a loop of thousands of cycles would grow its history, and the
/// daemon's memory, until the provider refused the request.
const HISTORY_TOKENS_WITHOUT_WINDOW: u64 = 100_000;

pub fn state_path(session_dir: &Path) -> PathBuf {
    session_dir.join(goals::state::FILE_NAME)
}

fn goals_error(error: impl Into<GoalsError>) -> SessionError {
    SessionError::Goals(error.into())
}

/// A budget given to `goal on` that cannot be one, said plainly.
fn check_budgets(params: &GoalStartParams) -> Result<(), SessionError> {
    let refuse = |text: &'static str| Err(goals_error(GoalsError::Refused(text)));
    if params.no_budget
        && (params.token_budget.is_some()
            || params.cost_budget.is_some()
            || params.hours_budget.is_some())
    {
        return refuse(
            "--no-budget cannot go with --tokens, --cost or --hours: give the budgets you want, \
             or none at all",
        );
    }
    if params.cap == Some(0) {
        return refuse("the cap must be at least 1 cycle");
    }
    if params.token_budget == Some(0) {
        return refuse("the token budget must be above 0 (or use --no-budget)");
    }
    if params
        .cost_budget
        .is_some_and(|cost| !cost.is_finite() || cost <= 0.0)
    {
        return refuse("the cost budget must be a positive amount, like 0.50");
    }
    if params
        .hours_budget
        .is_some_and(|hours| !hours.is_finite() || hours <= 0.0)
    {
        return refuse("the hours budget must be positive, like 8 or 0.5");
    }
    Ok(())
}

/// `text` cut to at most `max` bytes on a character boundary, keeping its end (where a
/// failing command says why) and marking the cut.
fn tail_of(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[… {start} bytes cut]\n{}", &text[start..])
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

    fn awaiting_approval(&self) -> bool {
        self.approvals.pending() > 0
    }

    /// Where a running loop is, for `session/list`; `None` when none runs.
    pub(super) fn goal_progress(&self) -> Option<GoalProgress> {
        let awaiting = self.awaiting_approval();
        let state = self.goal_state();
        state.running.then(|| GoalProgress {
            state: state.state(awaiting),
            cycle: state.cycle,
            cap: state.cap,
        })
    }

    pub fn goal_status(&self) -> Result<GoalStatus, SessionError> {
        let goals = self.goals()?;
        let awaiting = self.awaiting_approval();
        let state = self.goal_state();
        let now = now_ms();
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
                    verify: goal.verify.clone(),
                })
                .collect(),
            done: goals.done_count(),
            left: goals.left_count(),
            tokens_used: state.tokens_used,
            cost_used: state.cost_used,
            token_budget: state.token_budget,
            cost_budget: state.cost_budget,
            state: state.state(awaiting),
            tokens_left: state.tokens_left(),
            cost_left: state.cost_left(),
            currency: self
                .prices()
                .map_or_else(default_currency, |prices| prices.currency),
            hours_budget: state.hours_budget,
            seconds_used: state.elapsed_ms(now) / 1000,
            seconds_left: state.ms_left(now).map(|ms| ms / 1000),
            stop_reason: state
                .stop_reason
                .as_ref()
                .filter(|_| !state.running)
                .map(|reason| state.reason_text(reason)),
            summary: state.summary(&goals),
        })
    }

    /// Appends `- [ ] TEXT` to goals.md, keeping whatever the user wrote there.
    pub fn goal_add(&self, text: &str) -> Result<GoalStatus, SessionError> {
        goals::append(&self.goals_file(), text).map_err(goals_error)?;
        self.goal_status()
    }

    /// Starts the loop with the cap and budgets given, the others from config.json's `goal`
    /// section: no loop runs without a budget unless `no_budget` says so.
    pub fn goal_start(&self, params: GoalStartParams) -> Result<GoalStatus, SessionError> {
        check_budgets(&params)?;
        let prices = self.prices();
        if params.cost_budget.is_some() && prices.is_none() {
            return Err(goals_error(GoalsError::CostWithoutPrices {
                profile: self.control().info.profile.clone(),
            }));
        }
        let defaults = self.shared.providers.config().goal_defaults().clone();
        let goals = self.goals()?;
        let decision = {
            let mut state = self.goal_state();
            if state.running {
                return Err(goals_error(GoalsError::Refused(
                    "the goal loop is already running: `goal status` shows where it is",
                )));
            }
            state.cap = params.cap.unwrap_or(defaults.cap);
            if params.no_budget {
                state.token_budget = None;
                state.cost_budget = None;
                state.hours_budget = None;
            } else {
                state.token_budget = params.token_budget.or(defaults.token_budget);
                // A default cost budget means nothing to a profile without prices; the token
                // and wall-clock budgets still bound the loop.
                state.cost_budget = params
                    .cost_budget
                    .or(defaults.cost_budget.filter(|_| prices.is_some()));
                state.hours_budget = params.hours_budget.or(defaults.hours_budget);
            }
            let decision = state.start(&goals, now_ms());
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
        let (reason, summary, state) = {
            let mut state = self.goal_state();
            if state.running || state.announced {
                return Ok(());
            }
            state.announced = true;
            let reason = state
                .stop_reason
                .as_ref()
                .map_or_else(String::new, |reason| state.reason_text(reason));
            (reason, state.summary(goals), state.state(false))
        };
        self.log.publish(EventKind::GoalLoopStopped {
            reason,
            summary,
            state,
        })?;
        Ok(())
    }

    /// On daemon start: picks a loop that was running back up at the cycle it was in.
    pub(super) fn resume_goal_loop(&self) -> Result<(), SessionError> {
        let goals = self.goals()?;
        let decision = {
            let mut state = self.goal_state();
            let Some(decision) = state.resume(&goals, now_ms()) else {
                return Ok(());
            };
            self.save_goal_state(&state)?;
            decision
        };
        tracing::info!(session = %self.id, ?decision, "resuming the goal loop");
        self.follow(decision, &goals)
    }

    /// One cycle (see `goal_cycle`). A cycle that cannot go on ends the loop as failed, saying
    /// why, instead of leaving it `running` with no cycle to come; a journal that refuses
    /// events is the runner's to handle.
    pub(super) async fn run_goal_cycle(
        &self,
        env: &TurnEnv,
        conversation: &mut Conversation,
        cycle: u32,
    ) -> Result<(), SessionError> {
        let result = self.goal_cycle(env, conversation, cycle).await;
        if let Err(SessionError::ShuttingDown) = result {
            // The daemon began draining as the next cycle was queued: the saved state still says
            // running, so the restarted daemon resumes the loop (the soak bench caught this
            // ending loops as `failed`).
            tracing::info!(session = %self.id, cycle, "the goal loop waits for the restart");
            return Ok(());
        }
        if let Err(error) = &result
            && !matches!(error, SessionError::Journal(_))
        {
            self.control().goal_turn_running = false;
            self.fail_goal_loop(error.to_string());
        }
        result
    }

    /// Ends a running loop as `failed` with `reason` and announces it (so `goal_finished` hooks
    /// run): for a cycle that failed, or one that could not even start (the provider or the
    /// workspace unusable). Saving or announcing can only be logged here.
    pub(super) fn fail_goal_loop(&self, reason: String) {
        let stopped = {
            let mut state = self.goal_state();
            let stopped = state.stop(StopReason::TurnFailed(reason));
            if stopped && let Err(error) = self.save_goal_state(&state) {
                tracing::error!(session = %self.id, %error, "cannot save the goal loop state");
            }
            stopped
        };
        let announced = match self.goals() {
            Ok(goals) if stopped => self.announce_stop(&goals),
            Ok(_) => Ok(()),
            Err(error) => Err(error),
        };
        if let Err(error) = announced {
            tracing::error!(session = %self.id, %error, "cannot announce the goal loop's end");
        }
    }

    /// One cycle: the checks of goals checked since the last, a turn prompted with the open
    /// goals (and any failed check's output), the checks of what it checked, then the decision
    /// about the next cycle.
    async fn goal_cycle(
        &self,
        env: &TurnEnv,
        conversation: &mut Conversation,
        cycle: u32,
    ) -> Result<(), SessionError> {
        if !self.goal_state().running {
            return Ok(());
        }
        // Boxes checked by hand, or before a restart, are checked before any turn is spent.
        self.run_checks(env).await?;
        let goals = self.goals()?;
        let (cap, failed_checks, deadline) = {
            let mut state = self.goal_state();
            if !state.running {
                // `goal off` while the checks ran.
                drop(state);
                return self.announce_stop(&goals);
            }
            if env.stopping.is_cancelled() {
                // The daemon is draining: the saved state still says running at this cycle, so
                // the restart runs it.
                return Ok(());
            }
            if let Some(decision) = state.before_turn(&goals, now_ms()) {
                self.save_goal_state(&state)?;
                drop(state);
                return self.follow(decision, &goals);
            }
            (state.cap, state.failed_checks.clone(), state.deadline_ms())
        };
        self.bound_history(env, conversation).await?;
        let prompt = goals::continuation_message(&goals, GOALS_FILE, cycle, cap, &failed_checks);
        let turn = {
            let mut control = self.control();
            control.goal_turn_running = true;
            let turn = control.next_turn;
            control.next_turn += 1;
            turn
        };
        let seq_before = self.log.last_seq();
        self.log
            .publish(EventKind::GoalCycleStarted { cycle, cap })?;
        // The wall-clock budget also ends a turn that would outlive it.
        let watchdog = deadline.map(|deadline| {
            let cancel = env.tools.cancel.clone();
            let wait = Duration::from_millis(deadline.saturating_sub(now_ms()));
            tokio::spawn(async move {
                tokio::time::sleep(wait).await;
                cancel.cancel();
            })
        });
        let report = agent::run_turn(env, conversation, turn, prompt).await;
        if let Some(watchdog) = watchdog {
            watchdog.abort();
        }
        self.control().goal_turn_running = false;
        let report = report?;
        if report.outcome != TurnOutcome::Interrupted {
            // The turn was shown them; an interrupted one's re-run is shown them again.
            self.goal_state().failed_checks.clear();
        }
        let cost = self.prices().map_or(0.0, |prices| {
            accounting::price(turn, &report.usage, &prices).total
        });
        let mut summary = TurnSummary {
            outcome: report.outcome,
            usage: report.usage,
            cost,
            error: report.error,
            files_changed: false,
            calls: Vec::new(),
            answer: String::new(),
        };
        self.read_cycle(seq_before, &mut summary).await?;
        if summary.outcome == TurnOutcome::Completed {
            self.run_checks(env).await?;
        }
        let goals = self.goals()?;
        // Decided and saved before the cycle is journalled as finished: a cycle seen finished is
        // one the saved state is past, so a restart never runs it again.
        let (decision, explanation) = {
            let mut state = self.goal_state();
            let decision = state.next(&goals, &summary, now_ms());
            self.save_goal_state(&state)?;
            let explanation = match &decision {
                Decision::Stop(StopReason::Stalled | StopReason::StormBroken) => {
                    state.explanation.clone()
                }
                _ => None,
            };
            (decision, explanation)
        };
        // An interrupted cycle did not finish: the restart runs it again under this number.
        if decision != Decision::Suspend {
            self.log.publish(EventKind::GoalCycleFinished {
                cycle,
                done: goals.done_count(),
                left: goals.left_count(),
            })?;
        }
        if let Some(explanation) = explanation {
            self.explain_stop(conversation, &decision, explanation)?;
        }
        self.follow(decision, &goals)
    }

    /// Compacts a history that passed `HISTORY_TOKENS_WITHOUT_WINDOW` when the profile names no
    /// context window. A compaction that fails is logged and journalled; the cycle goes on
    /// with the history as it is.
    async fn bound_history(
        &self,
        env: &TurnEnv,
        conversation: &mut Conversation,
    ) -> Result<(), SessionError> {
        if env.provider.context_window().is_some() {
            return Ok(());
        }
        let tokens = estimate_request_tokens(ChatRequest {
            messages: &conversation.messages,
            tools: &[],
        });
        if tokens <= HISTORY_TOKENS_WITHOUT_WINDOW {
            return Ok(());
        }
        tracing::info!(session = %self.id, tokens, "compacting the goal loop's history");
        if let Err(reason) = agent::compact(env, conversation, CompactScope::Everything).await? {
            self.log.publish(EventKind::Error {
                message: format!("cannot compact the goal loop's history: {reason}"),
            })?;
        }
        Ok(())
    }

    /// Tells the user why a stuck loop was stopped, as the assistant's answer, and keeps it in
    /// the history so that a follow-up has the context (as the storm-breaker does, SPEC §7.2).
    fn explain_stop(
        &self,
        conversation: &mut Conversation,
        decision: &Decision,
        explanation: String,
    ) -> Result<(), SessionError> {
        if let Decision::Stop(StopReason::StormBroken) = decision {
            let tool = self
                .goal_state()
                .failing_calls
                .iter()
                .max_by_key(|failure| failure.cycles)
                .map(|failure| failure.tool.clone())
                .unwrap_or_default();
            self.log.publish(EventKind::StormBroken {
                tool,
                explanation: explanation.clone(),
            })?;
        }
        self.log.publish(EventKind::AssistantDelta {
            text: explanation.clone(),
        })?;
        let event = self.log.publish(EventKind::AssistantMessage {
            content: explanation,
            reasoning: None,
            tool_calls: Vec::new(),
            usage: None,
            stats: None,
        })?;
        conversation.apply(&event.kind);
        Ok(())
    }

    /// What the cycle's turn did, from the journal: the files its checkpoint lists, its calls
    /// and its last answer.
    async fn read_cycle(
        &self,
        seq_before: u64,
        summary: &mut TurnSummary,
    ) -> Result<(), SessionError> {
        let Some(replay) = self.log.subscribe(Some(seq_before))?.replay else {
            return Ok(());
        };
        let events = tokio::task::spawn_blocking(move || {
            Journal::read_range(&replay.path, replay.since, replay.until)
        })
        .await
        .map_err(SessionError::ReadTask)?
        .map_err(|error| goals_error(GoalsError::CycleEvents(error)))?;
        let mut started: Vec<(String, String, String)> = Vec::new();
        for event in events {
            match event.kind {
                EventKind::CheckpointCreated { files, .. } if !files.is_empty() => {
                    summary.files_changed = true;
                }
                EventKind::ToolCallStarted {
                    call_id,
                    name,
                    arguments,
                } if started.len() < MAX_CALLS_PER_CYCLE => {
                    started.push((call_id, name, arguments));
                }
                EventKind::ToolCallFinished {
                    call_id,
                    output,
                    is_error,
                    ..
                } => {
                    if let Some(at) = started.iter().position(|(id, ..)| *id == call_id) {
                        let (_, tool, arguments) = started.swap_remove(at);
                        summary.calls.push(CallRecord {
                            tool,
                            arguments,
                            output,
                            failed: is_error,
                        });
                    }
                }
                EventKind::AssistantMessage { content, .. } if !content.trim().is_empty() => {
                    summary.answer = content;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Runs the check of every verified goal that is checked and has not passed yet, in the
    /// workspace and sandboxed like the `bash` tool. A failure unchecks the box and keeps the
    /// command's output for the next cycle. Checks do not run once the cycle was cancelled
    /// (`goal off`, the daemon stopping, the wall-clock budget): no box is unchecked for that.
    async fn run_checks(&self, env: &TurnEnv) -> Result<(), SessionError> {
        let goals = self.goals()?;
        let pending: Vec<(String, String)> = self
            .goal_state()
            .pending_checks(&goals)
            .into_iter()
            .filter_map(|goal| Some((goal.text.clone(), goal.verify.clone()?)))
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let timeout = Duration::from_secs(
            self.shared
                .providers
                .config()
                .goal_defaults()
                .verify_timeout_secs,
        );
        for (goal, command) in pending {
            if env.tools.cancel.is_cancelled() {
                break;
            }
            tracing::info!(session = %self.id, %command, "running a goal's check");
            let output = match crate::tools::run_command(&command, &env.tools, timeout).await {
                Ok(run) if run.succeeded => None,
                Ok(run) => Some(run.output),
                Err(_) if env.tools.cancel.is_cancelled() => break,
                Err(error) => Some(error.message),
            };
            match output {
                None => self.goal_state().check_passed(&goal),
                Some(output) => {
                    goals::uncheck(&self.goals_file(), &goal).map_err(goals_error)?;
                    // The model is shown it, as a `bash` result would be: without secrets.
                    let output = Redactor::new(&env.tools.secret_values).redact(output);
                    self.goal_state().check_failed(CheckFailure {
                        goal,
                        command,
                        output: tail_of(&output, CHECK_OUTPUT_BYTES),
                    });
                }
            }
            let state = self.goal_state().clone();
            self.save_goal_state(&state)?;
        }
        Ok(())
    }
}
