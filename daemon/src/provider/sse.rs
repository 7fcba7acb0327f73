//! Accumulation of a streamed chat completion (SPEC §10). Pure: it is fed the `data:` payloads of
//! the SSE stream one at a time, returns the pieces to show at once, and at the end gives the whole
//! assistant message with its usage. Each deviation seen in the wild has its own small function
//! below, so a new one is a new function and a new test rather than a new branch somewhere.

use cwcode_protocol::{ToolCall, Usage};
use serde_json::{Map, Value};

use super::{AssistantMessage, Completion, ProviderError, StreamDelta};

const DONE_SENTINEL: &str = "[DONE]";

/// How much of an unexpected payload an error quotes.
pub const EXCERPT_CHARS: usize = 600;

type Object = Map<String, Value>;

#[derive(Debug, Default)]
pub struct ChunkAccumulator {
    content: String,
    reasoning: String,
    tool_calls: Vec<PartialToolCall>,
    /// Set once a chunk carried `tool_calls`: a legacy `function_call` beside it repeats the same
    /// call and must not be added twice.
    uses_tool_calls: bool,
    usage: Option<Usage>,
    timings_usage: Option<Usage>,
    finish_reason: Option<String>,
    chunk_count: usize,
    done: bool,
}

#[derive(Debug, Default)]
struct PartialToolCall {
    index: Option<u64>,
    id: String,
    name: String,
    arguments: String,
}

impl ChunkAccumulator {
    /// Takes one `data:` payload and returns what should be shown now.
    pub fn push(&mut self, data: &str) -> Result<Vec<StreamDelta>, ProviderError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        if data == DONE_SENTINEL {
            self.done = true;
            return Ok(Vec::new());
        }
        let chunk = parse_chunk(data)?;
        reject_error_chunk(&chunk)?;
        self.chunk_count += 1;
        self.record_usage(&chunk);
        self.record_timings(&chunk);
        let Some(choice) = first_choice(&chunk) else {
            return Ok(Vec::new());
        };
        self.record_finish_reason(choice);
        let Some(delta) = choice.get("delta").and_then(Value::as_object) else {
            return Ok(Vec::new());
        };
        self.apply_tool_call_deltas(delta);
        Ok(self.append_text(delta))
    }

    /// `[DONE]` arrived: nothing after it matters.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The model said why it stopped, so the answer is whole even if `[DONE]` never comes.
    pub fn has_finish_reason(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// The usage reported so far: some servers send it before the answer ends.
    pub fn usage(&self) -> Option<Usage> {
        merge_timings(self.usage, self.timings_usage)
    }

    pub fn has_chunks(&self) -> bool {
        self.chunk_count > 0
    }

    /// The accumulated answer, or why the stream cannot be taken as one.
    pub fn finish(self) -> Result<Completion, ProviderError> {
        if self.chunk_count == 0 {
            return Err(ProviderError::Stream(
                "the provider ended the stream without sending any chunk".to_owned(),
            ));
        }
        if !self.done && self.finish_reason.is_none() {
            return Err(ProviderError::Stream(
                "the stream ended before the answer was complete (no finish_reason and no [DONE])"
                    .to_owned(),
            ));
        }
        let usage = merge_timings(self.usage, self.timings_usage);
        Ok(Completion {
            message: AssistantMessage {
                content: self.content,
                reasoning: (!self.reasoning.is_empty()).then_some(self.reasoning),
                tool_calls: finished_tool_calls(self.tool_calls),
            },
            usage,
            finish_reason: self.finish_reason,
        })
    }

    fn append_text(&mut self, delta: &Object) -> Vec<StreamDelta> {
        let mut deltas = Vec::new();
        if let Some(reasoning) = reasoning_text(delta) {
            self.reasoning.push_str(reasoning);
            deltas.push(StreamDelta::Reasoning(reasoning.to_owned()));
        }
        if let Some(content) = non_empty_str(delta.get("content")) {
            self.content.push_str(content);
            deltas.push(StreamDelta::Content(content.to_owned()));
        }
        deltas
    }

    /// Two finishing chunks happen (one with the reason, one with usage and another reason): the
    /// first reason is the model's, so it is kept.
    fn record_finish_reason(&mut self, choice: &Object) {
        if self.finish_reason.is_none() {
            self.finish_reason = non_empty_str(choice.get("finish_reason")).map(str::to_owned);
        }
    }

    /// Usage comes in `usage` (OpenAI, vLLM, DeepSeek on its last content chunk, or a final
    /// `choices: []` chunk) or in `choices[0].usage` (Kimi). Some servers repeat a growing count
    /// on every chunk, so the last one wins.
    fn record_usage(&mut self, chunk: &Object) {
        let reported = chunk.get("usage").and_then(usage_from).or_else(|| {
            first_choice(chunk)
                .and_then(|choice| choice.get("usage"))
                .and_then(usage_from)
        });
        if reported.is_some() {
            self.usage = reported;
        }
    }

    /// Older llama.cpp reports its prompt cache only in `timings`.
    fn record_timings(&mut self, chunk: &Object) {
        if let Some(usage) = chunk.get("timings").and_then(usage_from_timings) {
            self.timings_usage = Some(usage);
        }
    }

    fn apply_tool_call_deltas(&mut self, delta: &Object) {
        match delta.get("tool_calls").and_then(Value::as_array) {
            Some(calls) if !calls.is_empty() => {
                self.uses_tool_calls = true;
                for call in calls.iter().filter_map(Value::as_object) {
                    self.apply_tool_call_delta(call);
                }
            }
            _ => self.apply_legacy_function_call(delta),
        }
    }

    fn apply_tool_call_delta(&mut self, call: &Object) {
        let index = call.get("index").and_then(Value::as_u64);
        let id = tool_call_id(call.get("id"));
        let target = self.call_for(index, id.as_deref());
        if let Some(function) = call.get("function").and_then(Value::as_object) {
            target.merge_function(function);
        }
    }

    /// The pre-tools `function_call` field: one call, no id, no index.
    fn apply_legacy_function_call(&mut self, delta: &Object) {
        if self.uses_tool_calls {
            return;
        }
        if let Some(function) = delta.get("function_call").and_then(Value::as_object) {
            self.call_for(None, None).merge_function(function);
        }
    }

    /// Finds the call a delta continues, or starts a new one. A known id continues its call; a new
    /// id starts a call (even on an index already used, as servers that put every call on index 0
    /// do), unless the call on that index has had no id yet. Without an id, a delta continues the
    /// latest call on its index, or the latest call of all when it has no index either.
    fn call_for(&mut self, index: Option<u64>, id: Option<&str>) -> &mut PartialToolCall {
        let position = match id {
            Some(id) => self.position_of_id(id).or_else(|| {
                let position = self
                    .latest_position(index)
                    .filter(|&position| self.tool_calls[position].id.is_empty())?;
                self.tool_calls[position].id = id.to_owned();
                Some(position)
            }),
            None => self.latest_position(index),
        };
        let position = position.unwrap_or_else(|| {
            self.tool_calls.push(PartialToolCall {
                index,
                id: id.unwrap_or_default().to_owned(),
                ..PartialToolCall::default()
            });
            self.tool_calls.len() - 1
        });
        &mut self.tool_calls[position]
    }

    fn position_of_id(&self, id: &str) -> Option<usize> {
        self.tool_calls.iter().rposition(|call| call.id == id)
    }

    fn latest_position(&self, index: Option<u64>) -> Option<usize> {
        match index {
            Some(index) => self
                .tool_calls
                .iter()
                .rposition(|call| call.index == Some(index)),
            None => self.tool_calls.len().checked_sub(1),
        }
    }
}

