//! A fake OpenAI-compatible `/chat/completions` endpoint on 127.0.0.1 that streams real SSE
//! bytes. Each request takes the next scripted responder, which sees the request body, so a
//! script can answer from what the daemon sent (a hash it read, a tool result).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use serde_json::{Value, json};

/// One SSE frame and how long to wait before sending it.
#[derive(Debug, Clone)]
pub struct Frame {
    pub delay: Duration,
    pub bytes: String,
}

#[derive(Debug, Clone)]
pub enum Reply {
    Stream {
        frames: Vec<Frame>,
        /// The answer as an assistant message in OpenAI's wire shape: what the prefix cache
        /// stores after the input, as a provider stores its output tokens.
        answer: String,
    },
    Status(u16, String),
    /// `reply` with its stream stopped after `sent` frames until the test opens `gate`: a
    /// turn that is certainly still streaming, for exactly as long as the test needs.
    Held {
        reply: Box<Reply>,
        sent: usize,
        gate: Gate,
    },
}

/// A gate a held reply waits at until the test opens it. Opening is permanent, and opening
/// before the reply gets there lets it straight through.
#[derive(Debug, Clone)]
pub struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl Gate {
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets every reply held at this gate go on.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    async fn passed(&self) {
        // The sender lives in `self`, so the channel cannot close while waiting.
        let _ = self.0.subscribe().wait_for(|open| *open).await;
    }
}

/// `reply` streamed up to its first `sent` frames, the rest only once `gate` is opened.
pub fn hold_until(reply: Reply, sent: usize, gate: &Gate) -> Reply {
    Reply::Held {
        reply: Box::new(reply),
        sent,
        gate: gate.clone(),
    }
}

type Responder = Box<dyn Fn(&Value) -> Reply + Send + Sync>;

#[derive(Default)]
struct Inner {
    script: Mutex<VecDeque<Responder>>,
    requests: Mutex<Vec<Value>>,
    bodies: Mutex<Vec<Vec<u8>>>,
    cache: Option<Mutex<PrefixCache>>,
    billed: Mutex<Vec<(u64, u64)>>,
    embedding_requests: Mutex<Vec<Value>>,
    /// The `Authorization` header of each chat request, as sent (None when there was none).
    authorizations: Mutex<Vec<Option<String>>>,
}

/// Bytes per token in the fake's accounting: close to what BPE tokenizers give for JSON and code.
pub const BYTES_PER_TOKEN: usize = 4;

/// A prompt cache the way DeepSeek describes its own: the prompt is cut into fixed-size units,
/// a request hits only on whole units of a prefix stored earlier, and every request's prefix
/// units are stored when it ends. Usage is reported in DeepSeek's fields.
#[derive(Debug)]
pub struct PrefixCache {
    unit_tokens: usize,
    stored: std::collections::HashSet<u64>,
}

impl PrefixCache {
    fn unit_bytes(&self) -> usize {
        self.unit_tokens * BYTES_PER_TOKEN
    }

    fn key(prefix: &[u8]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        prefix.hash(&mut hasher);
        hasher.finish()
    }

    /// (prompt tokens, cached tokens) for a body.
    fn bill(&self, body: &[u8]) -> (u64, u64) {
        let unit = self.unit_bytes();
        let hit_units = (1..=body.len() / unit)
            .take_while(|&units| self.stored.contains(&Self::key(&body[..units * unit])))
            .count();
        let prompt_tokens = body.len().div_ceil(BYTES_PER_TOKEN) as u64;
        let cached_tokens = (hit_units * self.unit_tokens) as u64;
        (prompt_tokens, cached_tokens.min(prompt_tokens))
    }

    /// Stores every whole unit of a prompt.
    fn store(&mut self, prompt: &[u8]) {
        let unit = self.unit_bytes();
        for units in 1..=prompt.len() / unit {
            self.stored.insert(Self::key(&prompt[..units * unit]));
        }
    }

