//! One open session's feed: a subscription to the daemon's events for as long as the editor has
//! the session open, translated into `session/update`s. It replays the journal on
//! `session/load`, then goes live; it tells waiting prompts how their turns ended, asks the
//! editor about approvals, and reports usage after each turn. Turns started from other clients
//! (TUI, CLI) show in the editor too.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, Cost, SessionNotification, SessionUpdate, UsageUpdate,
};
use cwcode_protocol::client::EventStream;
use cwcode_protocol::{Client, Event, EventKind, ProfileInfo, SessionInfo, TurnOutcome, Usage};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::permissions::{self, EditorConnection, OpenRequests};
use super::sessions;
use super::updates::Translator;

/// Turn ends kept for prompts that have not looked yet (a fast turn may end before the prompt
/// learns its number); older ones are dropped.
const ENDS_KEPT: usize = 32;
/// Prompts this bridge sent whose echo (the turn's `turn_started`) is still to come.
const OWN_PROMPTS_KEPT: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEnd {
    pub outcome: TurnOutcome,
    pub error: Option<String>,
}

#[derive(Debug, Default)]
struct FeedState {
    ends: BTreeMap<u32, TurnEnd>,
    /// The journal has been replayed up to where the session stood when the feed opened.
    caught_up: bool,
    /// Why the feed stopped; nothing more will come.
    closed: Option<String>,
}

pub struct Feed {
    state: watch::Sender<FeedState>,
    own_prompts: Arc<Mutex<VecDeque<String>>>,
    task: JoinHandle<()>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Feed {
    /// Subscribes to `session`'s events. With `replay`, the whole journal is sent to the editor
    /// first ([`Feed::caught_up`] says when); otherwise only what happens from now on.
    pub async fn open(
        editor: EditorConnection,
        daemon: Arc<Client>,
        session: &SessionInfo,
        replay: bool,
    ) -> Result<Arc<Self>, cwcode_protocol::ClientError> {
        let since = if replay { 0 } else { session.last_seq };
        let stream = daemon.subscribe(&session.id, Some(since)).await?;
        let profiles = daemon.list_profiles().await.unwrap_or_default();
        let state = watch::Sender::new(FeedState {
            caught_up: since >= session.last_seq,
            ..FeedState::default()
        });
        let own_prompts = Arc::new(Mutex::new(VecDeque::new()));
        let runner = Runner {
            editor,
            daemon,
            session_id: session.id.clone(),
            profile: session.profile.clone(),
            profiles,
            translator: Translator::new(&session.cwd),
            replay_end: session.last_seq,
            pending: HashMap::new(),
            open: OpenRequests::default(),
            state: state.clone(),
            own_prompts: Arc::clone(&own_prompts),
        };
        let task = tokio::spawn(runner.run(stream));
        Ok(Arc::new(Self {
            state,
            own_prompts,
            task,
        }))
    }

    /// Whether the feed still follows the session.
    pub fn is_open(&self) -> bool {
        self.state.borrow().closed.is_none()
    }

    /// Marks a prompt as sent from this editor, so its echo is not shown back to it.
    pub fn sending(&self, prompt: &str) {
        if let Ok(mut own) = self.own_prompts.lock() {
            if own.len() >= OWN_PROMPTS_KEPT {
                own.pop_front();
            }
            own.push_back(prompt.to_owned());
        }
    }

    /// Waits until the replay has been sent; `Err` says why the feed stopped first.
    pub async fn caught_up(&self) -> Result<(), String> {
        let mut state = self.state.subscribe();
        let state = state
            .wait_for(|state| state.caught_up || state.closed.is_some())
            .await
            .map_err(|_| "the session feed stopped".to_owned())?;
        match &state.closed {
            Some(reason) if !state.caught_up => Err(reason.clone()),
            _ => Ok(()),
        }
    }

    /// Waits for turn `turn` to end; `Err` says why the feed stopped first.
    pub async fn turn_end(&self, turn: u32) -> Result<TurnEnd, String> {
        let mut state = self.state.subscribe();
        let state = state
            .wait_for(|state| state.ends.contains_key(&turn) || state.closed.is_some())
            .await
            .map_err(|_| "the session feed stopped".to_owned())?;
        match (state.ends.get(&turn), &state.closed) {
            (Some(end), _) => Ok(end.clone()),
            (None, Some(reason)) => Err(reason.clone()),
            (None, None) => Err("the session feed stopped".to_owned()),
        }
    }
}

/// A pending approval seen during replay: asked about once the replay is over, if still open.
struct Pending {
    call_id: String,
    tool: String,
    arguments: String,
    suggested_pattern: Option<String>,
}

struct Runner {
    editor: EditorConnection,
    daemon: Arc<Client>,
    session_id: String,
    profile: String,
    profiles: Vec<ProfileInfo>,
    translator: Translator,
    replay_end: u64,
    /// Approvals requested during replay and not resolved (yet), by request id.
    pending: HashMap<String, Pending>,
    open: OpenRequests,
    state: watch::Sender<FeedState>,
    own_prompts: Arc<Mutex<VecDeque<String>>>,
}

impl Runner {
    async fn run(mut self, mut stream: EventStream) {
        let reason = loop {
            let event = match stream.next().await {
                Some(Ok(event)) => event,
                Some(Err(error)) => break format!("the event stream from cwcoded failed: {error}"),
                None => {
                    break "the connection to cwcoded closed (the daemon stopped or crashed); \
                           a turn it was running is marked interrupted: load the session again \
                           once cwcoded runs"
                        .to_owned();
                }
            };
            if let EventKind::SubscriptionEnded { reason, .. } = &event.kind {
                break format!("cwcoded ended the session's event stream: {reason}");
            }
            if self.event(&event).await.is_err() {
                break "the editor closed the connection".to_owned();
            }
        };
        self.state.send_modify(|state| state.closed = Some(reason));
    }

