//! The streaming HTTP client of one profile: it POSTs the conversation to `/chat/completions`,
//! reads the SSE answer as it arrives and hands back the accumulated completion (SPEC §10).

use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::Url;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::profile::{Profile, ProviderKind, RESERVED_BODY_FIELDS, ReasoningHistory};
use super::sse::{self, ChunkAccumulator};
use super::{ChatRequest, Completion, FunctionSpec, Message, ProviderError, StreamDelta};

const USER_AGENT: &str = concat!("cwcode/", env!("CARGO_PKG_VERSION"));
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of a 200 body that is not an SSE stream is kept to quote in the error.
const BODY_START_BYTES: usize = 512;

/// The client for one profile. Cloning is cheap and shares the connection pool.
#[derive(Clone)]
pub struct Provider {
    profile_name: String,
    model: String,
    endpoint: Url,
    http: reqwest::Client,
    /// Kept only to scrub it from error text that a provider echoes back.
    api_key: Option<String>,
    reasoning_history: ReasoningHistory,
    max_output_tokens: Option<u64>,
    request_extra: Map<String, Value>,
    idle_timeout: Duration,
}

impl Provider {
    /// How long a stream may send no data event before the call fails. Reasoning models can
    /// think silently for a long while, so this is generous.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

    pub fn new(profile_name: &str, profile: &Profile) -> Result<Provider, ProviderError> {
        let endpoint = chat_completions_url(&profile.base_url)?;
        let api_key = resolve_api_key(profile_name, profile)?;
        let headers = default_headers(profile, api_key.as_deref())?;
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|error| ProviderError::HttpClient(error_chain(&error)))?;
        let request_extra = profile
            .request_extra
            .iter()
            .filter(|(key, _)| !RESERVED_BODY_FIELDS.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        Ok(Provider {
            profile_name: profile_name.to_owned(),
            model: profile.model.clone(),
            endpoint,
            http,
            api_key,
            reasoning_history: profile.reasoning_history,
            max_output_tokens: profile.max_output_tokens,
            request_extra,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
        })
    }

    /// Replaces [`Provider::DEFAULT_IDLE_TIMEOUT`]. `: keep-alive` comments do not count as data.
    pub fn with_idle_timeout(mut self, idle_timeout: Duration) -> Provider {
        self.idle_timeout = idle_timeout;
        self
    }

    pub fn profile_name(&self) -> &str {
        &self.profile_name
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// The exact bytes POSTed for `request`. Every stable field comes before `messages`, which is
    /// last, so a request whose history extends the previous one's has a body that extends the
    /// previous body up to the end of its messages (the sticky prefix, SPEC §6).
    pub fn request_body(&self, request: ChatRequest<'_>) -> Vec<u8> {
        let extra = &self.request_extra;
        let body = RequestBody {
            model: &self.model,
            tools: request.tools.iter().map(WireTool::from).collect(),
            stream: true,
            stream_options: (!extra.contains_key("stream_options")).then_some(StreamOptions {
                include_usage: true,
            }),
            max_tokens: self
                .max_output_tokens
                .filter(|_| !extra.contains_key("max_tokens")),
            extra,
            messages: request
                .messages
                .iter()
                .map(|message| WireMessage::new(message, self.reasoning_history))
                .collect(),
        };
        // Strings, integers, booleans and JSON values under string keys always serialise.
        serde_json::to_vec(&body)
            .unwrap_or_else(|error| unreachable!("a request body always serialises: {error}"))
    }

    /// Sends `request` and streams the answer: `on_delta` gets each piece of text as it arrives,
    /// and the whole answer is returned at the end. Firing `cancel` ends the call at once.
    pub async fn complete(
        &self,
        request: ChatRequest<'_>,
        cancel: &CancellationToken,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<Completion, ProviderError> {
        let body = Bytes::from(self.request_body(request));
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ProviderError::Cancelled),
            result = self.attempt(body, on_delta) => result,
        }
    }