    /// Stores the input, and the input followed by the answer: the body's messages array is
    /// its last field, so the next request continues `…,ANSWER`.
    fn store_exchange(&mut self, body: &[u8], answer: &str) {
        self.store(body);
        if let Some(open) = body.strip_suffix(b"]}") {
            let mut continued = open.to_vec();
            continued.push(b',');
            continued.extend_from_slice(answer.as_bytes());
            self.store(&continued);
        }
    }
}

pub struct FakeProvider {
    /// The `base_url` for a profile: `http://127.0.0.1:PORT/v1`.
    pub url: String,
    inner: Arc<Inner>,
}

impl FakeProvider {
    pub async fn start() -> Self {
        Self::serve(Inner::default()).await
    }

    /// A provider with a DeepSeek-style prefix cache of `unit_tokens`-token units.
    pub async fn with_prefix_cache(unit_tokens: usize) -> Self {
        Self::serve(Inner {
            cache: Some(Mutex::new(PrefixCache {
                unit_tokens,
                stored: Default::default(),
            })),
            ..Inner::default()
        })
        .await
    }

    async fn serve(inner: Inner) -> Self {
        let inner = Arc::new(inner);
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .route("/v1/embeddings", post(embeddings))
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, inner }
    }

    /// Queues the answer to the next request.
    pub fn then(&self, responder: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> &Self {
        self.inner
            .script
            .lock()
            .unwrap()
            .push_back(Box::new(responder));
        self
    }

    /// Queues a fixed answer.
    pub fn reply(&self, reply: Reply) -> &Self {
        self.then(move |_| reply.clone())
    }

    /// Every request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.inner.requests.lock().unwrap().clone()
    }

    /// (prompt tokens, cached tokens) the prefix cache billed for each request.
    pub fn billed(&self) -> Vec<(u64, u64)> {
        self.inner.billed.lock().unwrap().clone()
    }

    /// Every request body, byte for byte.
    pub fn bodies(&self) -> Vec<Vec<u8>> {
        self.inner.bodies.lock().unwrap().clone()
    }

    /// The `Authorization` header of every chat request, in order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.inner.authorizations.lock().unwrap().clone()
    }

    /// Every `/embeddings` request body.
    pub fn embedding_requests(&self) -> Vec<Value> {
        self.inner.embedding_requests.lock().unwrap().clone()
    }
}

/// `/embeddings` answered with [`word_vector`] of the input, in OpenAI's shape.
async fn embeddings(State(inner): State<Arc<Inner>>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    inner
        .embedding_requests
        .lock()
        .unwrap()
        .push(request.clone());
    let input = request["input"].as_str().unwrap_or_default();
    let answer = json!({
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": word_vector(input)}],
        "model": request["model"],
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(answer.to_string()))
        .unwrap()
}

/// The fake's embedding: each word adds to one of 1024 dimensions, with a few synonyms folded
/// together (kitten, feline → cat), so texts sharing meaning but no word come out close, as a
/// real embedding model's do.
pub fn word_vector(text: &str) -> Vec<f32> {
    let mut vector = vec![0.0_f32; 1024];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        let word = word.to_lowercase();
        let word = match word.as_str() {
            "kitten" | "feline" | "cats" => "cat",
            other => other,
        };
        let bucket = word.bytes().fold(7_usize, |hash, byte| {
            hash.wrapping_mul(31).wrapping_add(byte as usize)
        }) % vector.len();
        vector[bucket] += 1.0;
    }
    vector
}

