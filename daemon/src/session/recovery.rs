//! A session whose daemon died mid-turn, put right on the next start: each unanswered tool call
//! gets a result that says whether it had started (and so may have done part of its work) or never
//! ran, what a shell command changed in the meantime is recorded so that `/rewind` covers it, and
//! the turn is marked interrupted, so the history is valid again.

use std::collections::{HashMap, HashSet};

use cwcode_protocol::{ApprovalDecision, Event, EventKind, SessionStatus, TurnOutcome, Usage};

use super::bus::EventLog;
use super::history::Conversation;
use super::journal::JournalError;
use crate::agent;
use crate::store::CheckpointStore;
use crate::tools::Registry;

const NOT_RUN: &str = "not run: the daemon stopped before this call ran";

/// The turn that was running when the daemon died, if any, closed as interrupted.
pub(super) fn close_interrupted_turn(
    log: &EventLog,
    conversation: &mut Conversation,
    events: &[Event],
    checkpoints: Option<&mut CheckpointStore>,
    registry: &Registry,
) -> Result<(), JournalError> {
    let Some((turn, started)) = open_turn(events) else {
        return Ok(());
    };
    // Only a shell command's snapshot is the baseline on disk; a file tool saved its paths
    // before it ran.
    let ran_a_command = started
        .values()
        .any(|call| registry.snapshots_workspace(&call.name, &call.arguments));
    let changed_note = match checkpoints {
        Some(store) if ran_a_command => record_what_changed(log, store, turn)?,
        _ => String::new(),
    };
    agent::answer_each_unanswered(log, conversation, |call| {
        if started.contains_key(&call.id) {
            format!(
                "interrupted: the daemon stopped while this call ran, so it may have done part \
                 of its work{changed_note}. Check the state before repeating it."
            )
        } else {
            NOT_RUN.to_owned()
        }
    })?;
    log.publish(EventKind::TurnFinished {
        turn,
        outcome: TurnOutcome::Interrupted,
        usage: Usage::default(),
        error: Some("the daemon stopped during this turn".to_owned()),
    })?;
    log.publish(EventKind::StatusChanged {
        status: SessionStatus::Idle,
    })?;
    log.sync()
}

struct StartedCall {
    name: String,
    arguments: String,
}

/// The turn left open and the calls of it that had started running: journalled as started and
/// not waiting for (or denied) an approval, by call id with their tool and arguments.
fn open_turn(events: &[Event]) -> Option<(u32, HashMap<String, StartedCall>)> {
    let mut open = None;
    let mut calls: HashMap<String, StartedCall> = HashMap::new();
    let mut started: HashSet<String> = HashSet::new();
    let mut awaiting: HashMap<String, String> = HashMap::new();
    for event in events {
        match &event.kind {
            EventKind::TurnStarted { turn, .. } => {
                open = Some(*turn);
                calls.clear();
                started.clear();
                awaiting.clear();
            }
            EventKind::TurnFinished { .. } => open = None,
            EventKind::ToolCallStarted {
                call_id,
                name,
                arguments,
            } => {
                let call = StartedCall {
                    name: name.clone(),
                    arguments: arguments.clone(),
                };
                calls.insert(call_id.clone(), call);
                started.insert(call_id.clone());
            }
            EventKind::ApprovalRequested {
                request_id,
                call_id,
                ..
            } => {
                started.remove(call_id);
                awaiting.insert(request_id.clone(), call_id.clone());
            }
            EventKind::ApprovalResolved {
                request_id,
                decision,
                ..
            } => {
                if let Some(call_id) = awaiting.remove(request_id)
                    && *decision != ApprovalDecision::Deny
                {
                    started.insert(call_id);
                }
            }
            _ => {}
        }
    }
    calls.retain(|call_id, _| started.contains(call_id));
    open.map(|turn| (turn, calls))
}

/// Compares the workspace with the baseline taken before the interrupted command and records the
/// earlier state of what it changed under the turn's checkpoint. Returns the note for the model.
fn record_what_changed(
    log: &EventLog,
    store: &mut CheckpointStore,
    turn: u32,
) -> Result<String, JournalError> {
    match store.recover_interrupted_command(turn) {
        Ok(changes) if changes.is_empty() => Ok(String::new()),
        Ok(changes) => {
            let files: Vec<String> = changes
                .changed
                .iter()
                .chain(&changes.created)
                .chain(&changes.deleted)
                .map(|path| path.display().to_string())
                .collect();
            let note = format!(
                " (it changed {}; /rewind {turn} undoes that)",
                files.join(", ")
            );
            log.publish(EventKind::CheckpointCreated { turn, files })?;
            Ok(note)
        }
        Err(error) => {
            log.publish(EventKind::Error {
                message: format!(
                    "/rewind may miss what the interrupted call of prompt {turn} changed: {error}"
                ),
            })?;
            Ok(String::new())
        }
    }
}
