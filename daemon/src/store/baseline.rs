//! The baseline that lets `bash` be checkpointed (SPEC §8): a stat index of the workspace's
//! .gitignore-aware entries, like git's, whose file contents are kept as objects.
//!
//! Before a command, a snapshot walks the workspace and stores the content of every file the
//! baseline has not seen with its current stat; after the command, a second walk finds by stat
//! what changed, appeared or went, and the snapshot already holds the earlier content of each.
//! The walking threads compare each entry with the index themselves, so an unchanged entry
//! costs a `stat` and a lookup, and when nothing changed the index is kept as it is. It is
//! saved in `baseline.json` so that a restarted daemon does not re-read the workspace.
//!
//! File timestamps are coarser than the clock (a kernel tick), so a file written just before a
//! snapshot and again just after can keep its stat: such "racy" entries, modified within
//! `racy_window` of the moment their stat was taken, are compared by content, as git does.

use std::collections::{HashMap, HashSet};
use std::fs::{self, Metadata};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use serde::{Deserialize, Serialize};

use super::objects::{ObjectId, ObjectStore};
use super::restore::PathState;
use super::{Durability, StoreError, atomic_write, create_private_dir};

/// The bounds that keep a snapshot cheap.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub max_file_bytes: u64,
    pub max_entries: usize,
    pub max_total_bytes: u64,
    pub racy_window: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    File,
    Symlink,
    Dir,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Stat {
    kind: Kind,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    inode: u64,
    mode: u32,
}

impl Stat {
    /// None for what checkpoints do not hold: FIFOs, sockets, devices.
    fn of(metadata: &Metadata) -> Option<Self> {
        let file_type = metadata.file_type();
        let kind = if file_type.is_file() {
            Kind::File
        } else if file_type.is_dir() {
            Kind::Dir
        } else if file_type.is_symlink() {
            Kind::Symlink
        } else {
            return None;
        };
        let nanos = |seconds: i64, nanos: i64| seconds.saturating_mul(1_000_000_000) + nanos;
        Some(Self {
            kind,
            size: metadata.size(),
            mtime_ns: nanos(metadata.mtime(), metadata.mtime_nsec()),
            ctime_ns: nanos(metadata.ctime(), metadata.ctime_nsec()),
            inode: metadata.ino(),
            mode: metadata.mode(),
        })
    }

    /// Whether the entry still holds what it held: a directory's own timestamps change with
    /// every entry added to it, so only its kind and mode count.
    fn same_as(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.mode == other.mode
            && (self.kind == Kind::Dir
                || (self.size, self.mtime_ns, self.ctime_ns, self.inode)
                    == (other.size, other.mtime_ns, other.ctime_ns, other.inode))
    }

    /// Whether the content may have changed without the stat showing it: modified within
    /// `window_ns` of the moment the stat was taken.
    fn is_racy(&self, taken_at_ns: i64, window_ns: i64) -> bool {
        self.kind != Kind::Dir && self.mtime_ns >= taken_at_ns.saturating_sub(window_ns)
    }

    fn permissions(&self) -> u32 {
        self.mode & 0o7777
    }

