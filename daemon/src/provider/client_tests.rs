//! The HTTP client against a fake provider on loopback that streams real SSE: the helpers here,
//! the call's behaviour (streaming, retries, timeouts, cancellation, errors) in
//! `client_http_tests.rs`, and the built-in profiles' request shapes and the request body in
//! `client_shape_tests.rs`.

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
use crate::provider::config::profile_from_json;
use crate::provider::{AssistantMessage, FunctionSpec, Message};

#[path = "client_http_tests.rs"]
mod http;
#[path = "client_shape_tests.rs"]
mod shapes;

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

const FIRST_CHUNK: &str =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n";
const WHOLE_ANSWER: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello there.\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

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
