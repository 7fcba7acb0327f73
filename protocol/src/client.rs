//! The typed async client every frontend uses. It speaks JSON-RPC over a WebSocket on the
//! daemon's Unix socket, and starts the daemon when nothing answers, as tmux does.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonrpsee::async_client::{Client as RpcClient, ClientBuilder};
use jsonrpsee::client_transport::ws::{Url, WsHandshakeError, WsTransportClientBuilder};
use jsonrpsee::core::client::{
    ClientT, Error as RpcError, Subscription, SubscriptionClientT, SubscriptionCloseReason,
};
use jsonrpsee::core::traits::ToRpcParams;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::net::UnixStream;

use crate::event::{Event, EventKind};
use crate::methods::{self, Method, Subscription as SubscriptionMethod};
use crate::paths::Paths;
use crate::types::*;

/// How long a client waits for a daemon it started to answer.
const START_TIMEOUT: Duration = Duration::from_secs(10);
const START_POLL: Duration = Duration::from_millis(2);
/// `cwcoded`'s exit status when another daemon already serves its home: the client that
/// started it waits for that one's socket instead of reporting a failure.
pub const EXIT_ALREADY_RUNNING: u8 = 75;
/// Large enough to hold a long replay while the consumer renders it.
const SUBSCRIPTION_BUFFER: usize = 1 << 16;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cannot connect to cwcoded at {socket}: {source}\n  start it with `cwcode-cli daemon start`, or check CWCODE_HOME / CWCODE_SOCKET"
    )]
    Connect { socket: PathBuf, source: io::Error },
    #[error(
        "cannot start cwcoded ({program}): {source}\n  is cwcoded installed next to this program or on PATH?"
    )]
    Spawn { program: PathBuf, source: io::Error },
    #[error(
        "cwcoded was started but did not answer on {socket} within {waited:?}{exit}\n  see {log} for why"
    )]
    StartTimeout {
        socket: PathBuf,
        waited: Duration,
        exit: String,
        log: PathBuf,
    },
    /// The daemon this client started exited at once; `reason` is its own account of why.
    #[error("cwcoded cannot start: {reason}\n  its log is {log}")]
    StartFailed { reason: String, log: PathBuf },
    #[error("WebSocket handshake with cwcoded failed: {0}")]
    Handshake(String),
    /// Every connection slot of the daemon is taken (503): by idle clients, or by a flood.
    #[error(
        "cwcoded is serving all the connections it can: close idle clients (watchers, editors) \
         or retry in a few seconds; idle ones are closed within about 20 s"
    )]
    Busy,
    /// The daemon answered with a JSON-RPC error.
    #[error("{message} (code {code})")]
    Rpc {
        code: i32,
        message: String,
        data: Option<String>,
    },
    #[error("connection to cwcoded lost: {0}")]
    Transport(String),
    #[error("unexpected answer from cwcoded: {0}")]
    Decode(String),
}

