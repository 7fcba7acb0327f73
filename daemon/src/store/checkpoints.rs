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
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;
    use crate::store::ObjectId;

    /// Every entry under `root`: kind, content (or link target) and permission bits.
    #[allow(clippy::unwrap_used)]
    fn tree(root: &Path) -> BTreeMap<String, (&'static str, Vec<u8>, u32)> {
        let mut entries = BTreeMap::new();
        let mut pending = vec![root.to_owned()];
        while let Some(dir) = pending.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let key = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned();
                let metadata = fs::symlink_metadata(&path).unwrap();
                let mode = metadata.permissions().mode() & 0o7777;
                let value = if metadata.file_type().is_symlink() {
                    let target = fs::read_link(&path).unwrap();
                    ("link", target.to_str().unwrap().as_bytes().to_vec(), 0)
                } else if metadata.is_dir() {
                    pending.push(path);
                    ("dir", Vec::new(), mode)
                } else {
                    ("file", fs::read(&path).unwrap(), mode)
                };
                entries.insert(key, value);
            }
        }
        entries
    }

    #[allow(clippy::unwrap_used)]
    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A workspace with a script, a file to edit, one to delete, a link and an ignored build
    /// directory, and a store for it in a separate session directory.
    #[allow(clippy::unwrap_used)]
    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let session = dir.path().join("home/sessions/s1");
        fs::create_dir_all(root.join("src")).unwrap();
        fs::create_dir_all(root.join("target")).unwrap();
        fs::write(root.join(".gitignore"), "target/\n").unwrap();
        fs::write(root.join("target/app"), "ignored build output").unwrap();
        fs::write(root.join("notes.txt"), "line 1\nline 2\nline 3\n").unwrap();
        fs::write(root.join("run.sh"), "#!/bin/sh\necho old\n").unwrap();
        set_mode(&root.join("run.sh"), 0o750);
        fs::write(root.join("doomed.txt"), "delete me\n").unwrap();
        set_mode(&root.join("doomed.txt"), 0o600);
        fs::write(root.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        symlink("src/lib.rs", root.join("lib-link")).unwrap();
        (dir, root, session)
    }

    /// `sed -i`: a new file renamed over the old one, keeping its mode.
    #[allow(clippy::unwrap_used)]
    fn sed_in_place(path: &Path, from: &str, to: &str) {
        let content = fs::read_to_string(path).unwrap().replace(from, to);
        let mode = fs::metadata(path).unwrap().permissions().mode();
        let temp = path.with_extension("sed-tmp");
        fs::write(&temp, content).unwrap();
        set_mode(&temp, mode);
        fs::rename(&temp, path).unwrap();
    }

    fn keys(paths: &[PathBuf]) -> Vec<&str> {
        paths.iter().filter_map(|path| path.to_str()).collect()
    }

    #[test]
    fn two_prompts_one_editing_files_one_using_the_shell_rewind_byte_for_byte() {
        let (_dir, root, session) = setup();
        let original = tree(&root);
        let mut store = CheckpointStore::open(&session, &root).unwrap();

        // Prompt 1: the file tools (edit_lines, write_file) declare their paths.
        store.begin(1, "edit the notes").unwrap();
        store
            .record_before(&["notes.txt", "docs/guide/new.md"])
            .unwrap();
        fs::write(root.join("notes.txt"), "line 1\nline two\nline 3\n").unwrap();
        fs::create_dir_all(root.join("docs/guide")).unwrap();
        fs::write(root.join("docs/guide/new.md"), "# Guide\n").unwrap();
        // A second edit of the same file in the same prompt: the first state still counts.
        store.record_before(&[root.join("notes.txt")]).unwrap();
        fs::write(root.join("notes.txt"), "line 1\nline two\nline three\n").unwrap();
        store.sync().unwrap();
        let after_prompt_1 = tree(&root);

        // Prompt 2: bash edits a script in place, creates a file and a directory, deletes a
        // file, and replaces the link; the build output it writes is ignored.
        store.begin(2, "fix the script").unwrap();
        let snapshot = store.snapshot().unwrap();
        sed_in_place(&root.join("run.sh"), "old", "new");
        fs::write(root.join("generated.txt"), "fresh\n").unwrap();
        fs::create_dir(root.join("out")).unwrap();
        fs::write(root.join("out/report.txt"), "report\n").unwrap();
        fs::remove_file(root.join("doomed.txt")).unwrap();
        fs::remove_file(root.join("lib-link")).unwrap();
        symlink("notes.txt", root.join("lib-link")).unwrap();
        fs::write(root.join("target/app"), "rebuilt").unwrap();
        let changes = store.after_command(snapshot).unwrap();
        assert_eq!(keys(&changes.changed), ["lib-link", "run.sh"]);
        assert_eq!(
            keys(&changes.created),
            ["generated.txt", "out", "out/report.txt"]
        );
        assert_eq!(keys(&changes.deleted), ["doomed.txt"]);
        assert!(changes.not_checkpointed.is_empty());
        store.sync().unwrap();
        let after_prompt_2 = tree(&root);

        let listed = store.list();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].prompt, "edit the notes");
        assert_eq!(
            keys(&listed[0].files),
            ["docs", "docs/guide", "docs/guide/new.md", "notes.txt"]
        );
        assert_eq!(listed[1].files.len(), 6);

        let report = store.restore_to_before(2).unwrap();
        assert!(report.is_complete(), "{:?}", report.failed);
        assert_eq!((report.turn, report.prompt.as_str()), (2, "fix the script"));
        assert_eq!(
            keys(&report.removed),
            ["generated.txt", "out", "out/report.txt"]
        );
        assert_eq!(keys(&report.restored), ["doomed.txt", "lib-link", "run.sh"]);
        let mut expected = after_prompt_1.clone();
        expected.insert(
            "target/app".to_owned(),
            after_prompt_2["target/app"].clone(),
        );
        assert_eq!(tree(&root), expected);
        assert_eq!(store.list().len(), 1);

        let report = store.restore_to_before(1).unwrap();
        assert!(report.is_complete(), "{:?}", report.failed);
        assert_eq!(report.prompt, "edit the notes");
        let mut expected = original.clone();
        expected.insert(
            "target/app".to_owned(),
            after_prompt_2["target/app"].clone(),
        );
        assert_eq!(tree(&root), expected);
        assert!(store.list().is_empty());

        // Undo goes back one rewind at a time, and brings the checkpoints back.
        assert_eq!(store.undoable(), Some(1));
        store.undo_restore().unwrap();
        assert_eq!(tree(&root)["notes.txt"], after_prompt_1["notes.txt"]);
        assert_eq!(store.list().len(), 1);
        let report = store.undo_restore().unwrap();
        assert!(report.is_complete(), "{:?}", report.failed);
        assert_eq!(tree(&root), after_prompt_2);
        assert_eq!(store.list().len(), 2);
        assert!(matches!(
            store.undo_restore(),
            Err(StoreError::NothingToUndo)
        ));
    }

    #[test]
    fn a_rewind_survives_a_restart_and_is_committed_by_the_next_prompt() {
        let (_dir, root, session) = setup();
        let mut store = CheckpointStore::open(&session, &root).unwrap();
        store.begin(1, "first").unwrap();
        store.record_before(&["notes.txt"]).unwrap();
        fs::write(root.join("notes.txt"), "v1\n").unwrap();
        store.begin(2, "second").unwrap();
        let snapshot = store.snapshot().unwrap();
        fs::remove_file(root.join("doomed.txt")).unwrap();
        store.after_command(snapshot).unwrap();
        store.restore_to_before(2).unwrap();
        assert_eq!(fs::read(root.join("doomed.txt")).unwrap(), b"delete me\n");
        drop(store);

        // A restarted daemon can still undo the rewind.
        let mut store = CheckpointStore::open(&session, &root).unwrap();
        assert_eq!(store.undoable(), Some(2));
        store.undo_restore().unwrap();
        assert!(!root.join("doomed.txt").exists());
        store.restore_to_before(2).unwrap();

        // The next prompt commits it: no undo, and what only the rewound prompt needed is
        // collected (the deleted file's content lives in the workspace again).
        store.begin(2, "second, again").unwrap();
        assert!(matches!(
            store.undo_restore(),
            Err(StoreError::NothingToUndo)
        ));
        let turns: Vec<u32> = store.list().iter().map(|c| c.turn).collect();
        assert_eq!(turns, [1, 2]);
        assert!(!store.objects.contains(&ObjectId::of(b"delete me\n")));
        assert!(
            store
                .objects
                .contains(&ObjectId::of(b"line 1\nline 2\nline 3\n"))
        );
        let reopened = CheckpointStore::open(&session, &root).unwrap();
        assert_eq!(reopened.list(), store.list());
        assert_eq!(reopened.list()[1].prompt, "second, again");
        store.restore_to_before(1).unwrap();
        assert_eq!(
            fs::read(root.join("notes.txt")).unwrap(),
            b"line 1\nline 2\nline 3\n"
        );
    }

    #[test]
    fn identical_content_is_stored_once() {
        let (_dir, root, session) = setup();
        for name in ["a.txt", "b.txt", "src/c.txt"] {
            fs::write(root.join(name), "the same bytes\n").unwrap();
        }
        let mut store = CheckpointStore::open(&session, &root).unwrap();
        store.begin(1, "p").unwrap();
        store.snapshot().unwrap();
        store.record_before(&["a.txt", "b.txt"]).unwrap();
        let id = ObjectId::of(b"the same bytes\n");
        let hex = id.to_string();
        let fan_out = session.join("objects").join(&hex[..2]);
        let matching: Vec<_> = fs::read_dir(fan_out)
            .unwrap()
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy() == hex[2..])
            .collect();
        assert_eq!(matching.len(), 1);
    }

    #[test]
    fn a_torn_ledger_line_loses_only_that_record() {
        let (_dir, root, session) = setup();
        let mut store = CheckpointStore::open(&session, &root).unwrap();
        store.begin(1, "first").unwrap();
        store.record_before(&["notes.txt"]).unwrap();
        drop(store);
        let ledger = session.join(CHECKPOINTS_FILE);
        let mut bytes = fs::read(&ledger).unwrap();
        bytes.extend_from_slice(br#"{"type":"begin","turn":2,"prompt":"cut sh"#);
        fs::write(&ledger, bytes).unwrap();

        let mut store = CheckpointStore::open(&session, &root).unwrap();
        assert_eq!(store.list().len(), 1);
        assert_eq!(keys(&store.list()[0].files), ["notes.txt"]);
        store.begin(2, "second").unwrap();
        let reopened = CheckpointStore::open(&session, &root).unwrap();
        assert_eq!(reopened.list().len(), 2);
        assert_eq!(reopened.list()[1].prompt, "second");
    }

    #[test]
    fn big_files_are_not_kept_for_the_shell_and_the_rewind_says_so() {
        let (_dir, root, session) = setup();
        let options = StoreOptions {
            max_snapshot_file_bytes: 16,
            ..StoreOptions::default()
        };
        fs::write(root.join("big.log"), "more than sixteen bytes\n").unwrap();
        let mut store = CheckpointStore::open_with(&session, &root, options).unwrap();
        store.begin(1, "p").unwrap();
        let snapshot = store.snapshot().unwrap();
        assert_eq!(snapshot.skipped().len(), 3, "{:?}", snapshot.skipped());
        fs::write(root.join("big.log"), "changed\n").unwrap();
        let changes = store.after_command(snapshot).unwrap();
        assert_eq!(changes.not_checkpointed.len(), 1);
        assert_eq!(changes.not_checkpointed[0].path, Path::new("big.log"));
        assert!(
            changes.not_checkpointed[0]
                .reason
                .contains("24 bytes is over the 16 bytes bound")
        );

        let report = store.restore_to_before(1).unwrap();
        assert_eq!(report.failed.len(), 1);
        assert!(
            report.failed[0].reason.contains("not recorded"),
            "{:?}",
            report.failed
        );
        assert_eq!(fs::read(root.join("big.log")).unwrap(), b"changed\n");
    }

    #[test]
    fn the_session_directory_inside_the_workspace_is_not_walked() {
        let (_dir, root, _) = setup();
        let session = root.join(".cwcode/sessions/s1");
        let mut store = CheckpointStore::open(&session, &root).unwrap();
        store.begin(1, "p").unwrap();
        let snapshot = store.snapshot().unwrap();
        // Objects and ledger lines written during the command are the store's own.
        store.record_before(&["notes.txt"]).unwrap();
        let changes = store.after_command(snapshot).unwrap();
        assert!(changes.is_empty(), "{changes:?}");
    }

    #[test]
    fn a_new_session_directory_reached_through_a_symlink_is_not_walked_either() {
        let (dir, root, _) = setup();
        fs::create_dir(root.join(".home")).unwrap();
        symlink(root.join(".home"), dir.path().join("home-link")).unwrap();
        let session = dir.path().join("home-link/sessions/s1");
        let mut store = CheckpointStore::open(&session, &root).unwrap();
        let snapshot = store.snapshot().unwrap();
        store.begin(1, "p").unwrap();
        store.record_before(&["notes.txt"]).unwrap();
        let changes = store.after_command(snapshot).unwrap();
        assert_eq!(keys(&changes.created), [".home/sessions"]);
    }

    #[test]
    fn misuse_is_reported_plainly() {
        let (_dir, root, session) = setup();
        let mut store = CheckpointStore::open(&session, &root).unwrap();
        let error = store.record_before(&["notes.txt"]).unwrap_err();
        assert!(matches!(error, StoreError::NoTurn), "{error}");
        store.begin(3, "p").unwrap();
        store.begin(3, "p").unwrap();
        let error = store.begin(2, "p").unwrap_err();
        assert_eq!(
            error.to_string(),
            "prompt 2 cannot begin after prompt 3: turn numbers only increase"
        );
        let error = store.restore_to_before(1).unwrap_err();
        assert_eq!(
            error.to_string(),
            "there is no checkpoint for prompt 1 (checkpoints exist for prompts 3)"
        );
    }

    #[test]
    fn a_file_in_the_way_of_the_store_fails_cleanly_and_corrupts_nothing() {
        // Root ignores permission bits, so a read-only home is imitated by a regular file
        // where the store needs its `objects` directory: creating anything under it fails
        // (ENOTDIR) as it would on a read-only or full disk.
        let (_dir, root, session) = setup();
        let mut store = CheckpointStore::open(&session, &root).unwrap();
        store.begin(1, "p").unwrap();
        store.record_before(&["src/lib.rs"]).unwrap();
        let ledger_before = fs::read(session.join(CHECKPOINTS_FILE)).unwrap();
        let objects = session.join(OBJECTS_DIR);
        fs::rename(&objects, session.join("objects.moved")).unwrap();
        fs::write(&objects, "in the way").unwrap();

        let error = store.record_before(&["notes.txt"]).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains(&objects.display().to_string()),
            "{message}"
        );
        assert!(message.contains("move it aside"), "{message}");
        assert_eq!(
            fs::read(session.join(CHECKPOINTS_FILE)).unwrap(),
            ledger_before
        );
        let error = store.restore_to_before(1).unwrap_err();
        assert!(error.to_string().contains("move it aside"), "{error}");
        assert_eq!(
            fs::read(root.join("src/lib.rs")).unwrap(),
            b"pub fn f() {}\n"
        );
        assert_eq!(
            fs::read(session.join(CHECKPOINTS_FILE)).unwrap(),
            ledger_before
        );

        // Once the way is clear, the store carries on where it was.
        fs::remove_file(&objects).unwrap();
        fs::rename(session.join("objects.moved"), &objects).unwrap();
        store.record_before(&["notes.txt"]).unwrap();
        assert_eq!(keys(&store.list()[0].files), ["notes.txt", "src/lib.rs"]);
    }

    #[test]
    fn a_full_disk_fails_with_the_path_and_the_fix_and_keeps_the_ledger_whole() {
        // /dev/full answers every write with ENOSPC: the ledger is pointed at it for a while.
        let (_dir, root, session) = setup();
        let mut store = CheckpointStore::open(&session, &root).unwrap();
        store.begin(1, "p").unwrap();
        let ledger = session.join(CHECKPOINTS_FILE);
        let saved = session.join("checkpoints.saved");
        fs::rename(&ledger, &saved).unwrap();
        symlink("/dev/full", &ledger).unwrap();

        let error = store.begin(2, "q").unwrap_err();
        let message = error.to_string();
        assert!(message.contains(&ledger.display().to_string()), "{message}");
        assert!(message.contains("free some space"), "{message}");
        assert_eq!(store.list().len(), 1, "memory follows the disk");

        fs::remove_file(&ledger).unwrap();
        fs::rename(&saved, &ledger).unwrap();
        store.begin(2, "q").unwrap();
        let turns: Vec<u32> = CheckpointStore::open(&session, &root)
            .unwrap()
            .list()
            .iter()
            .map(|c| c.turn)
            .collect();
        assert_eq!(turns, [1, 2]);
    }

    #[test]
    fn paths_are_keyed_relative_to_the_workspace_however_they_are_given() {
        let (_dir, root, session) = setup();
        let mut store = CheckpointStore::open(&session, &root).unwrap();
        store.begin(1, "p").unwrap();
        store
            .record_before(&[
                root.join("src/lib.rs"),
                PathBuf::from("./src/../notes.txt"),
                PathBuf::from("."),
            ])
            .unwrap();
        assert_eq!(keys(&store.list()[0].files), ["notes.txt", "src/lib.rs"]);
    }
}
