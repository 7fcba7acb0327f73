//! A quirk of local servers: when vLLM or llama.cpp runs without (or with the wrong) tool-call
//! parser, a Hermes- or Qwen-style model's calls arrive as text in the content,
//! `<tool_call>{"name": …, "arguments": …}</tool_call>`, and the `tool_calls` field stays
//! empty. Profiles that allow it (`recover_text_tool_calls`) get those calls back.

use cwcode_protocol::ToolCall;
use serde_json::Value;

use super::AssistantMessage;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";
/// More calls than this in one answer are left as text: no model means that many.
const MAX_RECOVERED: usize = 16;

/// Moves the well-formed `<tool_call>` blocks of an answer without tool calls into its tool
/// calls, leaving the rest of the text as the content. Returns how many were recovered; a
/// block that is not a call (no name, not JSON) stays in the text untouched.
pub fn recover_text_tool_calls(message: &mut AssistantMessage, id_prefix: &str) -> usize {
    if !message.tool_calls.is_empty() || !message.content.contains(OPEN) {
        return 0;
    }
    let mut kept = String::new();
    let mut calls = Vec::new();
    let mut rest = message.content.as_str();
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        // A block the answer ended inside of (cut off at the output limit) has no close tag.
        let end = after.find(CLOSE).unwrap_or(after.len());
        let parsed = (calls.len() < MAX_RECOVERED)
            .then(|| parse_call(&after[..end]))
            .flatten();
        let consumed = start + OPEN.len() + (end + CLOSE.len()).min(after.len());
        match parsed {
            Some((name, arguments)) => {
                kept.push_str(&rest[..start]);
                calls.push(ToolCall {
                    id: format!("{id_prefix}{}", calls.len()),
                    name,
                    arguments,
                });
            }
            None => kept.push_str(&rest[..consumed]),
        }
        rest = &rest[consumed..];
    }
    kept.push_str(rest);
    let recovered = calls.len();
    if recovered > 0 {
        message.content = kept.trim().to_owned();
        message.tool_calls = calls;
    }
    recovered
}

/// A stable hash of a request body, for ids that no other request of the session shares.
pub fn request_hash(body: Option<&[u8]>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&body.unwrap_or_default(), &mut hasher);
    std::hash::Hasher::finish(&hasher)
}

/// `{"name": "ls", "arguments": {…}}` (the arguments may also come as a JSON string).
fn parse_call(block: &str) -> Option<(String, String)> {
    let value: Value = serde_json::from_str(block.trim()).ok()?;
    let name = value
        .get("name")?
        .as_str()
        .filter(|name| !name.is_empty())?;
    let arguments = match value.get("arguments").or_else(|| value.get("parameters")) {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    };
    Some((name.to_owned(), arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(content: &str) -> AssistantMessage {
        AssistantMessage {
            content: content.to_owned(),
            ..AssistantMessage::default()
        }
    }

    /// The content of a vLLM answer from Qwen3 served without `--tool-call-parser`, as the
    /// stream delivers it once its deltas are joined.
    const QWEN_UNPARSED: &str = "I'll look at the file first.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/main.rs\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"grep\", \"arguments\": \"{\\\"pattern\\\": \\\"fn main\\\"}\"}\n</tool_call>";

    #[test]
    fn calls_left_in_the_text_by_an_unparsed_qwen_answer_are_recovered() {
        let mut message = answer(QWEN_UNPARSED);
        assert_eq!(recover_text_tool_calls(&mut message, "text_call_7_"), 2);
        assert_eq!(message.content, "I'll look at the file first.");
        assert_eq!(
            message.tool_calls,
            [
                ToolCall {
                    id: "text_call_7_0".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"src/main.rs"}"#.into(),
                },
                ToolCall {
                    id: "text_call_7_1".into(),
                    name: "grep".into(),
                    arguments: r#"{"pattern": "fn main"}"#.into(),
                },
            ]
        );
    }

    #[test]
    fn text_that_only_mentions_the_tag_or_holds_no_call_is_left_alone() {
        for content in [
            "Use a <tool_call> tag to call tools.",
            "<tool_call>not json</tool_call> done",
            "<tool_call>{\"arguments\": {}}</tool_call>",
            "plain answer",
        ] {
            let mut message = answer(content);
            assert_eq!(recover_text_tool_calls(&mut message, "t"), 0, "{content}");
            assert_eq!(message.content, content);
            assert!(message.tool_calls.is_empty());
        }
    }

    #[test]
    fn real_tool_calls_win_and_a_block_cut_off_at_the_end_is_still_read() {
        let mut message = answer("<tool_call>{\"name\": \"ls\"}</tool_call>");
        message.tool_calls.push(ToolCall {
            id: "call_1".into(),
            name: "glob".into(),
            arguments: "{}".into(),
        });
        assert_eq!(recover_text_tool_calls(&mut message, "t"), 0);

        let mut cut = answer("<tool_call>{\"name\": \"ls\", \"arguments\": {}}");
        assert_eq!(recover_text_tool_calls(&mut cut, "t"), 1);
        assert_eq!(cut.tool_calls[0].name, "ls");
        assert_eq!(cut.content, "");
    }
}
