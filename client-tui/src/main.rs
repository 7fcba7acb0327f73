//! `cwcode`: the terminal client (SPEC §9). A full-screen ratatui interface on one session of
//! the cwcoded daemon: it draws the session's events as they stream, sends prompts, answers
//! approvals, and leaves the session running when it detaches.
//!
//! Three parts never wait on each other: the daemon task ([`daemon`]) owns the connection; the
//! state ([`app::App`]) changes on keys and replies; drawing ([`ui`]) happens at most once a
//! frame, and only when something changed.

mod app;
mod commands;
mod custom;
mod daemon;
mod diff;
mod editor;
#[cfg(test)]
mod fixtures;
mod format;
mod highlight;
mod markdown;
mod mentions;
mod picker;
mod reports;
mod rewind;
mod setup;
mod shell;
mod terminal;
mod transcript;
mod ui;
mod wrap;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use crossterm::event::{Event as TermEvent, EventStream, MouseEventKind};
use cwcode_protocol::paths::Paths;
use cwcode_protocol::{ConnectOptions, Mode};
use futures::StreamExt;
use tokio::signal::unix::{SignalKind, signal};

use crate::app::{App, Exit, Startup};
use crate::custom::CustomCommands;
use crate::terminal::Tui;

/// The shortest time between two frames: streamed text arrives faster than anyone reads it.
const FRAME: Duration = Duration::from_millis(16);
/// How often the elapsed time of a running turn is redrawn.
const CLOCK: Duration = Duration::from_millis(500);

/// Talk to the cwcode agent about the code in the current directory.
///
/// Each run works in a session kept by the cwcoded daemon (started for you when it is not
/// running). Type a prompt and watch the answer, the tool calls and their output stream in;
/// changes wait for your approval in code mode. Type /help inside for keys and commands.
///
/// Detaching (/detach, Ctrl+D, or Ctrl+C twice) leaves this program but not the session: a
/// running turn goes on in the daemon, and a tool call that needs approval waits for you.
/// Attach again from any terminal to see everything that happened meanwhile; several
/// terminals may watch one session at once.
///
/// Examples:
///   cwcode                        pick a session of this directory, or start one
///   cwcode --new --mode plan      new session that may only read, to plan a change
///   cwcode --new --profile local  new session on another provider profile from config.json
///   cwcode --continue             back to the most recent session of this directory
///   cwcode --session 0198a1b2     attach to a session by id (a unique prefix is enough)
#[derive(Debug, Parser)]
#[command(name = "cwcode", version, verbatim_doc_comment)]
struct Args {
    /// Attach to an existing session; its whole transcript is shown first.
    #[arg(long, short = 's', value_name = "ID", conflicts_with_all = ["resume", "new", "mode", "profile"])]
    session: Option<String>,
    /// Attach to the most recent session whose workspace is the current directory.
    #[arg(long = "continue", short = 'c', conflicts_with_all = ["new", "mode", "profile"])]
    resume: bool,
    /// Start a new session even when this directory has some.
    #[arg(long, short = 'n')]
    new: bool,
    /// Mode of a new session: plan (read-only tools), code (ask before changes) or yolo (ask
    /// nothing). Implies --new. Shift+Tab changes it inside.
    #[arg(long, value_name = "MODE")]
    mode: Option<Mode>,
    /// Provider profile of a new session (default: default_profile in config.json). Implies
    /// --new.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
}

