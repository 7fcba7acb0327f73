//! A session's event log: every event is journalled first, then broadcast to live subscribers.
//!
//! Streamed text (assistant, reasoning and tool output deltas) is coalesced before it is
//! journalled: consecutive deltas of one kind (and one tool call) are held and written as one
//! event once [`COALESCE_BYTES`] have gathered, [`COALESCE_WINDOW`] after the first of them, or
//! as soon as any other event is published. So the text before a `stream_restarted`, a
//! `tool_call_finished` or a turn boundary is always journalled before it, and a model streaming
//! five characters a chunk makes a few events a second instead of thousands.
//!
//! Subscribing takes the broadcast receiver and the journal's last `seq` under the same lock that
//! publishing holds, so the replay (read from disk up to that `seq`) and the live stream (strictly
//! after it) meet with no gap and no duplicate.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use cwcode_protocol::{Event, EventKind};
use serde_json::value::RawValue;
use tokio::sync::broadcast;

use super::replay::ReplayReader;
use super::{Journal, JournalError};

/// How many events a subscriber may fall behind before it is dropped (it is told so, and the
/// official clients resume from their last `seq`); the session never waits for a slow client.
///
/// What this buffer can hold is bounded by the events' sizes: a journalled delta is under twice
/// [`COALESCE_BYTES`] (8192 of them: under 64 MiB, shared by all subscribers), tool output past
/// its head and tail is not streamed at all (see `agent::tool_output`), and tool results are
/// bounded by the tools' limits; an `assistant_message` is as long as the model's answer. A value
/// leaves the buffer once every subscriber has read it.
const SUBSCRIBER_LAG_LIMIT: usize = 8192;

/// Coalesced text is journalled once this much has gathered.
pub const COALESCE_BYTES: usize = 4096;
/// ...or this long after the first delta of a batch, so a slow stream still shows promptly.
pub const COALESCE_WINDOW: Duration = Duration::from_millis(40);

/// A journalled event as live subscribers get it: already serialised once for all of them.
#[derive(Debug)]
pub struct LiveEvent {
    pub seq: u64,
    pub json: Box<RawValue>,
}

pub struct EventLog {
    inner: Arc<Inner>,
    /// Set on a sub-agent's view of the log: every event it publishes is nested under this
    /// call of the parent's (`parentCallId`).
    parent_call_id: Option<String>,
}

struct Inner {
    path: PathBuf,
    state: Mutex<State>,
    live: broadcast::Sender<Arc<LiveEvent>>,
}

struct State {
    journal: Journal,
    /// Delta text not journalled yet.
    pending: Option<EventKind>,
    /// The call `pending` is nested under, if it is a sub-agent's.
    pending_parent: Option<String>,
    /// A flush timer is running for `pending`.
    timer_armed: bool,
    /// A timer's flush failed; the next publish reports it, as if its own write had failed.
    deferred_error: Option<JournalError>,
}

/// A subscription's live continuation, and the part of the journal to replay before it.
pub struct Subscription {
    /// The journal's last `seq` when the subscription was taken: live events come after it.
    pub until: u64,
    /// The journal and the range `(since, until]` to replay from it, when there is one.
    pub replay: Option<Replay>,
    pub live: broadcast::Receiver<Arc<LiveEvent>>,
}

pub struct Replay {
    pub path: PathBuf,
    pub since: u64,
    pub until: u64,
}

