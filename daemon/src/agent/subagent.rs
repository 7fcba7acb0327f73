//! The sub-agent behind the `task` tool (SPEC §7): the same turn loop ([`converse`]) on a
//! conversation of its own (its own system prompt and history), with the parent's tools but
//! `task`, its events journalled nested under the parent's call (`parentCallId`), a bounded
//! number of model requests, and the parent's cancel, mode and approvals. Only its final answer
//! goes back, as the result of the parent's call.
//!
//! The tool layer cannot name the agent, so the agent hands each `task` call a
//! [`SubAgentRunner`] in its tool context; that keeps the module graph pointing down.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use cwcode_protocol::{Mode, ToolCall, TurnOutcome, Usage};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::approvals::ApprovalGate;
use super::history::Conversation;
use super::instructions::InstructionFiles;
use super::{TurnEnv, answer_unanswered, converse};
use crate::journal::bus::EventLog;
use crate::provider::{
    ChatRequest, Completion, FunctionSpec, Message, Model, ProviderError, StreamEvent,
};
use crate::store::SharedStore;
use crate::tools::{ReadLedger, Registry, SubAgentRunner, SubTask, ToolContext, ToolError};

/// The name of the tool whose calls get a sub-agent.
const TASK_TOOL: &str = "task";

/// How many model requests one sub-agent may make before it has to stop.
pub const DEFAULT_REQUEST_BUDGET: u32 = 25;

/// The sub-agent's system prompt: short, and the same for every sub-agent, so providers cache it.
const SYSTEM_PROMPT: &str = "You are a sub-agent of cwcode, a coding agent. The main agent hands you one sub-task in the user's workspace. Use the tools to do it, then answer with what the main agent needs (findings with file paths and line numbers, or what you changed and how you checked it). Your final answer is all it sees of your work; be complete and concise.";

const READ_ONLY_NOTE: &str =
    "[cwcode] Only read-only tools are available: investigate and report, change nothing.";

/// A runner for the parent's `call`, when it is a `task` call of a session's own turn. A
/// sub-agent gets none: it cannot start another sub-agent.
pub(super) fn runner_for(env: &TurnEnv, call: &ToolCall) -> Option<Arc<dyn SubAgentRunner>> {
    if call.name != TASK_TOOL || env.log.parent_call_id().is_some() {
        return None;
    }
    Some(Arc::new(Runner {
        call_id: call.id.clone(),
        log: Arc::clone(&env.log),
        registry: Arc::clone(&env.registry),
        provider: Arc::clone(env.task_provider.as_ref().unwrap_or(&env.provider)),
        mode: env.mode.clone(),
        approvals: Arc::clone(&env.approvals),
        tools: env.tools.clone(),
        stopping: env.stopping.clone(),
        checkpoints: env.checkpoints.clone(),
        instructions: env.instructions.clone(),
        budget: DEFAULT_REQUEST_BUDGET,
    }))
}

/// What a sub-agent takes from the parent's turn; owned, so it outlives the borrow of the
/// parent's environment.
struct Runner {
    call_id: String,
    log: Arc<EventLog>,
    registry: Arc<Registry>,
    provider: Arc<dyn Model>,
    mode: tokio::sync::watch::Receiver<Mode>,
    approvals: Arc<dyn ApprovalGate>,
    tools: ToolContext,
    stopping: CancellationToken,
    checkpoints: Option<SharedStore>,
    instructions: InstructionFiles,
    budget: u32,
}

impl SubAgentRunner for Runner {
    fn run(&self, task: SubTask) -> BoxFuture<'_, Result<String, ToolError>> {
        Box::pin(self.run_task(task))
    }
}

