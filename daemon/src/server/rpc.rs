//! The JSON-RPC methods (SPEC §4), served as the API table in `cwcode_protocol::methods` types
//! them: each handler gets its method's params, calls into the session room and answers with its
//! method's result, mapping errors to typed application codes.

mod memory;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cwcode_protocol::methods::{self, Method, Subscription};
use cwcode_protocol::{
    Acknowledged, CancelResult, CompactResult, DaemonInfo, DeleteResult, DoctorReport, ErrorCode,
    Event, EventKind, NoParams, SandboxReport, ShutdownResult,
};
use jsonrpsee::core::RegisterMethodError;
use jsonrpsee::core::SubscriptionResult;
use jsonrpsee::core::server::SendTimeoutError;
use jsonrpsee::types::error::INVALID_PARAMS_CODE;
use jsonrpsee::types::{ErrorObjectOwned, Params};
use jsonrpsee::{PendingSubscriptionSink, RpcModule, SubscriptionSink};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::journal::bus::Replay;
use crate::journal::replay::ReplayReader;
use crate::provider::ConfigError;
use crate::session::approvals::RespondError;
use crate::session::{Session, SessionError, Sessions, Shared};

/// The state every method sees.
pub struct Daemon {
    pub shared: Arc<Shared>,
    pub sessions: Sessions,
    pub started: Instant,
    pub started_at: String,
    /// Fired by `daemon/shutdown`; the server then drains and exits.
    pub shutdown: CancellationToken,
}

/// Each way `config.json` or a profile can be wrong has its own code.
fn config_error_code(error: &ConfigError) -> ErrorCode {
    match error {
        ConfigError::UnknownProfile { .. } => ErrorCode::ProfileNotFound,
        ConfigError::InvalidKey { .. } => ErrorCode::InvalidKey,
        ConfigError::Parse { .. } | ConfigError::Invalid { .. } => ErrorCode::ConfigInvalid,
        ConfigError::Read { .. } | ConfigError::Write { .. } => ErrorCode::Storage,
    }
}

fn rpc_error(error: SessionError) -> ErrorObjectOwned {
    if let SessionError::Approval(RespondError::Pattern(_)) = &error {
        return ErrorObjectOwned::owned(INVALID_PARAMS_CODE, error.to_string(), None::<()>);
    }
    let code = match &error {
        SessionError::NotFound(_) | SessionError::Ambiguous { .. } => ErrorCode::SessionNotFound,
        SessionError::InvalidWorkspace { .. } => ErrorCode::InvalidWorkspace,
        SessionError::Profile(error) => config_error_code(error),
        SessionError::NoDefaultProfile(_) => ErrorCode::NoDefaultProfile,
        SessionError::Approval(_) => ErrorCode::ApprovalNotFound,
        SessionError::ShuttingDown => ErrorCode::ShuttingDown,
        SessionError::Busy => ErrorCode::SessionBusy,
        SessionError::Checkpoint(_) | SessionError::NoCheckpointStore => ErrorCode::Checkpoint,
        SessionError::Goals(_) => ErrorCode::Goals,
        SessionError::Journal(_)
        | SessionError::Write(_)
        | SessionError::PromptNotJournalled(_)
        | SessionError::RewindNotJournalled { .. }
        | SessionError::RewindNotJournalledNorUndone { .. }
        | SessionError::Damaged { .. }
        | SessionError::File { .. }
        | SessionError::Encode(_)
        | SessionError::ReadTask(_) => ErrorCode::Storage,
    };
    ErrorObjectOwned::owned(code.code(), error.to_string(), None::<()>)
}

/// Params as the method's table entry types them. Absent params are an empty object, so that a
/// method without params can be called with none (`{"method":"daemon/info"}`).
fn parse<T: DeserializeOwned>(params: &Params<'_>) -> Result<T, ErrorObjectOwned> {
    match params.as_str() {
        Some(_) => params.parse(),
        None => Params::new(Some("{}")).parse(),
    }
}