impl ClientError {
    /// The JSON-RPC error code, when the daemon answered with one.
    pub fn rpc_code(&self) -> Option<i32> {
        match self {
            ClientError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<RpcError> for ClientError {
    fn from(error: RpcError) -> Self {
        match error {
            RpcError::Call(object) => ClientError::Rpc {
                code: object.code(),
                message: object.message().to_owned(),
                data: object.data().map(|data| data.get().to_owned()),
            },
            RpcError::ParseError(error) => ClientError::Decode(error.to_string()),
            other => ClientError::Transport(other.to_string()),
        }
    }
}

/// How to reach the daemon.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub paths: Paths,
    /// Start `cwcoded` when the socket does not answer.
    pub autostart: bool,
    /// The daemon binary to start; by default `cwcoded` next to the running program, else on PATH.
    pub daemon_program: Option<PathBuf>,
    /// Events a subscription holds for a consumer that has not taken them yet; past it the
    /// stream resubscribes from its last event (nothing is lost, the replay comes from disk).
    pub subscription_buffer: usize,
}

impl ConnectOptions {
    pub fn new(paths: Paths) -> Self {
        Self {
            paths,
            autostart: true,
            daemon_program: None,
            subscription_buffer: SUBSCRIPTION_BUFFER,
        }
    }
}

/// Params already serialised to JSON: by-name objects for the typed calls, anything for `rpc`.
struct Prepared(Option<Box<RawValue>>);

impl Prepared {
    fn new(params: &impl Serialize) -> Result<Self, ClientError> {
        serde_json::value::to_raw_value(params)
            .map(|raw| Prepared(Some(raw)))
            .map_err(|error| ClientError::Decode(error.to_string()))
    }
}

impl ToRpcParams for Prepared {
    fn to_rpc_params(self) -> Result<Option<Box<RawValue>>, serde_json::Error> {
        Ok(self.0)
    }
}

pub struct Client {
    /// Shared with the event streams, which resubscribe through it.
    rpc: Arc<RpcClient>,
}

impl Client {
    /// Connects to the daemon, starting it first when `options.autostart` allows.
    pub async fn connect(options: &ConnectOptions) -> Result<Self, ClientError> {
        let socket = &options.paths.socket;
        match UnixStream::connect(socket).await {
            Ok(stream) => Self::handshake(stream, options).await,
            Err(error) if options.autostart && daemon_absent(&error) => {
                start_daemon(options).await?;
                let stream =
                    UnixStream::connect(socket)
                        .await
                        .map_err(|source| ClientError::Connect {
                            socket: socket.clone(),
                            source,
                        })?;
                Self::handshake(stream, options).await
            }
            Err(source) => Err(ClientError::Connect {
                socket: socket.clone(),
                source,
            }),
        }
    }

    async fn handshake(stream: UnixStream, options: &ConnectOptions) -> Result<Self, ClientError> {
        let url =
            Url::parse("ws://localhost/").map_err(|e| ClientError::Handshake(e.to_string()))?;
        let (sender, receiver) = WsTransportClientBuilder::default()
            .build_with_stream(url, stream)
            .await
            .map_err(|error| match error {
                WsHandshakeError::Rejected { status_code: 503 } => ClientError::Busy,
                other => ClientError::Handshake(other.to_string()),
            })?;
        let rpc = ClientBuilder::default()
            .request_timeout(Duration::from_secs(600))
            .max_buffer_capacity_per_subscription(options.subscription_buffer.max(1))
            .build_with_tokio(sender, receiver);
        Ok(Self { rpc: Arc::new(rpc) })
    }

    /// Calls method `M` of the API table with its typed params; the answer is its typed result.
    pub async fn call<M: Method>(&self, params: &M::Params) -> Result<M::Result, ClientError> {
        Ok(self.rpc.request(M::NAME, Prepared::new(params)?).await?)
    }

    /// Calls any method with raw JSON params and returns the raw JSON result.
    pub async fn call_raw(
        &self,
        method: &str,
        params: Option<serde_json::Value>,
    ) -> Result<serde_json::Value, ClientError> {
        let params = match params {
            Some(value) => Prepared::new(&value)?,
            None => Prepared(None),
        };
        Ok(self.rpc.request(method, params).await?)
    }

    pub async fn info(&self) -> Result<DaemonInfo, ClientError> {
        self.call::<methods::DaemonInfo>(&NoParams {}).await
    }

    pub async fn doctor(&self) -> Result<DoctorReport, ClientError> {
        self.call::<methods::DaemonDoctor>(&NoParams {}).await
    }

    pub async fn shutdown(&self) -> Result<(), ClientError> {
        self.call::<methods::DaemonShutdown>(&NoParams {}).await?;
        Ok(())
    }

    pub async fn create_session(
        &self,
        params: &CreateSessionParams,
    ) -> Result<SessionInfo, ClientError> {
        self.call::<methods::SessionCreate>(params).await
    }

    pub async fn list_sessions(&self) -> Result<Vec<SessionInfo>, ClientError> {
        self.call::<methods::SessionList>(&NoParams {}).await
    }

    pub async fn get_session(&self, session_id: &str) -> Result<SessionInfo, ClientError> {
        self.call::<methods::SessionGet>(&session_ref(session_id))
            .await
    }

    pub async fn delete_session(&self, session_id: &str) -> Result<(), ClientError> {
        self.call::<methods::SessionDelete>(&session_ref(session_id))
            .await?;
        Ok(())
    }

    pub async fn send(&self, session_id: &str, text: &str) -> Result<SendResult, ClientError> {
        let params = SendParams {
            session_id: session_id.to_owned(),
            text: text.to_owned(),
        };
        self.call::<methods::SessionSend>(&params).await
    }

    pub async fn cancel(&self, session_id: &str) -> Result<CancelResult, ClientError> {
        self.call::<methods::SessionCancel>(&session_ref(session_id))
            .await
    }

    pub async fn set_mode(&self, session_id: &str, mode: Mode) -> Result<SessionInfo, ClientError> {
        let params = SetModeParams {
            session_id: session_id.to_owned(),
            mode,
        };
        self.call::<methods::SessionSetMode>(&params).await
    }

    /// Switches the session's provider profile; the next request uses it.
    pub async fn set_profile(
        &self,
        session_id: &str,
        profile: &str,
    ) -> Result<SessionInfo, ClientError> {
        let params = SetProfileParams {
            session_id: session_id.to_owned(),
            profile: profile.to_owned(),
        };
        self.call::<methods::SessionSetProfile>(&params).await
    }

    pub async fn respond_approval(
        &self,
        params: &ApprovalRespondParams,
    ) -> Result<(), ClientError> {
        self.call::<methods::ApprovalRespond>(params).await?;
        Ok(())
    }

    /// Asks for the session's older turns to be summarised; it runs after any queued turns.
    pub async fn compact(&self, session_id: &str) -> Result<(), ClientError> {
        self.call::<methods::SessionCompact>(&session_ref(session_id))
            .await?;
        Ok(())
    }

    pub async fn checkpoints(&self, session_id: &str) -> Result<Vec<CheckpointInfo>, ClientError> {
        self.call::<methods::SessionCheckpoints>(&session_ref(session_id))
            .await
    }

    /// Restores files and history to before prompt `turn`; the result carries that prompt's text.
    pub async fn rewind(&self, session_id: &str, turn: u32) -> Result<RewindResult, ClientError> {
        let params = RewindParams {
            session_id: session_id.to_owned(),
            turn,
        };
        self.call::<methods::SessionRewind>(&params).await
    }

    pub async fn undo_rewind(&self, session_id: &str) -> Result<RewindResult, ClientError> {
        self.call::<methods::SessionUndoRewind>(&session_ref(session_id))
            .await
    }

    pub async fn cache(&self, session_id: &str) -> Result<CacheReport, ClientError> {
        self.call::<methods::SessionCache>(&session_ref(session_id))
            .await
    }

    pub async fn cost(&self, session_id: &str) -> Result<CostReport, ClientError> {
        self.call::<methods::SessionCost>(&session_ref(session_id))
            .await
    }

    pub async fn set_key(&self, profile: &str, key: &str) -> Result<(), ClientError> {
        let params = SetKeyParams {
            profile: profile.to_owned(),
            key: key.to_owned(),
        };
        self.call::<methods::ConfigSetKey>(&params).await?;
        Ok(())
    }

    /// Appends `- [ ] TEXT` to the session's goals.md.
    pub async fn goal_add(&self, session_id: &str, text: &str) -> Result<GoalStatus, ClientError> {
        let params = GoalAddParams {
            session_id: session_id.to_owned(),
            text: text.to_owned(),
        };
        self.call::<methods::GoalAdd>(&params).await
    }

    pub async fn goal_start(&self, params: &GoalStartParams) -> Result<GoalStatus, ClientError> {
        self.call::<methods::GoalStart>(params).await
    }

    pub async fn goal_stop(&self, session_id: &str) -> Result<GoalStatus, ClientError> {
        self.call::<methods::GoalStop>(&session_ref(session_id))
            .await
    }

    pub async fn goal_status(&self, session_id: &str) -> Result<GoalStatus, ClientError> {
        self.call::<methods::GoalStatus>(&session_ref(session_id))
            .await
    }

    pub async fn list_profiles(&self) -> Result<Vec<ProfileInfo>, ClientError> {
        self.call::<methods::ProfileList>(&NoParams {}).await
    }

    /// Subscribes to a session's events. With `since: Some(seq)` the journal is replayed from
    /// after `seq` first; the live stream follows with no gap and no duplicate. When the daemon
    /// drops the subscription because this client fell behind, the stream resubscribes from the
    /// last event it delivered by itself: the caller sees every event once, in order.
    pub async fn subscribe(
        &self,
        session_id: &str,
        since: Option<u64>,
    ) -> Result<EventStream, ClientError> {
        let inner = open_subscription(&self.rpc, session_id, since).await?;
        Ok(EventStream {
            rpc: Arc::clone(&self.rpc),
            session_id: session_id.to_owned(),
            last_seq: since,
            inner,
            resumed: 0,
        })
    }
}

async fn open_subscription(
    rpc: &RpcClient,
    session_id: &str,
    since: Option<u64>,
) -> Result<Subscription<<methods::SessionSubscribe as SubscriptionMethod>::Item>, ClientError> {
    type Subscribe = methods::SessionSubscribe;
    let params: <Subscribe as SubscriptionMethod>::Params = SubscribeParams {
        session_id: session_id.to_owned(),
        since,
    };
    Ok(rpc
        .subscribe(
            Subscribe::NAME,
            Prepared::new(&params)?,
            Subscribe::UNSUBSCRIBE,
        )
        .await?)
}

fn session_ref(session_id: &str) -> SessionRef {
    SessionRef {
        session_id: session_id.to_owned(),
    }
}

/// A live stream of one session's events.
pub struct EventStream {
    rpc: Arc<RpcClient>,
    session_id: String,
    /// The last event delivered (or the `since` subscribed with): where a resume starts.
    last_seq: Option<u64>,
    inner: Subscription<Event>,
    resumed: u64,
}

impl EventStream {
    /// The next event; `None` when the connection to the daemon closed. A
    /// `subscription_ended` is passed on only when the stream cannot be resumed (the session was
    /// deleted, its journal unreadable).
    pub async fn next(&mut self) -> Option<Result<Event, ClientError>> {
        loop {
            let item = match self.inner.next().await {
                Some(item) => item,
                // This client's own buffer overflowed: the connection is fine, resume.
                None if self.lagged() => {
                    if let Err(error) = self.resume(self.last_seq).await {
                        return Some(Err(error));
                    }
                    continue;
                }
                None => return None,
            };
            let event = match item {
                Ok(event) => event,
                Err(error) => return Some(Err(ClientError::Decode(error.to_string()))),
            };
            match &event.kind {
                EventKind::SubscriptionEnded {
                    last_seq,
                    resumable: true,
                    ..
                } => {
                    let since = self.last_seq.unwrap_or(*last_seq);
                    if let Err(error) = self.resume(Some(since)).await {
                        return Some(Err(error));
                    }
                }
                EventKind::SubscriptionEnded { .. } => return Some(Ok(event)),
                // Already delivered before a resume.
                _ if self.last_seq.is_some_and(|last| event.seq <= last) => {}
                // After an overflow the transport still passes on what fits, past a hole: resume
                // at the hole. (The daemon's `seq`s go up by one.)
                _ if self.lagged() && self.last_seq.is_some_and(|last| event.seq != last + 1) => {
                    if let Err(error) = self.resume(self.last_seq).await {
                        return Some(Err(error));
                    }
                }
                _ => {
                    self.last_seq = Some(event.seq);
                    return Some(Ok(event));
                }
            }
        }
    }

    /// How many times the stream resubscribed after the daemon or this client's buffer dropped it.
    pub fn resumed(&self) -> u64 {
        self.resumed
    }

    /// This client's buffer for the subscription overflowed: something was dropped.
    fn lagged(&self) -> bool {
        matches!(
            self.inner.close_reason(),
            Some(SubscriptionCloseReason::Lagged)
        )
    }

    async fn resume(&mut self, since: Option<u64>) -> Result<(), ClientError> {
        self.inner = open_subscription(&self.rpc, &self.session_id, since).await?;
        self.resumed += 1;
        Ok(())
    }
}

fn daemon_absent(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

/// The daemon binary: `cwcoded` beside the current executable when present, else from PATH.
pub fn default_daemon_program() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("cwcoded")))
        .filter(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from("cwcoded"))
}

