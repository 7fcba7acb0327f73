//! Event → update translation: each daemon event becomes the `session/update`s an editor shows.
//! Pure and synchronous; the feed decides where they go and what to do about turn ends and
//! approvals.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    Content, ContentBlock, ContentChunk, CurrentModeUpdate, Diff, Plan, PlanEntry,
    PlanEntryPriority, PlanEntryStatus, SessionUpdate, TextContent, ToolCall, ToolCallContent,
    ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use cwcode_protocol::event::retrying_line;
use cwcode_protocol::{ApprovalDecision, EventKind, TodoItem, TodoStatus, Usage};
use serde_json::Value;

/// Output of one call kept for its `content`: ACP replaces a call's content with each update,
/// so the bridge resends what it holds; past this only the tail is kept.
const OUTPUT_SHOWN_BYTES: usize = 32 * 1024;
/// Calls remembered per session between their start and their end; a runaway model cannot grow
/// this without bound (the oldest are forgotten and then shown without their arguments).
const CALLS_REMEMBERED: usize = 256;

/// What the translator remembers of a running call.
#[derive(Debug, Clone)]
struct CallInfo {
    /// The edit as a diff, when the call is a file change.
    diff: Option<Diff>,
    output: String,
}

/// One session's translation state.
#[derive(Debug)]
pub struct Translator {
    workspace: PathBuf,
    calls: HashMap<String, CallInfo>,
    /// Order of `calls`, oldest first, to forget the oldest.
    call_order: Vec<String>,
    /// Approval request id → tool call id.
    approvals: HashMap<String, String>,
    /// Usage of the newest model answer: its prompt plus completion is the context in use.
    last_answer: Option<Usage>,
}