impl PartialToolCall {
    fn merge_function(&mut self, function: &Object) {
        self.merge_name(function.get("name"));
        self.merge_arguments(function.get("arguments"));
    }

    /// Some servers repeat the whole name on every chunk; the rare one that streams it in pieces
    /// sends pieces that differ from what has been gathered.
    fn merge_name(&mut self, name: Option<&Value>) {
        let Some(name) = non_empty_str(name) else {
            return;
        };
        if self.name != name {
            self.name.push_str(name);
        }
    }

    /// Arguments are normally JSON text in pieces; some servers send the parsed object instead,
    /// which is then the whole of them.
    fn merge_arguments(&mut self, arguments: Option<&Value>) {
        match arguments {
            Some(Value::String(piece)) => self.arguments.push_str(piece),
            Some(whole @ (Value::Object(_) | Value::Array(_))) => {
                self.arguments = whole.to_string();
            }
            _ => {}
        }
    }
}

fn parse_chunk(data: &str) -> Result<Object, ProviderError> {
    match serde_json::from_str(data) {
        Ok(Value::Object(chunk)) => Ok(chunk),
        Ok(_) => Err(ProviderError::Protocol(excerpt(data, EXCERPT_CHARS))),
        Err(error) => Err(ProviderError::Protocol(format!(
            "{error}: {}",
            excerpt(data, EXCERPT_CHARS)
        ))),
    }
}

/// Providers report failures after a 200 as a chunk holding only `error`.
fn reject_error_chunk(chunk: &Object) -> Result<(), ProviderError> {
    match chunk.get("error") {
        None | Some(Value::Null) => Ok(()),
        Some(error) => Err(ProviderError::Stream(format!(
            "the provider reported an error mid-answer: {}",
            error_message(error)
        ))),
    }
}

/// The human part of a provider's error value: `{"error": {"message": …}}`, `{"message": …}`,
/// `{"detail": …}` or a bare string, else the JSON itself.
pub fn error_message(error: &Value) -> String {
    let message = match error {
        Value::String(text) => Some(text.as_str()),
        Value::Object(object) => ["message", "detail"]
            .iter()
            .find_map(|key| non_empty_str(object.get(*key))),
        _ => None,
    };
    match (message, error.get("error")) {
        (Some(message), _) => excerpt(message, EXCERPT_CHARS),
        (None, Some(inner)) if !inner.is_null() => error_message(inner),
        _ => excerpt(&error.to_string(), EXCERPT_CHARS),
    }
}