impl EventLog {
    pub fn new(path: &Path, journal: Journal) -> Self {
        let (live, _) = broadcast::channel(SUBSCRIBER_LAG_LIMIT);
        Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                state: Mutex::new(State {
                    journal,
                    pending: None,
                    pending_parent: None,
                    timer_armed: false,
                    deferred_error: None,
                }),
                live,
            }),
            parent_call_id: None,
        }
    }

    /// The same log as seen by a sub-agent running for the parent's call `call_id`: what it
    /// publishes is journalled and broadcast with `parentCallId` set to that call.
    pub fn nested(&self, call_id: &str) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            parent_call_id: Some(call_id.to_owned()),
        }
    }

    /// The parent's call this view is nested under; `None` for the session's own log.
    pub fn parent_call_id(&self) -> Option<&str> {
        self.parent_call_id.as_deref()
    }

    /// The directory the journal lives in: the session's.
    pub fn dir(&self) -> Option<&Path> {
        self.inner.path.parent()
    }

    /// Journals an event (after any delta text still held) and broadcasts it.
    pub fn publish(&self, kind: EventKind) -> Result<Arc<Event>, JournalError> {
        let mut state = self.inner.state();
        state.take_deferred_error()?;
        state.flush(&self.inner.live)?;
        state.append(kind, self.parent_call_id.clone(), &self.inner.live)
    }

    /// Publishes streamed text, coalesced with the deltas before it (see the module's doc).
    /// Other kinds are published at once.
    pub fn publish_delta(&self, kind: EventKind) -> Result<(), JournalError> {
        if !is_delta(&kind) {
            return self.publish(kind).map(drop);
        }
        let mut state = self.inner.state();
        state.take_deferred_error()?;
        // A sub-agent's text is never merged into the parent's, nor the other way round.
        if state.pending.is_some() && state.pending_parent != self.parent_call_id {
            state.flush(&self.inner.live)?;
        }
        for piece in pieces(kind) {
            if let Some(unmerged) = merge(&mut state.pending, piece) {
                state.flush(&self.inner.live)?;
                state.pending = Some(unmerged);
                state.pending_parent.clone_from(&self.parent_call_id);
            }
            if state.pending.as_ref().map_or(0, delta_len) >= COALESCE_BYTES {
                state.flush(&self.inner.live)?;
            }
        }
        if state.pending.is_none() || state.timer_armed {
            return Ok(());
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                state.timer_armed = true;
                runtime.spawn(flush_later(Arc::downgrade(&self.inner)));
                Ok(())
            }
            // Outside a runtime nothing could flush later: do not hold the text.
            Err(_) => state.flush(&self.inner.live),
        }
    }

    pub fn last_seq(&self) -> u64 {
        self.inner.state().journal.last_seq()
    }

    /// Journals any delta text still held, then makes everything durable.
    pub fn sync(&self) -> Result<(), JournalError> {
        let mut state = self.inner.state();
        state.take_deferred_error()?;
        state.flush(&self.inner.live)?;
        state.journal.sync()
    }

    /// Every journalled event, read from disk.
    pub fn read_all(&self) -> Result<Vec<Event>, JournalError> {
        let last_seq = self.last_seq();
        Journal::read_range(&self.inner.path, 0, last_seq)
    }

    /// Up to `limit` events after `since`, read from disk, and whether more follow them.
    /// Blocking: call it off the async workers.
    pub fn page(&self, since: u64, limit: usize) -> Result<(Vec<Event>, bool), JournalError> {
        let until = self.last_seq();
        let mut reader = ReplayReader::open(&self.inner.path, since, until)?;
        let mut events = Vec::new();
        while events.len() < limit {
            let batch = reader.next_batch()?;
            if batch.is_empty() {
                break;
            }
            for raw in batch {
                match serde_json::from_str::<Event>(raw.json.get()) {
                    Ok(event) => events.push(event),
                    // Loading the session reported it; a page goes on past it.
                    Err(error) => {
                        tracing::warn!(seq = raw.seq, %error, "skipping an unreadable event in a page")
                    }
                }
            }
        }
        events.truncate(limit);
        let last = events.last().map_or(since, |event| event.seq);
        Ok((events, last < until))
    }

    /// Continues live after the journal's current end, replaying events after `since` first
    /// (none when `since` is `None`). The replay is read later, in pieces, by its reader.
    pub fn subscribe(&self, since: Option<u64>) -> Result<Subscription, JournalError> {
        let (live, until) = {
            let state = self.inner.state();
            (self.inner.live.subscribe(), state.journal.last_seq())
        };
        let replay = since.filter(|&since| since < until).map(|since| Replay {
            path: self.inner.path.clone(),
            since,
            until,
        });
        Ok(Subscription {
            until,
            replay,
            live,
        })
    }
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the journal half-updated: each append is
        // one write. Keep serving rather than poisoning every later call.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl State {
    fn take_deferred_error(&mut self) -> Result<(), JournalError> {
        self.deferred_error.take().map_or(Ok(()), Err)
    }

    fn append(
        &mut self,
        kind: EventKind,
        parent_call_id: Option<String>,
        live: &broadcast::Sender<Arc<LiveEvent>>,
    ) -> Result<Arc<Event>, JournalError> {
        let event = Arc::new(self.journal.append_nested(kind, parent_call_id)?);
        // Serialised once here rather than once per subscriber; nobody watching is no error.
        if live.receiver_count() > 0 {
            match serde_json::value::to_raw_value(&*event) {
                Ok(json) => {
                    let _ = live.send(Arc::new(LiveEvent {
                        seq: event.seq,
                        json,
                    }));
                }
                Err(error) => tracing::error!(%error, "cannot serialise an event for subscribers"),
            }
        }
        Ok(event)
    }

    fn flush(&mut self, live: &broadcast::Sender<Arc<LiveEvent>>) -> Result<(), JournalError> {
        match self.pending.take() {
            Some(kind) => {
                let parent_call_id = self.pending_parent.take();
                self.append(kind, parent_call_id, live).map(drop)
            }
            None => Ok(()),
        }
    }
}

