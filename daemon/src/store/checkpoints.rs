//! The checkpoint store of SPEC §8: one checkpoint per prompt, holding the state every path had
//! before the prompt first touched it, whether through a file tool (which declares its paths)
//! or through the shell (found by the baseline); rewind to before any prompt, and undo of a
//! rewind until the next prompt.
//!
//! Durability: a path's earlier state is on disk (objects and ledger fsynced) before
//! `record_before` returns, so before the tool runs; a rewind's undo record is on disk before
//! any file is changed; what a shell command changed is recorded when it returns and made
//! durable by `sync` at the turn boundary, like the session journal.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::util::{lexically_normal, now_rfc3339};
use std::time::Duration;

use serde::Serialize;

use super::baseline::{Baseline, CommandChanges, Limits, Snapshot};
use super::ledger::{Ledger, PathRecord, Record};
use super::objects::{GcReport, ObjectStore};
use super::restore::{self, Applied, Keep, NotRestored, PathState};
use super::{Durability, StoreError};

const OBJECTS_DIR: &str = "objects";
const CHECKPOINTS_FILE: &str = "checkpoints.jsonl";
const BASELINE_FILE: &str = "baseline.json";

/// Bounds on what the shell baseline keeps; the defaults suit a source tree.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Files larger than this are not kept for shell commands; a command changing one reports
    /// it as not checkpointed. File tools' paths are kept whatever their size.
    pub max_snapshot_file_bytes: u64,
    /// A workspace with more (non-ignored) entries than this is not snapshotted at all, so
    /// that a command in a home directory does not walk a million files.
    pub max_snapshot_entries: usize,
    /// The most file content the baseline keeps; files past it are treated as too large.
    pub max_baseline_bytes: u64,
    /// Directories the walk never enters, besides `.git` and the session directory: the
    /// cwcode home, when the workspace contains it.
    pub excluded_dirs: Vec<PathBuf>,
    /// Files modified this close to a snapshot are compared by content, because their
    /// timestamps may not have moved.
    pub racy_window: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_snapshot_file_bytes: 8 << 20,
            max_snapshot_entries: 100_000,
            max_baseline_bytes: 1 << 30,
            excluded_dirs: Vec::new(),
            racy_window: Duration::from_secs(2),
        }
    }
}

/// One prompt's checkpoint, as listed for `/rewind` without a number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointSummary {
    pub turn: u32,
    pub prompt: String,
    /// RFC 3339, when the prompt began.
    pub time: String,
    /// Workspace-relative paths (directories included) the prompt touched, sorted.
    pub files: Vec<PathBuf>,
}

/// What a rewind, or the undo of one, did. Paths are workspace-relative.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoreReport {
    /// The prompt rewound to before (for an undo: the prompt of the rewind undone).
    pub turn: u32,
    /// That prompt's text, for the client to put back in the input field.
    pub prompt: String,
    /// Paths put back: content, mode, link target, or a directory recreated.
    pub restored: Vec<PathBuf>,
    /// Paths that did not exist at the target moment, removed.
    pub removed: Vec<PathBuf>,
    /// Paths already in their target state.
    pub unchanged: usize,
    /// Paths that could not be put back, each with the reason; the rest were.
    pub failed: Vec<NotRestored>,
}

impl RestoreReport {
    fn new(turn: u32, prompt: String, applied: Applied) -> Self {
        Self {
            turn,
            prompt,
            restored: applied.restored,
            removed: applied.removed,
            unchanged: applied.unchanged,
            failed: applied.failed,
        }
    }

    pub fn is_complete(&self) -> bool {
        self.failed.is_empty()
    }
}

/// One session's checkpoints: `objects/`, `checkpoints.jsonl` and `baseline.json` in the
/// session directory. Methods block on file I/O (a snapshot walks the workspace): call them
/// from `spawn_blocking`. One store per session, used by one task at a time.
#[derive(Debug)]
pub struct CheckpointStore {
    root: PathBuf,
    objects: ObjectStore,
    ledger: Ledger,
    baseline: Baseline,
    /// The prompt being recorded, from `begin` until a rewind.
    current_turn: Option<u32>,
}