/// Registers the methods of the API table on the module.
struct Registrar<'module>(&'module mut RpcModule<Daemon>);

impl Registrar<'_> {
    /// Serves method `M`: its params are parsed as `M::Params` and the handler must answer with
    /// `M::Result`, so a handler that disagrees with the table does not compile.
    fn serve<M, Handler, Answer>(
        &mut self,
        _method: M,
        handler: Handler,
    ) -> Result<(), RegisterMethodError>
    where
        M: Method,
        Handler: Fn(Arc<Daemon>, M::Params) -> Answer + Clone + Send + Sync + 'static,
        Answer: Future<Output = Result<M::Result, ErrorObjectOwned>> + Send,
    {
        self.0
            .register_async_method(M::NAME, move |params, daemon, _| {
                let handler = handler.clone();
                async move { handler(daemon, parse::<M::Params>(&params)?).await }
            })?;
        Ok(())
    }
}

fn session(daemon: &Daemon, session_id: &str) -> Result<Arc<Session>, ErrorObjectOwned> {
    daemon.sessions.get(session_id).map_err(rpc_error)
}

pub fn module(daemon: Arc<Daemon>) -> Result<RpcModule<Daemon>, RegisterMethodError> {
    let mut module = RpcModule::from_arc(daemon);
    let mut api = Registrar(&mut module);

    api.serve(methods::DaemonInfo, |daemon, NoParams {}| async move {
        Ok(daemon_info(&daemon))
    })?;
    api.serve(methods::DaemonDoctor, |daemon, NoParams {}| async move {
        // The sandbox probe confines a throwaway thread: keep it off the async workers.
        let sandbox = tokio::task::spawn_blocking(crate::sandbox::report)
            .await
            .map_err(|error| internal_error(error.to_string()))?;
        Ok(doctor(&daemon, sandbox))
    })?;
    api.serve(methods::DaemonShutdown, |daemon, NoParams {}| async move {
        daemon.shutdown.cancel();
        Ok(ShutdownResult { stopping: true })
    })?;
    api.serve(methods::SessionCreate, |daemon, params| async move {
        daemon.sessions.create(params).map_err(rpc_error)
    })?;
    api.serve(methods::SessionList, |daemon, NoParams {}| async move {
        Ok(daemon.sessions.list())
    })?;
    api.serve(methods::SessionGet, |daemon, params| async move {
        Ok(session(&daemon, &params.session_id)?.info())
    })?;
    api.serve(methods::SessionDelete, |daemon, params| async move {
        daemon
            .sessions
            .delete(&params.session_id)
            .await
            .map_err(rpc_error)?;
        Ok(DeleteResult { deleted: true })
    })?;
    api.serve(methods::SessionSend, |daemon, params| async move {
        session(&daemon, &params.session_id)?
            .send(params.text)
            .map_err(rpc_error)
    })?;
    api.serve(methods::SessionCancel, |daemon, params| async move {
        let cancelled = session(&daemon, &params.session_id)?.cancel();
        Ok(CancelResult { cancelled })
    })?;
    api.serve(methods::SessionSetMode, |daemon, params| async move {
        session(&daemon, &params.session_id)?
            .set_mode(params.mode)
            .map_err(rpc_error)
    })?;
    api.serve(methods::SessionSetProfile, |daemon, params| async move {
        session(&daemon, &params.session_id)?
            .set_profile(&params.profile)
            .map_err(rpc_error)
    })?;
    api.serve(methods::ApprovalRespond, |daemon, params| async move {
        session(&daemon, &params.session_id)?
            .respond(
                &params.request_id,
                params.decision,
                params.reason,
                params.pattern,
            )
            .map_err(rpc_error)?;
        Ok(Acknowledged { ok: true })
    })?;
    api.serve(methods::SessionCompact, |daemon, params| async move {
        session(&daemon, &params.session_id)?
            .compact()
            .map_err(rpc_error)?;
        Ok(CompactResult { queued: true })
    })?;
    api.serve(methods::SessionCheckpoints, |daemon, params| async move {
        let session = session(&daemon, &params.session_id)?;
        session.checkpoints().await.map_err(rpc_error)
    })?;
    api.serve(methods::SessionRewind, |daemon, params| async move {
        let session = session(&daemon, &params.session_id)?;
        session.rewind(Some(params.turn)).await.map_err(rpc_error)
    })?;
    api.serve(methods::SessionUndoRewind, |daemon, params| async move {
        let session = session(&daemon, &params.session_id)?;
        session.rewind(None).await.map_err(rpc_error)
    })?;
    api.serve(methods::SessionCache, |daemon, params| async move {
        session(&daemon, &params.session_id)?
            .cache_report()
            .map_err(rpc_error)
    })?;
    api.serve(methods::SessionEvents, |daemon, params| async move {
        let limit = params
            .limit
            .map_or(DEFAULT_PAGE, |limit| limit.clamp(1, MAX_PAGE));
        session(&daemon, &params.session_id)?
            .events(params.since, limit as usize)
            .await
            .map_err(rpc_error)
    })?;
    api.serve(methods::SessionCost, |daemon, params| async move {
        daemon
            .sessions
            .cost_report(&params.session_id)
            .map_err(rpc_error)
    })?;
    api.serve(methods::ConfigSetKey, |daemon, params| async move {
        daemon
            .shared
            .providers
            .set_key(&params.profile, &params.key)
            .map_err(|error| {
                ErrorObjectOwned::owned(
                    config_error_code(&error).code(),
                    error.to_string(),
                    None::<()>,
                )
            })?;
        Ok(Acknowledged { ok: true })
    })?;
    api.serve(methods::GoalAdd, |daemon, params| async move {
        session(&daemon, &params.session_id)?
            .goal_add(&params.text)
            .map_err(rpc_error)
    })?;
    api.serve(methods::GoalStart, |daemon, params| async move {
        session(&daemon, &params.session_id)?
            .goal_start(params)
            .map_err(rpc_error)
    })?;
    api.serve(methods::GoalStop, |daemon, params| async move {
        session(&daemon, &params.session_id)?
            .goal_stop()
            .map_err(rpc_error)
    })?;
    api.serve(methods::GoalStatus, |daemon, params| async move {
        session(&daemon, &params.session_id)?
            .goal_status()
            .map_err(rpc_error)
    })?;
    api.serve(methods::ProfileList, |daemon, NoParams {}| async move {
        Ok(daemon.shared.providers.profiles())
    })?;
    memory::serve(&mut api)?;
    type Subscribe = methods::SessionSubscribe;
    module.register_subscription(
        Subscribe::NAME,
        Subscribe::NOTIFICATION,
        Subscribe::UNSUBSCRIBE,
        |params, pending, daemon, _| async move { subscribe(params, pending, daemon).await },
    )?;
    Ok(module)
}

