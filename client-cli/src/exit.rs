//! Exit codes, and how an error leaves the program: one line of words on stderr, or with
//! `--json` one object `{"error": {"code", "message", "data"}}`.

use std::fmt;
use std::process::ExitCode;

use cwcode_protocol::client::ClientError;

/// The command line or its input is wrong (clap uses the same code for its own errors).
pub const USAGE: u8 = 2;
pub const TURN_FAILED: u8 = 3;
pub const TURN_CANCELLED: u8 = 4;
/// The daemon cannot be reached, stopped, or the connection to it was lost.
pub const DAEMON_GONE: u8 = 5;
pub const STORM_BROKEN: u8 = 6;
/// `run`: an approval went unanswered for `--timeout`; `wait`: its `--timeout` passed first.
pub const TIMED_OUT: u8 = 7;
/// `wait --for goal`: the loop ended with goals open, at its cap of cycles.
pub const GOAL_CAPPED: u8 = 8;
/// `wait --for goal`: the loop used up its token, cost or wall-clock budget.
pub const GOAL_BUDGET_EXHAUSTED: u8 = 9;
/// `wait --for goal`: three cycles in a row made no progress.
pub const GOAL_STALLED: u8 = 10;
/// `wait --for goal`: no goal loop has run in the session.
pub const GOAL_NEVER_RAN: u8 = 11;
/// Ctrl+C, as shells report a SIGINT.
pub const INTERRUPTED: u8 = 130;

/// The text for `--help`.
pub const HELP: &str = "\
Exit codes:
  0    success
  1    the daemon refused the request (unknown session, bad params…) or another error
  2    bad usage: unknown argument, empty prompt, bad --allow rule or duration
  3    the turn failed (send --wait, run), or the goal loop failed (wait --for goal)
  4    the turn was cancelled (send --wait, run), or the goal loop was stopped (wait --for goal)
  5    the daemon cannot be reached, stopped, or the connection to it was lost
  6    the storm-breaker stopped a loop of identical failing calls (send --wait, run,
       wait --for goal)
  7    timed out: run's approval went unanswered for --timeout (the turn is cancelled),
       or wait's --timeout passed first
  8    wait --for goal: the goal loop reached its cap with goals open
  9    wait --for goal: the goal loop used up its token, cost or wall-clock budget
  10   wait --for goal: the goal loop stalled (three cycles without progress)
  11   wait --for goal: no goal loop has run in this session
  130  interrupted with Ctrl+C

With --json, an error is one line on stderr:
  {\"error\": {\"code\": …, \"message\": \"…\", \"data\": …}}
where code is the daemon's JSON-RPC code (a number) when the daemon answered with an error,
else one of \"usage\", \"daemon_unreachable\", \"connection_lost\", \"timeout\",
\"approval_timeout\", \"interrupted\", \"failed\"; data is the daemon's error data, or null.";

/// A mistake in what the user asked, reported with exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// An outcome that is not a success, with the code that says so, e.g. a timed-out `wait`.
#[derive(Debug)]
pub struct Outcome {
    pub code: u8,
    pub name: &'static str,
    pub message: String,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Outcome {}

/// Prints `error` the way the output mode asks and returns the exit code it means.
pub fn report(error: &anyhow::Error, json: bool) -> ExitCode {
    let (code, exit, data) = classify(error);
    if json {
        // The daemon's own words, without the `(code N)` the human line adds.
        let message = match error.downcast_ref::<ClientError>() {
            Some(ClientError::Rpc { message, .. }) => message.clone(),
            _ => format!("{error:#}"),
        };
        let object = serde_json::json!({
            "error": { "code": code, "message": message, "data": data }
        });
        eprintln!("{object}");
    } else {
        eprintln!("cwcode-cli: {error:#}");
        if !data.is_null() {
            eprintln!("  data: {data}");
        }
    }
    ExitCode::from(exit)
}

/// (the `code` of the JSON error, the exit code, the daemon's error data).
fn classify(error: &anyhow::Error) -> (serde_json::Value, u8, serde_json::Value) {
    if error.is::<UsageError>() {
        return ("usage".into(), USAGE, serde_json::Value::Null);
    }
    if let Some(outcome) = error.downcast_ref::<Outcome>() {
        return (outcome.name.into(), outcome.code, serde_json::Value::Null);
    }
    match error.downcast_ref::<ClientError>() {
        Some(ClientError::Rpc { code, data, .. }) => {
            let data = data.as_deref().map_or(serde_json::Value::Null, |raw| {
                serde_json::from_str(raw).unwrap_or_else(|_| raw.into())
            });
            ((*code).into(), 1, data)
        }
        Some(
            ClientError::Connect { .. }
            | ClientError::Spawn { .. }
            | ClientError::StartTimeout { .. }
            | ClientError::StartFailed { .. }
            | ClientError::Handshake(_)
            | ClientError::Busy,
        ) => (
            "daemon_unreachable".into(),
            DAEMON_GONE,
            serde_json::Value::Null,
        ),
        Some(ClientError::Transport(_)) => (
            "connection_lost".into(),
            DAEMON_GONE,
            serde_json::Value::Null,
        ),
        Some(ClientError::Decode(_)) | None => ("failed".into(), 1, serde_json::Value::Null),
    }
}