impl CheckpointStore {
    /// Opens a session's store with default options. See [`CheckpointStore::open_with`].
    pub fn open(session_dir: &Path, workspace_root: &Path) -> Result<Self, StoreError> {
        Self::open_with(session_dir, workspace_root, StoreOptions::default())
    }

    /// Reads the checkpoints (tolerating a torn last line) without writing anything, so a
    /// session in a read-only home can still be listed. No prompt is being recorded until
    /// `begin`, even when the last checkpoint was left open by a crash.
    pub fn open_with(
        session_dir: &Path,
        workspace_root: &Path,
        options: StoreOptions,
    ) -> Result<Self, StoreError> {
        let root = workspace_root
            .canonicalize()
            .map_err(StoreError::io("open the workspace", workspace_root))?;
        let mut excluded = options.excluded_dirs;
        excluded.push(session_dir.to_owned());
        let excluded = excluded
            .iter()
            .map(|dir| canonical_even_if_missing(dir))
            .collect();
        let limits = Limits {
            max_file_bytes: options.max_snapshot_file_bytes,
            max_entries: options.max_snapshot_entries,
            max_total_bytes: options.max_baseline_bytes,
            racy_window: options.racy_window,
        };
        Ok(Self {
            objects: ObjectStore::new(session_dir.join(OBJECTS_DIR)),
            ledger: Ledger::open(&session_dir.join(CHECKPOINTS_FILE))?,
            baseline: Baseline::new(
                session_dir.join(BASELINE_FILE),
                root.clone(),
                excluded,
                limits,
            ),
            root,
            current_turn: None,
        })
    }

    /// Starts the checkpoint of prompt `turn`; call it when the turn starts, before any tool.
    /// It commits a pending rewind (which can no longer be undone) and collects the objects
    /// only that rewind still needed. Calling it again for the current turn does nothing;
    /// turns must otherwise increase.
    pub fn begin(&mut self, turn: u32, prompt: &str) -> Result<(), StoreError> {
        if self.current_turn == Some(turn) {
            return Ok(());
        }
        if let Some(last) = self.ledger.live.last()
            && turn <= last.turn
        {
            return Err(StoreError::TurnOutOfOrder {
                turn,
                last: last.turn,
            });
        }
        let record = Record::Begin {
            turn,
            prompt: prompt.to_owned(),
            time: now_rfc3339(),
        };
        if self.ledger.rewinds.is_empty() {
            self.ledger.append(record, Durability::Unsynced)?;
        } else {
            self.ledger.commit_rewinds_then(record)?;
            if let Err(error) = self.gc() {
                tracing::warn!(%error, "cannot collect unreferenced checkpoint objects");
            }
        }
        self.current_turn = Some(turn);
        Ok(())
    }

    /// Records, before a file tool runs, the state of each path it declared (relative to the
    /// workspace or absolute; pass them resolved, as the tool will resolve them, so that a
    /// symlink is recorded as the file it leads to). Only a prompt's first touch of a path
    /// counts. A path that does not exist is recorded as absent, and so are its missing
    /// directories, so that a rewind removes them too. Durable when it returns: if it fails
    /// (full disk, read-only home) the tool should not run.
    pub fn record_before<P: AsRef<Path>>(&mut self, paths: &[P]) -> Result<(), StoreError> {
        let turn = self.current_turn.ok_or(StoreError::NoTurn)?;
        let mut states = BTreeMap::new();
        for path in paths {
            let Some(key) = self.key_for(path.as_ref())? else {
                continue;
            };
            for key in self.with_missing_ancestors(key) {
                if self.is_recorded(&key) || states.contains_key(&key) {
                    continue;
                }
                let state =
                    restore::capture(&self.root.join(&key), &mut self.objects, Keep::Store)?;
                states.insert(key, state);
            }
        }
        if states.is_empty() {
            return Ok(());
        }
        self.objects.sync()?;
        let paths = PathRecord::list(&states);
        self.ledger
            .append(Record::Before { turn, paths }, Durability::Synced)
    }

