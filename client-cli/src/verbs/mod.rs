//! One function per verb, grouped by what they act on. `main.rs` parses the arguments and
//! calls exactly one of them.

pub mod daemon;
pub mod goal;
pub mod history;
pub mod memory;
pub mod run;
pub mod sessions;
pub mod setup;
pub mod turns;
pub mod wait;

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use cwcode_protocol::paths::Paths;
use cwcode_protocol::{Client, ConnectOptions, TurnOutcome};

use crate::exit::{self, Outcome, UsageError};

async fn connect(autostart: bool) -> anyhow::Result<Client> {
    let mut options = ConnectOptions::new(Paths::from_env()?);
    options.autostart = autostart;
    Ok(Client::connect(&options).await?)
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// The prompt as given, or read from stdin for `-`; an empty one is refused before anything
/// is sent.
fn prompt_text(text: String) -> anyhow::Result<String> {
    let text = if text == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the prompt from stdin")?;
        if text.trim().is_empty() {
            return Err(UsageError("the prompt read from stdin is empty".to_owned()).into());
        }
        text
    } else {
        text
    };
    if text.trim().is_empty() {
        return Err(UsageError(
            "the prompt is empty: say what the agent should do, or pass `-` to read it from stdin"
                .to_owned(),
        )
        .into());
    }
    Ok(text)
}

/// `--cwd`, or the current directory, made absolute.
fn workspace(cwd: Option<PathBuf>) -> anyhow::Result<String> {
    let cwd = match cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let cwd = std::path::absolute(&cwd).with_context(|| format!("bad --cwd {}", cwd.display()))?;
    Ok(cwd.display().to_string())
}

/// The exit code of a finished turn, saying why it failed in human output.
fn turn_exit(outcome: TurnOutcome, error: Option<&str>, json: bool) -> ExitCode {
    if outcome == TurnOutcome::Failed && !json {
        eprintln!(
            "cwcode-cli: the turn failed: {}",
            error.unwrap_or("no reason given")
        );
    }
    ExitCode::from(match outcome {
        TurnOutcome::Completed => 0,
        TurnOutcome::Failed => exit::TURN_FAILED,
        TurnOutcome::Cancelled => exit::TURN_CANCELLED,
        TurnOutcome::Interrupted => exit::DAEMON_GONE,
        TurnOutcome::StormBroken => exit::STORM_BROKEN,
    })
}

/// The event stream closed: the daemon stopped or the connection broke.
fn connection_lost(session_id: &str) -> anyhow::Error {
    Outcome {
        code: exit::DAEMON_GONE,
        name: "connection_lost",
        message: format!(
            "the connection to cwcoded closed (did the daemon stop?); the session is kept: \
             follow it with `cwcode-cli events {session_id} --follow`"
        ),
    }
    .into()
}

/// Resolves at `deadline`, or never without one.
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Longest duration accepted: a week is already longer than any run should wait.
const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// `--timeout` values: a number with a unit, `500ms`, `30s`, `5m`, `2h`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration: write e.g. 30s, 5m, 2h or 500ms"))?;
    let seconds = match unit.trim() {
        "ms" => number / 1000.0,
        "" | "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`: use ms, s, m or h"
            ));
        }
    };
    let duration = Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("`{text}` is not a duration: write e.g. 30s, 5m, 2h or 500ms"))?;
    if duration > MAX_DURATION {
        return Err(format!("`{text}` is longer than a week"));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_written() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert!(
            parse_duration("5 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_duration("soon").unwrap_err().contains("e.g. 30s"));
        assert!(parse_duration("9999h").unwrap_err().contains("week"));
    }
}
