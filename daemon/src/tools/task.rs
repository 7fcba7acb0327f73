//! `task`: hands a sub-task to a sub-agent with a context of its own (SPEC §7) and returns only
//! its final answer. The sub-agent is run by the agent, which sits above the tools: the agent
//! passes a [`SubAgentRunner`] down in the call's [`ToolContext`], so this file never names the
//! agent and the module graph keeps pointing down.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};

/// The most a sub-task's description and prompt may hold: the model writes them, and they become
/// the sub-agent's first request.
const MAX_DESCRIPTION_BYTES: usize = 200;
const MAX_PROMPT_BYTES: usize = 32 * 1024;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskArgs {
    /// A few words, shown to the user.
    description: String,
    /// All it needs to know.
    prompt: String,
}

impl ToolArgs for TaskArgs {}

/// One sub-task as the runner gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubTask {
    pub description: String,
    pub prompt: String,
}

/// Runs a sub-agent to its end; the agent implements it for the call it is running.
pub trait SubAgentRunner: Send + Sync {
    /// The sub-agent's final answer (with a note when it stopped early), or why it could not
    /// give one.
    fn run(&self, task: SubTask) -> BoxFuture<'_, Result<String, ToolError>>;
}

pub struct Task;

impl Tool for Task {
    type Args = TaskArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "task",
            description: "Runs a sub-agent on a self-contained sub-task and returns its answer. It has your tools, not this context.",
            // Its own calls are asked for one by one, as the parent's mode says.
            effect: Effect::ReadOnly,
        }
    }

    async fn call(&self, args: TaskArgs, context: &ToolContext) -> Result<String, ToolError> {
        let Some(runner) = &context.sub_agent else {
            return Err(ToolError::new(
                "task is not available here: a sub-agent cannot start another one; do this part yourself",
            ));
        };
        let description = args.description.trim();
        if description.is_empty() || description.len() > MAX_DESCRIPTION_BYTES {
            return Err(ToolError::new(format!(
                "the description must be a few words (1 to {MAX_DESCRIPTION_BYTES} bytes)"
            )));
        }
        if args.prompt.trim().is_empty() || args.prompt.len() > MAX_PROMPT_BYTES {
            return Err(ToolError::new(format!(
                "the prompt must say what to do in 1 to {MAX_PROMPT_BYTES} bytes; put long material in a file and name it"
            )));
        }
        runner
            .run(SubTask {
                description: description.to_owned(),
                prompt: args.prompt,
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::tools::{Registry, test_context};

    struct Echo;

    impl SubAgentRunner for Echo {
        fn run(&self, task: SubTask) -> BoxFuture<'_, Result<String, ToolError>> {
            Box::pin(async move { Ok(format!("{}: {}", task.description, task.prompt)) })
        }
    }

    #[tokio::test]
    async fn without_a_runner_the_model_is_told_to_do_the_work_itself() {
        let dir = tempfile::tempdir().unwrap();
        let error = Registry::standard()
            .call(
                "task",
                r#"{"description": "find", "prompt": "find x"}"#,
                &test_context(dir.path()),
            )
            .await
            .unwrap_err();
        assert!(error.message.contains("do this part yourself"), "{error}");
    }

    #[tokio::test]
    async fn the_runner_gets_the_sub_task_and_its_answer_is_the_result() {
        let dir = tempfile::tempdir().unwrap();
        let mut context = test_context(dir.path());
        context.sub_agent = Some(Arc::new(Echo));
        let registry = Registry::standard();

        let answer = registry
            .call(
                "task",
                r#"{"description": " find ", "prompt": "find x"}"#,
                &context,
            )
            .await
            .unwrap();
        assert_eq!(answer.text, "find: find x");

        let empty = registry
            .call("task", r#"{"description": "", "prompt": "x"}"#, &context)
            .await
            .unwrap_err();
        assert!(empty.message.contains("a few words"), "{empty}");
    }
}
