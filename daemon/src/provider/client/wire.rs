//! The request body as the chat-completions API takes it: the conversation, the tools and the
//! profile's extra fields, serialised in an order that keeps a growing history a byte prefix of
//! the next request (SPEC §6).

use serde::Serialize;
use serde_json::{Map, Value};

use crate::provider::profile::ReasoningHistory;
use crate::provider::{FunctionSpec, Message};

#[derive(Serialize)]
pub(super) struct RequestBody<'a> {
    pub(super) model: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<WireTool<'a>>,
    pub(super) stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_completion_tokens: Option<u64>,
    #[serde(flatten)]
    pub(super) extra: &'a Map<String, Value>,
    pub(super) messages: Vec<WireMessage<'a>>,
}

#[derive(Serialize)]
pub(super) struct StreamOptions {
    pub(super) include_usage: bool,
}

#[derive(Serialize)]
pub(super) struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: &'a FunctionSpec,
}

impl<'a> From<&'a FunctionSpec> for WireTool<'a> {
    fn from(function: &'a FunctionSpec) -> Self {
        WireTool {
            kind: "function",
            function,
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub(super) enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// Always a string: some servers reject `null` beside tool calls.
        content: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

impl<'a> WireMessage<'a> {
    pub(super) fn new(message: &'a Message, reasoning_history: ReasoningHistory) -> Self {
        match message {
            Message::System { content } => WireMessage::System { content },
            Message::User { content } => WireMessage::User { content },
            Message::Assistant(assistant) => WireMessage::Assistant {
                content: &assistant.content,
                // DeepSeek's thinking mode wants it back even when it was empty.
                reasoning_content: match reasoning_history {
                    ReasoningHistory::Keep => Some(assistant.reasoning.as_deref().unwrap_or("")),
                    ReasoningHistory::Strip => None,
                },
                tool_calls: assistant
                    .tool_calls
                    .iter()
                    .map(|call| WireToolCall {
                        id: &call.id,
                        kind: "function",
                        function: WireFunctionCall {
                            name: &call.name,
                            arguments: &call.arguments,
                        },
                    })
                    .collect(),
            },
            Message::Tool {
                tool_call_id,
                content,
            } => WireMessage::Tool {
                tool_call_id,
                content,
            },
        }
    }
}

#[derive(Serialize)]
pub(super) struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
pub(super) struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}
