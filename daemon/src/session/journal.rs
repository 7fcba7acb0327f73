//! The append-only journal `events.jsonl`: one JSON event a line, each with a monotonic `seq`.
//!
//! Each event is written with a single `write` so that a killed daemon loses nothing already
//! published; `sync` (fsync) runs at turn boundaries. A torn last line, left by a crash in the
//! middle of a write, is cut off when the journal is opened.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use cwcode_protocol::{Event, EventKind};

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("journal {path}, line {line}: {source}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
}

pub struct Journal {
    path: PathBuf,
    file: File,
    last_seq: u64,
}

impl Journal {
    /// Opens (or creates) a journal and returns it with every event it holds.
    pub fn open(path: &Path) -> Result<(Self, Vec<Event>), JournalError> {
        let io = |source| JournalError::Io {
            path: path.to_owned(),
            source,
        };
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        let (events, intact_len) = read_events(path, &file, 0, u64::MAX)?;
        if intact_len < file.metadata().map_err(io)?.len() {
            tracing::warn!(path = %path.display(), "cutting a torn last line from the journal");
            file.set_len(intact_len).map_err(io)?;
        }
        let last_seq = events.last().map_or(0, |event| event.seq);
        let journal = Self {
            path: path.to_owned(),
            file,
            last_seq,
        };
        Ok((journal, events))
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Appends one event and returns it with its `seq` and time.
    pub fn append(&mut self, kind: EventKind) -> Result<Event, JournalError> {
        let event = Event {
            seq: self.last_seq + 1,
            time: now_rfc3339(),
            kind,
        };
        let mut line = serde_json::to_vec(&event).map_err(|source| JournalError::Corrupt {
            path: self.path.clone(),
            line: 0,
            source,
        })?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .map_err(|source| JournalError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.last_seq = event.seq;
        Ok(event)
    }

    /// Makes everything appended so far durable.
    pub fn sync(&self) -> Result<(), JournalError> {
        self.file.sync_data().map_err(|source| JournalError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// Events with `since < seq <= until`, read from disk.
    pub fn read_range(path: &Path, since: u64, until: u64) -> Result<Vec<Event>, JournalError> {
        let file = File::open(path).map_err(|source| JournalError::Io {
            path: path.to_owned(),
            source,
        })?;
        read_events(path, &file, since, until).map(|(events, _)| events)
    }
}

/// Reads the events in `(since, until]` and the length of the file's intact part: everything
/// up to the last complete, parseable line.
fn read_events(
    path: &Path,
    file: &File,
    since: u64,
    until: u64,
) -> Result<(Vec<Event>, u64), JournalError> {
    let mut reader = BufReader::new(file);
    let mut events = Vec::new();
    let mut intact_len = 0u64;
    let mut line = Vec::new();
    let mut number = 0usize;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|source| JournalError::Io {
                path: path.to_owned(),
                source,
            })?;
        if read == 0 {
            break;
        }
        number += 1;
        // A crash mid-write leaves a last line without its newline.
        if !line.ends_with(b"\n") {
            break;
        }
        match serde_json::from_slice::<Event>(&line) {
            Ok(event) => {
                intact_len += read as u64;
                if event.seq > until {
                    break;
                }
                if event.seq > since {
                    events.push(event);
                }
            }
            Err(source) => {
                let at_end = reader.fill_buf().map_or(true, |rest| rest.is_empty());
                if at_end {
                    break;
                }
                return Err(JournalError::Corrupt {
                    path: path.to_owned(),
                    line: number,
                    source,
                });
            }
        }
    }
    Ok((events, intact_len))
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(text: &str) -> EventKind {
        EventKind::AssistantDelta { text: text.into() }
    }

    #[test]
    fn appends_with_monotonic_seq_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let (mut journal, events) = Journal::open(&path).unwrap();
        assert!(events.is_empty());
        assert_eq!(journal.append(delta("a")).unwrap().seq, 1);
        assert_eq!(journal.append(delta("b")).unwrap().seq, 2);
        drop(journal);
        let (mut journal, events) = Journal::open(&path).unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(journal.append(delta("c")).unwrap().seq, 3);
        let range = Journal::read_range(&path, 1, 2).unwrap();
        assert_eq!(range.len(), 1);
        assert_eq!(range[0].kind, delta("b"));
    }

    #[test]
    fn a_torn_last_line_is_cut_and_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let (mut journal, _) = Journal::open(&path).unwrap();
        journal.append(delta("kept")).unwrap();
        drop(journal);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"seq":2,"time":"x","type":"assistant_de"#)
            .unwrap();
        drop(file);
        let (mut journal, events) = Journal::open(&path).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(journal.append(delta("next")).unwrap().seq, 2);
        let (_, events) = Journal::open(&path).unwrap();
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn corruption_in_the_middle_is_reported_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        std::fs::write(
            &path,
            "not json\n{\"seq\":1,\"time\":\"t\",\"type\":\"assistant_delta\",\"text\":\"x\"}\n",
        )
        .unwrap();
        let error = Journal::open(&path).err().unwrap();
        assert!(error.to_string().contains("line 1"), "{error}");
    }
}
