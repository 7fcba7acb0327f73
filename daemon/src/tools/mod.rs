//! The tool registry (SPEC §7). A tool is one type implementing [`Tool`], in one file; registering
//! it is one line in [`Registry::standard`].

mod arguments;
mod bash;
mod bash_background;
mod chrome_fetch;
mod edit_file;
mod edit_lines;
mod glob;
mod grep;
pub mod hashline;
mod ls;
mod markdown;
mod read_file;
mod recall;
mod redacting_sink;
mod registry;
mod remember;
mod task;
mod todo_write;
mod web_fetch;
mod write_file;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::memory::{Embedder, MemoryStore};
use crate::sandbox::Workspace;

pub use bash::{CommandRun, run_command};
pub use bash_background::BackgroundProcesses;
pub use registry::{Registry, ToolSpec};
pub use task::{SubAgentRunner, SubTask};
pub use todo_write::{TodoItem, TodoList, TodoStatus};
pub use web_fetch::WebCache;

/// The most a tool result may hold, in bytes; the registry cuts anything longer, and tools that
/// can shape their output (a read window, a command's head and tail) stay under it themselves.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// Which file-editing tools a session offers (SPEC §7.1), from its profile's `edit_tools`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EditTools {
    /// `edit_lines`, and `read_file` lines with their hash anchors.
    Hashline,
    /// `edit_file`, and `read_file` lines as plain `LINE|content`.
    Replace,
    #[default]
    Both,
}

impl EditTools {
    /// Whether the tool of this name is offered under this choice.
    pub fn offers(self, tool: &str) -> bool {
        !matches!(
            (self, tool),
            (Self::Hashline, "edit_file") | (Self::Replace, "edit_lines")
        )
    }

    /// Whether `read_file` shows each line's `LINE:HASH` anchor.
    pub fn anchors_lines(self) -> bool {
        self != Self::Replace
    }
}

/// What a tool declares about itself, independent of any call.
#[derive(Debug, Clone, Copy)]
pub struct ToolDefinition {
    pub name: &'static str,
    /// Shown to the model: what it does and when to use it, in as few tokens as do the job.
    pub description: &'static str,
    pub effect: Effect,
}

/// What a call can change. A mutating call (anything but [`Effect::ReadOnly`]) needs an approval
/// in `code` mode and is not offered in `plan` mode; only one that may change workspace files is
/// checkpointed before it runs, since a snapshot of a big workspace is slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    ReadOnly,
    /// Changes what cwcode keeps outside the workspace (a memory note), never a workspace file.
    OutsideWorkspace,
    /// May change workspace files or run arbitrary commands.
    Workspace,
}

impl Effect {
    pub fn mutates(self) -> bool {
        self != Self::ReadOnly
    }

    pub fn changes_workspace(self) -> bool {
        self == Self::Workspace
    }
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
    /// What a successful call returns: the text for the model (`String`), or a [`ToolOutput`]
    /// when the call has more to tell the harness.
    type Output: Into<ToolOutput>;

    fn definition(&self) -> ToolDefinition;

    fn call(
        &self,
        args: Self::Args,
        context: &ToolContext,
    ) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;
}

/// What a successful call returns: the text the model is shown, and what the harness needs to
/// know about the call besides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    /// The call succeeded but changed nothing (an edit leaving the file as it was): repeated
    /// the same way, it is a loop the storm-breaker stops.
    pub changed_nothing: bool,
}

impl ToolOutput {
    /// A call that changed nothing; `text` says so to the model.
    pub fn no_change(text: String) -> Self {
        Self {
            text,
            changed_nothing: true,
        }
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self {
            text,
            changed_nothing: false,
        }
    }
}

/// A failure the model can act on: the message says what went wrong and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub message: String,
}

impl From<crate::sandbox::PathRefused> for ToolError {
    fn from(refused: crate::sandbox::PathRefused) -> Self {
        Self::new(refused.message)
    }
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
    /// Each file's size and modification time when a tool last read or wrote it, to notice
    /// when another hand changes it.
    stamps: BTreeMap<PathBuf, FileStamp>,
    /// Files found changed on disk since the model last read them.
    changed: BTreeSet<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl FileStamp {
    fn of(path: &Path) -> Option<Self> {
        let metadata = std::fs::metadata(path).ok()?;
        Some(Self {
            len: metadata.len(),
            modified: metadata.modified().ok(),
        })
    }
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
        self.stamp(&path);
        self.changed.remove(&path);
        let lines = self.files.entry(path).or_default();
        lines.retain(|line, _| *line <= total_lines);
        lines.extend(shown);
    }

    fn stamp(&mut self, path: &Path) {
        match FileStamp::of(path) {
            Some(stamp) => {
                self.stamps.insert(path.to_owned(), stamp);
            }
            None => {
                self.stamps.remove(path);
            }
        }
    }

