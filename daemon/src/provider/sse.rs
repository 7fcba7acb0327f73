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
mod tests {
    use std::convert::Infallible;

    use eventsource_stream::Eventsource;
    use futures::StreamExt;
    use proptest::prelude::*;

    use super::*;

    /// Runs raw SSE bytes through the same event parser the client uses, in `piece`-byte reads
    /// so events and UTF-8 sequences straddle network reads.
    #[allow(clippy::unwrap_used)]
    fn accumulate_in_pieces(
        raw: &str,
        piece: usize,
    ) -> (Vec<StreamDelta>, Result<Completion, ProviderError>) {
        let reads: Vec<Result<Vec<u8>, Infallible>> = raw
            .as_bytes()
            .chunks(piece)
            .map(|read| Ok(read.to_vec()))
            .collect();
        let events = futures::executor::block_on(
            futures::stream::iter(reads)
                .eventsource()
                .collect::<Vec<_>>(),
        );
        let mut accumulator = ChunkAccumulator::default();
        let mut deltas = Vec::new();
        for event in events {
            match accumulator.push(&event.unwrap().data) {
                Ok(more) => deltas.extend(more),
                Err(error) => return (deltas, Err(error)),
            }
        }
        (deltas, accumulator.finish())
    }

    fn accumulate(raw: &str) -> (Vec<StreamDelta>, Result<Completion, ProviderError>) {
        accumulate_in_pieces(raw, 7)
    }

