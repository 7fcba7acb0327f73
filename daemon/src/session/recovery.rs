//! Keeping history and files true when the journal refuses an event (a full disk): a turn
//! left open is closed once the journal takes events again, a prompt whose turn never started
//! is tried again, and a rewind that cannot be journalled puts the files back.

use std::time::Duration;

use cwcode_protocol::{Event, EventKind, RewindResult, SessionStatus, TurnOutcome, Usage};
use tokio_util::sync::CancellationToken;

use super::bus::EventLog;
use super::history::Conversation;
use super::journal::JournalError;
use super::{JOURNAL_RETRY_MAX, Session, SessionError};
use crate::agent;
use crate::store::SharedStore;

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
    /// What each tool call still without a result is answered.
    call_result: &'static str,
}

impl OpenTurn {
    /// The turn that was running when the daemon died.
    pub(super) fn interrupted(turn: u32) -> Self {
        Self {
            turn,
            outcome: TurnOutcome::Interrupted,
            error: "the daemon stopped during this turn".to_owned(),
            call_result: "not run: the daemon stopped before this call ran",
        }
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
    agent::answer_unanswered(log, conversation, open.call_result)?;
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
    error: &JournalError,
) -> SessionError {
    let put_back = match turn {
        Some(_) => store.undo_restore().await.map(drop),
        None => store.restore_to_before(result.turn).await.map(drop),
    };
    let what = if turn.is_some() { "rewind" } else { "undo" };
    let reason = match put_back {
        Ok(()) => format!(
            "the {what} could not be journalled, so the files were put back and nothing changed: {}",
            error.cause()
        ),
        Err(put_back_error) => format!(
            "the {what} changed the files but could not be journalled ({}), and putting them back \
             failed too ({put_back_error}): check the workspace with `git status` once there is \
             space",
            error.cause()
        ),
    };
    SessionError::Io {
        path: error.path().to_owned(),
        reason,
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
