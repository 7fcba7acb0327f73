//! Events into entries: what each event kind does to the transcript.

use cwcode_protocol::event::retrying_line;
use cwcode_protocol::{ApprovalDecision, EventKind, RewindResult};

use super::{Approval, Kind, Tone, ToolEntry, Transcript};
use crate::diff;
use crate::format::{self, tokens};

impl Transcript {
    /// Ends the model answer being streamed: its reasoning collapses.
    fn end_answer(&mut self) {
        if let Some(index) = self.reasoning.take()
            && let Some(Kind::Reasoning { done, .. }) = self.touch(index)
        {
            *done = true;
        }
        self.answer = None;
    }

    fn tool(&mut self, call_id: &str) -> Option<&mut ToolEntry> {
        let index = *self.tools.get(call_id)?;
        match self.touch(index)? {
            Kind::Tool(tool) => Some(tool),
            _ => None,
        }
    }

    pub fn apply(&mut self, event: &EventKind) {
        match event {
            EventKind::PromptQueued { turn, prompt } => {
                self.push(Kind::Queued {
                    turn: *turn,
                    text: prompt.clone(),
                });
            }
            EventKind::TurnStarted { turn, prompt } => {
                self.end_answer();
                // A queued prompt moves to where its turn starts.
                if let Some(index) = self.entries.iter().position(
                    |entry| matches!(entry.kind, Kind::Queued { turn: t, .. } if t == *turn),
                ) {
                    self.remove(index);
                }
                self.push(Kind::Prompt(prompt.clone()));
            }
            EventKind::ReasoningDelta { text } => match self.reasoning {
                Some(index) => {
                    if let Some(Kind::Reasoning { text: all, .. }) = self.touch(index) {
                        all.push_str(text);
                    }
                }
                None => {
                    self.reasoning = Some(self.push(Kind::Reasoning {
                        text: text.clone(),
                        done: false,
                    }));
                }
            },
            EventKind::AssistantDelta { text } => {
                // The answer has begun: the thinking before it is over.
                if let Some(index) = self.reasoning
                    && let Some(Kind::Reasoning { done, .. }) = self.touch(index)
                {
                    *done = true;
                }
                match self.answer {
                    Some(index) => {
                        if let Some(Kind::Answer(all)) = self.touch(index) {
                            all.push_str(text);
                        }
                    }
                    None => self.answer = Some(self.push(Kind::Answer(text.clone()))),
                }
            }
            EventKind::AssistantMessage {
                content, reasoning, ..
            } => {
                // Deltas normally brought the text already; a daemon that sent none still shows it.
                if self.reasoning.is_none()
                    && let Some(reasoning) = reasoning.as_ref().filter(|r| !r.trim().is_empty())
                {
                    self.push(Kind::Reasoning {
                        text: reasoning.clone(),
                        done: true,
                    });
                }
                if self.answer.is_none() && !content.trim().is_empty() {
                    self.push(Kind::Answer(content.clone()));
                }
                self.end_answer();
            }
            EventKind::ToolCallsRecovered { call_ids } => {
                // The streamed text held the calls as tags; the answer that follows holds the
                // rest of it, so it replaces what streamed.
                if let Some(index) = self.answer.take() {
                    self.remove(index);
                }
                self.note(
                    format!(
                        "{} tool call(s) read from the answer's text (the server left them there)",
                        call_ids.len()
                    ),
                    Tone::Warn,
                );
            }
            EventKind::StreamRestarted { reason } => {
                // What streamed since the last complete answer is void; the retry streams anew.
                let mut void: Vec<usize> = self.answer.into_iter().chain(self.reasoning).collect();
                void.sort_unstable();
                for index in void.into_iter().rev() {
                    self.remove(index);
                }
                self.answer = None;
                self.reasoning = None;
                self.note(
                    format!("the provider connection broke ({reason}); retrying"),
                    Tone::Warn,
                );
            }
            EventKind::ProviderRetrying {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            } => self.note(
                retrying_line(*attempt, *max_attempts, *delay_ms, reason),
                Tone::Warn,
            ),
            EventKind::ToolCallStarted {
                call_id,
                name,
                arguments,
            } => {
                self.end_answer();
                self.start_tool(call_id, name, arguments);
            }
            EventKind::ToolOutputDelta { call_id, text } => {
                if let Some(tool) = self.tool(call_id) {
                    tool.output.push_str(text);
                }
            }
            EventKind::ToolCallFinished {
                call_id,
                name,
                output,
                is_error,
            } => {
                if !self.tools.contains_key(call_id) {
                    self.start_tool(call_id, name, "");
                }
                let mut arguments = String::new();
                if let Some(tool) = self.tool(call_id) {
                    tool.result = Some((output.clone(), *is_error));
                    if tool.approval == Approval::Waiting {
                        tool.approval = Approval::None;
                    }
                    arguments = tool.arguments.clone();
                }
                self.views.learn(name, &arguments, output, *is_error);
            }
            EventKind::ApprovalRequested {
                request_id,
                call_id,
                tool,
                arguments,
                ..
            } => {
                if !self.tools.contains_key(call_id) {
                    self.start_tool(call_id, tool, arguments);
                }
                self.requests.insert(request_id.clone(), call_id.clone());
                if let Some(tool) = self.tool(call_id) {
                    tool.approval = Approval::Waiting;
                }
            }
            EventKind::ApprovalResolved {
                request_id,
                decision,
                reason,
                pattern,
            } => {
                let Some(call_id) = self.requests.remove(request_id) else {
                    return;
                };
                if let Some(tool) = self.tool(&call_id) {
                    tool.approval = match decision {
                        ApprovalDecision::Approve => Approval::Approved,
                        ApprovalDecision::Always => Approval::Always(pattern.clone()),
                        ApprovalDecision::Deny => Approval::Denied(reason.clone()),
                    };
                }
            }
            EventKind::ModeChanged { mode } => self.note(
                format!(
                    "mode is now {mode}: {}",
                    format::mode_meaning(*mode)
                ),
                Tone::Info,
            ),
            EventKind::Compacted {
                kept_messages,
                tokens_before,
                tokens_after,
                ..
            } => self.note(
                format!(
                    "older turns were summarised to fit the context: {} → {} tokens, the last {kept_messages} messages kept",
                    tokens(*tokens_before),
                    tokens(*tokens_after)
                ),
                Tone::Info,
            ),
            EventKind::CheckpointCreated { turn, files } => self.note(
                format!(
                    "checkpoint of prompt {turn}: {} · /rewind {turn} puts it back",
                    format::files(files, usize::MAX)
                ),
                Tone::Info,
            ),
            EventKind::Rewound { result } => {
                self.note(
                    format!(
                        "rewound to before prompt {}: {} · /rewind undo reverts it",
                        result.turn,
                        format::rewind_effect(result)
                    ),
                    Tone::Warn,
                );
                self.rewind_failures(result);
            }
            EventKind::RewindUndone { result } => {
                self.note(
                    format!(
                        "undid the rewind to before prompt {}: {}",
                        result.turn,
                        format::rewind_effect(result)
                    ),
                    Tone::Warn,
                );
                self.rewind_failures(result);
            }
            EventKind::GoalCycleStarted { cycle, cap } => {
                let again = self.open_goal_cycle.replace(*cycle) == Some(*cycle);
                self.note(
                    if again {
                        format!(
                            "goal loop: cycle {cycle} of at most {cap} starts again: the daemon stopped during it"
                        )
                    } else {
                        format!("goal loop: cycle {cycle} of at most {cap} starts on the open goals")
                    },
                    Tone::Info,
                );
            }
            EventKind::GoalCycleFinished { cycle, done, left } => {
                self.open_goal_cycle = None;
                self.note(
                format!(
                    "goal loop: cycle {cycle} ended · {done} of {} goals done",
                    done + left
                ),
                Tone::Info,
                );
            }
            // The summary says why it stopped and what is left: worth reading, not dimmed.
            EventKind::GoalLoopStopped {
                reason, summary, ..
            } => {
                self.open_goal_cycle = None;
                self.note(
                    if summary.trim().is_empty() {
                        format!("goal loop stopped: {reason}")
                    } else {
                        summary.trim_end().to_owned()
                    },
                    Tone::Warn,
                );
            }
            EventKind::InstructionsChanged { sources, .. } => self.note(
                if sources.is_empty() {
                    "the project instructions were removed; the model is told".to_owned()
                } else {
                    format!(
                        "project instructions changed ({}); the model is given the new ones",
                        sources.join(", ")
                    )
                },
                Tone::Info,
            ),
            EventKind::Error { message } => self.note(message.clone(), Tone::Error),
            EventKind::StormBroken { tool, .. } => self.note(
                format!("the storm-breaker stopped a loop of failing {tool} calls"),
                Tone::Warn,
            ),
            EventKind::TurnFinished {
                turn,
                outcome,
                usage,
                error,
            } => {
                self.end_answer();
                // A turn that ends withdraws the approvals it was waiting for.
                for call_id in std::mem::take(&mut self.requests).into_values() {
                    if let Some(tool) = self.tool(&call_id)
                        && tool.approval == Approval::Waiting
                    {
                        tool.approval = Approval::None;
                    }
                }
                self.push(Kind::TurnEnd {
                    turn: *turn,
                    outcome: *outcome,
                    usage: *usage,
                    error: error.clone(),
                });
            }
            // Shown elsewhere (the status line, the todo list, the app's own note on a profile
            // switch), meant for the model only, or not for this subscriber's transcript.
            EventKind::ModeNotice { .. }
            | EventKind::CallAbandoned { .. }
            | EventKind::FilesChanged { .. }
            | EventKind::TodoUpdated { .. }
            | EventKind::ToolOutputSpilled { .. }
            | EventKind::ProfileChanged { .. }
            | EventKind::ReasoningKept { .. }
            | EventKind::StatusChanged { .. }
            | EventKind::SubscriptionEnded { .. }
            | EventKind::Unknown => {}
        }
    }

    fn rewind_failures(&mut self, result: &RewindResult) {
        if !result.failed.is_empty() {
            self.note(
                format!("could not put back: {}", result.failed.join("; ")),
                Tone::Error,
            );
        }
    }

    fn start_tool(&mut self, call_id: &str, name: &str, arguments: &str) {
        let diff = diff::for_call(name, arguments, &self.views);
        let index = self.push(Kind::Tool(Box::new(ToolEntry {
            name: name.to_owned(),
            arguments: arguments.to_owned(),
            diff,
            output: String::new(),
            result: None,
            approval: Approval::None,
        })));
        self.tools.insert(call_id.to_owned(), index);
    }
}
