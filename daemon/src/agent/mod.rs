//! The turn loop: request → stream → tool calls → tool results → next request, until the model
//! answers without tool calls, the turn is cancelled, the provider fails, or the storm-breaker
//! stops a loop of identical failures.

pub mod approvals;
pub mod history;
pub mod instructions;
pub mod prompt;
pub mod storm;
mod subagent;
pub mod tool_output;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;

use cwcode_protocol::allow::suggested_pattern;
use cwcode_protocol::{
    ApprovalDecision, EventKind, Mode, RequestStats, SessionStatus, ToolCall, TurnOutcome, Usage,
};
use tokio_util::sync::CancellationToken;

use crate::agent::history::{Conversation, summary_message, unanswered_calls};
use crate::journal::JournalError;
use crate::journal::bus::EventLog;
use crate::provider::{
    ChatRequest, FunctionSpec, Message, Model, ProviderError, StreamDelta, StreamEvent,
    estimate_request_tokens, shared_prefix_len,
};
use crate::store::{SharedStore, SharedStoreError, Snapshot};
use crate::tools::{Effect, Registry, ToolContext};

use approvals::{Answer, ApprovalGate};
use instructions::InstructionFiles;
use storm::{Progress, StormBreaker};
use tool_output::ToolOutputRecorder;

/// Told to the model when the session enters plan mode. It is appended as a message, never put
/// into the system prompt, so the prompt's bytes stay the same (SPEC §6).
const PLAN_MODE_ON: &str = "[cwcode] Plan mode is on: only read-only tools are available. Investigate, then answer with a concrete plan (the files and changes you propose, and how to verify them). Do not try to change anything; the user switches to code mode to carry the plan out.";
const PLAN_MODE_OFF: &str =
    "[cwcode] Plan mode is off: every tool is available again. Carry out the agreed plan.";

/// Share of the context window a request may fill before older turns are compacted; the rest
/// is left for the answer.
const COMPACT_AT: f64 = 0.8;
const COMPACT_INSTRUCTION: &str = "[cwcode] Summarise the conversation so far for your own later use: the user's goals, the decisions made, the files read or changed (with paths), the commands run and their results, and what is still open. Be complete but concise. Do not call tools.";

/// Everything one turn works with.
pub struct TurnEnv {
    pub log: Arc<EventLog>,
    pub registry: Arc<Registry>,
    /// The model answering this turn: the session's provider.
    pub provider: Arc<dyn Model>,
    /// The model `task`'s sub-agents run on (config.json's `task_profile`); `None`: `provider`.
    pub task_provider: Option<Arc<dyn Model>>,
    pub mode: tokio::sync::watch::Receiver<Mode>,
    /// Where mutating calls ask in `code` mode: the session's approvals.
    pub approvals: Arc<dyn ApprovalGate>,
    /// The tool context of this turn; its `cancel` token is the turn's.
    pub tools: ToolContext,
    /// Fired when the daemon shuts down: the turn ends as interrupted rather than cancelled.
    pub stopping: CancellationToken,
    /// Where files are saved before a mutating tool changes them; `None` when the session's
    /// store could not be opened (said in the log and to clients at session start).
    pub checkpoints: Option<SharedStore>,
    /// The AGENTS.md files, read again at each prompt to notice a change.
    pub instructions: InstructionFiles,
}

impl TurnEnv {
    fn cancel(&self) -> &CancellationToken {
        &self.tools.cancel
    }

    fn mode(&self) -> Mode {
        *self.mode.borrow()
    }

    fn stop_outcome(&self) -> TurnOutcome {
        if self.stopping.is_cancelled() {
            TurnOutcome::Interrupted
        } else {
            TurnOutcome::Cancelled
        }
    }

    fn offered_tools(&self, mode: Mode) -> Vec<FunctionSpec> {
        self.registry
            .offered(mode != Mode::Plan, self.tools.edit_tools)
            .map(|spec| FunctionSpec {
                name: spec.name.to_owned(),
                description: spec.description.to_owned(),
                parameters: spec.parameters.clone(),
            })
            .collect()
    }
}

/// How a turn ended, as its `turn_finished` event says.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnReport {
    pub outcome: TurnOutcome,
    pub usage: Usage,
    pub error: Option<String>,
}

