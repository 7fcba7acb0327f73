//! Starting one server: a child process spoken to over its stdin and stdout, or a streamable-HTTP
//! endpoint; then the MCP handshake and the tool list.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::Tool as RemoteTool;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

use super::config::ServerConfig;
use crate::sandbox::process::{ProcessGroup, spawn_group};
use crate::sandbox::secrets::{Redactor, confine_environment};

/// How much of a stdio server's stderr is kept, to say why it died.
const KEPT_STDERR_BYTES: usize = 2048;
/// How long a server whose connection broke gets to finish exiting before its error is reported.
const EXIT_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);
/// The most tools one server may add to a session; a longer list is cut (and said so).
pub const MAX_TOOLS_PER_SERVER: usize = 128;

/// What the daemon's tools environment policy gives a stdio server.
#[derive(Debug, Clone, Default)]
pub struct ServerEnv {
    /// `policy.tool_env`: names passed through besides the allow-listed ones.
    pub passthrough: Vec<String>,
    /// Every secret in force; a variable holding one is not passed through.
    pub secret_values: Vec<String>,
}

/// Notices `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct Handler {
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::Relaxed);
    }
}

/// A stdio server's process: its group is killed when this is dropped.
struct ChildProcess {
    _child: Child,
    _group: ProcessGroup,
}

/// A live connection to one server.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
    pub tools: Vec<RemoteTool>,
    /// How many tools the server listed beyond [`MAX_TOOLS_PER_SERVER`].
    pub tools_left_out: usize,
    tools_changed: Arc<AtomicBool>,
    child: Mutex<Option<ChildProcess>>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    /// Turns true when a stdio server's stderr closes: it has exited, and said all it will.
    stderr_closed: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Connection {
    pub fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.service.peer()
    }

    /// Whether the server is gone: the connection ended, or a stdio server's process exited.
    pub fn is_closed(&self) -> bool {
        self.service.is_closed()
            || self.service.peer().is_transport_closed()
            || self
                .stderr_closed
                .as_ref()
                .is_some_and(|closed| *closed.borrow())
    }

    pub fn tools_changed(&self) -> bool {
        self.tools_changed.load(Ordering::Relaxed)
    }

    /// The last lines the server wrote to stderr, for an error report.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes: Vec<u8> = tail.iter().copied().collect();
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }

    /// Waits a moment for a server whose connection broke to finish exiting, so that what it
    /// said last is in [`Connection::stderr_tail`].
    pub async fn settle_exit(&self) {
        if let Some(closed) = &self.stderr_closed {
            let mut closed = closed.clone();
            let _ = tokio::time::timeout(EXIT_SETTLE, closed.wait_for(|closed| *closed)).await;
        }
    }

    /// Kills a stdio server's whole process group now.
    pub fn kill(&self) {
        drop(
            self.child
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        self.service.cancellation_token().cancel();
    }
}

/// Starts the server and lists its tools. The error says what went wrong, for the user.
pub async fn connect(config: &ServerConfig, env: &ServerEnv) -> Result<Connection, String> {
    let handler = Handler::default();
    let tools_changed = Arc::clone(&handler.tools_changed);
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    let (service, child, stderr_closed) = match (&config.command, &config.url) {
        (Some(program), _) => {
            let (service, child, closed) =
                start_stdio(program, config, env, handler, &stderr).await?;
            (service, Some(child), Some(closed))
        }
        (None, Some(url)) => (start_http(url, config, handler).await?, None, None),
        (None, None) => return Err("neither `command` nor `url` is set".to_owned()),
    };
    let mut connection = Connection {
        service,
        tools: Vec::new(),
        tools_left_out: 0,
        tools_changed,
        child: Mutex::new(child),
        stderr,
        stderr_closed,
    };
    let mut tools = connection
        .peer()
        .list_all_tools()
        .await
        .map_err(|error| format!("listing its tools failed: {error}"))?;
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    connection.tools_left_out = tools.len().saturating_sub(MAX_TOOLS_PER_SERVER);
    tools.truncate(MAX_TOOLS_PER_SERVER);
    connection.tools = tools;
    Ok(connection)
}

async fn start_stdio(
    program: &str,
    config: &ServerConfig,
    env: &ServerEnv,
    handler: Handler,
    stderr_tail: &Arc<Mutex<VecDeque<u8>>>,
) -> Result<
    (
        RunningService<RoleClient, Handler>,
        ChildProcess,
        tokio::sync::watch::Receiver<bool>,
    ),
    String,
> {
    let mut command = Command::new(program);
    command
        .args(&config.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    confine_environment(
        &mut command,
        &env.passthrough,
        &Redactor::new(&env.secret_values),
    );
    command.envs(&config.env);
    let (mut child, group) = spawn_group(&mut command, |command| command.spawn())
        .map_err(|error| format!("`{program}` could not be started: {error}"))?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err("its stdin or stdout could not be connected".to_owned());
    };
    let (closed, stderr_closed) = tokio::sync::watch::channel(false);
    if let Some(mut stderr) = child.stderr.take() {
        let tail = Arc::clone(stderr_tail);
        tokio::spawn(async move {
            let mut buffer = [0_u8; 1024];
            while let Ok(read) = stderr.read(&mut buffer).await
                && read > 0
            {
                let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
                tail.extend(&buffer[..read]);
                let excess = tail.len().saturating_sub(KEPT_STDERR_BYTES);
                tail.drain(..excess);
            }
            let _ = closed.send(true);
        });
    }
    let process = ChildProcess {
        _child: child,
        _group: group,
    };
    match handler.serve((stdout, stdin)).await {
        Ok(service) => Ok((service, process, stderr_closed)),
        Err(error) => {
            drop(process);
            let said = {
                let tail = stderr_tail.lock().unwrap_or_else(PoisonError::into_inner);
                String::from_utf8_lossy(&tail.iter().copied().collect::<Vec<u8>>())
                    .trim()
                    .to_owned()
            };
            Err(with_stderr(
                format!("the MCP handshake with `{program}` failed: {error}"),
                &said,
            ))
        }
    }
}

async fn start_http(
    url: &str,
    config: &ServerConfig,
    handler: Handler,
) -> Result<RunningService<RoleClient, Handler>, String> {
    crate::util::install_crypto_provider();
    let mut headers = HashMap::new();
    for (name, value) in &config.headers {
        let name = http::HeaderName::try_from(name.as_str())
            .map_err(|_| format!("header `{name}` is not a valid header name"))?;
        let value = http::HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("the value of header `{name}` is not a valid header value"))?;
        headers.insert(name, value);
    }
    let client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|error| format!("no HTTP client: {error}"))?;
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers),
    );
    handler
        .serve(transport)
        .await
        .map_err(|error| format!("the MCP handshake with {url} failed: {error}"))
}

/// A message with what the server said on stderr, when it said anything.
pub fn with_stderr(message: String, said: &str) -> String {
    if said.is_empty() {
        message
    } else {
        format!("{message}; its stderr ended with: {said}")
    }
}
