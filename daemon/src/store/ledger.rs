//! `checkpoints.jsonl`: the append-only ledger of checkpoints, one JSON record a line.
//!
//! A prompt's checkpoint is a `begin` record followed by `before` records, each naming paths and
//! the state they had before the prompt first touched them. A rewind appends a `rewind` record
//! holding the state of every path it is about to change (so that it can be undone), and
//! `undo_rewind` reverts the last one. Nothing is rewritten in place: the next `begin` after a
//! rewind commits it by replacing the file (temporary file and rename) with the live
//! checkpoints only. Memory and disk never disagree, because every record is applied to memory
//! by the same code that replays the file, and only once it has been written.

use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::objects::ObjectId;
use super::restore::PathState;
use super::{Durability, PRIVATE_FILE_MODE, StoreError, atomic_write, create_private_dir};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Record {
    Begin {
        turn: u32,
        prompt: String,
        time: String,
    },
    Before {
        turn: u32,
        paths: Vec<PathRecord>,
    },
    Rewind {
        to_turn: u32,
        time: String,
        undo: Vec<PathRecord>,
    },
    UndoRewind {
        time: String,
    },
}

/// One path and its state; keys are workspace-relative (absolute only outside the workspace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PathRecord {
    pub path: String,
    #[serde(flatten)]
    pub state: PathState,
}

impl PathRecord {
    pub fn list(states: &BTreeMap<String, PathState>) -> Vec<Self> {
        states
            .iter()
            .map(|(path, state)| Self {
                path: path.clone(),
                state: state.clone(),
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Checkpoint {
    pub turn: u32,
    pub prompt: String,
    pub time: String,
    /// Each path's state before the prompt first touched it.
    pub before: BTreeMap<String, PathState>,
}

/// A rewind that can still be undone: the checkpoints it took off, and the state of every path
/// it changed as it was just before.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingRewind {
    pub to_turn: u32,
    pub hidden: Vec<Checkpoint>,
    pub undo: BTreeMap<String, PathState>,
}

#[derive(Debug)]
pub(crate) struct Ledger {
    path: PathBuf,
    /// The length of the file up to its last complete record: a torn tail beyond it is cut
    /// before the next append.
    intact_len: u64,
    pub live: Vec<Checkpoint>,
    pub rewinds: Vec<PendingRewind>,
}

impl Ledger {
    /// Reads the ledger, or starts an empty one; writes nothing, so a read-only home can still
    /// be listed.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let mut ledger = Self {
            path: path.to_owned(),
            intact_len: 0,
            live: Vec::new(),
            rewinds: Vec::new(),
        };
        let file = match File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(ledger),
            Err(error) => return Err(StoreError::io("read", path)(error)),
        };
        let mut reader = BufReader::new(file);
        let mut line = Vec::new();
        let mut number = 0;
        loop {
            line.clear();
            let read = reader
                .read_until(b'\n', &mut line)
                .map_err(StoreError::io("read", path))?;
            // A crash in the middle of an append leaves a last line without its newline.
            if read == 0 || !line.ends_with(b"\n") {
                break;
            }
            number += 1;
            match serde_json::from_slice::<Record>(&line) {
                Ok(record) => {
                    ledger.intact_len += read as u64;
                    ledger.apply(record);
                }
                Err(source) => {
                    let at_end = reader.fill_buf().map_or(true, |rest| rest.is_empty());
                    if at_end {
                        break;
                    }
                    return Err(StoreError::Corrupt {
                        path: path.to_owned(),
                        line: number,
                        source,
                    });
                }
            }
        }
        Ok(ledger)
    }

