//! A session's runner: the one task that owns its history and executes its queued work (prompts,
//! compactions, rewinds, goal-loop cycles) one at a time, each turn with the provider, workspace
//! and tool context it needs.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cwcode_protocol::EventKind;
use cwcode_protocol::paths::Paths;
use tokio::sync::mpsc;

use super::recovery::{OpenTurn, close_turn_when_possible, recover_from_refused_journal};
use super::{JOURNAL_RETRY_MAX, Session, SessionError, Shared, Work};
use crate::agent::approvals::ApprovalGate;
use crate::agent::history::Conversation;
use crate::agent::instructions::InstructionFiles;
use crate::agent::{self, CompactScope, TurnEnv};
use crate::journal::JournalError;
use crate::journal::bus::EventLog;
use crate::mcp::ServerEnv;
use crate::sandbox::Workspace;
use crate::tools::{EditTools, MemoryAccess, ReadLedger, Registry, ToolContext, WebCache};

/// The tools a session keeps for its life: the built-ins, then the tools of the MCP servers
/// configured now, each started here if no session has started it yet. Without MCP servers it is
/// the daemon's own registry, so such a session's requests are exactly what they were.
async fn session_tools(shared: &Shared) -> Arc<Registry> {
    let config = shared.providers.config();
    if config.mcp_servers().is_empty() {
        return Arc::clone(&shared.registry);
    }
    let env = ServerEnv {
        passthrough: config.policy().tool_env.clone(),
        secret_values: shared.providers.secret_values().to_vec(),
    };
    let tools = tokio::select! {
        tools = shared.mcp.session_tools(config.mcp_servers(), &env) => tools,
        () = shared.stopping.cancelled() => Vec::new(),
    };
    Arc::new(shared.registry.with_mcp_tools(tools))
}

/// The session's runner: executes queued prompts one at a time until the queue closes or the
/// daemon stops. It alone owns the history.
pub(super) async fn run_prompts(
    session: Arc<Session>,
    shared: Arc<Shared>,
    mut conversation: Conversation,
    mut prompts: mpsc::UnboundedReceiver<Work>,
    unclosed: Option<OpenTurn>,
) {
    if let Some(open) = unclosed {
        close_turn_when_possible(&session, &mut conversation, open, &shared.stopping).await;
    }
    let reads = Arc::new(Mutex::new(ReadLedger::default()));
    let web_cache = Arc::new(WebCache::default());
    // Chosen when the session first has work, then kept for its life (SPEC §6).
    let mut tool_set: Option<Arc<Registry>> = None;
    // A prompt whose turn the journal refused to start waits for it, ahead of the queue.
    let mut retry: Option<(u32, String)> = None;
    let mut retry_delay = Duration::from_millis(250);
    loop {
        let prompt = match retry.take() {
            Some((turn, text)) => tokio::select! {
                () = tokio::time::sleep(retry_delay) => Some(Work::Prompt { turn, text }),
                () = shared.stopping.cancelled() => None,
            },
            // Stopping first: a prompt still queued when the daemon stops stays queued in the
            // journal and runs after the restart, instead of starting only to be interrupted.
            None => tokio::select! {
                biased;
                () = shared.stopping.cancelled() => None,
                prompt = prompts.recv() => prompt,
            },
        };
        let Some(work) = prompt else { break };
        let prompt_of = match &work {
            Work::Prompt { turn, text } => Some((*turn, text.clone())),
            _ => None,
        };
        let cancel = shared.stopping.child_token();
        let (profile, cwd) = {
            let mut control = session.control();
            control.running = Some(cancel.clone());
            (control.info.profile.clone(), control.info.cwd.clone())
        };
        let registry = match &tool_set {
            Some(registry) => Arc::clone(registry),
            None => Arc::clone(tool_set.insert(session_tools(&shared).await)),
        };
        let env = prepare_turn(&shared, &profile, &cwd).map(|(provider, workspace)| {
            let embedder = provider.embedder();
            let task_provider = task_provider_of(&shared, &profile);
            TurnEnv {
                log: Arc::clone(&session.log),
                registry: Arc::clone(&registry),
                provider,
                task_provider,
                mode: session.mode.subscribe(),
                approvals: Arc::clone(&session.approvals) as Arc<dyn ApprovalGate>,
                tools: ToolContext {
                    workspace,
                    cancel,
                    output: Arc::new(|_: &str| {}),
                    reads: Arc::clone(&reads),
                    tool_env: shared.providers.config().policy().tool_env.clone().into(),
                    secret_values: shared.providers.secret_values(),
                    background: Arc::clone(&session.background),
                    todos: Arc::clone(&session.todos),
                    web_cache: Arc::clone(&web_cache),
                    chrome_endpoint: shared.providers.config().chrome().endpoint.clone(),
                    edit_tools: edit_tools_of(&shared, &profile),
                    memory: Some(MemoryAccess {
                        store: Arc::clone(&shared.memory),
                        session_id: session.id.clone(),
                        embedder,
                    }),
                    sub_agent: None,
                },
                stopping: shared.stopping.clone(),
                checkpoints: session.checkpoints.clone(),
                instructions: InstructionFiles::new(&shared.paths.home, Path::new(&cwd)),
            }
        });
        let outcome = match (work, env) {
            (Work::Prompt { turn, text }, Ok(env)) => {
                agent::run_turn(&env, &mut conversation, turn, text)
                    .await
                    .map(drop)
            }
            (Work::Prompt { turn, text }, Err(reason)) => {
                agent::refuse_turn(&session.log, &mut conversation, turn, text, reason).map(drop)
            }
            (Work::Compact, Ok(env)) => {
                match agent::compact(&env, &mut conversation, CompactScope::Everything).await {
                    Ok(Err(reason)) => {
                        report_error(&session.log, format!("cannot compact: {reason}"))
                    }
                    other => other.map(drop),
                }
            }
            (Work::Compact, Err(reason)) => {
                report_error(&session.log, format!("cannot compact: {reason}"))
            }
            (Work::Rewind { turn, reply }, _) => {
                let result = session.rewind_now(&mut conversation, Some(turn)).await;
                let _ = reply.send(result);
                Ok(())
            }
            (Work::UndoRewind { reply }, _) => {
                let result = session.rewind_now(&mut conversation, None).await;
                let _ = reply.send(result);
                Ok(())
            }
            (Work::GoalCycle { cycle }, Ok(env)) => {
                match session.run_goal_cycle(&env, &mut conversation, cycle).await {
                    Err(SessionError::Journal(error)) => Err(error),
                    Err(error) => {
                        report_error(&session.log, format!("the goal loop stopped: {error}"))
                    }
                    Ok(()) => Ok(()),
                }
            }
            (Work::GoalCycle { .. }, Err(reason)) => {
                session.fail_goal_loop(reason.clone());
                report_error(&session.log, format!("the goal loop stopped: {reason}"))
            }
        };
        session.control().running = None;
        if let Err(error) = outcome {
            tracing::error!(session = %session.id, %error, "the journal refused an event");
            retry = recover_from_refused_journal(
                &session,
                &mut conversation,
                prompt_of,
                &error,
                &shared.stopping,
            )
            .await;
            if retry.is_some() {
                retry_delay = (retry_delay * 2).min(JOURNAL_RETRY_MAX);
                continue;
            }
        }
        retry_delay = Duration::from_millis(250);
        session.in_flight.fetch_sub(1, Ordering::SeqCst);
        session.persist_info();
    }
}

