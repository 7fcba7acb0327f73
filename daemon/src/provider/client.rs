//! The streaming HTTP client of one profile: it POSTs the conversation to `/chat/completions`,
//! reads the SSE answer as it arrives and hands back the accumulated completion, retrying the
//! faults that go away by themselves (SPEC §10).

mod embeddings;

use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::Url;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use super::config::RESERVED_BODY_FIELDS;
use super::profile::{KeySource, Profile, ProviderKind, ReasoningHistory, ResolvedKey};
use super::quirks::{self, ServedModel};
use super::retry::{self, RetryPolicy};
use super::sse::{self, ChunkAccumulator};
use super::text_tool_calls;
use super::tokens::{estimate_request_tokens, estimate_text_tokens};
use super::{
    ChatRequest, Completion, FunctionSpec, Message, ProviderError, StreamDelta, StreamEvent,
};
use cwcode_protocol::Usage;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of a 200 body that is not an SSE stream is kept to quote in the error.
const BODY_START_BYTES: usize = 512;

/// The client for one profile. Cloning is cheap and shares the connection pool and the model a
/// local server was found to serve.
#[derive(Clone)]
pub struct Provider {
    profile_name: String,
    kind: ProviderKind,
    /// Empty when the server is asked which model it serves (see [`Provider::resolve_model`]).
    model: String,
    served: Arc<OnceCell<ServedModel>>,
    endpoint: Url,
    models_url: Url,
    embeddings_url: Url,
    /// The profile's `embeddings_model`; see `embeddings`.
    embeddings_model: Option<String>,
    http: reqwest::Client,
    /// Kept only to scrub it from error text that a provider echoes back.
    api_key: Option<String>,
    key_source: KeySource,
    reasoning_history: ReasoningHistory,
    max_output_tokens: Option<u64>,
    context_window: Option<u64>,
    request_extra: Map<String, Value>,
    idle_timeout: Duration,
    request_timeout: Duration,
    retry: RetryPolicy,
    /// The profile's `recover_text_tool_calls`.
    recover_text_tool_calls: bool,
}

/// What the current attempt has received, so that a cancelled call can say what it cost.
#[derive(Debug, Default)]
struct Received {
    /// The provider accepted the request (a 2xx came back): from here on it bills.
    accepted: bool,
    /// The usage the stream reported so far.
    usage: Option<Usage>,
    /// An estimate of the text streamed so far.
    output_tokens: u64,
}

/// One failed attempt, with the wait the provider asked for before the next.
struct Failure {
    error: ProviderError,
    retry_after: Option<Duration>,
}

impl From<ProviderError> for Failure {
    fn from(error: ProviderError) -> Failure {
        Failure {
            error,
            retry_after: None,
        }
    }
}

impl Provider {
    /// The client for `profile`, its key read from the daemon's environment when the profile
    /// names a variable.
    pub fn new(profile_name: &str, profile: &Profile) -> Result<Provider, ProviderError> {
        Self::with_env(profile_name, profile, &|variable| {
            std::env::var(variable).ok()
        })
    }