fn daemon_info(daemon: &Daemon) -> DaemonInfo {
    DaemonInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        pid: std::process::id(),
        home: daemon.shared.paths.home.display().to_string(),
        socket: daemon.shared.paths.socket.display().to_string(),
        started: daemon.started_at.clone(),
        uptime_ms: daemon.started.elapsed().as_millis() as u64,
        sessions: daemon.sessions.len(),
        running_turns: daemon.sessions.running_turns(),
        config_error: daemon.shared.providers.last_error(),
        mcp_servers: mcp_report(daemon),
    }
}

fn mcp_report(daemon: &Daemon) -> Vec<cwcode_protocol::types::McpServerStatus> {
    daemon
        .shared
        .mcp
        .report(daemon.shared.providers.config().mcp_servers())
}

fn internal_error(message: String) -> ErrorObjectOwned {
    ErrorObjectOwned::owned(ErrorCode::Internal.code(), message, None::<()>)
}

fn mode_of(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).map_or(0, |metadata| metadata.permissions().mode() & 0o7777)
}

fn doctor(daemon: &Daemon, sandbox: SandboxReport) -> DoctorReport {
    /// Whether a config.json text gives any profile a non-empty `api_key`.
    fn holds_api_key(text: &str) -> bool {
        let Ok(config) = serde_json::from_str::<serde_json::Value>(text) else {
            // Unparseable: it may still hold a key, and doctor reports the parse error anyway.
            return text.contains("api_key\"");
        };
        config["profiles"].as_object().is_some_and(|profiles| {
            profiles.values().any(|profile| {
                profile["api_key"]
                    .as_str()
                    .is_some_and(|key| !key.trim().is_empty())
            })
        })
    }
    let paths = &daemon.shared.paths;
    let providers = &daemon.shared.providers;
    let config = paths.config();
    // A key in a file others can read is a leaked key: say so, with the command that fixes it.
    let config_key_exposed = (mode_of(&config) & 0o077 != 0
        && std::fs::read_to_string(&config).is_ok_and(|text| holds_api_key(&text)))
    .then(|| {
        format!(
            "{} holds an API key and users other than you can read it (mode {:o}): run `chmod 600 {}`",
            config.display(),
            mode_of(&config),
            config.display()
        )
    });
    let (default_profile, default_profile_problem) = match providers.default_profile() {
        Ok(name) => (Some(name), None),
        Err(fix) => (None, Some(fix.to_string())),
    };
    DoctorReport {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        home: paths.home.display().to_string(),
        socket: paths.socket.display().to_string(),
        home_mode: mode_of(&paths.home),
        socket_mode: mode_of(&paths.socket),
        config_error: providers.last_error(),
        default_profile,
        default_profile_problem,
        profiles: providers.profiles(),
        sandbox,
        session_problems: daemon.sessions.problems(),
        config_key_exposed,
        hook_failures: daemon.sessions.hook_failures(),
        mcp_servers: mcp_report(daemon),
    }
}

