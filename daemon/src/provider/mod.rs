//! OpenAI-compatible chat completions (SPEC §10): profiles, the HTTP client, the SSE stream and
//! its accumulation into one assistant message with usage, retries, and the token arithmetic the
//! context management and the sticky-prefix measurement need (SPEC §6).

mod builtin;
mod client;
mod config;
mod goal_hooks;
pub mod pool;
mod profile;
mod quirks;
mod retry;
mod sse;
#[cfg(test)]
mod sse_props;
mod text_tool_calls;
mod tokens;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cwcode_protocol::{ToolCall, Usage};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub use client::Provider;
pub use config::{Config, ConfigError};
pub use goal_hooks::{GoalDefaults, HookEvent, Hooks, MAX_VERIFY_TIMEOUT_SECS};

/// cwcode's own name on every request, and never another product's (SPEC §10).
const USER_AGENT: &str = concat!("cwcode/", env!("CARGO_PKG_VERSION"));
pub use profile::{EditTools, KeySource, Pricing, Profile, ProviderKind, ReasoningHistory};
pub use retry::{CallLimits, RetryPolicy};
pub use tokens::{
    estimate_body_tokens, estimate_request_tokens, estimate_text_tokens, estimate_tokens,
    shared_prefix_len,
};

/// What the turn loop asks of a model: the HTTP [`Provider`] in the daemon, a scripted one in the
/// agent's tests. Only what the loop needs: the profile facts it decides on, the exact body it
/// measures, and the streamed call.
pub trait Model: Send + Sync {
    fn profile_name(&self) -> &str;

    /// How many tokens a request may hold, when known; the loop compacts before reaching it.
    fn context_window(&self) -> Option<u64>;

    /// The same model replaying earlier reasoning whatever the profile says: for a session whose
    /// provider answered [`ProviderError::ReasoningMustBeKept`].
    fn keeping_reasoning(&self) -> Arc<dyn Model>;

    /// Settles which model is asked, so [`Model::request_body`] matches what is sent.
    fn resolve_model(&self) -> BoxFuture<'_, Result<(), ProviderError>>;

    /// The exact bytes sent for `request`.
    fn request_body(&self, request: ChatRequest<'_>) -> Vec<u8>;

    /// Sends `request` and streams the answer to `on_event`; firing `cancel` ends the call at
    /// once with [`ProviderError::Cancelled`].
    fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
        cancel: &'a CancellationToken,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Completion, ProviderError>>;
}

impl Model for Provider {
    fn profile_name(&self) -> &str {
        Provider::profile_name(self)
    }

    fn context_window(&self) -> Option<u64> {
        Provider::context_window(self)
    }

    fn keeping_reasoning(&self) -> Arc<dyn Model> {
        Arc::new(Provider::keeping_reasoning(self))
    }

    fn resolve_model(&self) -> BoxFuture<'_, Result<(), ProviderError>> {
        Box::pin(Provider::resolve_model(self))
    }

    fn request_body(&self, request: ChatRequest<'_>) -> Vec<u8> {
        Provider::request_body(self, request)
    }

    fn stream<'a>(
        &'a self,
        request: ChatRequest<'a>,
        cancel: &'a CancellationToken,
        on_event: &'a mut (dyn FnMut(StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(Provider::stream(self, request, cancel, on_event))
    }
}

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