    /// Takes the baseline before a shell command (`bash`, or a `bash_background` start): walks
    /// the workspace's .gitignore-aware entries and keeps the content of files not seen with
    /// their current stat. Needs no turn, so it can also warm the baseline when a session
    /// opens. For background processes, take one at each turn start and call `after_command`
    /// at the turn end.
    pub fn snapshot(&mut self) -> Result<Snapshot, StoreError> {
        self.baseline.snapshot(&mut self.objects)
    }

    /// After the command: records, under the current prompt, the earlier state of every entry
    /// it changed, created or deleted, and returns what it did.
    pub fn after_command(&mut self, snapshot: Snapshot) -> Result<CommandChanges, StoreError> {
        let turn = self.current_turn.ok_or(StoreError::NoTurn)?;
        let comparison = self.baseline.compare(snapshot, &self.objects)?;
        let mut paths: Vec<PathRecord> = comparison
            .states
            .into_iter()
            .filter(|(key, _)| !self.is_recorded(key))
            .map(|(path, state)| PathRecord { path, state })
            .collect();
        if !paths.is_empty() {
            paths.sort_by(|left, right| left.path.cmp(&right.path));
            self.ledger
                .append(Record::Before { turn, paths }, Durability::Unsynced)?;
        }
        Ok(comparison.changes)
    }

    /// After a daemon died while prompt `turn` ran a shell command: records under that prompt what
    /// the workspace changed since the baseline taken before the command, so that a rewind
    /// covers it. Nothing is recorded when the prompt's checkpoint never began.
    pub fn recover_interrupted_command(&mut self, turn: u32) -> Result<CommandChanges, StoreError> {
        if self.ledger.live.last().map(|checkpoint| checkpoint.turn) != Some(turn) {
            return Ok(CommandChanges::default());
        }
        self.current_turn = Some(turn);
        let snapshot = self.baseline.saved_snapshot();
        let changes = self.after_command(snapshot)?;
        self.sync()?;
        Ok(changes)
    }

    /// The checkpoints a rewind can go back to, oldest first.
    pub fn list(&self) -> Vec<CheckpointSummary> {
        self.ledger
            .live
            .iter()
            .map(|checkpoint| CheckpointSummary {
                turn: checkpoint.turn,
                prompt: checkpoint.prompt.clone(),
                time: checkpoint.time.clone(),
                files: checkpoint.before.keys().map(PathBuf::from).collect(),
            })
            .collect()
    }

    /// Puts every path touched by prompt `turn` or later back as it was before prompt `turn`
    /// (the earliest recorded state wins): contents, modes and links restored, files created
    /// since removed, deleted ones brought back. The checkpoints of `turn` and later are taken
    /// off the list. First records the current state of all those paths, durably, so that
    /// [`CheckpointStore::undo_restore`] can put them back until the next `begin`. An error
    /// means nothing was changed; paths that fail individually are listed in the report.
    pub fn restore_to_before(&mut self, turn: u32) -> Result<RestoreReport, StoreError> {
        let Some(first) = self.ledger.live.iter().position(|c| c.turn == turn) else {
            return Err(StoreError::NoSuchCheckpoint {
                turn,
                available: self.available_turns(),
            });
        };
        let prompt = self.ledger.live[first].prompt.clone();
        let mut targets = BTreeMap::new();
        for checkpoint in &self.ledger.live[first..] {
            for (key, state) in &checkpoint.before {
                targets.entry(key.clone()).or_insert_with(|| state.clone());
            }
        }
        let current = self.capture_all(targets.keys(), Keep::Store)?;
        self.objects.sync()?;
        let record = Record::Rewind {
            to_turn: turn,
            time: now_rfc3339(),
            undo: PathRecord::list(&current),
        };
        self.ledger.append(record, Durability::Synced)?;
        self.current_turn = None;
        let applied = restore::apply(&self.root, &targets, &current, &self.objects);
        Ok(RestoreReport::new(turn, prompt, applied))
    }