/// Streams a session's events: the journal after `since`, read from disk in bounded batches,
/// then live ones. The subscription is registered before it is accepted, so a client that
/// subscribes and then sends a prompt sees every event of that prompt's turn. A client that does
/// not take an event within [`SEND_DEADLINE`], or falls too far behind the live stream, is
/// dropped with a `subscription_ended` saying where to resume; the session never waits for it.
async fn subscribe(
    params: Params<'static>,
    pending: PendingSubscriptionSink,
    daemon: Arc<Daemon>,
) -> SubscriptionResult {
    let params: <methods::SessionSubscribe as Subscription>::Params = match parse(&params) {
        Ok(params) => params,
        Err(error) => {
            pending.reject(error).await;
            return Ok(());
        }
    };
    let subscription = match daemon
        .sessions
        .get(&params.session_id)
        .and_then(|session| session.subscribe(params.since))
    {
        Ok(subscription) => subscription,
        Err(error) => {
            pending.reject(rpc_error(error)).await;
            return Ok(());
        }
    };
    let sink = pending.accept().await?;
    // A live-only subscription starts at the journal's end: a resume from there misses nothing.
    let mut last_seq = params.since.unwrap_or(subscription.until);
    if let Some(replay) = subscription.replay {
        match stream_replay(&sink, replay, &mut last_seq).await {
            Ok(Delivery::Sent) => {}
            Ok(Delivery::Stopped) => return Ok(()),
            Ok(Delivery::TooSlow) => return end_too_slow(&sink, last_seq).await,
            Err(error) => {
                let reason = format!("the session's journal could not be read: {error}");
                return end(&sink, last_seq, reason, false).await;
            }
        }
    }
    let mut live = subscription.live;
    loop {
        let received = tokio::select! {
            received = live.recv() => received,
            () = sink.closed() => return Ok(()),
        };
        match received {
            Ok(event) if event.seq <= last_seq => {}
            Ok(event) => match send(&sink, event.json.clone()).await {
                Delivery::Sent => last_seq = event.seq,
                Delivery::Stopped => return Ok(()),
                Delivery::TooSlow => return end_too_slow(&sink, last_seq).await,
            },
            Err(RecvError::Lagged(missed)) => {
                let reason = format!(
                    "this client fell {missed} events behind and was dropped so the session is not slowed; resubscribe with since={last_seq}"
                );
                return end(&sink, last_seq, reason, true).await;
            }
            Err(RecvError::Closed) => {
                return end(&sink, last_seq, "the session was deleted".to_owned(), false).await;
            }
        }
    }
}