async fn flush_later(log: Weak<Inner>) {
    tokio::time::sleep(COALESCE_WINDOW).await;
    let Some(log) = log.upgrade() else {
        return;
    };
    let mut state = log.state();
    state.timer_armed = false;
    if let Err(error) = state.flush(&log.live) {
        tracing::error!(%error, "cannot journal streamed text");
        state.deferred_error = Some(error);
    }
}

fn is_delta(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::AssistantDelta { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::ToolOutputDelta { .. }
    )
}

fn delta_len(kind: &EventKind) -> usize {
    match kind {
        EventKind::AssistantDelta { text }
        | EventKind::ReasoningDelta { text }
        | EventKind::ToolOutputDelta { text, .. } => text.len(),
        _ => 0,
    }
}

/// A delta cut into pieces of at most [`COALESCE_BYTES`] (on character boundaries), so that no
/// journalled delta exceeds twice that, whatever one provider chunk or tool read held.
fn pieces(kind: EventKind) -> Vec<EventKind> {
    if delta_len(&kind) <= COALESCE_BYTES {
        return vec![kind];
    }
    let with_text = |text: &str| match &kind {
        EventKind::AssistantDelta { .. } => EventKind::AssistantDelta { text: text.into() },
        EventKind::ReasoningDelta { .. } => EventKind::ReasoningDelta { text: text.into() },
        EventKind::ToolOutputDelta { call_id, .. } => EventKind::ToolOutputDelta {
            call_id: call_id.clone(),
            text: text.into(),
        },
        other => other.clone(),
    };
    let (EventKind::AssistantDelta { text }
    | EventKind::ReasoningDelta { text }
    | EventKind::ToolOutputDelta { text, .. }) = &kind
    else {
        return vec![kind];
    };
    let mut pieces = Vec::new();
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let mut cut = rest.len().min(COALESCE_BYTES);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        pieces.push(with_text(&rest[..cut]));
        rest = &rest[cut..];
    }
    pieces
}

