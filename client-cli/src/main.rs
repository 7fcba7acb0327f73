//! `cwcode-cli`: the scripting surface of cwcode (SPEC §9).

mod acp;
mod exit;
mod render;
mod verbs;

use std::process::ExitCode;
use std::time::Duration;

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
///   cwcode-cli run --allow bash:"cargo test*" --allow edit_lines "make the tests pass"
///   cwcode-cli wait "$id" --for approval --timeout 10m
#[derive(Debug, Parser)]
#[command(name = "cwcode-cli", version, verbatim_doc_comment, after_help = exit::HELP)]
struct Cli {
    /// Machine-readable output: JSON, one object per line for streams; errors as JSON on stderr.
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
        /// A name for the session in `ls` and the TUI's picker.
        #[arg(long)]
        title: Option<String>,
    },
    /// List sessions, most recent first.
    Ls,
    /// Show one session's metadata.
    Show {
        /// The session's id (see `ls`).
        id: String,
    },
    /// Send a prompt. `-` reads it from stdin.
    Send {
        /// The session's id (see `ls`).
        id: String,
        /// The prompt; `-` reads it from stdin. An empty one is refused.
        text: String,
        /// Stream the answer and tool activity, and exit when the turn ends.
        #[arg(long)]
        wait: bool,
    },
    /// Cancel the running turn.
    Cancel {
        /// The session's id (see `ls`).
        id: String,
    },
    /// Print a session's events, the whole transcript on stdout; with --follow keep streaming
    /// live ones (exit 5 when the daemon goes away).
    Events {
        /// The session's id (see `ls`).
        id: String,
        /// Only events after this sequence number (default: all).
        #[arg(long, default_value_t = 0)]
        since: u64,
        /// Keep streaming live events until interrupted.
        #[arg(long)]
        follow: bool,
    },
    /// A one-shot run for scripts and CI: create a session, send PROMPT, stream the turn and
    /// exit with its code (see Exit codes). It never waits forever: an approval request is
    /// approved once when an --allow rule matches it; otherwise it may be answered from
    /// elsewhere (`cwcode-cli approve`) within --timeout, after which the turn is cancelled and
    /// the run exits 7. Ctrl+C cancels the turn (exit 130). With --json the first line is
    /// `{"type":"session_created","session":{…}}`, then one event per line.
    Run {
        /// Workspace directory (default: the current directory).
        #[arg(long)]
        cwd: Option<std::path::PathBuf>,
        /// plan (read-only tools), code (ask before changes) or yolo (ask nothing).
        #[arg(long)]
        mode: Option<Mode>,
        /// Provider profile from config.json (default: its default_profile).
        #[arg(long)]
        profile: Option<String>,
        /// How long an approval request may go unanswered: 500ms, 30s, 5m, 1h.
        #[arg(long, default_value = "2m", value_parser = verbs::parse_duration)]
        timeout: Duration,
        /// Approve calls matching TOOL[:PATTERN], repeatable: `--allow edit_lines` approves every
        /// edit_lines call, `--allow bash:"cargo test*"` bash commands matching the glob (its
        /// `*` never spans `; & | < > $ \` ( )` or a line break), `--allow write_file:"src/*"`
        /// the file tools by path.
        #[arg(long, value_name = "TOOL[:PATTERN]")]
        allow: Vec<cwcode_protocol::AllowRule>,
        /// The prompt; `-` reads it from stdin. An empty one is refused.
        prompt: String,
    },
    /// Block until the session asks for an approval (one already waiting counts; it is
    /// printed), is idle, or its goal loop is not running; exit 0 then, 7 after --timeout,
    /// 5 if the daemon goes away.
    Wait {
        /// The session's id (see `ls`).
        id: String,
        /// What to wait for.
        #[arg(long = "for", value_enum)]
        target: verbs::wait::Target,
        /// Give up after this long (default: wait as long as it takes): 30s, 5m, 1h.
        #[arg(long, value_parser = verbs::parse_duration)]
        timeout: Option<Duration>,
    },
    /// The session's todo list, as the model last wrote it.
    Todo {
        /// The session's id (see `ls`).
        id: String,
    },
    /// Approve a pending tool call.
    Approve {
        /// The session's id (see `ls`).
        id: String,
        /// The request id from the approval request (`r1`, …; see `events` or `wait`).
        request: String,
        /// Also approve every later call of the same tool in this session.
        #[arg(long)]
        always: bool,
        /// With --always, only later calls matching this glob: the command of bash (`*` never
        /// spans `; & | < > $ \` ( )`), the path of a file tool. The request shows one to use.
        #[arg(long, requires = "always", value_name = "GLOB")]
        pattern: Option<String>,
    },
    /// Deny a pending tool call; the model is told, with your reason.
    Deny {
        /// The session's id (see `ls`).
        id: String,
        /// The request id from the approval request (`r1`, …; see `events` or `wait`).
        request: String,
        /// What to tell the model about why, so it can do otherwise.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Set a session's mode: plan, code or yolo.
    Mode {
        /// The session's id (see `ls`).
        id: String,
        /// plan (read-only tools), code (ask before changes) or yolo (ask nothing).
        mode: Mode,
    },
    /// Without N, list the checkpoints (one per prompt, with the files it changed). With N,
    /// restore every file to its state before prompt N (files created since are removed,
    /// deleted ones come back), cut the history back to before it, and print prompt N's text.
    /// `--undo` reverts the last rewind, until the next prompt.
    Rewind {
        /// The session's id (see `ls`).
        id: String,
        /// The prompt to rewind to before (its number in the checkpoint list).
        turn: Option<u32>,
        /// Revert the last rewind.
        #[arg(long, conflicts_with = "turn")]
        undo: bool,
    },
    /// The goal loop: goals are `- [ ]` lines in the workspace's goals.md; `on` runs turns until
    /// every box is checked, the cap of cycles is reached, the storm-breaker fires, a budget is
    /// spent or you say `off`. It lives in the daemon: close every client and it goes on.
    Goal {
        /// The session's id (see `ls`).
        id: String,
        #[command(subcommand)]
        action: GoalAction,
    },
    /// Prompt-cache figures per turn: prompt and cached tokens, hit ratio, and how many bytes of
    /// each request repeat the one before (the sticky prefix).
    Cache {
        /// The session's id (see `ls`).
        id: String,
    },
    /// Summarise the session's older turns into one message to free context; runs after any
    /// queued turns and shows in `events` as `compacted`.
    Compact {
        /// The session's id (see `ls`).
        id: String,
    },
    /// What the session cost so far, priced with its profile's `pricing` table.
    Cost {
        /// The session's id (see `ls`).
        id: String,
    },
    /// Switch a session's provider profile (see `profiles`); the next request uses it.
    Profile {
        /// The session's id (see `ls`).
        id: String,
        /// A profile name from `profiles`.
        profile: String,
    },
    /// Delete a session and its files.
    Rm {
        /// The session's id (see `ls`).
        id: String,
    },
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
        /// The method's name, `resource/verb` (the daemon's API, SPEC §4).
        method: String,
        /// The params as one JSON object (default: none).
        params: Option<String>,
    },
    /// Serve the Agent Client Protocol (version 1) on stdin/stdout for an editor (Zed,
    /// JetBrains, Neovim, Emacs, acpx): its sessions are ordinary cwcode sessions.
    Acp,
    #[command(flatten)]
    Memory(verbs::memory::MemoryCommand),
}