    pub(super) fn with_env(
        profile_name: &str,
        profile: &Profile,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Provider, ProviderError> {
        let misconfigured = |reason: String| ProviderError::Misconfigured {
            profile: profile_name.to_owned(),
            reason,
        };
        if let Some(placeholder) = quirks::unfilled_placeholder(&profile.base_url) {
            return Err(misconfigured(format!(
                "its base_url still holds the placeholder {placeholder}: set \
                 profiles.{profile_name}.base_url in config.json (for Azure: \
                 https://YOUR-RESOURCE.openai.azure.com/openai/v1)"
            )));
        }
        let endpoints = Endpoints::new(&profile.base_url, profile.kind)?;
        let model = match (&profile.model, endpoints.deployment) {
            (model, _) if !model.is_empty() => model.clone(),
            (_, Some(deployment)) => deployment,
            _ if profile.kind == ProviderKind::Vllm => String::new(),
            _ => {
                return Err(misconfigured(format!(
                    "it names no model: set profiles.{profile_name}.model in config.json{}",
                    if profile.kind == ProviderKind::Azure {
                        " to your deployment's name"
                    } else {
                        ""
                    }
                )));
            }
        };
        let (api_key, key_source) = match profile.resolve_key(env) {
            ResolvedKey::Found { key, source } => (Some(key), source),
            ResolvedKey::NotNeeded => (None, KeySource::None),
            ResolvedKey::Missing { variable } => {
                return Err(ProviderError::MissingKey {
                    profile: profile_name.to_owned(),
                    hint: format!(
                        "the environment variable {variable} where cwcoded starts, or run \
                         `cwcode-cli config set-key {profile_name}` to store it in config.json"
                    ),
                });
            }
        };
        let headers = default_headers(profile, api_key.as_deref())?;
        crate::util::install_crypto_provider();
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|error| ProviderError::HttpClient(error_chain(&error)))?;
        Ok(Provider {
            profile_name: profile_name.to_owned(),
            kind: profile.kind,
            model,
            served: Arc::new(OnceCell::new()),
            endpoint: endpoints.chat,
            models_url: endpoints.models,
            embeddings_url: endpoints.embeddings,
            embeddings_model: profile.embeddings_model.clone(),
            http,
            api_key,
            key_source,
            reasoning_history: profile.reasoning_history,
            max_output_tokens: profile.max_output_tokens,
            context_window: profile.context_window,
            // The configuration refuses these already; a profile built in code is held to the same.
            request_extra: profile
                .request_extra
                .iter()
                .filter(|(key, _)| !RESERVED_BODY_FIELDS.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
            idle_timeout: profile.limits.idle_timeout,
            request_timeout: profile.limits.request_timeout,
            retry: RetryPolicy {
                max_retries: profile.limits.max_attempts.saturating_sub(1),
                ..RetryPolicy::default()
            },
            recover_text_tool_calls: profile.recover_text_tool_calls,
        })
    }

    /// Replaces the profile's idle timeout. `: keep-alive` comments do not count as data.
    pub fn with_idle_timeout(mut self, idle_timeout: Duration) -> Provider {
        self.idle_timeout = idle_timeout;
        self
    }

    /// Replaces the profile's total timeout for one call, retries included.
    pub fn with_request_timeout(mut self, request_timeout: Duration) -> Provider {
        self.request_timeout = request_timeout;
        self
    }

    /// Replaces the retry policy the profile's `max_attempts` made.
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Provider {
        self.retry = retry;
        self
    }

    /// The same client replaying earlier reasoning whatever the profile says: for a session
    /// whose provider answered [`ProviderError::ReasoningMustBeKept`].
    pub fn keeping_reasoning(&self) -> Provider {
        Provider {
            reasoning_history: ReasoningHistory::Keep,
            ..self.clone()
        }
    }

    pub fn profile_name(&self) -> &str {
        &self.profile_name
    }

    /// The model asked for; empty until [`Provider::resolve_model`] has asked a local server.
    pub fn model(&self) -> &str {
        match self.served.get() {
            Some(served) if self.model.is_empty() => &served.id,
            _ => &self.model,
        }
    }

    /// The profile's context window, else what the local server reported with its model.
    pub fn context_window(&self) -> Option<u64> {
        self.context_window
            .or_else(|| self.served.get().and_then(|served| served.max_model_len))
    }

    /// For a `vllm` profile without a model: asks the server once which model it serves; later
    /// calls, and clones, reuse the answer. Call it before [`Provider::request_body`] when the
    /// body must match what [`Provider::stream`] sends; `stream` calls it itself.
    pub async fn resolve_model(&self) -> Result<(), ProviderError> {
        if !self.model.is_empty() {
            return Ok(());
        }
        self.served
            .get_or_try_init(|| self.fetch_served_model())
            .await
            .map(|_| ())
    }

    async fn fetch_served_model(&self) -> Result<ServedModel, ProviderError> {
        let url = self.models_url.clone();
        let response = tokio::time::timeout(self.idle_timeout, self.http.get(url.clone()).send())
            .await
            .map_err(|_| self.idle_timeout_error())?
            .map_err(|error| ProviderError::Connect {
                url: url.to_string(),
                reason: error_chain(&error.without_url()),
            })?;
        let status = response.status();
        let body = tokio::time::timeout(self.idle_timeout, response.bytes())
            .await
            .map_err(|_| self.idle_timeout_error())?
            .map_err(|error| ProviderError::Connect {
                url: url.to_string(),
                reason: error_chain(&error.without_url()),
            })?;
        if !status.is_success() {
            return Err(ProviderError::Status {
                profile: self.profile_name.clone(),
                url: url.to_string(),
                status: status.as_u16(),
                body: provider_error_text(
                    &self.without_key(String::from_utf8_lossy(&body).into_owned()),
                ),
            });
        }
        quirks::first_served_model(&body).ok_or_else(|| ProviderError::Misconfigured {
            profile: self.profile_name.clone(),
            reason: format!(
                "{url} lists no model: set profiles.{}.model in config.json",
                self.profile_name
            ),
        })
    }

    /// The exact bytes POSTed for `request`. Every stable field comes before `messages`, which is
    /// last, so a request whose history extends the previous one's has a body that extends the
    /// previous body up to the end of its messages (the sticky prefix, SPEC §6).
    pub fn request_body(&self, request: ChatRequest<'_>) -> Vec<u8> {
        let extra = &self.request_extra;
        let reasoning_history = quirks::deepseek_keeps_reasoning_with_tools(
            self.kind,
            self.reasoning_history,
            !request.tools.is_empty(),
        );
        let max_output_tokens = self
            .max_output_tokens
            .filter(|_| !extra.contains_key("max_tokens"))
            .filter(|_| !extra.contains_key("max_completion_tokens"));
        let completion_field = quirks::uses_max_completion_tokens(self.kind);
        let body = RequestBody {
            model: self.model(),
            tools: request.tools.iter().map(WireTool::from).collect(),
            stream: true,
            stream_options: (!extra.contains_key("stream_options")).then_some(StreamOptions {
                include_usage: true,
            }),
            max_tokens: max_output_tokens.filter(|_| !completion_field),
            max_completion_tokens: max_output_tokens.filter(|_| completion_field),
            extra,
            messages: request
                .messages
                .iter()
                .map(|message| WireMessage::new(message, reasoning_history))
                .collect(),
        };
        // Strings, integers, booleans and JSON values under string keys always serialise.
        serde_json::to_vec(&body)
            .unwrap_or_else(|error| unreachable!("a request body always serialises: {error}"))
    }

    /// Sends `request` and streams the answer: `on_event` gets each piece of text as it arrives,
    /// and a [`StreamEvent::Restart`] when a broken answer is asked for again. Retryable faults
    /// are retried under the [`RetryPolicy`], each retry announced by a
    /// [`StreamEvent::Retrying`]; the whole answer is returned at the end. Firing `cancel` ends
    /// the call at once, waits included, and so does the request timeout.
    pub async fn stream(
        &self,
        request: ChatRequest<'_>,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion, ProviderError> {
        let mut received = Received::default();
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ProviderError::Cancelled),
            result = tokio::time::timeout(
                self.request_timeout,
                self.call_with_retries(request, on_event, &mut received),
            ) => result.unwrap_or(Err(ProviderError::RequestTimeout(self.request_timeout.as_secs()))),
        };
        // The provider bills a request it accepted even when the answer is never read to its end.
        if matches!(result, Err(ProviderError::Cancelled)) && received.accepted {
            on_event(StreamEvent::Abandoned {
                usage: received.usage,
                estimated: received.usage.is_none().then(|| Usage {
                    prompt_tokens: estimate_request_tokens(request),
                    completion_tokens: received.output_tokens,
                    cached_tokens: 0,
                }),
            });
        }
        result
    }

    async fn call_with_retries(
        &self,
        request: ChatRequest<'_>,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
        received: &mut Received,
    ) -> Result<Completion, ProviderError> {
        let mut body = None;
        let mut retry = 0;
        loop {
            let mut delivered = false;
            let result = match self.resolve_model().await {
                Ok(()) => {
                    let body = body
                        .get_or_insert_with(|| Bytes::from(self.request_body(request)))
                        .clone();
                    let mut on_delta = |delta| {
                        delivered = true;
                        on_event(StreamEvent::Delta(delta));
                    };
                    *received = Received::default();
                    self.attempt(body, &mut on_delta, received).await
                }
                Err(error) => Err(Failure::from(error)),
            };
            let failure = match result {
                Ok(completion) => return Ok(self.finish(completion, body.as_deref(), on_event)),
                Err(failure) => failure,
            };
            if !failure.error.is_retryable() {
                return Err(failure.error);
            }
            retry += 1;
            let Some(wait) = self.retry.wait(retry, failure.retry_after) else {
                return Err(ProviderError::GaveUp {
                    attempts: retry,
                    last: Box::new(failure.error),
                });
            };
            let reason = failure.error.to_string();
            tracing::warn!(
                profile = %self.profile_name,
                retry,
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                error = %reason,
                "retrying the model call"
            );
            if delivered {
                on_event(StreamEvent::Restart {
                    retry,
                    reason: reason.clone(),
                });
            }
            on_event(StreamEvent::Retrying {
                attempt: retry.saturating_add(1),
                max_attempts: self.retry.max_retries.saturating_add(1),
                delay: wait,
                reason,
            });
            tokio::time::sleep(wait).await;
        }
    }

    /// Where the profile allows it, moves the calls a server left in the text into the tool
    /// calls, announcing them. Their ids come from a hash of the request, unique in the session
    /// because every request extends the history with the answer before it.
    fn finish(
        &self,
        mut completion: Completion,
        body: Option<&[u8]>,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Completion {
        if self.recover_text_tool_calls {
            let prefix = format!("text_call_{:016x}_", text_tool_calls::request_hash(body));
            if text_tool_calls::recover_text_tool_calls(&mut completion.message, &prefix) > 0 {
                tracing::info!(
                    profile = %self.profile_name,
                    calls = completion.message.tool_calls.len(),
                    "recovered tool calls the server left in the text"
                );
                on_event(StreamEvent::ToolCallsRecovered {
                    call_ids: completion
                        .message
                        .tool_calls
                        .iter()
                        .map(|call| call.id.clone())
                        .collect(),
                });
            }
        }
        completion
    }

    /// One POST and its whole stream. It keeps no state between calls, so a retry is calling it
    /// again with the same body.
    async fn attempt(
        &self,
        body: Bytes,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
        received: &mut Received,
    ) -> Result<Completion, Failure> {
        let response = self.post(body).await?;
        let response = self.check_status(response).await?;
        received.accepted = true;
        Ok(self.read_stream(response, on_delta, received).await?)
    }

    async fn post(&self, body: Bytes) -> Result<reqwest::Response, ProviderError> {
        let sending = self
            .http
            .post(self.endpoint.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "text/event-stream")
            .body(body)
            .send();
        tokio::time::timeout(self.idle_timeout, sending)
            .await
            .map_err(|_| self.idle_timeout_error())?
            .map_err(|error| ProviderError::Connect {
                url: self.endpoint.to_string(),
                reason: error_chain(&error.without_url()),
            })
    }

    async fn check_status(
        &self,
        response: reqwest::Response,
    ) -> Result<reqwest::Response, Failure> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry::retry_after(response.headers(), SystemTime::now());
        let text = tokio::time::timeout(self.idle_timeout, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Err(Failure {
            error: self.status_error(status.as_u16(), &self.without_key(text)),
            retry_after,
        })
    }

    /// Tells apart the error statuses a user acts on differently.
    fn status_error(&self, status: u16, text: &str) -> ProviderError {
        let body = provider_error_text(text);
        if quirks::reasoning_must_be_kept(status, text) {
            return ProviderError::ReasoningMustBeKept {
                profile: self.profile_name.clone(),
                body,
            };
        }
        if self.kind == ProviderKind::Kimi
            && let Some(advice) = quirks::kimi_refusal_advice(status, text)
        {
            return ProviderError::AccessRefused {
                profile: self.profile_name.clone(),
                status,
                body,
                advice,
            };
        }
        if matches!(status, 401 | 403) {
            return ProviderError::Auth {
                profile: self.profile_name.clone(),
                status,
                key_source: self.key_source.clone(),
                body,
            };
        }
        ProviderError::Status {
            profile: self.profile_name.clone(),
            url: self.endpoint.to_string(),
            status,
            body,
        }
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
        received: &mut Received,
    ) -> Result<Completion, ProviderError> {
        let mut body_start = Vec::new();
        let mut accumulator = ChunkAccumulator::default();
        let bytes = response.bytes_stream().inspect(|read| {
            if let Ok(read) = read {
                let room = BODY_START_BYTES.saturating_sub(body_start.len());
                body_start.extend_from_slice(&read[..room.min(read.len())]);
            }
        });
        self.read_events(bytes.eventsource(), &mut accumulator, on_delta, received)
            .await?;
        if !accumulator.has_chunks() {
            return Err(self.no_chunk_error(&body_start));
        }
        accumulator.finish()
    }

    /// The idle timer restarts only when an event arrives: the SSE parser consumes comment lines
    /// without yielding anything, so `: keep-alive` cannot keep a dead answer open.
    async fn read_events(
        &self,
        events: impl Stream<Item = Result<Event, EventStreamError<reqwest::Error>>>,
        accumulator: &mut ChunkAccumulator,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
        received: &mut Received,
    ) -> Result<(), ProviderError> {
        let mut events = pin!(events);
        while !accumulator.is_done() {
            let next = match tokio::time::timeout(self.idle_timeout, events.next()).await {
                Ok(next) => next,
                // A server that finishes the answer but neither sends [DONE] nor closes.
                Err(_) if accumulator.has_finish_reason() => return Ok(()),
                Err(_) => return Err(self.idle_timeout_error()),
            };
            let Some(event) = next else {
                return Ok(());
            };
            let event = event.map_err(stream_error)?;
            if event.event == "error" {
                return Err(ProviderError::Stream(format!(
                    "the provider reported an error mid-answer: {}",
                    provider_error_text(&event.data)
                )));
            }
            for delta in accumulator.push(&event.data)? {
                let (StreamDelta::Content(text) | StreamDelta::Reasoning(text)) = &delta;
                received.output_tokens += estimate_text_tokens(text);
                on_delta(delta);
            }
            received.usage = accumulator.usage();
        }
        Ok(())
    }

    /// A 200 whose body held no chunk: the server answered, wrongly, and would again.
    fn no_chunk_error(&self, body_start: &[u8]) -> ProviderError {
        if body_start.iter().all(u8::is_ascii_whitespace) {
            return ProviderError::EmptyAnswer {
                profile: self.profile_name.clone(),
                url: self.endpoint.to_string(),
            };
        }
        ProviderError::Protocol(format!(
            "the answer held no chat completion chunk; it began: {}",
            sse::excerpt(&String::from_utf8_lossy(body_start), sse::EXCERPT_CHARS)
        ))
    }

    fn idle_timeout_error(&self) -> ProviderError {
        ProviderError::IdleTimeout(self.idle_timeout.as_secs())
    }

    fn without_key(&self, text: String) -> String {
        match &self.api_key {
            Some(key) if text.contains(key.as_str()) => text.replace(key.as_str(), "[redacted]"),
            _ => text,
        }
    }
}

