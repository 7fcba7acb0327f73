//! Hooks (SPEC §5): the commands of config.json's `hooks`, run when a session asks for an
//! approval, finishes or fails a turn, or ends a goal loop, so that a user away from the
//! terminal is told (notify-send, ntfy, a chat bot).
//!
//! Fed from each session's event bus by a subscriber that only looks at the event's type: the
//! session never waits for a hook. Matching events go into one bounded queue (full: the run is
//! dropped, logged, and shown by `doctor`); a few commands run at once, each with the event's
//! JSON on stdin, `CWCODE_SESSION_ID`, `CWCODE_EVENT` and `CWCODE_WORKSPACE` set, in its own
//! process group, killed after [`HOOK_TIMEOUT`].

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use cwcode_protocol::TurnOutcome;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Semaphore, broadcast, mpsc};

use crate::journal::bus::{EventLog, LiveEvent};
use crate::provider::{HookEvent, Hooks};

/// Hook runs waiting for their turn; more are dropped.
const QUEUE_LENGTH: usize = 64;
/// Hook commands running at once.
const RUNNING_AT_ONCE: usize = 4;
/// How long one hook command may run before its process group is killed.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// Failures kept for `doctor`, newest last.
const KEPT_FAILURES: usize = 20;
/// What of a failing hook's stderr is kept, in bytes.
const KEPT_STDERR_BYTES: u64 = 1024;

/// What the hooks need from the configuration in force, read at each event so that an edit of
/// config.json applies at once.
pub struct HookSettings {
    pub hooks: Hooks,
    /// Values that must not reach a hook's environment (API keys).
    pub secret_values: Arc<[String]>,
}

pub type SettingsSource = Arc<dyn Fn() -> HookSettings + Send + Sync>;

/// The daemon's hook runner: one queue and its workers, and a subscriber per session.
pub struct HookRunner {
    settings: SettingsSource,
    queue: OnceLock<mpsc::Sender<Job>>,
    failures: Arc<Failures>,
}

struct Job {
    event: HookEvent,
    argv: Vec<String>,
    json: Arc<LiveEvent>,
    session: String,
    workspace: String,
    secret_values: Arc<[String]>,
}

#[derive(Default)]
struct Failures(Mutex<VecDeque<String>>);

impl Failures {
    fn record(&self, failure: String) {
        tracing::warn!(%failure, "a hook failed");
        let mut failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if failures.len() >= KEPT_FAILURES {
            failures.pop_front();
        }
        failures.push_back(format!("{} {failure}", crate::util::now_rfc3339()));
    }
}

impl HookRunner {
    pub fn new(settings: SettingsSource) -> Self {
        Self {
            settings,
            queue: OnceLock::new(),
            failures: Arc::default(),
        }
    }

    /// Runs the configured hooks for the session's events from now on, until its log is gone.
    /// Outside a runtime (some unit tests) nothing is watched.
    pub fn watch(&self, session: &str, workspace: &str, log: &EventLog) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let subscription = match log.subscribe(None) {
            Ok(subscription) => subscription,
            Err(error) => {
                self.failures.record(format!(
                    "session {session}: hooks will not run for it: {error}"
                ));
                return;
            }
        };
        let queue = self
            .queue
            .get_or_init(|| {
                let (sender, receiver) = mpsc::channel(QUEUE_LENGTH);
                runtime.spawn(run_jobs(receiver, Arc::clone(&self.failures)));
                sender
            })
            .clone();
        runtime.spawn(follow(
            subscription.live,
            Watched {
                session: session.to_owned(),
                workspace: workspace.to_owned(),
                settings: Arc::clone(&self.settings),
                queue,
                failures: Arc::clone(&self.failures),
            },
        ));
    }

    /// The latest failures, newest last, for `doctor`.
    pub fn failures(&self) -> Vec<String> {
        self.failures
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

struct Watched {
    session: String,
    workspace: String,
    settings: SettingsSource,
    queue: mpsc::Sender<Job>,
    failures: Arc<Failures>,
}

/// Reads one session's live events and queues a run for each that has a hook.
async fn follow(mut live: broadcast::Receiver<Arc<LiveEvent>>, watched: Watched) {
    loop {
        let event = match live.recv().await {
            Ok(event) => event,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                watched.failures.record(format!(
                    "session {}: {missed} events went by too fast to look at; their hooks did not run",
                    watched.session
                ));
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(hook) = hook_event(event.json.get()) else {
            continue;
        };
        let settings = (watched.settings)();
        let Some(argv) = settings.hooks.command(hook) else {
            continue;
        };
        let job = Job {
            event: hook,
            argv: argv.to_vec(),
            json: event,
            session: watched.session.clone(),
            workspace: watched.workspace.clone(),
            secret_values: settings.secret_values,
        };
        if let Err(error) = watched.queue.try_send(job) {
            let why = match error {
                mpsc::error::TrySendError::Full(_) => {
                    format!("{QUEUE_LENGTH} hook runs are already waiting")
                }
                mpsc::error::TrySendError::Closed(_) => "the hook runner has stopped".to_owned(),
            };
            watched.failures.record(format!(
                "{} hook for session {} was dropped: {why}",
                hook.as_str(),
                watched.session
            ));
        }
    }
}

/// Which hook an event's JSON calls for, from its `type` (and a turn's `outcome`) alone.
fn hook_event(json: &str) -> Option<HookEvent> {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(rename = "type", borrow)]
        kind: &'a str,
        #[serde(default)]
        outcome: Option<TurnOutcome>,
    }
    let head: Head<'_> = serde_json::from_str(json).ok()?;
    match (head.kind, head.outcome) {
        ("approval_requested", _) => Some(HookEvent::ApprovalRequested),
        ("turn_finished", Some(TurnOutcome::Failed)) => Some(HookEvent::TurnFailed),
        ("turn_finished", _) => Some(HookEvent::TurnFinished),
        ("goal_loop_stopped", _) => Some(HookEvent::GoalFinished),
        _ => None,
    }
}