/// Events in a `session/events` page when the client names no limit, and the most it may name.
const DEFAULT_PAGE: u32 = 200;
const MAX_PAGE: u32 = 1000;

/// How long one event may wait for room in a client's connection before the client is dropped.
const SEND_DEADLINE: Duration = Duration::from_secs(5);

enum Delivery {
    Sent,
    /// The client unsubscribed or its connection closed.
    Stopped,
    /// The client did not read within [`SEND_DEADLINE`].
    TooSlow,
}

#[derive(Debug, thiserror::Error)]
enum ReplayError {
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalError),
    #[error("the replay reader stopped: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Sends the replayed range batch by batch; only one batch is in memory at a time, and files are
/// read on the blocking pool.
async fn stream_replay(
    sink: &SubscriptionSink,
    replay: Replay,
    last_seq: &mut u64,
) -> Result<Delivery, ReplayError> {
    let mut reader = tokio::task::spawn_blocking(move || {
        ReplayReader::open(&replay.path, replay.since, replay.until)
    })
    .await??;
    loop {
        let (returned, batch) = tokio::task::spawn_blocking(move || {
            let batch = reader.next_batch();
            (reader, batch)
        })
        .await?;
        reader = returned;
        let batch = batch?;
        if batch.is_empty() {
            return Ok(Delivery::Sent);
        }
        for event in batch {
            match send(sink, event.json).await {
                Delivery::Sent => *last_seq = event.seq,
                other => return Ok(other),
            }
        }
    }
}

async fn send(sink: &SubscriptionSink, json: Box<RawValue>) -> Delivery {
    match sink.send_timeout(json, SEND_DEADLINE).await {
        Ok(()) => Delivery::Sent,
        Err(SendTimeoutError::Closed(_)) => Delivery::Stopped,
        Err(SendTimeoutError::Timeout(_)) => Delivery::TooSlow,
    }
}

async fn end_too_slow(sink: &SubscriptionSink, last_seq: u64) -> SubscriptionResult {
    let reason = format!(
        "this client did not read its events for {} s and was dropped so the session is not slowed; resubscribe with since={last_seq}",
        SEND_DEADLINE.as_secs()
    );
    end(sink, last_seq, reason, true).await
}