/// The key stays out of every debug print.
impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("profile_name", &self.profile_name)
            .field("model", &self.model())
            .field("endpoint", &self.endpoint.as_str())
            .field("key_source", &self.key_source)
            .field("idle_timeout", &self.idle_timeout)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct RequestBody<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u64>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
    messages: Vec<WireMessage<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireTool<'a> {
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
enum WireMessage<'a> {
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
    fn new(message: &'a Message, reasoning_history: ReasoningHistory) -> Self {
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
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// Where a profile's requests go.
struct Endpoints {
    chat: Url,
    models: Url,
    embeddings: Url,
    /// The deployment a legacy Azure URL names.
    deployment: Option<String>,
}

impl Endpoints {
    /// `{base_url}/chat/completions` and `{base_url}/models`, whether or not the base ends in a
    /// slash or already ends in `/chat/completions` (a pasted Azure URL), keeping any query.
    fn new(base_url: &str, kind: ProviderKind) -> Result<Endpoints, ProviderError> {
        let invalid = |reason: String| ProviderError::InvalidUrl {
            url: base_url.to_owned(),
            reason,
        };
        let mut base = Url::parse(base_url).map_err(|error| invalid(error.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "the scheme must be http or https, not {}",
                base.scheme()
            )));
        }
        let deployment = if kind == ProviderKind::Azure {
            quirks::azure_deployment(&base)
        } else {
            None
        };
        if deployment.is_some() {
            base = quirks::with_azure_api_version(base);
        }
        let segments: Vec<String> = base
            .path_segments()
            .ok_or_else(|| invalid("it cannot take a path".to_owned()))?
            .filter(|segment| !segment.is_empty())
            .map(str::to_owned)
            .collect();
        let base_segments = match segments.as_slice() {
            [rest @ .., chat, completions] if chat == "chat" && completions == "completions" => {
                rest
            }
            all => all,
        };
        let with_path = |tail: &[&str]| {
            let mut url = base.clone();
            url.set_path("");
            if let Ok(mut path) = url.path_segments_mut() {
                path.clear().extend(base_segments).extend(tail);
            }
            url
        };
        Ok(Endpoints {
            chat: with_path(&["chat", "completions"]),
            models: with_path(&["models"]),
            embeddings: with_path(&["embeddings"]),
            deployment,
        })
    }
}

fn default_headers(profile: &Profile, api_key: Option<&str>) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::USER_AGENT,
        HeaderValue::from_static(super::USER_AGENT),
    );
    if let Some(key) = api_key {
        let (name, value) = quirks::auth_header(profile.kind, key);
        let value = sensitive_header_value(name.as_str(), &value)?;
        headers.insert(name, value);
    }
    for (name, value) in &profile.headers {
        let header_name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| ProviderError::InvalidHeader {
                name: name.clone(),
                reason: "not a valid header name".to_owned(),
            })?;
        headers.insert(header_name, sensitive_header_value(name, value)?);
    }
    Ok(headers)
}

/// Marked sensitive so that no debug output of a request shows it; the error never quotes the
/// value, which may be a key.
fn sensitive_header_value(name: &str, value: &str) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| ProviderError::InvalidHeader {
        name: name.to_owned(),
        reason: "the value holds characters a header cannot carry".to_owned(),
    })?;
    value.set_sensitive(true);
    Ok(value)
}

fn provider_error_text(text: &str) -> String {
    if text.trim().is_empty() {
        return "(empty body)".to_owned();
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) => sse::error_message(&value),
        Err(_) => sse::excerpt(text, sse::EXCERPT_CHARS),
    }
}

fn stream_error(error: EventStreamError<reqwest::Error>) -> ProviderError {
    match error {
        EventStreamError::Transport(error) => ProviderError::Stream(format!(
            "the connection broke mid-answer: {}",
            error_chain(&error.without_url())
        )),
        EventStreamError::Utf8(error) => {
            ProviderError::Protocol(format!("the stream is not UTF-8: {error}"))
        }
        EventStreamError::Parser(error) => {
            ProviderError::Protocol(format!("the stream is not SSE: {error}"))
        }
    }
}

