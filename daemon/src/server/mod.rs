//! Transport (SPEC §4): JSON-RPC 2.0 over HTTP and WebSocket on a Unix socket, served by
//! jsonrpsee on each accepted stream. The socket is 0600 and every connection's peer uid must be
//! the daemon's own, and its peer process must not descend from the daemon (`peer`), checked
//! before a byte of the request is read. `limits` keeps any client from locking the others out.

pub mod activation;
pub mod lifecycle;
mod limits;
mod peer;
mod plain_http;
pub mod rpc;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::Instant;

use cwcode_protocol::methods;
use cwcode_protocol::paths::Paths;
use jsonrpsee::server::middleware::http::ProxyGetRequestLayer;
use jsonrpsee::server::middleware::rpc::RpcServiceBuilder;
use jsonrpsee::server::{Server, stop_channel};
use tokio::net::{UnixListener, UnixStream};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::memory::MemoryStore;
use crate::provider::pool::Pool;
use crate::session::{Sessions, Shared};
use crate::tools::Registry;
use crate::util::now_rfc3339;

use lifecycle::{Instance, StartError};
use plain_http::SubscriptionsNeedWebSocket;
use rpc::Daemon;

/// How long the accept loop pauses after a failed accept.
const ACCEPT_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
/// How long open connections get to finish after the drain.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("cannot load the configuration: {0}; fix the file and try again")]
    Config(String),
    #[error("cannot listen on {path}: {source}")]
    Bind {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot set up the API: {0}")]
    Api(String),
}

impl ServeError {
    /// Another daemon serves this home already: the client that started this one waits for
    /// that one rather than reporting a failure.
    pub fn is_already_running(&self) -> bool {
        matches!(self, ServeError::Start(StartError::AlreadyRunning { .. }))
    }
}

/// Runs the daemon until SIGTERM, SIGINT or `daemon/shutdown`, then drains: running turns end
/// as interrupted, journals are flushed, and the socket and pid files are removed.
/// `activated` is the socket systemd passed (see `activation`); without it the daemon binds
/// `paths.socket` itself.
pub async fn run(
    paths: Paths,
    activated: Option<std::os::unix::net::UnixListener>,
) -> Result<(), ServeError> {
    let started = Instant::now();
    // Under socket activation systemd owns the socket file: never remove it.
    let instance = Instance::acquire(&paths, activated.is_none())?;
    guard_tool_processes(&paths);
    let providers =
        Pool::load(paths.config()).map_err(|error| ServeError::Config(error.to_string()))?;
    let shared = Arc::new(Shared {
        paths: paths.clone(),
        providers,
        registry: Arc::new(Registry::standard()),
        memory: Arc::new(MemoryStore::new(paths.memory_db())),
        mcp: crate::mcp::McpServers::default(),
        stopping: CancellationToken::new(),
    });
    let daemon = Arc::new(Daemon {
        sessions: Sessions::load(Arc::clone(&shared)),
        shared: Arc::clone(&shared),
        started,
        started_at: now_rfc3339(),
        shutdown: CancellationToken::new(),
    });
    let methods =
        rpc::module(Arc::clone(&daemon)).map_err(|error| ServeError::Api(error.to_string()))?;
    let listener = match activated {
        Some(listener) => UnixListener::from_std(listener).map_err(|source| ServeError::Bind {
            path: paths.socket.display().to_string(),
            source,
        })?,
        None => bind(&paths)?,
    };
    let mut limits = limits::Limits::new();
    tracing::info!(
        socket = %paths.socket.display(),
        pid = std::process::id(),
        max_connections = limits.max_connections(),
        socket_activated = !instance.owns_socket(),
        "cwcoded listening"
    );

    let health = ProxyGetRequestLayer::new([(methods::HEALTH_PATH, methods::DAEMON_INFO)])
        .map_err(|error| ServeError::Api(error.to_string()))?;
    let service_builder = Server::builder()
        .set_config(limits.server_config())
        .set_http_middleware(tower::ServiceBuilder::new().layer(health))
        .set_rpc_middleware(RpcServiceBuilder::new().layer_fn(SubscriptionsNeedWebSocket))
        .to_service_builder();
    let (stop_handle, server_handle) = stop_channel();
    let own_uid = rustix::process::getuid().as_raw();
    let own_pid = std::process::id();
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|error| ServeError::Api(error.to_string()))?;
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|error| ServeError::Api(error.to_string()))?;

    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            () = daemon.shutdown.cancelled() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                // Out of descriptors, say: retrying at once would only spin.
                tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
                continue;
            }
        };
        if !same_user(&stream, own_uid) {
            continue;
        }
        let Some(admitted) = limits.admit() else {
            limits::refuse(stream);
            continue;
        };
        let service = service_builder
            .clone()
            .build(methods.clone(), stop_handle.clone());
        let stopped = stop_handle.clone().shutdown();
        tokio::spawn(async move {
            // Walked in the connection's own task so a slow walk never holds up the accepts.
            if !not_a_tool_process(&stream, own_pid) {
                return;
            }
            if let Err(error) = limits::serve(stream, admitted, service, stopped).await {
                tracing::debug!(%error, "connection ended");
            }
        });
    }

    tracing::info!("draining: interrupting running turns");
    shared.stopping.cancel();
    daemon.sessions.drain().await;
    shared.mcp.shutdown();
    drop(listener);
    let _ = server_handle.stop();
    // Connections finish the requests they hold (the `daemon/shutdown` answer among them)
    // before the process exits; a client that never reads gets a bounded wait.
    drop(stop_handle);
    if tokio::time::timeout(SHUTDOWN_GRACE, server_handle.stopped())
        .await
        .is_err()
    {
        tracing::warn!("connections still open at exit");
    }
    drop(instance);
    tracing::info!("cwcoded stopped");
    Ok(())
}

