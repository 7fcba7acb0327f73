//! The turn loop: request → stream → tool calls → tool results → next request, until the model
//! answers without tool calls, the turn is cancelled, or the provider fails.

pub mod approvals;
pub mod prompt;

use std::sync::Arc;

use cwcode_protocol::{
    ApprovalDecision, EventKind, Mode, SessionStatus, ToolCall, TurnOutcome, Usage,
};
use tokio_util::sync::CancellationToken;

use crate::provider::{ChatRequest, FunctionSpec, Message, Provider, ProviderError, StreamDelta};
use crate::session::bus::EventLog;
use crate::session::history;
use crate::session::journal::JournalError;
use crate::tools::{Registry, ToolContext};

use approvals::{Answer, Approvals};

/// Everything one turn works with.
pub struct TurnEnv {
    pub log: Arc<EventLog>,
    pub registry: Arc<Registry>,
    pub provider: Arc<Provider>,
    pub mode: tokio::sync::watch::Receiver<Mode>,
    pub approvals: Arc<Approvals>,
    /// The tool context of this turn; its `cancel` token is the turn's.
    pub tools: ToolContext,
    /// Fired when the daemon shuts down: the turn ends as interrupted rather than cancelled.
    pub stopping: CancellationToken,
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

    fn offered_tools(&self) -> Vec<FunctionSpec> {
        self.registry
            .specs(self.mode() != Mode::Plan)
            .map(|spec| FunctionSpec {
                name: spec.name.to_owned(),
                description: spec.description.to_owned(),
                parameters: spec.parameters.clone(),
            })
            .collect()
    }
}

/// Runs one prompt to its end and journals everything. The history is left consistent whatever
/// happens: every tool call the model made gets a result, even when the turn stops early.
pub async fn run_turn(
    env: &TurnEnv,
    history: &mut Vec<Message>,
    turn: u32,
    prompt: String,
) -> Result<TurnOutcome, JournalError> {
    begin_turn(&env.log, history, turn, prompt)?;
    let mut usage = Usage::default();
    let (outcome, error) = converse(env, history, &mut usage).await?;
    finish_turn(&env.log, history, turn, outcome, usage, error)
}

/// Journals a turn that cannot run at all (no usable provider, workspace gone), saying why.
pub fn refuse_turn(
    log: &EventLog,
    history: &mut Vec<Message>,
    turn: u32,
    prompt: String,
    reason: String,
) -> Result<TurnOutcome, JournalError> {
    begin_turn(log, history, turn, prompt)?;
    finish_turn(
        log,
        history,
        turn,
        TurnOutcome::Failed,
        Usage::default(),
        Some(reason),
    )
}

fn begin_turn(
    log: &EventLog,
    history: &mut Vec<Message>,
    turn: u32,
    prompt: String,
) -> Result<(), JournalError> {
    record(log, history, EventKind::TurnStarted { turn, prompt })?;
    log.publish(EventKind::StatusChanged {
        status: SessionStatus::Running,
    })?;
    Ok(())
}

fn finish_turn(
    log: &EventLog,
    history: &mut Vec<Message>,
    turn: u32,
    outcome: TurnOutcome,
    usage: Usage,
    error: Option<String>,
) -> Result<TurnOutcome, JournalError> {
    let reason = match outcome {
        TurnOutcome::Interrupted => "not run: the daemon stopped before this call ran",
        _ => "not run: the turn ended before this call ran",
    };
    for call in history::unanswered_calls(history) {
        record(
            log,
            history,
            EventKind::ToolCallFinished {
                call_id: call.id,
                name: call.name,
                output: reason.to_owned(),
                is_error: true,
            },
        )?;
    }
    log.publish(EventKind::TurnFinished {
        turn,
        outcome,
        usage,
        error,
    })?;
    log.publish(EventKind::StatusChanged {
        status: SessionStatus::Idle,
    })?;
    log.sync()?;
    Ok(outcome)
}

/// Journals an event and applies it to the history, so the live history and the one rebuilt
/// from the journal after a restart are the same by construction.
fn record(log: &EventLog, history: &mut Vec<Message>, kind: EventKind) -> Result<(), JournalError> {
    let event = log.publish(kind)?;
    history::apply(history, &event.kind);
    Ok(())
}

