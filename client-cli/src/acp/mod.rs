//! `cwcode-cli acp`: an Agent Client Protocol agent (protocol version 1) on stdin/stdout that
//! bridges editors (Zed, JetBrains, Neovim, Emacs, `acpx`) to the daemon (SPEC §9). Sessions
//! an editor opens are ordinary daemon sessions: the TUI attaches to them, they outlive the
//! editor, and `session/load` brings them back.
//!
//! Seams: [`sessions`] maps daemon sessions to ACP's (modes, the profile option, listing),
//! [`updates`] translates events into `session/update`s, [`permissions`] turns approvals into
//! `session/request_permission`, and [`feed`] follows one open session's events.

mod feed;
mod permissions;
mod sessions;
mod updates;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, EmbeddedResourceResource, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
    PromptCapabilities, PromptRequest, PromptResponse, SessionCapabilities,
    SessionConfigOptionValue, SessionListCapabilities, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol::{Agent, Error as AcpError, JsonRpcResponse, Stdio};
use cwcode_protocol::paths::Paths;
use cwcode_protocol::{
    Client, ClientError, ConnectOptions, CreateSessionParams, Mode, SessionInfo, TurnOutcome,
};

use feed::Feed;
use permissions::EditorConnection;

/// The largest prompt accepted from an editor, after embedded resources are inlined.
const MAX_PROMPT_BYTES: usize = 4 * 1024 * 1024;
/// Sessions one bridge follows at once; opening more closes the feed of another (the session
/// itself goes on in the daemon, and `session/load` brings it back).
const OPEN_SESSIONS: usize = 64;
/// JSON-RPC "internal error": the daemon could not be reached or failed outside its own codes.
const INTERNAL_ERROR: i32 = -32603;
const INVALID_PARAMS: i32 = -32602;

