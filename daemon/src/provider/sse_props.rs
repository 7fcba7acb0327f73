//! Property tests of the SSE path a provider's answer takes (the event parser the client uses,
//! then [`ChunkAccumulator`]), standing in for a fuzz target: a generated answer cut into
//! arbitrary network reads accumulates to what a reference model says it holds, and arbitrary
//! bytes or near-miss chunks never panic and fail only with typed errors. `PROPTEST_CASES` sets
//! how many cases each property runs.

use std::convert::Infallible;

use crate::proptest_config as config;
use cwcode_protocol::{ToolCall, Usage};
use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde_json::{Value, json};

use super::sse::ChunkAccumulator;
use super::{AssistantMessage, Completion, ProviderError, StreamDelta};

/// What a stream came to: the deltas shown as they arrived, then the answer or the error.
#[derive(Debug)]
struct Outcome {
    deltas: Vec<StreamDelta>,
    result: Result<Completion, Failure>,
}

/// The typed ways a stream can fail; anything else would be a bug.
#[derive(Debug)]
enum Failure {
    /// The event parser refused the bytes (invalid UTF-8, say).
    Event(EventStreamError<Infallible>),
    Provider(ProviderError),
}

/// Runs `reads` through the same SSE parser and accumulator the client uses, stopping at the
/// first error as the client does.
fn accumulate(reads: Vec<Vec<u8>>) -> Outcome {
    let reads = reads.into_iter().map(Ok::<_, Infallible>);
    let events = futures::executor::block_on(
        futures::stream::iter(reads)
            .eventsource()
            .collect::<Vec<_>>(),
    );
    let mut accumulator = ChunkAccumulator::default();
    let mut deltas = Vec::new();
    for event in events {
        let pushed = match event {
            Ok(event) => accumulator.push(&event.data).map_err(Failure::Provider),
            Err(error) => Err(Failure::Event(error)),
        };
        match pushed {
            Ok(more) => deltas.extend(more),
            Err(failure) => {
                return Outcome {
                    deltas,
                    result: Err(failure),
                };
            }
        }
        if accumulator.is_done() {
            break;
        }
    }
    Outcome {
        deltas,
        result: accumulator.finish().map_err(Failure::Provider),
    }
}

/// `bytes` cut at the given points, as network reads.
fn cut(bytes: &[u8], points: &[Index]) -> Vec<Vec<u8>> {
    let mut offsets: Vec<usize> = points
        .iter()
        .map(|point| point.index(bytes.len() + 1))
        .collect();
    offsets.push(0);
    offsets.push(bytes.len());
    offsets.sort_unstable();
    offsets.dedup();
    offsets
        .windows(2)
        .map(|pair| bytes[pair[0]..pair[1]].to_vec())
        .collect()
}

fn assert_typed(failure: &Failure) -> Result<(), TestCaseError> {
    match failure {
        Failure::Event(EventStreamError::Utf8(_) | EventStreamError::Parser(_)) => Ok(()),
        Failure::Provider(ProviderError::Protocol(_) | ProviderError::Stream(_)) => Ok(()),
        other => Err(TestCaseError::fail(format!("untyped failure: {other:?}"))),
    }
}

#[derive(Debug, Clone)]
enum Piece {
    Content(String),
    Reasoning(String),
    KeepAlive,
}

#[derive(Debug, Clone)]
struct Call {
    name: String,
    /// The arguments' JSON text, in the pieces it is streamed in.
    fragments: Vec<String>,
}

/// One generated answer and how its server writes it.
#[derive(Debug, Clone)]
struct Answer {
    pieces: Vec<Piece>,
    calls: Vec<Call>,
    usage: Option<(u64, u64)>,
    crlf: bool,
    space_after_colon: bool,
    done: bool,
}

