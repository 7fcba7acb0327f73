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

use super::{Tool, ToolArgs, ToolContext, ToolDefinition, ToolError};
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
            mutates: true,
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
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use super::*;
    use crate::sandbox::Workspace;
    use crate::sandbox::process::tests::wait_until_gone;
    use crate::sandbox::tests::{landlock_enforced, outside_temp_dirs};
    use crate::tools::{Registry, test_context};

    fn command(text: &str, timeout_secs: Option<u64>) -> BashArgs {
        BashArgs {
            command: text.to_owned(),
            timeout_secs,
        }
    }

    #[tokio::test]
    async fn output_is_streamed_as_it_arrives_and_returned_with_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let chunks = Arc::new(Mutex::new(Vec::<(String, Instant)>::new()));
        let mut context = test_context(dir.path());
        let sink = Arc::clone(&chunks);
        context.output = Arc::new(move |text: &str| {
            sink.lock().unwrap().push((text.to_owned(), Instant::now()));
        });

        let result = Bash
            .call(command("echo one; sleep 0.5; echo two >&2", None), &context)
            .await
            .unwrap();
        let returned_at = Instant::now();

        assert_eq!(result, "one\ntwo\nexit code 0");
        let chunks = chunks.lock().unwrap();
        let texts: Vec<&str> = chunks.iter().map(|(text, _)| text.as_str()).collect();
        assert_eq!(texts, ["one\n", "two\n"]);
        assert!(returned_at - chunks[0].1 >= Duration::from_millis(400));
    }

    #[tokio::test]
    async fn a_non_zero_exit_is_a_result_that_names_the_code() {
        let dir = tempfile::tempdir().unwrap();
        let result = Bash
            .call(
                command("echo 'no such thing' >&2; exit 3", None),
                &test_context(dir.path()),
            )
            .await
            .unwrap();
        assert_eq!(result, "no such thing\nexit code 3");
    }

    #[tokio::test]
    async fn a_command_killed_by_a_signal_says_which() {
        let dir = tempfile::tempdir().unwrap();
        let result = Bash
            .call(command("kill -9 $$", None), &test_context(dir.path()))
            .await
            .unwrap();
        assert!(result.starts_with("(no output)\n"), "{result}");
        assert!(result.contains("signal 9 (SIGKILL)"), "{result}");
    }

    #[tokio::test]
    async fn runs_in_the_workspace_root_without_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let context = test_context(dir.path());
        let result = Bash
            .call(command("pwd; cat; echo end", None), &context)
            .await
            .unwrap();
        assert_eq!(
            result,
            format!("{}\nend\nexit code 0", context.workspace.root().display())
        );
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_group_quickly() {
        let dir = tempfile::tempdir().unwrap();
        let context = test_context(dir.path());
        let started = Instant::now();

        let error = Bash
            .call(command("sleep 100 & echo $!; sleep 100", Some(1)), &context)
            .await
            .unwrap_err();

        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(
            error.message.starts_with(
                "timed out after 1 s (timeout_secs=1; the maximum is 600): the command and every \
                 process it started were killed. Raise timeout_secs if it needs longer. Output so \
                 far:\n"
            ),
            "{error}"
        );
        let background_pid: i32 = error.message.lines().last().unwrap().parse().unwrap();
        assert!(wait_until_gone(background_pid).await);
    }

    #[tokio::test]
    async fn cancel_kills_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let context = test_context(dir.path());
        let cancel = context.cancel.clone();
        let started = Instant::now();
        let call =
            tokio::spawn(async move { Bash.call(command("sleep 100", None), &context).await });

        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
        let error = call.await.unwrap().unwrap_err();

        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            error.message,
            "cancelled: the command and every process it started were killed. There was no output."
        );
    }

    #[tokio::test]
    async fn a_background_process_holding_the_output_does_not_hang_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();

        let result = Bash
            .call(
                command("sleep 100 & echo started", None),
                &test_context(dir.path()),
            )
            .await
            .unwrap();

        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            result,
            "started\n[background processes still writing to the output were killed when the \
             command exited]\nexit code 0"
        );
    }

    #[tokio::test]
    async fn a_process_that_left_the_group_cannot_hang_the_call_either() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();

        let result = Bash
            .call(
                command("setsid sleep 100 & echo $!", None),
                &test_context(dir.path()),
            )
            .await
            .unwrap();

        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        let escaped_pid: i32 = result.lines().next().unwrap().parse().unwrap();
        let escaped = rustix::process::Pid::from_raw(escaped_pid).unwrap();
        rustix::process::kill_process(escaped, rustix::process::Signal::KILL).unwrap();
        assert!(result.ends_with("exit code 0"), "{result}");
    }

    #[tokio::test]
    async fn only_allow_listed_and_passed_through_variables_reach_the_command() {
        let dir = tempfile::tempdir().unwrap();
        // Cargo sets it for every test run; the test cannot set one of its own without unsafe.
        let name = "CARGO_MANIFEST_DIR";
        assert!(std::env::var_os(name).is_some());
        let probe = format!("echo \"[${{{name}:-absent}}] [${{PATH:+path}}]\"");

        let mut context = test_context(dir.path());
        let hidden = Bash.call(command(&probe, None), &context).await.unwrap();
        assert_eq!(hidden, "[absent] [path]\nexit code 0");

        context.tool_env = Arc::from(vec![name.to_owned()]);
        let visible = Bash.call(command(&probe, None), &context).await.unwrap();
        assert!(!visible.starts_with("[absent]"), "{visible}");
    }

    #[tokio::test]
    async fn variables_holding_a_secret_value_are_not_passed_on() {
        let dir = tempfile::tempdir().unwrap();
        let name = "CARGO_MANIFEST_DIR";
        let value = std::env::var(name).unwrap();
        let mut context = test_context(dir.path());
        // Even when the user passes it through by name.
        context.tool_env = Arc::from(vec![name.to_owned()]);
        context.secret_values = Arc::from(vec![value]);
        let result = Bash
            .call(
                command(&format!("echo \"[${{{name}:-absent}}]\""), None),
                &context,
            )
            .await
            .unwrap();
        assert_eq!(result, "[absent]\nexit code 0");
    }

    #[tokio::test]
    async fn secret_values_are_redacted_from_the_result_and_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let secret = "sk-live-0123456789abcdef";
        let streamed = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = Arc::clone(&streamed);
        let mut context = test_context(dir.path());
        context.secret_values = Arc::from(vec![secret.to_owned()]);
        context.output = Arc::new(move |text: &str| sink.lock().unwrap().push(text.to_owned()));
        let registry = Registry::standard();
        // The second copy arrives in two writes, so in two chunks.
        let script =
            format!("echo key={secret}; printf 'sk-live-'; sleep 0.2; echo '0123456789abcdef.'");
        let arguments = serde_json::json!({ "command": script }).to_string();

        let result = registry.call("bash", &arguments, &context).await.unwrap();

        assert_eq!(result.text, "key=[redacted]\n[redacted].\nexit code 0");
        {
            let streamed = streamed.lock().unwrap();
            assert_eq!(streamed.concat(), "key=[redacted]\n[redacted].\n");
            assert!(
                streamed.iter().all(|chunk| !chunk.contains("sk-live")),
                "{streamed:?}"
            );
        }

        // Errors carry output too.
        let arguments =
            serde_json::json!({ "command": format!("echo {secret}; sleep 5"), "timeout_secs": 1 })
                .to_string();
        let error = registry
            .call("bash", &arguments, &context)
            .await
            .unwrap_err();
        assert!(
            error.message.ends_with("Output so far:\n[redacted]\n"),
            "{error}"
        );
    }

    /// SPEC §7.3: under Landlock a command writes in the workspace and the temp directories, and
    /// reads anywhere, but cannot create, change, truncate, remove or rename anything elsewhere.
    #[tokio::test]
    async fn landlock_confines_writes_to_the_workspace_and_temp() {
        if !landlock_enforced() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let temp = tempfile::tempdir().unwrap();
        let outside = outside_temp_dirs();
        let outside = outside.path().canonicalize().unwrap();
        std::fs::write(outside.join("kept.txt"), "original\n").unwrap();
        let context = test_context(dir.path());
        let o = outside.display();
        let t = temp.path().display();
        let script = format!(
            "cat {o}/kept.txt
             echo x > {o}/new.txt || echo denied-create
             echo x >> {o}/kept.txt || echo denied-append
             : > {o}/kept.txt || echo denied-truncate
             rm {o}/kept.txt || echo denied-remove
             mkdir {o}/sub || echo denied-mkdir
             ln -s /etc/passwd {o}/link || echo denied-symlink
             echo inside > inside.txt && mv inside.txt {o}/ || echo denied-move-out
             echo temp > {t}/temp.txt && echo wrote-temp
             echo null > /dev/null && echo wrote-null
             echo to-stdout > /dev/stdout
             mkdir -p deep/dir && echo x > deep/dir/f && rm -r deep && echo wrote-inside"
        );

        let result = Bash.call(command(&script, None), &context).await.unwrap();

        for expected in [
            "original",
            "denied-create",
            "denied-append",
            "denied-truncate",
            "denied-remove",
            "denied-mkdir",
            "denied-symlink",
            "denied-move-out",
            "wrote-temp",
            "wrote-null",
            "to-stdout",
            "wrote-inside",
        ] {
            assert!(
                result.contains(expected),
                "{expected} missing from:\n{result}"
            );
        }
        assert!(
            result.contains("Permission denied") || result.contains("Read-only file system"),
            "{result}"
        );
        let mut left: Vec<String> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["kept.txt"]);
        assert_eq!(
            std::fs::read_to_string(outside.join("kept.txt")).unwrap(),
            "original\n"
        );
        assert_eq!(
            std::fs::read_to_string(context.workspace.root().join("inside.txt")).unwrap(),
            "inside\n"
        );
        assert_eq!(
            std::fs::read_to_string(temp.path().join("temp.txt")).unwrap(),
            "temp\n"
        );
        // The confinement was the command's: this thread (the daemon's, in production) is free.
        std::fs::write(outside.join("after.txt"), "daemon\n").unwrap();
    }

    #[tokio::test]
    async fn landlock_lets_commands_write_in_the_extra_roots() {
        if !landlock_enforced() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let outside = outside_temp_dirs();
        let mut context = test_context(dir.path());
        context.workspace = Arc::new(
            Workspace::with_extra_roots(dir.path(), vec![outside.path().to_path_buf()]).unwrap(),
        );
        let script = format!("echo extra > {}/allowed.txt", outside.path().display());

        let result = Bash.call(command(&script, None), &context).await.unwrap();

        assert_eq!(result, "(no output)\nexit code 0");
        assert_eq!(
            std::fs::read_to_string(outside.path().join("allowed.txt")).unwrap(),
            "extra\n"
        );
    }

    #[tokio::test]
    async fn long_output_keeps_its_head_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let result = Bash
            .call(command("seq 1 100000", None), &test_context(dir.path()))
            .await
            .unwrap();

        assert!(
            result.len() < KEPT_HEAD_BYTES + KEPT_TAIL_BYTES + 512,
            "{}",
            result.len()
        );
        assert!(result.starts_with("1\n2\n3\n"), "{}", &result[..20]);
        assert!(
            result.ends_with("99999\n100000\nexit code 0"),
            "{}",
            &result[result.len() - 40..]
        );
        let total_bytes: usize = (1..=100_000).map(|n: usize| n.to_string().len() + 1).sum();
        let kept_bytes = KEPT_HEAD_BYTES + KEPT_TAIL_BYTES;
        assert!(
            result.contains(&format!(
                "\n[... {} bytes of output omitted; to see them, redirect the output to a file \
                 and read or grep it ...]\n",
                total_bytes - kept_bytes
            )),
            "{}",
            &result[KEPT_HEAD_BYTES - 20..KEPT_HEAD_BYTES + 200]
        );
    }

    #[tokio::test]
    async fn timeouts_beyond_the_maximum_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let context = test_context(dir.path());
        for timeout in [0, 601] {
            let error = Bash
                .call(command("true", Some(timeout)), &context)
                .await
                .unwrap_err();
            assert_eq!(
                error.message,
                format!("timeout_secs must be between 1 and 600, not {timeout}")
            );
        }
    }

    #[test]
    fn characters_split_between_chunks_survive() {
        let bytes = "añ€😀".as_bytes();
        let mut stream = Utf8Stream::default();
        let mut decoded: String = bytes.chunks(1).map(|chunk| stream.decode(chunk)).collect();
        decoded.push_str(&stream.finish());
        assert_eq!(decoded, "añ€😀");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut stream = Utf8Stream::default();
        let mut decoded = stream.decode(b"a\xffb\xe2\x82");
        decoded.push_str(&stream.finish());
        assert_eq!(decoded, "a\u{FFFD}b\u{FFFD}");
    }
}