/// Serves ACP on stdin/stdout until the editor closes it.
pub async fn serve() -> anyhow::Result<()> {
    let bridge = Arc::new(Bridge {
        options: ConnectOptions::new(Paths::from_env()?),
        daemon: Mutex::new(None),
        feeds: Mutex::new(HashMap::new()),
    });
    Agent
        .v1()
        .name("cwcode")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                responder.respond(initialize(&request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = Arc::clone(&bridge);
                async move |request: NewSessionRequest, responder, cx: EditorConnection| {
                    let bridge = Arc::clone(&bridge);
                    let editor = cx.clone();
                    answer_later(&cx, responder, async move {
                        bridge.new_session(editor, request).await
                    })
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = Arc::clone(&bridge);
                async move |request: LoadSessionRequest, responder, cx: EditorConnection| {
                    let bridge = Arc::clone(&bridge);
                    let editor = cx.clone();
                    answer_later(&cx, responder, async move {
                        bridge.load_session(editor, request).await
                    })
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = Arc::clone(&bridge);
                async move |request: ListSessionsRequest, responder, cx: EditorConnection| {
                    let bridge = Arc::clone(&bridge);
                    answer_later(&cx, responder, async move {
                        bridge.list_sessions(request).await
                    })
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = Arc::clone(&bridge);
                async move |request: SetSessionModeRequest, responder, cx: EditorConnection| {
                    let bridge = Arc::clone(&bridge);
                    answer_later(
                        &cx,
                        responder,
                        async move { bridge.set_mode(request).await },
                    )
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = Arc::clone(&bridge);
                async move |request: SetSessionConfigOptionRequest,
                            responder,
                            cx: EditorConnection| {
                    let bridge = Arc::clone(&bridge);
                    answer_later(&cx, responder, async move {
                        bridge.set_config_option(request).await
                    })
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = Arc::clone(&bridge);
                async move |request: PromptRequest, responder, cx: EditorConnection| {
                    let bridge = Arc::clone(&bridge);
                    let editor = cx.clone();
                    answer_later(&cx, responder, async move {
                        bridge.prompt(editor, request).await
                    })
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            {
                let bridge = Arc::clone(&bridge);
                async move |notification: CancelNotification, cx: EditorConnection| {
                    let bridge = Arc::clone(&bridge);
                    cx.spawn(async move {
                        bridge.cancel(&notification.session_id.0).await;
                        Ok(())
                    })
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await
        .map_err(|error| anyhow::anyhow!("the ACP connection failed: {error}"))
}

/// Runs `work` off the dispatch loop, so that a long request (a prompt) never holds up the
/// others (a cancel), and answers with its result.
fn answer_later<T>(
    cx: &EditorConnection,
    responder: Responder<T>,
    work: impl Future<Output = Result<T, AcpError>> + Send + 'static,
) -> Result<(), AcpError>
where
    T: JsonRpcResponse + Send + 'static,
{
    cx.spawn(async move {
        match work.await {
            Ok(result) => responder.respond(result),
            Err(error) => responder.respond_with_error(error),
        }
    })
}

/// What cwcode can do, stated honestly: sessions load and list; prompts take text, resource
/// links and embedded text resources (no images, no audio); MCP servers come from cwcode's own
/// config, not the editor's. Version negotiation happens in the SDK before this: a client asking
/// for any other version is answered with 1, as the protocol prescribes, and may then disconnect.
fn initialize(_request: &InitializeRequest) -> InitializeResponse {
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
        .session_capabilities(SessionCapabilities::new().list(SessionListCapabilities::new()));
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(capabilities)
        .agent_info(Implementation::new("cwcode", env!("CARGO_PKG_VERSION")).title("cwcode"))
}

struct Bridge {
    options: ConnectOptions,
    /// The daemon connection, made on first use and made again after it broke.
    daemon: Mutex<Option<Arc<Client>>>,
    /// The sessions this editor has open, each followed by its feed.
    feeds: Mutex<HashMap<String, Arc<Feed>>>,
}

impl Bridge {
    /// The daemon, started when it is not running (as every cwcode client does).
    async fn daemon(&self) -> Result<Arc<Client>, AcpError> {
        if let Some(client) = self.daemon.lock().ok().and_then(|slot| slot.clone()) {
            return Ok(client);
        }
        let client = Arc::new(Client::connect(&self.options).await.map_err(daemon_error)?);
        if let Ok(mut slot) = self.daemon.lock() {
            match &*slot {
                Some(existing) => return Ok(Arc::clone(existing)),
                None => *slot = Some(Arc::clone(&client)),
            }
        }
        Ok(client)
    }

    /// After a failed call: a broken connection is dropped so the next call makes a new one.
    fn check(&self, error: ClientError) -> AcpError {
        if !matches!(error, ClientError::Rpc { .. })
            && let Ok(mut slot) = self.daemon.lock()
        {
            *slot = None;
        }
        daemon_error(error)
    }

    async fn session(&self, session_id: &str) -> Result<(Arc<Client>, SessionInfo), AcpError> {
        let daemon = self.daemon().await?;
        let info = daemon
            .get_session(session_id)
            .await
            .map_err(|error| self.check(error))?;
        Ok((daemon, info))
    }

    async fn new_session(
        &self,
        editor: EditorConnection,
        request: NewSessionRequest,
    ) -> Result<NewSessionResponse, AcpError> {
        let cwd = workspace(&request.cwd)?;
        let daemon = self.daemon().await?;
        let info = daemon
            .create_session(&CreateSessionParams {
                cwd,
                ..CreateSessionParams::default()
            })
            .await
            .map_err(|error| self.check(error))?;
        self.follow(editor, Arc::clone(&daemon), &info, false)
            .await?;
        let profiles = daemon.list_profiles().await.unwrap_or_default();
        Ok(NewSessionResponse::new(info.id.clone())
            .modes(sessions::mode_state(info.mode))
            .config_options(sessions::config_options(&info.profile, &profiles)))
    }

    async fn load_session(
        &self,
        editor: EditorConnection,
        request: LoadSessionRequest,
    ) -> Result<LoadSessionResponse, AcpError> {
        let (daemon, info) = self.session(&request.session_id.0).await?;
        if let Some(problem) = &info.damaged {
            return Err(AcpError::new(INTERNAL_ERROR, problem.clone()));
        }
        let feed = self
            .follow(editor, Arc::clone(&daemon), &info, true)
            .await?;
        feed.caught_up()
            .await
            .map_err(|reason| AcpError::new(INTERNAL_ERROR, reason))?;
        let profiles = daemon.list_profiles().await.unwrap_or_default();
        Ok(LoadSessionResponse::new()
            .modes(sessions::mode_state(info.mode))
            .config_options(sessions::config_options(&info.profile, &profiles)))
    }

    /// Opens a feed for `info`, replacing any this editor had for it.
    async fn follow(
        &self,
        editor: EditorConnection,
        daemon: Arc<Client>,
        info: &SessionInfo,
        replay: bool,
    ) -> Result<Arc<Feed>, AcpError> {
        let feed = Feed::open(editor, daemon, info, replay)
            .await
            .map_err(|error| self.check(error))?;
        if let Ok(mut feeds) = self.feeds.lock() {
            if feeds.len() >= OPEN_SESSIONS && !feeds.contains_key(&info.id) {
                let evicted = feeds.keys().find(|id| **id != info.id).cloned();
                if let Some(evicted) = evicted {
                    feeds.remove(&evicted);
                }
            }
            feeds.insert(info.id.clone(), Arc::clone(&feed));
        }
        Ok(feed)
    }

    async fn list_sessions(
        &self,
        request: ListSessionsRequest,
    ) -> Result<ListSessionsResponse, AcpError> {
        let daemon = self.daemon().await?;
        let all = daemon
            .list_sessions()
            .await
            .map_err(|error| self.check(error))?;
        let mut sessions = sessions::newest_first(all);
        if let Some(cwd) = &request.cwd {
            sessions.retain(|session| sessions::in_workspace(session, cwd));
        }
        let (start, end) = sessions::page(&sessions, request.cursor.as_deref())
            .map_err(|message| AcpError::new(INVALID_PARAMS, message))?;
        let mut listed = Vec::with_capacity(end - start);
        for session in &sessions[start..end] {
            let title = self.title(&daemon, session).await;
            listed.push(sessions::listed(session, title));
        }
        let next = (end < sessions.len()).then(|| end.to_string());
        Ok(ListSessionsResponse::new(listed).next_cursor(next))
    }

    /// The session's own title, else its first prompt's first line, else its id.
    async fn title(&self, daemon: &Client, session: &SessionInfo) -> String {
        if !sessions::has_default_title(session) {
            return session.title.clone();
        }
        let first_prompt = match daemon.checkpoints(&session.id).await {
            Ok(checkpoints) => checkpoints
                .into_iter()
                .min_by_key(|checkpoint| checkpoint.turn)
                .and_then(|checkpoint| sessions::title_from_prompt(&checkpoint.prompt)),
            Err(_) => None,
        };
        first_prompt.unwrap_or_else(|| session.id.clone())
    }

    async fn set_mode(
        &self,
        request: SetSessionModeRequest,
    ) -> Result<SetSessionModeResponse, AcpError> {
        let mode: Mode =
            request
                .mode_id
                .0
                .parse()
                .map_err(|error: cwcode_protocol::UnknownMode| {
                    AcpError::new(INVALID_PARAMS, error.to_string())
                })?;
        let daemon = self.daemon().await?;
        daemon
            .set_mode(&request.session_id.0, mode)
            .await
            .map_err(|error| self.check(error))?;
        Ok(SetSessionModeResponse::new())
    }

    async fn set_config_option(
        &self,
        request: SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, AcpError> {
        if &*request.config_id.0 != sessions::PROFILE_OPTION {
            return Err(AcpError::new(
                INVALID_PARAMS,
                format!(
                    "unknown config option `{}`: cwcode offers only `{}`",
                    request.config_id.0,
                    sessions::PROFILE_OPTION
                ),
            ));
        }
        let SessionConfigOptionValue::ValueId { value } = &request.value else {
            return Err(AcpError::new(
                INVALID_PARAMS,
                "the profile option takes a profile name, not a boolean",
            ));
        };
        let daemon = self.daemon().await?;
        let info = daemon
            .set_profile(&request.session_id.0, &value.0)
            .await
            .map_err(|error| self.check(error))?;
        let profiles = daemon.list_profiles().await.unwrap_or_default();
        Ok(SetSessionConfigOptionResponse::new(
            sessions::config_options(&info.profile, &profiles),
        ))
    }

    async fn cancel(&self, session_id: &str) {
        if let Ok(daemon) = self.daemon().await
            && let Err(error) = daemon.cancel(session_id).await
        {
            let _ = self.check(error);
        }
    }

    async fn prompt(
        &self,
        editor: EditorConnection,
        request: PromptRequest,
    ) -> Result<PromptResponse, AcpError> {
        let text = prompt_text(&request.prompt)?;
        let session_id = request.session_id.0.to_string();
        let open = self
            .feeds
            .lock()
            .ok()
            .and_then(|feeds| feeds.get(&session_id).cloned())
            .filter(|feed| feed.is_open());
        let feed = match open {
            Some(feed) => feed,
            // Not opened by this editor yet, or its feed broke (the daemon restarted): follow
            // it from now on.
            None => {
                let (daemon, info) = self.session(&session_id).await?;
                self.follow(editor, daemon, &info, false).await?
            }
        };
        let daemon = self.daemon().await?;
        feed.sending(&text);
        let sent = daemon
            .send(&session_id, &text)
            .await
            .map_err(|error| self.check(error))?;
        let end = feed.turn_end(sent.turn).await.map_err(|reason| {
            AcpError::new(
                INTERNAL_ERROR,
                format!("the prompt did not finish: {reason}"),
            )
        })?;
        stop_reason(&end).map(PromptResponse::new)
    }
}

/// How a turn's end reads to the editor. A failure or an interruption is an error with the
/// daemon's reason, not a silent stop.
fn stop_reason(end: &feed::TurnEnd) -> Result<StopReason, AcpError> {
    match end.outcome {
        TurnOutcome::Completed => Ok(StopReason::EndTurn),
        TurnOutcome::Cancelled => Ok(StopReason::Cancelled),
        // The storm-breaker ended a loop of identical failing calls: the turn hit a limit on
        // the requests it may make.
        TurnOutcome::StormBroken => Ok(StopReason::MaxTurnRequests),
        TurnOutcome::Failed => Err(AcpError::new(
            INTERNAL_ERROR,
            format!(
                "the turn failed: {}",
                end.error.as_deref().unwrap_or("cwcoded gave no reason")
            ),
        )),
        TurnOutcome::Interrupted => Err(AcpError::new(
            INTERNAL_ERROR,
            "cwcoded stopped while the turn ran; it is marked interrupted: send the prompt again \
             once the daemon runs",
        )),
    }
}

/// The workspace an editor names: ACP requires an absolute path.
fn workspace(cwd: &Path) -> Result<String, AcpError> {
    if !cwd.is_absolute() {
        return Err(AcpError::new(
            INVALID_PARAMS,
            format!("cwd `{}` is not an absolute path", cwd.display()),
        ));
    }
    Ok(cwd.display().to_string())
}

/// The prompt as the text the daemon takes: text as is, resource links as links, embedded text
/// resources inlined with their URI. Images, audio and binary resources are refused, as the
/// capabilities announced.
fn prompt_text(blocks: &[ContentBlock]) -> Result<String, AcpError> {
    let mut text = String::new();
    for block in blocks {
        match block {
            ContentBlock::Text(part) => text.push_str(&part.text),
            ContentBlock::ResourceLink(link) => {
                text.push_str(&format!("[{}]({})", link.name, link.uri));
            }
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(contents) => {
                    text.push_str(&format!(
                        "\n\n<resource uri=\"{}\">\n{}\n</resource>\n",
                        contents.uri, contents.text
                    ));
                }
                _ => return Err(unsupported("binary embedded resources")),
            },
            ContentBlock::Image(_) => return Err(unsupported("images")),
            ContentBlock::Audio(_) => return Err(unsupported("audio")),
            _ => return Err(unsupported("this kind of content block")),
        }
        if text.len() > MAX_PROMPT_BYTES {
            return Err(AcpError::new(
                INVALID_PARAMS,
                format!(
                    "the prompt is over {} MiB: attach less, or link files instead of embedding them",
                    MAX_PROMPT_BYTES >> 20
                ),
            ));
        }
    }
    if text.trim().is_empty() {
        return Err(AcpError::new(INVALID_PARAMS, "the prompt is empty"));
    }
    Ok(text)
}

fn unsupported(what: &str) -> AcpError {
    AcpError::new(
        INVALID_PARAMS,
        format!(
            "cwcode does not take {what} in a prompt: send text, resource links or embedded text \
             resources"
        ),
    )
}

/// A daemon error as the editor sees it: the daemon's own JSON-RPC code and message, or an
/// internal error that says the daemon could not be reached.
fn daemon_error(error: ClientError) -> AcpError {
    match error {
        ClientError::Rpc { code, message, .. } => AcpError::new(code, message),
        other => AcpError::new(INTERNAL_ERROR, format!("cwcoded: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{ResourceLink, TextContent};

    #[test]
    fn capabilities_are_stated_honestly() {
        let ok = initialize(&InitializeRequest::new(ProtocolVersion::V1));
        let json = serde_json::to_value(&ok).unwrap();
        assert_eq!(json["protocolVersion"], 1);
        assert_eq!(json["agentCapabilities"]["loadSession"], true);
        assert_eq!(
            json["agentCapabilities"]["promptCapabilities"]["image"],
            false
        );
        assert_eq!(json["agentInfo"]["name"], "cwcode");
        assert_eq!(
            json["agentCapabilities"]["sessionCapabilities"]["list"],
            serde_json::json!({})
        );
    }

    #[test]
    fn prompts_take_text_and_links_and_refuse_images() {
        let text = prompt_text(&[
            ContentBlock::Text(TextContent::new("look at ")),
            ContentBlock::ResourceLink(ResourceLink::new("a.rs", "file:///w/a.rs")),
        ])
        .unwrap();
        assert_eq!(text, "look at [a.rs](file:///w/a.rs)");
        let empty = prompt_text(&[ContentBlock::Text(TextContent::new("  "))]).unwrap_err();
        assert!(empty.message.contains("empty"));
    }

    #[test]
    fn failures_are_errors_and_storms_a_request_limit() {
        let end = |outcome| feed::TurnEnd {
            outcome,
            error: Some("provider said no".into()),
        };
        assert_eq!(
            stop_reason(&end(TurnOutcome::Completed)).unwrap(),
            StopReason::EndTurn
        );
        assert_eq!(
            stop_reason(&end(TurnOutcome::Cancelled)).unwrap(),
            StopReason::Cancelled
        );
        assert_eq!(
            stop_reason(&end(TurnOutcome::StormBroken)).unwrap(),
            StopReason::MaxTurnRequests
        );
        let failed = stop_reason(&end(TurnOutcome::Failed)).unwrap_err();
        assert!(failed.message.contains("provider said no"));
    }
}
