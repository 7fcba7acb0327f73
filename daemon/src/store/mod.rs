//! Durable files (SPEC §3): atomic replacement of whole files, and the checkpoint store of SPEC
//! §8 — content-addressed objects, the per-prompt checkpoint ledger, the stat-index baseline that
//! catches shell edits, and rewind.

mod baseline;
mod checkpoints;
mod ledger;
mod objects;
mod restore;
mod shared;

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use baseline::{CommandChanges, NotCheckpointed, Snapshot};
pub use checkpoints::{CheckpointStore, CheckpointSummary, RestoreReport, StoreOptions};
pub use objects::{GcReport, ObjectId, ObjectStore};
pub use restore::{NotRestored, PathState};
pub use shared::{SharedStore, SharedStoreError};

#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}{}", .path.display(), fix_for(.source))]
pub struct WriteError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Files under the home are readable by their owner only, directories enterable by them only
/// (SPEC §3), whatever the umask.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;

/// Creates `dir` and its missing parents, each private to its owner.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
}

/// A temporary file in `dir`, private to its owner, for a write that ends in a rename.
pub(crate) fn private_temp_file(dir: &Path, prefix: &str) -> io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(PRIVATE_FILE_MODE))
        .tempfile_in(dir)
}

/// Whether a replacement must survive a power cut (SPEC §3) or only a crash of the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The file and the rename reach the disk before the write returns: the file is state.
    Synced,
    /// No fsync now: either the file is a cache, and after a power cut a stale or empty one
    /// only costs recomputing it, or the caller syncs a batch of writes at the next turn
    /// boundary.
    Unsynced,
}

/// Replaces `path` with `bytes` through a temporary file in the same directory and a rename, so
/// a crash or a full disk leaves either the old content or the new one, never a torn file. With
/// [`Durability::Synced`] the file is fsynced before the rename and its directory after it, so
/// the new content also survives a power cut. The new file is readable by its owner only.
pub fn atomic_write(path: &Path, bytes: &[u8], durability: Durability) -> Result<(), WriteError> {
    let wrap = |source| WriteError {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut temp = private_temp_file(dir, ".tmp-").map_err(wrap)?;
    temp.write_all(bytes).map_err(wrap)?;
    if durability == Durability::Synced {
        temp.as_file().sync_all().map_err(wrap)?;
    }
    temp.persist(path).map_err(|error| wrap(error.error))?;
    if durability == Durability::Synced {
        sync_dir(dir).map_err(wrap)?;
    }
    Ok(())
}

/// Makes a rename or a creation in `dir` durable: until the directory is synced, a power cut can
/// forget the new name even though the file's content reached the disk.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Why the checkpoint store failed. I/O errors name the path and say what would fix them, since
/// the user (not the model) has to act on a full disk or a read-only home.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot {action} {}: {source}{}", .path.display(), fix_for(.source))]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{}, line {line}, is damaged ({source}): move the file aside to start this session's \
         checkpoints afresh",
        .path.display()
    )]
    Corrupt {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot encode a checkpoint record: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("checkpoint object {} is damaged: its content no longer matches its name", .path.display())]
    DamagedObject { path: PathBuf },
    #[error("cannot checkpoint `{}`: its name is not valid UTF-8", .path.display())]
    NotUtf8 { path: PathBuf },
    #[error("no prompt has begun: call begin(turn, prompt) before recording changes")]
    NoTurn,
    #[error("prompt {turn} cannot begin after prompt {last}: turn numbers only increase")]
    TurnOutOfOrder { turn: u32, last: u32 },
    #[error("there is no checkpoint for prompt {turn} ({available})")]
    NoSuchCheckpoint { turn: u32, available: String },
    #[error("there is no rewind to undo: a rewind can be undone only until the next prompt")]
    NothingToUndo,
}

impl StoreError {
    pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Self {
        let path = path.to_owned();
        move |source| Self::Io {
            action,
            path,
            source,
        }
    }
}

/// The remedy for the failures a user can fix, appended to the message.
pub(crate) fn fix_for(error: &io::Error) -> &'static str {
    match error.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
            ". The disk (or the quota) is full: free some space and retry"
        }
        io::ErrorKind::ReadOnlyFilesystem | io::ErrorKind::PermissionDenied => {
            ". It is not writable: make it writable (for the session store, CWCODE_HOME may \
             point cwcoded at a writable directory instead)"
        }
        io::ErrorKind::NotADirectory => {
            ". A file is in the way where a directory is expected: move it aside and retry"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.json");
        atomic_write(&path, b"old", Durability::Synced).unwrap();
        atomic_write(&path, b"new", Durability::Unsynced).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, PRIVATE_FILE_MODE);
    }

    #[test]
    fn failure_names_the_path() {
        let error = atomic_write(
            Path::new("/nonexistent-dir/x.json"),
            b"x",
            Durability::Synced,
        )
        .unwrap_err();
        assert!(error.to_string().contains("/nonexistent-dir/x.json"));
    }
}