/// Runs one prompt to its end and journals everything. The conversation is left consistent
/// whatever happens: every tool call the model made gets a result, even when the turn stops
/// early.
pub async fn run_turn(
    env: &TurnEnv,
    conversation: &mut Conversation,
    turn: u32,
    prompt: String,
) -> Result<TurnReport, JournalError> {
    begin_turn(&env.log, conversation, turn, prompt.clone())?;
    announce_instructions(env, conversation).await?;
    if let Some(store) = &env.checkpoints
        && let Err(error) = store.begin(turn, prompt).await
    {
        env.log.publish(EventKind::Error {
            message: format!("/rewind will not cover this prompt: {error}"),
        })?;
    }
    let mut usage = Usage::default();
    let (outcome, error) = converse(env, conversation, &mut usage).await?;
    close_checkpoint(env, turn).await?;
    finish_turn(&env.log, conversation, turn, outcome, usage, error)
}

/// Makes the prompt's checkpoint durable and tells clients which files it covers.
async fn close_checkpoint(env: &TurnEnv, turn: u32) -> Result<(), JournalError> {
    let Some(store) = &env.checkpoints else {
        return Ok(());
    };
    let listed = match store.sync().await {
        Ok(()) => store.list().await,
        Err(error) => Err(error),
    };
    match listed {
        Ok(checkpoints) => {
            if let Some(checkpoint) = checkpoints
                .into_iter()
                .find(|checkpoint| checkpoint.turn == turn && !checkpoint.files.is_empty())
            {
                env.log.publish(EventKind::CheckpointCreated {
                    turn,
                    files: checkpoint.files,
                })?;
            }
        }
        Err(error) => {
            env.log.publish(EventKind::Error {
                message: format!("the checkpoint of prompt {turn} may be incomplete: {error}"),
            })?;
        }
    }
    Ok(())
}

/// A failure of cwcode itself while running a call, which the model cannot act on: the turn
/// ends as failed and the user is told what went wrong and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The files a mutating call would change could not be saved first: a change /rewind
    /// could not undo is not made.
    #[error(
        "`{tool}` was not run: cwcode could not save {what} first, so /rewind could not have undone it: {source}"
    )]
    Checkpoint {
        tool: String,
        what: &'static str,
        #[source]
        source: SharedStoreError,
    },
}

/// What the model is shown for a call when the harness did its part.
struct CallAnswer {
    output: String,
    is_error: bool,
    /// The tool succeeded and changed nothing.
    changed_nothing: bool,
}

impl CallAnswer {
    fn refusal(output: String) -> Self {
        Self {
            output,
            is_error: true,
            changed_nothing: false,
        }
    }

    fn progress(&self) -> Progress {
        if self.is_error {
            Progress::Failed
        } else if self.changed_nothing {
            Progress::ChangedNothing
        } else {
            Progress::Made
        }
    }
}

/// Told to the model for a call the harness could not run: the user got the reason, so the
/// model is not asked to work around it.
const NOT_RUN_HARNESS: &str = "not run: cwcode itself failed before this call could run; the turn was stopped and the user was told why";

/// Saves what a call that may change workspace files is about to change (SPEC §8): the declared
/// paths, or for a shell command a snapshot of the workspace to compare against afterwards. A
/// change that could not be undone is not made: when saving fails, the call is not run.
async fn checkpoint_before(
    env: &TurnEnv,
    call: &ToolCall,
) -> Result<Option<Snapshot>, HarnessError> {
    let Some(store) = &env.checkpoints else {
        return Ok(None);
    };
    let failed = |what: &'static str| {
        move |source| HarnessError::Checkpoint {
            tool: call.name.clone(),
            what,
            source,
        }
    };
    if env
        .registry
        .snapshots_workspace(&call.name, &call.arguments)
    {
        return store
            .snapshot()
            .await
            .map(Some)
            .map_err(failed("a snapshot of the workspace"));
    }
    let declared = env.registry.touched_paths(&call.name, &call.arguments);
    let paths: Vec<PathBuf> = declared
        .iter()
        .filter_map(|path| env.tools.workspace.resolve(&path.to_string_lossy()).ok())
        .collect();
    if paths.is_empty() {
        // Every path is outside the workspace: the tool itself refuses them, saying why.
        return Ok(None);
    }
    store
        .record_before(paths)
        .await
        .map(|()| None)
        .map_err(failed("the files it changes"))
}

/// Journals a turn that cannot run at all (no usable provider, workspace gone), saying why.
pub fn refuse_turn(
    log: &EventLog,
    conversation: &mut Conversation,
    turn: u32,
    prompt: String,
    reason: String,
) -> Result<TurnReport, JournalError> {
    begin_turn(log, conversation, turn, prompt)?;
    finish_turn(
        log,
        conversation,
        turn,
        TurnOutcome::Failed,
        Usage::default(),
        Some(reason),
    )
}