impl Args {
    fn startup(&self) -> Startup {
        if let Some(id) = &self.session {
            Startup::Session(id.clone())
        } else if self.resume {
            Startup::Continue
        } else if self.new || self.mode.is_some() || self.profile.is_some() {
            Startup::New
        } else {
            Startup::Choose
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    // One thread is plenty for one terminal, and starts fastest.
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
        Ok(Exit::Detached(session)) => {
            println!(
                "detached: session {id} keeps running in cwcoded\n  reattach with `cwcode --session {id}` (or `cwcode --continue` in {cwd})",
                id = session.id,
                cwd = session.cwd
            );
            ExitCode::SUCCESS
        }
        Ok(Exit::Quit) => ExitCode::SUCCESS,
        Ok(Exit::Failed(message)) => {
            eprintln!("cwcode: {message}");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("cwcode: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<Exit> {
    let paths = Paths::from_env()?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    // The daemon stores workspaces canonicalised; comparing needs the same spelling.
    let cwd = cwd.canonicalize().unwrap_or(cwd).display().to_string();
    let mut app = App::new(cwd.clone(), args.startup(), args.profile.clone(), args.mode);
    let home = paths.home.clone();
    let mut tui = Tui::enter()
        .context("cannot set up the terminal (cwcode needs one; scripts use cwcode-cli)")?;
    let (requests, mut replies) = daemon::spawn(ConnectOptions::new(paths));
    // Read while the daemon task connects; a few small files, but files all the same.
    app.custom = tokio::task::spawn_blocking(move || CustomCommands::load(Path::new(&cwd), &home))
        .await
        .context("cannot read the custom commands")?;

    // The files `@` completes: walked off the async workers, there when the walk is done.
    let walk_root = PathBuf::from(&app.cwd);
    let mut files = Some(tokio::task::spawn_blocking(move || {
        mentions::list_files(&walk_root)
    }));

    // The grammars unpack while the daemon task connects, before the first code block.
    tokio::task::spawn_blocking(highlight::warm_up);

    let mut input = EventStream::new();
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut hangup = signal(SignalKind::hangup()).context("cannot handle SIGHUP")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut clock = tokio::time::interval(CLOCK);
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if dirty && last_draw.is_none_or(|at| now.duration_since(at) >= FRAME) {
            tui.terminal
                .draw(|frame| ui::draw(frame, &mut app, now))
                .context("cannot draw")?;
            last_draw = Some(now);
            dirty = false;
        }
        for request in app.outbox.drain(..) {
            // The task only stops when this loop drops its channel.
            let _ = requests.send(request);
        }
        if let Some(exit) = app.exit.take() {
            return Ok(exit);
        }
        let next_frame = last_draw.map_or(now, |at| at + FRAME);
        tokio::select! {
            event = input.next() => match event {
                Some(Ok(event)) => {
                    if worth_handling(&event) {
                        app.on_terminal(event, Instant::now());
                        dirty = true;
                    }
                }
                Some(Err(error)) => return Err(error).context("cannot read the terminal"),
                // The terminal is gone: leave the session as a detach would.
                None => return Ok(leave(&app)),
            },
            reply = replies.recv() => match reply {
                Some(reply) => {
                    app.on_reply(reply, Instant::now());
                    dirty = true;
                }
                None => anyhow::bail!("the connection task stopped"),
            },
            walked = async { files.as_mut()?.await.ok() }, if files.is_some() => {
                files = None;
                app.files = walked.unwrap_or_default();
            }
            _ = clock.tick(), if app.busy() => dirty = true,
            () = tokio::time::sleep_until(next_frame.into()), if dirty => {}
            _ = terminate.recv() => return Ok(leave(&app)),
            _ = hangup.recv() => return Ok(leave(&app)),
            _ = interrupt.recv() => return Ok(leave(&app)),
        }
    }
}

/// Of the mouse only the wheel matters: a click changes nothing, so it costs no frame.
fn worth_handling(event: &TermEvent) -> bool {
    match event {
        TermEvent::Mouse(mouse) => matches!(
            mouse.kind,
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown
        ),
        TermEvent::FocusGained | TermEvent::FocusLost => false,
        _ => true,
    }
}

fn leave(app: &App) -> Exit {
    app.leaving()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_choose_how_the_session_is_found() {
        let startup = |args: &[&str]| Args::try_parse_from(args).unwrap().startup();
        assert_eq!(startup(&["cwcode"]), Startup::Choose);
        assert_eq!(startup(&["cwcode", "--new"]), Startup::New);
        assert_eq!(startup(&["cwcode", "--mode", "plan"]), Startup::New);
        assert_eq!(startup(&["cwcode", "--profile", "local"]), Startup::New);
        assert_eq!(startup(&["cwcode", "--continue"]), Startup::Continue);
        assert_eq!(
            startup(&["cwcode", "--session", "0198"]),
            Startup::Session("0198".to_owned())
        );
    }

    #[test]
    fn attaching_refuses_flags_that_only_shape_a_new_session() {
        for args in [
            &["cwcode", "--session", "x", "--mode", "yolo"][..],
            &["cwcode", "--continue", "--profile", "p"],
            &["cwcode", "--continue", "--new"],
            &["cwcode", "--mode", "fast"],
        ] {
            assert!(Args::try_parse_from(args).is_err(), "{args:?}");
        }
    }
}
