//! MCP servers (SPEC §7.4): the servers of `config.json`'s `mcp_servers`, started when a session
//! first needs them, once per daemon and shared by every session; their tools, named
//! `server__tool`, for the tool registry. A server that fails to start, dies or hangs is reported
//! (`doctor`, `daemon/info`) and answers its calls with an error the model can act on; it never
//! takes a turn or the daemon down. Stdio servers lead their own tagged process group (as tool
//! commands do), killed when the connection is dropped, at daemon shutdown, or by the next
//! daemon if this one crashed.

pub mod config;
mod connect;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cwcode_protocol::types::McpServerStatus;
use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    ServerResult,
};
use rmcp::service::{PeerRequestOptions, RequestHandle};
use serde_json::{Map, Value};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

pub use config::ServerConfig;
pub use connect::ServerEnv;
use connect::{Connection, with_stderr};

/// How long a server may take to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// A failed or dead server is started again no sooner than this after its last attempt.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// Providers accept function names of at most this many characters.
const MAX_TOOL_NAME_CHARS: usize = 64;
/// The separator between a server's name and its tool's.
const SEPARATOR: &str = "__";
/// How long telling a server that a call was cancelled may take before it is given up.
const CANCEL_NOTICE_TIMEOUT: Duration = Duration::from_secs(2);

/// Every server this daemon has started, by name.
#[derive(Default)]
pub struct McpServers {
    slots: Mutex<BTreeMap<String, Arc<Slot>>>,
}

/// One server and its current start attempt.
struct Slot {
    name: String,
    config: ServerConfig,
    env: ServerEnv,
    attempt: Mutex<Arc<Attempt>>,
}

/// One start of a server: its outcome once known.
struct Attempt {
    started: Instant,
    outcome: OnceCell<Result<Arc<Connection>, String>>,
}

impl Attempt {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            outcome: OnceCell::new(),
        })
    }
}

