//! `run`: a one-shot session for scripts and CI. It creates a session, sends the prompt, streams
//! the turn and exits with the turn's code; it never waits forever: an approval request is
//! answered by the `--allow` rules, or by someone running `cwcode-cli approve` in time, or the
//! turn is cancelled after `--timeout` and the run exits 7.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use cwcode_protocol::client::EventStream;
use cwcode_protocol::{
    ApprovalDecision, ApprovalRespondParams, Client, ClientError, CreateSessionParams, ErrorCode,
    EventKind, Mode,
};
use tokio::time::Instant;

use super::{connect, print_json, prompt_text, turn_exit, until, workspace};
use crate::exit::{self, Outcome};
use crate::render;
use cwcode_protocol::allow::{AllowRule, first_allowing};

/// How long a cancelled turn may take to report its end before the run stops following it.
const CANCEL_GRACE: Duration = Duration::from_secs(10);
/// Most approval requests a run keeps track of at once; a turn asks one at a time in practice.
const MAX_PENDING: usize = 64;

pub struct RunRequest {
    pub cwd: Option<PathBuf>,
    pub mode: Option<Mode>,
    pub profile: Option<String>,
    /// How long an approval request may go unanswered.
    pub timeout: Duration,
    pub allow: Vec<AllowRule>,
    pub prompt: String,
}

/// An approval request nobody has answered yet, and when the run gives up on it.
struct Pending {
    request_id: String,
    tool: String,
    deadline: Instant,
}

pub async fn run(request: RunRequest, json: bool) -> anyhow::Result<ExitCode> {
    let prompt = prompt_text(request.prompt)?;
    let cwd = workspace(request.cwd)?;
    let client = connect(true).await?;
    let session = client
        .create_session(&CreateSessionParams {
            cwd,
            profile: request.profile,
            mode: request.mode,
            title: Some(title(&prompt)),
        })
        .await?;
    if json {
        print_json(&serde_json::json!({ "type": "session_created", "session": session }))?;
    } else {
        eprintln!("· session {} in {} mode", session.id, session.mode);
    }
    let mut stream = client.subscribe(&session.id, None).await?;
    let sent = client.send(&session.id, &prompt).await?;
    let mut renderer = render::Renderer::new(json, &session.id);
    let mut pending: Vec<Pending> = Vec::new();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let deadline = pending.iter().map(|waiting| waiting.deadline).min();
        let event = tokio::select! {
            event = stream.next() => event,
            () = until(deadline) => {
                cancel_and_drain(&client, &mut stream, &mut renderer, &session.id, sent.turn)
                    .await?;
                return Err(approval_timed_out(&pending, request.timeout, &session.id));
            }
            // A handler that cannot be installed disables this branch.
            Ok(()) = &mut ctrl_c => {
                cancel_and_drain(&client, &mut stream, &mut renderer, &session.id, sent.turn)
                    .await?;
                return Err(Outcome {
                    code: exit::INTERRUPTED,
                    name: "interrupted",
                    message: format!(
                        "interrupted: the turn was cancelled (session {} stays)",
                        session.id
                    ),
                }
                .into());
            }
        };
        let Some(event) = event else {
            return Err(super::connection_lost(&session.id));
        };
        let event = event?;
        renderer.event(&event)?;
        match &event.kind {
            EventKind::ApprovalRequested {
                request_id,
                tool,
                arguments,
                ..
            } => match first_allowing(&request.allow, tool, arguments) {
                Some(rule) => {
                    approve(&client, &session.id, request_id).await?;
                    if !json {
                        eprintln!("  {request_id}: approved by --allow {rule}");
                    }
                }
                None if pending.len() < MAX_PENDING => {
                    if !json {
                        eprintln!(
                            "  no --allow rule matches: the run gives up in {} unless it is answered",
                            humanize(request.timeout)
                        );
                    }
                    pending.push(Pending {
                        request_id: request_id.clone(),
                        tool: tool.clone(),
                        deadline: Instant::now() + request.timeout,
                    });
                }
                // More open requests than a turn makes: the oldest deadline still ends the run.
                None => {}
            },
            EventKind::ApprovalResolved { request_id, .. } => {
                pending.retain(|waiting| &waiting.request_id != request_id);
            }
            EventKind::TurnFinished {
                turn,
                outcome,
                error,
                ..
            } if *turn == sent.turn => return Ok(turn_exit(*outcome, error.as_deref(), json)),
            EventKind::SubscriptionEnded { reason, .. } => {
                anyhow::bail!("the daemon ended the event stream: {reason}");
            }
            _ => {}
        }
    }
}

fn approval_timed_out(pending: &[Pending], timeout: Duration, session_id: &str) -> anyhow::Error {
    let waiting = pending
        .iter()
        .min_by_key(|waiting| waiting.deadline)
        .map(|waiting| format!("{} ({})", waiting.request_id, waiting.tool))
        .unwrap_or_default();
    Outcome {
        code: exit::TIMED_OUT,
        name: "approval_timeout",
        message: format!(
            "approval {waiting} had no answer within {}: the turn was cancelled; allow such \
             calls with --allow, or give more time with --timeout (session {session_id} stays)",
            humanize(timeout)
        ),
    }
    .into()
}

async fn approve(client: &Client, session_id: &str, request_id: &str) -> anyhow::Result<()> {
    let answer = client
        .respond_approval(&ApprovalRespondParams {
            session_id: session_id.to_owned(),
            request_id: request_id.to_owned(),
            decision: ApprovalDecision::Approve,
            reason: None,
            pattern: None,
        })
        .await;
    match answer {
        // Someone answered it first: their answer stands.
        Err(ClientError::Rpc { code, .. }) if code == ErrorCode::ApprovalNotFound.code() => Ok(()),
        other => {
            other?;
            Ok(())
        }
    }
}

/// Cancels the turn and shows its end, so that the output (and `--json` stream) is complete.
async fn cancel_and_drain(
    client: &Client,
    stream: &mut EventStream,
    renderer: &mut render::Renderer,
    session_id: &str,
    turn: u32,
) -> anyhow::Result<()> {
    client.cancel(session_id).await?;
    let deadline = Instant::now() + CANCEL_GRACE;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, stream.next()).await {
        let event = event?;
        renderer.event(&event)?;
        if matches!(event.kind, EventKind::TurnFinished { turn: finished, .. } if finished == turn)
        {
            break;
        }
    }
    renderer.finish();
    Ok(())
}

/// The session's title: the prompt's first line, shortened.
fn title(prompt: &str) -> String {
    let line = prompt.trim().lines().next().unwrap_or_default();
    match line.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

fn humanize(duration: Duration) -> String {
    let seconds = duration.as_secs_f64();
    if seconds < 1.0 {
        format!("{} ms", duration.as_millis())
    } else {
        format!("{seconds} s")
    }
}