/// Starts `cwcoded --background` and waits until its socket accepts connections. When the
/// daemon exits instead, its reason (the start-error file it writes) is returned at once; a
/// daemon that exits without one lost the race to another client's, whose socket is awaited.
pub async fn start_daemon(options: &ConnectOptions) -> Result<(), ClientError> {
    let program = options
        .daemon_program
        .clone()
        .unwrap_or_else(default_daemon_program);
    let paths = &options.paths;
    let mut child = Command::new(&program)
        .arg("--background")
        .env(crate::paths::HOME_ENV, &paths.home)
        .env(crate::paths::SOCKET_ENV, &paths.socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| ClientError::Spawn {
            program: program.clone(),
            source,
        })?;
    let started = Instant::now();
    let mut exit = String::new();
    while started.elapsed() < START_TIMEOUT {
        if socket_answers(&paths.socket).await {
            reap_in_background(child);
            return Ok(());
        }
        if exit.is_empty()
            && let Ok(Some(status)) = child.try_wait()
        {
            exit = format!(" (the process we started exited with {status})");
            let lost_the_race = status.code() == Some(i32::from(EXIT_ALREADY_RUNNING));
            if !status.success() && !lost_the_race {
                return Err(ClientError::StartFailed {
                    reason: start_error(paths).unwrap_or_else(|| {
                        format!(
                            "it exited with {status} before it could say why; run `{}` in a \
                             terminal to see",
                            program.display()
                        )
                    }),
                    log: paths.log_file(),
                });
            }
        }
        // Our daemon removed any older start-error file before it began, so one present now is
        // that of the daemon that won the race to start, which then failed.
        if !exit.is_empty()
            && let Some(reason) = start_error(paths)
        {
            return Err(ClientError::StartFailed {
                reason,
                log: paths.log_file(),
            });
        }
        tokio::time::sleep(START_POLL).await;
    }
    Err(ClientError::StartTimeout {
        socket: paths.socket.clone(),
        waited: START_TIMEOUT,
        exit,
        log: paths.log_file(),
    })
}

/// The start-error file's text, bounded: it is read from disk, and only its gist is shown.
fn start_error(paths: &Paths) -> Option<String> {
    const SHOWN_BYTES: usize = 4096;
    let bytes = std::fs::read(paths.start_error_file()).ok()?;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN_BYTES)]);
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

async fn socket_answers(socket: &Path) -> bool {
    UnixStream::connect(socket).await.is_ok()
}

/// The daemon outlives this process; while we live, collect its exit status so it never lingers
/// as a zombie.
fn reap_in_background(mut child: std::process::Child) {
    std::thread::spawn(move || child.wait());
}
