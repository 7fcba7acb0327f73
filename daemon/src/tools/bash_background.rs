//! `bash_background`: long-running commands (dev servers, watchers) that outlive the call that
//! starts them (SPEC §7). Each runs like `bash` (sandboxed, without secrets, leading its own
//! process group); its stdout and stderr go, merged, to a bounded buffer that `output` reads from
//! where the last read stopped. The table of processes is session state: dropping it, or
//! [`BackgroundProcesses::kill_all`], kills every group.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::bash::{
    Utf8Stream, ceil_char_boundary, describe_exit, on_read, read_chunk, sleep_until_some,
    spawn_shell,
};
use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};
use crate::sandbox::process::ProcessGroup;

/// Output kept per process: the latest bytes, older ones are dropped.
const KEPT_OUTPUT_BYTES: usize = 256 * 1024;
/// The most one `output` returns: the latest part of what is unread.
const READ_RESULT_BYTES: usize = 32 * 1024;
const READ_CHUNK_BYTES: usize = 8 * 1024;
/// Processes a session may hold, running or finished (a finished one makes room for a new one).
const MAX_PROCESSES: usize = 16;
/// How long `start` waits before answering, so that a command that fails at once (a typo, a
/// port in use) says so in the same call.
const START_SETTLE: Duration = Duration::from_millis(300);
/// Once the command has exited, how long its output may keep coming before it counts as ended:
/// enough to drain the pipes, and a process it left behind holding them does not hold it up.
const EXIT_GRACE: Duration = Duration::from_millis(250);
/// Between SIGTERM and SIGKILL, for servers that shut down cleanly.
const TERM_GRACE: Duration = Duration::from_secs(2);
/// After SIGKILL, the wait for the exit to be recorded.
const KILL_GRACE: Duration = Duration::from_secs(1);
/// A command longer than this is shortened in listings.
const COMMAND_SHOWN_CHARS: usize = 80;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Start,
    Output,
    Kill,
    List,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BashBackgroundArgs {
    /// start (with command), output or kill (with id), list.
    pub action: Action,
    /// Shell command to start.
    pub command: Option<String>,
    /// Id that start returned.
    pub id: Option<u32>,
}

impl ToolArgs for BashBackgroundArgs {}

pub struct BashBackground;

impl Tool for BashBackground {
    type Args = BashBackgroundArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "bash_background",
            description: "Run a long-lived command (dev server, watcher) in the background, in \
                          the workspace root. start {command} returns an id; output {id} returns \
                          its new output since the last read and whether it exited; kill {id} \
                          stops it and everything it started; list shows them all. They are \
                          killed when the session ends. For commands that finish, use bash.",
            effect: Effect::Workspace,
        }
    }

    async fn call(
        &self,
        args: BashBackgroundArgs,
        context: &ToolContext,
    ) -> Result<String, ToolError> {
        let processes = &context.background;
        match args.action {
            Action::Start => {
                let command = args
                    .command
                    .filter(|command| !command.trim().is_empty())
                    .ok_or_else(|| {
                        ToolError::new(
                            "action=start needs `command`: the shell command to run in the \
                             background",
                        )
                    })?;
                processes.start(command, context).await
            }
            Action::Output => processes.output(required_id(args.id, "output")?),
            Action::Kill => processes.kill(required_id(args.id, "kill")?).await,
            Action::List => Ok(processes.list()),
        }
    }
}

fn required_id(id: Option<u32>, action: &str) -> Result<u32, ToolError> {
    id.ok_or_else(|| {
        ToolError::new(format!(
            "action={action} needs `id`: the number that start returned (action=list shows them)"
        ))
    })
}

/// A session's background processes, by id.
#[derive(Default)]
pub struct BackgroundProcesses {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    last_id: u32,
    processes: BTreeMap<u32, Process>,
}