async fn complete(
    State(inner): State<Arc<Inner>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    inner.authorizations.lock().unwrap().push(authorization);
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    inner.requests.lock().unwrap().push(request.clone());
    inner.bodies.lock().unwrap().push(body.to_vec());
    let cached_usage = inner
        .cache
        .as_ref()
        .map(|cache| cache.lock().unwrap().bill(&body));
    inner.billed.lock().unwrap().extend(cached_usage);
    let responder = inner.script.lock().unwrap().pop_front();
    let reply = match responder {
        Some(responder) => responder(&request),
        None => text("(the fake provider has no more scripted answers)"),
    };
    let (reply, hold) = release_point(reply);
    match reply {
        Reply::Status(status, body) => Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap(),
        Reply::Held { .. } => unreachable!("release_point unwraps every held reply"),
        Reply::Stream { mut frames, answer } => {
            if let Some((prompt_tokens, cached_tokens)) = cached_usage {
                report_deepseek_usage(&mut frames, prompt_tokens, cached_tokens);
            }
            if let Some(cache) = &inner.cache {
                cache.lock().unwrap().store_exchange(&body, &answer);
            }
            let frames = frames.into_iter().enumerate();
            let stream = futures::stream::unfold((frames, hold), |(mut frames, hold)| async move {
                let (index, frame) = frames.next()?;
                if let Some((sent, gate)) = &hold
                    && index == *sent
                {
                    gate.passed().await;
                }
                if !frame.delay.is_zero() {
                    tokio::time::sleep(frame.delay).await;
                }
                Some((
                    Ok::<_, Infallible>(Bytes::from(frame.bytes)),
                    (frames, hold),
                ))
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
    }
}

/// The reply to send and where it waits for its gate: the outermost hold counts.
fn release_point(reply: Reply) -> (Reply, Option<(usize, Gate)>) {
    match reply {
        Reply::Held { reply, sent, gate } => (release_point(*reply).0, Some((sent, gate))),
        other => (other, None),
    }
}

/// Rewrites the usage frame in DeepSeek's fields.
fn report_deepseek_usage(frames: &mut [Frame], prompt_tokens: u64, cached_tokens: u64) {
    for frame in frames.iter_mut() {
        let Some(json) = frame.bytes.strip_prefix("data: ") else {
            continue;
        };
        let Ok(mut value) = serde_json::from_str::<Value>(json.trim()) else {
            continue;
        };
        if value.get("usage").is_none() {
            continue;
        }
        value["usage"] = json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 10,
            "total_tokens": prompt_tokens + 10,
            "prompt_cache_hit_tokens": cached_tokens,
            "prompt_cache_miss_tokens": prompt_tokens - cached_tokens,
        });
        frame.bytes = format!("data: {value}\n\n");
    }
}

fn data(value: &Value) -> Frame {
    Frame {
        delay: Duration::ZERO,
        bytes: format!("data: {value}\n\n"),
    }
}

fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    })
}

fn closing(finish_reason: &str) -> Vec<Frame> {
    vec![
        data(&chunk(json!({}), Some(finish_reason))),
        data(&json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
                      "prompt_tokens_details": {"cached_tokens": 64}}
        })),
        Frame {
            delay: Duration::ZERO,
            bytes: "data: [DONE]\n\n".to_owned(),
        },
    ]
}

/// A plain answer, streamed a word at a time.
pub fn text(answer: &str) -> Reply {
    let mut frames = vec![data(&chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    ))];
    for word in answer.split_inclusive(' ') {
        frames.push(data(&chunk(json!({"content": word}), None)));
    }
    frames.extend(closing("stop"));
    Reply::Stream {
        frames,
        answer: format!(
            r#"{{"role":"assistant","content":{}}}"#,
            Value::from(answer)
        ),
    }
}

/// A goal loop's model: given a cycle's prompt, checks the first open goal, then says it did.
pub fn goal_worker(request: &Value) -> Reply {
    let messages = request["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let Some(last) = messages.last() else {
        return text("Nothing asked.");
    };
    if last["role"] == "tool" {
        return text("Checked it off.");
    }
    let prompt = last["content"].as_str().unwrap_or_default();
    let goal = prompt
        .lines()
        .skip_while(|line| !line.starts_with("[cwcode goal loop"))
        .find_map(|line| line.strip_prefix("- "));
    match goal {
        Some(goal) => tool_calls(&[(
            "check",
            "edit_file",
            json!({"path": "goals.md", "old_string": format!("- [ ] {goal}"), "new_string": format!("- [x] {goal}")}),
        )]),
        None => text("Nothing left."),
    }
}