    /// Whether a file of this size counts against the baseline's total bound.
    fn kept_size(&self, blob: Option<ObjectId>) -> u64 {
        match (self.kind, blob) {
            (Kind::File, Some(_)) => self.size,
            _ => 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    #[serde(flatten)]
    stat: Stat,
    /// The content's object; none for directories and for files the snapshot left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    blob: Option<ObjectId>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Index {
    /// When the walk that produced these stats started, in ns since the epoch.
    taken_at_ns: i64,
    /// Keyed by workspace-relative path.
    entries: HashMap<String, Entry>,
}

/// A file (or link) whose earlier content a checkpoint could not keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotCheckpointed {
    pub path: PathBuf,
    pub reason: String,
}

/// The workspace as it was before a command, from [`CheckpointStore::snapshot`]; hand it back
/// to [`CheckpointStore::after_command`].
///
/// [`CheckpointStore::snapshot`]: super::CheckpointStore::snapshot
/// [`CheckpointStore::after_command`]: super::CheckpointStore::after_command
#[derive(Debug)]
pub struct Snapshot {
    index: Option<Arc<Index>>,
    limits: Limits,
}

impl Snapshot {
    /// Files whose content the snapshot does not hold (over the size bounds, unreadable): if
    /// the command changes them, the change cannot be rewound.
    pub fn skipped(&self) -> Vec<NotCheckpointed> {
        let Some(index) = &self.index else {
            return Vec::new();
        };
        let mut skipped: Vec<NotCheckpointed> = index
            .entries
            .iter()
            .filter(|(_, entry)| entry.stat.kind != Kind::Dir && entry.blob.is_none())
            .map(|(key, entry)| NotCheckpointed {
                path: PathBuf::from(key),
                reason: not_kept_reason(&entry.stat, &self.limits),
            })
            .collect();
        skipped.sort_by(|left, right| left.path.cmp(&right.path));
        skipped
    }

    /// Set when the workspace was not snapshotted at all (too many entries).
    pub fn note(&self) -> Option<String> {
        self.index.is_none().then(|| too_many_note(&self.limits))
    }
}

/// What a command did to the workspace. Paths are workspace-relative; directories count too.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct CommandChanges {
    pub changed: Vec<PathBuf>,
    pub created: Vec<PathBuf>,
    pub deleted: Vec<PathBuf>,
    /// Changes a rewind cannot undo, because the earlier content was not kept.
    pub not_checkpointed: Vec<NotCheckpointed>,
    /// Set when the command could not be checked at all (a workspace with too many entries).
    pub note: Option<String>,
}

impl CommandChanges {
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.created.is_empty() && self.deleted.is_empty()
    }
}

/// The paths a command touched with their earlier states, and the summary for the caller.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub states: Vec<(String, PathState)>,
    pub changes: CommandChanges,
}

#[derive(Debug)]
pub(crate) struct Baseline {
    file: PathBuf,
    root: PathBuf,
    excluded: Arc<[PathBuf]>,
    limits: Limits,
    /// Loaded from `baseline.json` on first use.
    index: Option<Arc<Index>>,
    /// The index differs from what `baseline.json` holds.
    unsaved: bool,
}

impl Baseline {
    pub fn new(file: PathBuf, root: PathBuf, excluded: Vec<PathBuf>, limits: Limits) -> Self {
        Self {
            file,
            root,
            excluded: excluded.into(),
            limits,
            index: None,
            unsaved: false,
        }
    }

