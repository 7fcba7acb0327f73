//! `!command`: the user's own shell command, run here in the workspace (not by the model, not
//! in the daemon's sandbox: it is what typing it in a shell would do). Its output is shown in
//! the transcript and goes with the next prompt, so the model sees what the user saw. Bounded
//! in time (the command is killed) and in the output kept.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

/// How long a command may run before it is killed.
pub const TIME_LIMIT: Duration = Duration::from_secs(30);
/// The most output kept, stdout and stderr together; the rest is read and dropped.
pub const MAX_OUTPUT: usize = 16 * 1024;

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellRun {
    pub command: String,
    /// Its output, at most [`MAX_OUTPUT`] bytes, with a line saying what was cut or why it
    /// stopped.
    pub output: String,
    /// "exit 0", "exit 2", "killed after 30 s", or why it could not start.
    pub outcome: String,
}

impl ShellRun {
    /// The text that goes with the next prompt.
    pub fn for_the_model(&self) -> String {
        format!(
            "I ran `{}` in the workspace ({}):\n```\n{}\n```",
            self.command,
            self.outcome,
            self.output.trim_end()
        )
    }
}

/// Runs `command` with `sh -c` in `cwd`, its stdin closed, for at most `limit`.
pub async fn run(command: &str, cwd: &str, limit: Duration) -> ShellRun {
    let spawned = tokio::process::Command::new("sh")
        .arg("-c")
        // stderr joins stdout, so the two come in the order they were written.
        .arg(format!("exec 2>&1; {command}"))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            return ShellRun {
                command: command.to_owned(),
                output: String::new(),
                outcome: format!("could not start sh: {error}"),
            };
        }
    };
    let mut output = Vec::new();
    let mut cut = false;
    let work = async {
        if let Some(mut stdout) = child.stdout.take() {
            let mut chunk = [0u8; 8192];
            loop {
                match stdout.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => {
                        let room = MAX_OUTPUT.saturating_sub(output.len());
                        cut |= read > room;
                        output.extend_from_slice(&chunk[..read.min(room)]);
                    }
                }
            }
        }
        child.wait().await
    };
    let outcome = match tokio::time::timeout(limit, work).await {
        Ok(Ok(status)) => match status.code() {
            Some(code) => format!("exit {code}"),
            None => "ended by a signal".to_owned(),
        },
        Ok(Err(error)) => format!("could not wait for it: {error}"),
        Err(_) => {
            kill_group(&child);
            format!("killed after {} s", limit.as_secs_f32())
        }
    };
    let mut text = String::from_utf8_lossy(&output).into_owned();
    if cut {
        text.push_str(&format!("\n(output cut at {} KiB)", MAX_OUTPUT / 1024));
    }
    ShellRun {
        command: command.to_owned(),
        output: text,
        outcome,
    }
}

/// Kills the command and whatever it started (its own process group).
fn kill_group(child: &tokio::process::Child) {
    if let Some(pid) = child.id() {
        // `kill -KILL -PGID`: std has no process-group kill, and this needs no unsafe code.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_output_and_exit_code_are_kept_with_stderr_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("here.txt"), "x").unwrap();
        let cwd = dir.path().to_str().unwrap();
        let run = run("ls; echo oops >&2; exit 3", cwd, TIME_LIMIT).await;
        assert_eq!(run.output, "here.txt\noops\n");
        assert_eq!(run.outcome, "exit 3");
        assert_eq!(
            run.for_the_model(),
            "I ran `ls; echo oops >&2; exit 3` in the workspace (exit 3):\n```\nhere.txt\noops\n```"
        );
    }

    #[tokio::test]
    async fn a_long_output_is_cut_and_a_slow_command_is_killed() {
        let cwd = std::env::temp_dir();
        let cwd = cwd.to_str().unwrap();
        let long = run("yes cwcode | head -c 100000", cwd, TIME_LIMIT).await;
        assert!(long.output.len() < MAX_OUTPUT + 64, "{}", long.output.len());
        assert!(long.output.ends_with("(output cut at 16 KiB)"));
        assert_eq!(long.outcome, "exit 0");

        let started = std::time::Instant::now();
        // The background child holds the pipe open: the whole group must go.
        let slow = run(
            "sleep 30 & echo started; sleep 30",
            cwd,
            Duration::from_millis(300),
        )
        .await;
        assert_eq!(slow.outcome, "killed after 0.3 s");
        assert_eq!(slow.output, "started\n");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
