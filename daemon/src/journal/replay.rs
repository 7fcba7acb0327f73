//! Reads a range of a journal back in bounded batches, for subscriptions: what a replay holds in
//! memory does not depend on the journal's size.
//!
//! Events are handed on as the JSON text they were journalled as (only their `seq` is decoded),
//! so a replay costs no re-serialisation.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::JournalError;

/// A batch ends after this many events...
pub const BATCH_EVENTS: usize = 256;
/// ...or once it holds this many bytes of JSON.
pub const BATCH_BYTES: usize = 1 << 20;

/// One journalled event, as its JSON text.
#[derive(Debug)]
pub struct RawEvent {
    pub seq: u64,
    pub json: Box<RawValue>,
}

#[derive(Deserialize)]
struct SeqOnly {
    seq: u64,
}

pub struct ReplayReader {
    path: PathBuf,
    reader: BufReader<File>,
    since: u64,
    until: u64,
    done: bool,
    line: Vec<u8>,
}

impl ReplayReader {
    /// Reads the events with `since < seq <= until` of the journal at `path`.
    pub fn open(path: &Path, since: u64, until: u64) -> Result<Self, JournalError> {
        let file = File::open(path).map_err(|source| JournalError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self {
            path: path.to_owned(),
            reader: BufReader::new(file),
            since,
            until,
            done: since >= until,
            line: Vec::new(),
        })
    }

    /// The next events of the range, in order; empty once the range is read. Blocking: call it
    /// off the async workers.
    pub fn next_batch(&mut self) -> Result<Vec<RawEvent>, JournalError> {
        let mut batch = Vec::new();
        let mut bytes = 0;
        while !self.done && batch.len() < BATCH_EVENTS && bytes < BATCH_BYTES {
            let Some(event) = self.next_event()? else {
                self.done = true;
                break;
            };
            if event.seq >= self.until {
                self.done = true;
            }
            bytes += event.json.get().len();
            batch.push(event);
        }
        Ok(batch)
    }

    /// The next event in the range; `None` at the end of the file.
    fn next_event(&mut self) -> Result<Option<RawEvent>, JournalError> {
        loop {
            self.line.clear();
            let read = self
                .reader
                .read_until(b'\n', &mut self.line)
                .map_err(|source| JournalError::Io {
                    path: self.path.clone(),
                    source,
                })?;
            // A line without its newline is one being written (or torn by a crash): the range
            // ends before it.
            if read == 0 || !self.line.ends_with(b"\n") {
                return Ok(None);
            }
            self.line.pop();
            let seq = match serde_json::from_slice::<SeqOnly>(&self.line) {
                Ok(SeqOnly { seq }) => seq,
                Err(error) => {
                    // Loading the session reports a damaged line; a replay goes on past it.
                    tracing::warn!(path = %self.path.display(), %error, "skipping an unreadable journal line in a replay");
                    continue;
                }
            };
            if seq <= self.since {
                continue;
            }
            if seq > self.until {
                return Ok(None);
            }
            let text = String::from_utf8_lossy(&self.line).into_owned();
            match RawValue::from_string(text) {
                Ok(json) => return Ok(Some(RawEvent { seq, json })),
                Err(error) => {
                    tracing::warn!(path = %self.path.display(), %error, "skipping an unreadable journal line in a replay");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use cwcode_protocol::{Event, EventKind};

    use super::*;
    use crate::journal::Journal;

    fn journal_of(count: usize, text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let (mut journal, _) = Journal::open(&path).unwrap();
        for _ in 0..count {
            journal
                .append(EventKind::AssistantDelta { text: text.into() })
                .unwrap();
        }
        (dir, path)
    }

    fn read_all(reader: &mut ReplayReader) -> Vec<Vec<RawEvent>> {
        let mut batches = Vec::new();
        loop {
            let batch = reader.next_batch().unwrap();
            if batch.is_empty() {
                return batches;
            }
            batches.push(batch);
        }
    }

    #[test]
    fn reads_exactly_the_range_in_bounded_batches() {
        let (_dir, path) = journal_of(1000, "a");
        let mut reader = ReplayReader::open(&path, 10, 900).unwrap();
        let batches = read_all(&mut reader);
        assert!(batches.iter().all(|batch| batch.len() <= BATCH_EVENTS));
        let seqs: Vec<u64> = batches.iter().flatten().map(|event| event.seq).collect();
        assert_eq!(seqs, (11..=900).collect::<Vec<u64>>());
        let first: Event = serde_json::from_str(batches[0][0].json.get()).unwrap();
        assert_eq!(first.seq, 11);
        assert_eq!(first.kind, EventKind::AssistantDelta { text: "a".into() });
    }

    #[test]
    fn large_events_make_smaller_batches() {
        let (_dir, path) = journal_of(40, &"x".repeat(100_000));
        let mut reader = ReplayReader::open(&path, 0, 40).unwrap();
        let batches = read_all(&mut reader);
        assert!(batches.len() >= 4, "{}", batches.len());
        assert!(batches.iter().all(|batch| batch.len() <= 11));
    }

    #[test]
    fn a_line_being_written_and_a_damaged_line_do_not_end_the_replay_badly() {
        let (_dir, path) = journal_of(3, "a");
        let mut text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let damaged = format!(
            "{}\nnot json\n{}\n{}\n{{\"seq\":4",
            lines[0], lines[1], lines[2]
        );
        text.clear();
        std::fs::write(&path, damaged).unwrap();
        let mut reader = ReplayReader::open(&path, 0, 4).unwrap();
        let seqs: Vec<u64> = read_all(&mut reader)
            .iter()
            .flatten()
            .map(|event| event.seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
    }
}