    /// Reverts the last rewind not yet committed by a `begin`: its paths go back to what they
    /// were just before it, and its checkpoints return to the list. Rewinds undo in reverse
    /// order.
    pub fn undo_restore(&mut self) -> Result<RestoreReport, StoreError> {
        let Some(rewind) = self.ledger.rewinds.last() else {
            return Err(StoreError::NothingToUndo);
        };
        let turn = rewind.to_turn;
        let prompt = rewind
            .hidden
            .first()
            .map(|checkpoint| checkpoint.prompt.clone())
            .unwrap_or_default();
        let targets = rewind.undo.clone();
        let current = self.capture_all(targets.keys(), Keep::HashOnly)?;
        let record = Record::UndoRewind {
            time: now_rfc3339(),
        };
        self.ledger.append(record, Durability::Synced)?;
        self.current_turn = None;
        let applied = restore::apply(&self.root, &targets, &current, &self.objects);
        Ok(RestoreReport::new(turn, prompt, applied))
    }

    /// The prompt of the rewind `undo_restore` would revert, if any.
    pub fn undoable(&self) -> Option<u32> {
        self.ledger.rewinds.last().map(|rewind| rewind.to_turn)
    }

    /// Makes everything recorded so far durable; call it at each turn boundary.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.objects.sync()?;
        self.ledger.sync()
    }

    /// Removes objects that no checkpoint, pending rewind or baseline entry needs. `begin`
    /// runs it after committing a rewind.
    pub fn gc(&mut self) -> Result<GcReport, StoreError> {
        let mut keep = self.ledger.referenced();
        keep.extend(self.baseline.referenced());
        self.objects.retain(&keep)
    }

    /// The workspace-relative key of a path (absolute outside the workspace), or None for the
    /// workspace root itself.
    fn key_for(&self, path: &Path) -> Result<Option<String>, StoreError> {
        let absolute = lexically_normal(&self.root.join(path));
        let key = match absolute.strip_prefix(&self.root) {
            Ok(relative) if relative.as_os_str().is_empty() => return Ok(None),
            Ok(relative) => relative,
            Err(_) => absolute.as_path(),
        };
        key.to_str()
            .map(|key| Some(key.to_owned()))
            .ok_or_else(|| StoreError::NotUtf8 {
                path: path.to_owned(),
            })
    }

    /// `key` preceded by its ancestors that do not exist, outermost first.
    fn with_missing_ancestors(&self, key: String) -> Vec<String> {
        let exists = |key: &Path| fs::symlink_metadata(self.root.join(key)).is_ok();
        let mut keys = Vec::new();
        if !exists(Path::new(&key)) {
            keys = Path::new(&key)
                .ancestors()
                .skip(1)
                // Stops before "" (the workspace root) and "/".
                .take_while(|ancestor| ancestor.parent().is_some() && !exists(ancestor))
                .filter_map(|ancestor| ancestor.to_str().map(str::to_owned))
                .collect();
            keys.reverse();
        }
        keys.push(key);
        keys
    }

    fn is_recorded(&self, key: &str) -> bool {
        self.ledger.live.last().is_some_and(|checkpoint| {
            Some(checkpoint.turn) == self.current_turn && checkpoint.before.contains_key(key)
        })
    }

    fn capture_all<'a>(
        &mut self,
        keys: impl Iterator<Item = &'a String>,
        keep: Keep,
    ) -> Result<BTreeMap<String, PathState>, StoreError> {
        keys.map(|key| {
            let state = restore::capture(&self.root.join(key), &mut self.objects, keep)?;
            Ok((key.clone(), state))
        })
        .collect()
    }

    fn available_turns(&self) -> String {
        if self.ledger.live.is_empty() {
            return "there are no checkpoints".to_owned();
        }
        let turns: Vec<String> = self
            .ledger
            .live
            .iter()
            .map(|checkpoint| checkpoint.turn.to_string())
            .collect();
        format!("checkpoints exist for prompts {}", turns.join(", "))
    }
}

/// The canonical form of a directory that may not exist yet (a new session's): its longest
/// existing ancestor canonicalised, the rest appended, so that it compares equal to the paths
/// the workspace walk yields.
fn canonical_even_if_missing(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    for ancestor in absolute.ancestors() {
        if let Ok(canonical) = ancestor.canonicalize()
            && let Ok(rest) = absolute.strip_prefix(ancestor)
        {
            return canonical.join(rest);
        }
    }
    absolute
}

#[cfg(test)]
#[path = "checkpoints_tests.rs"]
mod tests;