    pub fn snapshot(&mut self, objects: &mut ObjectStore) -> Result<Snapshot, StoreError> {
        // Taken out so that, unshared, it can be updated in place.
        let mut index = self.index.take().unwrap_or_else(|| Arc::new(self.load()));
        let taken_at_ns = now_ns();
        let Some(walk) = self.walk(&index) else {
            self.index = Some(index);
            return Ok(self.snapshot_of(None));
        };
        if walk.found_nothing_new(&index) {
            drop(walk);
            if let Some(index) = Arc::get_mut(&mut index) {
                index.taken_at_ns = taken_at_ns;
            }
            self.index = Some(Arc::clone(&index));
            return Ok(self.snapshot_of(Some(index)));
        }
        let deleted = walk.deleted_from(&index);
        let closer = walk.closer;
        let mut updated = Arc::unwrap_or_clone(index);
        let mut kept_bytes: u64 = updated
            .entries
            .values()
            .map(|entry| entry.stat.kept_size(entry.blob))
            .sum();
        // Racy entries re-read with the same content change nothing worth saving.
        let mut changed = !deleted.is_empty();
        for key in deleted {
            if let Some(old) = updated.entries.remove(&key) {
                kept_bytes -= old.stat.kept_size(old.blob);
            }
        }
        for (key, stat) in closer {
            let old = updated.entries.get(&key);
            let reusable = old
                .filter(|old| {
                    let window_ns = self.racy_window_ns();
                    old.stat.same_as(&stat) && !old.stat.is_racy(updated.taken_at_ns, window_ns)
                })
                .and_then(|old| old.blob);
            kept_bytes -= old.map_or(0, |old| old.stat.kept_size(old.blob));
            let blob = match (stat.kind, reusable) {
                (Kind::Dir, _) => None,
                (_, Some(blob)) => Some(blob),
                (Kind::File, None) => self.keep_file(&key, &stat, kept_bytes, objects)?,
                (Kind::Symlink, None) => match fs::read_link(self.root.join(&key)) {
                    Ok(target) => Some(objects.put(target.as_os_str().as_bytes())?),
                    Err(_) => None,
                },
            };
            kept_bytes += stat.kept_size(blob);
            let entry = Entry { stat, blob };
            changed |= old != Some(&entry);
            updated.entries.insert(key, entry);
        }
        updated.taken_at_ns = taken_at_ns;
        self.unsaved |= changed;
        let index = Arc::new(updated);
        self.index = Some(Arc::clone(&index));
        // On disk before the command runs: a daemon that dies during it finds, on its next
        // start, what the command changed (see `saved_snapshot`).
        self.save_if_changed();
        Ok(self.snapshot_of(Some(index)))
    }

    /// The workspace as the last snapshot saw it, read back from `baseline.json`: after a crash
    /// during a command, the state to compare against.
    pub fn saved_snapshot(&mut self) -> Snapshot {
        let index = Arc::new(self.load());
        self.index = Some(Arc::clone(&index));
        self.snapshot_of(Some(index))
    }

    /// What changed since `snapshot`, with each touched path's state in the snapshot.
    pub fn compare(
        &mut self,
        snapshot: Snapshot,
        objects: &ObjectStore,
    ) -> Result<Comparison, StoreError> {
        let Some(mut before) = snapshot.index else {
            return Ok(Comparison {
                states: Vec::new(),
                changes: CommandChanges {
                    note: Some(too_many_note(&self.limits)),
                    ..CommandChanges::default()
                },
            });
        };
        // The baseline is this snapshot: letting go of it leaves the index ours to update.
        self.index = None;
        let taken_at_ns = now_ns();
        let Some(walk) = self.walk(&before) else {
            self.index = Some(before);
            let note = format!(
                "{} The command's changes were not checkpointed.",
                too_many_note(&self.limits)
            );
            return Ok(Comparison {
                states: Vec::new(),
                changes: CommandChanges {
                    note: Some(note),
                    ..CommandChanges::default()
                },
            });
        };
        if walk.found_nothing_new(&before) {
            drop(walk);
            if let Some(index) = Arc::get_mut(&mut before) {
                index.taken_at_ns = taken_at_ns;
            }
            self.index = Some(before);
            self.save_if_changed();
            return Ok(Comparison::default());
        }
        let deleted = walk.deleted_from(&before);
        let mut comparison = Comparison::default();
        let mut updates = Vec::new();
        for (key, stat) in walk.closer {
            match before.entries.get(&key) {
                None => {
                    comparison.changes.created.push(PathBuf::from(&key));
                    comparison.states.push((key.clone(), PathState::Absent));
                    updates.push((key, Some(Entry { stat, blob: None })));
                }
                // Racy, but the content says it did not change.
                Some(old) if old.stat.same_as(&stat) && self.same_content(&key, old) => {}
                Some(old) => {
                    comparison.changes.changed.push(PathBuf::from(&key));
                    let state = self.earlier_state(&key, old, objects, &mut comparison.changes);
                    comparison.states.push((key.clone(), state));
                    // The new content is read by the next snapshot, if there is one.
                    updates.push((key, Some(Entry { stat, blob: None })));
                }
            }
        }
        for key in deleted {
            if let Some(old) = before.entries.get(&key) {
                comparison.changes.deleted.push(PathBuf::from(&key));
                let state = self.earlier_state(&key, old, objects, &mut comparison.changes);
                comparison.states.push((key.clone(), state));
                updates.push((key, None));
            }
        }
        let changes = &mut comparison.changes;
        changes.changed.sort();
        changes.created.sort();
        changes.deleted.sort();
        changes
            .not_checkpointed
            .sort_by(|left, right| left.path.cmp(&right.path));
        let mut after = Arc::unwrap_or_clone(before);
        for (key, entry) in updates {
            match entry {
                Some(entry) => after.entries.insert(key, entry),
                None => after.entries.remove(&key),
            };
        }
        after.taken_at_ns = taken_at_ns;
        self.unsaved |= !comparison.states.is_empty();
        self.index = Some(Arc::new(after));
        self.save_if_changed();
        Ok(comparison)
    }

