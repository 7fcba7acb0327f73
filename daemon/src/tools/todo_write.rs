//! `todo_write`: replaces the session's todo list (SPEC §7), which clients show live. The list is
//! session state, held by a [`TodoList`] that tells the session of each change so that it can
//! publish it as an event.

use std::sync::{Mutex, MutexGuard, PoisonError};

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};

/// More would be a plan, not a list: it belongs in a message.
const MAX_TODOS: usize = 50;
const MAX_CONTENT_CHARS: usize = 300;

// The list travels to clients as it is, so the tool takes the protocol's own type.
pub use cwcode_protocol::{TodoItem, TodoStatus};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TodoWriteArgs {
    /// The whole list, in order; it replaces the previous one.
    pub todos: Vec<TodoItem>,
}

impl ToolArgs for TodoWriteArgs {}

/// Called with the new list each time it changes, while the list is locked, so that changes are
/// seen in order.
pub type TodoListener = Box<dyn Fn(&[TodoItem]) + Send + Sync>;

/// A session's todo list.
#[derive(Default)]
pub struct TodoList {
    items: Mutex<Vec<TodoItem>>,
    on_change: Option<TodoListener>,
}

impl TodoList {
    /// A list starting as `items` (what a resumed session had), which calls `on_change` with
    /// every new version.
    pub fn new(
        items: Vec<TodoItem>,
        on_change: impl Fn(&[TodoItem]) + Send + Sync + 'static,
    ) -> Self {
        Self {
            items: Mutex::new(items),
            on_change: Some(Box::new(on_change)),
        }
    }

    pub fn items(&self) -> Vec<TodoItem> {
        self.lock().clone()
    }

    /// Replaces the list; the listener hears of it only if it changed.
    pub fn replace(&self, items: Vec<TodoItem>) {
        let mut current = self.lock();
        if *current == items {
            return;
        }
        *current = items;
        if let Some(on_change) = &self.on_change {
            on_change(&current);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<TodoItem>> {
        self.items.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub struct TodoWrite;

impl Tool for TodoWrite {
    type Args = TodoWriteArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "todo_write",
            description: "Replace your todo list, which the user sees live. For tasks of several \
                          steps: list them, keep one in_progress, mark each completed as soon as \
                          it is done. Send the whole list each time.",
            effect: Effect::ReadOnly,
        }
    }

    async fn call(&self, args: TodoWriteArgs, context: &ToolContext) -> Result<String, ToolError> {
        if args.todos.len() > MAX_TODOS {
            return Err(ToolError::new(format!(
                "the list has {} todos; at most {MAX_TODOS}: merge small steps into larger ones",
                args.todos.len()
            )));
        }
        let mut todos = args.todos;
        for (index, todo) in todos.iter_mut().enumerate() {
            // One line each, as clients show them.
            todo.content = todo
                .content
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let number = index + 1;
            if todo.content.is_empty() {
                return Err(ToolError::new(format!(
                    "todo {number} has no content: say what the step is in a few words"
                )));
            }
            let chars = todo.content.chars().count();
            if chars > MAX_CONTENT_CHARS {
                return Err(ToolError::new(format!(
                    "todo {number} is {chars} characters long; keep each under \
                     {MAX_CONTENT_CHARS} (details belong in your messages)"
                )));
            }
        }
        let rendered = render(&todos);
        context.todos.replace(todos);
        Ok(rendered)
    }
}

/// `2 of 3 done:` then one line per todo: `[x]` completed, `[>]` in progress, `[ ]` pending.
fn render(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "The todo list is now empty.".to_owned();
    }
    let done = todos
        .iter()
        .filter(|todo| todo.status == TodoStatus::Completed)
        .count();
    let mut rendered = format!("{done} of {} done:", todos.len());
    for todo in todos {
        let mark = match todo.status {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[>]",
            TodoStatus::Completed => "[x]",
        };
        rendered.push_str(&format!("\n{mark} {}", todo.content));
    }
    rendered
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::tools::{Registry, test_context};

    fn item(content: &str, status: TodoStatus) -> TodoItem {
        TodoItem {
            content: content.to_owned(),
            status,
        }
    }

    #[tokio::test]
    async fn the_list_is_replaced_rendered_and_announced() {
        let dir = tempfile::tempdir().unwrap();
        let announced = Arc::new(Mutex::new(Vec::<Vec<TodoItem>>::new()));
        let heard = Arc::clone(&announced);
        let mut context = test_context(dir.path());
        context.todos = Arc::new(TodoList::new(Vec::new(), move |items: &[TodoItem]| {
            heard.lock().unwrap().push(items.to_vec());
        }));
        let registry = Registry::standard();

        let result = registry
            .call(
                "todo_write",
                r#"{"todos": [
                    {"content": "Read the parser", "status": "completed"},
                    {"content": "  Fix the\n bug ", "status": "in_progress"},
                    {"content": "Add a test", "status": "pending"}
                ]}"#,
                &context,
            )
            .await
            .unwrap();

