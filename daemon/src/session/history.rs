//! The conversation as the model sees it, rebuilt from the journal. History is append-only: each
//! request is the previous one plus new messages (SPEC §6).

use cwcode_protocol::{Event, EventKind, ToolCall};

use crate::provider::{AssistantMessage, Message};

/// Folds journalled events into model messages, after the system prompt.
pub fn rebuild(system_prompt: &str, events: &[Event]) -> Vec<Message> {
    let mut history = vec![Message::System {
        content: system_prompt.to_owned(),
    }];
    for event in events {
        apply(&mut history, &event.kind);
    }
    history
}

/// Appends what one event contributes to the conversation, if anything.
pub fn apply(history: &mut Vec<Message>, kind: &EventKind) {
    match kind {
        EventKind::TurnStarted { prompt, .. } => history.push(Message::User {
            content: prompt.clone(),
        }),
        EventKind::AssistantMessage {
            content,
            reasoning,
            tool_calls,
            ..
        } => history.push(Message::Assistant(AssistantMessage {
            content: content.clone(),
            reasoning: reasoning.clone(),
            tool_calls: tool_calls.clone(),
        })),
        EventKind::ToolCallFinished {
            call_id, output, ..
        } => history.push(Message::Tool {
            tool_call_id: call_id.clone(),
            content: output.clone(),
        }),
        _ => {}
    }
}

/// Tool calls of the last assistant message that have no result yet. Providers reject a history
/// in which a tool call goes unanswered, so a turn that ends early answers these first.
pub fn unanswered_calls(history: &[Message]) -> Vec<ToolCall> {
    let Some(position) = history
        .iter()
        .rposition(|message| matches!(message, Message::Assistant(_)))
    else {
        return Vec::new();
    };
    let Message::Assistant(assistant) = &history[position] else {
        return Vec::new();
    };
    let answered: Vec<&str> = history[position + 1..]
        .iter()
        .filter_map(|message| match message {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assistant
        .tool_calls
        .iter()
        .filter(|call| !answered.contains(&call.id.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, kind: EventKind) -> Event {
        Event {
            seq,
            time: String::new(),
            kind,
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn rebuilds_prompts_answers_and_tool_results_in_order() {
        let events = [
            event(
                1,
                EventKind::TurnStarted {
                    turn: 1,
                    prompt: "hi".into(),
                },
            ),
            event(
                2,
                EventKind::AssistantDelta {
                    text: "ignored".into(),
                },
            ),
            event(
                3,
                EventKind::AssistantMessage {
                    content: String::new(),
                    reasoning: None,
                    tool_calls: vec![call("a")],
                    usage: None,
                },
            ),
            event(
                4,
                EventKind::ToolCallFinished {
                    call_id: "a".into(),
                    name: "bash".into(),
                    output: "ok".into(),
                    is_error: false,
                },
            ),
        ];
        let history = rebuild("sys", &events);
        assert_eq!(history.len(), 4);
        assert_eq!(
            history[1],
            Message::User {
                content: "hi".into()
            }
        );
        assert_eq!(
            history[3],
            Message::Tool {
                tool_call_id: "a".into(),
                content: "ok".into()
            }
        );
        assert!(unanswered_calls(&history).is_empty());
    }

    #[test]
    fn finds_calls_left_without_results() {
        let history = vec![
            Message::System {
                content: "s".into(),
            },
            Message::Assistant(AssistantMessage {
                content: String::new(),
                reasoning: None,
                tool_calls: vec![call("a"), call("b")],
            }),
            Message::Tool {
                tool_call_id: "a".into(),
                content: "done".into(),
            },
        ];
        let missing = unanswered_calls(&history);
        assert_eq!(missing, vec![call("b")]);
    }
}
