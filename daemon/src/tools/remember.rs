//! `remember`: keeps a note for later sessions in the memory store (SPEC §7), with the
//! workspace and session it came from. It writes outside the workspace, so it counts as
//! mutating: code mode asks first.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};
use crate::memory::NewNote;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RememberArgs {
    /// Self-contained: it is read without this conversation.
    text: String,
    tags: Option<Vec<String>>,
}

impl ToolArgs for RememberArgs {}

pub struct Remember;

impl Tool for Remember {
    type Args = RememberArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "remember",
            description: "Saves a note for later sessions: a fact, decision or user preference.",
            effect: Effect::OutsideWorkspace,
        }
    }

    async fn call(&self, args: RememberArgs, context: &ToolContext) -> Result<String, ToolError> {
        let memory = context.memory()?;
        let note = memory
            .store
            .remember(
                NewNote {
                    text: args.text,
                    tags: args.tags.unwrap_or_default(),
                    workspace: context.workspace.root().display().to_string(),
                    session_id: Some(memory.session_id.clone()),
                },
                memory.embedder.as_deref(),
            )
            .await
            .map_err(|error| ToolError::new(error.to_string()))?;
        Ok(format!("remembered as note #{}", note.id))
    }
}

#[cfg(test)]
mod tests {
    use crate::tools::{Registry, test_memory_context};

    #[tokio::test]
    async fn a_note_is_stored_with_the_workspace_and_session() {
        let dir = tempfile::tempdir().unwrap();
        let (context, store) = test_memory_context(dir.path());
        let registry = Registry::standard();

        let result = registry
            .call(
                "remember",
                r#"{"text": "the user wants British spelling", "tags": ["style"]}"#,
                &context,
            )
            .await
            .unwrap();

        let notes = store.list(None, None).await.unwrap();
        assert_eq!(result.text, format!("remembered as note #{}", notes[0].id));
        assert_eq!(notes[0].text, "the user wants British spelling");
        assert_eq!(notes[0].tags, ["style"]);
        assert_eq!(
            notes[0].workspace,
            context.workspace.root().display().to_string()
        );
        assert_eq!(notes[0].session_id.as_deref(), Some("test-session"));
        // It asks in code mode, but no workspace snapshot is taken for it.
        let effect = registry.get("remember").unwrap().effect;
        assert!(effect.mutates() && !effect.changes_workspace());
    }

    #[tokio::test]
    async fn a_note_too_long_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let (context, _store) = test_memory_context(dir.path());
        let text = "x".repeat(crate::memory::MAX_NOTE_BYTES + 1);
        let arguments = serde_json::json!({ "text": text }).to_string();

        let error = Registry::standard()
            .call("remember", &arguments, &context)
            .await
            .unwrap_err();

        assert!(
            error.message.contains("split it into several notes"),
            "{error}"
        );
    }
}