fn text() -> impl Strategy<Value = String> {
    "(?s).{0,12}"
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        3 => text().prop_map(Piece::Content),
        2 => text().prop_map(Piece::Reasoning),
        1 => Just(Piece::KeepAlive),
    ]
}

/// A call whose arguments, `{"text": …}`, are cut at arbitrary character boundaries.
fn call() -> impl Strategy<Value = Call> {
    ("[a-z_]{1,10}", text(), vec(any::<Index>(), 0..4)).prop_map(|(name, value, points)| {
        let arguments = json!({ "text": value }).to_string();
        let boundaries: Vec<usize> = arguments.char_indices().map(|(at, _)| at).collect();
        let mut cuts: Vec<usize> = points
            .iter()
            .map(|point| boundaries[point.index(boundaries.len())])
            .chain([0, arguments.len()])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let fragments = cuts
            .windows(2)
            .map(|pair| arguments[pair[0]..pair[1]].to_owned())
            .collect();
        Call { name, fragments }
    })
}

fn answer() -> impl Strategy<Value = Answer> {
    (
        vec(piece(), 0..8),
        vec(call(), 0..3),
        proptest::option::of((0u64..1_000_000, 0u64..100_000)),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(pieces, calls, usage, crlf, space_after_colon, done)| Answer {
                pieces,
                calls,
                usage,
                crlf,
                space_after_colon,
                done,
            },
        )
}