impl BackgroundProcesses {
    /// Kills every process group and forgets them; returns how many there were.
    pub fn kill_all(&self) -> usize {
        let processes = std::mem::take(&mut self.lock().processes);
        processes.len()
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn start(&self, command: String, context: &ToolContext) -> Result<String, ToolError> {
        let (id, shared) = {
            let mut table = self.lock();
            table.make_room()?;
            let (child, group) = spawn_shell(&command, context)?;
            let pid = child.id().unwrap_or_default();
            let shared = Arc::new(Shared::default());
            let task = tokio::spawn(pump(child, Arc::clone(&shared)));
            table.last_id += 1;
            let id = table.last_id;
            let process = Process {
                id,
                command,
                pid,
                started: Instant::now(),
                group,
                shared: Arc::clone(&shared),
                task,
            };
            table.processes.insert(id, process);
            (id, shared)
        };
        let mut exit = shared.exit.subscribe();
        // Only a wait: the command runs on whether or not it exits within it.
        let _ = tokio::time::timeout(START_SETTLE, exit.wait_for(Option::is_some)).await;
        let report = self.output(id).unwrap_or_default();
        Ok(format!(
            "started background process {id}; action=output id={id} reads its new output, \
             action=kill id={id} stops it.\n{report}"
        ))
    }

    fn output(&self, id: u32) -> Result<String, ToolError> {
        let table = self.lock();
        let process = table.get(id)?;
        Ok(format!("{}\n{}", process.status_line(), process.read()))
    }

    /// SIGTERM to the group, SIGKILL to what is left of it after a grace period (or at once if
    /// the command had already exited); then the process is forgotten.
    async fn kill(&self, id: u32) -> Result<String, ToolError> {
        let mut process = {
            let mut table = self.lock();
            match table.processes.remove(&id) {
                Some(process) => process,
                None => return Err(table.missing(id)),
            }
        };
        let mut exit = process.shared.exit.subscribe();
        if exit.borrow().is_none() {
            if let Err(error) = process.group.terminate() {
                tracing::warn!(%error, "could not terminate a background process group");
            }
            let _ = tokio::time::timeout(TERM_GRACE, exit.wait_for(Option::is_some)).await;
        }
        if let Err(error) = process.group.kill() {
            tracing::warn!(%error, "could not kill a background process group");
        }
        let _ = tokio::time::timeout(KILL_GRACE, exit.wait_for(Option::is_some)).await;
        Ok(format!(
            "killed: {}\n{}",
            process.status_line(),
            process.read()
        ))
    }

    fn list(&self) -> String {
        let table = self.lock();
        if table.processes.is_empty() {
            return "no background processes".to_owned();
        }
        table
            .processes
            .values()
            .map(|process| {
                let unread = process.shared.buffer().unread_bytes();
                format!("{} ({unread} bytes unread)", process.status_line())
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Table {
    fn get(&self, id: u32) -> Result<&Process, ToolError> {
        self.processes.get(&id).ok_or_else(|| self.missing(id))
    }

    fn missing(&self, id: u32) -> ToolError {
        let ids: Vec<String> = self.processes.keys().map(u32::to_string).collect();
        if ids.is_empty() {
            ToolError::new(format!(
                "there is no background process {id}: none is running (start one with \
                 action=start)"
            ))
        } else {
            ToolError::new(format!(
                "there is no background process {id}; the ids are {}",
                ids.join(", ")
            ))
        }
    }

    /// At the limit, forgets the oldest process that has exited; refuses if all are running.
    fn make_room(&mut self) -> Result<(), ToolError> {
        if self.processes.len() < MAX_PROCESSES {
            return Ok(());
        }
        let finished = self
            .processes
            .iter()
            .find(|(_, process)| process.shared.exit.borrow().is_some())
            .map(|(id, _)| *id);
        match finished {
            Some(id) => {
                self.processes.remove(&id);
                Ok(())
            }
            None => Err(ToolError::new(format!(
                "{MAX_PROCESSES} background processes are already running: kill one you no \
                 longer need (action=kill) before starting another"
            ))),
        }
    }
}

/// One background command. Dropping it kills its group (through [`ProcessGroup`]'s drop) and
/// stops collecting its output.
struct Process {
    id: u32,
    command: String,
    pid: u32,
    started: Instant,
    group: ProcessGroup,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for Process {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Process {
    /// `[1] running (pid 42, 12 s): npm run dev` or `[2] exited (exit code 0): make`.
    fn status_line(&self) -> String {
        let state = match self.shared.exit.borrow().as_deref() {
            Some(exit) => format!("exited ({exit})"),
            None => format!(
                "running (pid {}, {} s)",
                self.pid,
                self.started.elapsed().as_secs()
            ),
        };
        let mut command: String = self.command.chars().take(COMMAND_SHOWN_CHARS).collect();
        if command.len() < self.command.len() {
            command.push('…');
        }
        format!("[{}] {state}: {command}", self.id)
    }

    fn read(&self) -> String {
        let (text, skipped) = self.shared.buffer().read();
        let mut rendered = String::new();
        if skipped > 0 {
            rendered.push_str(&format!(
                "[{skipped} earlier bytes not shown: only the latest output is kept; to keep all \
                 of it, start the command with its output redirected to a file and read that]\n"
            ));
        }
        if text.is_empty() {
            rendered.push_str("(no new output)");
        } else {
            rendered.push_str(&text);
        }
        rendered
    }
}

/// What the collecting task shares with the table.
struct Shared {
    buffer: Mutex<OutputBuffer>,
    /// How the command ended (`exit code 0`, `killed by signal 15 (SIGTERM)`), once it has and
    /// its output has been collected.
    exit: watch::Sender<Option<String>>,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            buffer: Mutex::default(),
            exit: watch::Sender::new(None),
        }
    }
}

impl Shared {
    fn buffer(&self) -> MutexGuard<'_, OutputBuffer> {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The latest output, and where the last read stopped, as offsets into everything the command
/// ever wrote.
#[derive(Debug, Default)]
struct OutputBuffer {
    text: String,
    /// Bytes dropped from the front: the offset of `text`'s first byte.
    dropped: usize,
    read_to: usize,
}

impl OutputBuffer {
    fn push(&mut self, text: &str) {
        self.text.push_str(text);
        // Trimmed in batches, so that a stream of small chunks does not shift the buffer each time.
        if self.text.len() > KEPT_OUTPUT_BYTES + KEPT_OUTPUT_BYTES / 4 {
            let cut = ceil_char_boundary(&self.text, self.text.len() - KEPT_OUTPUT_BYTES);
            self.text.drain(..cut);
            self.dropped += cut;
        }
    }

    fn end(&self) -> usize {
        self.dropped + self.text.len()
    }

    fn unread_bytes(&self) -> usize {
        self.end() - self.read_to
    }

    /// What was written since the last read (at most its latest [`READ_RESULT_BYTES`]), and how
    /// many unread bytes before it are lost or skipped.
    fn read(&mut self) -> (String, usize) {
        let mut start = self.read_to.max(self.dropped) - self.dropped;
        if self.text.len() - start > READ_RESULT_BYTES {
            start = ceil_char_boundary(&self.text, self.text.len() - READ_RESULT_BYTES);
        }
        let skipped = self.dropped + start - self.read_to;
        self.read_to = self.end();
        (self.text[start..].to_owned(), skipped)
    }
}

/// Collects the command's output until it has exited and its pipes are closed (or the grace
/// after its exit has passed: whatever it left running may go on writing), then records the exit.
async fn pump(mut child: Child, shared: Arc<Shared>) {
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut stdout_buffer = vec![0u8; READ_CHUNK_BYTES];
    let mut stderr_buffer = vec![0u8; READ_CHUNK_BYTES];
    let mut stdout_text = Utf8Stream::default();
    let mut stderr_text = Utf8Stream::default();
    let mut exit: Option<String> = None;
    let mut publish_at: Option<Instant> = None;
    loop {
        if let Some(exit) = &exit
            && stdout.is_none()
            && stderr.is_none()
        {
            shared.exit.send_replace(Some(exit.clone()));
            return;
        }
        tokio::select! {
            read = read_chunk(&mut stdout, &mut stdout_buffer) => {
                let text = on_read(read, &mut stdout, &mut stdout_text, &stdout_buffer);
                shared.buffer().push(&text);
            }
            read = read_chunk(&mut stderr, &mut stderr_buffer) => {
                let text = on_read(read, &mut stderr, &mut stderr_text, &stderr_buffer);
                shared.buffer().push(&text);
            }
            waited = child.wait(), if exit.is_none() => {
                exit = Some(match waited {
                    Ok(status) => describe_exit(status),
                    Err(error) => format!("lost track of it: {error}"),
                });
                publish_at = Some(Instant::now() + EXIT_GRACE);
            }
            () = sleep_until_some(publish_at) => {
                shared.exit.send_replace(exit.clone());
                publish_at = None;
            }
        }
    }
}

#[cfg(test)]
#[path = "bash_background_tests.rs"]
mod tests;
