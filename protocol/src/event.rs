//! Session events: what the journal stores and what subscribers receive, in the same shape.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::types::{
    ApprovalDecision, GoalState, Mode, RequestStats, RewindResult, SessionStatus, TodoItem,
    ToolCall, Usage,
};

/// One entry of a session's journal. `seq` starts at 1 and goes up by one with each event of
/// the session (a `subscription_ended` marker, which is not journalled, has `seq` 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    pub seq: u64,
    /// RFC 3339 time at which the daemon recorded the event.
    pub time: String,
    /// Set on the events of a `task` sub-agent: the id of the parent's `task` call they belong
    /// under, so clients can show or fold them there. They are not part of the parent's
    /// conversation; only the call's result (the sub-agent's answer) is.
    #[serde(
        default,
        rename = "parentCallId",
        skip_serializing_if = "Option::is_none"
    )]
    pub parent_call_id: Option<String>,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// A `task` sub-agent's own text (its streamed answer and reasoning, its messages): not the
    /// session's answer, which the parent's call result carries. Clients show a sub-agent's tool
    /// calls and approvals and leave this out.
    pub fn is_sub_agent_text(&self) -> bool {
        self.parent_call_id.is_some()
            && matches!(
                self.kind,
                EventKind::AssistantDelta { .. }
                    | EventKind::ReasoningDelta { .. }
                    | EventKind::AssistantMessage { .. }
            )
    }
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
    /// The storm-breaker stopped a loop of identical failing calls; the answer explains it.
    StormBroken,
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
        /// What was sent for this answer, to check the prompt-cache prefix.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stats: Option<RequestStats>,
    },
    /// A model call that ended before its answer did (the turn was cancelled, or the daemon
    /// stopped): its text is not part of the history, but what it cost counts in the cache and
    /// cost reports and in goal budgets.
    #[serde(rename_all = "camelCase")]
    CallAbandoned {
        /// What the provider reported before the call ended; none when it reported nothing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// cwcode's own estimate when the provider reported nothing: the request's tokens and
        /// the text streamed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        estimated_usage: Option<Usage>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stats: Option<RequestStats>,
    },
    /// The next `assistant_message`'s tool calls were read from its text: the server (a local
    /// vLLM or llama.cpp without a tool-call parser) left them there as `<tool_call>` blocks,
    /// and the profile's `recover_text_tool_calls` allows reading them back.
    #[serde(rename_all = "camelCase")]
    ToolCallsRecovered {
        call_ids: Vec<String>,
    },
    /// The provider connection broke mid-answer and the request is retried: discard the partial
    /// text and reasoning streamed since the last `assistant_message`.
    StreamRestarted {
        reason: String,
    },
    /// A model call failed in a way that may pass (a stall, a broken connection, a 429 or 5xx):
    /// after `delayMs` the daemon makes attempt `attempt` of at most `maxAttempts`. `reason`
    /// says plainly what went wrong, e.g. "the provider sent nothing for 60 s".
    #[serde(rename_all = "camelCase")]
    ProviderRetrying {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        reason: String,
    },
    /// A message the daemon added to the conversation when the mode crossed into or out of plan
    /// mode; the model sees `text` as a user message.
    ModeNotice {
        mode: Mode,
        text: String,
    },
    /// Files the model had read changed on disk since (another program or person edited them);
    /// the model sees `text` as a user message before its next request.
    FilesChanged {
        paths: Vec<String>,
        text: String,
    },
    /// The project instructions (AGENTS.md, CLAUDE.md) changed while the session ran. The
    /// system prompt keeps the ones it started with; the model sees the new `instructions` as a
    /// user message before its next request (empty when the files were removed).
    InstructionsChanged {
        sources: Vec<String>,
        instructions: String,
    },
    /// The turn stopped because one call kept failing, or changing nothing, the same way.
    StormBroken {
        tool: String,
        explanation: String,
    },
    TodoUpdated {
        todos: Vec<TodoItem>,
    },
    /// Older turns were replaced by a summary to fit the context window (one of the two
    /// operations, with rewind, that rewrite history). The model's view becomes the system
    /// prompt, the summary, then the last `keptMessages` messages.
    #[serde(rename_all = "camelCase")]
    Compacted {
        summary: String,
        kept_messages: u32,
        tokens_before: u64,
        tokens_after: u64,
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
    /// The call's output was longer than the head and tail streamed as `tool_output_delta`s:
    /// the whole of it (up to `spilledBytes`) is in the file at `path`, mode 0600.
    #[serde(rename_all = "camelCase")]
    ToolOutputSpilled {
        call_id: String,
        path: String,
        /// Every byte the call printed.
        total_bytes: u64,
        /// The bytes kept in the file: the file is capped, the rest is counted, not kept.
        spilled_bytes: u64,
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
        /// The pattern a client offers for "always" on this call (`cargo test *` for
        /// `cargo test -q`); absent when only the whole tool can be allowed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        suggested_pattern: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    ApprovalResolved {
        request_id: String,
        decision: ApprovalDecision,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// With `always`: the glob later calls must match to be allowed without asking.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pattern: Option<String>,
    },
    ModeChanged {
        mode: Mode,
    },
    /// The session's next requests go to this provider profile.
    ProfileChanged {
        profile: String,
    },
    /// The provider demanded its reasoning back (SPEC §6): from here on this session's history
    /// replays it.
    ReasoningKept {
        profile: String,
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
    /// The files a prompt changed, recorded so that `/rewind` can restore them.
    CheckpointCreated {
        turn: u32,
        files: Vec<String>,
    },
    /// Files and history were put back to before prompt `turn` (one of the two operations,
    /// with compaction, that rewrite history); undoable until the next prompt.
    Rewound {
        result: RewindResult,
    },
    /// The last rewind was undone: files and history are as they were before it.
    RewindUndone {
        result: RewindResult,
    },
    /// The goal loop starts a cycle: a turn whose prompt lists the unchecked goals.
    GoalCycleStarted {
        cycle: u32,
        cap: u32,
    },
    GoalCycleFinished {
        cycle: u32,
        done: usize,
        left: usize,
    },
    /// The goal loop ended in `state`; `summary` says why, what is left and what it used.
    GoalLoopStopped {
        reason: String,
        summary: String,
        #[serde(default)]
        state: GoalState,
    },
    /// Something failed outside a turn (a compaction, a background task); said plainly.
    Error {
        message: String,
    },
    /// Sent only to one subscriber, never journalled: its subscription ends here. Its `seq` is
    /// 0, never a journalled event's. `lastSeq` is the last event this subscription was sent:
    /// when `resumable` (the client was too slow, the session goes on) resubscribing with
    /// `since: lastSeq` misses nothing and repeats nothing; otherwise (the session was deleted)
    /// there is nothing to resume.
    #[serde(rename_all = "camelCase")]
    SubscriptionEnded {
        reason: String,
        #[serde(default)]
        last_seq: u64,
        #[serde(default)]
        resumable: bool,
    },
    /// An event kind this build does not know (sent by a newer daemon); safe to skip.
    #[serde(other)]
    Unknown,
}

/// How clients say a [`EventKind::ProviderRetrying`]: "retrying in 4 s: the provider sent
/// nothing for 60 s (attempt 2 of 5)".
pub fn retrying_line(attempt: u32, max_attempts: u32, delay_ms: u64, reason: &str) -> String {
    let delay = if delay_ms < 1000 {
        format!("{:.1} s", delay_ms as f64 / 1000.0)
    } else {
        format!("{} s", delay_ms.saturating_add(500) / 1000)
    };
    format!("retrying in {delay}: {reason} (attempt {attempt} of {max_attempts})")
}

/// A page of a session's journal, for clients without a WebSocket.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventsParams {
    pub session_id: String,
    /// Events with a larger `seq`; `0` (the default) starts at the beginning.
    #[serde(default)]
    pub since: u64,
    /// At most this many events (default 200, at most 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventPage {
    pub events: Vec<Event>,
    /// Pass as `since` for the next page: the `seq` of the last event here (or `since` again
    /// when there were none).
    pub next_since: u64,
    /// Whether the journal already holds more events after this page.
    pub more: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_reads_as_a_sentence() {
        assert_eq!(
            retrying_line(2, 5, 4200, "the provider sent nothing for 60 s"),
            "retrying in 4 s: the provider sent nothing for 60 s (attempt 2 of 5)"
        );
        assert_eq!(
            retrying_line(3, 3, 450, "busy"),
            "retrying in 0.5 s: busy (attempt 3 of 3)"
        );
    }

    #[test]
    fn events_are_flat_json_objects_with_a_type_tag() {
        let event = Event {
            seq: 7,
            time: "2026-11-30T00:00:00.000Z".into(),
            parent_call_id: None,
            kind: EventKind::ToolOutputDelta {
                call_id: "c1".into(),
                text: "ok\n".into(),
            },
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"seq": 7, "time": "2026-11-30T00:00:00.000Z",
                               "type": "tool_output_delta", "callId": "c1", "text": "ok\n"})
        );
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), event);
    }

    #[test]
    fn an_event_kind_from_a_newer_daemon_decodes_as_unknown() {
        let event: Event =
            serde_json::from_str(r#"{"seq":1,"time":"t","type":"hologram_projected","beams":3}"#)
                .unwrap();
        assert_eq!(event.kind, EventKind::Unknown);
    }
}