/// Appends `kind`'s text to `pending` when both are the same stream; else hands `kind` back.
fn merge(pending: &mut Option<EventKind>, kind: EventKind) -> Option<EventKind> {
    match (pending, kind) {
        (None, kind) => Some(kind),
        (Some(EventKind::AssistantDelta { text }), EventKind::AssistantDelta { text: more })
        | (Some(EventKind::ReasoningDelta { text }), EventKind::ReasoningDelta { text: more }) => {
            text.push_str(&more);
            None
        }
        (
            Some(EventKind::ToolOutputDelta { call_id, text }),
            EventKind::ToolOutputDelta {
                call_id: other,
                text: more,
            },
        ) if *call_id == other => {
            text.push_str(&more);
            None
        }
        (Some(_), kind) => Some(kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(text: &str) -> EventKind {
        EventKind::AssistantDelta { text: text.into() }
    }

    fn open(dir: &tempfile::TempDir) -> EventLog {
        let path = dir.path().join("events.jsonl");
        let (journal, _) = Journal::open(&path).unwrap();
        EventLog::new(&path, journal)
    }

    fn status() -> EventKind {
        EventKind::StatusChanged {
            status: cwcode_protocol::SessionStatus::Idle,
        }
    }

    #[tokio::test]
    async fn replay_then_live_has_no_gap_and_no_duplicate() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        for text in ["a", "b", "c"] {
            log.publish(delta(text)).unwrap();
        }
        let mut subscription = log.subscribe(Some(1)).unwrap();
        log.publish(delta("d")).unwrap();
        let replay = subscription.replay.unwrap();
        assert_eq!((replay.since, replay.until), (1, 3));
        assert_eq!(subscription.until, 3);
        assert_eq!(subscription.live.recv().await.unwrap().seq, 4);
    }

    #[test]
    fn live_only_subscription_replays_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        log.publish(delta("a")).unwrap();
        assert!(log.subscribe(None).unwrap().replay.is_none());
        assert!(log.subscribe(Some(1)).unwrap().replay.is_none());
        assert!(log.subscribe(Some(0)).unwrap().replay.is_some());
    }

    #[tokio::test]
    async fn consecutive_deltas_become_one_event_before_the_next_other_event() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        for _ in 0..100 {
            log.publish_delta(delta("hello")).unwrap();
        }
        log.publish_delta(EventKind::ReasoningDelta { text: "hmm".into() })
            .unwrap();
        log.publish(status()).unwrap();
        let events = log.read_all().unwrap();
        let kinds: Vec<&EventKind> = events.iter().map(|event| &event.kind).collect();
        assert_eq!(
            kinds,
            [
                &delta(&"hello".repeat(100)),
                &EventKind::ReasoningDelta { text: "hmm".into() },
                &status()
            ]
        );
    }

    #[tokio::test]
    async fn held_text_is_journalled_after_the_window_and_in_bounded_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        let mut live = log.subscribe(None).unwrap().live;
        log.publish_delta(delta("slow")).unwrap();
        let first = tokio::time::timeout(Duration::from_secs(5), live.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(first.json.get().contains("\"slow\""), "{}", first.json);
        let chunk = "x".repeat(1000);
        for _ in 0..100 {
            log.publish_delta(delta(&chunk)).unwrap();
        }
        log.sync().unwrap();
        let events = log.read_all().unwrap();
        assert!(events.len() > 20 && events.len() < 30, "{}", events.len());
        for event in &events {
            let EventKind::AssistantDelta { text } = &event.kind else {
                panic!("{event:?}");
            };
            assert!(text.len() < COALESCE_BYTES + chunk.len());
        }
    }

    #[test]
    fn one_huge_chunk_is_journalled_in_bounded_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        let huge = "é".repeat(100_000);
        log.publish_delta(delta(&huge)).unwrap();
        let events = log.read_all().unwrap();
        let mut joined = String::new();
        for event in &events {
            let EventKind::AssistantDelta { text } = &event.kind else {
                panic!("{event:?}");
            };
            assert!(text.len() <= COALESCE_BYTES, "{}", text.len());
            joined.push_str(text);
        }
        assert_eq!(joined, huge);
    }

    #[tokio::test]
    async fn outputs_of_different_calls_stay_apart() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        for call_id in ["c1", "c1", "c2"] {
            log.publish_delta(EventKind::ToolOutputDelta {
                call_id: call_id.into(),
                text: "out ".into(),
            })
            .unwrap();
        }
        log.sync().unwrap();
        let events = log.read_all().unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[0].kind,
            EventKind::ToolOutputDelta {
                call_id: "c1".into(),
                text: "out out ".into()
            }
        );
    }

    #[tokio::test]
    async fn a_sub_agents_events_carry_the_parent_call_and_its_text_stays_apart() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir);
        let nested = log.nested("t1");
        log.publish_delta(delta("parent ")).unwrap();
        nested.publish_delta(delta("child ")).unwrap();
        nested.publish_delta(delta("child")).unwrap();
        log.publish_delta(delta("parent")).unwrap();
        nested.publish(status()).unwrap();
        let events = log.read_all().unwrap();
        let seen: Vec<(Option<&str>, &EventKind)> = events
            .iter()
            .map(|event| (event.parent_call_id.as_deref(), &event.kind))
            .collect();
        assert_eq!(
            seen,
            [
                (None, &delta("parent ")),
                (Some("t1"), &delta("child child")),
                (None, &delta("parent")),
                (Some("t1"), &status()),
            ]
        );
        assert_eq!(nested.parent_call_id(), Some("t1"));
        assert_eq!(log.parent_call_id(), None);
    }
}
