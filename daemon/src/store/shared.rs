//! A session's checkpoint store as the async daemon uses it: one store behind a lock, every
//! call on the blocking pool, since each one does file I/O.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use cwcode_protocol::{CheckpointInfo, RewindResult};

use super::{CheckpointStore, CommandChanges, RestoreReport, Snapshot, StoreError};

/// Why a checkpoint operation failed: the store's own error, or the blocking task it ran on
/// ending without an answer (a panic, or the runtime shutting down).
#[derive(Debug, thiserror::Error)]
pub enum SharedStoreError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the checkpoint task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

#[derive(Clone)]
pub struct SharedStore {
    store: Arc<Mutex<CheckpointStore>>,
}

impl SharedStore {
    pub fn new(store: CheckpointStore) -> Self {
        Self {
            store: Arc::new(Mutex::new(store)),
        }
    }

    async fn run<T: Send + 'static>(
        &self,
        operation: impl FnOnce(&mut CheckpointStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, SharedStoreError> {
        let store = Arc::clone(&self.store);
        let result = tokio::task::spawn_blocking(move || {
            let mut store = store.lock().unwrap_or_else(PoisonError::into_inner);
            operation(&mut store)
        })
        .await?;
        Ok(result?)
    }

    pub async fn begin(&self, turn: u32, prompt: String) -> Result<(), SharedStoreError> {
        self.run(move |store| store.begin(turn, &prompt)).await
    }

    pub async fn record_before(&self, paths: Vec<PathBuf>) -> Result<(), SharedStoreError> {
        self.run(move |store| store.record_before(&paths)).await
    }

    pub async fn snapshot(&self) -> Result<Snapshot, SharedStoreError> {
        self.run(CheckpointStore::snapshot).await
    }

    pub async fn after_command(
        &self,
        snapshot: Snapshot,
    ) -> Result<CommandChanges, SharedStoreError> {
        self.run(move |store| store.after_command(snapshot)).await
    }

    pub async fn recover_interrupted_command(
        &self,
        turn: u32,
    ) -> Result<CommandChanges, SharedStoreError> {
        self.run(move |store| store.recover_interrupted_command(turn))
            .await
    }

    pub async fn sync(&self) -> Result<(), SharedStoreError> {
        self.run(CheckpointStore::sync).await
    }

    pub async fn list(&self) -> Result<Vec<CheckpointInfo>, SharedStoreError> {
        self.run(|store| {
            Ok(store
                .list()
                .into_iter()
                .map(|summary| CheckpointInfo {
                    turn: summary.turn,
                    prompt: summary.prompt,
                    time: summary.time,
                    files: summary
                        .files
                        .iter()
                        .map(|path| path.display().to_string())
                        .collect(),
                })
                .collect())
        })
        .await
    }

    pub async fn restore_to_before(&self, turn: u32) -> Result<RewindResult, SharedStoreError> {
        self.run(move |store| store.restore_to_before(turn))
            .await
            .map(rewind_result)
    }

    pub async fn undo_restore(&self) -> Result<RewindResult, SharedStoreError> {
        self.run(CheckpointStore::undo_restore)
            .await
            .map(rewind_result)
    }
}

fn rewind_result(report: RestoreReport) -> RewindResult {
    let paths = |paths: Vec<PathBuf>| {
        paths
            .iter()
            .map(|path| path.display().to_string())
            .collect()
    };
    RewindResult {
        turn: report.turn,
        prompt: report.prompt,
        restored: paths(report.restored),
        removed: paths(report.removed),
        failed: report
            .failed
            .into_iter()
            .map(|failure| format!("{}: {}", failure.path.display(), failure.reason))
            .collect(),
    }
}
