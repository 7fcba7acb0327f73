//! The journal room: a session's append-only `events.jsonl` (here), the event log that journals
//! and broadcasts (`bus`), and the replay that streams it back from disk (`replay`). Sessions and
//! the agent both publish through it; it depends on nothing above it.
//!
//! The journal: one JSON event a line, each with a monotonic `seq`.
//!
//! Each event is written with a single `write` so that a killed daemon loses nothing already
//! published; `sync` (fsync) runs at turn boundaries. A write that fails (a full disk, a short
//! write) is cut back to the last complete line at once, so a later append never joins a torn
//! one and the failed event's `seq` is never handed out. Loading skips and reports a line it
//! cannot read, wherever it is, instead of refusing the whole session.

pub mod bus;
pub mod replay;

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use cwcode_protocol::{Event, EventKind};

/// Journals are readable by their owner only (SPEC §3), whatever the umask.
const JOURNAL_MODE: u32 = 0o600;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {}: {source}{}", .path.display(), crate::store::fix_for(.source))]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot encode an event for the journal {}: {source}", .path.display())]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl JournalError {
    pub fn path(&self) -> &Path {
        match self {
            Self::Io { path, .. } | Self::Encode { path, .. } => path,
        }
    }

    /// What went wrong and what fixes it, without the path.
    pub fn cause(&self) -> String {
        match self {
            Self::Io { source, .. } => format!("{source}{}", crate::store::fix_for(source)),
            Self::Encode { source, .. } => format!("cannot encode the event: {source}"),
        }
    }
}

/// What loading had to leave out: lines that do not parse (a torn write, an edit by hand) or
/// whose `seq` does not increase. The session loads without them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalDamage {
    pub path: PathBuf,
    pub skipped_lines: usize,
    /// 1-based, as an editor counts.
    pub first_skipped_line: usize,
}

impl fmt::Display for JournalDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} unreadable line(s) skipped, the first is line {}; the events on them are \
             lost, the rest of the session is intact",
            self.path.display(),
            self.skipped_lines,
            self.first_skipped_line
        )
    }
}

/// Where the journal's bytes go: a file, or in tests one that fails like a full disk.
pub trait JournalFile: Write {
    /// Cuts the file back to `len` bytes.
    fn cut_to(&mut self, len: u64) -> io::Result<()>;
    fn sync_data(&self) -> io::Result<()>;
}

impl JournalFile for File {
    fn cut_to(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
}

pub struct Journal<F: JournalFile = File> {
    path: PathBuf,
    file: F,
    last_seq: u64,
    /// The length of the file up to its last complete line: where a failed append is cut back to.
    good_len: u64,
    /// A failed append whose cut-back failed too: the cut is retried before the next append.
    torn_tail: bool,
    damage: Option<JournalDamage>,
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
            .mode(JOURNAL_MODE)
            .open(path)
            .map_err(io)?;
        let loaded = read_events(path, &file, 0, u64::MAX)?;
        let len = file.metadata().map_err(io)?.len();
        let torn_tail = loaded.intact_len < len;
        if torn_tail {
            tracing::warn!(path = %path.display(), "cutting a torn last line from the journal");
        }
        let damage = loaded.damage(path);
        if let Some(damage) = &damage {
            tracing::warn!(%damage, "the journal has damaged lines");
        }
        let mut journal = Self {
            path: path.to_owned(),
            file,
            last_seq: loaded.max_seq,
            good_len: loaded.intact_len,
            torn_tail,
            damage,
        };
        // A read-only or full disk keeps the torn tail for now: the next append cuts it first.
        if torn_tail && let Err(error) = journal.cut_torn_tail() {
            tracing::warn!(%error, "cannot cut the torn line yet");
        }
        Ok((journal, loaded.events))
    }

    /// Events with `since < seq <= until`, read from disk; damaged lines are left out.
    pub fn read_range(path: &Path, since: u64, until: u64) -> Result<Vec<Event>, JournalError> {
        let file = File::open(path).map_err(|source| JournalError::Io {
            path: path.to_owned(),
            source,
        })?;
        read_events(path, &file, since, until).map(|loaded| loaded.events)
    }
}