/// Only one answer is ever asked for; a server that numbers choices still puts it at index 0.
fn first_choice(chunk: &Object) -> Option<&Object> {
    chunk
        .get("choices")?
        .as_array()?
        .iter()
        .filter_map(Value::as_object)
        .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
}

/// `reasoning_content` (DeepSeek, vLLM, Kimi) or `reasoning` (Qwen, newer vLLM); servers that
/// send both send the same text twice.
fn reasoning_text(delta: &Object) -> Option<&str> {
    non_empty_str(delta.get("reasoning_content")).or_else(|| non_empty_str(delta.get("reasoning")))
}

/// Ids are strings, except on servers that number them.
fn tool_call_id(id: Option<&Value>) -> Option<String> {
    match id? {
        Value::String(id) if !id.is_empty() => Some(id.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

fn usage_from(usage: &Value) -> Option<Usage> {
    let usage = usage.as_object()?;
    let prompt_tokens = token_count(usage.get("prompt_tokens"));
    let completion_tokens = token_count(usage.get("completion_tokens"));
    if prompt_tokens.is_none() && completion_tokens.is_none() {
        return None;
    }
    Some(Usage {
        prompt_tokens: prompt_tokens.unwrap_or(0),
        completion_tokens: completion_tokens.unwrap_or(0),
        cached_tokens: cached_tokens(usage).unwrap_or(0),
    })
}

/// `prompt_tokens_details.cached_tokens` (OpenAI, Azure, vLLM, DashScope, llama.cpp),
/// `prompt_cache_hit_tokens` (DeepSeek) or a top-level `cached_tokens` (Kimi).
fn cached_tokens(usage: &Object) -> Option<u64> {
    let details = usage
        .get("prompt_tokens_details")
        .and_then(|details| details.get("cached_tokens"));
    token_count(details)
        .or_else(|| token_count(usage.get("prompt_cache_hit_tokens")))
        .or_else(|| token_count(usage.get("cached_tokens")))
}

/// llama.cpp's `prompt_n` counts only the prompt tokens it had to evaluate; `cache_n` the rest.
fn usage_from_timings(timings: &Value) -> Option<Usage> {
    let evaluated = token_count(timings.get("prompt_n"))?;
    let cached = token_count(timings.get("cache_n")).unwrap_or(0);
    Some(Usage {
        prompt_tokens: evaluated + cached,
        completion_tokens: token_count(timings.get("predicted_n")).unwrap_or(0),
        cached_tokens: cached,
    })
}

/// A `usage` without cache numbers beside `timings` with them (older llama.cpp) takes them from
/// the timings.
fn merge_timings(usage: Option<Usage>, timings: Option<Usage>) -> Option<Usage> {
    match (usage, timings) {
        (Some(usage), Some(timings)) if usage.cached_tokens == 0 => Some(Usage {
            cached_tokens: timings.cached_tokens,
            ..usage
        }),
        (Some(usage), _) => Some(usage),
        (None, timings) => timings,
    }
}

/// Counts arrive as integers, and from a few servers as floats like `12.0`.
fn token_count(value: Option<&Value>) -> Option<u64> {
    let value = value?;
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|count| count.is_finite() && *count >= 0.0)
            .map(|count| count as u64)
    })
}

/// Drops entries that never got a name or arguments (a stray empty delta), gives id-less calls a
/// stable id so tool results can refer to them, and trims the arguments' surrounding whitespace;
/// empty arguments become `{}` so they stay valid JSON when sent back.
fn finished_tool_calls(calls: Vec<PartialToolCall>) -> Vec<ToolCall> {
    calls
        .into_iter()
        .filter(|call| !call.name.is_empty() || !call.arguments.trim().is_empty())
        .enumerate()
        .map(|(position, call)| ToolCall {
            id: if call.id.is_empty() {
                format!("call_{position}")
            } else {
                call.id
            },
            name: call.name,
            arguments: normalised_arguments(&call.arguments),
        })
        .collect()
}

fn normalised_arguments(arguments: &str) -> String {
    match arguments.trim() {
        "" => "{}".to_owned(),
        trimmed => trimmed.to_owned(),
    }
}

/// Explicit `null`s and empty strings both mean "nothing here".
fn non_empty_str(value: Option<&Value>) -> Option<&str> {
    value?.as_str().filter(|text| !text.is_empty())
}

/// At most `max_chars` characters of `text`, whitespace runs collapsed, marked when cut.
pub fn excerpt(text: &str, max_chars: usize) -> String {
    let mut collapsed = String::new();
    for word in text.split_whitespace() {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    match collapsed.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &collapsed[..cut]),
        None => collapsed,
    }
}

#[cfg(test)]
#[path = "sse_tests.rs"]
mod tests;
