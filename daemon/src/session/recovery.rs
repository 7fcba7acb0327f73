//! Keeping history and files true after a crash or when the journal refuses an event (a full
//! disk): a turn left open is closed (once the journal takes events again), each of its
//! unanswered tool calls told whether it had started (and so may have done part of its work) or
//! never ran, with what an interrupted shell command changed recorded so that `/rewind` covers
//! it; a prompt whose turn never started is tried again, and a rewind that cannot be journalled
//! puts the files back.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use cwcode_protocol::{
    ApprovalDecision, Event, EventKind, RewindResult, SessionStatus, TurnOutcome, Usage,
};
use tokio_util::sync::CancellationToken;

use super::{JOURNAL_RETRY_MAX, Session, SessionError};
use crate::agent;
use crate::agent::history::Conversation;
use crate::journal::JournalError;
use crate::journal::bus::EventLog;
use crate::store::{CheckpointStore, SharedStore};
use crate::tools::Registry;

/// The turn the journal shows as started and never finished, if any.
pub(super) fn open_turn(events: &[Event]) -> Option<u32> {
    let mut open_turn = None;
    for event in events {
        match &event.kind {
            EventKind::TurnStarted { turn, .. } => open_turn = Some(*turn),
            EventKind::TurnFinished { .. } => open_turn = None,
            _ => {}
        }
    }
    open_turn
}

/// A turn the journal shows as started and never finished, and how it is to be closed.
pub(super) struct OpenTurn {
    pub(super) turn: u32,
    outcome: TurnOutcome,
    /// Why the turn ended, for its `TurnFinished`.
    error: String,
    /// What each tool call still without a result is answered...
    call_result: &'static str,
    /// ...unless it had started: then this, by call id.
    started_result: HashMap<String, String>,
}

impl OpenTurn {
    /// The turn that was running when the daemon died, if any. What a shell command of it that
    /// had started changed since its snapshot is recorded under the turn's checkpoint now.
    pub(super) fn interrupted(
        log: &EventLog,
        events: &[Event],
        checkpoints: Option<&mut CheckpointStore>,
        registry: &Registry,
    ) -> Option<Self> {
        let turn = open_turn(events)?;
        let started = started_calls(events);
        // Only a shell command's snapshot is the baseline on disk; a file tool saved its paths
        // before it ran.
        let ran_a_command = started
            .values()
            .any(|call| registry.snapshots_workspace(&call.name, &call.arguments));
        let changed_note = match checkpoints {
            Some(store) if ran_a_command => record_what_changed(log, store, turn),
            _ => String::new(),
        };
        let started_result = started
            .into_keys()
            .map(|call_id| {
                let result = format!(
                    "interrupted: the daemon stopped while this call ran, so it may have done \
                     part of its work{changed_note}. Check the state before repeating it."
                );
                (call_id, result)
            })
            .collect();
        Some(Self {
            turn,
            outcome: TurnOutcome::Interrupted,
            error: "the daemon stopped during this turn".to_owned(),
            call_result: "not run: the daemon stopped before this call ran",
            started_result,
        })
    }

    /// A turn that stopped because the journal refused an event.
    pub(super) fn unjournalled(turn: u32, error: &JournalError) -> Self {
        Self {
            turn,
            outcome: TurnOutcome::Failed,
            error: format!(
                "the turn stopped because its events could not be journalled: {}",
                error.cause()
            ),
            call_result: "not run: the journal could not be written",
            started_result: HashMap::new(),
        }
    }
}

/// Gives the open turn's unanswered tool calls a result and marks it finished, so the history
/// is valid again. Done once its `TurnFinished` is journalled; a retry after a partial failure
/// answers only the calls still unanswered.
pub(super) fn close_turn(
    log: &EventLog,
    conversation: &mut Conversation,
    open: &OpenTurn,
) -> Result<(), JournalError> {
    agent::answer_each_unanswered(log, conversation, |call| {
        open.started_result
            .get(&call.id)
            .cloned()
            .unwrap_or_else(|| open.call_result.to_owned())
    })?;
    log.publish(EventKind::TurnFinished {
        turn: open.turn,
        outcome: open.outcome,
        usage: Usage::default(),
        error: Some(open.error.clone()),
    })?;
    let idle = log.publish(EventKind::StatusChanged {
        status: SessionStatus::Idle,
    });
    if let Err(error) = idle.map(drop).and_then(|()| log.sync()) {
        tracing::warn!(%error, "the turn is closed, but the journal is not synced yet");
    }
    Ok(())
}

