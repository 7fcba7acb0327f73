//! `recall`: searches the notes `remember` kept, this workspace's first (SPEC §7). Read-only,
//! so it is offered in plan mode too.

use cwcode_protocol::{MemoryScope, RecalledNote};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RecallArgs {
    query: String,
    /// Default 5, max 20.
    limit: Option<u32>,
}

impl ToolArgs for RecallArgs {}

pub struct Recall;

impl Tool for Recall {
    type Args = RecallArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "recall",
            description: "Searches the notes saved with remember, best match first.",
            effect: Effect::ReadOnly,
        }
    }

    async fn call(&self, args: RecallArgs, context: &ToolContext) -> Result<String, ToolError> {
        let memory = context.memory()?;
        let workspace = context.workspace.root().display().to_string();
        let recalled = memory
            .store
            .recall(
                &args.query,
                args.limit,
                Some(workspace),
                memory.embedder.as_deref(),
            )
            .await
            .map_err(|error| ToolError::new(error.to_string()))?;
        if recalled.is_empty() {
            return Ok(format!(
                "no note matches `{}`; try other words, or fewer",
                args.query
            ));
        }
        Ok(recalled.iter().map(render).collect::<Vec<_>>().join("\n"))
    }
}

/// `#12 2026-12-01 [style] the text`, with the workspace for a note from another one.
fn render(recalled: &RecalledNote) -> String {
    let note = &recalled.note;
    let day = note.created.get(..10).unwrap_or(&note.created);
    let mut line = format!("#{} {day}", note.id);
    if !note.tags.is_empty() {
        line.push_str(&format!(" [{}]", note.tags.join(", ")));
    }
    if recalled.scope == MemoryScope::Global {
        line.push_str(&format!(" (from {})", note.workspace));
    }
    line.push(' ');
    line.push_str(&note.text);
    line
}

#[cfg(test)]
mod tests {
    use crate::memory::NewNote;
    use crate::tools::{Registry, test_memory_context};

    #[tokio::test]
    async fn notes_come_back_best_first_marked_when_from_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let (context, store) = test_memory_context(dir.path());
        let here = context.workspace.root().display().to_string();
        for (text, workspace) in [
            ("lint with clippy before every commit", "/elsewhere"),
            ("this repo lints with clippy pedantic", here.as_str()),
            ("unrelated: the coffee machine is on floor 2", here.as_str()),
        ] {
            store
                .remember(
                    NewNote {
                        text: text.to_owned(),
                        tags: vec!["lint".to_owned()],
                        workspace: workspace.to_owned(),
                        session_id: None,
                    },
                    None,
                )
                .await
                .unwrap();
        }
        let registry = Registry::standard();

        let result = registry
            .call("recall", r#"{"query": "clippy"}"#, &context)
            .await
            .unwrap()
            .text;

        let lines: Vec<&str> = result.lines().collect();
        assert_eq!(lines.len(), 2, "{result}");
        assert!(
            lines[0].ends_with("[lint] this repo lints with clippy pedantic"),
            "{result}"
        );
        assert!(
            lines[1].ends_with("[lint] (from /elsewhere) lint with clippy before every commit"),
            "{result}"
        );
        assert!(!registry.get("recall").unwrap().effect.mutates());

        let none = registry
            .call("recall", r#"{"query": "kubernetes"}"#, &context)
            .await
            .unwrap()
            .text;
        assert_eq!(
            none,
            "no note matches `kubernetes`; try other words, or fewer"
        );
    }

    #[tokio::test]
    async fn without_a_memory_store_the_model_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let error = Registry::standard()
            .call(
                "recall",
                r#"{"query": "x"}"#,
                &crate::tools::test_context(dir.path()),
            )
            .await
            .unwrap_err();
        assert!(error.message.contains("memory is not available"), "{error}");
    }
}