/// What [`Provider::stream`] reports while one model call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    Delta(StreamDelta),
    /// The answer broke off mid-stream and is being asked for again from the start. Every
    /// `Delta` delivered since the call began, or since the previous `Restart`, belongs to an
    /// answer that will never be completed: clients must discard that partial text. Only sent
    /// when such deltas exist; the completion that the call returns never includes them.
    Restart {
        /// 1 for the first retry.
        retry: u32,
        /// Why the previous attempt was abandoned, for the user.
        reason: String,
    },
    /// An attempt failed in a way that may pass; the call waits `delay`, then makes attempt
    /// number `attempt` (2 for the first retry) of at most `max_attempts`. Sent for every
    /// retry, after any `Restart`, so a stalled provider is never silent.
    Retrying {
        attempt: u32,
        max_attempts: u32,
        delay: Duration,
        reason: String,
    },
    /// The finished answer's tool calls were read from its text, where a server without a
    /// tool-call parser left them (the profile's `recover_text_tool_calls`).
    ToolCallsRecovered {
        call_ids: Vec<String>,
    },
    /// The call was cancelled after its request reached the provider: what the provider
    /// reported billing so far, or else cwcode's estimate (the request and the text streamed).
    /// Sent just before the call ends with [`ProviderError::Cancelled`].
    Abandoned {
        usage: Option<Usage>,
        estimated: Option<Usage>,
    },
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
    /// The profile cannot be used as configured (a placeholder left in, a model missing).
    #[error("profile `{profile}` is not usable yet: {reason}")]
    Misconfigured { profile: String, reason: String },
    #[error("invalid provider URL `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("invalid header `{name}` in the profile: {reason}")]
    InvalidHeader { name: String, reason: String },
    #[error("cannot set up the HTTP client: {0}")]
    HttpClient(String),
    #[error("cannot reach {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("{}", status_message(profile, url, *status, body))]
    Status {
        profile: String,
        url: String,
        status: u16,
        body: String,
    },
    /// 401 or 403: the key was refused. Names where the key came from, never the key.
    #[error(
        "profile `{profile}`: the provider refused the request sent with {key_source} (HTTP \
         {status}: {body}). Check that key, or set another with `cwcode-cli config set-key \
         {profile}`"
    )]
    Auth {
        profile: String,
        status: u16,
        key_source: KeySource,
        body: String,
    },
    /// The provider admits only clients it recognises, or the plan's quota is spent: a new key
    /// would not help, so this is not an [`ProviderError::Auth`].
    #[error("profile `{profile}`: the provider refused access (HTTP {status}: {body}). {advice}")]
    AccessRefused {
        profile: String,
        status: u16,
        body: String,
        advice: String,
    },
    /// The provider's 400 for a history whose assistant messages lack their reasoning (DeepSeek's
    /// thinking mode with tools, and others built like it). The caller switches the session to
    /// [`Provider::keeping_reasoning`] and sends the request once more.
    #[error(
        "profile `{profile}`: the provider requires earlier reasoning to be sent back ({body}); \
         set \"reasoning_history\": \"keep\" for this profile"
    )]
    ReasoningMustBeKept { profile: String, body: String },
    #[error("the provider stream broke: {0}")]
    Stream(String),
    /// A 200 with nothing in it: the server is up and answered, so asking again would get the
    /// same nothing; it is not a network fault.
    #[error(
        "profile `{profile}`: {url} answered 200 with an empty body instead of a chat completion \
         stream. Check the profile's base_url (it should end in /v1 or the provider's API path) \
         and model, or ask the provider"
    )]
    EmptyAnswer { profile: String, url: String },
    #[error("the provider sent nothing for {0} s")]
    IdleTimeout(u64),
    /// The call as a whole, retries included, ran past the profile's `request_timeout_secs`.
    #[error(
        "the provider did not finish answering within {0} s (the profile's request_timeout_secs)"
    )]
    RequestTimeout(u64),
    #[error("the provider sent something that is not a chat completion chunk: {0}")]
    Protocol(String),
    /// A fault that was retried until the [`RetryPolicy`] ran out; `last` is the final attempt's.
    #[error("{}", gave_up_message(*attempts, last))]
    GaveUp {
        attempts: u32,
        last: Box<ProviderError>,
    },
    #[error("cancelled")]
    Cancelled,
}

impl ProviderError {
    /// Faults that may go away by themselves: rate limits, server errors, broken or stalled
    /// connections. Everything else would fail the same way again.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => {
                matches!(status, 408 | 429) || is_retryable_5xx(*status)
            }
            ProviderError::Connect { .. }
            | ProviderError::Stream(_)
            | ProviderError::IdleTimeout(_) => true,
            _ => false,
        }
    }
}

/// 501 and 505 say the server will never do what was asked.
fn is_retryable_5xx(status: u16) -> bool {
    (500..600).contains(&status) && status != 501 && status != 505
}

fn status_message(profile: &str, url: &str, status: u16, body: &str) -> String {
    then_advice(
        &format!("profile `{profile}`: {url} answered HTTP {status}: {body}"),
        status_advice(status),
    )
}

fn gave_up_message(attempts: u32, last: &ProviderError) -> String {
    let plural = if attempts == 1 { "" } else { "s" };
    then_advice(
        &format!("{last} (gave up after {attempts} attempt{plural})"),
        retry_advice(last),
    )
}

/// What the user can do about an error status, appended to the provider's own text.
fn status_advice(status: u16) -> &'static str {
    match status {
        400 | 422 => {
            "The provider refused this request and would refuse it again: check the profile's \
             model and request_extra, or report it with `cwcode-cli doctor`'s output"
        }
        404 => "Check the profile's base_url and model",
        408 => "The provider timed out waiting for the request: send again",
        413 => "The request is too large for the provider: compact the session (/compact)",
        429 => "The provider is rate-limiting this key: wait a minute and send again",
        _ if is_retryable_5xx(status) => {
            "The provider is failing or overloaded: send again in a few minutes, or switch to \
             another profile"
        }
        400..500 => "The provider refused the request; sending it again would not help",
        _ => "",
    }
}

/// Status errors carry their advice already; the others get it once retries have run out.
fn retry_advice(last: &ProviderError) -> &'static str {
    match last {
        ProviderError::Connect { .. } => "Check the network and the profile's base_url",
        ProviderError::Stream(_) => {
            "The connection keeps breaking mid-answer: check the network or proxy, then send again"
        }
        ProviderError::IdleTimeout(_) => {
            "The provider keeps stalling: send again later, or raise the profile's \
             idle_timeout_secs for a model that thinks long in silence"
        }
        _ => "",
    }
}

/// `text. advice`, without doubling a full stop the provider's text already ends with.
fn then_advice(text: &str, advice: &str) -> String {
    if advice.is_empty() {
        return text.to_owned();
    }
    format!("{}. {advice}", text.trim_end().trim_end_matches('.'))
}

/// Extra request headers, as configured per profile.
pub type Headers = BTreeMap<String, String>;
