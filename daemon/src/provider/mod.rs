//! OpenAI-compatible chat completions (SPEC §10): profiles, the HTTP client, the SSE stream and
//! its accumulation into one assistant message with usage.

mod client;
pub mod pool;
mod profile;
mod sse;

use std::collections::BTreeMap;

use cwcode_protocol::{ToolCall, Usage};
use serde::{Deserialize, Serialize};

pub use client::Provider;
pub use profile::{
    Config, ConfigError, EditTools, Pricing, Profile, ProviderKind, ReasoningHistory,
};

/// One message of the conversation, in the session's own terms. The provider serialises it to
/// each profile's wire shape; the same history always produces the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant(AssistantMessage),
    Tool {
        tool_call_id: String,
        content: String,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssistantMessage {
    pub content: String,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ToolCall>,
}

/// A tool as the model is shown it: `parameters` is a JSON Schema object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// One request: the whole history and the tools on offer, in a fixed order.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    pub messages: &'a [Message],
    pub tools: &'a [FunctionSpec],
}

/// A streamed piece of the answer, delivered as soon as it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamDelta {
    Content(String),
    Reasoning(String),
}

/// The accumulated answer of one model call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    pub message: AssistantMessage,
    /// `None` when the provider reported no usage at all.
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("profile `{profile}` has no API key: set {hint}")]
    MissingKey { profile: String, hint: String },
    #[error("invalid provider URL `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("invalid header `{name}` in the profile: {reason}")]
    InvalidHeader { name: String, reason: String },
    #[error("cannot set up the HTTP client: {0}")]
    HttpClient(String),
    #[error("cannot reach {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("{url} answered HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("the provider stream broke: {0}")]
    Stream(String),
    #[error("the provider sent no data for {0} s")]
    IdleTimeout(u64),
    #[error("the provider sent something that is not a chat completion chunk: {0}")]
    Protocol(String),
    #[error("cancelled")]
    Cancelled,
}

/// Extra request headers, as configured per profile.
pub type Headers = BTreeMap<String, String>;
