//! `cwcode`: the interactive client (SPEC §9). This first version works line by line on a plain
//! terminal; the full-screen ratatui interface replaces the drawing later, not the behaviour.

mod input;
mod printer;
mod render;
mod screen;

use std::io::{BufRead, IsTerminal};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Parser;
use cwcode_protocol::paths::Paths;
use cwcode_protocol::{Client, ConnectOptions, CreateSessionParams, Mode, SessionInfo};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc::{self, UnboundedReceiver};

use crate::input::{Exit, Repl, describe_error};
use crate::printer::Printer;
use crate::render::Style;
use crate::screen::Screen;

/// Talk to the cwcode agent about the code in the current directory.
///
/// Each run works in a session kept by the cwcoded daemon (started for you when it is not
/// running). Type a prompt and watch the answer, the tool calls and their output stream in;
/// changes wait for your approval in code mode. Type /help inside for the commands.
///
/// Detaching (Ctrl+D, /detach or /quit) leaves this program but not the session: a running turn
/// goes on in the daemon, its events are journalled, and a tool call that needs approval waits
/// for you. Attach again from any terminal to see everything that happened meanwhile.
///
/// Inside, end a line with \ to continue the prompt on the next one. Ctrl+C cancels the
/// running turn; pressed twice within 2 s while nothing runs, it quits (like /detach).
///
/// Examples:
///   cwcode                        new session here, in code mode
///   cwcode --mode plan            new session that may only read, to plan a change
///   cwcode --profile local        new session on another provider profile from config.json
///   cwcode --continue             back to the most recent session of this directory
///   cwcode --session 0198a1b2     attach to a session by id (a unique prefix is enough)
///   cwcode-cli ls                 list sessions (or /sessions inside cwcode)
#[derive(Debug, Parser)]
#[command(name = "cwcode", version, verbatim_doc_comment)]
struct Args {
    /// Attach to an existing session, printing its transcript first.
    #[arg(long, short = 's', value_name = "ID", conflicts_with_all = ["resume", "mode", "profile"])]
    session: Option<String>,
    /// Attach to the most recent session whose workspace is the current directory.
    #[arg(long = "continue", short = 'c', conflicts_with_all = ["mode", "profile"])]
    resume: bool,
    /// Mode of a new session: plan (read-only tools), code (ask before changes) or yolo (ask
    /// nothing). Change it later with /mode.
    #[arg(long, value_name = "MODE")]
    mode: Option<Mode>,
    /// Provider profile of a new session (default: default_profile in config.json).
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // One thread is plenty for one terminal; stdin is read on a thread of its own.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cwcode: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("cwcode: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let paths = Paths::from_env()?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let client = Client::connect(&ConnectOptions::new(paths))
        .await
        .map_err(|error| anyhow::anyhow!(describe_error(&error)))?;
    let client = Arc::new(client);
    let (info, attached) = open_session(&client, &args, &cwd).await?;

