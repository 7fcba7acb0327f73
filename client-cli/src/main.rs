//! `cwcode-cli`: the scripting surface of cwcode (SPEC §9).

mod render;
mod verbs;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cwcode_protocol::Mode;

/// Drive cwcode sessions from the shell and from scripts.
///
/// Every command talks to the cwcoded daemon on its Unix socket and starts it when it is not
/// running. Sessions keep running when this program exits: attach again with `events --follow`.
///
/// Examples:
///   id=$(cwcode-cli new --cwd . --mode yolo)
///   cwcode-cli send "$id" "run the tests and fix what fails" --wait
///   echo "explain src/main.rs" | cwcode-cli send "$id" - --wait
///   cwcode-cli events "$id" --since 0 --json | jq .type
///
/// Exit codes: 0 success; 1 error; 2 bad usage; with `send --wait`: 3 the turn failed,
/// 4 it was cancelled, 5 the daemon stopped during it, 6 the storm-breaker stopped a loop of
/// identical failing calls.
#[derive(Debug, Parser)]
#[command(name = "cwcode-cli", version, verbatim_doc_comment)]
struct Cli {
    /// Machine-readable output: JSON, one object per line for streams.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start, stop or inspect the daemon.
    Daemon {
        #[command(subcommand)]
        action: DaemonAction,
    },
    /// Create a session and print its id.
    New {
        /// Workspace directory (default: the current directory).
        #[arg(long)]
        cwd: Option<std::path::PathBuf>,
        /// Provider profile from config.json (default: its default_profile).
        #[arg(long)]
        profile: Option<String>,
        /// plan (read-only tools), code (ask before changes) or yolo (ask nothing).
        #[arg(long)]
        mode: Option<Mode>,
        #[arg(long)]
        title: Option<String>,
    },
    /// List sessions, most recent first.
    Ls,
    /// Show one session's metadata.
    Show { id: String },
    /// Send a prompt. `-` reads it from stdin.
    Send {
        id: String,
        text: String,
        /// Stream the answer and tool activity, and exit when the turn ends.
        #[arg(long)]
        wait: bool,
    },
    /// Cancel the running turn.
    Cancel { id: String },
    /// Print a session's events; with --follow keep streaming live ones.
    Events {
        id: String,
        /// Only events after this sequence number (default: all).
        #[arg(long, default_value_t = 0)]
        since: u64,
        #[arg(long)]
        follow: bool,
    },
    /// Approve a pending tool call.
    Approve {
        id: String,
        request: String,
        /// Also approve every later call of the same tool in this session.
        #[arg(long)]
        always: bool,
    },
    /// Deny a pending tool call; the model is told, with your reason.
    Deny {
        id: String,
        request: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Set a session's mode: plan, code or yolo.
    Mode { id: String, mode: Mode },
    /// Without N, list the checkpoints (one per prompt, with the files it changed). With N,
    /// restore every file to its state before prompt N (files created since are removed,
    /// deleted ones come back), cut the history back to before it, and print prompt N's text.
    /// `--undo` reverts the last rewind, until the next prompt.
    Rewind {
        id: String,
        turn: Option<u32>,
        #[arg(long, conflicts_with = "turn")]
        undo: bool,
    },
    /// The goal loop: goals are `- [ ]` lines in the workspace's goals.md; `on` runs turns until
    /// every box is checked, the cap of cycles is reached, the storm-breaker fires, a budget is
    /// spent or you say `off`. It lives in the daemon: close every client and it goes on.
    Goal {
        id: String,
        #[command(subcommand)]
        action: GoalAction,
    },
    /// Prompt-cache figures per turn: prompt and cached tokens, hit ratio, and how many bytes of
    /// each request repeat the one before (the sticky prefix).
    Cache { id: String },
    /// Summarise the session's older turns into one message to free context; runs after any
    /// queued turns and shows in `events` as `compacted`.
    Compact { id: String },
    /// What the session cost so far, priced with its profile's `pricing` table.
    Cost { id: String },
    /// Switch a session's provider profile (see `profiles`); the next request uses it.
    Profile { id: String, profile: String },
    /// Delete a session and its files.
    Rm { id: String },
    /// Check the setup: daemon files and permissions, configuration, default profile and key,
    /// and what the sandbox can enforce here. Exits 1 when something needs fixing.
    Doctor,
    /// List provider profiles (keys are never shown).
    Profiles,
    /// Change the configuration.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Call any API method with raw JSON params, e.g. `rpc session/list` or
    /// `rpc session/get '{"sessionId":"…"}'`.
    Rpc {
        method: String,
        params: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum GoalAction {
    /// Append `- [ ] TEXT` to goals.md.
    Add { text: String },
    /// Start the loop.
    On {
        /// Most consecutive cycles (default 20).
        #[arg(long)]
        cap: Option<u32>,
        /// Stop after this many prompt plus completion tokens.
        #[arg(long)]
        tokens: Option<u64>,
        /// Stop after this cost, priced with the profile's table.
        #[arg(long)]
        cost: Option<f64>,
    },
    /// Stop the loop; a cycle in flight is cancelled.
    Off,
    /// State, cycle count, goals done and left, tokens, cost and why it stopped.
    Status,
}

#[derive(Debug, Subcommand)]
enum ConfigAction {
    /// Store a profile's API key in config.json (mode 0600). Without KEY it is read from stdin,
    /// which keeps it out of your shell history: `cwcode-cli config set-key deepseek-v4-pro`.
    SetKey {
        profile: String,
        key: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum DaemonAction {
    /// Start the daemon if it is not running.
    Start,
    /// Stop the daemon; running turns are interrupted and resume nothing by themselves.
    Stop,
    /// Say whether the daemon is running, with its pid and socket.
    Status,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cwcode-cli: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("cwcode-cli: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Calls the one function that does what the command line asks.
async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let json = cli.json;
    match cli.command {
        Command::Daemon { action } => match action {
            DaemonAction::Start => verbs::daemon::start(json).await,
            DaemonAction::Stop => verbs::daemon::stop(json).await,
            DaemonAction::Status => verbs::daemon::status(json).await,
        },
        Command::New {
            cwd,
            profile,
            mode,
            title,
        } => verbs::sessions::new(cwd, profile, mode, title, json).await,
        Command::Ls => verbs::sessions::ls(json).await,
        Command::Show { id } => verbs::sessions::show(&id, json).await,
        Command::Send { id, text, wait } => verbs::turns::send(&id, text, wait, json).await,
        Command::Cancel { id } => verbs::turns::cancel(&id, json).await,
        Command::Events { id, since, follow } => {
            verbs::turns::events(&id, since, follow, json).await
        }
        Command::Approve {
            id,
            request,
            always,
        } => verbs::turns::approve(&id, request, always, json).await,
        Command::Deny {
            id,
            request,
            reason,
        } => verbs::turns::deny(&id, request, reason, json).await,
        Command::Mode { id, mode } => verbs::sessions::mode(&id, mode, json).await,
        Command::Cache { id } => verbs::history::cache(&id, json).await,
        Command::Rewind { id, turn, undo } => verbs::history::rewind(&id, turn, undo, json).await,
        Command::Goal { id, action } => match action {
            GoalAction::Add { text } => verbs::goal::add(&id, &text, json).await,
            GoalAction::On { cap, tokens, cost } => {
                verbs::goal::on(&id, cap, tokens, cost, json).await
            }
            GoalAction::Off => verbs::goal::off(&id, json).await,
            GoalAction::Status => verbs::goal::status(&id, json).await,
        },
        Command::Compact { id } => verbs::history::compact(&id, json).await,
        Command::Cost { id } => verbs::history::cost(&id, json).await,
        Command::Profile { id, profile } => verbs::sessions::profile(&id, &profile, json).await,
        Command::Rm { id } => verbs::sessions::rm(&id, json).await,
        Command::Doctor => verbs::setup::doctor(json).await,
        Command::Profiles => verbs::sessions::profiles(json).await,
        Command::Config {
            action: ConfigAction::SetKey { profile, key },
        } => verbs::setup::set_key(&profile, key, json).await,
        Command::Rpc { method, params } => verbs::setup::rpc(&method, params, json).await,
    }
}
