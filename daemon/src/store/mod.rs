//! Durable files (SPEC §3): atomic replacement of whole files, and the checkpoint store of SPEC
//! §8 — content-addressed objects, the per-prompt checkpoint ledger, the stat-index baseline that
//! catches shell edits, and rewind.

mod atomic;
mod baseline;
mod checkpoints;
mod ledger;
mod objects;
mod restore;
mod shared;

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub(crate) use atomic::TEMP_PREFIX;
pub use atomic::{
    AtomicFile, Durability, FileMode, WriteError, atomic_symlink, atomic_write, replace_file,
};
pub use baseline::{CommandChanges, NotCheckpointed, Snapshot};
pub use checkpoints::{CheckpointStore, CheckpointSummary, RestoreReport, StoreOptions};
pub use objects::{GcReport, ObjectId, ObjectStore};
pub use restore::{NotRestored, PathState};
pub use shared::{SharedStore, SharedStoreError};

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