fn begin_turn(
    log: &EventLog,
    conversation: &mut Conversation,
    turn: u32,
    prompt: String,
) -> Result<(), JournalError> {
    record(log, conversation, EventKind::TurnStarted { turn, prompt })?;
    log.publish(EventKind::StatusChanged {
        status: SessionStatus::Running,
    })?;
    Ok(())
}

fn finish_turn(
    log: &EventLog,
    conversation: &mut Conversation,
    turn: u32,
    outcome: TurnOutcome,
    usage: Usage,
    error: Option<String>,
) -> Result<TurnReport, JournalError> {
    let reason = match outcome {
        TurnOutcome::Interrupted => "not run: the daemon stopped before this call ran",
        _ => "not run: the turn ended before this call ran",
    };
    answer_unanswered(log, conversation, reason)?;
    log.publish(EventKind::TurnFinished {
        turn,
        outcome,
        usage,
        error: error.clone(),
    })?;
    log.publish(EventKind::StatusChanged {
        status: SessionStatus::Idle,
    })?;
    log.sync()?;
    Ok(TurnReport {
        outcome,
        usage,
        error,
    })
}

/// Gives every tool call still without a result one that says it did not run: providers reject
/// a history in which a call goes unanswered.
pub fn answer_unanswered(
    log: &EventLog,
    conversation: &mut Conversation,
    reason: &str,
) -> Result<(), JournalError> {
    answer_each_unanswered(log, conversation, |_| reason.to_owned())
}

/// [`answer_unanswered`] with a result of its own for each call.
pub fn answer_each_unanswered(
    log: &EventLog,
    conversation: &mut Conversation,
    reason_for: impl Fn(&ToolCall) -> String,
) -> Result<(), JournalError> {
    for call in unanswered_calls(&conversation.messages) {
        let output = reason_for(&call);
        record(
            log,
            conversation,
            EventKind::ToolCallFinished {
                call_id: call.id,
                name: call.name,
                output,
                is_error: true,
            },
        )?;
    }
    Ok(())
}

/// Journals an event and applies it to the conversation, so the live conversation and the one
/// rebuilt from the journal after a restart are the same by construction.
fn record(
    log: &EventLog,
    conversation: &mut Conversation,
    kind: EventKind,
) -> Result<(), JournalError> {
    let event = log.publish(kind)?;
    conversation.apply(&event.kind);
    Ok(())
}

/// Tells the model which files it read have changed on disk since, so it reads them again
/// instead of acting on what it remembers.
fn announce_changed_files(
    env: &TurnEnv,
    conversation: &mut Conversation,
) -> Result<(), JournalError> {
    let changed = env
        .tools
        .reads
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take_changed();
    if changed.is_empty() {
        return Ok(());
    }
    let paths: Vec<String> = changed
        .iter()
        .map(|path| env.tools.workspace.display(path))
        .collect();
    let text = format!(
        "[cwcode] Changed on disk since you last read them: {}. Read them again before editing.",
        paths.join(", ")
    );
    record(
        &env.log,
        conversation,
        EventKind::FilesChanged { paths, text },
    )
}

/// Tells the model when the project instructions changed since it was last given them.
async fn announce_instructions(
    env: &TurnEnv,
    conversation: &mut Conversation,
) -> Result<(), JournalError> {
    let files = env.instructions.clone();
    let now = match tokio::task::spawn_blocking(move || files.read()).await {
        Ok(now) => now,
        Err(error) => {
            tracing::warn!(%error, "could not read the project instructions");
            return Ok(());
        }
    };
    if now.block == conversation.instructions {
        return Ok(());
    }
    record(
        &env.log,
        conversation,
        EventKind::InstructionsChanged {
            sources: now.sources,
            instructions: now.block,
        },
    )
}

/// Tells the model when the mode crossed the plan boundary since it was last told.
fn announce_mode(
    env: &TurnEnv,
    conversation: &mut Conversation,
    mode: Mode,
) -> Result<(), JournalError> {
    let planning = mode == Mode::Plan;
    if planning == conversation.plan_announced {
        return Ok(());
    }
    let text = if planning {
        PLAN_MODE_ON
    } else {
        PLAN_MODE_OFF
    };
    record(
        &env.log,
        conversation,
        EventKind::ModeNotice {
            mode,
            text: text.to_owned(),
        },
    )
}