        assert_eq!(
            result.text,
            "1 of 3 done:\n[x] Read the parser\n[>] Fix the bug\n[ ] Add a test"
        );
        let expected = vec![
            item("Read the parser", TodoStatus::Completed),
            item("Fix the bug", TodoStatus::InProgress),
            item("Add a test", TodoStatus::Pending),
        ];
        assert_eq!(context.todos.items(), expected);
        assert_eq!(*announced.lock().unwrap(), std::slice::from_ref(&expected));

        // The same list again changes nothing, so nothing is announced.
        TodoWrite
            .call(
                TodoWriteArgs {
                    todos: expected.clone(),
                },
                &context,
            )
            .await
            .unwrap();
        assert_eq!(announced.lock().unwrap().len(), 1);

        let cleared = TodoWrite
            .call(TodoWriteArgs { todos: Vec::new() }, &context)
            .await
            .unwrap();
        assert_eq!(cleared, "The todo list is now empty.");
        assert!(context.todos.items().is_empty());
        assert_eq!(announced.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn bad_lists_are_refused_and_the_old_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let context = test_context(dir.path());
        let kept = vec![item("Keep me", TodoStatus::Pending)];
        context.todos.replace(kept.clone());
        let registry = Registry::standard();

        let refusals = [
            (
                r#"{"todos": [{"content": "x", "status": "doing"}]}"#.to_owned(),
                "invalid arguments for todo_write: unknown variant `doing`, expected one of \
                 `pending`, `in_progress`, `completed`",
            ),
            (
                r#"{"todos": [{"status": "pending"}]}"#.to_owned(),
                "invalid arguments for todo_write: missing field `content`",
            ),
            (
                r#"{"todos": [{"content": "a", "status": "pending"}, {"content": " \n", "status": "pending"}]}"#
                    .to_owned(),
                "todo 2 has no content: say what the step is in a few words",
            ),
            (
                serde_json::json!({"todos": [{"content": "y".repeat(301), "status": "pending"}]})
                    .to_string(),
                "todo 1 is 301 characters long; keep each under 300",
            ),
            (
                serde_json::json!({
                    "todos": vec![serde_json::json!({"content": "step", "status": "pending"}); 51]
                })
                .to_string(),
                "the list has 51 todos; at most 50",
            ),
        ];
        for (arguments, message) in refusals {
            let error = registry
                .call("todo_write", &arguments, &context)
                .await
                .unwrap_err();
            assert!(error.message.starts_with(message), "{error}");
        }
        assert_eq!(context.todos.items(), kept);
    }

    #[test]
    fn the_schema_names_the_statuses() {
        let registry = Registry::standard();
        let spec = registry.get("todo_write").unwrap();
        assert!(!spec.effect.mutates());
        let status = &spec.parameters["properties"]["todos"]["items"]["properties"]["status"];
        assert_eq!(
            status["enum"],
            serde_json::json!(["pending", "in_progress", "completed"])
        );
    }
}
