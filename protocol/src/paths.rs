//! Where cwcode keeps its files (SPEC §3). `CWCODE_HOME` overrides the home, `CWCODE_SOCKET` the
//! socket; both the daemon and every client resolve them here so they always agree.

use std::path::{Path, PathBuf};

pub const HOME_ENV: &str = "CWCODE_HOME";
pub const SOCKET_ENV: &str = "CWCODE_SOCKET";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    pub home: PathBuf,
    pub socket: PathBuf,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot find the cwcode home: set CWCODE_HOME or HOME")]
pub struct NoHome;

impl Paths {
    /// Resolves the paths from the environment: `CWCODE_HOME`, else `$HOME/.cwcode`.
    pub fn from_env() -> Result<Self, NoHome> {
        let home = match std::env::var_os(HOME_ENV).filter(|value| !value.is_empty()) {
            Some(home) => PathBuf::from(home),
            None => std::env::var_os("HOME")
                .filter(|value| !value.is_empty())
                .map(|home| PathBuf::from(home).join(".cwcode"))
                .ok_or(NoHome)?,
        };
        let socket = std::env::var_os(SOCKET_ENV)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from);
        Ok(Self::new(home, socket))
    }

    pub fn new(home: PathBuf, socket: Option<PathBuf>) -> Self {
        let socket = socket.unwrap_or_else(|| home.join("cwcoded.sock"));
        Self { home, socket }
    }

    pub fn config(&self) -> PathBuf {
        self.home.join("config.json")
    }

    pub fn pid_file(&self) -> PathBuf {
        self.home.join("cwcoded.pid")
    }

    pub fn lock_file(&self) -> PathBuf {
        self.home.join("cwcoded.lock")
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.home.join("logs")
    }

    /// The daemon's current log; older ones are `cwcoded.log.1` (the newest) and up.
    pub fn log_file(&self) -> PathBuf {
        self.logs_dir().join("cwcoded.log")
    }

    /// Why the last daemon start failed, for the client that started it; removed by the next
    /// start.
    pub fn start_error_file(&self) -> PathBuf {
        self.home.join("cwcoded.start-error")
    }

    /// The notes of `remember`/`recall` (SQLite).
    pub fn memory_db(&self) -> PathBuf {
        self.home.join("memory.db")
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.home.join("sessions")
    }

    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.sessions_dir().join(id)
    }

    pub fn home(&self) -> &Path {
        &self.home
    }
}
