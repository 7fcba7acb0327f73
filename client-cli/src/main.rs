//! `cwcode-cli`: the scripting surface of cwcode (SPEC §9).

mod memory;
mod render;

use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use cwcode_protocol::paths::Paths;
use cwcode_protocol::{
    ApprovalDecision, ApprovalRespondParams, Client, ConnectOptions, CreateSessionParams,
    EventKind, GoalStartParams, Mode, TurnOutcome,
};

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
    #[command(flatten)]
    Memory(memory::MemoryCommand),
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

async fn connect(autostart: bool) -> anyhow::Result<Client> {
    let mut options = ConnectOptions::new(Paths::from_env()?);
    options.autostart = autostart;
    Ok(Client::connect(&options).await?)
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let json = cli.json;
    match cli.command {
        Command::Daemon { action } => return daemon(action, json).await,
        Command::Memory(command) => return memory::run(command, json).await,
        Command::New {
            cwd,
            profile,
            mode,
            title,
        } => {
            let cwd = match cwd {
                Some(cwd) => cwd,
                None => std::env::current_dir().context("cannot read the current directory")?,
            };
            let cwd = std::path::absolute(&cwd)
                .with_context(|| format!("bad --cwd {}", cwd.display()))?;
            let client = connect(true).await?;
            let info = client
                .create_session(&CreateSessionParams {
                    cwd: cwd.display().to_string(),
                    profile,
                    mode,
                    title,
                })
                .await?;
            if json {
                print_json(&info)?;
            } else {
                println!("{}", info.id);
            }
        }
        Command::Ls => {
            let sessions = connect(true).await?.list_sessions().await?;
            if json {
                print_json(&sessions)?;
            } else {
                print!("{}", render::session_table(&sessions));
            }
        }
        Command::Show { id } => {
            let info = connect(true).await?.get_session(&id).await?;
            if json {
                print_json(&info)?;
            } else {
                print!("{}", render::session_details(&info));
            }
        }
        Command::Send { id, text, wait } => {
            let text = prompt_text(text)?;
            let client = connect(true).await?;
            if !wait {
                let sent = client.send(&id, &text).await?;
                if json {
                    print_json(&sent)?;
                } else if sent.queued {
                    println!("turn {} queued behind the running one", sent.turn);
                } else {
                    println!("turn {} started", sent.turn);
                }
                return Ok(ExitCode::SUCCESS);
            }
            return send_and_wait(&client, &id, &text, json).await;
        }
        Command::Cancel { id } => {
            let result = connect(true).await?.cancel(&id).await?;
            if json {
                print_json(&result)?;
            } else if result.cancelled {
                println!("cancelled");
            } else {
                println!("no turn was running");
            }
        }
        Command::Events { id, since, follow } => {
            return events(&connect(true).await?, &id, since, follow, json).await;
        }
        Command::Approve {
            id,
            request,
            always,
        } => {
            let decision = if always {
                ApprovalDecision::Always
            } else {
                ApprovalDecision::Approve
            };
            respond(&id, request, decision, None, json).await?;
        }
        Command::Deny {
            id,
            request,
            reason,
        } => respond(&id, request, ApprovalDecision::Deny, reason, json).await?,
        Command::Mode { id, mode } => {
            let info = connect(true).await?.set_mode(&id, mode).await?;
            if json {
                print_json(&info)?;
            } else {
                println!("{} is in {} mode", info.id, info.mode);
            }
        }
        Command::Cache { id } => {
            let report = connect(true).await?.cache(&id).await?;
            if json {
                print_json(&report)?;
            } else {
                print!("{}", render::cache_table(&report));
            }
        }
        Command::Rewind { id, turn, undo } => {
            let client = connect(true).await?;
            let result = match (turn, undo) {
                (Some(turn), _) => client.rewind(&id, turn).await?,
                (None, true) => client.undo_rewind(&id).await?,
                (None, false) => {
                    let checkpoints = client.checkpoints(&id).await?;
                    if json {
                        print_json(&checkpoints)?;
                    } else {
                        print!("{}", render::checkpoint_table(&checkpoints));
                    }
                    return Ok(ExitCode::SUCCESS);
                }
            };
            if json {
                print_json(&result)?;
            } else {
                print!("{}", render::rewind_summary(&result, undo));
            }
            if !result.failed.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Goal { id, action } => {
            let client = connect(true).await?;
            let status = match action {
                GoalAction::Add { text } => client.goal_add(&id, &text).await?,
                GoalAction::On { cap, tokens, cost } => {
                    client
                        .goal_start(&GoalStartParams {
                            session_id: id.clone(),
                            cap,
                            token_budget: tokens,
                            cost_budget: cost,
                        })
                        .await?
                }
                GoalAction::Off => client.goal_stop(&id).await?,
                GoalAction::Status => client.goal_status(&id).await?,
            };
            if json {
                print_json(&status)?;
            } else {
                print!("{}", render::goal_status(&status));
            }
        }
        Command::Compact { id } => {
            connect(true).await?.compact(&id).await?;
            if json {
                print_json(&serde_json::json!({ "queued": true }))?;
            } else {
                println!("compaction queued; follow it with `cwcode-cli events {id} --follow`");
            }
        }
        Command::Cost { id } => {
            let report = connect(true).await?.cost(&id).await?;
            if json {
                print_json(&report)?;
            } else {
                print!("{}", render::cost_table(&report));
            }
        }
        Command::Profile { id, profile } => {
            let info = connect(true).await?.set_profile(&id, &profile).await?;
            if json {
                print_json(&info)?;
            } else {
                println!("{} now uses profile {}", info.id, info.profile);
            }
        }
        Command::Rm { id } => {
            connect(true).await?.delete_session(&id).await?;
            if json {
                print_json(&serde_json::json!({ "deleted": id }))?;
            } else {
                println!("deleted {id}");
            }
        }
        Command::Doctor => {
            let report = connect(true).await?.doctor().await?;
            if json {
                print_json(&report)?;
            } else {
                print!("{}", render::doctor(&report));
            }
            let healthy = report.config_error.is_none()
                && report.default_profile.is_some()
                && report.home_mode == 0o700
                && report.socket_mode == 0o600
                && report.config_key_exposed.is_none()
                && report.session_problems.iter().all(|problem| problem.loaded);
            if !healthy {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Profiles => {
            let profiles = connect(true).await?.list_profiles().await?;
            if json {
                print_json(&profiles)?;
            } else {
                print!("{}", render::profile_table(&profiles));
            }
        }
        Command::Config {
            action: ConfigAction::SetKey { profile, key },
        } => {
            let key = match key {
                Some(key) => key,
                None => read_key(&profile)?,
            };
            connect(true).await?.set_key(&profile, &key).await?;
            if json {
                print_json(&serde_json::json!({ "profile": profile, "stored": true }))?;
            } else {
                println!("stored the key of `{profile}` in config.json");
            }
        }
        Command::Rpc { method, params } => {
            let params = params
                .map(|text| serde_json::from_str(&text))
                .transpose()
                .context("the params are not valid JSON")?;
            let result = connect(true).await?.call_raw(&method, params).await?;
            if json || !std::io::stdout().is_terminal() {
                print_json(&result)?;
            } else {
                println!("{}", serde_json::to_string_pretty(&result)?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn read_key(profile: &str) -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        eprint!("API key for `{profile}` (input is not hidden; paste and press Enter): ");
    }
    let mut key = String::new();
    std::io::stdin()
        .read_line(&mut key)
        .context("cannot read the key from stdin")?;
    let key = key.trim().to_owned();
    if key.is_empty() {
        bail!("no key given");
    }
    Ok(key)
}

fn prompt_text(text: String) -> anyhow::Result<String> {
    if text != "-" {
        return Ok(text);
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("cannot read the prompt from stdin")?;
    if text.trim().is_empty() {
        bail!("the prompt read from stdin is empty");
    }
    Ok(text)
}

async fn respond(
    id: &str,
    request_id: String,
    decision: ApprovalDecision,
    reason: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    connect(true)
        .await?
        .respond_approval(&ApprovalRespondParams {
            session_id: id.to_owned(),
            request_id: request_id.clone(),
            decision,
            reason,
        })
        .await?;
    if json {
        print_json(&serde_json::json!({ "requestId": request_id, "decision": decision }))?;
    } else {
        println!("{request_id}: {decision:?}");
    }
    Ok(())
}

async fn daemon(action: DaemonAction, json: bool) -> anyhow::Result<ExitCode> {
    match action {
        DaemonAction::Start => {
            let info = connect(true).await?.info().await?;
            if json {
                print_json(&info)?;
            } else {
                println!("cwcoded running: pid {}, socket {}", info.pid, info.socket);
            }
        }
        DaemonAction::Status => match connect(false).await {
            Ok(client) => {
                let info = client.info().await?;
                if json {
                    print_json(&info)?;
                } else {
                    print!("{}", render::daemon_status(&info));
                }
            }
            Err(error) => {
                if json {
                    print_json(&serde_json::json!({ "running": false }))?;
                } else {
                    println!("cwcoded is not running ({error:#})");
                }
                return Ok(ExitCode::FAILURE);
            }
        },
        DaemonAction::Stop => {
            let paths = Paths::from_env()?;
            let Ok(client) = connect(false).await else {
                println!("cwcoded is not running");
                return Ok(ExitCode::SUCCESS);
            };
            // The daemon may close the connection before its answer arrives: it is stopping
            // either way, which the socket's disappearance confirms below.
            if let Err(error) = client.shutdown().await
                && error.rpc_code().is_some()
            {
                return Err(error.into());
            }
            // The daemon removes its socket as the last step of draining.
            for _ in 0..1500 {
                if !paths.socket.exists() {
                    if json {
                        print_json(&serde_json::json!({ "stopped": true }))?;
                    } else {
                        println!("cwcoded stopped");
                    }
                    return Ok(ExitCode::SUCCESS);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            bail!(
                "cwcoded did not stop within 15 s; see its log, {}",
                paths.log_file().display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Subscribes first, then sends, so no event of the new turn can be missed.
async fn send_and_wait(
    client: &Client,
    id: &str,
    text: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let session = client.get_session(id).await?;
    let mut stream = client.subscribe(&session.id, None).await?;
    let sent = client.send(&session.id, text).await?;
    if sent.queued && !json {
        eprintln!("(queued behind the running turn)");
    }
    let mut renderer = render::Renderer::new(json, &session.id);
    while let Some(event) = stream.next().await {
        let event = event?;
        renderer.event(&event)?;
        if let EventKind::TurnFinished {
            turn,
            outcome,
            error,
            ..
        } = &event.kind
            && *turn == sent.turn
        {
            if *outcome == TurnOutcome::Failed && !json {
                eprintln!(
                    "cwcode-cli: the turn failed: {}",
                    error.as_deref().unwrap_or("no reason given")
                );
            }
            return Ok(match outcome {
                TurnOutcome::Completed => ExitCode::SUCCESS,
                TurnOutcome::Failed => ExitCode::from(3),
                TurnOutcome::Cancelled => ExitCode::from(4),
                TurnOutcome::Interrupted => ExitCode::from(5),
                TurnOutcome::StormBroken => ExitCode::from(6),
            });
        }
        // A stream dropped for lag resumes by itself; one that ends here cannot be resumed.
        if let EventKind::SubscriptionEnded { reason, .. } = &event.kind {
            bail!("the daemon ended the event stream: {reason}");
        }
    }
    bail!(
        "the connection to cwcoded closed before the turn ended; follow it with `cwcode-cli events {id} --follow`"
    )
}

async fn events(
    client: &Client,
    id: &str,
    since: u64,
    follow: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let session = client.get_session(id).await?;
    if !follow && session.last_seq <= since {
        return Ok(ExitCode::SUCCESS);
    }
    let mut stream = client.subscribe(&session.id, Some(since)).await?;
    let mut renderer = render::Renderer::new(json, &session.id);
    while let Some(event) = stream.next().await {
        let event = event?;
        renderer.event(&event)?;
        if let EventKind::SubscriptionEnded { reason, .. } = &event.kind {
            bail!("the daemon ended the event stream: {reason}");
        }
        if !follow && event.seq >= session.last_seq {
            break;
        }
    }
    renderer.finish();
    Ok(ExitCode::SUCCESS)
}
