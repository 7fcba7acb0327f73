//! `cwcoded`: the cwcode daemon.

use std::fs::{File, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use cwcode_protocol::client::EXIT_ALREADY_RUNNING;
use cwcode_protocol::paths::Paths;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The log file is rotated once it passes this size, so the daemon's logs stay bounded: at most
/// `LOG_FILES_KEPT + 1` files of this size.
const LOG_MAX_BYTES: u64 = 10 * 1024 * 1024;
const LOG_FILES_KEPT: u32 = 4;

/// The cwcode daemon: owns sessions, the agent loop, tools and provider connections, and serves
/// JSON-RPC on a Unix socket. Clients (cwcode, cwcode-cli, editors) start it on demand; run it
/// yourself to keep it in the foreground, e.g. under systemd.
///
/// Files live in $CWCODE_HOME (default ~/.cwcode); the socket is $CWCODE_SOCKET (default
/// $CWCODE_HOME/cwcoded.sock). The log is $CWCODE_HOME/logs/cwcoded.log (older ones
/// cwcoded.log.1 and up), and stderr in the foreground. RUST_LOG sets the log filter (default:
/// info). When the daemon cannot start, it also writes why to $CWCODE_HOME/cwcoded.start-error,
/// where the client that started it reads it.
#[derive(Debug, Parser)]
#[command(version, about, long_about)]
struct Args {
    /// Detach from the terminal's session and log only to the log file (what clients use when
    /// they start the daemon).
    #[arg(long)]
    background: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // First, while no other thread exists: taking systemd's socket unsets LISTEN_PID/LISTEN_FDS.
    let activated = match cwcoded::server::activation::inherited_listener() {
        Ok(activated) => activated,
        Err(error) => return fail(None, &StartFailure::unlogged(error.into())),
    };
    if args.background {
        // Not a process-group leader when a client spawns us, so this cannot fail; if it does,
        // we only lose protection from the terminal's hangup.
        let _ = rustix::process::setsid();
    }
    let paths = match Paths::from_env() {
        Ok(paths) => paths,
        Err(error) => return fail(None, &StartFailure::unlogged(error.into())),
    };
    // This attempt supersedes the last one's failure, whatever becomes of it.
    let _ = std::fs::remove_file(paths.start_error_file());
    match serve(&paths, activated, !args.background) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => fail(Some(&paths), &failure),
    }
}

/// Why the daemon did not start, and whether the log's stderr layer has shown it already.
struct StartFailure {
    error: anyhow::Error,
    on_stderr: bool,
}

impl StartFailure {
    fn unlogged(error: anyhow::Error) -> StartFailure {
        StartFailure {
            error,
            on_stderr: false,
        }
    }
}

fn serve(
    paths: &Paths,
    activated: Option<std::os::unix::net::UnixListener>,
    to_stderr: bool,
) -> Result<(), StartFailure> {
    std::fs::create_dir_all(paths.logs_dir())
        .with_context(|| format!("cannot create {}", paths.logs_dir().display()))
        .map_err(StartFailure::unlogged)?;
    let _log_guard = init_logging(paths, to_stderr).map_err(StartFailure::unlogged)?;
    start_and_run(paths.clone(), activated).map_err(|error| {
        tracing::error!("cwcoded cannot start: {error:#}");
        StartFailure {
            error,
            on_stderr: to_stderr,
        }
    })
}

fn start_and_run(
    paths: Paths,
    activated: Option<std::os::unix::net::UnixListener>,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(cwcoded::server::run(paths, activated))?;
    Ok(())
}