#[derive(Debug, Subcommand)]
enum GoalAction {
    /// Append `- [ ] TEXT` to goals.md.
    Add {
        /// The goal, one line.
        text: String,
    },
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
        /// Stop after this many hours of wall-clock time (0.5 is half an hour).
        #[arg(long)]
        hours: Option<f64>,
        /// Run without config.json's default budgets (the cap still applies).
        #[arg(long, conflicts_with_all = ["tokens", "cost", "hours"])]
        no_budget: bool,
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
        /// The profile whose key it is (see `profiles`).
        profile: String,
        /// The key; without it, read from stdin.
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage_error(&error),
    };
    let json = cli.json;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            return exit::report(
                &anyhow::anyhow!("cannot start the async runtime: {error}"),
                json,
            );
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => exit::report(&error, json),
    }
}

/// Help and version go to stdout as usual; a bad command line is an error, in JSON when
/// `--json` is among the arguments.
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let wants_json = std::env::args_os().any(|argument| argument == "--json");
    let is_help = matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if is_help || !wants_json {
        let _ = error.print();
        return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(exit::USAGE));
    }
    let rendered = error.render().to_string();
    let message = rendered.trim().trim_start_matches("error: ").to_owned();
    exit::report(&exit::UsageError(message).into(), true)
}

/// Calls the one function that does what the command line asks.
async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let json = cli.json;
    match cli.command {
        Command::Acp => acp::serve().await.map(|()| ExitCode::SUCCESS),
        Command::Daemon { action } => match action {
            DaemonAction::Start => verbs::daemon::start(json).await,
            DaemonAction::Stop => verbs::daemon::stop(json).await,
            DaemonAction::Status => verbs::daemon::status(json).await,
        },
        Command::Memory(command) => verbs::memory::run(command, json).await,
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
        Command::Run {
            cwd,
            mode,
            profile,
            timeout,
            allow,
            prompt,
        } => {
            let request = verbs::run::RunRequest {
                cwd,
                mode,
                profile,
                timeout,
                allow,
                prompt,
            };
            verbs::run::run(request, json).await
        }
        Command::Wait {
            id,
            target,
            timeout,
        } => verbs::wait::wait(&id, target, timeout, json).await,
        Command::Todo { id } => verbs::turns::todo(&id, json).await,
        Command::Approve {
            id,
            request,
            always,
            pattern,
        } => verbs::turns::approve(&id, request, always, pattern, json).await,
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
            GoalAction::On {
                cap,
                tokens,
                cost,
                hours,
                no_budget,
            } => {
                let budget = verbs::goal::Budget {
                    tokens,
                    cost,
                    hours,
                    none: no_budget,
                };
                verbs::goal::on(&id, cap, budget, json).await
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every argument of every command says in `--help` what it is.
    #[test]
    fn every_argument_has_a_help_line() {
        fn undocumented(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for argument in command.get_arguments() {
                let builtin = ["help", "version"].contains(&argument.get_id().as_str());
                if !builtin && argument.get_help().is_none() {
                    missing.push(format!("{path} {}", argument.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                if sub.get_about().is_none() {
                    missing.push(format!("{path} {} (the command itself)", sub.get_name()));
                }
                undocumented(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        undocumented(&Cli::command(), "cwcode-cli", &mut missing);
        assert!(missing.is_empty(), "no help line: {missing:#?}");
    }
}
