//! Turns and their events: send, cancel, events, and the answers to approval requests.

use std::process::ExitCode;

use anyhow::bail;
use cwcode_protocol::{ApprovalDecision, ApprovalRespondParams, Client, EventKind};

use super::{connect, connection_lost, print_json, prompt_text, turn_exit};
use crate::exit::{self, Outcome};
use crate::render;

pub async fn send(id: &str, text: String, wait: bool, json: bool) -> anyhow::Result<ExitCode> {
    let text = prompt_text(text)?;
    let client = connect(true).await?;
    if wait {
        return send_and_wait(&client, id, &text, json).await;
    }
    let sent = client.send(id, &text).await?;
    if json {
        print_json(&sent)?;
    } else if sent.queued {
        println!("turn {} queued behind the running one", sent.turn);
    } else {
        println!("turn {} started", sent.turn);
    }
    Ok(ExitCode::SUCCESS)
}

/// Subscribes first, then sends, so no event of the new turn can be missed. Ctrl+C stops
/// following, never the turn: it goes on in the daemon.
async fn send_and_wait(
    client: &Client,
    id: &str,
    text: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let session = client.get_session(id).await?;
    let mut stream = client.subscribe(&session.id, None).await?;
    let sent = client.send(&session.id, text).await?;
    if sent.queued && !json {
        eprintln!("(queued behind the running turn)");
    }
    let mut renderer = render::Renderer::new(json, &session.id);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        let event = tokio::select! {
            event = stream.next() => event,
            // A handler that cannot be installed disables this branch.
            Ok(()) = &mut ctrl_c => {
                renderer.finish();
                return Err(Outcome {
                    code: exit::INTERRUPTED,
                    name: "interrupted",
                    message: format!(
                        "stopped following; turn {turn} goes on in the daemon. Cancel it with \
                         `cwcode-cli cancel {id}`, follow it again with \
                         `cwcode-cli events {id} --follow`",
                        turn = sent.turn,
                        id = session.id
                    ),
                }
                .into());
            }
        };
        let Some(event) = event else {
            return Err(connection_lost(&session.id));
        };
        let event = event?;
        renderer.event(&event)?;
        if let EventKind::TurnFinished {
            turn,
            outcome,
            error,
            ..
        } = &event.kind
            && *turn == sent.turn
        {
            return Ok(turn_exit(*outcome, error.as_deref(), json));
        }
        // A stream dropped for lag resumes by itself; one that ends here cannot be resumed.
        if let EventKind::SubscriptionEnded { reason, .. } = &event.kind {
            bail!("the daemon ended the event stream: {reason}");
        }
    }
}

pub async fn cancel(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let result = connect(true).await?.cancel(id).await?;
    if json {
        print_json(&result)?;
    } else if result.cancelled {
        println!("cancelled");
    } else {
        println!("no turn was running");
    }
    Ok(ExitCode::SUCCESS)
}

/// The transcript goes to stdout whole (answers, tool calls, approvals); only what is about the
/// stream itself goes to stderr. With `--follow` a daemon that goes away is an error (exit 5).
pub async fn events(id: &str, since: u64, follow: bool, json: bool) -> anyhow::Result<ExitCode> {
    let client = connect(true).await?;
    let session = client.get_session(id).await?;
    if !follow && session.last_seq <= since {
        return Ok(ExitCode::SUCCESS);
    }
    let mut stream = client.subscribe(&session.id, Some(since)).await?;
    let mut renderer = render::Renderer::transcript(json, &session.id);
    loop {
        let Some(event) = stream.next().await else {
            renderer.finish();
            return Err(connection_lost(&session.id));
        };
        let event = event?;
        renderer.event(&event)?;
        if let EventKind::SubscriptionEnded { reason, .. } = &event.kind {
            bail!("the daemon ended the event stream: {reason}");
        }
        if !follow && event.seq >= session.last_seq {
            break;
        }
    }
    renderer.finish();
    Ok(ExitCode::SUCCESS)
}

/// The session's todo list as the model last wrote it (the journal's last `todo_updated`).
pub async fn todo(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let client = connect(true).await?;
    let session = client.get_session(id).await?;
    let mut todos = Vec::new();
    if session.last_seq > 0 {
        let mut stream = client.subscribe(&session.id, Some(0)).await?;
        loop {
            let Some(event) = stream.next().await else {
                return Err(connection_lost(&session.id));
            };
            let event = event?;
            match event.kind {
                EventKind::TodoUpdated { todos: latest } => todos = latest,
                EventKind::SubscriptionEnded { reason, .. } => {
                    bail!("the daemon ended the event stream: {reason}")
                }
                _ => {}
            }
            if event.seq >= session.last_seq {
                break;
            }
        }
    }
    if json {
        print_json(&todos)?;
    } else {
        print!("{}", render::todo_list(&todos));
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn approve(
    id: &str,
    request: String,
    always: bool,
    pattern: Option<String>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let decision = if always {
        ApprovalDecision::Always
    } else {
        ApprovalDecision::Approve
    };
    respond(id, request, decision, None, pattern, json).await
}

pub async fn deny(
    id: &str,
    request: String,
    reason: Option<String>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    respond(id, request, ApprovalDecision::Deny, reason, None, json).await
}

async fn respond(
    id: &str,
    request_id: String,
    decision: ApprovalDecision,
    reason: Option<String>,
    pattern: Option<String>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    connect(true)
        .await?
        .respond_approval(&ApprovalRespondParams {
            session_id: id.to_owned(),
            request_id: request_id.clone(),
            decision,
            reason,
            pattern,
        })
        .await?;
    if json {
        print_json(&serde_json::json!({ "requestId": request_id, "decision": decision }))?;
    } else {
        println!("{request_id}: {decision:?}");
    }
    Ok(ExitCode::SUCCESS)
}
