//! `bash`: a shell command in the workspace, its output streamed as it comes, in its own process
//! group so that a timeout or a cancel kills everything it started (SPEC §7, §7.3).

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tokio::time::Instant;

use super::{Effect, Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};
use crate::sandbox::process::ProcessGroup;
use crate::sandbox::secrets::{Redactor, confine_environment};

const DEFAULT_TIMEOUT_SECS: u64 = 120;
const MAX_TIMEOUT_SECS: u64 = 600;
const KEPT_HEAD_BYTES: usize = 16 * 1024;
const KEPT_TAIL_BYTES: usize = 16 * 1024;
const READ_CHUNK_BYTES: usize = 8 * 1024;
/// How long output may keep coming once the command has exited: enough to drain the pipes, short
/// enough that a background process still holding them does not hold up the call.
const EXIT_GRACE: Duration = Duration::from_millis(250);
/// After the leftover group was killed, the wait for its pipes to close.
const KILLED_DRAIN: Duration = Duration::from_millis(100);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct BashArgs {
    /// Shell command.
    pub command: String,
    /// Seconds before it is killed (default 120, max 600).
    pub timeout_secs: Option<u64>,
}

impl ToolArgs for BashArgs {}

pub struct Bash;

impl Tool for Bash {
    type Args = BashArgs;
    type Output = String;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "bash",
            description: "Run a bash command in the workspace root (no stdin). Returns \
                          stdout+stderr (long output keeps its head and tail) and the exit code. \
                          Processes it leaves behind are killed when it returns. The sandbox \
                          denies writes outside the workspace and /tmp.",
            effect: Effect::Workspace,
        }
    }

    async fn call(&self, args: BashArgs, context: &ToolContext) -> Result<String, ToolError> {
        let timeout_secs = args.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if !(1..=MAX_TIMEOUT_SECS).contains(&timeout_secs) {
            return Err(ToolError::new(format!(
                "timeout_secs must be between 1 and {MAX_TIMEOUT_SECS}, not {timeout_secs}"
            )));
        }
        run_command(&args.command, context, Duration::from_secs(timeout_secs))
            .await
            .map(|run| run.output)
    }
}

/// A shell command run to its end the way `bash` runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRun {
    /// Its output as the model would see it (head and tail kept), ending with its exit status.
    pub output: String,
    pub succeeded: bool,
}

/// Runs `command_text` exactly as the `bash` tool does (sandboxed, in its own process group,
/// secrets kept out, killed at `timeout` or on cancel), for the daemon's own checks: the
/// `(verify: …)` commands of goals. A timeout or a cancel is an error, as for the tool.
pub async fn run_command(
    command_text: &str,
    context: &ToolContext,
    timeout: Duration,
) -> Result<CommandRun, ToolError> {
    let (mut child, group) = spawn_shell(command_text, context)?;
    let (output, status) = run_to_completion(&mut child, group, context, timeout).await?;
    Ok(CommandRun {
        output,
        succeeded: status.success(),
    })
}