impl<F: JournalFile> Journal<F> {
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// What loading skipped, if anything.
    pub fn damage(&self) -> Option<&JournalDamage> {
        self.damage.as_ref()
    }

    /// Appends one event and returns it with its `seq` and time. On failure nothing of it stays
    /// in the file and the `seq` is not used up.
    pub fn append(&mut self, kind: EventKind) -> Result<Event, JournalError> {
        self.append_nested(kind, None)
    }

    /// [`Journal::append`] for an event of a sub-agent, nested under the parent's call.
    pub fn append_nested(
        &mut self,
        kind: EventKind,
        parent_call_id: Option<String>,
    ) -> Result<Event, JournalError> {
        self.cut_torn_tail()?;
        let event = Event {
            seq: self.last_seq + 1,
            time: crate::util::now_rfc3339(),
            parent_call_id,
            kind,
        };
        let mut line = serde_json::to_vec(&event).map_err(|source| JournalError::Encode {
            path: self.path.clone(),
            source,
        })?;
        line.push(b'\n');
        if let Err(source) = self.file.write_all(&line) {
            self.torn_tail = true;
            if let Err(error) = self.cut_torn_tail() {
                tracing::error!(%error, "cannot cut a failed append back; retrying before the next one");
            }
            return Err(JournalError::Io {
                path: self.path.clone(),
                source,
            });
        }
        self.good_len += line.len() as u64;
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

    fn cut_torn_tail(&mut self) -> Result<(), JournalError> {
        if !self.torn_tail {
            return Ok(());
        }
        self.file
            .cut_to(self.good_len)
            .map_err(|source| JournalError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.torn_tail = false;
        Ok(())
    }
}

#[derive(Default)]
struct Loaded {
    events: Vec<Event>,
    /// The length of the file up to its last complete line.
    intact_len: u64,
    max_seq: u64,
    skipped_lines: usize,
    first_skipped_line: Option<usize>,
}

impl Loaded {
    fn skip(&mut self, number: usize) {
        self.skipped_lines += 1;
        self.first_skipped_line.get_or_insert(number);
    }

    fn damage(&self, path: &Path) -> Option<JournalDamage> {
        self.first_skipped_line
            .map(|first_skipped_line| JournalDamage {
                path: path.to_owned(),
                skipped_lines: self.skipped_lines,
                first_skipped_line,
            })
    }
}

/// Reads the events in `(since, until]`, skipping lines that do not parse or whose `seq` does
/// not increase, so every reader sees strictly increasing seqs.
fn read_events(path: &Path, file: &File, since: u64, until: u64) -> Result<Loaded, JournalError> {
    let mut reader = BufReader::new(file);
    let mut loaded = Loaded::default();
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
        // A crash mid-write leaves a last line without its newline: not part of the journal.
        if !line.ends_with(b"\n") {
            break;
        }
        loaded.intact_len += read as u64;
        let event = match serde_json::from_slice::<Event>(&line) {
            Ok(event) if event.seq > loaded.max_seq => event,
            Ok(_) | Err(_) => {
                loaded.skip(number);
                continue;
            }
        };
        loaded.max_seq = event.seq;
        if event.seq > until {
            break;
        }
        if event.seq > since {
            loaded.events.push(event);
        }
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn delta(text: &str) -> EventKind {
        EventKind::AssistantDelta { text: text.into() }
    }

    /// A file on a disk that fills up: writes succeed until `room` bytes are used, then only
    /// part of the next write lands (a short write) and the rest fails with ENOSPC.
    struct FillingDisk {
        file: File,
        room: usize,
    }

    impl Write for FillingDisk {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::Error::from(io::ErrorKind::StorageFull));
            }
            let written = self.file.write(&bytes[..bytes.len().min(self.room)])?;
            self.room -= written;
            Ok(written)
        }