impl Runner {
    async fn run_task(&self, task: SubTask) -> Result<String, ToolError> {
        let budget = Arc::new(RequestBudget::new(self.budget));
        // In plan mode the sub-agent stays read-only even if the parent leaves plan meanwhile.
        let planning = *self.mode.borrow() == Mode::Plan;
        let mode = if planning {
            tokio::sync::watch::channel(Mode::Plan).1
        } else {
            self.mode.clone()
        };
        let env = TurnEnv {
            log: Arc::new(self.log.nested(&self.call_id)),
            registry: Arc::clone(&self.registry),
            provider: Arc::new(Budgeted {
                inner: Arc::clone(&self.provider),
                budget: Arc::clone(&budget),
            }),
            task_provider: None,
            mode,
            approvals: Arc::clone(&self.approvals),
            tools: ToolContext {
                // Its own context: what it read is its own, and it cannot nest another.
                reads: Arc::new(Mutex::new(ReadLedger::default())),
                output: Arc::new(|_: &str| {}),
                sub_agent: None,
                ..self.tools.clone()
            },
            stopping: self.stopping.clone(),
            checkpoints: self.checkpoints.clone(),
            instructions: self.instructions.clone(),
        };
        let mut conversation = Conversation::rebuild(SYSTEM_PROMPT, &[]);
        // Told once, in its first message, rather than by the parent's plan-mode notice.
        conversation.plan_announced = planning;
        let prompt = if planning {
            format!("{}\n\n{READ_ONLY_NOTE}", task.prompt)
        } else {
            task.prompt
        };
        conversation
            .messages
            .push(Message::User { content: prompt });
        let mut usage = Usage::default();
        let journal_failed = |error: crate::journal::JournalError| {
            ToolError::new(format!("the sub-agent stopped: {error}"))
        };
        let (outcome, error) = converse(&env, &mut conversation, &mut usage)
            .await
            .map_err(journal_failed)?;
        answer_unanswered(
            &env.log,
            &mut conversation,
            "not run: the sub-agent stopped before this call ran",
        )
        .map_err(journal_failed)?;
        let last_text = last_answer(&conversation.messages);
        match outcome {
            TurnOutcome::Completed | TurnOutcome::StormBroken => {
                Ok(last_text.unwrap_or_else(|| {
                    "[cwcode] The sub-agent finished without writing an answer.".to_owned()
                }))
            }
            TurnOutcome::Failed if budget.exhausted() => Ok(format!(
                "{}\n\n[cwcode] The sub-agent stopped after {} model requests, its budget, before it finished; the above is what it had. Continue yourself or hand it a narrower task.",
                last_text
                    .as_deref()
                    .unwrap_or("(it had written no answer yet)"),
                self.budget
            )),
            TurnOutcome::Failed => Err(ToolError::new(format!(
                "the sub-agent failed: {}",
                error.as_deref().unwrap_or("no reason given")
            ))),
            TurnOutcome::Cancelled | TurnOutcome::Interrupted => Err(ToolError::new(
                "the sub-agent was stopped before it answered: the turn was cancelled",
            )),
        }
    }
}

/// The latest non-empty text the sub-agent wrote.
fn last_answer(messages: &[Message]) -> Option<String> {
    messages.iter().rev().find_map(|message| match message {
        Message::Assistant(assistant) if !assistant.content.trim().is_empty() => {
            Some(assistant.content.clone())
        }
        _ => None,
    })
}

/// Counts a sub-agent's model requests; past the budget a request is refused.
struct RequestBudget {
    limit: u32,
    used: AtomicU32,
}

impl RequestBudget {
    fn new(limit: u32) -> Self {
        Self {
            limit,
            used: AtomicU32::new(0),
        }
    }

    /// Takes one request from the budget; false once it is spent.
    fn take(&self) -> bool {
        self.used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                (used < self.limit).then_some(used + 1)
            })
            .is_ok()
    }

    fn exhausted(&self) -> bool {
        self.used.load(Ordering::SeqCst) >= self.limit
    }
}

/// The parent's model as the sub-agent sees it: without the `task` tool, and only for as many
/// requests as its budget allows.
struct Budgeted {
    inner: Arc<dyn Model>,
    budget: Arc<RequestBudget>,
}

fn without_task(tools: &[FunctionSpec]) -> Vec<FunctionSpec> {
    tools
        .iter()
        .filter(|tool| tool.name != TASK_TOOL)
        .cloned()
        .collect()
}

impl Model for Budgeted {
    fn profile_name(&self) -> &str {
        self.inner.profile_name()
    }

    fn context_window(&self) -> Option<u64> {
        self.inner.context_window()
    }

    fn keeping_reasoning(&self) -> Arc<dyn Model> {
        Arc::new(Self {
            inner: self.inner.keeping_reasoning(),
            budget: Arc::clone(&self.budget),
        })
    }

    fn resolve_model(&self) -> BoxFuture<'_, Result<(), ProviderError>> {
        self.inner.resolve_model()
    }

    fn request_body(&self, request: ChatRequest<'_>) -> Vec<u8> {
        let tools = without_task(request.tools);
        self.inner.request_body(ChatRequest {
            messages: request.messages,
            tools: &tools,
        })
    }

    fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
        cancel: &'a CancellationToken,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async move {
            if !self.budget.take() {
                return Err(ProviderError::Protocol(format!(
                    "the sub-agent's budget of {} model requests is spent",
                    self.budget.limit
                )));
            }
            let tools = without_task(request.tools);
            let request = ChatRequest {
                messages: request.messages,
                tools: &tools,
            };
            self.inner.stream(request, cancel, on_event).await
        })
    }
}