    /// The objects the baseline relies on: collecting them would make the next snapshot
    /// believe it holds content it does not.
    pub fn referenced(&mut self) -> HashSet<ObjectId> {
        if self.index.is_none() {
            self.index = Some(Arc::new(self.load()));
        }
        let entries = self.index.iter().flat_map(|index| index.entries.values());
        entries.filter_map(|entry| entry.blob).collect()
    }

    fn snapshot_of(&self, index: Option<Arc<Index>>) -> Snapshot {
        Snapshot {
            index,
            limits: self.limits.clone(),
        }
    }

    /// The index is a cache: when it is missing or damaged, the next snapshot reads the
    /// workspace afresh.
    fn load(&self) -> Index {
        match fs::read(&self.file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|error| {
                tracing::warn!(path = %self.file.display(), %error, "ignoring a damaged baseline");
                Index::default()
            }),
            Err(error) => {
                if error.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %self.file.display(), %error, "cannot read the baseline");
                }
                Index::default()
            }
        }
    }

    /// Saves the index through a temporary file and a rename, without an fsync: after a power
    /// cut a stale or empty index only costs re-reading files.
    fn save_if_changed(&mut self) {
        let Some(index) = self.index.as_ref().filter(|_| self.unsaved) else {
            return;
        };
        let saved = (|| {
            let dir = self.file.parent().unwrap_or(Path::new("."));
            create_private_dir(dir)?;
            let bytes = serde_json::to_vec(&**index)?;
            atomic_write(&self.file, &bytes, Durability::Unsynced)?;
            Ok::<_, Box<dyn std::error::Error>>(())
        })();
        match saved {
            Ok(()) => self.unsaved = false,
            Err(error) => tracing::warn!(%error, "cannot save the checkpoint baseline"),
        }
    }

    /// Walks the workspace, comparing each entry with `earlier` as it goes; None past
    /// `max_entries`.
    fn walk<'a>(&self, earlier: &'a Index) -> Option<Walk<'a>> {
        let excluded = Arc::clone(&self.excluded);
        let mut builder = WalkBuilder::new(&self.root);
        builder
            .hidden(false)
            .require_git(false)
            .current_dir(&self.root)
            .filter_entry(move |entry| {
                let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
                entry.file_name() != ".git"
                    && !(is_dir && excluded.iter().any(|dir| entry.path() == dir))
            });
        let root_bytes = self.root.as_os_str().as_bytes();
        let sink = Mutex::new(Vec::new());
        let count = AtomicUsize::new(0);
        let mut visitors = WalkVisitors {
            // Entry paths are the root, a separator (unless the root ends with one), the key.
            key_offset: root_bytes.len() + usize::from(!root_bytes.ends_with(b"/")),
            earlier,
            racy_window_ns: self.racy_window_ns(),
            count: &count,
            max_entries: self.limits.max_entries,
            sink: &sink,
        };
        builder.build_parallel().visit(&mut visitors);
        if count.into_inner() > self.limits.max_entries {
            return None;
        }
        let parts = sink.into_inner().unwrap_or_else(PoisonError::into_inner);
        let mut walk = Walk::default();
        for part in parts {
            walk.seen.extend(part.seen);
            walk.closer.extend(part.closer);
        }
        Some(walk)
    }

    fn keep_file(
        &self,
        key: &str,
        stat: &Stat,
        kept_bytes: u64,
        objects: &mut ObjectStore,
    ) -> Result<Option<ObjectId>, StoreError> {
        if stat.size > self.limits.max_file_bytes
            || kept_bytes + stat.size > self.limits.max_total_bytes
        {
            return Ok(None);
        }
        match fs::read(self.root.join(key)) {
            Ok(bytes) => objects.put(&bytes).map(Some),
            // Unreadable, or gone since the walk: noted as not kept.
            Err(_) => Ok(None),
        }
    }

    fn same_content(&self, key: &str, old: &Entry) -> bool {
        let path = self.root.join(key);
        let now = match old.stat.kind {
            Kind::Dir => return true,
            Kind::File => ObjectId::of_file(&path).ok(),
            Kind::Symlink => fs::read_link(&path)
                .ok()
                .map(|target| ObjectId::of(target.as_os_str().as_bytes())),
        };
        // Without the earlier content there is nothing to compare: the stat has to do.
        old.blob.is_none_or(|blob| now == Some(blob))
    }

    fn racy_window_ns(&self) -> i64 {
        i64::try_from(self.limits.racy_window.as_nanos()).unwrap_or(i64::MAX)
    }

    fn earlier_state(
        &self,
        key: &str,
        old: &Entry,
        objects: &ObjectStore,
        changes: &mut CommandChanges,
    ) -> PathState {
        let mode = old.stat.permissions();
        let reason = match (old.stat.kind, old.blob) {
            (Kind::Dir, _) => return PathState::Dir { mode },
            (Kind::File, Some(blob)) if objects.contains(&blob) => {
                return PathState::File { blob, mode };
            }
            (Kind::Symlink, Some(blob)) if objects.contains(&blob) => {
                return PathState::Symlink { blob };
            }
            (_, Some(_)) => "its content is missing from the checkpoint store".to_owned(),
            (_, None) => not_kept_reason(&old.stat, &self.limits),
        };
        changes.not_checkpointed.push(NotCheckpointed {
            path: PathBuf::from(key),
            reason: reason.clone(),
        });
        PathState::Unrecorded { reason }
    }
}