/// Starts `bash -c COMMAND` (or `sh` where there is no bash) in the workspace root, confined by
/// the sandbox, leading its own tracked process group, with pipes for its output, no stdin and an
/// allow-listed environment without secrets.
pub(super) fn spawn_shell(
    command_text: &str,
    context: &ToolContext,
) -> Result<(Child, ProcessGroup), ToolError> {
    let redactor = Redactor::new(&context.secret_values);
    let spawn = |shell: &str| {
        let mut command = context.workspace.command(shell);
        command
            .arg("-c")
            .arg(command_text)
            .current_dir(context.workspace.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        confine_environment(&mut command, &context.tool_env, &redactor);
        command
            // git would otherwise ask for credentials on the daemon's terminal, if it has one,
            // and wait there until the timeout.
            .env("GIT_TERMINAL_PROMPT", "0");
        context.workspace.spawn(&mut command)
    };
    spawn("bash")
        .or_else(|error| {
            if error.kind() == io::ErrorKind::NotFound {
                spawn("sh")
            } else {
                Err(error)
            }
        })
        .map_err(|error| ToolError::new(format!("could not start the shell: {error}")))
}

/// Streams the child's output until it has exited and its pipes are closed, or until the timeout
/// or a cancel, which kill its whole group.
async fn run_to_completion(
    child: &mut Child,
    mut group: ProcessGroup,
    context: &ToolContext,
    timeout: Duration,
) -> Result<(String, ExitStatus), ToolError> {
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut stdout_buffer = vec![0u8; READ_CHUNK_BYTES];
    let mut stderr_buffer = vec![0u8; READ_CHUNK_BYTES];
    let mut stdout_text = Utf8Stream::default();
    let mut stderr_text = Utf8Stream::default();
    let mut captured = CapturedOutput::default();
    let emit = |captured: &mut CapturedOutput, text: String| {
        if !text.is_empty() {
            (context.output)(&text);
            captured.push(&text);
        }
    };

    let timeout_at = tokio::time::sleep(timeout);
    tokio::pin!(timeout_at);
    let mut status: Option<ExitStatus> = None;
    let mut drain_until: Option<Instant> = None;
    let mut killed_leftovers = false;

    let status = loop {
        if let Some(exit) = status
            && stdout.is_none()
            && stderr.is_none()
        {
            break exit;
        }
        tokio::select! {
            () = context.cancel.cancelled() => {
                kill(&mut group);
                return Err(ToolError::new(format!(
                    "cancelled: the command and every process it started were killed.{}",
                    captured.so_far()
                )));
            }
            () = &mut timeout_at => {
                kill(&mut group);
                let seconds = timeout.as_secs();
                return Err(ToolError::new(format!(
                    "timed out after {seconds} s (timeout_secs={seconds}; the maximum is \
                     {MAX_TIMEOUT_SECS}): the command and every process it started were killed. \
                     Raise timeout_secs if it needs longer.{}",
                    captured.so_far()
                )));
            }
            read = read_chunk(&mut stdout, &mut stdout_buffer) => {
                let text = on_read(read, &mut stdout, &mut stdout_text, &stdout_buffer);
                emit(&mut captured, text);
            }
            read = read_chunk(&mut stderr, &mut stderr_buffer) => {
                let text = on_read(read, &mut stderr, &mut stderr_text, &stderr_buffer);
                emit(&mut captured, text);
            }
            waited = child.wait(), if status.is_none() => {
                let exit = waited.map_err(|error| {
                    kill(&mut group);
                    ToolError::new(format!("lost track of the command: {error}"))
                })?;
                status = Some(exit);
                drain_until = Some(Instant::now() + EXIT_GRACE);
            }
            () = sleep_until_some(drain_until) => {
                if killed_leftovers {
                    // A process outside the group still holds the pipes: stop reading them.
                    stdout = None;
                    stderr = None;
                } else {
                    kill(&mut group);
                    killed_leftovers = true;
                    drain_until = Some(Instant::now() + KILLED_DRAIN);
                }
            }
        }
    };
    emit(&mut captured, stdout_text.finish());
    emit(&mut captured, stderr_text.finish());

    let mut result = captured.render();
    if result.is_empty() {
        result.push_str("(no output)");
    }
    if !result.ends_with('\n') {
        result.push('\n');
    }
    if killed_leftovers {
        result.push_str(
            "[background processes still writing to the output were killed when the command \
             exited]\n",
        );
    }
    result.push_str(&describe_exit(status));
    Ok((result, status))
}

fn kill(group: &mut ProcessGroup) {
    if let Err(error) = group.kill() {
        tracing::warn!(%error, "could not kill a bash command's process group");
    }
}

/// A read from a pipe that is still open; a closed one never completes.
pub(super) async fn read_chunk<R: AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buffer: &mut [u8],
) -> io::Result<usize> {
    match pipe {
        Some(pipe) => pipe.read(buffer).await,
        None => std::future::pending().await,
    }
}

