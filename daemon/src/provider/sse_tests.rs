//! The SSE reader and the chunk accumulator against real provider bytes: whole answers, tool
//! calls split across chunks, usage, errors and damaged streams.

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