/// What one walk found against an earlier index.
#[derive(Debug, Default)]
struct Walk<'a> {
    /// Keys of the earlier entries found again, changed or not.
    seen: Vec<&'a str>,
    /// Entries that are new, changed, or unchanged but racy: they need a closer look.
    closer: Vec<(String, Stat)>,
}

impl Walk<'_> {
    fn found_nothing_new(&self, earlier: &Index) -> bool {
        self.closer.is_empty() && self.seen.len() == earlier.entries.len()
    }

    /// The earlier entries the walk did not find.
    fn deleted_from(&self, earlier: &Index) -> Vec<String> {
        if self.seen.len() == earlier.entries.len() {
            return Vec::new();
        }
        let seen: HashSet<&str> = self.seen.iter().copied().collect();
        earlier
            .entries
            .keys()
            .filter(|key| !seen.contains(key.as_str()))
            .cloned()
            .collect()
    }
}

/// Makes one [`WalkVisitor`] per walking thread.
struct WalkVisitors<'s, 'a> {
    key_offset: usize,
    earlier: &'a Index,
    racy_window_ns: i64,
    count: &'s AtomicUsize,
    max_entries: usize,
    sink: &'s Mutex<Vec<Walk<'a>>>,
}

impl<'s, 'a: 's> ParallelVisitorBuilder<'s> for WalkVisitors<'s, 'a> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(WalkVisitor {
            key_offset: self.key_offset,
            earlier: self.earlier,
            racy_window_ns: self.racy_window_ns,
            count: self.count,
            max_entries: self.max_entries,
            found: Walk::default(),
            sink: self.sink,
        })
    }
}