fn report_error(log: &EventLog, message: String) -> Result<(), JournalError> {
    log.publish(EventKind::Error { message }).map(drop)
}

/// What the commands tools run must not see: the daemon's home, and its socket where that lives
/// elsewhere.
fn hidden_from_tools(paths: &Paths) -> Vec<PathBuf> {
    let mut hidden = vec![paths.home.clone()];
    if !paths.socket.starts_with(&paths.home) {
        hidden.push(paths.socket.clone());
    }
    hidden
}

/// The provider and workspace a turn needs, or why it cannot run.
/// The profile's choice of edit tools; a profile gone from the config fails the turn elsewhere.
fn edit_tools_of(shared: &Shared, profile: &str) -> EditTools {
    match shared
        .providers
        .config()
        .profile(profile)
        .map(|profile| profile.edit_tools)
    {
        Ok(crate::provider::EditTools::Hashline) => EditTools::Hashline,
        Ok(crate::provider::EditTools::Replace) => EditTools::Replace,
        Ok(crate::provider::EditTools::Both) | Err(_) => EditTools::Both,
    }
}

/// The model `task`'s sub-agents run on when config.json names a `task_profile` other than the
/// session's. One that cannot be used (no key yet) leaves them on the session's, with a warning
/// in the daemon's log.
fn task_provider_of(shared: &Shared, profile: &str) -> Option<Arc<dyn crate::provider::Model>> {
    let config = shared.providers.config();
    let name = config.task_profile().filter(|name| *name != profile)?;
    match shared.providers.get(name) {
        Ok(provider) => Some(provider as Arc<dyn crate::provider::Model>),
        Err(reason) => {
            tracing::warn!(task_profile = name, %reason, "sub-agents use the session's profile");
            None
        }
    }
}

fn prepare_turn(
    shared: &Shared,
    profile: &str,
    cwd: &str,
) -> Result<(Arc<crate::provider::Provider>, Arc<Workspace>), String> {
    let extra_roots = shared.providers.config().policy().extra_roots.clone();
    let workspace = Workspace::with_extra_roots(Path::new(cwd), extra_roots)
        .map_err(|error| format!("the session's workspace {cwd} is not usable: {error}"))?
        .hiding(&hidden_from_tools(&shared.paths));
    let provider = shared.providers.get(profile)?;
    Ok((provider, Arc::new(workspace)))
}