    #[allow(clippy::unwrap_used)]
    fn completion(raw: &str) -> Completion {
        accumulate(raw).1.unwrap()
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    const DEEPSEEK_STREAM: &str = concat!(
        ": keep-alive\n\n",
        "data: {\"id\":\"a\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"reasoning_content\":\"Think\"},\"finish_reason\":null}]}\n\n",
        ": keep-alive\n\n",
        "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hé\",\"reasoning_content\":null},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\",\"reasoning_content\":null},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":7,\"total_tokens\":107,\"prompt_cache_hit_tokens\":64,\"prompt_cache_miss_tokens\":36}}\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn content_deltas_are_emitted_and_joined() {
        let raw = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\", world\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let (deltas, completion) = accumulate(raw);
        assert_eq!(
            deltas,
            [
                StreamDelta::Content("Hello".into()),
                StreamDelta::Content(", world".into())
            ]
        );
        let completion = completion.unwrap();
        assert_eq!(completion.message.content, "Hello, world");
        assert_eq!(completion.message.reasoning, None);
        assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn reasoning_content_deltas_come_before_content() {
        let (deltas, completion) = accumulate(DEEPSEEK_STREAM);
        assert_eq!(
            deltas,
            [
                StreamDelta::Reasoning("Think".into()),
                StreamDelta::Content("Hé".into()),
                StreamDelta::Content("llo".into()),
            ]
        );
        let completion = completion.unwrap();
        assert_eq!(completion.message.reasoning.as_deref(), Some("Think"));
        assert_eq!(completion.message.content, "Héllo");
    }

    #[test]
    fn qwen_reasoning_field_is_reasoning() {
        let raw = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"Let me \"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"see.\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Done.\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let completion = completion(raw);
        assert_eq!(completion.message.reasoning.as_deref(), Some("Let me see."));
        assert_eq!(completion.message.content, "Done.");
    }

    #[test]
    fn reasoning_sent_under_both_names_counts_once() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"Hm\",\"reasoning\":\"Hm\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(completion(raw).message.reasoning.as_deref(), Some("Hm"));
    }

    #[test]
    fn parallel_tool_calls_with_index_are_assembled() {
        let raw = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"a.rs\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let completion = completion(raw);
        assert_eq!(
            completion.message.tool_calls,
            [
                call("call_a", "read_file", r#"{"path":"a.rs"}"#),
                call("call_b", "ls", "{}")
            ]
        );
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn tool_calls_without_index_follow_their_ids() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"grep\",\"arguments\":\"{\\\"pattern\\\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\":\\\"x\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"ls\",\"arguments\":\"{\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"arguments\":\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).message.tool_calls,
            [
                call("a", "grep", r#"{"pattern":"x"}"#),
                call("b", "ls", "{}")
            ]
        );
    }

    #[test]
    fn every_call_on_index_zero_with_new_ids_is_split_by_id() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"x\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"b\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"y\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).message.tool_calls,
            [
                call("a", "read_file", r#"{"path":"x"}"#),
                call("b", "read_file", r#"{"path":"y"}"#)
            ]
        );
    }

    #[test]
    fn whole_arguments_in_one_delta() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"command\\\":\\\"ls -la\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).message.tool_calls,
            [call("a", "bash", r#"{"command":"ls -la"}"#)]
        );
    }

    #[test]
    fn arguments_given_as_an_object_are_serialised() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"bash\",\"arguments\":{\"command\":\"ls\",\"timeout\":5}}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).message.tool_calls,
            [call("a", "bash", r#"{"command":"ls","timeout":5}"#)]
        );
    }

    #[test]
    fn a_name_repeated_on_every_chunk_is_kept_once() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"glob\",\"arguments\":\"{\\\"pattern\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"glob\",\"arguments\":\"\\\"*.rs\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).message.tool_calls,
            [call("a", "glob", r#"{"pattern":"*.rs"}"#)]
        );
    }

    #[test]
    fn integer_ids_are_stringified() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":7,\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":8,\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).message.tool_calls,
            [call("7", "ls", "{}"), call("8", "ls", "{}")]
        );
    }

    #[test]
    fn explicit_nulls_everywhere_mean_absent() {
        let raw = concat!(
            "data: {\"id\":null,\"usage\":null,\"choices\":[{\"index\":0,\"delta\":{\"role\":null,\"content\":null,\"reasoning_content\":null,\"reasoning\":null,\"function_call\":null,\"tool_calls\":null},\"finish_reason\":null,\"logprobs\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"type\":null,\"function\":{\"name\":\"ls\",\"arguments\":null}}]},\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":null,\"type\":null,\"function\":{\"name\":null,\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null,\"tool_calls\":null},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n",
            "data: [DONE]\n\n",
        );
        let (deltas, completion) = accumulate(raw);
        assert!(deltas.is_empty());
        let completion = completion.unwrap();
        assert_eq!(completion.message.tool_calls, [call("a", "ls", "{}")]);
        assert_eq!(completion.message.content, "");
        assert_eq!(completion.usage, None);
    }

    #[test]
    fn legacy_function_call_becomes_a_tool_call() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"function_call\":{\"name\":\"ls\",\"arguments\":\"{\\\"path\\\"\"}}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"function_call\":{\"arguments\":\":\\\".\\\"}\"}}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"function_call\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).message.tool_calls,
            [call("call_0", "ls", r#"{"path":"."}"#)]
        );
    }

    #[test]
    fn legacy_function_call_beside_tool_calls_is_not_counted_twice() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"ls\",\"arguments\":\"{\"}}],\"function_call\":{\"name\":\"ls\",\"arguments\":\"{\"}}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"function_call\":{\"arguments\":\"}\"},\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"function_call\":null},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(completion(raw).message.tool_calls, [call("a", "ls", "{}")]);
    }

    #[test]
    fn whitespace_around_arguments_is_trimmed_and_empty_arguments_become_an_object() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"ls\",\"arguments\":\" \\n {\\\"path\\\": \\\".\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\n  \"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"function\":{\"name\":\"todo_read\",\"arguments\":\"  \"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).message.tool_calls,
            [
                call("a", "ls", r#"{"path": "."}"#),
                call("b", "todo_read", "{}")
            ]
        );
    }

    #[test]
    fn empty_ids_get_deterministic_ids() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"name\":\"glob\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":2,\"id\":\"real\",\"function\":{\"name\":\"grep\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).message.tool_calls,
            [
                call("call_0", "ls", "{}"),
                call("call_1", "glob", "{}"),
                call("real", "grep", "{}")
            ]
        );
    }

    #[test]
    fn an_id_arriving_after_the_first_delta_names_that_call() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"ls\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"late\",\"function\":{\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).message.tool_calls,
            [call("late", "ls", "{}")]
        );
    }

    #[test]
    fn a_second_finishing_chunk_keeps_the_first_reason_and_adds_usage() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n",
        );
        let completion = completion(raw);
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(completion.message.content, "ok");
        assert_eq!(completion.usage.map(|usage| usage.prompt_tokens), Some(10));
    }

    #[test]
    fn unusual_finish_reasons_are_kept_verbatim() {
        for reason in [
            "eos",
            "insufficient_system_resource",
            "content_filter",
            "length",
        ] {
            let raw = format!(
                "data: {{\"choices\":[{{\"delta\":{{\"content\":\"x\"}},\"finish_reason\":\"{reason}\"}}]}}\n\ndata: [DONE]\n\n"
            );
            assert_eq!(completion(&raw).finish_reason.as_deref(), Some(reason));
        }
    }

    #[test]
    fn openai_cached_tokens_in_prompt_tokens_details() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":2048,\"completion_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":1920}}}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).usage,
            Some(Usage {
                prompt_tokens: 2048,
                completion_tokens: 5,
                cached_tokens: 1920
            })
        );
    }

    #[test]
    fn deepseek_usage_on_the_last_content_chunk() {
        assert_eq!(
            completion(DEEPSEEK_STREAM).usage,
            Some(Usage {
                prompt_tokens: 100,
                completion_tokens: 7,
                cached_tokens: 64
            })
        );
    }

    #[test]
    fn kimi_usage_in_the_choice_with_top_level_cached_tokens() {
        let raw = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\",\"usage\":{\"prompt_tokens\":300,\"completion_tokens\":1,\"total_tokens\":301,\"cached_tokens\":256}}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).usage,
            Some(Usage {
                prompt_tokens: 300,
                completion_tokens: 1,
                cached_tokens: 256
            })
        );
    }

    #[test]
    fn llama_cpp_timings_supply_the_cache_count() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":4},\"timings\":{\"prompt_n\":20,\"cache_n\":100,\"predicted_n\":4}}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(raw).usage,
            Some(Usage {
                prompt_tokens: 120,
                completion_tokens: 4,
                cached_tokens: 100
            })
        );
        let timings_only = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],\"timings\":{\"prompt_n\":20,\"cache_n\":100,\"predicted_n\":4.0}}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(
            completion(timings_only).usage,
            Some(Usage {
                prompt_tokens: 120,
                completion_tokens: 4,
                cached_tokens: 100
            })
        );
    }

    #[test]
    fn no_usage_at_all_is_none() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(completion(raw).usage, None);
    }

    #[test]
    fn keep_alive_comments_are_not_events() {
        let raw = concat!(
            ": keep-alive\n\n",
            ":\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n",
            ": keep-alive\n\n",
            "data: [DONE]\n\n",
        );
        let (deltas, completion) = accumulate(raw);
        assert_eq!(deltas, [StreamDelta::Content("x".into())]);
        assert_eq!(completion.unwrap().message.content, "x");
    }

    #[test]
    fn crlf_line_endings_and_no_space_after_the_colon_are_accepted() {
        let raw = "data:{\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata:[DONE]\r\n\r\n";
        assert_eq!(completion(raw).message.content, "x");
    }

    #[test]
    fn a_finish_reason_without_done_is_a_whole_answer() {
        let raw =
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n";
        assert_eq!(completion(raw).message.content, "x");
    }

    #[test]
    fn a_stream_cut_without_finish_reason_or_done_is_an_error() {
        let raw = "data: {\"choices\":[{\"delta\":{\"content\":\"half an ans\"}}]}\n\n";
        let (deltas, completion) = accumulate(raw);
        assert_eq!(deltas.len(), 1);
        let error = completion.unwrap_err().to_string();
        assert!(error.contains("before the answer was complete"), "{error}");
    }

    #[test]
    fn done_without_any_chunk_is_an_error() {
        let (_, completion) = accumulate("data: [DONE]\n\n");
        assert!(
            completion
                .unwrap_err()
                .to_string()
                .contains("without sending any chunk")
        );
        assert!(ChunkAccumulator::default().finish().is_err());
    }

    #[test]
    fn an_error_chunk_mid_stream_is_reported() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
            "data: {\"error\":{\"message\":\"Upstream overloaded\",\"type\":\"server_error\"}}\n\n",
        );
        let error = accumulate(raw).1.unwrap_err();
        assert!(
            matches!(&error, ProviderError::Stream(text) if text.contains("Upstream overloaded")),
            "{error:?}"
        );
    }

    #[test]
    fn a_payload_that_is_not_json_is_a_protocol_error() {
        let error = accumulate("data: <html>oops</html>\n\n").1.unwrap_err();
        assert!(
            matches!(&error, ProviderError::Protocol(text) if text.contains("<html>oops</html>")),
            "{error:?}"
        );
    }

    #[test]
    fn chunks_after_done_are_ignored() {
        let raw = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"late\"}}]}\n\n",
        );
        assert_eq!(completion(raw).message.content, "x");
    }

    #[test]
    fn error_message_prefers_the_human_text() {
        let nested: Value =
            serde_json::from_str(r#"{"error":{"message":"Invalid model","code":"bad"}}"#).unwrap();
        assert_eq!(error_message(&nested), "Invalid model");
        let detail: Value = serde_json::from_str(r#"{"detail":"Not Found"}"#).unwrap();
        assert_eq!(error_message(&detail), "Not Found");
        let other: Value = serde_json::from_str(r#"{"code":5}"#).unwrap();
        assert_eq!(error_message(&other), r#"{"code":5}"#);
    }

    #[test]
    fn excerpt_cuts_on_a_char_boundary_and_collapses_whitespace() {
        assert_eq!(excerpt("a \n  b", 10), "a b");
        assert_eq!(excerpt("ééééé", 3), "ééé…");
    }

    proptest! {
        #[test]
        fn read_boundaries_do_not_change_the_result(piece in 1usize..64) {
            let (deltas, completion) = accumulate_in_pieces(DEEPSEEK_STREAM, piece);
            let (expected_deltas, expected) = accumulate_in_pieces(DEEPSEEK_STREAM, DEEPSEEK_STREAM.len());
            prop_assert_eq!(deltas, expected_deltas);
            prop_assert_eq!(completion.ok(), expected.ok());
        }
    }
}