    fn replaying(&self) -> bool {
        !self.state.borrow().caught_up
    }

    /// `Err` when the editor is gone.
    async fn event(&mut self, event: &Event) -> Result<(), agent_client_protocol::Error> {
        let replaying = self.replaying();
        // A sub-agent's text is not the agent's message: its `task` call's result is.
        let mut updates = if event.is_sub_agent_text() {
            Vec::new()
        } else {
            self.translator.translate(&event.kind)
        };
        if !replaying
            && let EventKind::TurnStarted { prompt, .. } = &event.kind
            && self.own_echo(prompt)
        {
            updates.clear();
        }
        for update in updates {
            self.send(update)?;
        }
        match &event.kind {
            EventKind::ApprovalRequested {
                request_id,
                call_id,
                tool,
                arguments,
                suggested_pattern,
            } => {
                let pending = Pending {
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    suggested_pattern: suggested_pattern.clone(),
                };
                if replaying {
                    self.pending.insert(request_id.clone(), pending);
                } else {
                    self.ask(request_id, &pending);
                }
            }
            EventKind::ApprovalResolved { request_id, .. } => {
                self.pending.remove(request_id);
                self.open.resolved(request_id);
            }
            EventKind::ProfileChanged { profile } => {
                self.profile = profile.clone();
                if let Ok(profiles) = self.daemon.list_profiles().await {
                    self.profiles = profiles;
                }
                let options = sessions::config_options(&self.profile, &self.profiles);
                self.send(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                    options,
                )))?;
            }
            EventKind::TurnFinished {
                turn,
                outcome,
                usage,
                error,
            } if !replaying => {
                let update = self.usage(*turn, usage).await;
                self.send(update)?;
                let end = TurnEnd {
                    outcome: *outcome,
                    error: error.clone(),
                };
                self.state.send_modify(|state| {
                    state.ends.insert(*turn, end);
                    while state.ends.len() > ENDS_KEPT {
                        state.ends.pop_first();
                    }
                });
            }
            _ => {}
        }
        if replaying && event.seq >= self.replay_end {
            self.state.send_modify(|state| state.caught_up = true);
            let pending: Vec<(String, Pending)> = self.pending.drain().collect();
            for (request_id, pending) in pending {
                self.ask(&request_id, &pending);
            }
        }
        Ok(())
    }

    fn own_echo(&self, prompt: &str) -> bool {
        let Ok(mut own) = self.own_prompts.lock() else {
            return false;
        };
        match own.iter().position(|sent| sent == prompt) {
            Some(index) => {
                own.remove(index);
                true
            }
            None => false,
        }
    }

    fn send(&self, update: SessionUpdate) -> Result<(), agent_client_protocol::Error> {
        self.editor
            .send_notification(SessionNotification::new(self.session_id.clone(), update))
    }

    fn ask(&self, request_id: &str, pending: &Pending) {
        let request = permissions::request(
            &self.session_id,
            &pending.call_id,
            &pending.tool,
            &pending.arguments,
            pending.suggested_pattern.as_deref(),
        );
        tokio::spawn(permissions::ask(
            self.editor.clone(),
            Arc::clone(&self.daemon),
            self.open.clone(),
            self.session_id.clone(),
            request_id.to_owned(),
            request,
            pending.suggested_pattern.clone(),
        ));
    }

    /// The context in use against the profile's window, the session's cost so far when the
    /// profile has prices, and the turn's tokens and cache hits under `_meta.cwcode`.
    async fn usage(&self, turn: u32, usage: &Usage) -> SessionUpdate {
        let window = self
            .profiles
            .iter()
            .find(|profile| profile.name == self.profile)
            .and_then(|profile| profile.context_window)
            .unwrap_or(0);
        let mut update = UsageUpdate::new(self.translator.context_used(), window);
        if let Ok(report) = self.daemon.cost(&self.session_id).await
            && report.prices.is_some()
        {
            update = update.cost(Cost::new(report.total, "USD"));
        }
        let hit_ratio = if usage.prompt_tokens == 0 {
            0.0
        } else {
            usage.cached_tokens as f64 / usage.prompt_tokens as f64
        };
        let meta = json!({
            "cwcode": {
                "turn": turn,
                "promptTokens": usage.prompt_tokens,
                "completionTokens": usage.completion_tokens,
                "cachedTokens": usage.cached_tokens,
                "cacheHitRatio": hit_ratio,
            }
        });
        if let serde_json::Value::Object(meta) = meta {
            update = update.meta(meta);
        }
        SessionUpdate::UsageUpdate(update)
    }
}