/// A subscription that ends on the server is not announced by the transport: say it explicitly.
/// The marker's `seq` is 0, never a journalled event's; `lastSeq` says where to resume.
async fn end(
    sink: &SubscriptionSink,
    last_seq: u64,
    reason: String,
    resumable: bool,
) -> SubscriptionResult {
    let event = Event {
        seq: 0,
        time: crate::util::now_rfc3339(),
        parent_call_id: None,
        kind: EventKind::SubscriptionEnded {
            reason,
            last_seq,
            resumable,
        },
    };
    // A client too slow to take events may not take this one either: do not wait long for it.
    let _ = sink
        .send_timeout(serde_json::value::to_raw_value(&event)?, SEND_DEADLINE)
        .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use cwcode_protocol::paths::Paths;

    use super::*;
    use crate::memory::MemoryStore;
    use crate::provider::pool::Pool;
    use crate::tools::Registry;

    fn test_module(home: &std::path::Path) -> (Arc<Daemon>, RpcModule<Daemon>) {
        let paths = Paths::new(home.to_path_buf(), None);
        let shared = Arc::new(Shared {
            providers: Pool::load(paths.config()).unwrap(),
            paths,
            registry: Arc::new(Registry::standard()),
            memory: Arc::new(MemoryStore::new(home.join("memory.db"))),
            mcp: crate::mcp::McpServers::default(),
            stopping: CancellationToken::new(),
        });
        let daemon = Arc::new(Daemon {
            sessions: Sessions::load(Arc::clone(&shared)),
            shared,
            started: Instant::now(),
            started_at: crate::util::now_rfc3339(),
            shutdown: CancellationToken::new(),
        });
        (Arc::clone(&daemon), module(daemon).unwrap())
    }

    /// A method added to the API table is served, and the server serves nothing outside it.
    #[tokio::test]
    async fn the_server_registers_exactly_the_tables_methods() {
        let home = tempfile::tempdir().unwrap();
        let (_, module) = test_module(home.path());
        let mut registered: Vec<&str> = module.method_names().collect();
        let mut expected = methods::NAMES.to_vec();
        registered.sort_unstable();
        expected.sort_unstable();
        assert_eq!(registered, expected);
    }

    /// Answers are the table's typed results; a method without params needs none.
    #[tokio::test]
    async fn methods_answer_with_their_typed_results() {
        let home = tempfile::tempdir().unwrap();
        let (daemon, module) = test_module(home.path());
        let answer = |request: &'static str| {
            let module = &module;
            async move {
                let (answer, _) = module.raw_json_request(request, 1).await.unwrap();
                serde_json::from_str::<serde_json::Value>(answer.get()).unwrap()
            }
        };
        let info = answer(r#"{"jsonrpc":"2.0","id":1,"method":"daemon/info"}"#).await;
        let info: DaemonInfo = serde_json::from_value(info["result"].clone()).unwrap();
        assert_eq!(info.pid, std::process::id());

        let missing = answer(r#"{"jsonrpc":"2.0","id":2,"method":"session/get"}"#).await;
        assert_eq!(missing["error"]["code"], -32602, "{missing}");
        assert!(
            missing["error"]["data"]
                .as_str()
                .is_some_and(|why| why.contains("sessionId")),
            "{missing}"
        );

        let stopping: <methods::DaemonShutdown as Method>::Result = module
            .call(methods::DAEMON_SHUTDOWN, jsonrpsee::rpc_params![])
            .await
            .unwrap();
        assert_eq!(stopping, ShutdownResult { stopping: true });
        assert!(daemon.shutdown.is_cancelled());
    }

    /// A script can tell a typo'd profile from a bad key from a broken config.json by the code.
    #[tokio::test]
    async fn each_config_error_of_set_key_has_its_own_code() {
        let home = tempfile::tempdir().unwrap();
        let (_, module) = test_module(home.path());
        let code = |params: &'static str| {
            let module = &module;
            async move {
                let request = format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"config/setKey","params":{params}}}"#
                );
                let (answer, _) = module.raw_json_request(&request, 1).await.unwrap();
                let answer: serde_json::Value = serde_json::from_str(answer.get()).unwrap();
                answer["error"]["code"].as_i64().unwrap()
            }
        };
        let unknown = code(r#"{"profile":"no-such-profile","key":"sk-1"}"#).await;
        assert_eq!(unknown, i64::from(ErrorCode::ProfileNotFound.code()));
        let bad_key = code(r#"{"profile":"qwen3.6-27b","key":"sk 1"}"#).await;
        assert_eq!(bad_key, i64::from(ErrorCode::InvalidKey.code()));
        std::fs::write(home.path().join("config.json"), "{ not json").unwrap();
        let broken = code(r#"{"profile":"qwen3.6-27b","key":"sk-1"}"#).await;
        assert_eq!(broken, i64::from(ErrorCode::ConfigInvalid.code()));
    }
}
