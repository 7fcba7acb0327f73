//! One daemon per home: the home directory (0700), the exclusive lock, the pid file, and a
//! socket file that is cleaned up on exit and recovered when a crashed daemon left it behind.

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use cwcode_protocol::paths::Paths;
use rustix::fs::{FlockOperation, flock};

use crate::store::{Durability, atomic_write};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "cwcoded is already running for {home} (pid {pid}); stop it with `cwcode-cli daemon stop`"
    )]
    AlreadyRunning { home: PathBuf, pid: String },
    #[error("cannot prepare {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> StartError + '_ {
    move |source| StartError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Held for the daemon's life; dropping it removes the socket and pid files, then releases the
/// lock.
pub struct Instance {
    _lock: File,
    pid_file: PathBuf,
    /// The socket file to remove on exit; `None` when systemd owns it (socket activation).
    socket: Option<PathBuf>,
}

impl Instance {
    /// `owns_socket` is false under socket activation: the socket file is systemd's, so it is
    /// neither removed as stale here nor on exit.
    pub fn acquire(paths: &Paths, owns_socket: bool) -> Result<Self, StartError> {
        create_private_dir(&paths.home)?;
        create_private_dir(&paths.logs_dir())?;
        create_private_dir(&paths.sessions_dir())?;
        let lock_path = paths.lock_file();
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_error(&lock_path))?;
        if flock(&lock, FlockOperation::NonBlockingLockExclusive).is_err() {
            let pid = std::fs::read_to_string(paths.pid_file())
                .map(|pid| pid.trim().to_owned())
                .unwrap_or_else(|_| "unknown".to_owned());
            return Err(StartError::AlreadyRunning {
                home: paths.home.clone(),
                pid,
            });
        }
        // We hold the lock, so a socket file left here belongs to a daemon that died.
        if owns_socket {
            match std::fs::remove_file(&paths.socket) {
                Ok(()) => {
                    tracing::info!(socket = %paths.socket.display(), "removed a stale socket");
                }
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(io_error(&paths.socket)(error)),
            }
        }
        let pid_file = paths.pid_file();
        // Unsynced: after a power cut no daemon runs, and the lock, not this file, says so.
        atomic_write(
            &pid_file,
            format!("{}\n", std::process::id()).as_bytes(),
            Durability::Unsynced,
        )
        .map_err(|error| io_error(&pid_file)(error.source))?;
        Ok(Self {
            _lock: lock,
            pid_file,
            socket: owns_socket.then(|| paths.socket.clone()),
        })
    }

    pub fn owns_socket(&self) -> bool {
        self.socket.is_some()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(socket) = &self.socket {
            let _ = std::fs::remove_file(socket);
        }
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

/// Creates a directory only its owner can enter, and tightens an existing one.
fn create_private_dir(path: &Path) -> Result<(), StartError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(io_error(path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).map_err(io_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_instance_is_refused_and_files_are_cleaned_up() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path().join("home"), None);
        let first = Instance::acquire(&paths, true).unwrap();
        let mode = std::fs::metadata(&paths.home).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let error = Instance::acquire(&paths, true).err().unwrap();
        assert!(error.to_string().contains("already running"), "{error}");
        drop(first);
        assert!(!paths.pid_file().exists());
        Instance::acquire(&paths, true).unwrap();
    }

    #[test]
    fn a_stale_socket_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path().join("home"), None);
        std::fs::create_dir_all(&paths.home).unwrap();
        std::fs::write(&paths.socket, b"").unwrap();
        let _instance = Instance::acquire(&paths, true).unwrap();
        assert!(!paths.socket.exists());
    }
}