async fn converse(
    env: &TurnEnv,
    conversation: &mut Conversation,
    usage: &mut Usage,
) -> Result<(TurnOutcome, Option<String>), JournalError> {
    let mut storm = StormBreaker::default();
    let mut reasoning_retried = false;
    loop {
        let mode = env.mode();
        announce_mode(env, conversation, mode)?;
        announce_changed_files(env, conversation)?;
        let provider = provider_for(env, conversation);
        if needs_compaction(provider.as_ref(), conversation, &env.offered_tools(mode))
            && let Err(reason) = compact(env, conversation, CompactScope::BeforeCurrentTurn).await?
        {
            tracing::warn!(%reason, "could not compact an over-full context");
        }
        // The body is measured as it will be sent, model name included.
        if let Err(error) = provider.resolve_model().await {
            return Ok((TurnOutcome::Failed, Some(error.to_string())));
        }
        let tools = env.offered_tools(mode);
        let request = ChatRequest {
            messages: &conversation.messages,
            tools: &tools,
        };
        let body = provider.request_body(request);
        let stats = RequestStats {
            request_bytes: body.len() as u64,
            shared_prefix_bytes: conversation
                .last_request
                .as_deref()
                .map_or(0, |previous| shared_prefix_len(previous, &body))
                as u64,
        };
        let mut journal_error = None;
        let mut on_event = |event: StreamEvent| {
            let kind = match event {
                StreamEvent::Delta(StreamDelta::Content(text)) => {
                    EventKind::AssistantDelta { text }
                }
                StreamEvent::Delta(StreamDelta::Reasoning(text)) => {
                    EventKind::ReasoningDelta { text }
                }
                StreamEvent::Restart { reason, .. } => EventKind::StreamRestarted { reason },
                StreamEvent::Retrying {
                    attempt,
                    max_attempts,
                    delay,
                    reason,
                } => EventKind::ProviderRetrying {
                    attempt,
                    max_attempts,
                    delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    reason,
                },
                StreamEvent::ToolCallsRecovered { call_ids } => {
                    EventKind::ToolCallsRecovered { call_ids }
                }
                // A budget counts what an unfinished answer cost too, estimated if unreported.
                StreamEvent::Abandoned {
                    usage: billed,
                    estimated,
                } => {
                    if let Some(spent) = billed.or(estimated) {
                        usage.add(&spent);
                    }
                    EventKind::CallAbandoned {
                        usage: billed,
                        estimated_usage: estimated,
                        stats: Some(stats),
                    }
                }
            };
            // Deltas are coalesced; a restart flushes the text before it first.
            if let Err(error) = env.log.publish_delta(kind) {
                journal_error.get_or_insert(error);
            }
        };
        let result = provider.stream(request, env.cancel(), &mut on_event).await;
        if let Some(error) = journal_error {
            return Err(error);
        }
        conversation.last_request = Some(body);
        let completion = match result {
            Ok(completion) => completion,
            Err(ProviderError::Cancelled) => return Ok((env.stop_outcome(), None)),
            // Thinking models that need their reasoning replayed say so once; from then on this
            // session sends it back (SPEC §6).
            Err(ProviderError::ReasoningMustBeKept { .. }) if !reasoning_retried => {
                reasoning_retried = true;
                record(
                    &env.log,
                    conversation,
                    EventKind::ReasoningKept {
                        profile: env.provider.profile_name().to_owned(),
                    },
                )?;
                continue;
            }
            Err(error) => return Ok((TurnOutcome::Failed, Some(error.to_string()))),
        };
        if let Some(call_usage) = &completion.usage {
            usage.add(call_usage);
        }
        let calls = completion.message.tool_calls.clone();
        record(
            &env.log,
            conversation,
            EventKind::AssistantMessage {
                content: completion.message.content,
                reasoning: completion.message.reasoning,
                tool_calls: completion.message.tool_calls,
                usage: completion.usage,
                stats: Some(stats),
            },
        )?;
        if calls.is_empty() {
            return Ok((TurnOutcome::Completed, None));
        }
        for call in calls {
            if env.cancel().is_cancelled() {
                break;
            }
            let answer = match run_call(env, &call).await? {
                Ok(answer) => answer,
                Err(failure) => {
                    // Answered so the history stays one a provider accepts; the rest of the
                    // turn's calls are answered when it finishes.
                    record(
                        &env.log,
                        conversation,
                        EventKind::ToolCallFinished {
                            call_id: call.id,
                            name: call.name,
                            output: NOT_RUN_HARNESS.to_owned(),
                            is_error: true,
                        },
                    )?;
                    return Ok((TurnOutcome::Failed, Some(failure.to_string())));
                }
            };
            let verdict = storm.observe(&call, &answer.output, answer.progress());
            record(
                &env.log,
                conversation,
                EventKind::ToolCallFinished {
                    call_id: call.id,
                    name: call.name.clone(),
                    output: answer.output,
                    is_error: answer.is_error,
                },
            )?;
            if let Some(explanation) = verdict {
                break_storm(env, conversation, call.name, explanation)?;
                return Ok((TurnOutcome::StormBroken, None));
            }
        }
        if env.cancel().is_cancelled() {
            return Ok((env.stop_outcome(), None));
        }
    }
}