    /// One POST and its whole stream. It keeps no state between calls, so a retry is calling it
    /// again with the same body.
    async fn attempt(
        &self,
        body: Bytes,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<Completion, ProviderError> {
        let response = self.post(body).await?;
        let response = self.check_status(response).await?;
        self.read_stream(response, on_delta).await
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
    ) -> Result<reqwest::Response, ProviderError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = tokio::time::timeout(self.idle_timeout, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Err(ProviderError::Status {
            url: self.endpoint.to_string(),
            status: status.as_u16(),
            body: provider_error_text(&self.without_key(text)),
        })
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<Completion, ProviderError> {
        let mut body_start = Vec::new();
        let mut accumulator = ChunkAccumulator::default();
        let bytes = response.bytes_stream().inspect(|read| {
            if let Ok(read) = read {
                let room = BODY_START_BYTES.saturating_sub(body_start.len());
                body_start.extend_from_slice(&read[..room.min(read.len())]);
            }
        });
        self.read_events(bytes.eventsource(), &mut accumulator, on_delta)
            .await?;
        if !accumulator.has_chunks() {
            return Err(no_chunk_error(&body_start));
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
                on_delta(delta);
            }
        }
        Ok(())
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
            .field("model", &self.model)
            .field("endpoint", &self.endpoint.as_str())
            .field("idle_timeout", &self.idle_timeout)
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

/// `{base_url}/chat/completions`, whether or not the base ends in a slash, keeping any query
/// (Azure's `api-version`).
fn chat_completions_url(base_url: &str) -> Result<Url, ProviderError> {
    let invalid = |reason: String| ProviderError::InvalidUrl {
        url: base_url.to_owned(),
        reason,
    };
    let mut url = Url::parse(base_url).map_err(|error| invalid(error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "the scheme must be http or https, not {}",
            url.scheme()
        )));
    }
    url.path_segments_mut()
        .map_err(|()| invalid("it cannot take a path".to_owned()))?
        .pop_if_empty()
        .extend(["chat", "completions"]);
    Ok(url)
}

/// The key itself, else the variable it names; a profile with neither talks to a keyless local
/// server.
fn resolve_api_key(profile_name: &str, profile: &Profile) -> Result<Option<String>, ProviderError> {
    if let Some(key) = profile.api_key.as_deref().map(str::trim)
        && !key.is_empty()
    {
        return Ok(Some(key.to_owned()));
    }
    let Some(variable) = &profile.api_key_env else {
        return Ok(None);
    };
    match std::env::var(variable) {
        Ok(key) if !key.trim().is_empty() => Ok(Some(key.trim().to_owned())),
        _ => Err(ProviderError::MissingKey {
            profile: profile_name.to_owned(),
            hint: format!(
                "the environment variable {variable} where cwcoded runs, or \"api_key\" in this \
                 profile in config.json"
            ),
        }),
    }
}

fn default_headers(profile: &Profile, api_key: Option<&str>) -> Result<HeaderMap, ProviderError> {
    let mut headers = HeaderMap::new();
    headers.insert(header::USER_AGENT, HeaderValue::from_static(USER_AGENT));
    if let Some(key) = api_key {
        let (name, value) = match profile.kind {
            ProviderKind::Openai => (header::AUTHORIZATION, format!("Bearer {key}")),
            ProviderKind::Azure => (HeaderName::from_static("api-key"), key.to_owned()),
        };
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

/// reqwest is built without a TLS provider of its own (its default, aws-lc-rs, is a slow C build),
/// so ring is installed as the process default. Losing a race to another installer is fine: the
/// provider it installed serves as well.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
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

fn no_chunk_error(body_start: &[u8]) -> ProviderError {
    if body_start.iter().all(u8::is_ascii_whitespace) {
        return ProviderError::Stream("the provider answered 200 with an empty body".to_owned());
    }
    ProviderError::Protocol(format!(
        "the answer held no chat completion chunk; it began: {}",
        sse::excerpt(&String::from_utf8_lossy(body_start), sse::EXCERPT_CHARS)
    ))
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
    use std::io;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use axum::body::Body;
    use axum::extract::State;
    use axum::http::{HeaderMap as AxumHeaderMap, StatusCode, Uri};
    use axum::response::Response;
    use axum::routing::post;
    use cwcode_protocol::{ToolCall, Usage};
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::provider::AssistantMessage;

    #[derive(Clone)]
    enum Step {
        Send(&'static str),
        Pause(Duration),
        Hang,
        Abort,
    }

    struct Recorded {
        path: String,
        headers: AxumHeaderMap,
        body: Vec<u8>,
    }

    struct FakeState {
        status: StatusCode,
        steps: Vec<Step>,
        requests: Mutex<Vec<Recorded>>,
    }

    /// Serves `steps` as the body of every answer to POST /v1/chat/completions on 127.0.0.1, and
    /// records each request.
    #[allow(clippy::unwrap_used)]
    async fn fake_server(status: StatusCode, steps: Vec<Step>) -> (String, Arc<FakeState>) {
        let state = Arc::new(FakeState {
            status,
            steps,
            requests: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{address}/v1/"), state)
    }

    #[allow(clippy::unwrap_used)]
    async fn answer(
        State(state): State<Arc<FakeState>>,
        uri: Uri,
        headers: AxumHeaderMap,
        body: axum::body::Bytes,
    ) -> Response {
        state.requests.lock().unwrap().push(Recorded {
            path: uri.path().to_owned(),
            headers,
            body: body.to_vec(),
        });
        let steps = state.steps.clone().into_iter();
        let stream = futures::stream::unfold(steps, |mut steps| async move {
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
        Response::builder()
            .status(state.status)
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(stream))
            .unwrap()
    }

    #[allow(clippy::unwrap_used)]
    fn profile(settings: Value) -> Profile {
        let mut profile = json!({"base_url": "http://127.0.0.1:9/v1", "model": "test-model"});
        profile
            .as_object_mut()
            .unwrap()
            .extend(settings.as_object().unwrap().clone());
        serde_json::from_value(profile).unwrap()
    }

    #[allow(clippy::unwrap_used)]
    fn provider(settings: Value) -> Provider {
        Provider::new("test", &profile(settings)).unwrap()
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
        let result = provider.complete(request, cancel, &mut on_delta).await;
        (result, deltas)
    }

    #[allow(clippy::unwrap_used)]
    async fn complete_against(
        steps: Vec<Step>,
        settings: Value,
    ) -> (Result<Completion, ProviderError>, Vec<StreamDelta>) {
        let (base_url, _) = fake_server(StatusCode::OK, steps).await;
        let mut settings = settings;
        settings["base_url"] = json!(base_url);
        complete(&provider(settings), &CancellationToken::new()).await
    }

    const FIRST_CHUNK: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n";

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

        let requests = state.requests.lock().unwrap();
        let [request] = requests.as_slice() else {
            panic!("expected one request, got {}", requests.len());
        };
        assert_eq!(request.path, "/v1/chat/completions");
        let header = |name: &str| request.headers[name].to_str().unwrap().to_owned();
        assert_eq!(header("authorization"), "Bearer sk-test");
        assert_eq!(
            header("user-agent"),
            concat!("cwcode/", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(header("x-team"), "blue");
        assert_eq!(header("content-type"), "application/json");
        assert_eq!(header("accept"), "text/event-stream");
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
        let steps = vec![Step::Send(
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        )];
        let (base_url, state) = fake_server(StatusCode::OK, steps).await;
        let keyless = provider(json!({"base_url": base_url}));
        let azure = provider(json!({"base_url": base_url, "kind": "azure", "api_key": "az-key"}));
        let cancel = CancellationToken::new();
        complete(&keyless, &cancel).await.0.unwrap();
        complete(&azure, &cancel).await.0.unwrap();

        let requests = state.requests.lock().unwrap();
        assert!(!requests[0].headers.contains_key("authorization"));
        assert!(!requests[0].headers.contains_key("api-key"));
        assert_eq!(requests[1].headers["api-key"], "az-key");
        assert!(!requests[1].headers.contains_key("authorization"));
    }

    #[tokio::test]
    async fn an_error_status_carries_the_provider_text_without_the_key() {
        let steps = vec![Step::Send(
            "{\"error\":{\"message\":\"Internal failure serving key sk-test\",\"type\":\"server_error\"}}",
        )];
        let (base_url, _) = fake_server(StatusCode::INTERNAL_SERVER_ERROR, steps).await;
        let provider = provider(json!({"base_url": base_url, "api_key": "sk-test"}));
        assert!(!format!("{provider:?}").contains("sk-test"));
        let (result, deltas) = complete(&provider, &CancellationToken::new()).await;
        assert!(deltas.is_empty());
        let Err(ProviderError::Status { status, body, url }) = result else {
            panic!("expected a status error, got {result:?}");
        };
        assert_eq!(status, 500);
        assert_eq!(body, "Internal failure serving key [redacted]");
        assert!(url.ends_with("/v1/chat/completions"), "{url}");
    }

    #[tokio::test]
    async fn a_stream_that_ends_without_finishing_is_an_error() {
        let (result, deltas) = complete_against(vec![Step::Send(FIRST_CHUNK)], json!({})).await;
        assert_eq!(deltas, [StreamDelta::Content("Hi".into())]);
        assert!(
            matches!(&result, Err(ProviderError::Stream(text)) if text.contains("no finish_reason and no [DONE]")),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn a_connection_cut_mid_answer_is_a_stream_error() {
        let (result, _) = complete_against(
            vec![
                Step::Send(FIRST_CHUNK),
                // Lets the server flush the headers and the first chunk before it breaks off.
                Step::Pause(Duration::from_millis(50)),
                Step::Abort,
            ],
            json!({}),
        )
        .await;
        assert!(
            matches!(&result, Err(ProviderError::Stream(text)) if text.contains("connection broke")),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn an_empty_200_body_is_an_error() {
        let (result, _) = complete_against(Vec::new(), json!({})).await;
        assert!(
            matches!(&result, Err(ProviderError::Stream(text)) if text.contains("empty body")),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn a_200_that_is_not_sse_quotes_what_came() {
        let steps = vec![Step::Send(
            "{\"object\":\"chat.completion\",\"choices\":[]}",
        )];
        let (result, _) = complete_against(steps, json!({})).await;
        assert!(
            matches!(&result, Err(ProviderError::Protocol(text)) if text.contains("chat.completion")),
            "{result:?}"
        );
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
            provider.complete(request, &cancel, &mut on_delta),
        )
        .await;
        assert!(
            matches!(result, Ok(Err(ProviderError::Cancelled))),
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
        let provider =
            provider(json!({"base_url": base_url})).with_idle_timeout(Duration::from_millis(300));
        let started = Instant::now();
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        assert!(
            matches!(result, Err(ProviderError::IdleTimeout(_))),
            "{result:?}"
        );
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "the comments kept the stream alive for {:?}",
            started.elapsed()
        );
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

    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn an_unreachable_server_is_a_connect_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        let provider = provider(json!({"base_url": format!("http://{address}/v1")}));
        let (result, _) = complete(&provider, &CancellationToken::new()).await;
        assert!(
            matches!(&result, Err(ProviderError::Connect { url, .. }) if url.contains(&address.to_string())),
            "{result:?}"
        );
    }

    #[test]
    fn a_missing_key_variable_is_named_with_config_json() {
        let profile = profile(json!({"api_key_env": "CWCODE_TEST_KEY_THAT_IS_NEVER_SET"}));
        let Err(error) = Provider::new("remote", &profile) else {
            panic!("expected a missing key");
        };
        let text = error.to_string();
        assert!(matches!(error, ProviderError::MissingKey { .. }));
        assert!(
            text.contains("`remote`")
                && text.contains("CWCODE_TEST_KEY_THAT_IS_NEVER_SET")
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
        for (base_url, endpoint) in [
            (
                "http://127.0.0.1:8000/v1",
                "http://127.0.0.1:8000/v1/chat/completions",
            ),
            (
                "http://127.0.0.1:8000/v1/",
                "http://127.0.0.1:8000/v1/chat/completions",
            ),
            (
                "https://api.example.invalid",
                "https://api.example.invalid/chat/completions",
            ),
            (
                "https://r.example.invalid/openai/deployments/d?api-version=2024-10-21",
                "https://r.example.invalid/openai/deployments/d/chat/completions?api-version=2024-10-21",
            ),
        ] {
            assert_eq!(chat_completions_url(base_url).unwrap().as_str(), endpoint);
        }
    }

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
            parameters: json!({"type": "object", "properties": {}}),
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
        for reasoning in ["strip", "keep"] {
            let provider = provider(json!({
                "reasoning_history": reasoning, "max_output_tokens": 64,
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
            });
        }
    }
}