impl Answer {
    /// The bytes a server sends for this answer.
    fn render(&self) -> Vec<u8> {
        let newline = if self.crlf { "\r\n" } else { "\n" };
        let data = if self.space_after_colon {
            "data: "
        } else {
            "data:"
        };
        let frame = |payload: &str| format!("{data}{payload}{newline}{newline}");
        let chunk = |delta: Value| {
            frame(
                &json!({"object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
                .to_string(),
            )
        };
        let mut frames = Vec::new();
        for piece in &self.pieces {
            frames.push(match piece {
                Piece::Content(text) => chunk(json!({ "content": text })),
                Piece::Reasoning(text) => chunk(json!({ "reasoning_content": text })),
                Piece::KeepAlive => format!(": keep-alive{newline}{newline}"),
            });
        }
        for (index, call) in self.calls.iter().enumerate() {
            for (number, fragment) in call.fragments.iter().enumerate() {
                frames.push(chunk(if number == 0 {
                    json!({"tool_calls": [{"index": index, "id": format!("call-{index}"),
                        "type": "function",
                        "function": {"name": call.name, "arguments": fragment}}]})
                } else {
                    json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
                }));
            }
        }
        let mut last = json!({"choices": [{"index": 0, "delta": {},
                                           "finish_reason": self.finish_reason()}]});
        if let Some((prompt, completion)) = self.usage {
            last["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion});
        }
        frames.push(frame(&last.to_string()));
        if self.done {
            frames.push(frame("[DONE]"));
        }
        frames.concat().into_bytes()
    }

    fn finish_reason(&self) -> &'static str {
        if self.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
    }

    /// The reference model: what the accumulator must make of this answer.
    fn expected(&self) -> (Vec<StreamDelta>, Completion) {
        let mut deltas = Vec::new();
        let (mut content, mut reasoning) = (String::new(), String::new());
        for piece in &self.pieces {
            match piece {
                Piece::Content(text) if !text.is_empty() => {
                    content.push_str(text);
                    deltas.push(StreamDelta::Content(text.clone()));
                }
                Piece::Reasoning(text) if !text.is_empty() => {
                    reasoning.push_str(text);
                    deltas.push(StreamDelta::Reasoning(text.clone()));
                }
                _ => {}
            }
        }
        let tool_calls = self
            .calls
            .iter()
            .enumerate()
            .map(|(index, call)| ToolCall {
                id: format!("call-{index}"),
                name: call.name.clone(),
                arguments: call.fragments.concat(),
            })
            .collect();
        let completion = Completion {
            message: AssistantMessage {
                content,
                reasoning: (!reasoning.is_empty()).then_some(reasoning),
                tool_calls,
            },
            usage: self.usage.map(|(prompt, completion)| Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                cached_tokens: 0,
            }),
            finish_reason: Some(self.finish_reason().to_owned()),
        };
        (deltas, completion)
    }
}

/// Keys the accumulator looks at, so arbitrary JSON reaches its deeper paths.
const CHUNK_KEYS: [&str; 24] = [
    "choices",
    "delta",
    "content",
    "reasoning_content",
    "reasoning",
    "tool_calls",
    "function_call",
    "function",
    "name",
    "arguments",
    "index",
    "id",
    "finish_reason",
    "usage",
    "prompt_tokens",
    "completion_tokens",
    "prompt_tokens_details",
    "cached_tokens",
    "prompt_cache_hit_tokens",
    "timings",
    "prompt_n",
    "cache_n",
    "error",
    "message",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|number| json!(number)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        let key = prop_oneof![
            select(&CHUNK_KEYS[..]).prop_map(str::to_owned),
            "[a-z]{1,6}"
        ];
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(key, inner, 0..5).prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// `data:` lines around arbitrary bytes, so the garbage reaches the accumulator.
fn framed_garbage() -> impl Strategy<Value = Vec<u8>> {
    vec(vec(any::<u8>(), 0..64), 1..6).prop_map(|payloads| {
        payloads
            .into_iter()
            .flat_map(|payload| [b"data: ".to_vec(), payload, b"\n\n".to_vec()].concat())
            .collect()
    })
}

/// Chunks that are almost right: the usual envelope around arbitrary values.
fn near_miss_chunk() -> impl Strategy<Value = String> {
    prop_oneof![
        json_value().prop_map(|value| value.to_string()),
        json_value()
            .prop_map(|delta| json!({"choices": [{"index": 0, "delta": delta}]}).to_string()),
        (json_value(), json_value(), json_value()).prop_map(|(calls, reason, usage)| {
            json!({"choices": [{"index": 0, "delta": {"tool_calls": calls},
                                "finish_reason": reason}], "usage": usage})
            .to_string()
        }),
        json_value().prop_map(|function| {
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": function}],
                                          "function_call": function}}]})
            .to_string()
        }),
        Just("[DONE]".to_owned()),
        text(),
    ]
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_answer_in_any_reads_accumulates_to_the_reference(
        answer in answer(),
        points in vec(any::<Index>(), 0..24),
    ) {
        let bytes = answer.render();
        let (expected_deltas, expected) = answer.expected();
        let whole = accumulate(vec![bytes.clone()]);
        let pieces = accumulate(cut(&bytes, &points));
        prop_assert_eq!(&whole.deltas, &expected_deltas);
        prop_assert_eq!(whole.result.as_ref().ok(), Some(&expected), "{:?}", whole.result);
        prop_assert_eq!(&pieces.deltas, &expected_deltas);
        prop_assert_eq!(pieces.result.as_ref().ok(), Some(&expected), "{:?}", pieces.result);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_fail_typed(
        bytes in prop_oneof![vec(any::<u8>(), 0..512), framed_garbage()],
        points in vec(any::<Index>(), 0..16),
    ) {
        for reads in [vec![bytes.clone()], cut(&bytes, &points)] {
            if let Err(failure) = accumulate(reads).result {
                assert_typed(&failure)?;
            }
        }
    }

    #[test]
    fn near_miss_chunks_never_panic_and_fail_typed(chunks in vec(near_miss_chunk(), 1..6)) {
        let mut accumulator = ChunkAccumulator::default();
        for chunk in &chunks {
            if let Err(error) = accumulator.push(chunk) {
                assert_typed(&Failure::Provider(error))?;
                return Ok(());
            }
        }
        if let Err(error) = accumulator.finish() {
            assert_typed(&Failure::Provider(error))?;
        }
    }
}