    /// Writes one record, then applies it.
    pub fn append(&mut self, record: Record, durability: Durability) -> Result<(), StoreError> {
        let line = encode(&[&record])?;
        if let Some(dir) = self.path.parent() {
            create_private_dir(dir).map_err(StoreError::io("create", dir))?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(PRIVATE_FILE_MODE)
            .open(&self.path)
            .map_err(StoreError::io("open", &self.path))?;
        let len = file
            .metadata()
            .map_err(StoreError::io("open", &self.path))?
            .len();
        if len > self.intact_len {
            tracing::warn!(path = %self.path.display(), "cutting a torn last line from the checkpoints");
            file.set_len(self.intact_len)
                .map_err(StoreError::io("repair", &self.path))?;
        }
        if let Err(error) = file.write_all(&line) {
            // Leave nothing half-written: the next load or append would have to cut it.
            if let Err(cut) = file.set_len(self.intact_len) {
                tracing::error!(path = %self.path.display(), %cut, "cannot cut a failed checkpoint record back; the next append does");
            }
            return Err(StoreError::io("append to", &self.path)(error));
        }
        if durability == Durability::Synced
            && let Err(error) = file.sync_data()
        {
            // Not durable means not recorded: the tool that needed it is refused.
            if let Err(cut) = file.set_len(self.intact_len) {
                tracing::error!(path = %self.path.display(), %cut, "cannot cut an unsynced checkpoint record back; the next append does");
            }
            return Err(StoreError::io("sync", &self.path)(error));
        }
        self.intact_len += line.len() as u64;
        self.apply(record);
        Ok(())
    }

    /// Commits the pending rewinds: replaces the file with the live checkpoints followed by
    /// `record`, so the checkpoints a rewind took off (and what only they referenced) are gone.
    pub fn commit_rewinds_then(&mut self, record: Record) -> Result<(), StoreError> {
        let mut records = Vec::with_capacity(self.live.len() * 2 + 1);
        for checkpoint in &self.live {
            records.push(Record::Begin {
                turn: checkpoint.turn,
                prompt: checkpoint.prompt.clone(),
                time: checkpoint.time.clone(),
            });
            if !checkpoint.before.is_empty() {
                records.push(Record::Before {
                    turn: checkpoint.turn,
                    paths: PathRecord::list(&checkpoint.before),
                });
            }
        }
        records.push(record.clone());
        let bytes = encode(&records.iter().collect::<Vec<_>>())?;
        atomic_write(&self.path, &bytes, Durability::Synced).map_err(|error| StoreError::Io {
            action: "rewrite",
            path: error.path,
            source: error.source,
        })?;
        self.intact_len = bytes.len() as u64;
        self.rewinds.clear();
        self.apply(record);
        Ok(())
    }

    pub fn sync(&self) -> Result<(), StoreError> {
        match File::open(&self.path) {
            Ok(file) => file.sync_data().map_err(StoreError::io("sync", &self.path)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(StoreError::io("sync", &self.path)(error)),
        }
    }

    /// Every object a live checkpoint or an undoable rewind still needs.
    pub fn referenced(&self) -> HashSet<ObjectId> {
        let hidden = self.rewinds.iter().flat_map(|rewind| &rewind.hidden);
        let checkpoint_states = self
            .live
            .iter()
            .chain(hidden)
            .flat_map(|checkpoint| checkpoint.before.values());
        let undo_states = self.rewinds.iter().flat_map(|rewind| rewind.undo.values());
        checkpoint_states
            .chain(undo_states)
            .filter_map(|state| match state {
                PathState::File { blob, .. } | PathState::Symlink { blob } => Some(*blob),
                PathState::Absent | PathState::Dir { .. } | PathState::Unrecorded { .. } => None,
            })
            .collect()
    }

    fn apply(&mut self, record: Record) {
        match record {
            Record::Begin { turn, prompt, time } => {
                // A new prompt commits every pending rewind.
                self.rewinds.clear();
                self.live.push(Checkpoint {
                    turn,
                    prompt,
                    time,
                    before: BTreeMap::new(),
                });
            }
            Record::Before { turn, paths } => {
                let Some(checkpoint) = self.live.iter_mut().rev().find(|c| c.turn == turn) else {
                    tracing::warn!(turn, "checkpoint record for a prompt that was rewound");
                    return;
                };
                for PathRecord { path, state } in paths {
                    checkpoint.before.entry(path).or_insert(state);
                }
            }
            Record::Rewind { to_turn, undo, .. } => {
                let first_hidden = self
                    .live
                    .iter()
                    .position(|checkpoint| checkpoint.turn >= to_turn)
                    .unwrap_or(self.live.len());
                let hidden = self.live.split_off(first_hidden);
                let undo = undo
                    .into_iter()
                    .map(|record| (record.path, record.state))
                    .collect();
                self.rewinds.push(PendingRewind {
                    to_turn,
                    hidden,
                    undo,
                });
            }
            Record::UndoRewind { .. } => {
                if let Some(rewind) = self.rewinds.pop() {
                    self.live.extend(rewind.hidden);
                }
            }
        }
    }
}

fn encode(records: &[&Record]) -> Result<Vec<u8>, StoreError> {
    let mut bytes = Vec::new();
    for record in records {
        serde_json::to_writer(&mut bytes, record).map_err(StoreError::Encode)?;
        bytes.push(b'\n');
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn begin(turn: u32) -> Record {
        Record::Begin {
            turn,
            prompt: format!("prompt {turn}"),
            time: "2025-01-01T00:00:00.000Z".to_owned(),
        }
    }

    fn before(turn: u32, path: &str, content: &[u8]) -> Record {
        Record::Before {
            turn,
            paths: vec![PathRecord {
                path: path.to_owned(),
                state: PathState::File {
                    blob: ObjectId::of(content),
                    mode: 0o644,
                },
            }],
        }
    }

    #[test]
    fn records_survive_a_reopen_and_the_first_touch_wins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoints.jsonl");
        let mut ledger = Ledger::open(&path).unwrap();
        ledger.append(begin(1), Durability::Unsynced).unwrap();
        ledger
            .append(before(1, "a.txt", b"v0"), Durability::Synced)
            .unwrap();
        ledger
            .append(before(1, "a.txt", b"v1"), Durability::Synced)
            .unwrap();
        let reopened = Ledger::open(&path).unwrap();
        assert_eq!(reopened.live, ledger.live);
        assert_eq!(
            reopened.live[0].before["a.txt"],
            PathState::File {
                blob: ObjectId::of(b"v0"),
                mode: 0o644
            }
        );
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(r#"{"type":"begin","turn":1,"prompt":"prompt 1""#),
            "{text}"
        );
        assert!(
            text.contains(r#"{"path":"a.txt","kind":"file","blob":""#),
            "{text}"
        );
    }

    /// A tmpfs of a few pages, unmounted when dropped; None where mounting is not allowed (not
    /// root), except under CI, where the test must run.
    struct TinyDisk {
        dir: tempfile::TempDir,
    }

    impl TinyDisk {
        fn mount() -> Option<Self> {
            let dir = tempfile::tempdir().unwrap();
            let mounted = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
                .arg(dir.path())
                .status()
                .is_ok_and(|status| status.success());
            if !mounted {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "cannot mount a tmpfs for the full-disk test"
                );
                eprintln!("skipped: cannot mount a tmpfs (not root?)");
                return None;
            }
            Some(Self { dir })
        }
    }

    impl Drop for TinyDisk {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg(self.dir.path())
                .status();
        }
    }

    #[test]
    fn a_full_disk_leaves_no_half_record_and_the_ledger_goes_on_once_space_returns() {
        let Some(disk) = TinyDisk::mount() else {
            return;
        };
        let path = disk.dir.path().join("checkpoints.jsonl");
        let mut ledger = Ledger::open(&path).unwrap();
        ledger.append(begin(1), Durability::Synced).unwrap();
        let intact = fs::read(&path).unwrap();
        let filler = disk.dir.path().join("filler");
        let mut file = File::create(&filler).unwrap();
        for chunk in [4096, 1] {
            while file.write_all(&vec![b'x'; chunk]).is_ok() {}
        }
        drop(file);
        let big = Record::Begin {
            turn: 2,
            prompt: "x".repeat(16 * 1024),
            time: "2025-01-01T00:00:00.000Z".to_owned(),
        };

        let error = ledger.append(big.clone(), Durability::Synced).unwrap_err();
        assert!(error.to_string().contains("free some space"), "{error}");
        assert_eq!(fs::read(&path).unwrap(), intact, "nothing half-written");
        assert_eq!(ledger.live.len(), 1, "memory follows the disk");

        fs::remove_file(&filler).unwrap();
        ledger.append(big, Durability::Synced).unwrap();
        assert_eq!(Ledger::open(&path).unwrap().live.len(), 2);
    }

    #[test]
    fn a_torn_last_line_is_ignored_then_cut_by_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoints.jsonl");
        let mut ledger = Ledger::open(&path).unwrap();
        ledger.append(begin(1), Durability::Synced).unwrap();
        let intact = fs::read(&path).unwrap();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"type":"before","turn":1,"paths":[{"pa"#)
            .unwrap();
        drop(file);

        let mut reopened = Ledger::open(&path).unwrap();
        assert_eq!(reopened.live.len(), 1);
        assert!(reopened.live[0].before.is_empty());
        reopened
            .append(before(1, "b.txt", b"b"), Durability::Synced)
            .unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(std::str::from_utf8(&intact).unwrap()));
        assert_eq!(text.lines().count(), 2, "{text}");
        assert_eq!(Ledger::open(&path).unwrap().live, reopened.live);
    }

    #[test]
    fn a_damaged_line_in_the_middle_is_reported_with_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoints.jsonl");
        fs::write(&path, "{\"type\":\"begin\",\"turn\":1,\"prompt\":\"p\",\"time\":\"t\"}\nnot json\n{\"type\":\"undo_rewind\",\"time\":\"t\"}\n").unwrap();
        let error = Ledger::open(&path).unwrap_err();
        assert!(
            matches!(error, StoreError::Corrupt { line: 2, .. }),
            "{error}"
        );
        assert!(error.to_string().contains("move the file aside"), "{error}");
    }