/// Says why the daemon stopped: on stderr, and, unless another daemon already serves this home
/// (the client waits for that one), in the start-error file the starting client reads.
fn fail(paths: Option<&Paths>, failure: &StartFailure) -> ExitCode {
    let error = &failure.error;
    let text = format!("{error:#}");
    if !failure.on_stderr {
        eprintln!("cwcoded: {text}");
    }
    let another_runs = error
        .downcast_ref::<cwcoded::server::ServeError>()
        .is_some_and(cwcoded::server::ServeError::is_already_running);
    if let Some(paths) = paths
        && !another_runs
        && let Err(write_error) = cwcoded::store::atomic_write(
            &paths.start_error_file(),
            format!("{text}\n").as_bytes(),
            cwcoded::store::Durability::Synced,
        )
    {
        eprintln!("cwcoded: {write_error}");
    }
    if another_runs {
        ExitCode::from(EXIT_ALREADY_RUNNING)
    } else {
        ExitCode::FAILURE
    }
}

fn init_logging(
    paths: &Paths,
    to_stderr: bool,
) -> anyhow::Result<tracing_appender::non_blocking::WorkerGuard> {
    let log_file = paths.log_file();
    let appender = RotatingLog::open(log_file.clone(), LOG_MAX_BYTES, LOG_FILES_KEPT)
        .with_context(|| format!("cannot open the log file {}", log_file.display()))?;
    let (file_writer, guard) = tracing_appender::non_blocking(appender);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let stderr_layer = to_stderr.then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(file_writer)
                .with_ansi(false),
        )
        .with(stderr_layer)
        .try_init()
        .context("cannot set up logging")?;
    Ok(guard)
}

/// A log at a fixed path, so the path a client prints is always the current log: past
/// `max_bytes` it becomes `NAME.1`, the older ones move up to `NAME.kept`, and the oldest is
/// dropped. The logging thread is its only writer.
struct RotatingLog {
    path: PathBuf,
    file: File,
    written: u64,
    max_bytes: u64,
    kept: u32,
}

impl RotatingLog {
    fn open(path: PathBuf, max_bytes: u64, kept: u32) -> io::Result<RotatingLog> {
        let file = open_log(&path)?;
        let written = file.metadata()?.len();
        Ok(RotatingLog {
            path,
            file,
            written,
            max_bytes,
            kept,
        })
    }

    fn numbered(&self, number: u32) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{number}"));
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> io::Result<()> {
        for number in (1..self.kept).rev() {
            match std::fs::rename(self.numbered(number), self.numbered(number + 1)) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                _ => {}
            }
        }
        if self.kept == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            std::fs::rename(&self.path, self.numbered(1))?;
        }
        self.file = open_log(&self.path)?;
        self.written = 0;
        Ok(())
    }
}

impl Write for RotatingLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let len = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        // A failed rotation (a full disk, say) must not lose the line: it goes to the old file.
        if self.written > 0 && self.written.saturating_add(len) > self.max_bytes {
            let _ = self.rotate();
        }
        let written = self.file.write(buf)?;
        self.written = self
            .written
            .saturating_add(u64::try_from(written).unwrap_or(u64::MAX));
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

fn open_log(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_its_name_and_rotates_within_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cwcoded.log");
        let mut log = RotatingLog::open(path.clone(), 100, 2).unwrap();
        for line in 0..30 {
            writeln!(log, "line {line:02} of the log, padded").unwrap();
        }
        log.flush().unwrap();
        let current = std::fs::read_to_string(&path).unwrap();
        assert!(
            current.ends_with("line 29 of the log, padded\n"),
            "{current}"
        );
        assert!(current.len() <= 100);
        assert!(dir.path().join("cwcoded.log.1").exists());
        assert!(dir.path().join("cwcoded.log.2").exists());
        assert!(!dir.path().join("cwcoded.log.3").exists());
        let previous = std::fs::read_to_string(dir.path().join("cwcoded.log.1")).unwrap();
        assert!(previous.contains("line 2"), "{previous}");
    }

    #[test]
    fn reopening_continues_the_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cwcoded.log");
        std::fs::write(&path, "x".repeat(90)).unwrap();
        let mut log = RotatingLog::open(path.clone(), 100, 1).unwrap();
        writeln!(log, "a line longer than ten bytes").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "a line longer than ten bytes\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("cwcoded.log.1")).unwrap(),
            "x".repeat(90)
        );
    }
}
