//! The tool registry (SPEC §7). A tool is one type implementing [`Tool`], in one file; registering
//! it is one line in [`Registry::standard`].

mod bash;
mod bash_background;
mod edit_file;
mod edit_lines;
mod glob;
mod grep;
pub mod hashline;
mod ls;
mod read_file;
mod registry;
mod todo_write;
mod write_file;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::sandbox::Workspace;

pub use bash_background::BackgroundProcesses;
pub use registry::{Registry, ToolSpec};
pub use todo_write::{TodoItem, TodoList, TodoStatus};

/// The most a tool result may hold, in bytes; the registry cuts anything longer, and tools that
/// can shape their output (a read window, a command's head and tail) stay under it themselves.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// What a tool declares about itself, independent of any call.
#[derive(Debug, Clone, Copy)]
pub struct ToolDefinition {
    pub name: &'static str,
    /// Shown to the model: what it does and when to use it, in as few tokens as do the job.
    pub description: &'static str,
    /// True when a call can change files or run arbitrary commands: such calls need an approval
    /// in `code` mode and are not offered in `plan` mode.
    pub mutates: bool,
}

/// A tool's typed arguments. Their JSON Schema is what the model is shown.
pub trait ToolArgs: DeserializeOwned + JsonSchema + Send + 'static {
    /// Workspace-relative or absolute paths this call will modify, so that they can be
    /// checkpointed before it runs. Tools that cannot know (bash) return nothing.
    fn touched_paths(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}

/// One tool: its definition and its call.
pub trait Tool: Send + Sync + 'static {
    type Args: ToolArgs;

    fn definition(&self) -> ToolDefinition;

    fn call(
        &self,
        args: Self::Args,
        context: &ToolContext,
    ) -> impl Future<Output = Result<String, ToolError>> + Send;
}

/// A failure the model can act on: the message says what went wrong and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub message: String,
}

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// Receives streamed output (a bash command's stdout and stderr as they come).
pub type OutputSink = Arc<dyn Fn(&str) + Send + Sync>;

/// What the session last displayed of each file through `read_file`: line number to the line's
/// exact content. `edit_lines` checks range interiors against it.
#[derive(Debug, Default)]
pub struct ReadLedger {
    files: BTreeMap<PathBuf, BTreeMap<usize, String>>,
}

impl ReadLedger {
    /// Records lines as displayed; a new read of a file replaces what an older read showed of
    /// the same lines and forgets lines that no longer exist.
    pub fn record(
        &mut self,
        path: PathBuf,
        total_lines: usize,
        shown: impl IntoIterator<Item = (usize, String)>,
    ) {
        let lines = self.files.entry(path).or_default();
        lines.retain(|line, _| *line <= total_lines);
        lines.extend(shown);
    }

    pub fn shown(&self, path: &Path, line: usize) -> Option<&str> {
        self.files.get(path)?.get(&line).map(String::as_str)
    }

    /// Forgets a file, after an edit rewrote it.
    pub fn forget(&mut self, path: &Path) {
        self.files.remove(path);
    }
}

/// Everything a call may use. Cheap to clone.
#[derive(Clone)]
pub struct ToolContext {
    pub workspace: Arc<Workspace>,
    pub cancel: CancellationToken,
    pub output: OutputSink,
    pub reads: Arc<Mutex<ReadLedger>>,
    /// Environment variables that hold secrets: never passed to a process a tool starts.
    pub secret_env: Arc<[String]>,
    /// The secrets' values: a variable holding one is not passed to a process either, and the
    /// registry replaces them with `[redacted]` in every result and streamed output.
    pub secret_values: Arc<[String]>,
    /// The session's `bash_background` processes; dropping the table (or `kill_all`) kills them.
    pub background: Arc<BackgroundProcesses>,
    /// The session's todo list, which `todo_write` replaces.
    pub todos: Arc<TodoList>,
}

/// A context on a fresh workspace, for tool tests: nothing read yet, output discarded.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn test_context(root: &Path) -> ToolContext {
    ToolContext {
        workspace: Arc::new(Workspace::new(root).unwrap()),
        cancel: CancellationToken::new(),
        output: Arc::new(|_: &str| {}),
        reads: Arc::new(Mutex::new(ReadLedger::default())),
        secret_env: Arc::from(Vec::new()),
        secret_values: Arc::from(Vec::new()),
        background: Arc::new(BackgroundProcesses::default()),
        todos: Arc::new(TodoList::default()),
    }
}