/// The text a read produced; at end of file (or a read error) the pipe is closed.
pub(super) fn on_read<R>(
    read: io::Result<usize>,
    pipe: &mut Option<R>,
    decoder: &mut Utf8Stream,
    buffer: &[u8],
) -> String {
    match read {
        Ok(count) if count > 0 => decoder.decode(&buffer[..count]),
        _ => {
            *pipe = None;
            decoder.finish()
        }
    }
}

pub(super) async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

pub(super) fn describe_exit(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        // A command in the sandbox's namespace is reported by bubblewrap as a shell reports a
        // signalled child: 128 + the signal.
        let signal = code - 128;
        let name = signal_name(signal);
        if !name.is_empty() {
            return format!("exit code {code} (128 + signal {signal}{name}: killed)");
        }
        return format!("exit code {code}");
    }
    match status.signal() {
        Some(signal) => format!("killed by signal {signal}{}", signal_name(signal)),
        None => "exit status unknown".to_owned(),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        2 => " (SIGINT)",
        6 => " (SIGABRT)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        13 => " (SIGPIPE)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

/// Decodes a byte stream as UTF-8 chunk by chunk, holding back a character split between chunks
/// so that it is not turned into replacement characters.
#[derive(Debug, Default)]
pub(super) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub(super) fn decode(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        let complete = self.pending.len() - incomplete_tail_len(&self.pending);
        let text = String::from_utf8_lossy(&self.pending[..complete]).into_owned();
        self.pending.drain(..complete);
        text
    }

    pub(super) fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

/// Length of a multi-byte character cut off at the end of `bytes`, 0 if the last one is whole.
fn incomplete_tail_len(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        let is_continuation = byte & 0xC0 == 0x80;
        if !is_continuation {
            let needed = match byte {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            return if needed > back { back } else { 0 };
        }
    }
    0
}

/// The command's output as the model gets it: the first and the last bytes, and a count of what
/// was dropped between them.
#[derive(Debug, Default)]
struct CapturedOutput {
    head: String,
    head_full: bool,
    tail: String,
    dropped: usize,
}

impl CapturedOutput {
    fn push(&mut self, mut text: &str) {
        if !self.head_full {
            let room = KEPT_HEAD_BYTES - self.head.len();
            if text.len() <= room {
                self.head.push_str(text);
                return;
            }
            let cut = floor_char_boundary(text, room);
            self.head.push_str(&text[..cut]);
            text = &text[cut..];
            self.head_full = true;
        }
        self.tail.push_str(text);
        // Trimmed in batches, so that a stream of small chunks does not shift the tail each time.
        if self.tail.len() > 2 * KEPT_TAIL_BYTES {
            let cut = self.tail_start();
            self.tail.drain(..cut);
            self.dropped += cut;
        }
    }

    fn tail_start(&self) -> usize {
        let excess = self.tail.len().saturating_sub(KEPT_TAIL_BYTES);
        ceil_char_boundary(&self.tail, excess)
    }

    fn render(&self) -> String {
        let tail_start = self.tail_start();
        let dropped = self.dropped + tail_start;
        let tail = &self.tail[tail_start..];
        if dropped == 0 {
            return format!("{}{tail}", self.head);
        }
        format!(
            "{}\n[... {dropped} bytes of output omitted; to see them, redirect the output to a \
             file and read or grep it ...]\n{tail}",
            self.head
        )
    }

    /// The output so far, for an error message.
    fn so_far(&self) -> String {
        let rendered = self.render();
        if rendered.is_empty() {
            " There was no output.".to_owned()
        } else {
            format!(" Output so far:\n{rendered}")
        }
    }
}

fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

pub(super) fn ceil_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

#[cfg(test)]
#[path = "bash_tests.rs"]
mod tests;