impl Translator {
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
            calls: HashMap::new(),
            call_order: Vec::new(),
            approvals: HashMap::new(),
            last_answer: None,
        }
    }

    /// Tokens in the context after the newest answer.
    pub fn context_used(&self) -> u64 {
        self.last_answer
            .map_or(0, |usage| usage.prompt_tokens + usage.completion_tokens)
    }

    /// The updates `event` becomes. Turn ends, profile changes and approvals need the daemon or
    /// the editor and are handled by the feed; they yield only what can be said from here.
    pub fn translate(&mut self, event: &EventKind) -> Vec<SessionUpdate> {
        match event {
            EventKind::TurnStarted { prompt, .. } => vec![user_chunk(prompt)],
            EventKind::AssistantDelta { text } => vec![SessionUpdate::AgentMessageChunk(
                ContentChunk::new(text_block(text)),
            )],
            EventKind::ReasoningDelta { text } => vec![thought(text)],
            EventKind::AssistantMessage { usage, .. } => {
                if let Some(usage) = usage {
                    self.last_answer = Some(*usage);
                }
                Vec::new()
            }
            EventKind::StreamRestarted { reason } => vec![thought(&format!(
                "\n(the provider connection broke and the answer starts over: {reason})\n"
            ))],
            EventKind::ProviderRetrying {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            } => vec![thought(&format!(
                "\n({})\n",
                retrying_line(*attempt, *max_attempts, *delay_ms, reason)
            ))],
            EventKind::StormBroken { explanation, .. } => vec![thought(&format!(
                "\n(stopped a loop of identical failing calls: {explanation})\n"
            ))],
            EventKind::Compacted {
                tokens_before,
                tokens_after,
                ..
            } => vec![thought(&format!(
                "\n(older turns summarised: {tokens_before} → {tokens_after} tokens)\n"
            ))],
            EventKind::Error { message } => vec![thought(&format!("\n(cwcode: {message})\n"))],
            EventKind::TodoUpdated { todos } => vec![plan(todos)],
            EventKind::ModeChanged { mode } => vec![SessionUpdate::CurrentModeUpdate(
                CurrentModeUpdate::new(mode.as_str()),
            )],
            EventKind::ToolCallStarted {
                call_id,
                name,
                arguments,
            } => vec![self.started(call_id, name, arguments)],
            EventKind::ToolOutputDelta { call_id, text } => self.output(call_id, text),
            EventKind::ToolOutputSpilled {
                call_id,
                path,
                total_bytes,
                ..
            } => self.output(
                call_id,
                &format!("\n[{total_bytes} bytes in all; the whole output is in {path}]\n"),
            ),
            EventKind::ToolCallFinished {
                call_id,
                output,
                is_error,
                ..
            } => vec![self.finished(call_id, output, *is_error)],
            EventKind::ApprovalRequested {
                request_id,
                call_id,
                ..
            } => {
                self.approvals.insert(request_id.clone(), call_id.clone());
                vec![update(
                    call_id,
                    ToolCallUpdateFields::new().status(ToolCallStatus::Pending),
                )]
            }
            EventKind::ApprovalResolved {
                request_id,
                decision,
                reason,
                ..
            } => {
                let Some(call_id) = self.approvals.remove(request_id) else {
                    return Vec::new();
                };
                let fields = match decision {
                    ApprovalDecision::Approve | ApprovalDecision::Always => {
                        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress)
                    }
                    ApprovalDecision::Deny => {
                        let said = reason.as_deref().unwrap_or("no reason given");
                        ToolCallUpdateFields::new()
                            .status(ToolCallStatus::Failed)
                            .content(vec![text_content(&format!("denied: {said}"))])
                    }
                };
                vec![update(&call_id, fields)]
            }
            EventKind::TurnFinished { .. } => {
                self.calls.clear();
                self.call_order.clear();
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn started(&mut self, call_id: &str, name: &str, arguments: &str) -> SessionUpdate {
        let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        let paths = touched_paths(name, &args, &self.workspace);
        let diff = paths.first().and_then(|path| edit_diff(name, &args, path));
        let mut call = ToolCall::new(call_id.to_owned(), title(name, &args))
            .name(name.to_owned())
            .kind(kind(name))
            .status(ToolCallStatus::Pending)
            .locations(paths.into_iter().map(ToolCallLocation::new).collect())
            .raw_input(args);
        if let Some(diff) = &diff {
            call = call.content(vec![ToolCallContent::Diff(diff.clone())]);
        }
        if self.calls.len() >= CALLS_REMEMBERED && !self.call_order.is_empty() {
            let oldest = self.call_order.remove(0);
            self.calls.remove(&oldest);
        }
        self.call_order.push(call_id.to_owned());
        self.calls.insert(
            call_id.to_owned(),
            CallInfo {
                diff,
                output: String::new(),
            },
        );
        SessionUpdate::ToolCall(call)
    }

    fn output(&mut self, call_id: &str, text: &str) -> Vec<SessionUpdate> {
        let Some(call) = self.calls.get_mut(call_id) else {
            return Vec::new();
        };
        call.output.push_str(text);
        keep_tail(&mut call.output, OUTPUT_SHOWN_BYTES);
        let content = call_content(call, &call.output);
        vec![update(
            call_id,
            ToolCallUpdateFields::new()
                .status(ToolCallStatus::InProgress)
                .content(content),
        )]
    }

    fn finished(&mut self, call_id: &str, output: &str, is_error: bool) -> SessionUpdate {
        let status = if is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        let mut shown = output.to_owned();
        keep_tail(&mut shown, OUTPUT_SHOWN_BYTES);
        let content = match self.calls.remove(call_id) {
            Some(call) => call_content(&call, &shown),
            None => vec![text_content(&shown)],
        };
        self.call_order.retain(|id| id != call_id);
        update(
            call_id,
            ToolCallUpdateFields::new()
                .status(status)
                .content(content)
                .raw_output(Value::String(output.to_owned())),
        )
    }
}

fn call_content(call: &CallInfo, output: &str) -> Vec<ToolCallContent> {
    let mut content = Vec::new();
    if let Some(diff) = &call.diff {
        content.push(ToolCallContent::Diff(diff.clone()));
    }
    if !output.is_empty() {
        content.push(text_content(output));
    }
    content
}

fn update(call_id: &str, fields: ToolCallUpdateFields) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call_id.to_owned(), fields))
}