    #[test]
    fn a_rewind_hides_checkpoints_until_undone_or_committed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoints.jsonl");
        let mut ledger = Ledger::open(&path).unwrap();
        for turn in 1..=3 {
            ledger.append(begin(turn), Durability::Unsynced).unwrap();
            ledger
                .append(before(turn, "a.txt", &[turn as u8]), Durability::Unsynced)
                .unwrap();
        }
        let rewind = Record::Rewind {
            to_turn: 2,
            time: "t".to_owned(),
            undo: vec![],
        };
        ledger.append(rewind.clone(), Durability::Synced).unwrap();
        assert_eq!(ledger.live.len(), 1);
        assert_eq!(Ledger::open(&path).unwrap().live.len(), 1);
        ledger
            .append(
                Record::UndoRewind {
                    time: "t".to_owned(),
                },
                Durability::Synced,
            )
            .unwrap();
        assert_eq!(ledger.live.len(), 3);
        assert!(ledger.rewinds.is_empty());

        ledger.append(rewind, Durability::Synced).unwrap();
        assert!(ledger.referenced().contains(&ObjectId::of(&[3])));
        ledger.commit_rewinds_then(begin(2)).unwrap();
        assert!(!ledger.referenced().contains(&ObjectId::of(&[3])));
        let reopened = Ledger::open(&path).unwrap();
        assert_eq!(reopened.live, ledger.live);
        let turns: Vec<u32> = reopened.live.iter().map(|c| c.turn).collect();
        assert_eq!(turns, vec![1, 2]);
        assert_eq!(fs::read_to_string(&path).unwrap().lines().count(), 3);
    }
}
