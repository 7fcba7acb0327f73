//! Replacing a file whole (SPEC §3): the new content goes to a temporary file in the same
//! directory and is renamed over the old one, so a crash or a full disk leaves either the old
//! content or the new one, never a torn file. Every such write in the daemon goes through here,
//! with the durability it needs said at the call.

use std::ffi::OsStr;
use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{PRIVATE_FILE_MODE, fix_for};

/// The prefix of the daemon's own temporary files; `ObjectStore::retain` removes stale ones.
pub(crate) const TEMP_PREFIX: &str = ".tmp-";
/// The prefix of temporary files among the user's: one a crash left behind says whose it is.
const USER_TEMP_PREFIX: &str = ".cwcode-tmp-";

#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}{}", .path.display(), fix_for(.source))]
pub struct WriteError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
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

/// Who may read a file written through [`AtomicFile`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// Its owner only (0600): the daemon's files under its home (SPEC §3).
    Private,
    /// Exactly these permission bits: a user's file keeps the mode it had.
    Exactly(u32),
    /// What an editor would create: 0666 less the umask, for a new file of the user's.
    FromUmask,
}

/// A file being written that replaces its target only on [`commit`](Self::commit); dropped
/// uncommitted, it is removed and the target is untouched. For content streamed in pieces;
/// [`atomic_write`] is the one-call form for bytes at hand.
pub struct AtomicFile {
    temp: tempfile::NamedTempFile,
}

impl AtomicFile {
    /// A new, empty file in `dir`, named with `prefix` until it is committed. It should be
    /// committed into `dir` or another directory of the same file system.
    pub fn new_in(dir: &Path, prefix: &str, mode: FileMode) -> Result<Self, WriteError> {
        let bits = match mode {
            FileMode::Private => PRIVATE_FILE_MODE,
            FileMode::Exactly(bits) => bits,
            FileMode::FromUmask => 0o666,
        };
        let wrap = |source| WriteError {
            path: dir.to_owned(),
            source,
        };
        let temp = tempfile::Builder::new()
            .prefix(prefix)
            .permissions(Permissions::from_mode(bits))
            .tempfile_in(dir)
            .map_err(wrap)?;
        if let FileMode::Exactly(bits) = mode {
            // The creation mode went through the umask; a kept mode must survive it unchanged.
            temp.as_file()
                .set_permissions(Permissions::from_mode(bits))
                .map_err(wrap)?;
        }
        Ok(Self { temp })
    }

    /// Where the content is being written, for an error that must name it.
    pub fn path(&self) -> &Path {
        self.temp.path()
    }

    pub fn as_file_mut(&mut self) -> &mut File {
        self.temp.as_file_mut()
    }

    /// Replaces `path` with what was written.
    pub fn commit(self, path: &Path, durability: Durability) -> Result<(), WriteError> {
        self.rename(path, durability, true)
    }

    /// Puts what was written at `path` only if nothing is there yet: a file someone created
    /// meanwhile is never replaced, and the error's source is then `AlreadyExists`.
    pub fn commit_new(self, path: &Path, durability: Durability) -> Result<(), WriteError> {
        self.rename(path, durability, false)
    }