async fn run_jobs(mut queue: mpsc::Receiver<Job>, failures: Arc<Failures>) {
    let slots = Arc::new(Semaphore::new(RUNNING_AT_ONCE));
    while let Some(job) = queue.recv().await {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let failures = Arc::clone(&failures);
        tokio::spawn(async move {
            let _slot = slot;
            let name = format!("{} hook `{}`", job.event.as_str(), job.argv[0]);
            if let Err(why) = run(job).await {
                failures.record(format!("{name} {why}"));
            }
        });
    }
}

/// Runs one hook command to its end, or kills it at the timeout; says what went wrong.
async fn run(job: Job) -> Result<(), String> {
    let mut command = tokio::process::Command::new(&job.argv[0]);
    command
        .args(&job.argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env_remove("CWCODE_HOME")
        .env_remove("CWCODE_SOCKET")
        .env("CWCODE_SESSION_ID", &job.session)
        .env("CWCODE_EVENT", job.event.as_str())
        .env("CWCODE_WORKSPACE", &job.workspace)
        .kill_on_drop(true);
    for (name, value) in std::env::vars_os() {
        if job
            .secret_values
            .iter()
            .any(|secret| value.to_str() == Some(secret.as_str()))
        {
            command.env_remove(name);
        }
    }
    if Path::new(&job.workspace).is_dir() {
        command.current_dir(&job.workspace);
    }
    let (mut child, mut group) =
        crate::sandbox::process::spawn_group(&mut command, |command| command.spawn())
            .map_err(|error| format!("could not start: {error}"))?;
    let mut stdin = child.stdin.take();
    let mut stderr = child.stderr.take();
    let finished = tokio::time::timeout(HOOK_TIMEOUT, async {
        if let Some(stdin) = &mut stdin {
            // A hook that does not read its stdin is no failure.
            let _ = stdin.write_all(job.json.json.get().as_bytes()).await;
            let _ = stdin.write_all(b"\n").await;
        }
        drop(stdin.take());
        let mut said = Vec::new();
        if let Some(stderr) = stderr.take() {
            let _ = stderr.take(KEPT_STDERR_BYTES).read_to_end(&mut said).await;
        }
        (child.wait().await, said)
    })
    .await;
    let result = match finished {
        Err(_) => Err(format!(
            "did not finish within {} s and was killed",
            HOOK_TIMEOUT.as_secs()
        )),
        Ok((Err(error), _)) => Err(format!("was lost track of: {error}")),
        Ok((Ok(status), _)) if status.success() => Ok(()),
        Ok((Ok(status), said)) => {
            let said = String::from_utf8_lossy(&said);
            let said = said.trim();
            Err(if said.is_empty() {
                format!("failed ({status})")
            } else {
                format!("failed ({status}): {said}")
            })
        }
    };
    // Whatever it left running goes with it.
    if let Err(error) = group.kill() {
        tracing::warn!(%error, "could not kill a hook's process group");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_map_to_their_hooks() {
        let cases = [
            (
                r#"{"seq":3,"type":"approval_requested","requestId":"r1"}"#,
                Some(HookEvent::ApprovalRequested),
            ),
            (
                r#"{"type":"turn_finished","outcome":"completed"}"#,
                Some(HookEvent::TurnFinished),
            ),
            (
                r#"{"type":"turn_finished","outcome":"cancelled"}"#,
                Some(HookEvent::TurnFinished),
            ),
            (
                r#"{"type":"turn_finished","outcome":"failed","error":"401"}"#,
                Some(HookEvent::TurnFailed),
            ),
            (
                r#"{"type":"goal_loop_stopped","state":"stalled"}"#,
                Some(HookEvent::GoalFinished),
            ),
            (r#"{"type":"assistant_delta","text":"hi"}"#, None),
            ("not json", None),
        ];
        for (json, hook) in cases {
            assert_eq!(hook_event(json), hook, "{json}");
        }
    }
}