/// Kills what tools of an earlier daemon of this home left running, then makes this daemon the
/// adoptive parent and reaper of whatever its own tools start. Needs the home's lock: another
/// live daemon's tools are not ours to kill.
fn guard_tool_processes(paths: &Paths) {
    let leftovers = crate::sandbox::process::track_tools_of(&paths.home);
    if leftovers > 0 {
        tracing::warn!(
            leftovers,
            "killed tool processes an earlier daemon of this home left running"
        );
    }
    if let Err(error) = crate::sandbox::process::forbid_inspection() {
        tracing::warn!(%error, "tool commands can read this daemon's /proc entries");
    }
    if let Err(error) = crate::sandbox::process::become_subreaper() {
        tracing::warn!(%error, "cannot adopt the processes tools leave behind");
    }
    if let Err(error) = crate::sandbox::process::start_orphan_reaper() {
        tracing::warn!(%error, "cannot reap the processes tools leave behind");
    }
    // The namespace probe runs bubblewrap once: on the blocking pool now, not in the first call.
    drop(tokio::task::spawn_blocking(
        crate::sandbox::isolation::namespaces,
    ));
}

fn bind(paths: &Paths) -> Result<UnixListener, ServeError> {
    let bind_error = |source| ServeError::Bind {
        path: paths.socket.display().to_string(),
        source,
    };
    // The socket must never exist with wider permissions, not even for an instant.
    let previous = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
    let listener = UnixListener::bind(&paths.socket);
    rustix::process::umask(previous);
    let listener = listener.map_err(bind_error)?;
    std::fs::set_permissions(&paths.socket, std::fs::Permissions::from_mode(0o600))
        .map_err(bind_error)?;
    Ok(listener)
}

/// Closes connections from processes the daemon started (tools and their children) before
/// reading anything from them: tools must never drive the API.
fn not_a_tool_process(stream: &UnixStream, own_pid: u32) -> bool {
    match peer::classify(stream, own_pid) {
        peer::Peer::Client => true,
        peer::Peer::Descendant => {
            let pid = stream
                .peer_cred()
                .ok()
                .and_then(|credentials| credentials.pid());
            tracing::warn!(
                pid,
                "refused a connection from a process the daemon started (a tool may not use the API)"
            );
            false
        }
        peer::Peer::Unknown(reason) => {
            tracing::warn!(%reason, "refused a connection whose peer process cannot be checked");
            false
        }
    }
}

/// Closes connections from any other user before reading anything from them.
fn same_user(stream: &UnixStream, own_uid: u32) -> bool {
    match stream.peer_cred() {
        Ok(credentials) if credentials.uid() == own_uid => true,
        Ok(credentials) => {
            tracing::warn!(
                uid = credentials.uid(),
                "refused a connection from another user"
            );
            false
        }
        Err(error) => {
            tracing::warn!(%error, "refused a connection whose peer cannot be identified");
            false
        }
    }
}