impl Slot {
    fn current(&self) -> Arc<Attempt> {
        Arc::clone(&self.attempt.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The live connection, starting the server when it never started, or when it failed or
    /// died at least [`RETRY_AFTER`] ago.
    async fn connection(&self) -> Result<Arc<Connection>, String> {
        let mut attempt = self.current();
        let unusable = match attempt.outcome.get() {
            Some(Ok(connection)) => connection.is_closed(),
            Some(Err(_)) => true,
            None => false,
        };
        if unusable && attempt.started.elapsed() >= RETRY_AFTER {
            let mut current = self.attempt.lock().unwrap_or_else(PoisonError::into_inner);
            if Arc::ptr_eq(&current, &attempt) {
                *current = Attempt::new();
            }
            attempt = Arc::clone(&current);
        }
        let outcome = attempt
            .outcome
            .get_or_init(|| async {
                match tokio::time::timeout(START_TIMEOUT, connect::connect(&self.config, &self.env))
                    .await
                {
                    Ok(Ok(connection)) => {
                        tracing::info!(server = %self.name, tools = connection.tools.len(), "MCP server started");
                        Ok(Arc::new(connection))
                    }
                    Ok(Err(reason)) => Err(reason),
                    Err(_) => Err(format!(
                        "it did not start and list its tools within {} s",
                        START_TIMEOUT.as_secs()
                    )),
                }
            })
            .await;
        match outcome {
            Ok(connection) if connection.is_closed() => Err(with_stderr(
                "it exited".to_owned(),
                &connection.stderr_tail(),
            )),
            Ok(connection) => Ok(Arc::clone(connection)),
            Err(reason) => {
                tracing::warn!(server = %self.name, %reason, "MCP server unavailable");
                Err(reason.clone())
            }
        }
    }

    fn status(&self) -> McpServerStatus {
        let (state, tools, problem) = match self.current().outcome.get() {
            None => ("starting", 0, None),
            Some(Ok(connection)) if connection.is_closed() => (
                "exited",
                0,
                Some(with_stderr(
                    "it exited; it is started again when a call or a new session needs it"
                        .to_owned(),
                    &connection.stderr_tail(),
                )),
            ),
            Some(Ok(connection)) => (
                "running",
                connection.tools.len(),
                (connection.tools_left_out > 0).then(|| {
                    format!(
                        "{} tools beyond the first {} are not offered",
                        connection.tools_left_out,
                        connect::MAX_TOOLS_PER_SERVER
                    )
                }),
            ),
            Some(Err(reason)) => ("failed", 0, Some(reason.clone())),
        };
        McpServerStatus {
            name: self.name.clone(),
            transport: self.config.transport().as_str().to_owned(),
            state: state.to_owned(),
            tools,
            problem,
        }
    }
}

impl McpServers {
    /// The tools a new session gets from the configured servers, in name order, each server
    /// started first if it is not running. A server that cannot start adds nothing (its state is
    /// in [`McpServers::report`]); a server no longer configured is stopped.
    pub async fn session_tools(
        &self,
        configs: &BTreeMap<String, ServerConfig>,
        env: &ServerEnv,
    ) -> Vec<McpTool> {
        let slots: Vec<Arc<Slot>> = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.retain(|name, slot| {
                let keep = configs.get(name) == Some(&slot.config);
                if !keep && let Some(Ok(connection)) = slot.current().outcome.get() {
                    connection.kill();
                }
                keep
            });
            configs
                .iter()
                .map(|(name, config)| {
                    Arc::clone(slots.entry(name.clone()).or_insert_with(|| {
                        Arc::new(Slot {
                            name: name.clone(),
                            config: config.clone(),
                            env: env.clone(),
                            attempt: Mutex::new(Attempt::new()),
                        })
                    }))
                })
                .collect()
        };
        let connections =
            futures::future::join_all(slots.iter().map(|slot| slot.connection())).await;
        let mut tools: Vec<McpTool> = slots
            .iter()
            .zip(connections)
            .filter_map(|(slot, connection)| Some((slot, connection.ok()?)))
            .flat_map(|(slot, connection)| {
                connection
                    .tools
                    .iter()
                    .map(|tool| McpTool::new(slot, tool))
                    .collect::<Vec<_>>()
            })
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools.dedup_by(|a, b| a.name == b.name);
        tools
    }

    /// Each configured server's state, in name order; one no session has needed yet is
    /// `not_started`.
    pub fn report(&self, configs: &BTreeMap<String, ServerConfig>) -> Vec<McpServerStatus> {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        configs
            .iter()
            .map(|(name, config)| match slots.get(name) {
                Some(slot) if slot.config == *config => slot.status(),
                _ => McpServerStatus {
                    name: name.clone(),
                    transport: config.transport().as_str().to_owned(),
                    state: "not_started".to_owned(),
                    tools: 0,
                    problem: None,
                },
            })
            .collect()
    }

    /// Stops every server: stdio servers' process groups are killed.
    pub fn shutdown(&self) {
        let slots = std::mem::take(&mut *self.slots.lock().unwrap_or_else(PoisonError::into_inner));
        for slot in slots.values() {
            if let Some(Ok(connection)) = slot.current().outcome.get() {
                connection.kill();
            }
        }
    }
}

/// One tool of a server, as a session offers it.
#[derive(Clone)]
pub struct McpTool {
    slot: Arc<Slot>,
    /// `server__tool`, cut to what providers accept.
    pub name: String,
    remote_name: String,
    pub description: String,
    /// The server's input schema, keys sorted so that every request carries the same bytes.
    pub parameters: Value,
    /// Marked read-only (`readOnlyHint`) by the server; anything else counts as mutating.
    pub read_only: bool,
}

impl McpTool {
    /// A tool of a server named `srv` that was never started, for the registry's tests.
    #[cfg(test)]
    pub(crate) fn unstarted(name: &str, read_only: bool) -> Self {
        let slot = Arc::new(Slot {
            name: "srv".to_owned(),
            config: ServerConfig::default(),
            env: ServerEnv::default(),
            attempt: Mutex::new(Attempt::new()),
        });
        let tool: rmcp::model::Tool = serde_json::from_value(serde_json::json!({
            "name": name,
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": read_only},
        }))
        .unwrap();
        Self::new(&slot, &tool)
    }