        fn flush(&mut self) -> io::Result<()> {
            self.file.flush()
        }
    }

    impl JournalFile for FillingDisk {
        fn cut_to(&mut self, len: u64) -> io::Result<()> {
            let before = self.file.metadata()?.len();
            self.file.set_len(len)?;
            self.room += usize::try_from(before.saturating_sub(len)).unwrap_or(0);
            Ok(())
        }

        fn sync_data(&self) -> io::Result<()> {
            self.file.sync_data()
        }
    }

    /// The journal at `path` reopened on a disk with `room` bytes left.
    fn on_filling_disk(path: &Path, room: usize) -> Journal<FillingDisk> {
        let (journal, _) = Journal::open(path).unwrap();
        let file = OpenOptions::new().append(true).open(path).unwrap();
        Journal {
            path: journal.path,
            file: FillingDisk { file, room },
            last_seq: journal.last_seq,
            good_len: journal.good_len,
            torn_tail: false,
            damage: None,
        }
    }

    fn every_line_parses(path: &Path) -> Vec<u64> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str::<Event>(line).unwrap().seq)
            .collect()
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
        assert!(journal.damage().is_none());
    }

    #[test]
    fn is_created_readable_by_its_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        Journal::open(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_failed_write_is_cut_back_and_its_seq_is_not_used_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let (mut journal, _) = Journal::open(&path).unwrap();
        journal.append(delta("before the disk filled")).unwrap();
        drop(journal);
        let good = std::fs::read(&path).unwrap();

        let mut journal = on_filling_disk(&path, 10);
        let error = journal.append(delta("a long delta that does not fit"));
        let message = error.unwrap_err().to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("free some space"), "{message}");
        assert_eq!(std::fs::read(&path).unwrap(), good, "no torn line is left");
        assert_eq!(journal.last_seq(), 1);
        assert!(journal.append(delta("still full")).is_err());

        // Space comes back: the journal goes on where it was.
        journal.file.room = 1 << 20;
        assert_eq!(journal.append(delta("after")).unwrap().seq, 2);
        assert_eq!(every_line_parses(&path), [1, 2]);
    }

    #[test]
    fn a_failed_cut_back_is_retried_before_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        Journal::open(&path).unwrap().0.append(delta("a")).unwrap();
        let mut journal = on_filling_disk(&path, 1 << 20);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"seq":2,"ti"#).unwrap();
        journal.torn_tail = true;
        assert_eq!(journal.append(delta("b")).unwrap().seq, 2);
        assert_eq!(every_line_parses(&path), [1, 2]);
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
        assert_eq!(every_line_parses(&path), [1, 2]);
    }

    #[test]
    fn damaged_lines_in_the_middle_are_skipped_reported_and_seqs_go_on_after_the_largest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let line = |seq: u64| {
            format!(
                "{{\"seq\":{seq},\"time\":\"t\",\"type\":\"assistant_delta\",\"text\":\"x\"}}\n"
            )
        };
        // What the old journal left after a full disk: a torn line that a later append joined,
        // and a seq used twice.
        let text = format!(
            "{}{}{{\"seq\":3,\"time\":\"t\",\"ty{}{}{}",
            line(1),
            line(2),
            line(3),
            line(3),
            line(7)
        );
        std::fs::write(&path, text).unwrap();
        let (mut journal, events) = Journal::open(&path).unwrap();
        assert_eq!(
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2, 3, 7]
        );
        let damage = journal.damage().unwrap().clone();
        assert_eq!((damage.skipped_lines, damage.first_skipped_line), (1, 3));
        assert!(damage.to_string().contains("line 3"), "{damage}");
        assert_eq!(journal.append(delta("next")).unwrap().seq, 8);
        let replayed = Journal::read_range(&path, 0, 8).unwrap();
        assert_eq!(
            replayed.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [1, 2, 3, 7, 8]
        );
    }

    #[test]
    fn a_line_whose_seq_does_not_increase_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let line = |seq: u64| {
            format!(
                "{{\"seq\":{seq},\"time\":\"t\",\"type\":\"assistant_delta\",\"text\":\"x\"}}\n"
            )
        };
        std::fs::write(&path, format!("{}{}{}", line(1), line(2), line(2))).unwrap();
        let (journal, events) = Journal::open(&path).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(journal.damage().unwrap().first_skipped_line, 3);
        assert_eq!(journal.last_seq(), 2);
    }
}
