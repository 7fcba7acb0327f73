//! Durable files: atomic replacement of whole files (SPEC §3). Content-addressed checkpoint
//! objects grow here too.

use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub struct WriteError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Replaces `path` with `bytes` through a temporary file in the same directory and a rename, so
/// a crash or a full disk leaves either the old content or the new one, never a torn file.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let wrap = |source| WriteError {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(wrap)?;
    temp.write_all(bytes).map_err(wrap)?;
    temp.as_file().sync_data().map_err(wrap)?;
    temp.persist(path).map_err(|error| wrap(error.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.json");
        atomic_write(&path, b"old").unwrap();
        atomic_write(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn failure_names_the_path() {
        let error = atomic_write(Path::new("/nonexistent-dir/x.json"), b"x").unwrap_err();
        assert!(error.to_string().contains("/nonexistent-dir/x.json"));
    }
}
