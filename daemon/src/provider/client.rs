//! The streaming HTTP client of one profile: it POSTs the conversation to `/chat/completions`,
//! reads the SSE answer as it arrives and hands back the accumulated completion, retrying the
//! faults that go away by themselves (SPEC §10).

mod embeddings;
mod endpoints;
mod errors;
mod wire;

use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::Url;
use reqwest::header;
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
use super::{ChatRequest, Completion, ProviderError, StreamDelta, StreamEvent};
use crate::util::error_chain;
use cwcode_protocol::Usage;
use endpoints::{Endpoints, default_headers};
use errors::{provider_error_text, stream_error};
use wire::{RequestBody, StreamOptions, WireMessage, WireTool};

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

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