    fn rename(self, path: &Path, durability: Durability, replace: bool) -> Result<(), WriteError> {
        let wrap = |source| WriteError {
            path: path.to_owned(),
            source,
        };
        if durability == Durability::Synced {
            self.temp.as_file().sync_all().map_err(wrap)?;
        }
        if replace {
            self.temp.persist(path).map_err(|error| wrap(error.error))?;
        } else {
            self.temp
                .persist_noclobber(path)
                .map_err(|error| wrap(error.error))?;
        }
        if durability == Durability::Synced {
            sync_dir(parent_of(path)).map_err(wrap)?;
        }
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.temp.write(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush()
    }
}

/// Replaces `path` with `bytes`. With [`Durability::Synced`] the file is fsynced before the
/// rename and its directory after it, so the new content also survives a power cut. The new
/// file is readable by its owner only.
pub fn atomic_write(path: &Path, bytes: &[u8], durability: Durability) -> Result<(), WriteError> {
    write_through(path, bytes, TEMP_PREFIX, FileMode::Private, durability)
}

/// [`atomic_write`] for a file that is not the daemon's own: a file of the user's keeps the mode
/// it had, or gets the one an editor would give it.
pub fn replace_file(
    path: &Path,
    bytes: &[u8],
    mode: FileMode,
    durability: Durability,
) -> Result<(), WriteError> {
    write_through(path, bytes, USER_TEMP_PREFIX, mode, durability)
}

fn write_through(
    path: &Path,
    bytes: &[u8],
    prefix: &str,
    mode: FileMode,
    durability: Durability,
) -> Result<(), WriteError> {
    let wrap = |source| WriteError {
        path: path.to_owned(),
        source,
    };
    let mut file =
        AtomicFile::new_in(parent_of(path), prefix, mode).map_err(|error| wrap(error.source))?;
    file.write_all(bytes).map_err(wrap)?;
    file.commit(path, durability)
}

/// Replaces `path` with a symbolic link to `target`, the same way (a link is the user's: only
/// restores write one).
pub fn atomic_symlink(
    path: &Path,
    target: &OsStr,
    durability: Durability,
) -> Result<(), WriteError> {
    let wrap = |source| WriteError {
        path: path.to_owned(),
        source,
    };
    let dir = parent_of(path);
    let temp = tempfile::Builder::new()
        .prefix(USER_TEMP_PREFIX)
        .make_in(dir, |candidate| {
            std::os::unix::fs::symlink(target, candidate)
        })
        .map_err(wrap)?;
    temp.persist(path).map_err(|error| wrap(error.error))?;
    if durability == Durability::Synced {
        sync_dir(dir).map_err(wrap)?;
    }
    Ok(())
}

/// Makes a rename or a creation in `dir` durable: until the directory is synced, a power cut can
/// forget the new name even though the file's content reached the disk.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn replaces_content_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.json");
        atomic_write(&path, b"old", Durability::Synced).unwrap();
        atomic_write(&path, b"new", Durability::Unsynced).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(names_in(dir.path()), ["session.json"]);
        assert_eq!(mode_of(&path), PRIVATE_FILE_MODE);
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

    #[test]
    fn a_kept_mode_survives_the_umask_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("script.sh");
        replace_file(
            &path,
            b"#!/bin/sh\n",
            FileMode::Exactly(0o4777),
            Durability::Synced,
        )
        .unwrap();
        assert_eq!(mode_of(&path), 0o4777);
    }

    #[test]
    fn an_uncommitted_file_leaves_the_target_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        std::fs::write(&path, b"mine").unwrap();
        let mut file = AtomicFile::new_in(dir.path(), ".goals-", FileMode::FromUmask).unwrap();
        file.write_all(b"half").unwrap();
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap(), b"mine");
        assert_eq!(names_in(dir.path()), ["goals.md"]);
    }

    #[test]
    fn commit_new_never_replaces_a_file_that_appeared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("goals.md");
        let mut file = AtomicFile::new_in(dir.path(), ".goals-", FileMode::FromUmask).unwrap();
        file.write_all(b"ours").unwrap();
        std::fs::write(&path, b"theirs").unwrap();
        let error = file.commit_new(&path, Durability::Synced).unwrap_err();
        assert_eq!(error.source.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&path).unwrap(), b"theirs");
        assert_eq!(names_in(dir.path()), ["goals.md"]);
    }

    #[test]
    fn a_symlink_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("link");
        std::fs::write(dir.path().join("a"), b"a").unwrap();
        std::os::unix::fs::symlink("a", &path).unwrap();
        atomic_symlink(&path, OsStr::new("b"), Durability::Synced).unwrap();
        assert_eq!(std::fs::read_link(&path).unwrap(), Path::new("b"));
        assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), b"a");
        assert_eq!(names_in(dir.path()), ["a", "link"]);
    }
}
