//! `wait ID --for approval|idle|goal`: blocks until the session asks for an approval, is idle,
//! or its goal loop has finished, so that scripts and cron jobs can react.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use cwcode_protocol::{Client, Event, EventKind, GoalState, SessionStatus};

use super::{connect, connection_lost, print_json};
use crate::exit::{self, Outcome};
use crate::render;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// An approval request is waiting for an answer (one already waiting counts).
    Approval,
    /// No turn is running or waiting for an approval.
    Idle,
    /// The goal loop is not running (it finished, stopped or never started); exits 0 only when
    /// it ended `complete` (see the exit codes for the other end states).
    Goal,
}

/// Most approval requests tracked while replaying a journal; older ones are dropped, newest kept.
const MAX_PENDING: usize = 256;

pub async fn wait(
    id: &str,
    target: Target,
    timeout: Option<Duration>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let client = connect(true).await?;
    let waiting = async {
        match target {
            Target::Approval => approval(&client, id, json).await,
            Target::Idle => idle(&client, id, json).await,
            Target::Goal => goal(&client, id, json).await,
        }
    };
    let Some(timeout) = timeout else {
        return waiting.await;
    };
    match tokio::time::timeout(timeout, waiting).await {
        Ok(result) => result,
        Err(_) => Err(Outcome {
            code: exit::TIMED_OUT,
            name: "timeout",
            message: format!("{id}: still no {} after {timeout:?}", what(target)),
        }
        .into()),
    }
}

fn what(target: Target) -> &'static str {
    match target {
        Target::Approval => "approval request",
        Target::Idle => "idle session",
        Target::Goal => "end of the goal loop",
    }
}

/// Replays the journal to find a request still open, then waits for a new one.
async fn approval(client: &Client, id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let session = client.get_session(id).await?;
    let mut stream = client.subscribe(&session.id, Some(0)).await?;
    let mut open: BTreeMap<u64, Event> = BTreeMap::new();
    let mut caught_up = session.last_seq == 0;
    loop {
        if caught_up && let Some((_, event)) = open.pop_first() {
            return show_request(&event, &session.id, json);
        }
        let Some(event) = stream.next().await else {
            return Err(connection_lost(&session.id));
        };
        let event = event?;
        caught_up |= event.seq >= session.last_seq;
        match &event.kind {
            EventKind::ApprovalRequested { .. } => {
                open.insert(event.seq, event.clone());
                if open.len() > MAX_PENDING {
                    open.pop_first();
                }
            }
            EventKind::ApprovalResolved { request_id, .. } => {
                open.retain(|_, asked| !is_request(asked, request_id));
            }
            // A request does not outlive its turn (a restart interrupts it).
            EventKind::TurnFinished { .. } => open.clear(),
            EventKind::SubscriptionEnded { reason, .. } => {
                anyhow::bail!("the daemon ended the event stream: {reason}")
            }
            _ => {}
        }
    }
}

fn is_request(event: &Event, wanted: &str) -> bool {
    matches!(&event.kind, EventKind::ApprovalRequested { request_id, .. } if request_id == wanted)
}

fn show_request(event: &Event, session_id: &str, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        print_json(event)?;
    } else if let EventKind::ApprovalRequested {
        request_id,
        tool,
        arguments,
        ..
    } = &event.kind
    {
        println!("{request_id} {tool} {arguments}");
        eprintln!(
            "answer it with `cwcode-cli approve {session_id} {request_id}` or `cwcode-cli deny {session_id} {request_id}`"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Subscribes before looking, so that a change in between is seen on the stream.
async fn idle(client: &Client, id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let session = client.get_session(id).await?;
    let mut stream = client.subscribe(&session.id, None).await?;
    let mut status = client.get_session(&session.id).await?.status;
    while status != SessionStatus::Idle {
        let Some(event) = stream.next().await else {
            return Err(connection_lost(&session.id));
        };
        match event?.kind {
            EventKind::StatusChanged { status: now } => status = now,
            EventKind::SubscriptionEnded { reason, .. } => {
                anyhow::bail!("the daemon ended the event stream: {reason}")
            }
            _ => {}
        }
    }
    let info = client.get_session(&session.id).await?;
    if json {
        print_json(&info)?;
    } else {
        println!("{} is {}", info.id, render::status_words(info.status));
    }
    Ok(ExitCode::SUCCESS)
}

async fn goal(client: &Client, id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let session = client.get_session(id).await?;
    let mut stream = client.subscribe(&session.id, None).await?;
    let mut running = client.goal_status(&session.id).await?.running;
    while running {
        let Some(event) = stream.next().await else {
            return Err(connection_lost(&session.id));
        };
        match event?.kind {
            EventKind::GoalLoopStopped { .. } => running = false,
            EventKind::SubscriptionEnded { reason, .. } => {
                anyhow::bail!("the daemon ended the event stream: {reason}")
            }
            _ => {}
        }
    }
    let status = client.goal_status(&session.id).await?;
    if json {
        print_json(&status)?;
    } else {
        print!("{}", render::goal_status(&status));
    }
    Ok(match end_code(status.state) {
        0 => ExitCode::SUCCESS,
        code => ExitCode::from(code),
    })
}

/// The exit code for the state a goal loop ended in: 0 only when every goal is done, so that a
/// script can tell a finished night from one that ran out (README's exit-code table).
fn end_code(state: GoalState) -> u8 {
    match state {
        GoalState::Complete => 0,
        GoalState::Failed => exit::TURN_FAILED,
        GoalState::Stopped => exit::TURN_CANCELLED,
        GoalState::Storm => exit::STORM_BROKEN,
        GoalState::Capped => exit::GOAL_CAPPED,
        GoalState::BudgetExhausted => exit::GOAL_BUDGET_EXHAUSTED,
        GoalState::Stalled => exit::GOAL_STALLED,
        // Running or waiting cannot be the state once the loop is seen stopped; a loop started
        // again at once is not this wait's loop, so it is not reported as ended either.
        GoalState::Idle | GoalState::Running | GoalState::AwaitingApproval => exit::GOAL_NEVER_RAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_complete_loop_exits_zero_and_each_end_state_has_its_own_code() {
        let codes: Vec<(GoalState, u8)> = GoalState::ALL
            .into_iter()
            .map(|state| (state, end_code(state)))
            .collect();
        let zero: Vec<GoalState> = codes
            .iter()
            .filter(|(_, code)| *code == 0)
            .map(|(state, _)| *state)
            .collect();
        assert_eq!(zero, [GoalState::Complete]);
        let ended = [
            GoalState::Complete,
            GoalState::Capped,
            GoalState::BudgetExhausted,
            GoalState::Stalled,
            GoalState::Storm,
            GoalState::Stopped,
            GoalState::Failed,
        ];
        let mut distinct: Vec<u8> = ended.iter().map(|state| end_code(*state)).collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ended.len(), "{codes:?}");
    }
}