fn provider_for(env: &TurnEnv, conversation: &Conversation) -> Arc<dyn Model> {
    if conversation.keep_reasoning {
        env.provider.keeping_reasoning()
    } else {
        Arc::clone(&env.provider)
    }
}

fn needs_compaction(
    provider: &dyn Model,
    conversation: &Conversation,
    tools: &[FunctionSpec],
) -> bool {
    let Some(window) = provider.context_window() else {
        return false;
    };
    let request = ChatRequest {
        messages: &conversation.messages,
        tools,
    };
    estimate_request_tokens(request) as f64 > window as f64 * COMPACT_AT
}

/// What a compaction summarises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactScope {
    /// Everything said so far: the user asked for it between turns.
    Everything,
    /// Everything before the running turn, which stays whole.
    BeforeCurrentTurn,
}

/// Where the conversation is cut. Mid-turn the cut is the latest user message, so the current
/// turn stays whole and no tool call is separated from its result.
fn compaction_cut(conversation: &Conversation, scope: CompactScope) -> Option<usize> {
    let messages = &conversation.messages;
    match scope {
        CompactScope::Everything => Some(messages.len()),
        CompactScope::BeforeCurrentTurn => messages
            .iter()
            .rposition(|message| matches!(message, Message::User { .. })),
    }
    .filter(|&cut| cut > 1)
}

/// Replaces older messages by a model-written summary (SPEC §5). The summary request repeats
/// the conversation's own prefix, so it is served mostly from the provider's cache. Returns why
/// it could not be done, if so.
pub async fn compact(
    env: &TurnEnv,
    conversation: &mut Conversation,
    scope: CompactScope,
) -> Result<Result<(), String>, JournalError> {
    let Some(cut) = compaction_cut(conversation, scope) else {
        return Ok(Err("there is nothing yet to compact".to_owned()));
    };
    let provider = provider_for(env, conversation);
    let tools = env.offered_tools(env.mode());
    let mut request_messages = conversation.messages[..cut].to_vec();
    request_messages.push(Message::User {
        content: COMPACT_INSTRUCTION.to_owned(),
    });
    let request = ChatRequest {
        messages: &request_messages,
        tools: &tools,
    };
    let summary = match provider.stream(request, env.cancel(), &mut |_| {}).await {
        Ok(completion) if !completion.message.content.trim().is_empty() => {
            completion.message.content
        }
        Ok(_) => return Ok(Err("the model returned an empty summary".to_owned())),
        Err(error) => return Ok(Err(format!("the summary request failed: {error}"))),
    };
    let estimate = |messages: &[Message]| {
        estimate_request_tokens(ChatRequest {
            messages,
            tools: &tools,
        })
    };
    let tokens_before = estimate(&conversation.messages);
    let mut compacted = vec![
        conversation.messages[0].clone(),
        Message::User {
            content: summary_message(&summary),
        },
    ];
    compacted.extend_from_slice(&conversation.messages[cut..]);
    record(
        &env.log,
        conversation,
        EventKind::Compacted {
            summary,
            kept_messages: (compacted.len() - 2) as u32,
            tokens_before,
            tokens_after: estimate(&compacted),
        },
    )?;
    Ok(Ok(()))
}