/// One thread's share of a walk, handed to the sink when the thread is done with it.
struct WalkVisitor<'s, 'a> {
    key_offset: usize,
    earlier: &'a Index,
    racy_window_ns: i64,
    count: &'s AtomicUsize,
    max_entries: usize,
    found: Walk<'a>,
    sink: &'s Mutex<Vec<Walk<'a>>>,
}

impl ParallelVisitor for WalkVisitor<'_, '_> {
    fn visit(&mut self, result: Result<DirEntry, ignore::Error>) -> WalkState {
        let Ok(entry) = result else {
            return WalkState::Continue;
        };
        if entry.depth() == 0 {
            return WalkState::Continue;
        }
        let Some(relative) = entry.path().as_os_str().as_bytes().get(self.key_offset..) else {
            return WalkState::Continue;
        };
        // Only bash can create a name that is not UTF-8, and no record could name it.
        let Ok(key) = std::str::from_utf8(relative) else {
            return WalkState::Skip;
        };
        let Some(stat) = entry.metadata().ok().as_ref().and_then(Stat::of) else {
            return WalkState::Continue;
        };
        if self.count.fetch_add(1, Ordering::Relaxed) >= self.max_entries {
            return WalkState::Quit;
        }
        match self.earlier.entries.get_key_value(key) {
            Some((earlier_key, old)) => {
                self.found.seen.push(earlier_key);
                let racy = old
                    .stat
                    .is_racy(self.earlier.taken_at_ns, self.racy_window_ns);
                if racy || !old.stat.same_as(&stat) {
                    self.found.closer.push((key.to_owned(), stat));
                }
            }
            None => self.found.closer.push((key.to_owned(), stat)),
        }
        WalkState::Continue
    }
}

impl Drop for WalkVisitor<'_, '_> {
    fn drop(&mut self) {
        let found = std::mem::take(&mut self.found);
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(found);
    }
}

fn not_kept_reason(stat: &Stat, limits: &Limits) -> String {
    if stat.size > limits.max_file_bytes {
        format!(
            "{} is over the {} bound on files kept for shell commands",
            human_size(stat.size),
            human_size(limits.max_file_bytes)
        )
    } else {
        format!(
            "it was not kept for shell commands (unreadable, or past the {} bound on all \
             files kept)",
            human_size(limits.max_total_bytes)
        )
    }
}

fn too_many_note(limits: &Limits) -> String {
    format!(
        "The workspace has more than {} files and directories (not counting ignored ones), too \
         many to snapshot before each shell command: shell edits cannot be rewound here; edits \
         made with the file tools still can.",
        limits.max_entries
    )
}

fn human_size(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} bytes"),
        1024..1_048_576 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