    fn new(slot: &Arc<Slot>, tool: &rmcp::model::Tool) -> Self {
        let safe: String = tool
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let name: String = format!("{}{SEPARATOR}{safe}", slot.name)
            .chars()
            .take(MAX_TOOL_NAME_CHARS)
            .collect();
        let mut parameters = Value::Object(tool.input_schema.as_ref().clone());
        if let Some(object) = parameters.as_object_mut() {
            object.remove("$schema");
        }
        Self {
            slot: Arc::clone(slot),
            name,
            remote_name: tool.name.to_string(),
            description: tool.description.as_deref().unwrap_or_default().to_owned(),
            parameters: cwcode_protocol::schema::sorted_keys(parameters),
            read_only: tool
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.read_only_hint)
                .unwrap_or(false),
        }
    }

    /// Calls the tool with the model's arguments. Every failure is a message for the model: the
    /// server's own error, or that the server is down, hung or exited during the call.
    pub async fn call(
        &self,
        arguments: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let server = &self.slot.name;
        let unavailable = |reason: String| {
            format!(
                "MCP server `{server}` is unavailable: {reason}. Its tools cannot be used now: go \
                 on without them, or tell the user (`cwcode-cli doctor` shows the server's state)"
            )
        };
        let connection = self.slot.connection().await.map_err(unavailable)?;
        let mut request = CallToolRequestParams::new(self.remote_name.clone());
        request.arguments = Some(arguments);
        let timeout = self.slot.config.call_timeout();
        let result = match InFlight::send(connection.peer(), request).await {
            Ok(mut call) => tokio::select! {
                () = cancel.cancelled() => {
                    call.cancel("the user cancelled the turn".to_owned()).await;
                    return Err("cancelled".to_owned());
                }
                result = tokio::time::timeout(timeout, call.answer()) => {
                    if result.is_err() {
                        call.cancel(format!(
                            "cwcode stopped waiting: no answer within {} s",
                            timeout.as_secs()
                        ))
                        .await;
                    }
                    result
                }
            },
            Err(error) => Ok(Err(error)),
        };
        let mut text = match result {
            Err(_) => {
                return Err(format!(
                    "MCP server `{server}` did not answer `{}` within {} s; the call was \
                     abandoned. Try once more with a smaller request, or go on without it",
                    self.remote_name,
                    timeout.as_secs()
                ));
            }
            Ok(Err(error @ rmcp::ServiceError::TransportClosed)) => {
                connection.settle_exit().await;
                return Err(unavailable(with_stderr(
                    format!("it exited during the call ({error})"),
                    &connection.stderr_tail(),
                )));
            }
            Ok(Err(rmcp::ServiceError::McpError(error))) => {
                return Err(format!("`{}` failed: {}", self.remote_name, error.message));
            }
            Ok(Err(error)) => return Err(unavailable(error.to_string())),
            Ok(Ok(result)) if result.is_error == Some(true) => {
                return Err(result_text(result));
            }
            Ok(Ok(result)) => result_text(result),
        };
        if connection.tools_changed() {
            text.push_str(&format!(
                "\n[cwcode] MCP server `{server}` changed its tool list after this session \
                 started; this session keeps the tools it started with, a new session gets the \
                 new list."
            ));
        }
        Ok(text)
    }
}

/// A `tools/call` sent and not yet answered. Given up on, it tells the server to stop working on
/// it (`notifications/cancelled`, MCP's cancellation), saying why: explicitly on a cancel or a
/// timeout, from `Drop` when the call is abandoned any other way.
struct InFlight {
    handle: Option<RequestHandle<RoleClient>>,
}

