//! The conversation as the model sees it, rebuilt from the journal. History is append-only: each
//! request is the previous one plus new messages (SPEC §6).

use cwcode_protocol::{Event, EventKind, Mode, ToolCall};

use crate::agent::instructions;
use crate::provider::{AssistantMessage, Message};

/// The model's view of a session, owned by the session's runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// The system prompt first, then everything said since.
    pub messages: Vec<Message>,
    /// Whether the model was last told that plan mode is on.
    pub plan_announced: bool,
    /// The previous request's body, to measure the prefix the next one shares with it.
    pub last_request: Option<Vec<u8>>,
    /// Set once the provider demanded its reasoning back (journalled, so it survives restarts).
    pub keep_reasoning: bool,
    /// The project instructions the model was last given: those of the system prompt, or the
    /// last change announced since.
    pub instructions: String,
    /// Where each prompt's turn begins in `messages`, to cut the history back on a rewind.
    turn_starts: Vec<TurnStart>,
    /// What each rewind removed, newest last; an undo puts it back. Cleared by the next prompt.
    rewound: Vec<Rewound>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct TurnStart {
    turn: u32,
    index: usize,
    plan_announced: bool,
    instructions: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rewound {
    messages: Vec<Message>,
    turn_starts: Vec<TurnStart>,
    plan_announced: bool,
    instructions: String,
}

impl Conversation {
    /// Folds journalled events into the conversation, after the system prompt.
    pub fn rebuild(system_prompt: &str, events: &[Event]) -> Self {
        let mut conversation = Self {
            messages: vec![Message::System {
                content: system_prompt.to_owned(),
            }],
            plan_announced: false,
            last_request: None,
            keep_reasoning: false,
            instructions: instructions::in_prompt(system_prompt).to_owned(),
            turn_starts: Vec::new(),
            rewound: Vec::new(),
        };
        // A sub-agent's events belong to its own context: only its answer, the result of the
        // parent's `task` call, is part of this one.
        for event in events.iter().filter(|event| event.parent_call_id.is_none()) {
            conversation.apply(&event.kind);
        }
        conversation
    }

    /// Applies what one event contributes to the conversation, if anything.
    pub fn apply(&mut self, kind: &EventKind) {
        let message = match kind {
            EventKind::TurnStarted { turn, prompt } => {
                self.rewound.clear();
                self.turn_starts.push(TurnStart {
                    turn: *turn,
                    index: self.messages.len(),
                    plan_announced: self.plan_announced,
                    instructions: self.instructions.clone(),
                });
                Message::User {
                    content: prompt.clone(),
                }
            }
            EventKind::ReasoningKept { .. } => {
                self.keep_reasoning = true;
                return;
            }
            EventKind::Rewound { result } => {
                self.rewind_to_before(result.turn);
                return;
            }
            EventKind::RewindUndone { .. } => {
                if let Some(tail) = self.rewound.pop() {
                    self.messages.extend(tail.messages);
                    self.turn_starts.extend(tail.turn_starts);
                    self.plan_announced = tail.plan_announced;
                    self.instructions = tail.instructions;
                }
                return;
            }
            EventKind::InstructionsChanged { instructions, .. } => {
                self.instructions.clone_from(instructions);
                Message::User {
                    content: instructions::notice(instructions),
                }
            }
            EventKind::FilesChanged { text, .. } => Message::User {
                content: text.clone(),
            },
            EventKind::ModeNotice { mode, text } => {
                self.plan_announced = *mode == Mode::Plan;
                Message::User {
                    content: text.clone(),
                }
            }
            EventKind::AssistantMessage {
                content,
                reasoning,
                tool_calls,
                ..
            } => Message::Assistant(AssistantMessage {
                content: content.clone(),
                reasoning: reasoning.clone(),
                tool_calls: tool_calls.clone(),
            }),
            EventKind::ToolCallFinished {
                call_id, output, ..
            } => Message::Tool {
                tool_call_id: call_id.clone(),
                content: output.clone(),
            },
            EventKind::Compacted {
                summary,
                kept_messages,
                ..
            } => {
                let kept = (*kept_messages as usize).min(self.messages.len().saturating_sub(1));
                let cut = self.messages.len() - kept;
                let recent = self.messages.split_off(cut);
                self.messages.truncate(1);
                self.messages.push(Message::User {
                    content: summary_message(summary),
                });
                // A change of the instructions folded into the summary must not be lost with it.
                let changed = match &self.messages[0] {
                    Message::System { content } => {
                        instructions::in_prompt(content) != self.instructions
                    }
                    _ => false,
                };
                let notice = Message::User {
                    content: instructions::notice(&self.instructions),
                };
                if changed && !recent.contains(&notice) {
                    self.messages.push(notice);
                }
                let shift = self.messages.len();
                self.messages.extend(recent);
                // Turns folded into the summary can no longer be cut out of the history.
                self.turn_starts.retain(|start| start.index >= cut);
                for start in &mut self.turn_starts {
                    start.index = start.index - cut + shift;
                }
                return;
            }
            _ => return,
        };
        self.messages.push(message);
    }
}

impl Conversation {
    /// Drops prompt `turn` and everything after it, keeping it for an undo.
    fn rewind_to_before(&mut self, turn: u32) {
        let position = self.turn_starts.iter().position(|start| start.turn >= turn);
        let tail = match position {
            Some(position) => {
                let start = self.turn_starts[position].clone();
                let tail = Rewound {
                    messages: self.messages.split_off(start.index),
                    turn_starts: self.turn_starts.split_off(position),
                    plan_announced: self.plan_announced,
                    instructions: self.instructions.clone(),
                };
                self.plan_announced = start.plan_announced;
                self.instructions = start.instructions;
                tail
            }
            None => Rewound {
                messages: Vec::new(),
                turn_starts: Vec::new(),
                plan_announced: self.plan_announced,
                instructions: self.instructions.clone(),
            },
        };
        self.rewound.push(tail);
    }
}

/// How a compaction summary is put to the model.
pub fn summary_message(summary: &str) -> String {
    format!(
        "[cwcode] Summary of the earlier conversation, compacted to fit the context window:\n{summary}"
    )
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
            parent_call_id: None,
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
                    stats: None,
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
        let history = Conversation::rebuild("sys", &events).messages;
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
    fn a_mode_notice_is_a_user_message_and_tracks_plan_mode() {
        let notice = |mode| EventKind::ModeNotice {
            mode,
            text: format!("now {mode}"),
        };
        let conversation = Conversation::rebuild("sys", &[event(1, notice(Mode::Plan))]);
        assert!(conversation.plan_announced);
        assert_eq!(
            conversation.messages[1],
            Message::User {
                content: "now plan".into()
            }
        );
        let conversation = Conversation::rebuild(
            "sys",
            &[event(1, notice(Mode::Plan)), event(2, notice(Mode::Code))],
        );
        assert!(!conversation.plan_announced);
    }

    #[test]
    fn compaction_keeps_the_system_prompt_a_summary_and_the_recent_messages() {
        let events = [
            event(
                1,
                EventKind::TurnStarted {
                    turn: 1,
                    prompt: "old".into(),
                },
            ),
            event(
                2,
                EventKind::TurnStarted {
                    turn: 2,
                    prompt: "recent".into(),
                },
            ),
            event(
                3,
                EventKind::Compacted {
                    summary: "we did old things".into(),
                    kept_messages: 1,
                    tokens_before: 100,
                    tokens_after: 40,
                },
            ),
        ];
        let messages = Conversation::rebuild("sys", &events).messages;
        assert_eq!(messages.len(), 3);
        assert_eq!(
            messages[0],
            Message::System {
                content: "sys".into()
            }
        );
        assert!(
            matches!(&messages[1], Message::User { content } if content.contains("we did old things"))
        );
        assert_eq!(
            messages[2],
            Message::User {
                content: "recent".into()
            }
        );
    }

    #[test]
    fn a_rewind_cuts_the_history_back_and_an_undo_restores_it() {
        use cwcode_protocol::RewindResult;
        let rewind = |turn| RewindResult {
            turn,
            ..RewindResult::default()
        };
        let mut events = vec![
            event(
                1,
                EventKind::TurnStarted {
                    turn: 1,
                    prompt: "one".into(),
                },
            ),
            event(
                2,
                EventKind::TurnStarted {
                    turn: 2,
                    prompt: "two".into(),
                },
            ),
            event(
                3,
                EventKind::TurnStarted {
                    turn: 3,
                    prompt: "three".into(),
                },
            ),
            event(4, EventKind::Rewound { result: rewind(2) }),
        ];
        let rewound = Conversation::rebuild("sys", &events);
        assert_eq!(rewound.messages.len(), 2, "{:?}", rewound.messages);
        events.push(event(5, EventKind::RewindUndone { result: rewind(2) }));
        let undone = Conversation::rebuild("sys", &events);
        assert_eq!(undone.messages.len(), 4);
        assert_eq!(
            undone.messages[3],
            Message::User {
                content: "three".into()
            }
        );
        events.push(event(
            6,
            EventKind::TurnStarted {
                turn: 4,
                prompt: "four".into(),
            },
        ));
        events.push(event(7, EventKind::RewindUndone { result: rewind(2) }));
        assert_eq!(
            Conversation::rebuild("sys", &events).messages.len(),
            5,
            "a new prompt ends undo"
        );
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
