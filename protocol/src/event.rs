//! Session events: what the journal stores and what subscribers receive, in the same shape.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::types::{ApprovalDecision, Mode, SessionStatus, ToolCall, Usage};

/// One entry of a session's journal. `seq` is monotonic per session and starts at 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    pub seq: u64,
    /// RFC 3339 time at which the daemon recorded the event.
    pub time: String,
    #[serde(flatten)]
    pub kind: EventKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The model answered without asking for more tools.
    Completed,
    /// A client cancelled the turn.
    Cancelled,
    /// The provider or the daemon failed; `error` says why.
    Failed,
    /// The daemon stopped (or crashed) while the turn ran.
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// A prompt accepted while another turn ran; it starts when the turns before it end, also
    /// after a daemon restart.
    #[serde(rename_all = "camelCase")]
    PromptQueued {
        turn: u32,
        prompt: String,
    },
    #[serde(rename_all = "camelCase")]
    TurnStarted {
        turn: u32,
        prompt: String,
    },
    AssistantDelta {
        text: String,
    },
    ReasoningDelta {
        text: String,
    },
    /// One complete model answer; the session's history is rebuilt from these on restart.
    #[serde(rename_all = "camelCase")]
    AssistantMessage {
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallStarted {
        call_id: String,
        name: String,
        arguments: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolOutputDelta {
        call_id: String,
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallFinished {
        call_id: String,
        name: String,
        /// What the model is shown as the tool's result.
        output: String,
        is_error: bool,
    },
    #[serde(rename_all = "camelCase")]
    ApprovalRequested {
        request_id: String,
        call_id: String,
        tool: String,
        arguments: String,
    },
    #[serde(rename_all = "camelCase")]
    ApprovalResolved {
        request_id: String,
        decision: ApprovalDecision,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    ModeChanged {
        mode: Mode,
    },
    StatusChanged {
        status: SessionStatus,
    },
    #[serde(rename_all = "camelCase")]
    TurnFinished {
        turn: u32,
        outcome: TurnOutcome,
        usage: Usage,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Sent only to one subscriber, never journalled: its subscription ends here. `seq` is the
    /// last event it was sent, so it can resubscribe with `since: seq` and miss nothing.
    SubscriptionEnded {
        reason: String,
    },
}