/// Closes the open turn, retrying while the journal refuses (a full disk) until it accepts or
/// the daemon stops; a turn still open then is closed as interrupted on the next start.
pub(super) async fn close_turn_when_possible(
    session: &Session,
    conversation: &mut Conversation,
    open: OpenTurn,
    stopping: &CancellationToken,
) {
    let mut delay = Duration::from_millis(250);
    loop {
        match close_turn(&session.log, conversation, &open) {
            Ok(()) => return,
            Err(error) => {
                tracing::warn!(session = %session.id, turn = open.turn, %error, "cannot close the turn yet; retrying");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stopping.cancelled() => return,
        }
        delay = (delay * 2).min(JOURNAL_RETRY_MAX);
    }
}

/// A rewind (or its undo) changed the files but the journal refused to record it: the files
/// are put back, so that files and history still agree, and the error says what happened.
pub(super) async fn put_files_back(
    store: &SharedStore,
    turn: Option<u32>,
    result: &RewindResult,
    journal: JournalError,
) -> SessionError {
    let put_back = match turn {
        Some(_) => store.undo_restore().await.map(drop),
        None => store.restore_to_before(result.turn).await.map(drop),
    };
    let what = if turn.is_some() { "rewind" } else { "undo" };
    match put_back {
        Ok(()) => SessionError::RewindNotJournalled { what, journal },
        Err(put_back) => SessionError::RewindNotJournalledNorUndone {
            what,
            journal,
            put_back,
        },
    }
}

/// After the journal refused an event (a full disk): a prompt whose turn never started is
/// returned to be tried again, since it was accepted; a turn left open is closed as failed
/// once the journal takes events again, so the session goes on.
pub(super) async fn recover_from_refused_journal(
    session: &Session,
    conversation: &mut Conversation,
    prompt: Option<(u32, String)>,
    error: &JournalError,
    stopping: &CancellationToken,
) -> Option<(u32, String)> {
    let events = match session.log.read_all() {
        Ok(events) => events,
        Err(read_error) => {
            tracing::error!(session = %session.id, %read_error, "cannot read the journal back");
            return None;
        }
    };
    if let Some((turn, text)) = prompt {
        let started = events
            .iter()
            .any(|event| matches!(event.kind, EventKind::TurnStarted { turn: t, .. } if t == turn));
        if !started {
            return Some((turn, text));
        }
    }
    if let Some(turn) = open_turn(&events) {
        let open = OpenTurn::unjournalled(turn, error);
        close_turn_when_possible(session, conversation, open, stopping).await;
    }
    None
}

struct StartedCall {
    name: String,
    arguments: String,
}

/// The calls of the last turn that had started running: journalled as started and not waiting
/// for (or denied) an approval, by call id with their tool and arguments.
fn started_calls(events: &[Event]) -> HashMap<String, StartedCall> {
    let mut calls: HashMap<String, StartedCall> = HashMap::new();
    let mut started: HashSet<String> = HashSet::new();
    let mut awaiting: HashMap<String, String> = HashMap::new();
    // A sub-agent's calls are not the turn's: its `task` call stands for them.
    for event in events.iter().filter(|event| event.parent_call_id.is_none()) {
        match &event.kind {
            EventKind::TurnStarted { .. } => {
                calls.clear();
                started.clear();
                awaiting.clear();
            }
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
    calls
}

/// Compares the workspace with the baseline taken before the interrupted command and records the
/// earlier state of what it changed under the turn's checkpoint. Returns the note for the model.
/// The files are safe either way: a failure only costs the rewind.
fn record_what_changed(log: &EventLog, store: &mut CheckpointStore, turn: u32) -> String {
    match store.recover_interrupted_command(turn) {
        Ok(changes) if changes.is_empty() => String::new(),
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
            if let Err(error) = log.publish(EventKind::CheckpointCreated { turn, files }) {
                tracing::warn!(%error, "cannot journal the interrupted command's checkpoint");
            }
            note
        }
        Err(error) => {
            let message = format!(
                "/rewind may miss what the interrupted call of prompt {turn} changed: {error}"
            );
            if let Err(error) = log.publish(EventKind::Error { message }) {
                tracing::warn!(%error, "cannot journal that the checkpoint is incomplete");
            }
            String::new()
        }
    }
}
