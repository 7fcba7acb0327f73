//! A session's event log: every event is journalled first, then broadcast to live subscribers.
//!
//! Subscribing takes the broadcast receiver and the journal's last `seq` under the same lock that
//! publishing holds, so the replay (read from disk up to that `seq`) and the live stream (strictly
//! after it) meet with no gap and no duplicate.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use cwcode_protocol::{Event, EventKind};
use tokio::sync::broadcast;

use super::journal::{Journal, JournalError};

/// How many events a subscriber may fall behind before it is dropped; the session never waits
/// for a slow client.
const SUBSCRIBER_LAG_LIMIT: usize = 8192;

pub struct EventLog {
    path: PathBuf,
    journal: Mutex<Journal>,
    live: broadcast::Sender<Arc<Event>>,
}

/// A subscription's replayed history and its live continuation.
pub struct Subscription {
    pub replay: Vec<Event>,
    pub live: broadcast::Receiver<Arc<Event>>,
}

impl EventLog {
    pub fn new(path: &Path, journal: Journal) -> Self {
        let (live, _) = broadcast::channel(SUBSCRIBER_LAG_LIMIT);
        Self {
            path: path.to_owned(),
            journal: Mutex::new(journal),
            live,
        }
    }

    fn journal(&self) -> MutexGuard<'_, Journal> {
        // A panic while holding the lock cannot leave the journal half-updated: each append is
        // one write. Keep serving rather than poisoning every later call.
        self.journal
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn publish(&self, kind: EventKind) -> Result<Arc<Event>, JournalError> {
        let mut journal = self.journal();
        let event = Arc::new(journal.append(kind)?);
        // No receiver is not an error: nobody is watching.
        let _ = self.live.send(Arc::clone(&event));
        Ok(event)
    }

    pub fn last_seq(&self) -> u64 {
        self.journal().last_seq()
    }

    pub fn sync(&self) -> Result<(), JournalError> {
        self.journal().sync()
    }

    /// Every journalled event, read from disk.
    pub fn read_all(&self) -> Result<Vec<Event>, JournalError> {
        let last_seq = self.last_seq();
        Journal::read_range(&self.path, 0, last_seq)
    }

    /// Replays events after `since` (none when `since` is `None`) and continues live.
    pub fn subscribe(&self, since: Option<u64>) -> Result<Subscription, JournalError> {
        let (live, last_seq) = {
            let journal = self.journal();
            (self.live.subscribe(), journal.last_seq())
        };
        let replay = match since {
            Some(since) if since < last_seq => Journal::read_range(&self.path, since, last_seq)?,
            _ => Vec::new(),
        };
        Ok(Subscription { replay, live })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(text: &str) -> EventKind {
        EventKind::AssistantDelta { text: text.into() }
    }

    #[tokio::test]
    async fn replay_then_live_has_no_gap_and_no_duplicate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let (journal, _) = Journal::open(&path).unwrap();
        let log = EventLog::new(&path, journal);
        for text in ["a", "b", "c"] {
            log.publish(delta(text)).unwrap();
        }
        let mut subscription = log.subscribe(Some(1)).unwrap();
        log.publish(delta("d")).unwrap();
        let replayed: Vec<u64> = subscription.replay.iter().map(|e| e.seq).collect();
        assert_eq!(replayed, [2, 3]);
        assert_eq!(subscription.live.recv().await.unwrap().seq, 4);
    }

    #[test]
    fn live_only_subscription_replays_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let (journal, _) = Journal::open(&path).unwrap();
        let log = EventLog::new(&path, journal);
        log.publish(delta("a")).unwrap();
        assert!(log.subscribe(None).unwrap().replay.is_empty());
        assert_eq!(log.subscribe(Some(0)).unwrap().replay.len(), 1);
    }
}