/// Ends a failure loop: the explanation becomes the assistant's answer, kept in the history so
/// a follow-up prompt has the context.
fn break_storm(
    env: &TurnEnv,
    conversation: &mut Conversation,
    tool: String,
    explanation: String,
) -> Result<(), JournalError> {
    answer_unanswered(
        &env.log,
        conversation,
        "not run: the turn was stopped by the storm-breaker",
    )?;
    env.log.publish(EventKind::StormBroken {
        tool,
        explanation: explanation.clone(),
    })?;
    env.log.publish(EventKind::AssistantDelta {
        text: explanation.clone(),
    })?;
    record(
        &env.log,
        conversation,
        EventKind::AssistantMessage {
            content: explanation,
            reasoning: None,
            tool_calls: Vec::new(),
            usage: None,
            stats: None,
        },
    )
}

/// Runs one tool call, asking for an approval first when the mode requires it. Returns what the
/// model is shown, or the harness's own failure that ends the turn.
async fn run_call(
    env: &TurnEnv,
    call: &ToolCall,
) -> Result<Result<CallAnswer, HarnessError>, JournalError> {
    env.log.publish(EventKind::ToolCallStarted {
        call_id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    })?;
    let effect = env
        .registry
        .get(&call.name)
        .map_or(Effect::ReadOnly, |spec| spec.effect);
    if effect.mutates() {
        match env.mode() {
            Mode::Plan => {
                return Ok(Ok(CallAnswer::refusal(format!(
                    "{} is not available in plan mode: only read-only tools are. Describe the change instead; the user switches to code mode to apply it.",
                    call.name
                ))));
            }
            Mode::Code if !env.approvals.is_always_allowed(&call.name, &call.arguments) => {
                if let Some(refusal) = await_approval(env, call).await? {
                    return Ok(Ok(CallAnswer::refusal(refusal)));
                }
            }
            Mode::Code | Mode::Yolo => {}
        }
    }
    let snapshot = if effect.changes_workspace() {
        match checkpoint_before(env, call).await {
            Ok(snapshot) => snapshot,
            Err(failure) => return Ok(Err(failure)),
        }
    } else {
        None
    };
    let recorder = ToolOutputRecorder::new(Arc::clone(&env.log), &call.id);
    let context = ToolContext {
        output: recorder.sink(),
        sub_agent: subagent::runner_for(env, call),
        ..env.tools.clone()
    };
    let answer = match env
        .registry
        .call(&call.name, &call.arguments, &context)
        .await
    {
        Ok(output) => CallAnswer {
            output: output.text,
            is_error: false,
            changed_nothing: output.changed_nothing,
        },
        Err(error) => CallAnswer::refusal(error.message),
    };
    recorder.finish()?;
    // Also after a failure or a timeout: the command may have changed files before it stopped.
    if let (Some(snapshot), Some(store)) = (snapshot, &env.checkpoints)
        && let Err(error) = store.after_command(snapshot).await
    {
        env.log.publish(EventKind::Error {
            message: format!("/rewind may miss what `{}` changed: {error}", call.name),
        })?;
    }
    Ok(Ok(answer))
}

/// Waits for a client's answer. Returns the refusal to show the model, or `None` to go ahead.
async fn await_approval(env: &TurnEnv, call: &ToolCall) -> Result<Option<String>, JournalError> {
    let (request_id, answer) = env.approvals.open(&call.name, &call.arguments);
    env.log.publish(EventKind::ApprovalRequested {
        request_id: request_id.clone(),
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: call.arguments.clone(),
        suggested_pattern: suggested_pattern(&call.name, &call.arguments),
    })?;
    env.log.publish(EventKind::StatusChanged {
        status: SessionStatus::AwaitingApproval,
    })?;
    let answer = tokio::select! {
        answer = answer => answer.ok(),
        () = env.cancel().cancelled() => None,
    };
    let Some(Answer {
        decision,
        reason,
        pattern,
    }) = answer
    else {
        env.approvals.withdraw(&request_id);
        return Ok(Some(
            "not run: the turn was cancelled while this call awaited approval".to_owned(),
        ));
    };
    env.log.publish(EventKind::ApprovalResolved {
        request_id,
        decision,
        reason: reason.clone(),
        pattern,
    })?;
    env.log.publish(EventKind::StatusChanged {
        status: SessionStatus::Running,
    })?;
    Ok(match decision {
        ApprovalDecision::Approve | ApprovalDecision::Always => None,
        ApprovalDecision::Deny => Some(match reason {
            Some(reason) => format!(
                "The user denied this {} call, saying: {reason}. Do not repeat it unchanged.",
                call.name
            ),
            None => format!(
                "The user denied this {} call. Do not repeat it unchanged; ask if unsure what they want.",
                call.name
            ),
        }),
    })
}