/// One or more tool calls, each streamed in two argument pieces as real providers do.
pub fn tool_calls(calls: &[(&str, &str, Value)]) -> Reply {
    let mut frames = vec![data(&chunk(
        json!({"role": "assistant", "content": null}),
        None,
    ))];
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        let arguments = arguments.to_string();
        let (head, tail) = arguments.split_at(arguments.len() / 2);
        frames.push(data(&chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": head}}]}),
            None,
        )));
        frames.push(data(&chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": tail}}]}),
            None,
        )));
    }
    frames.extend(closing("tool_calls"));
    let wire_calls: Vec<String> = calls
        .iter()
        .map(|(id, name, arguments)| {
            format!(
                r#"{{"id":{},"type":"function","function":{{"name":{},"arguments":{}}}}}"#,
                Value::from(*id),
                Value::from(*name),
                Value::from(arguments.to_string())
            )
        })
        .collect();
    Reply::Stream {
        frames,
        answer: format!(
            r#"{{"role":"assistant","content":"","tool_calls":[{}]}}"#,
            wire_calls.join(",")
        ),
    }
}

/// The content of the last `tool` message of a request: what the previous tool call returned.
pub fn last_tool_result(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "tool"))
        .and_then(|message| message["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The `N:HHH` anchor of line `line` in a read_file result.
pub fn anchor(read_output: &str, line: usize) -> (usize, String) {
    let prefix = format!("{line}:");
    let entry = read_output
        .lines()
        .find(|text| text.starts_with(&prefix))
        .unwrap_or_else(|| panic!("line {line} not in read_file output:\n{read_output}"));
    let hash = entry[prefix.len()..prefix.len() + 3].to_owned();
    (line, hash)
}

/// What a model does after reading a file: replace line `line` of `path` through `edit_lines`,
/// anchored on what the previous `read_file` result showed.
pub fn edit_line_as_read(
    path: &'static str,
    line: usize,
    new_text: &'static str,
) -> impl Fn(&Value) -> Reply + Send + Sync + 'static {
    move |request| {
        let (line, hash) = anchor(&last_tool_result(request), line);
        tool_calls(&[(
            "call_edit",
            "edit_lines",
            json!({"path": path, "edits": [{"line": line, "hash": hash, "new_text": new_text}]}),
        )])
    }
}

/// What vLLM streams for a Hermes- or Qwen-style model served without `--tool-call-parser`:
/// the calls arrive as `<tool_call>` text in the content, a few characters a chunk, and the
/// answer finishes with `stop` and no `tool_calls` at all.
pub fn tool_calls_in_text(before: &str, calls: &[(&str, Value)]) -> Reply {
    let mut content = before.to_owned();
    for (name, arguments) in calls {
        let call = json!({"name": name, "arguments": arguments});
        content.push_str(&format!("\n<tool_call>\n{call}\n</tool_call>"));
    }
    let mut frames = vec![data(&chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    ))];
    let characters: Vec<char> = content.chars().collect();
    for piece in characters.chunks(7) {
        let piece: String = piece.iter().collect();
        frames.push(data(&chunk(json!({"content": piece}), None)));
    }
    frames.extend(closing("stop"));
    Reply::Stream {
        frames,
        answer: format!(
            r#"{{"role":"assistant","content":{}}}"#,
            Value::from(content)
        ),
    }
}

/// A tool call whose arguments were cut off at the output limit, as servers send it: the
/// arguments stop mid-string and the answer finishes with `length`.
pub fn cut_off_tool_call(id: &str, name: &str, arguments_start: &str) -> Reply {
    let mut frames = vec![data(&chunk(
        json!({"role": "assistant", "content": null}),
        None,
    ))];
    frames.push(data(&chunk(
        json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                               "function": {"name": name, "arguments": arguments_start}}]}),
        None,
    )));
    frames.extend(closing("length"));
    Reply::Stream {
        frames,
        answer: format!(
            r#"{{"role":"assistant","content":"","tool_calls":[{{"id":{},"type":"function","function":{{"name":{},"arguments":{}}}}}]}}"#,
            Value::from(id),
            Value::from(name),
            Value::from(arguments_start)
        ),
    }
}