/// reqwest's top-level messages are generic ("error sending request"); the cause is in the chain.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    /// [`Provider::stream`] seen as text only: what a test of the text path needs.
    async fn complete_text(
        provider: &Provider,
        request: ChatRequest<'_>,
        cancel: &CancellationToken,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<Completion, ProviderError> {
        let mut on_event = |event| {
            if let StreamEvent::Delta(delta) = event {
                on_delta(delta);
            }
        };
        provider.stream(request, cancel, &mut on_event).await
    }

    use std::collections::VecDeque;
    use std::io;
    use std::sync::Mutex;
    use std::time::Instant;

    use axum::body::Body;
    use axum::extract::State;
    use axum::http::{HeaderMap as AxumHeaderMap, Method, StatusCode, Uri};
    use axum::response::Response;
    use cwcode_protocol::{ToolCall, Usage};
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::provider::AssistantMessage;
    use crate::provider::config::profile_from_json;

    #[derive(Clone)]
    enum Step {
        Send(&'static str),
        Pause(Duration),
        Hang,
        Abort,
    }

    /// One scripted answer of the fake server.
    #[derive(Clone)]
    struct Reply {
        status: StatusCode,
        headers: Vec<(&'static str, &'static str)>,
        steps: Vec<Step>,
    }

    impl Reply {
        fn ok(steps: Vec<Step>) -> Reply {
            Reply {
                status: StatusCode::OK,
                headers: Vec::new(),
                steps,
            }
        }

        #[allow(clippy::unwrap_used)]
        fn status(status: u16, body: &'static str) -> Reply {
            Reply {
                status: StatusCode::from_u16(status).unwrap(),
                headers: Vec::new(),
                steps: vec![Step::Send(body)],
            }
        }

        fn header(mut self, name: &'static str, value: &'static str) -> Reply {
            self.headers.push((name, value));
            self
        }
    }

    struct Recorded {
        method: Method,
        /// Path and query.
        target: String,
        headers: AxumHeaderMap,
        body: Vec<u8>,
    }

    impl Recorded {
        #[allow(clippy::unwrap_used)]
        fn header(&self, name: &str) -> Option<String> {
            self.headers
                .get(name)
                .map(|value| value.to_str().unwrap().to_owned())
        }

        #[allow(clippy::unwrap_used)]
        fn json(&self) -> Value {
            serde_json::from_slice(&self.body).unwrap()
        }
    }

    struct FakeState {
        /// Served in order; the last one answers every later request too.
        replies: Mutex<VecDeque<Reply>>,
        requests: Mutex<Vec<Recorded>>,
    }

    impl FakeState {
        #[allow(clippy::unwrap_used)]
        fn posts(&self) -> Vec<Recorded> {
            let requests = self.requests.lock().unwrap();
            requests
                .iter()
                .filter(|request| request.method == Method::POST)
                .map(|request| Recorded {
                    method: request.method.clone(),
                    target: request.target.clone(),
                    headers: request.headers.clone(),
                    body: request.body.clone(),
                })
                .collect()
        }

        #[allow(clippy::unwrap_used)]
        fn count(&self, method: Method) -> usize {
            let requests = self.requests.lock().unwrap();
            requests
                .iter()
                .filter(|request| request.method == method)
                .count()
        }
    }

    /// An answer to `GET …/models` as vLLM gives it.
    const VLLM_MODELS: &str = r#"{"object":"list","data":[{"id":"Qwen/Qwen3.6-27B","object":"model","created":1764460800,"owned_by":"vllm","root":"Qwen/Qwen3.6-27B","parent":null,"max_model_len":262144,"permission":[]}]}"#;

    /// Serves `replies` on 127.0.0.1 to every POST, whatever its path, and vLLM's model list
    /// to every GET; records each request.
    #[allow(clippy::unwrap_used)]
    async fn serve(replies: Vec<Reply>) -> (String, Arc<FakeState>) {
        let state = Arc::new(FakeState {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{address}/v1/"), state)
    }

    async fn fake_server(status: StatusCode, steps: Vec<Step>) -> (String, Arc<FakeState>) {
        serve(vec![Reply {
            status,
            headers: Vec::new(),
            steps,
        }])
        .await
    }

    #[allow(clippy::unwrap_used)]
    async fn answer(
        State(state): State<Arc<FakeState>>,
        method: Method,
        uri: Uri,
        headers: AxumHeaderMap,
        body: axum::body::Bytes,
    ) -> Response {
        let target = uri
            .path_and_query()
            .map_or(uri.path().to_owned(), |target| target.to_string());
        state.requests.lock().unwrap().push(Recorded {
            method: method.clone(),
            target,
            headers,
            body: body.to_vec(),
        });
        if method == Method::GET {
            return Response::new(Body::from(VLLM_MODELS));
        }
        let reply = {
            let mut replies = state.replies.lock().unwrap();
            if replies.len() > 1 {
                replies.pop_front()
            } else {
                replies.front().cloned()
            }
        }
        .unwrap();
        let stream = futures::stream::unfold(reply.steps.into_iter(), |mut steps| async move {
            loop {
                match steps.next()? {
                    Step::Send(text) => {
                        return Some((Ok(Bytes::from_static(text.as_bytes())), steps));
                    }
                    Step::Pause(duration) => tokio::time::sleep(duration).await,
                    Step::Hang => std::future::pending::<()>().await,
                    Step::Abort => return Some((Err(io::Error::other("cut")), steps)),
                }
            }
        });
        let mut response = Response::builder()
            .status(reply.status)
            .header("content-type", "text/event-stream");
        for (name, value) in reply.headers {
            response = response.header(name, value);
        }
        response.body(Body::from_stream(stream)).unwrap()
    }

    /// Retries as the default policy does, in milliseconds.
    const FAST_RETRIES: RetryPolicy = RetryPolicy {
        max_retries: 2,
        first_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(200),
    };

    #[allow(clippy::unwrap_used)]
    fn profile(settings: Value) -> Profile {
        let mut profile = json!({"base_url": "http://127.0.0.1:9/v1", "model": "test-model"});
        profile
            .as_object_mut()
            .unwrap()
            .extend(settings.as_object().unwrap().clone());
        profile_from_json("test", profile)
    }

    #[allow(clippy::unwrap_used)]
    fn provider(settings: Value) -> Provider {
        Provider::new("test", &profile(settings))
            .unwrap()
            .with_retry_policy(FAST_RETRIES)
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::System {
                content: "You are terse.".into(),
            },
            Message::User {
                content: "List the files.".into(),
            },
        ]
    }

    async fn stream(
        provider: &Provider,
        cancel: &CancellationToken,
    ) -> (Result<Completion, ProviderError>, Vec<StreamEvent>) {
        let messages = conversation();
        let request = ChatRequest {
            messages: &messages,
            tools: &[],
        };
        let mut events = Vec::new();
        let mut on_event = |event| events.push(event);
        let result = provider.stream(request, cancel, &mut on_event).await;
        (result, events)
    }

    async fn complete(
        provider: &Provider,
        cancel: &CancellationToken,
    ) -> (Result<Completion, ProviderError>, Vec<StreamDelta>) {
        let messages = conversation();
        let request = ChatRequest {
            messages: &messages,
            tools: &[],
        };
        let mut deltas = Vec::new();
        let mut on_delta = |delta| deltas.push(delta);
        let result = complete_text(provider, request, cancel, &mut on_delta).await;
        (result, deltas)
    }

    const FIRST_CHUNK: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n";
    const WHOLE_ANSWER: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello there.\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn streams_a_whole_answer_over_http() {
        let steps = vec![
            Step::Send(": keep-alive\n\n"),
            Step::Send(
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"Look",
            ),
            Step::Pause(Duration::from_millis(20)),
            Step::Send(
                " first.\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Listing\"}}]}\n\n",
            ),
            Step::Send(": keep-alive\n\n"),
            Step::Send("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" now.\"}}]}\n\n"),
            Step::Send(
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
            ),
            Step::Send(
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\".\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            ),
            Step::Send(
                "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\n",
            ),
            Step::Send("data: [DONE]\n\n"),
        ];
        let (base_url, state) = fake_server(StatusCode::OK, steps).await;
        let provider = provider(json!({
            "base_url": base_url, "api_key": "sk-test", "headers": {"x-team": "blue"}
        }));
        let (result, deltas) = complete(&provider, &CancellationToken::new()).await;

        assert_eq!(
            deltas,
            [
                StreamDelta::Reasoning("Look first.".into()),
                StreamDelta::Content("Listing".into()),
                StreamDelta::Content(" now.".into()),
            ]
        );
        assert_eq!(
            result.unwrap(),
            Completion {
                message: AssistantMessage {
                    content: "Listing now.".into(),
                    reasoning: Some("Look first.".into()),
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "ls".into(),
                        arguments: r#"{"path":"."}"#.into()
                    }],
                },
                usage: Some(Usage {
                    prompt_tokens: 50,
                    completion_tokens: 9,
                    cached_tokens: 32
                }),
                finish_reason: Some("tool_calls".into()),
            }
        );

        let requests = state.posts();
        let [request] = requests.as_slice() else {
            panic!("expected one request, got {}", requests.len());
        };
        assert_eq!(request.target, "/v1/chat/completions");
        assert_eq!(request.header("authorization").unwrap(), "Bearer sk-test");
        assert_eq!(
            request.header("user-agent").unwrap(),
            concat!("cwcode/", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(request.header("x-team").unwrap(), "blue");
        assert_eq!(request.header("content-type").unwrap(), "application/json");
        assert_eq!(request.header("accept").unwrap(), "text/event-stream");
        let messages = conversation();
        let expected_body = provider.request_body(ChatRequest {
            messages: &messages,
            tools: &[],
        });
        assert_eq!(request.body, expected_body);
    }

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn a_keyless_profile_sends_no_authorization_and_azure_sends_api_key() {
        let (base_url, state) = fake_server(StatusCode::OK, vec![Step::Send(WHOLE_ANSWER)]).await;
        let keyless = provider(json!({"base_url": base_url}));
        let azure = provider(json!({"base_url": base_url, "kind": "azure", "api_key": "az-key"}));
        let cancel = CancellationToken::new();
        complete(&keyless, &cancel).await.0.unwrap();
        complete(&azure, &cancel).await.0.unwrap();

        let requests = state.posts();
        assert_eq!(requests[0].header("authorization"), None);
        assert_eq!(requests[0].header("api-key"), None);
        assert_eq!(requests[1].header("api-key").unwrap(), "az-key");
        assert_eq!(requests[1].header("authorization"), None);
    }

    // Faults.

    #[tokio::test]
    async fn a_non_retryable_error_status_carries_the_provider_text_without_the_key() {
        let (base_url, state) = serve(vec![Reply::status(
            404,
            "{\"error\":{\"message\":\"Model not found for key sk-test\",\"type\":\"invalid_request_error\"}}",
        )])
        .await;
        let provider = provider(json!({"base_url": base_url, "api_key": "sk-test"}));
        assert!(!format!("{provider:?}").contains("sk-test"));
        let (result, deltas) = complete(&provider, &CancellationToken::new()).await;
        assert!(deltas.is_empty());
        let Err(ProviderError::Status {
            status, body, url, ..
        }) = &result
        else {
            panic!("expected a status error, got {result:?}");
        };
        assert_eq!(*status, 404);
        assert_eq!(body, "Model not found for key [redacted]");
        assert!(url.ends_with("/v1/chat/completions"), "{url}");
        let text = result.unwrap_err().to_string();
        assert!(
            text.contains("Check the profile's base_url and model"),
            "{text}"
        );
        assert_eq!(state.count(Method::POST), 1, "a 404 is not retried");
    }

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn a_429_then_success_is_retried_honouring_retry_after() {
        let (base_url, state) = serve(vec![
            Reply::status(429, "{\"error\":{\"message\":\"Rate limit reached\"}}")
                .header("retry-after", "0"),
            Reply::status(429, "{\"error\":{\"message\":\"Rate limit reached\"}}")
                .header("retry-after-ms", "150"),
            Reply::ok(vec![Step::Send(WHOLE_ANSWER)]),
        ])
        .await;
        let provider = provider(json!({"base_url": base_url}));
        let started = Instant::now();
        let (result, events) = stream(&provider, &CancellationToken::new()).await;
        assert_eq!(result.unwrap().message.content, "Hello there.");
        assert!(
            started.elapsed() >= Duration::from_millis(150),
            "retry-after-ms was not honoured: {:?}",
            started.elapsed()
        );
        assert_eq!(state.count(Method::POST), 3);
        // Nothing had been shown, so there is nothing to restart; each retry is announced with
        // the wait the provider asked for.
        let [first, second, answer] = events.as_slice() else {
            panic!("{events:?}");
        };
        assert!(
            matches!(first, StreamEvent::Retrying { attempt: 2, delay, .. } if delay.is_zero()),
            "{first:?}"
        );
        assert!(
            matches!(second, StreamEvent::Retrying { attempt: 3, delay, reason, .. }
                if *delay == Duration::from_millis(150) && reason.contains("Rate limit reached")),
            "{second:?}"
        );
        assert_eq!(
            answer,
            &StreamEvent::Delta(StreamDelta::Content("Hello there.".into()))
        );
        let bodies: Vec<Vec<u8>> = state.posts().into_iter().map(|post| post.body).collect();
        assert!(bodies.windows(2).all(|pair| pair[0] == pair[1]));
    }

    #[tokio::test]
    async fn a_retry_after_beyond_the_bound_is_not_waited_for() {
        let (base_url, state) = serve(vec![
            Reply::status(429, "{\"error\":{\"message\":\"Try again in an hour\"}}")
                .header("retry-after", "3600"),
        ])
        .await;
        let provider = provider(json!({"base_url": base_url}));
        let started = Instant::now();
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            matches!(&result, Err(ProviderError::GaveUp { attempts: 1, last })
                if matches!(**last, ProviderError::Status { status: 429, .. })),
            "{result:?}"
        );
        assert_eq!(state.count(Method::POST), 1);
    }

    #[tokio::test]
    async fn persistent_5xx_gives_up_with_status_text_and_advice() {
        let (base_url, state) = serve(vec![Reply::status(
            503,
            "{\"error\":{\"message\":\"Server overloaded, please try again later.\",\"type\":\"server_error\"}}",
        )])
        .await;
        let provider = provider(json!({"base_url": base_url}));
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        assert_eq!(state.count(Method::POST), 3, "one attempt and two retries");
        let Err(error @ ProviderError::GaveUp { attempts: 3, .. }) = result else {
            panic!("{result:?}");
        };
        let text = error.to_string();
        for needle in [
            "HTTP 503",
            "Server overloaded, please try again later",
            "send again in a few minutes, or switch to another profile",
            "gave up after 3 attempts",
        ] {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
        assert!(!text.contains(".."), "{text}");
    }

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn an_unreachable_server_is_retried_then_a_connect_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let provider = provider(json!({"base_url": format!("http://{address}/v1")}));
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        let Err(error @ ProviderError::GaveUp { attempts: 3, .. }) = result else {
            panic!("{result:?}");
        };
        let ProviderError::GaveUp { last, .. } = &error else {
            unreachable!();
        };
        assert!(
            matches!(&**last, ProviderError::Connect { url, .. } if url.contains(&address.to_string())),
            "{last:?}"
        );
        assert!(
            error
                .to_string()
                .contains("Check the network and the profile's base_url"),
            "{error}"
        );
    }

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn a_connection_cut_mid_answer_restarts_and_the_retry_answers() {
        let (base_url, state) = serve(vec![
            Reply::ok(vec![
                Step::Send(FIRST_CHUNK),
                // Lets the server flush the headers and the first chunk before it breaks off.
                Step::Pause(Duration::from_millis(50)),
                Step::Abort,
            ]),
            Reply::ok(vec![Step::Send(WHOLE_ANSWER)]),
        ])
        .await;
        let provider = provider(json!({"base_url": base_url}));
        let (result, events) = stream(&provider, &CancellationToken::new()).await;
        let completion = result.unwrap();
        assert_eq!(
            completion.message.content, "Hello there.",
            "the partial answer is dropped"
        );
        let [first, restart, retrying, second] = events.as_slice() else {
            panic!("{events:?}");
        };
        assert!(
            matches!(retrying, StreamEvent::Retrying { attempt: 2, max_attempts: 3, reason, .. }
                if reason.contains("connection broke")),
            "{retrying:?}"
        );
        assert_eq!(
            first,
            &StreamEvent::Delta(StreamDelta::Content("Hi".into()))
        );
        assert!(
            matches!(restart, StreamEvent::Restart { retry: 1, reason } if reason.contains("connection broke")),
            "{restart:?}"
        );
        assert_eq!(
            second,
            &StreamEvent::Delta(StreamDelta::Content("Hello there.".into()))
        );
        assert_eq!(state.count(Method::POST), 2);
    }

    #[tokio::test]
    async fn a_stream_that_ends_without_finishing_restarts_then_gives_up() {
        let (base_url, _) = fake_server(StatusCode::OK, vec![Step::Send(FIRST_CHUNK)]).await;
        let provider = provider(json!({"base_url": base_url}));
        let (result, events) = stream(&provider, &CancellationToken::new()).await;
        assert!(
            matches!(&result, Err(ProviderError::GaveUp { last, .. })
                if matches!(&**last, ProviderError::Stream(text) if text.contains("no finish_reason and no [DONE]"))),
            "{result:?}"
        );
        let restarts = events
            .iter()
            .filter(|event| matches!(event, StreamEvent::Restart { .. }))
            .count();
        assert_eq!(restarts, 2, "{events:?}");
        assert_eq!(
            events.len(),
            7,
            "three partial answers, two restarts, two retries"
        );
    }

    #[tokio::test]
    async fn an_empty_200_body_is_an_error_naming_the_provider_and_not_retried() {
        let (base_url, state) = fake_server(StatusCode::OK, Vec::new()).await;
        let (result, _) = complete(
            &provider(json!({"base_url": base_url})),
            &CancellationToken::new(),
        )
        .await;
        assert!(
            matches!(&result, Err(ProviderError::EmptyAnswer { .. })),
            "{result:?}"
        );
        let text = result.unwrap_err().to_string();
        assert!(text.contains("profile `test`"), "{text}");
        assert!(text.contains("empty body"), "{text}");
        assert!(!text.contains("network"), "{text}");
        assert_eq!(state.count(Method::POST), 1, "not retried");
    }

    #[tokio::test]
    async fn a_400_is_not_retried_and_names_the_profile_but_a_408_is_retried() {
        let (base_url, state) = serve(vec![Reply::status(
            400,
            "{\"error\":{\"message\":\"bad field\"}}",
        )])
        .await;
        let (result, _) = complete(
            &provider(json!({"base_url": base_url})),
            &CancellationToken::new(),
        )
        .await;
        let text = result.unwrap_err().to_string();
        assert!(text.starts_with("profile `test`:"), "{text}");
        assert!(text.contains("bad field"), "{text}");
        assert!(!text.contains("network"), "{text}");
        assert_eq!(state.count(Method::POST), 1, "a 400 is not retried");

        assert!(
            ProviderError::Status {
                profile: "p".into(),
                url: "u".into(),
                status: 408,
                body: String::new(),
            }
            .is_retryable()
        );
    }

    #[tokio::test]
    async fn a_200_that_is_not_sse_quotes_what_came_and_is_not_retried() {
        let (base_url, state) = fake_server(
            StatusCode::OK,
            vec![Step::Send(
                "{\"object\":\"chat.completion\",\"choices\":[]}",
            )],
        )
        .await;
        let (result, _) = complete(
            &provider(json!({"base_url": base_url})),
            &CancellationToken::new(),
        )
        .await;
        assert!(
            matches!(&result, Err(ProviderError::Protocol(text)) if text.contains("chat.completion")),
            "{result:?}"
        );
        assert_eq!(state.count(Method::POST), 1);
    }

    #[tokio::test]
    async fn cancel_mid_stream_ends_the_call_promptly() {
        let (base_url, _) =
            fake_server(StatusCode::OK, vec![Step::Send(FIRST_CHUNK), Step::Hang]).await;
        let provider = provider(json!({"base_url": base_url}));
        let messages = conversation();
        let request = ChatRequest {
            messages: &messages,
            tools: &[],
        };
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        let mut on_delta = move |_| canceller.cancel();
        let started = Instant::now();
        let result = tokio::time::timeout(
            Duration::from_secs(5),
            complete_text(&provider, request, &cancel, &mut on_delta),
        )
        .await;
        assert!(
            matches!(result, Ok(Err(ProviderError::Cancelled))),
            "{result:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn cancel_during_a_backoff_wait_ends_the_call_promptly() {
        let (base_url, _) = serve(vec![
            Reply::status(503, "{\"error\":{\"message\":\"busy\"}}").header("retry-after", "20"),
        ])
        .await;
        let provider = provider(json!({"base_url": base_url})).with_retry_policy(RetryPolicy {
            max_retries: 1,
            first_delay: Duration::from_secs(20),
            max_delay: Duration::from_secs(30),
        });
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            canceller.cancel();
        });
        let started = Instant::now();
        let (result, _) = complete(&provider, &cancel).await;
        assert!(
            matches!(result, Err(ProviderError::Cancelled)),
            "{result:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn keep_alive_comments_do_not_hold_off_the_idle_timeout() {
        let mut steps = vec![Step::Send(FIRST_CHUNK)];
        for _ in 0..20 {
            steps.push(Step::Pause(Duration::from_millis(50)));
            steps.push(Step::Send(": keep-alive\n\n"));
        }
        steps.push(Step::Hang);
        let (base_url, _) = fake_server(StatusCode::OK, steps).await;
        let provider = provider(json!({"base_url": base_url}))
            .with_idle_timeout(Duration::from_millis(300))
            .with_retry_policy(RetryPolicy {
                max_retries: 0,
                ..FAST_RETRIES
            });
        let started = Instant::now();
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        assert!(
            matches!(&result, Err(ProviderError::GaveUp { last, .. }) if matches!(**last, ProviderError::IdleTimeout(_))),
            "{result:?}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "the comments kept the stream alive for {:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn every_retry_is_announced_with_its_number_wait_and_reason() {
        let busy = || Reply::status(503, "{\"error\":{\"message\":\"busy\"}}");
        let (base_url, _) = serve(vec![busy(), busy(), busy()]).await;
        let provider = provider(json!({"base_url": base_url}));
        let (result, events) = stream(&provider, &CancellationToken::new()).await;
        assert!(
            matches!(&result, Err(ProviderError::GaveUp { attempts: 3, .. })),
            "{result:?}"
        );
        let announced: Vec<(u32, u32)> = events
            .iter()
            .map(|event| match event {
                StreamEvent::Retrying {
                    attempt,
                    max_attempts,
                    delay,
                    reason,
                } => {
                    assert!(reason.contains("HTTP 503: busy"), "{reason}");
                    assert!(*delay <= FAST_RETRIES.max_delay, "{delay:?}");
                    (*attempt, *max_attempts)
                }
                other => panic!("only retries are announced: {other:?}"),
            })
            .collect();
        assert_eq!(announced, [(2, 3), (3, 3)]);
    }

    #[tokio::test]
    async fn a_provider_that_drips_forever_is_cut_by_the_request_timeout() {
        let mut steps = vec![Step::Send(FIRST_CHUNK)];
        for _ in 0..100 {
            steps.push(Step::Pause(Duration::from_millis(50)));
            steps.push(Step::Send(
                "data: {\"choices\":[{\"delta\":{\"content\":\".\"}}]}\n\n",
            ));
        }
        let (base_url, _) = fake_server(StatusCode::OK, steps).await;
        let provider = provider(json!({"base_url": base_url}))
            .with_idle_timeout(Duration::from_millis(300))
            .with_request_timeout(Duration::from_millis(600));
        let started = Instant::now();
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        assert!(
            matches!(&result, Err(ProviderError::RequestTimeout(_))),
            "{result:?}"
        );
        let error = result.err().unwrap().to_string();
        assert!(error.contains("request_timeout_secs"), "{error}");
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn the_profile_sets_the_timeouts_and_the_attempts() {
        let provider = Provider::with_env(
            "p",
            &profile(
                json!({"base_url": "http://127.0.0.1:1/v1", "idle_timeout_secs": 7,
                            "request_timeout_secs": 90, "max_attempts": 2}),
            ),
            &|_| None,
        )
        .unwrap();
        assert_eq!(provider.idle_timeout, Duration::from_secs(7));
        assert_eq!(provider.request_timeout, Duration::from_secs(90));
        assert_eq!(provider.retry.max_retries, 1);
        let defaults = Provider::with_env(
            "p",
            &profile(json!({"base_url": "http://127.0.0.1:1/v1"})),
            &|_| None,
        )
        .unwrap();
        assert_eq!(defaults.idle_timeout, Duration::from_secs(60));
        assert_eq!(defaults.request_timeout, Duration::from_secs(600));
        assert_eq!(defaults.retry, RetryPolicy::default());
    }

    #[tokio::test]
    async fn a_finished_answer_without_done_on_an_open_connection_is_kept() {
        let steps = vec![
            Step::Send(
                "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n",
            ),
            Step::Hang,
        ];
        let (base_url, _) = fake_server(StatusCode::OK, steps).await;
        let provider =
            provider(json!({"base_url": base_url})).with_idle_timeout(Duration::from_millis(200));
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        assert!(
            matches!(&result, Ok(completion) if completion.message.content == "x"),
            "{result:?}"
        );
    }

    /// DeepSeek's 401, as it sends it.
    const DEEPSEEK_401: &str = "{\"error\":{\"message\":\"Authentication Fails, Your api key: ****e-42 is invalid\",\"type\":\"authentication_error\",\"param\":null,\"code\":\"invalid_request_error\"}}";

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn a_401_names_the_profile_and_the_key_variable_but_never_the_key() {
        let (base_url, state) = serve(vec![Reply::status(401, DEEPSEEK_401)]).await;
        let profile = profile_from_json("deepseek-v4-pro", json!({"base_url": base_url}));
        let env =
            |variable: &str| (variable == "DEEPSEEK_API_KEY").then(|| "sk-live-e-42".to_owned());
        let provider = Provider::with_env("deepseek-v4-pro", &profile, &env)
            .unwrap()
            .with_retry_policy(FAST_RETRIES);
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        let Err(error @ ProviderError::Auth { .. }) = result else {
            panic!("{result:?}");
        };
        let text = error.to_string();
        for needle in [
            "`deepseek-v4-pro`",
            "the environment variable DEEPSEEK_API_KEY",
            "HTTP 401",
            "Authentication Fails",
            "cwcode-cli config set-key deepseek-v4-pro",
        ] {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
        assert!(!text.contains("sk-live"), "{text}");
        assert_eq!(state.count(Method::POST), 1, "a refused key is not retried");
    }

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn a_403_on_a_key_from_config_json_says_so() {
        let (base_url, _) = serve(vec![Reply::status(
            403,
            "{\"error\":{\"message\":\"Forbidden\"}}",
        )])
        .await;
        let provider = provider(json!({"base_url": base_url, "api_key": "sk-file"}));
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        let text = result.unwrap_err().to_string();
        assert!(
            text.contains("`test`") && text.contains("\"api_key\" in config.json"),
            "{text}"
        );
        assert!(!text.contains("sk-file"), "{text}");
    }

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn kimi_refusing_the_agent_is_not_blamed_on_the_key() {
        let (base_url, _) = serve(vec![Reply::status(
            403,
            "{\"error\":{\"message\":\"Kimi For Coding is currently only available for Coding Agents such as Kimi CLI, Claude Code, Roo Code, Kilo Code, etc.\",\"type\":\"access_terminated_error\"}}",
        )])
        .await;
        let profile = profile_from_json(
            "kimi-for-coding",
            json!({"base_url": base_url, "api_key": "sk-kimi"}),
        );
        let provider = Provider::new("kimi-for-coding", &profile).unwrap();
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        let Err(error @ ProviderError::AccessRefused { .. }) = result else {
            panic!("{result:?}");
        };
        let text = error.to_string();
        assert!(text.contains("only available for Coding Agents"), "{text}");
        assert!(text.contains("honestly as cwcode/"), "{text}");
        assert!(!text.contains("set-key"), "{text}");
    }

    /// DeepSeek's answer to a thinking-mode history without its reasoning, byte for byte.
    const DEEPSEEK_REASONING_400: &str = "{\"error\":{\"message\":\"The `reasoning_content` in the thinking mode must be passed back to the API.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"invalid_request_error\"}}";

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn the_reasoning_400_is_its_own_error_and_keeping_reasoning_resends_it() {
        let (base_url, state) = serve(vec![
            Reply::status(400, DEEPSEEK_REASONING_400),
            Reply::ok(vec![Step::Send(WHOLE_ANSWER)]),
        ])
        .await;
        let provider = provider(json!({"base_url": base_url}));
        let history = sample_history();
        let tools = sample_tools();
        let request = ChatRequest {
            messages: &history,
            tools: &tools,
        };
        let cancel = CancellationToken::new();
        let result = provider.stream(request, &cancel, &mut |_| {}).await;
        let Err(error @ ProviderError::ReasoningMustBeKept { .. }) = result else {
            panic!("{result:?}");
        };
        assert!(error.to_string().contains("must be passed back"), "{error}");
        assert_eq!(state.count(Method::POST), 1, "it is not retried as is");

        let keeping = provider.keeping_reasoning();
        keeping.stream(request, &cancel, &mut |_| {}).await.unwrap();
        let posts = state.posts();
        assert!(
            !posts[0].json()["messages"][2]
                .as_object()
                .unwrap()
                .contains_key("reasoning_content")
        );
        assert_eq!(posts[1].json()["messages"][2]["reasoning_content"], "r");
        assert_eq!(posts[1].json()["messages"][4]["reasoning_content"], "");
        assert_eq!(
            keeping.request_body(request),
            posts[1].body,
            "request_body is what is sent"
        );
    }

    // Configuration problems found when the client is built.

    #[test]
    fn a_missing_key_variable_is_named_with_set_key() {
        let profile = profile(json!({"api_key_env": "CWCODE_TEST_KEY_THAT_IS_NEVER_SET"}));
        let Err(error) = Provider::new("remote", &profile) else {
            panic!("expected a missing key");
        };
        let text = error.to_string();
        assert!(matches!(error, ProviderError::MissingKey { .. }));
        assert!(
            text.contains("`remote`")
                && text.contains("CWCODE_TEST_KEY_THAT_IS_NEVER_SET")
                && text.contains("cwcode-cli config set-key remote")
                && text.contains("config.json"),
            "{text}"
        );
    }

    #[test]
    fn bad_urls_and_headers_are_refused() {
        for base_url in ["not a url", "ftp://example.invalid/v1"] {
            let result = Provider::new("p", &profile(json!({"base_url": base_url})));
            assert!(
                matches!(result, Err(ProviderError::InvalidUrl { .. })),
                "{base_url}"
            );
        }
        let result = Provider::new("p", &profile(json!({"headers": {"bad name": "x"}})));
        assert!(matches!(result, Err(ProviderError::InvalidHeader { .. })));
        let result = Provider::new("p", &profile(json!({"api_key": "sk-line\nbreak"})));
        let Err(error) = result else {
            panic!("a key with a line break cannot be a header");
        };
        assert!(!error.to_string().contains("sk-line"), "{error}");
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_endpoint_is_base_url_plus_chat_completions() {
        for (base_url, endpoint, models) in [
            (
                "http://127.0.0.1:8000/v1",
                "http://127.0.0.1:8000/v1/chat/completions",
                "http://127.0.0.1:8000/v1/models",
            ),
            (
                "http://127.0.0.1:8000/v1/",
                "http://127.0.0.1:8000/v1/chat/completions",
                "http://127.0.0.1:8000/v1/models",
            ),
            (
                "https://api.example.invalid",
                "https://api.example.invalid/chat/completions",
                "https://api.example.invalid/models",
            ),
            (
                "https://api.example.invalid/v1/chat/completions",
                "https://api.example.invalid/v1/chat/completions",
                "https://api.example.invalid/v1/models",
            ),
            (
                "https://r.example.invalid/openai/deployments/d?api-version=2024-10-21",
                "https://r.example.invalid/openai/deployments/d/chat/completions?api-version=2024-10-21",
                "https://r.example.invalid/openai/deployments/d/models?api-version=2024-10-21",
            ),
        ] {
            let endpoints = Endpoints::new(base_url, ProviderKind::Openai).unwrap();
            assert_eq!(endpoints.chat.as_str(), endpoint);
            assert_eq!(endpoints.models.as_str(), models);
        }
    }

    // The built-in profiles, against what each provider documents.

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn every_key(variable: &str) -> Option<String> {
        Some(format!("key-of-{variable}"))
    }

    #[allow(clippy::unwrap_used)]
    fn built_in(name: &str, overrides: Value) -> Provider {
        let profile = profile_from_json(name, overrides);
        Provider::with_env(name, &profile, &every_key)
            .unwrap()
            .with_retry_policy(FAST_RETRIES)
    }

    /// Sends the sample history with tools through a built-in profile pointed at the fake
    /// server, and returns what arrived.
    #[allow(clippy::unwrap_used)]
    async fn sent_by(name: &str, overrides: Value) -> (Recorded, Provider) {
        let (base_url, state) = fake_server(StatusCode::OK, vec![Step::Send(WHOLE_ANSWER)]).await;
        let mut overrides = overrides;
        overrides["base_url"] = json!(base_url);
        let provider = built_in(name, overrides);
        let history = sample_history();
        let tools = sample_tools();
        let request = ChatRequest {
            messages: &history,
            tools: &tools,
        };
        provider
            .stream(request, &CancellationToken::new(), &mut |_| {})
            .await
            .unwrap();
        let mut posts = state.posts();
        assert_eq!(posts.len(), 1);
        (posts.remove(0), provider)
    }

    #[allow(clippy::unwrap_used)]
    fn assert_common_shape(request: &Recorded, model: &str) {
        let body = request.json();
        assert_eq!(request.target, "/v1/chat/completions");
        assert_eq!(
            request.header("user-agent").unwrap(),
            concat!("cwcode/", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(body["model"], model);
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["name"], "ls");
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "s"})
        );
        // Tool calls go back with "" rather than null content.
        assert_eq!(body["messages"][2]["content"], "");
        assert_eq!(body["messages"][2]["tool_calls"][0]["id"], "c1");
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "out"})
        );
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn built_in_endpoints_are_the_documented_ones() {
        for (name, endpoint) in [
            (
                "deepseek-v4-pro",
                "https://api.deepseek.com/chat/completions",
            ),
            (
                "qwen3.6-27b",
                "https://dashscope-intl.aliyuncs.com/compatible-mode/v1/chat/completions",
            ),
            (
                "kimi-for-coding",
                "https://api.kimi.com/coding/v1/chat/completions",
            ),
            ("local-vllm", "http://127.0.0.1:8000/v1/chat/completions"),
        ] {
            let provider = built_in(name, json!({}));
            assert_eq!(provider.endpoint.as_str(), endpoint, "{name}");
        }
        let azure = built_in(
            "azure-openai",
            json!({"base_url": "https://my-res.openai.azure.com/openai/v1", "model": "gpt-4o-prod"}),
        );
        assert_eq!(
            azure.endpoint.as_str(),
            "https://my-res.openai.azure.com/openai/v1/chat/completions"
        );
        assert_eq!(azure.model(), "gpt-4o-prod");
        let legacy = built_in(
            "azure-openai",
            json!({"base_url": "https://my-res.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"}),
        );
        assert_eq!(
            legacy.endpoint.as_str(),
            "https://my-res.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(legacy.model(), "gpt-4o");
        let unversioned = built_in(
            "azure-openai",
            json!({"base_url": "https://my-res.openai.azure.com/openai/deployments/gpt-4o"}),
        );
        assert_eq!(
            unversioned.endpoint.as_str(),
            "https://my-res.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
        );
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn built_ins_take_their_keys_from_their_variables() {
        for (name, variable) in [
            ("deepseek-v4-pro", "DEEPSEEK_API_KEY"),
            ("qwen3.6-27b", "DASHSCOPE_API_KEY"),
            ("kimi-for-coding", "KIMI_API_KEY"),
        ] {
            let provider = built_in(name, json!({}));
            assert_eq!(
                provider.key_source,
                KeySource::Env(variable.into()),
                "{name}"
            );
            assert_eq!(
                provider.api_key.as_deref(),
                Some(format!("key-of-{variable}").as_str())
            );
            let profile = profile_from_json(name, json!({}));
            let error = Provider::with_env(name, &profile, &no_env).unwrap_err();
            assert!(error.to_string().contains(variable), "{error}");
        }
        let local = Provider::with_env(
            "local-vllm",
            &profile_from_json("local-vllm", json!({})),
            &no_env,
        )
        .unwrap();
        assert_eq!(local.key_source, KeySource::None);
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn azure_without_its_resource_or_deployment_says_what_to_set() {
        let profile = profile_from_json("azure-openai", json!({}));
        let error = Provider::with_env("azure-openai", &profile, &every_key)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("{resource}") && error.contains("profiles.azure-openai.base_url"),
            "{error}"
        );
        let profile = profile_from_json(
            "azure-openai",
            json!({"base_url": "https://my-res.openai.azure.com/openai/v1"}),
        );
        let error = Provider::with_env("azure-openai", &profile, &every_key)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("profiles.azure-openai.model") && error.contains("deployment"),
            "{error}"
        );
    }

    /// api-docs.deepseek.com: Bearer auth, model `deepseek-v4-pro`, reasoning_content passed
    /// back on assistant messages in thinking mode with tools, empty ones included.
    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn deepseek_request_shape() {
        let (request, _) = sent_by("deepseek-v4-pro", json!({})).await;
        assert_common_shape(&request, "deepseek-v4-pro");
        assert_eq!(
            request.header("authorization").unwrap(),
            "Bearer key-of-DEEPSEEK_API_KEY"
        );
        let body = request.json();
        assert_eq!(body["messages"][2]["reasoning_content"], "r");
        assert_eq!(body["messages"][4]["reasoning_content"], "");
        assert!(body.get("max_tokens").is_none());

        // Told to strip, it still keeps reasoning while tools are on offer.
        let stripping = built_in("deepseek-v4-pro", json!({"reasoning_history": "strip"}));
        let history = sample_history();
        let tools = sample_tools();
        let with_tools = String::from_utf8(stripping.request_body(ChatRequest {
            messages: &history,
            tools: &tools,
        }))
        .unwrap();
        assert!(
            with_tools.contains(r#""reasoning_content":"""#),
            "{with_tools}"
        );
        let without_tools = String::from_utf8(stripping.request_body(ChatRequest {
            messages: &history,
            tools: &[],
        }))
        .unwrap();
        assert!(
            !without_tools.contains("reasoning_content"),
            "{without_tools}"
        );
    }

    /// DashScope's compatible mode: Bearer auth, `stream_options.include_usage` for usage in
    /// the stream; reasoning is not sent back.
    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn qwen_request_shape() {
        let (request, _) = sent_by("qwen3.6-27b", json!({})).await;
        assert_common_shape(&request, "qwen3.6-27b");
        assert_eq!(
            request.header("authorization").unwrap(),
            "Bearer key-of-DASHSCOPE_API_KEY"
        );
        let body = request.json();
        assert!(
            !body["messages"][2]
                .as_object()
                .unwrap()
                .contains_key("reasoning_content")
        );
    }

    /// Azure's v1 API: the key in `api-key` and no Authorization, the deployment as model,
    /// `max_completion_tokens` rather than `max_tokens`.
    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn azure_request_shape() {
        let (base_url, state) = fake_server(StatusCode::OK, vec![Step::Send(WHOLE_ANSWER)]).await;
        let azure_base = base_url.replace("/v1/", "/openai/v1");
        let provider = built_in(
            "azure-openai",
            json!({"base_url": azure_base, "model": "gpt-4o-prod", "max_output_tokens": 2048}),
        );
        let history = sample_history();
        let tools = sample_tools();
        let request = ChatRequest {
            messages: &history,
            tools: &tools,
        };
        provider
            .stream(request, &CancellationToken::new(), &mut |_| {})
            .await
            .unwrap();
        let posts = state.posts();
        let request = &posts[0];
        assert_eq!(request.target, "/openai/v1/chat/completions");
        assert_eq!(
            request.header("api-key").unwrap(),
            "key-of-AZURE_OPENAI_API_KEY"
        );
        assert_eq!(request.header("authorization"), None);
        let body = request.json();
        assert_eq!(body["model"], "gpt-4o-prod");
        assert_eq!(body["max_completion_tokens"], 2048);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
    }

    /// A legacy deployment URL: the deployment in the path, `api-version` in the query.
    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn azure_legacy_request_shape() {
        let (base_url, state) = fake_server(StatusCode::OK, vec![Step::Send(WHOLE_ANSWER)]).await;
        let legacy = base_url.replace("/v1/", "/openai/deployments/gpt-4o");
        let provider = built_in("azure-openai", json!({"base_url": legacy}));
        complete(&provider, &CancellationToken::new())
            .await
            .0
            .unwrap();
        let posts = state.posts();
        assert_eq!(
            posts[0].target,
            "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(posts[0].json()["model"], "gpt-4o");
    }

    /// Kimi For Coding: Bearer auth, cwcode's own User-Agent beside the user's headers, an
    /// output budget set, reasoning kept.
    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn kimi_request_shape() {
        let (request, _) = sent_by(
            "kimi-for-coding",
            json!({"headers": {"X-Client-Note": "team"}}),
        )
        .await;
        assert_common_shape(&request, "kimi-for-coding");
        assert_eq!(
            request.header("authorization").unwrap(),
            "Bearer key-of-KIMI_API_KEY"
        );
        assert_eq!(request.header("x-client-note").unwrap(), "team");
        let body = request.json();
        assert_eq!(body["max_tokens"], 32_768);
        assert_eq!(body["messages"][2]["reasoning_content"], "r");
    }

    /// A local vLLM: no key, and the model is the first of `/v1/models`, asked for once, on
    /// first use.
    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn vllm_request_shape_with_the_served_model() {
        let (base_url, state) = fake_server(StatusCode::OK, vec![Step::Send(WHOLE_ANSWER)]).await;
        let provider = built_in("local-vllm", json!({"base_url": base_url}));
        assert_eq!(provider.model(), "");
        assert_eq!(provider.context_window(), None);
        assert_eq!(state.count(Method::GET), 0, "nothing is asked before use");
        complete(&provider, &CancellationToken::new())
            .await
            .0
            .unwrap();
        complete(&provider.clone(), &CancellationToken::new())
            .await
            .0
            .unwrap();
        assert_eq!(
            state.count(Method::GET),
            1,
            "the model list is fetched once"
        );
        let posts = state.posts();
        assert_eq!(posts.len(), 2);
        assert_eq!(posts[0].header("authorization"), None);
        assert_eq!(posts[0].json()["model"], "Qwen/Qwen3.6-27B");
        assert_eq!(provider.model(), "Qwen/Qwen3.6-27B");
        assert_eq!(provider.context_window(), Some(262_144));
        let requests = state.requests.lock().unwrap();
        assert_eq!(requests[0].target, "/v1/models");
    }

    #[test]
    fn a_profile_context_window_wins_over_the_servers() {
        let provider = built_in("local-vllm", json!({"context_window": 4096}));
        assert_eq!(provider.context_window(), Some(4096));
        assert_eq!(
            built_in("deepseek-v4-pro", json!({})).context_window(),
            Some(1_000_000)
        );
    }

    // The request body.

    fn sample_history() -> Vec<Message> {
        vec![
            Message::System {
                content: "s".into(),
            },
            Message::User {
                content: "u".into(),
            },
            Message::Assistant(AssistantMessage {
                content: String::new(),
                reasoning: Some("r".into()),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "ls".into(),
                    arguments: "{}".into(),
                }],
            }),
            Message::Tool {
                tool_call_id: "c1".into(),
                content: "out".into(),
            },
            Message::Assistant(AssistantMessage {
                content: "done".into(),
                reasoning: None,
                tool_calls: Vec::new(),
            }),
        ]
    }

    fn sample_tools() -> Vec<FunctionSpec> {
        vec![FunctionSpec {
            name: "ls".into(),
            description: "List".into(),
            // Keys in sorted order: the bytes match with and without `preserve_order`.
            parameters: json!({"properties": {}, "type": "object"}),
        }]
    }

    #[allow(clippy::unwrap_used)]
    fn body_text(provider: &Provider, messages: &[Message], tools: &[FunctionSpec]) -> String {
        String::from_utf8(provider.request_body(ChatRequest { messages, tools })).unwrap()
    }

    #[test]
    fn the_request_body_has_the_wire_shape_with_messages_last() {
        let provider = provider(json!({"max_output_tokens": 100}));
        assert_eq!(
            body_text(&provider, &sample_history(), &sample_tools()),
            concat!(
                r#"{"model":"test-model","#,
                r#""tools":[{"type":"function","function":{"name":"ls","description":"List","parameters":{"properties":{},"type":"object"}}}],"#,
                r#""stream":true,"stream_options":{"include_usage":true},"max_tokens":100,"#,
                r#""messages":[{"role":"system","content":"s"},{"role":"user","content":"u"},"#,
                r#"{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},"#,
                r#"{"role":"tool","tool_call_id":"c1","content":"out"},"#,
                r#"{"role":"assistant","content":"done"}]}"#,
            )
        );
    }

    #[test]
    fn kept_reasoning_is_replayed_even_when_empty() {
        let provider = provider(json!({"reasoning_history": "keep"}));
        let body = body_text(&provider, &sample_history(), &[]);
        assert!(!body.contains("\"tools\""), "{body}");
        assert!(
            body.contains(
                r#"{"role":"assistant","content":"","reasoning_content":"r","tool_calls":"#
            ),
            "{body}"
        );
        assert!(
            body.contains(r#"{"role":"assistant","content":"done","reasoning_content":""}"#),
            "{body}"
        );
        assert_eq!(
            body,
            body_text(
                &self::provider(json!({})).keeping_reasoning(),
                &sample_history(),
                &[]
            )
        );
    }

    #[test]
    fn request_extra_is_merged_before_the_messages_and_may_replace_defaults() {
        let provider = provider(json!({
            "max_output_tokens": 100,
            "request_extra": {"temperature": 0.2, "stream_options": null, "max_tokens": 5}
        }));
        let body = body_text(&provider, &conversation(), &[]);
        assert!(
            body.starts_with(r#"{"model":"test-model","stream":true,"#),
            "{body}"
        );
        assert!(body.contains(r#""temperature":0.2"#), "{body}");
        assert!(body.contains(r#""stream_options":null"#), "{body}");
        assert!(
            body.contains(r#""max_tokens":5,"#) && !body.contains("100"),
            "{body}"
        );
        assert_eq!(body.matches("stream_options").count(), 1);
        assert!(body.find("temperature") < body.find("\"messages\""));
    }

    #[test]
    fn the_same_request_gives_the_same_bytes() {
        let provider = provider(json!({"request_extra": {"top_p": 0.9, "seed": 1}}));
        let history = sample_history();
        let tools = sample_tools();
        assert_eq!(
            body_text(&provider, &history, &tools),
            body_text(&provider, &history.clone(), &tools.clone())
        );
    }

    fn any_message() -> impl Strategy<Value = Message> {
        let text = ".{0,12}";
        let call = (text, text, text).prop_map(|(id, name, arguments)| ToolCall {
            id,
            name,
            arguments,
        });
        prop_oneof![
            text.prop_map(|content| Message::System { content }),
            text.prop_map(|content| Message::User { content }),
            (
                text,
                proptest::option::of(text),
                proptest::collection::vec(call, 0..3)
            )
                .prop_map(|(content, reasoning, tool_calls)| Message::Assistant(
                    AssistantMessage {
                        content,
                        reasoning,
                        tool_calls
                    }
                )),
            (text, text).prop_map(|(tool_call_id, content)| Message::Tool {
                tool_call_id,
                content
            }),
        ]
    }

    /// SPEC §6: the only bytes that differ between consecutive requests are the new messages.
    #[test]
    fn a_longer_history_extends_the_previous_body() {
        for (kind, reasoning) in [
            ("openai", "strip"),
            ("openai", "keep"),
            ("deepseek", "strip"),
            ("azure", "keep"),
        ] {
            let provider = provider(json!({
                "kind": kind, "reasoning_history": reasoning, "max_output_tokens": 64,
                "request_extra": {"temperature": 0}
            }));
            let tools = sample_tools();
            proptest!(|(
                history in proptest::collection::vec(any_message(), 1..8),
                previous_len in 1usize..8,
            )| {
                let previous_len = previous_len.min(history.len());
                let previous = provider.request_body(ChatRequest {
                    messages: &history[..previous_len],
                    tools: &tools,
                });
                let next = provider.request_body(ChatRequest { messages: &history, tools: &tools });
                let previous_without_close = previous.strip_suffix(b"]}");
                prop_assert!(previous_without_close.is_some());
                prop_assert!(previous_without_close.is_some_and(|prefix| next.starts_with(prefix)));
                let shared = crate::provider::shared_prefix_len(&previous, &next);
                if previous_len < history.len() {
                    prop_assert_eq!(shared, previous.len() - 2);
                } else {
                    prop_assert_eq!(shared, previous.len());
                }
            });
        }
    }
}