fn now_ns() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_file_bytes: 1024,
            max_entries: 1000,
            max_total_bytes: 1 << 20,
            racy_window: Duration::from_secs(2),
        }
    }

    #[allow(clippy::unwrap_used)]
    fn setup() -> (tempfile::TempDir, PathBuf, Baseline, ObjectStore) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        fs::create_dir_all(root.join("src")).unwrap();
        let baseline = Baseline::new(
            dir.path().join("baseline.json"),
            root.clone(),
            Vec::new(),
            limits(),
        );
        let objects = ObjectStore::new(dir.path().join("objects"));
        (dir, root, baseline, objects)
    }

    fn keys(paths: &[PathBuf]) -> Vec<&str> {
        paths.iter().filter_map(|path| path.to_str()).collect()
    }

    #[test]
    fn finds_changed_created_and_deleted_entries_with_their_earlier_state() {
        let (_dir, root, mut baseline, mut objects) = setup();
        fs::write(root.join("src/a.rs"), "a\n").unwrap();
        fs::write(root.join("gone.txt"), "gone\n").unwrap();
        fs::write(root.join("same.txt"), "same\n").unwrap();
        let snapshot = baseline.snapshot(&mut objects).unwrap();

        fs::write(root.join("src/a.rs"), "a changed\n").unwrap();
        fs::remove_file(root.join("gone.txt")).unwrap();
        fs::create_dir(root.join("new")).unwrap();
        fs::write(root.join("new/b.rs"), "b\n").unwrap();
        let comparison = baseline.compare(snapshot, &objects).unwrap();
        let changes = &comparison.changes;
        assert_eq!(keys(&changes.changed), ["src/a.rs"]);
        assert_eq!(keys(&changes.created), ["new", "new/b.rs"]);
        assert_eq!(keys(&changes.deleted), ["gone.txt"]);
        let states: HashMap<_, _> = comparison.states.into_iter().collect();
        assert_eq!(states.len(), 4);
        assert_eq!(
            states["src/a.rs"],
            PathState::File {
                blob: ObjectId::of(b"a\n"),
                mode: 0o644
            }
        );
        assert_eq!(states["new/b.rs"], PathState::Absent);
        assert_eq!(objects.get(&ObjectId::of(b"gone\n")).unwrap(), b"gone\n");
    }

    #[test]
    fn a_deletion_alone_is_found_before_and_during_a_command() {
        let (_dir, root, mut baseline, mut objects) = setup();
        baseline.limits.racy_window = Duration::ZERO;
        for name in ["a.txt", "b.txt", "c.txt"] {
            fs::write(root.join(name), name).unwrap();
        }
        let snapshot = baseline.snapshot(&mut objects).unwrap();
        baseline.compare(snapshot, &objects).unwrap();

        // Deleted between commands (by a file tool, or the user): not the command's doing.
        fs::remove_file(root.join("a.txt")).unwrap();
        let snapshot = baseline.snapshot(&mut objects).unwrap();
        fs::remove_file(root.join("b.txt")).unwrap();
        let comparison = baseline.compare(snapshot, &objects).unwrap();
        assert_eq!(keys(&comparison.changes.deleted), ["b.txt"]);
        assert!(comparison.changes.changed.is_empty());
        assert_eq!(
            comparison.states,
            [(
                "b.txt".to_owned(),
                PathState::File {
                    blob: ObjectId::of(b"b.txt"),
                    mode: 0o644
                }
            )]
        );
    }

    #[test]
    fn nothing_changed_means_nothing_recorded_and_nothing_written() {
        let (dir, root, mut baseline, mut objects) = setup();
        fs::write(root.join("src/a.rs"), "a\n").unwrap();
        let first = baseline.snapshot(&mut objects).unwrap();
        assert!(baseline.compare(first, &objects).unwrap().states.is_empty());
        let saved = fs::metadata(dir.path().join("baseline.json")).unwrap();
        let second = baseline.snapshot(&mut objects).unwrap();
        let comparison = baseline.compare(second, &objects).unwrap();
        assert!(comparison.changes.is_empty());
        let resaved = fs::metadata(dir.path().join("baseline.json")).unwrap();
        assert_eq!(
            saved.ino(),
            resaved.ino(),
            "an unchanged baseline is not rewritten"
        );
    }

    #[test]
    fn a_rewrite_that_keeps_the_size_is_caught_even_within_a_timestamp_tick() {
        let (_dir, root, mut baseline, mut objects) = setup();
        let path = root.join("src/a.rs");
        for round in 0..20u8 {
            fs::write(&path, [b'a' + round % 2]).unwrap();
            let snapshot = baseline.snapshot(&mut objects).unwrap();
            fs::write(&path, [b'a' + (round + 1) % 2]).unwrap();
            let comparison = baseline.compare(snapshot, &objects).unwrap();
            assert_eq!(
                keys(&comparison.changes.changed),
                ["src/a.rs"],
                "round {round}"
            );
        }
    }

    #[test]
    fn gitignored_files_are_not_snapshotted_but_hidden_ones_are() {
        let (_dir, root, mut baseline, mut objects) = setup();
        fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
        fs::create_dir_all(root.join("target/debug")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(root.join(".env.example"), "KEY=\n").unwrap();
        let snapshot = baseline.snapshot(&mut objects).unwrap();
        fs::write(root.join("target/debug/app"), "binary").unwrap();
        fs::write(root.join("build.log"), "log").unwrap();
        fs::write(root.join(".git/HEAD"), "ref: refs/heads/other\n").unwrap();
        fs::write(root.join(".env.example"), "KEY=value\n").unwrap();
        let comparison = baseline.compare(snapshot, &objects).unwrap();
        assert_eq!(keys(&comparison.changes.changed), [".env.example"]);
        assert!(comparison.changes.created.is_empty());
        let index = baseline.index.clone().unwrap();
        assert!(!index.entries.contains_key("target"));
        assert!(!index.entries.contains_key(".git/HEAD"));
        assert!(!objects.contains(&ObjectId::of(b"ref: refs/heads/main\n")));
    }

    #[test]
    fn big_files_are_skipped_and_their_changes_noted() {
        let (_dir, root, mut baseline, mut objects) = setup();
        let big = vec![b'x'; 2048];
        fs::write(root.join("big.bin"), &big).unwrap();
        let snapshot = baseline.snapshot(&mut objects).unwrap();
        let skipped = snapshot.skipped();
        assert_eq!(skipped.len(), 1);
        assert_eq!(
            skipped[0].reason,
            "2.0 KiB is over the 1.0 KiB bound on files kept for shell commands"
        );
        assert!(!objects.contains(&ObjectId::of(&big)));
        fs::write(root.join("big.bin"), b"small now").unwrap();
        let comparison = baseline.compare(snapshot, &objects).unwrap();
        assert_eq!(keys(&comparison.changes.changed), ["big.bin"]);
        assert_eq!(comparison.changes.not_checkpointed.len(), 1);
        assert!(matches!(
            comparison.states[0].1,
            PathState::Unrecorded { .. }
        ));
    }

    #[test]
    fn a_workspace_over_the_entry_bound_is_not_snapshotted_and_says_so() {
        let (_dir, root, mut baseline, mut objects) = setup();
        baseline.limits.max_entries = 5;
        for index in 0..10 {
            fs::write(root.join(format!("f{index}")), "x").unwrap();
        }
        let snapshot = baseline.snapshot(&mut objects).unwrap();
        assert!(
            snapshot
                .note()
                .is_some_and(|note| note.contains("more than 5"))
        );
        let comparison = baseline.compare(snapshot, &objects).unwrap();
        assert!(comparison.states.is_empty());
        assert!(comparison.changes.note.is_some());
    }

    #[test]
    fn the_saved_index_spares_a_restarted_daemon_from_re_reading_files() {
        let (dir, root, mut baseline, mut objects) = setup();
        fs::write(root.join("src/a.rs"), "a\n").unwrap();
        baseline.limits.racy_window = Duration::ZERO;
        let first = baseline.snapshot(&mut objects).unwrap();
        baseline.compare(first, &objects).unwrap();

        let mut restarted = Baseline::new(
            dir.path().join("baseline.json"),
            root.clone(),
            Vec::new(),
            Limits {
                racy_window: Duration::ZERO,
                ..limits()
            },
        );
        // With the object gone, a snapshot that re-read the file would store it again.
        let mut fresh_objects = ObjectStore::new(dir.path().join("other-objects"));
        restarted.snapshot(&mut fresh_objects).unwrap();
        assert!(!fresh_objects.contains(&ObjectId::of(b"a\n")));
        assert!(restarted.referenced().contains(&ObjectId::of(b"a\n")));
    }
}