    /// Files that changed on disk since a tool last read or wrote them, each reported once.
    /// What was displayed of them is forgotten: its anchors no longer hold.
    pub fn take_changed(&mut self) -> Vec<PathBuf> {
        let changed: Vec<PathBuf> = self
            .stamps
            .iter()
            .filter(|(path, stamp)| FileStamp::of(path) != Some(**stamp))
            .map(|(path, _)| path.clone())
            .collect();
        for path in &changed {
            self.stamp(path);
            self.files.remove(path);
            self.changed.insert(path.clone());
        }
        changed
    }

    /// Whether the file changed on disk since the model last read it.
    pub fn changed_since_read(&self, path: &Path) -> bool {
        self.changed.contains(path)
    }

    pub fn shown(&self, path: &Path, line: usize) -> Option<&str> {
        self.files.get(path)?.get(&line).map(String::as_str)
    }

    /// Forgets what was displayed of a file after a tool rewrote it; the model knows what it
    /// wrote, so later changes by another hand are still noticed.
    pub fn forget(&mut self, path: &Path) {
        self.files.remove(path);
        self.changed.remove(path);
        self.stamp(path);
    }
}

/// Everything a call may use. Cheap to clone.
#[derive(Clone)]
pub struct ToolContext {
    pub workspace: Arc<Workspace>,
    pub cancel: CancellationToken,
    pub output: OutputSink,
    pub reads: Arc<Mutex<ReadLedger>>,
    /// Variables of the daemon's environment passed to the processes a tool starts besides the
    /// allow-listed ones (`policy.tool_env`).
    pub tool_env: Arc<[String]>,
    /// The secrets' values: a variable holding one is not passed to a process either, and the
    /// registry replaces them with `[redacted]` in every result and streamed output.
    pub secret_values: Arc<[String]>,
    /// The session's `bash_background` processes; dropping the table (or `kill_all`) kills them.
    pub background: Arc<BackgroundProcesses>,
    /// The session's todo list, which `todo_write` replaces.
    pub todos: Arc<TodoList>,
    /// The pages the session fetched with `web_fetch`.
    pub web_cache: Arc<WebCache>,
    /// Where `chrome_fetch` finds the user's Chrome (`chrome.endpoint` in config.json).
    pub chrome_endpoint: Option<Arc<str>>,
    /// The edit tools the session's profile offers; `read_file` shows lines to match.
    pub edit_tools: EditTools,
    /// The notes `remember` and `recall` use; `None` outside a session.
    pub memory: Option<MemoryAccess>,
    /// Runs `task`'s sub-agent: set by the agent for each call of a session's own turn, `None`
    /// inside a sub-agent (which cannot start another) and outside a session.
    pub sub_agent: Option<Arc<dyn SubAgentRunner>>,
}

/// The memory store, the session that writes to it, and the session's embeddings endpoint
/// when its profile names one.
#[derive(Clone)]
pub struct MemoryAccess {
    pub store: Arc<MemoryStore>,
    pub session_id: String,
    pub embedder: Option<Arc<dyn Embedder>>,
}

impl ToolContext {
    /// A context of its own on `workspace`, outside any session: nothing read yet, output
    /// discarded, no secrets, no todo listener. For tests and benchmarks.
    pub fn standalone(workspace: Workspace) -> Self {
        Self {
            workspace: Arc::new(workspace),
            cancel: CancellationToken::new(),
            output: Arc::new(|_: &str| {}),
            reads: Arc::new(Mutex::new(ReadLedger::default())),
            tool_env: Arc::from(Vec::new()),
            secret_values: Arc::from(Vec::new()),
            background: Arc::new(BackgroundProcesses::default()),
            todos: Arc::new(TodoList::default()),
            memory: None,
            web_cache: Arc::new(WebCache::default()),
            chrome_endpoint: None,
            edit_tools: EditTools::default(),
            sub_agent: None,
        }
    }

    fn memory(&self) -> Result<&MemoryAccess, ToolError> {
        self.memory.as_ref().ok_or_else(|| {
            ToolError::new("memory is not available here: remember and recall work in a session")
        })
    }
}

/// A context on a fresh workspace, for tool tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn test_context(root: &Path) -> ToolContext {
    ToolContext::standalone(Workspace::new(root).unwrap())
}

/// A context with a memory store of its own under `root`, for the memory tools' tests.
#[cfg(test)]
pub(crate) fn test_memory_context(root: &Path) -> (ToolContext, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new(root.join("memory.db")));
    let mut context = test_context(root);
    context.memory = Some(MemoryAccess {
        store: Arc::clone(&store),
        session_id: "test-session".to_owned(),
        embedder: None,
    });
    (context, store)
}
