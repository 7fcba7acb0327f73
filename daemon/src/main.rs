//! `cwcoded`: the cwcode daemon.

use std::io::IsTerminal;

use anyhow::Context;
use clap::Parser;
use cwcode_protocol::paths::Paths;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The cwcode daemon: owns sessions, the agent loop, tools and provider connections, and serves
/// JSON-RPC on a Unix socket. Clients (cwcode, cwcode-cli, editors) start it on demand; run it
/// yourself to keep it in the foreground, e.g. under systemd.
///
/// Files live in $CWCODE_HOME (default ~/.cwcode); the socket is $CWCODE_SOCKET (default
/// $CWCODE_HOME/cwcoded.sock). Logs go to $CWCODE_HOME/logs/, and to stderr in the foreground.
/// RUST_LOG sets the log filter (default: info).
#[derive(Debug, Parser)]
#[command(version, about, long_about)]
struct Args {
    /// Detach from the terminal's session and log only to the log file (what clients use when
    /// they start the daemon).
    #[arg(long)]
    background: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // First, while no other thread exists: taking systemd's socket unsets LISTEN_PID/LISTEN_FDS.
    let activated = cwcoded::server::activation::inherited_listener()?;
    if args.background {
        // Not a process-group leader when a client spawns us, so this cannot fail; if it does,
        // we only lose protection from the terminal's hangup.
        let _ = rustix::process::setsid();
    }
    let paths = Paths::from_env()?;
    std::fs::create_dir_all(paths.logs_dir())
        .with_context(|| format!("cannot create {}", paths.logs_dir().display()))?;
    let _log_guard = init_logging(&paths, !args.background)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(cwcoded::server::run(paths, activated))?;
    Ok(())
}

fn init_logging(
    paths: &Paths,
    to_stderr: bool,
) -> anyhow::Result<tracing_appender::non_blocking::WorkerGuard> {
    let appender = tracing_appender::rolling::Builder::new()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("cwcoded.log")
        .max_log_files(7)
        .build(paths.logs_dir())
        .context("cannot open the log file")?;
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