    let interactive = std::io::stdin().is_terminal();
    let style = Style {
        color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    println!("{}", render::header(&info, attached));
    if interactive {
        println!("{}", render::hint(style));
    }

    // Subscribe before the first prompt can be sent, so no event of it is missed. A new session
    // has no past; an attached one replays its whole journal as the transcript.
    let since = attached.then_some(0);
    let stream = client
        .subscribe(&info.id, since)
        .await
        .map_err(|error| anyhow::anyhow!(describe_error(&error)))?;
    let screen = Screen::new(Box::new(std::io::stdout()), style, interactive).shared();
    let (notices_tx, notices_rx) = mpsc::unbounded_channel();
    let printer = Printer {
        client: Arc::clone(&client),
        session_id: info.id.clone(),
        stream,
        replay_until: if attached { info.last_seq } else { 0 },
        screen: Arc::clone(&screen),
        notices: notices_tx,
    };
    tokio::spawn(printer.run());

    // Installed only now: until the session is open, Ctrl+C should simply stop the program.
    let interrupts = signal(SignalKind::interrupt()).context("cannot handle Ctrl+C")?;
    let repl = Repl::new(
        Arc::clone(&client),
        Arc::clone(&screen),
        info.id.clone(),
        info.mode,
        info.turns,
        interactive,
    );
    let exit = repl.run(read_stdin(), notices_rx, interrupts).await;
    // The last words must not land after a prompt that is still showing.
    crate::screen::lock(&screen).end_line();
    match exit {
        Exit::Detached => {
            println!("{}", render::detached(&info.id, &info.cwd));
            Ok(ExitCode::SUCCESS)
        }
        Exit::Lost(reason) => {
            eprintln!(
                "cwcode: {reason}\n  the session is kept: reattach with `cwcode --session {}` (this starts cwcoded again if needed)",
                info.id
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Creates or finds the session; true when attaching to an existing one.
async fn open_session(
    client: &Client,
    args: &Args,
    cwd: &Path,
) -> anyhow::Result<(SessionInfo, bool)> {
    let rpc = |error| anyhow::anyhow!(describe_error(&error));
    if let Some(id) = &args.session {
        return Ok((client.get_session(id).await.map_err(rpc)?, true));
    }
    if args.resume {
        let sessions = client.list_sessions().await.map_err(rpc)?;
        let Some(info) = most_recent_in(&sessions, cwd) else {
            bail!(
                "no session has {} as its workspace yet: run `cwcode` there to start one, or `cwcode --session ID` (see `cwcode-cli ls`)",
                cwd.display()
            );
        };
        return Ok((info.clone(), true));
    }
    let params = CreateSessionParams {
        cwd: cwd.display().to_string(),
        profile: args.profile.clone(),
        mode: args.mode,
        title: None,
    };
    Ok((client.create_session(&params).await.map_err(rpc)?, false))
}

/// The first (most recent, as `session/list` sorts them) session whose workspace is `cwd`. The
/// daemon stores workspaces canonicalised, so `cwd` is too, when it can be.
fn most_recent_in<'a>(sessions: &'a [SessionInfo], cwd: &Path) -> Option<&'a SessionInfo> {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_owned());
    sessions
        .iter()
        .find(|session| Path::new(&session.cwd) == cwd)
}

/// Reads stdin line by line on a plain thread, so the async side never blocks on the terminal.
/// A thread rather than `spawn_blocking`: the runtime waits for blocking tasks when it shuts
/// down, and this one may sit in `read` forever after the user detached.
fn read_stdin() -> UnboundedReceiver<std::io::Result<String>> {
    let (lines_tx, lines_rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            match stdin.read_until(b'\n', &mut buffer) {
                Ok(0) => return,
                Ok(_) => {
                    // Invalid UTF-8 is replaced rather than refused: one odd byte in a pasted
                    // prompt should not end the session.
                    let line = String::from_utf8_lossy(&buffer).into_owned();
                    if lines_tx.send(Ok(line)).is_err() {
                        return;
                    }
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    let _ = lines_tx.send(Err(error));
                    return;
                }
            }
        }
    });
    lines_rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use cwcode_protocol::SessionStatus;

    fn session(id: &str, cwd: &str) -> SessionInfo {
        SessionInfo {
            id: id.to_owned(),
            title: String::new(),
            cwd: cwd.to_owned(),
            profile: "p".to_owned(),
            mode: Mode::Code,
            status: SessionStatus::Idle,
            created: String::new(),
            updated: String::new(),
            turns: 0,
            last_seq: 0,
        }
    }

    #[test]
    fn continue_picks_the_most_recent_session_of_this_directory() {
        let dir = canonical_temp_dir();
        let here = dir.to_string_lossy().into_owned();
        let sessions = [
            session("newest-elsewhere", "/somewhere/else"),
            session("recent-here", &here),
            session("older-here", &here),
        ];
        let found = most_recent_in(&sessions, &dir).map(|info| info.id.as_str());
        assert_eq!(found, Some("recent-here"));
        // A non-canonical spelling of the same directory matches too.
        let dotted = dir.join(".");
        let found = most_recent_in(&sessions, &dotted).map(|info| info.id.as_str());
        assert_eq!(found, Some("recent-here"));
        assert!(most_recent_in(&sessions[..1], &dir).is_none());
    }

    /// The canonical temporary directory (on macOS /tmp is a symlink).
    fn canonical_temp_dir() -> std::path::PathBuf {
        std::env::temp_dir().canonicalize().unwrap()
    }

    #[test]
    fn arguments_parse() {
        let args =
            Args::try_parse_from(["cwcode", "--mode", "plan", "--profile", "local"]).unwrap();
        assert_eq!(args.mode, Some(Mode::Plan));
        assert_eq!(args.profile.as_deref(), Some("local"));
        let args = Args::try_parse_from(["cwcode", "--continue"]).unwrap();
        assert!(args.resume);
        let args = Args::try_parse_from(["cwcode", "--session", "0198"]).unwrap();
        assert_eq!(args.session.as_deref(), Some("0198"));
        // Mode and profile only shape a new session; attaching with them is refused, not ignored.
        assert!(Args::try_parse_from(["cwcode", "--session", "x", "--mode", "yolo"]).is_err());
        assert!(Args::try_parse_from(["cwcode", "--continue", "--profile", "p"]).is_err());
        assert!(Args::try_parse_from(["cwcode", "--mode", "fast"]).is_err());
    }
}
