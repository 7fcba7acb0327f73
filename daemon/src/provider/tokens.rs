//! Cheap token arithmetic for context management (SPEC §5) and the sticky-prefix measurement
//! (SPEC §6). The estimates are deliberately on the high side: they decide when to compact, and
//! compacting a little early costs less than a request the provider refuses as too long.

use super::{ChatRequest, FunctionSpec, Message};

/// What a message costs beyond its text: the role and the separators of the chat template.
const MESSAGE_OVERHEAD: u64 = 4;
/// The same for a tool call inside an assistant message (its type, the function wrapper).
const TOOL_CALL_OVERHEAD: u64 = 8;
/// The request's own framing: the reply primer the template appends.
const REQUEST_OVERHEAD: u64 = 3;

/// The tokens `message` takes in a request. Reasoning is counted even though a profile may strip
/// it, which keeps the figure an upper bound.
pub fn estimate_tokens(message: &Message) -> u64 {
    MESSAGE_OVERHEAD
        + match message {
            Message::System { content } | Message::User { content } => text_tokens(content),
            Message::Assistant(assistant) => {
                text_tokens(&assistant.content)
                    + assistant.reasoning.as_deref().map_or(0, text_tokens)
                    + assistant
                        .tool_calls
                        .iter()
                        .map(|call| {
                            TOOL_CALL_OVERHEAD
                                + text_tokens(&call.id)
                                + text_tokens(&call.name)
                                + text_tokens(&call.arguments)
                        })
                        .sum::<u64>()
            }
            Message::Tool {
                tool_call_id,
                content,
            } => text_tokens(tool_call_id) + text_tokens(content),
        }
}

/// The tokens of a whole request: every message and every tool definition.
pub fn estimate_request_tokens(request: ChatRequest<'_>) -> u64 {
    REQUEST_OVERHEAD
        + request.messages.iter().map(estimate_tokens).sum::<u64>()
        + request.tools.iter().map(tool_tokens).sum::<u64>()
}

/// The tokens of a request body of `bytes` bytes, when only its size is known: JSON and code
/// run at about four bytes a token.
pub fn estimate_body_tokens(bytes: u64) -> u64 {
    bytes.div_ceil(4)
}

/// The tokens of streamed text, for an answer the provider reported no usage for.
pub fn estimate_text_tokens(text: &str) -> u64 {
    text_tokens(text)
}

fn tool_tokens(tool: &FunctionSpec) -> u64 {
    MESSAGE_OVERHEAD
        + text_tokens(&tool.name)
        + text_tokens(&tool.description)
        + text_tokens(&tool.parameters.to_string())
}

/// About four bytes a token for ASCII (English and code), and a token for each other character:
/// CJK text runs at about one token a character, which bytes/4 would undercount threefold.
fn text_tokens(text: &str) -> u64 {
    let (mut ascii, mut other) = (0u64, 0u64);
    for byte in text.bytes() {
        if byte.is_ascii() {
            ascii += 1;
        } else if byte & 0xC0 != 0x80 {
            // The first byte of a multi-byte character; continuation bytes are not counted.
            other += 1;
        }
    }
    ascii.div_ceil(4) + other
}

/// How many leading bytes two request bodies share: the part of `body` a provider's prefix cache
/// can serve from `previous_body` (SPEC §6).
pub fn shared_prefix_len(previous_body: &[u8], body: &[u8]) -> usize {
    previous_body
        .iter()
        .zip(body)
        .position(|(previous, next)| previous != next)
        .unwrap_or(previous_body.len().min(body.len()))
}

#[cfg(test)]
mod tests {
    use cwcode_protocol::ToolCall;
    use serde_json::json;

    use super::*;
    use crate::provider::AssistantMessage;

    #[test]
    fn ascii_is_about_four_bytes_a_token() {
        assert_eq!(text_tokens(""), 0);
        assert_eq!(text_tokens("abcd"), 1);
        assert_eq!(text_tokens("abcde"), 2);
        assert_eq!(text_tokens(&"x".repeat(4000)), 1000);
    }

    #[test]
    fn other_scripts_count_a_token_a_character() {
        assert_eq!(text_tokens("日本語"), 3);
        // Four ASCII bytes and one other character.
        assert_eq!(text_tokens("héllo"), 1 + 1);
    }

    #[test]
    fn every_part_of_a_message_counts() {
        let user = Message::User {
            content: "x".repeat(40),
        };
        assert_eq!(estimate_tokens(&user), MESSAGE_OVERHEAD + 10);
        let assistant = Message::Assistant(AssistantMessage {
            content: "x".repeat(8),
            reasoning: Some("y".repeat(8)),
            tool_calls: vec![ToolCall {
                id: "call".into(),
                name: "read".into(),
                arguments: "{\"p\":1}".into(),
            }],
        });
        assert_eq!(
            estimate_tokens(&assistant),
            MESSAGE_OVERHEAD + 2 + 2 + TOOL_CALL_OVERHEAD + 1 + 1 + 2
        );
        let tool = Message::Tool {
            tool_call_id: "call".into(),
            content: "z".repeat(12),
        };
        assert_eq!(estimate_tokens(&tool), MESSAGE_OVERHEAD + 1 + 3);
    }

    #[test]
    fn a_request_adds_its_messages_and_tools() {
        let messages = vec![
            Message::System {
                content: "abcd".into(),
            },
            Message::User {
                content: "abcd".into(),
            },
        ];
        let tools = vec![FunctionSpec {
            name: "ls".into(),
            description: "List".into(),
            parameters: json!({"type": "object"}),
        }];
        let request = ChatRequest {
            messages: &messages,
            tools: &tools,
        };
        // {"type":"object"} is 17 bytes.
        assert_eq!(
            estimate_request_tokens(request),
            REQUEST_OVERHEAD + 2 * (MESSAGE_OVERHEAD + 1) + MESSAGE_OVERHEAD + 1 + 1 + 5
        );
    }

    #[test]
    fn shared_prefix_is_the_common_leading_bytes() {
        assert_eq!(shared_prefix_len(b"", b"abc"), 0);
        assert_eq!(shared_prefix_len(b"abc", b"abc"), 3);
        assert_eq!(shared_prefix_len(b"abc]}", b"abc,{}]}"), 3);
        assert_eq!(shared_prefix_len(b"abcdef", b"abc"), 3);
        assert_eq!(shared_prefix_len(b"xbc", b"abc"), 0);
    }
}