impl InFlight {
    async fn send(
        peer: &rmcp::Peer<RoleClient>,
        params: CallToolRequestParams,
    ) -> Result<Self, rmcp::ServiceError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await?;
        Ok(Self {
            handle: Some(handle),
        })
    }

    /// The server's answer. Cancel-safe: dropped before the answer, the call stays in flight.
    async fn answer(&mut self) -> Result<CallToolResult, rmcp::ServiceError> {
        let Some(handle) = self.handle.as_mut() else {
            return Err(rmcp::ServiceError::TransportClosed);
        };
        let answer = (&mut handle.rx).await;
        self.handle = None;
        match answer.map_err(|_| rmcp::ServiceError::TransportClosed)?? {
            ServerResult::CallToolResult(result) => Ok(result),
            ServerResult::EmptyResult(_) => Ok(CallToolResult::default()),
            _ => Err(rmcp::ServiceError::UnexpectedResponse),
        }
    }

    /// Tells the server, when the call is still unanswered. Bounded: a server that stopped
    /// reading cannot hold the turn.
    async fn cancel(&mut self, reason: String) {
        if let Some(handle) = self.handle.take() {
            notify_cancelled(handle, reason).await;
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(notify_cancelled(
                handle,
                "cwcode abandoned the call".to_owned(),
            ));
        }
    }
}

async fn notify_cancelled(handle: RequestHandle<RoleClient>, reason: String) {
    let id = handle.id.clone();
    match tokio::time::timeout(CANCEL_NOTICE_TIMEOUT, handle.cancel(Some(reason))).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            tracing::debug!(%id, %error, "cannot tell the MCP server a call was cancelled")
        }
        Err(_) => tracing::debug!(%id, "telling the MCP server a call was cancelled took too long"),
    }
}

/// The text of a result: text blocks as they are, other content named by its kind and size.
fn result_text(result: CallToolResult) -> String {
    let parts: Vec<String> = result
        .content
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text,
            ContentBlock::Image(image) => format!(
                "[{} image, {} bytes of base64 left out]",
                image.mime_type,
                image.data.len()
            ),
            other => describe(serde_json::to_value(other).unwrap_or_default()),
        })
        .collect();
    if parts.is_empty()
        && let Some(structured) = result.structured_content
    {
        return structured.to_string();
    }
    parts.join("\n")
}

/// Audio, embedded resources and resource links: their text where there is one, else what
/// they are.
fn describe(block: Value) -> String {
    let resource = block.get("resource").unwrap_or(&block);
    if let Some(text) = resource.get("text").and_then(Value::as_str) {
        return text.to_owned();
    }
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("content");
    match resource.get("uri").and_then(Value::as_str) {
        Some(uri) => format!("[{kind}: {uri}]"),
        None => format!("[{kind} left out]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_text_and_name_what_they_leave_out() {
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [
                {"type": "text", "text": "first"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://a", "text": "inline text"}},
                {"type": "resource_link", "uri": "test://b", "name": "b"},
            ]
        }))
        .unwrap();
        assert_eq!(
            result_text(result),
            "first\n[image/png image, 8 bytes of base64 left out]\ninline text\n[resource_link: test://b]"
        );
        let structured: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [], "structuredContent": {"sum": 3}
        }))
        .unwrap();
        assert_eq!(result_text(structured), r#"{"sum":3}"#);
    }

    #[test]
    fn tool_names_are_prefixed_made_safe_and_bounded() {
        let slot = Arc::new(Slot {
            name: "srv".to_owned(),
            config: ServerConfig::default(),
            env: ServerEnv::default(),
            attempt: Mutex::new(Attempt::new()),
        });
        let tool = |name: &str, read_only: Option<bool>| -> rmcp::model::Tool {
            serde_json::from_value(serde_json::json!({
                "name": name,
                "inputSchema": {"type": "object", "properties": {"b": {}, "a": {}}},
                "annotations": {"readOnlyHint": read_only},
            }))
            .unwrap()
        };
        let plain = McpTool::new(&slot, &tool("get.sum", Some(true)));
        assert_eq!(plain.name, "srv__get_sum");
        assert!(plain.read_only);
        assert_eq!(
            plain.parameters.to_string(),
            r#"{"properties":{"a":{},"b":{}},"type":"object"}"#
        );
        let long = McpTool::new(&slot, &tool(&"x".repeat(100), None));
        assert_eq!(long.name.len(), MAX_TOOL_NAME_CHARS);
        assert!(!long.read_only, "unmarked tools count as mutating");
    }
}