async fn converse(
    env: &TurnEnv,
    history: &mut Vec<Message>,
    usage: &mut Usage,
) -> Result<(TurnOutcome, Option<String>), JournalError> {
    loop {
        let tools = env.offered_tools();
        let mut journal_error = None;
        let mut on_delta = |delta: StreamDelta| {
            let kind = match delta {
                StreamDelta::Content(text) => EventKind::AssistantDelta { text },
                StreamDelta::Reasoning(text) => EventKind::ReasoningDelta { text },
            };
            if let Err(error) = env.log.publish(kind) {
                journal_error.get_or_insert(error);
            }
        };
        let request = ChatRequest {
            messages: history,
            tools: &tools,
        };
        let result = env
            .provider
            .complete(request, env.cancel(), &mut on_delta)
            .await;
        if let Some(error) = journal_error {
            return Err(error);
        }
        let completion = match result {
            Ok(completion) => completion,
            Err(ProviderError::Cancelled) => return Ok((env.stop_outcome(), None)),
            Err(error) => return Ok((TurnOutcome::Failed, Some(error.to_string()))),
        };
        if let Some(call_usage) = &completion.usage {
            usage.add(call_usage);
        }
        let calls = completion.message.tool_calls.clone();
        record(
            &env.log,
            history,
            EventKind::AssistantMessage {
                content: completion.message.content,
                reasoning: completion.message.reasoning,
                tool_calls: completion.message.tool_calls,
                usage: completion.usage,
            },
        )?;
        if calls.is_empty() {
            return Ok((TurnOutcome::Completed, None));
        }
        for call in calls {
            if env.cancel().is_cancelled() {
                break;
            }
            let (output, is_error) = run_call(env, &call).await?;
            record(
                &env.log,
                history,
                EventKind::ToolCallFinished {
                    call_id: call.id,
                    name: call.name,
                    output,
                    is_error,
                },
            )?;
        }
        if env.cancel().is_cancelled() {
            return Ok((env.stop_outcome(), None));
        }
    }
}

/// Runs one tool call, asking for an approval first when the mode requires it. Returns what the
/// model is shown and whether it is an error.
async fn run_call(env: &TurnEnv, call: &ToolCall) -> Result<(String, bool), JournalError> {
    env.log.publish(EventKind::ToolCallStarted {
        call_id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    })?;
    let mutates = env
        .registry
        .get(&call.name)
        .is_some_and(|spec| spec.mutates);
    if mutates {
        match env.mode() {
            Mode::Plan => {
                return Ok((
                    format!(
                        "{} is not available in plan mode: only read-only tools are. Describe the change instead; the user switches to code mode to apply it.",
                        call.name
                    ),
                    true,
                ));
            }
            Mode::Code if !env.approvals.is_always_allowed(&call.name) => {
                if let Some(refusal) = await_approval(env, call).await? {
                    return Ok((refusal, true));
                }
            }
            Mode::Code | Mode::Yolo => {}
        }
    }
    let log = Arc::clone(&env.log);
    let call_id = call.id.clone();
    let context = ToolContext {
        output: Arc::new(move |text: &str| {
            let delta = EventKind::ToolOutputDelta {
                call_id: call_id.clone(),
                text: text.to_owned(),
            };
            if let Err(error) = log.publish(delta) {
                tracing::error!(%error, "cannot journal tool output");
            }
        }),
        ..env.tools.clone()
    };
    Ok(
        match env
            .registry
            .call(&call.name, &call.arguments, &context)
            .await
        {
            Ok(output) => (output, false),
            Err(error) => (error.message, true),
        },
    )
}

/// Waits for a client's answer. Returns the refusal to show the model, or `None` to go ahead.
async fn await_approval(env: &TurnEnv, call: &ToolCall) -> Result<Option<String>, JournalError> {
    let (request_id, answer) = env.approvals.open(&call.name);
    env.log.publish(EventKind::ApprovalRequested {
        request_id: request_id.clone(),
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: call.arguments.clone(),
    })?;
    env.log.publish(EventKind::StatusChanged {
        status: SessionStatus::AwaitingApproval,
    })?;
    let answer = tokio::select! {
        answer = answer => answer.ok(),
        () = env.cancel().cancelled() => None,
    };
    let Some(Answer { decision, reason }) = answer else {
        env.approvals.withdraw(&request_id);
        return Ok(Some(
            "not run: the turn was cancelled while this call awaited approval".to_owned(),
        ));
    };
    env.log.publish(EventKind::ApprovalResolved {
        request_id,
        decision,
        reason: reason.clone(),
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
