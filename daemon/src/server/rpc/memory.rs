//! The `memory/*` methods: the memory store served to clients, the same notes the `remember`
//! and `recall` tools use.

use std::path::Path;
use std::sync::Arc;

use cwcode_protocol::{DeleteResult, ErrorCode, MemoryListResult, MemoryRecallResult, methods};
use jsonrpsee::core::RegisterMethodError;
use jsonrpsee::types::ErrorObjectOwned;
use jsonrpsee::types::error::INVALID_PARAMS_CODE;

use super::{Daemon, Registrar};
use crate::memory::{Embedder, MemoryError, NewNote};

fn memory_error(error: MemoryError) -> ErrorObjectOwned {
    let code = match error {
        MemoryError::Invalid(_) => INVALID_PARAMS_CODE,
        _ => ErrorCode::Storage.code(),
    };
    ErrorObjectOwned::owned(code, error.to_string(), None::<()>)
}

/// Notes are found by the workspace they were written in, so its path must be the one the
/// tools record: absolute.
fn absolute(workspace: &str) -> Result<(), ErrorObjectOwned> {
    if Path::new(workspace).is_absolute() {
        return Ok(());
    }
    Err(ErrorObjectOwned::owned(
        INVALID_PARAMS_CODE,
        format!("workspace `{workspace}` is not an absolute path: send the full path"),
        None::<()>,
    ))
}

/// The default profile's embeddings endpoint, when it names one: a client's notes and searches
/// belong to no session, so they use the profile new sessions get.
fn default_embedder(daemon: &Daemon) -> Option<Arc<dyn Embedder>> {
    let providers = &daemon.shared.providers;
    let profile = providers.default_profile().ok()?;
    providers.get(&profile).ok()?.embedder()
}

pub(super) fn serve(api: &mut Registrar<'_>) -> Result<(), RegisterMethodError> {
    api.serve(methods::MemoryRemember, |daemon, params| async move {
        absolute(&params.workspace)?;
        let note = NewNote {
            text: params.text,
            tags: params.tags,
            workspace: params.workspace,
            session_id: None,
        };
        let embedder = default_embedder(&daemon);
        daemon
            .shared
            .memory
            .remember(note, embedder.as_deref())
            .await
            .map_err(memory_error)
    })?;
    api.serve(methods::MemoryRecall, |daemon, params| async move {
        if let Some(workspace) = &params.workspace {
            absolute(workspace)?;
        }
        let embedder = default_embedder(&daemon);
        let notes = daemon
            .shared
            .memory
            .recall(
                &params.query,
                params.limit,
                params.workspace,
                embedder.as_deref(),
            )
            .await
            .map_err(memory_error)?;
        Ok(MemoryRecallResult { notes })
    })?;
    api.serve(methods::MemoryList, |daemon, params| async move {
        let notes = daemon
            .shared
            .memory
            .list(params.workspace, params.limit)
            .await
            .map_err(memory_error)?;
        Ok(MemoryListResult { notes })
    })?;
    api.serve(methods::MemoryDelete, |daemon, params| async move {
        let deleted = daemon
            .shared
            .memory
            .delete(params.id)
            .await
            .map_err(memory_error)?;
        Ok(DeleteResult { deleted })
    })?;
    Ok(())
}