pub fn text_block(text: &str) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text))
}

fn text_content(text: &str) -> ToolCallContent {
    ToolCallContent::Content(Content::new(text_block(text)))
}

pub fn user_chunk(text: &str) -> SessionUpdate {
    SessionUpdate::UserMessageChunk(ContentChunk::new(text_block(text)))
}

pub fn thought(text: &str) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(ContentChunk::new(text_block(text)))
}

/// Cuts `text` to its last `max` bytes (on a character boundary), marking the cut.
fn keep_tail(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut cut = text.len() - max;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.replace_range(..cut, "…");
}

pub fn plan(todos: &[TodoItem]) -> SessionUpdate {
    let entries = todos
        .iter()
        .map(|todo| {
            let status = match todo.status {
                TodoStatus::Pending => PlanEntryStatus::Pending,
                TodoStatus::InProgress => PlanEntryStatus::InProgress,
                TodoStatus::Completed => PlanEntryStatus::Completed,
            };
            PlanEntry::new(todo.content.clone(), PlanEntryPriority::Medium, status)
        })
        .collect();
    SessionUpdate::Plan(Plan::new(entries))
}

pub fn kind(tool: &str) -> ToolKind {
    match tool {
        "read_file" => ToolKind::Read,
        "write_file" | "edit_file" | "edit_lines" => ToolKind::Edit,
        "bash" | "bash_background" => ToolKind::Execute,
        "glob" | "grep" | "ls" | "recall" => ToolKind::Search,
        "web_fetch" => ToolKind::Fetch,
        "todo_write" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

/// A short human title: what the call does, with its main argument.
pub fn title(tool: &str, args: &Value) -> String {
    let field = |name: &str| args.get(name).and_then(Value::as_str);
    let main = match tool {
        "bash" | "bash_background" => field("command").map(|command| format!("`{command}`")),
        "grep" | "glob" => field("pattern").map(|pattern| format!("`{pattern}`")),
        "todo_write" => Some("update the plan".to_owned()),
        _ => field("path").map(str::to_owned),
    };
    let mut title = match main {
        Some(main) => format!("{tool} {main}"),
        None => tool.to_owned(),
    };
    if title.chars().count() > 120 {
        title = title.chars().take(119).collect::<String>() + "…";
    }
    title
}

/// The files a call reads or changes, absolute (ACP locations are absolute paths).
pub fn touched_paths(tool: &str, args: &Value, workspace: &Path) -> Vec<PathBuf> {
    let with_path = matches!(
        tool,
        "read_file" | "write_file" | "edit_file" | "edit_lines" | "ls" | "grep" | "glob"
    );
    let Some(path) = args
        .get("path")
        .and_then(Value::as_str)
        .filter(|_| with_path)
    else {
        return Vec::new();
    };
    vec![workspace.join(path)]
}

/// The change a file-editing call makes, as ACP's diff: the whole new file for `write_file`,
/// the replaced fragments for `edit_file` and `edit_lines` (the bridge does not read files).
fn edit_diff(tool: &str, args: &Value, path: &Path) -> Option<Diff> {
    let text =
        |value: &Value, name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
    match tool {
        "write_file" => Some(Diff::new(path, text(args, "content")?)),
        "edit_file" => {
            let mut old = Vec::new();
            let mut new = Vec::new();
            if let (Some(before), Some(after)) =
                (text(args, "old_string"), text(args, "new_string"))
            {
                old.push(before);
                new.push(after);
            }
            for edit in args
                .get("edits")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let (Some(before), Some(after)) =
                    (text(edit, "old_string"), text(edit, "new_string"))
                {
                    old.push(before);
                    new.push(after);
                }
            }
            (!new.is_empty()).then(|| Diff::new(path, new.join("\n")).old_text(old.join("\n")))
        }
        "edit_lines" => {
            let new: Vec<String> = args
                .get("edits")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|edit| text(edit, "new_text"))
                .collect();
            (!new.is_empty()).then(|| Diff::new(path, new.join("\n")))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn as_json(update: &SessionUpdate) -> Value {
        serde_json::to_value(update).unwrap()
    }

    #[test]
    fn an_edit_shows_as_a_diff_at_its_absolute_location() {
        let mut translator = Translator::new("/w");
        let updates = translator.translate(&EventKind::ToolCallStarted {
            call_id: "c1".into(),
            name: "edit_file".into(),
            arguments: json!({"path": "src/a.rs", "old_string": "a", "new_string": "b"})
                .to_string(),
        });
        let json = as_json(&updates[0]);
        assert_eq!(json["sessionUpdate"], "tool_call");
        assert_eq!(json["kind"], "edit");
        // `pending` is ACP's default status, left out on the wire.
        assert!(json.get("status").is_none_or(|status| status == "pending"));
        assert_eq!(json["locations"][0]["path"], "/w/src/a.rs");
        assert_eq!(json["content"][0]["type"], "diff");
        assert_eq!(json["content"][0]["oldText"], "a");
        assert_eq!(json["content"][0]["newText"], "b");
    }

    #[test]
    fn bash_output_streams_as_content_and_ends_completed() {
        let mut translator = Translator::new("/w");
        translator.translate(&EventKind::ToolCallStarted {
            call_id: "b".into(),
            name: "bash".into(),
            arguments: json!({"command": "ls"}).to_string(),
        });
        let delta = translator.translate(&EventKind::ToolOutputDelta {
            call_id: "b".into(),
            text: "one\n".into(),
        });
        let json = as_json(&delta[0]);
        assert_eq!(json["status"], "in_progress");
        assert_eq!(json["content"][0]["content"]["text"], "one\n");
        let done = translator.translate(&EventKind::ToolCallFinished {
            call_id: "b".into(),
            name: "bash".into(),
            output: "one\nexit 0".into(),
            is_error: false,
        });
        let json = as_json(&done[0]);
        assert_eq!(json["sessionUpdate"], "tool_call_update");
        assert_eq!(json["status"], "completed");
        assert_eq!(json["content"][0]["content"]["text"], "one\nexit 0");
    }

    #[test]
    fn a_denial_fails_the_call_with_the_reason() {
        let mut translator = Translator::new("/w");
        translator.translate(&EventKind::ApprovalRequested {
            request_id: "r1".into(),
            call_id: "c1".into(),
            tool: "bash".into(),
            arguments: "{}".into(),
            suggested_pattern: None,
        });
        let updates = translator.translate(&EventKind::ApprovalResolved {
            request_id: "r1".into(),
            decision: ApprovalDecision::Deny,
            reason: Some("not now".into()),
            pattern: None,
        });
        let json = as_json(&updates[0]);
        assert_eq!(json["status"], "failed");
        assert_eq!(json["content"][0]["content"]["text"], "denied: not now");
    }

    #[test]
    fn todos_become_a_plan_and_modes_a_mode_update() {
        let mut translator = Translator::new("/w");
        let updates = translator.translate(&EventKind::TodoUpdated {
            todos: vec![TodoItem {
                content: "write tests".into(),
                status: TodoStatus::InProgress,
            }],
        });
        let json = as_json(&updates[0]);
        assert_eq!(json["sessionUpdate"], "plan");
        assert_eq!(json["entries"][0]["status"], "in_progress");
        let updates = translator.translate(&EventKind::ModeChanged {
            mode: cwcode_protocol::Mode::Plan,
        });
        assert_eq!(as_json(&updates[0])["currentModeId"], "plan");
    }

    #[test]
    fn long_output_keeps_its_tail() {
        let mut text = "a".repeat(10) + "é" + &"b".repeat(10);
        keep_tail(&mut text, 11);
        assert!(text.starts_with('…') && text.ends_with("bbbb"), "{text}");
    }
}
