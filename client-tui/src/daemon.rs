//! The one task that talks to the daemon. The interface never awaits the daemon: it sends
//! [`Request`]s down a channel and reads [`Reply`]s (answers and session events) from another.
//! This task owns the client and the subscription, runs calls concurrently so a slow one holds
//! up nothing, resumes a dropped event stream from the last `seq` it delivered, and reconnects
//! after the daemon went away (a restart, an upgrade) without losing or repeating an event.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use cwcode_protocol::client::EventStream;
use cwcode_protocol::methods::{MemoryDelete, MemoryList, MemoryRecall, SessionEvents};
use cwcode_protocol::{
    ApprovalRespondParams, CacheReport, CheckpointInfo, Client, ClientError, ConnectOptions,
    CostReport, CreateSessionParams, Event, EventKind, EventsParams, GoalStartParams, GoalStatus,
    MemoryDeleteParams, MemoryListParams, MemoryNote, MemoryRecallParams, Mode, ProfileInfo,
    RecalledNote, RewindResult, SessionInfo, SetKeyParams,
};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use crate::mentions;
use crate::shell::{self, ShellRun};

/// How often a lost daemon is looked for again.
const RECONNECT_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub enum Request {
    ListSessions,
    /// A line about each session for the picker: ids and the `seq` of their newest event.
    Previews(Vec<(String, u64)>),
    /// Opens a session and subscribes to its whole journal; replaces the current one.
    Open(Open),
    Send {
        session_id: String,
        text: String,
        /// Where `@path` mentions in the text are read from.
        workspace: String,
    },
    /// `!command`, run in `cwd`.
    Shell {
        command: String,
        cwd: String,
    },
    Cancel {
        session_id: String,
    },
    SetMode {
        session_id: String,
        mode: Mode,
    },
    SetProfile {
        session_id: String,
        profile: String,
    },
    Respond(ApprovalRespondParams),
    ListProfiles,
    Checkpoints {
        session_id: String,
    },
    Rewind {
        session_id: String,
        turn: u32,
    },
    UndoRewind {
        session_id: String,
    },
    Compact {
        session_id: String,
    },
    Cache {
        session_id: String,
    },
    Cost {
        session_id: String,
    },
    GoalAdd {
        session_id: String,
        text: String,
    },
    GoalStart(GoalStartParams),
    GoalStop {
        session_id: String,
    },
    GoalStatus {
        session_id: String,
        call: GoalCall,
    },
    /// `/memory`: the notes of `workspace`, newest first.
    MemoryList {
        workspace: String,
    },
    /// `/memory QUERY`: ranked with `workspace`'s notes first.
    MemoryRecall {
        query: String,
        workspace: String,
    },
    MemoryDelete {
        id: i64,
    },
    /// The first run's key, stored by the daemon in config.json (its Debug hides the key).
    SetKey(SetKeyParams),
}

/// What a goal call was for: every answer is the loop's status, shown according to the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoalCall {
    /// Asked once the journal is replayed, to set the banner exactly; nothing is shown.
    Sync,
    Add,
    Start,
    Stop,
    Show,
}

#[derive(Debug, Clone)]
pub enum Open {
    /// Creates the session and sends its first prompt once subscribed, so the prompt is in
    /// the journal the transcript replays.
    New {
        params: CreateSessionParams,
        prompt: String,
    },
    Existing(String),
}

/// Which request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    ListSessions,
    Open,
    Send,
    Cancel,
    SetMode,
    SetProfile,
    Respond { request_id: String },
    ListProfiles,
    Checkpoints,
    Rewind,
    UndoRewind,
    Compact,
    Cache,
    Cost,
    Goal,
    Memory,
    SetKey,
}

#[derive(Debug, Clone)]
pub enum Reply {
    Connected,
    /// The first connection failed: nothing can be done.
    ConnectFailed(String),
    Lost(String),
    /// Connected again; `restarted` when the daemon had died and this client started it.
    Reconnected {
        restarted: bool,
    },
    Sessions(Vec<SessionInfo>),
    /// A `!command` ended.
    Shell(ShellRun),
    /// Session ids and what the picker shows under them.
    Previews(Vec<(String, String)>),
    /// The session is open; its events follow, starting with the journal's first.
    Attached(SessionInfo),
    Event(Event),
    ModeSet(SessionInfo),
    ProfileSet(SessionInfo),
    Cancelled(bool),
    Profiles(Vec<ProfileInfo>),
    /// Oldest first, as the daemon lists them.
    Checkpoints(Vec<CheckpointInfo>),
    Rewound(RewindResult),
    RewindUndone(RewindResult),
    Cache(CacheReport),
    Cost(CostReport),
    /// The goal loop's status, with the session it is of: a session switch may overtake it.
    Goal {
        session_id: String,
        call: GoalCall,
        status: GoalStatus,
    },
    Failed {
        action: Action,
        message: String,
        code: Option<i32>,
    },
    /// The workspace's notes, newest first.
    MemoryNotes(Vec<MemoryNote>),
    MemoryRecalled {
        query: String,
        notes: Vec<RecalledNote>,
    },
    MemoryDeleted {
        id: i64,
        deleted: bool,
    },
    /// The key is stored for this profile.
    KeyStored {
        profile: String,
    },
    /// Something worth a line in the transcript.
    Notice(String),
}

/// Starts the task; it connects (starting the daemon if needed) and then serves requests.
pub fn spawn(options: ConnectOptions) -> (UnboundedSender<Request>, UnboundedReceiver<Reply>) {
    let (requests_tx, requests_rx) = mpsc::unbounded_channel();
    let (replies_tx, replies_rx) = mpsc::unbounded_channel();
    tokio::spawn(run(options, requests_rx, replies_tx));
    (requests_tx, replies_rx)
}

type Call = Pin<Box<dyn Future<Output = Done> + Send>>;

enum Done {
    Connected(Result<Client, ClientError>),
    Reconnected(Reconnect),
    /// A call whose effect the session's events report.
    Nothing,
    Reply(Reply),
    Attached(SessionInfo, EventStream),
    Resubscribed(String, EventStream),
    Failed(Action, ClientError),
}

/// How one attempt to reconnect went.
enum Reconnect {
    Connected {
        client: Client,
        restarted: bool,
    },
    /// Nobody answers and the socket is gone: the daemon was stopped on purpose.
    Stopped,
    /// The daemon had died and could not be started again, for this reason.
    RestartFailed(String),
    /// Not yet (the daemon is busy, or starting): the next tick tries again.
    NotYet,
}

struct Subscription {
    session_id: String,
    /// `None` while it is being resumed.
    stream: Option<EventStream>,
    last_seq: u64,
}

struct Backend {
    options: ConnectOptions,
    client: Option<Arc<Client>>,
    /// Requests made before the first connection, served once it is up.
    waiting: Vec<Request>,
    connected_once: bool,
    reconnecting: bool,
    /// What the user was last told about why reconnecting does not work yet, so that a retry
    /// every second does not say it every second.
    told_why: Option<String>,
    subscription: Option<Subscription>,
    calls: FuturesUnordered<Call>,
    replies: UnboundedSender<Reply>,
}

async fn run(
    options: ConnectOptions,
    mut requests: UnboundedReceiver<Request>,
    replies: UnboundedSender<Reply>,
) {
    let mut backend = Backend {
        options,
        client: None,
        waiting: Vec::new(),
        connected_once: false,
        reconnecting: false,
        told_why: None,
        subscription: None,
        calls: FuturesUnordered::new(),
        replies,
    };
    let first = backend.options.clone();
    backend.calls.push(Box::pin(async move {
        Done::Connected(Client::connect(&first).await)
    }));
    let mut retry = tokio::time::interval(RECONNECT_EVERY);
    loop {
        tokio::select! {
            request = requests.recv() => match request {
                Some(request) => backend.request(request),
                // The interface is gone: dropping the client closes the connection.
                None => return,
            },
            Some(done) = backend.calls.next(), if !backend.calls.is_empty() => backend.done(done),
            event = next_event(&mut backend.subscription) => backend.event(event),
            _ = retry.tick(), if backend.lost() && !backend.reconnecting => backend.reconnect(),
        }
    }
}

/// The next event of the current subscription; pending while there is none.
async fn next_event(subscription: &mut Option<Subscription>) -> Option<Result<Event, ClientError>> {
    match subscription.as_mut().and_then(|s| s.stream.as_mut()) {
        Some(stream) => stream.next().await,
        None => std::future::pending().await,
    }
}

impl Backend {
    fn reply(&self, reply: Reply) {
        // The interface may be shutting down; then nobody needs the answer.
        let _ = self.replies.send(reply);
    }

    fn lost(&self) -> bool {
        self.connected_once && self.client.is_none()
    }

    fn request(&mut self, request: Request) {
        let Some(client) = self.client.clone() else {
            if self.connected_once {
                let action = action_of(&request);
                self.reply(Reply::Failed {
                    action,
                    message: "not connected to cwcoded (trying to reconnect)".to_owned(),
                    code: None,
                });
            } else {
                self.waiting.push(request);
            }
            return;
        };
        let action = action_of(&request);
        self.calls.push(Box::pin(async move {
            match perform(&client, request).await {
                Ok(done) => done,
                Err(error) => Done::Failed(action, error),
            }
        }));
    }

    fn done(&mut self, done: Done) {
        match done {
            Done::Connected(Ok(client)) => {
                self.client = Some(Arc::new(client));
                self.connected_once = true;
                self.reply(Reply::Connected);
                for request in std::mem::take(&mut self.waiting) {
                    self.request(request);
                }
            }
            Done::Connected(Err(error)) => self.reply(Reply::ConnectFailed(describe(&error))),
            Done::Reconnected(Reconnect::NotYet) => self.reconnecting = false,
            Done::Reconnected(Reconnect::Stopped) => {
                self.reconnecting = false;
                self.tell_why(
                    "cwcoded was stopped: `cwcode-cli daemon start` brings it back, and this window reconnects by itself"
                        .to_owned(),
                );
            }
            Done::Reconnected(Reconnect::RestartFailed(reason)) => {
                self.reconnecting = false;
                self.tell_why(format!(
                    "cwcoded stopped unexpectedly and could not be started again: {reason}"
                ));
            }
            Done::Reconnected(Reconnect::Connected { client, restarted }) => {
                self.reconnecting = false;
                self.told_why = None;
                let client = Arc::new(client);
                self.client = Some(Arc::clone(&client));
                self.reply(Reply::Reconnected { restarted });
                if let Some(subscription) = &self.subscription {
                    self.resubscribe(subscription.session_id.clone(), subscription.last_seq);
                }
            }
            Done::Nothing => {}
            Done::Reply(reply) => self.reply(reply),
            Done::Attached(info, stream) => {
                self.subscription = Some(Subscription {
                    session_id: info.id.clone(),
                    stream: Some(stream),
                    last_seq: 0,
                });
                self.reply(Reply::Attached(info));
            }
            Done::Resubscribed(session_id, stream) => {
                if let Some(subscription) = &mut self.subscription
                    && subscription.session_id == session_id
                {
                    subscription.stream = Some(stream);
                }
            }
            Done::Failed(action, error) => {
                if matches!(error, ClientError::Transport(_)) {
                    self.connection_lost(describe(&error));
                }
                self.reply(Reply::Failed {
                    action,
                    message: describe(&error),
                    code: error.rpc_code(),
                });
            }
        }
    }

    fn event(&mut self, event: Option<Result<Event, ClientError>>) {
        let Some(subscription) = &mut self.subscription else {
            return;
        };
        match event {
            None => self.connection_lost("the connection to cwcoded closed".to_owned()),
            Some(Err(error)) => {
                // One event this build cannot read (a newer daemon?) should not end the session.
                self.reply(Reply::Notice(format!("skipped an event: {error}")));
            }
            Some(Ok(event)) => {
                // The stream resumes by itself after a drop for lag: one that ends here is over
                // (the session was deleted).
                if let EventKind::SubscriptionEnded { reason, .. } = &event.kind {
                    subscription.stream = None;
                    self.reply(Reply::Notice(format!("the event stream ended: {reason}")));
                    return;
                }
                subscription.last_seq = event.seq;
                self.reply(Reply::Event(event));
            }
        }
    }

    fn connection_lost(&mut self, reason: String) {
        if self.client.take().is_none() {
            return;
        }
        if let Some(subscription) = &mut self.subscription {
            subscription.stream = None;
        }
        self.reply(Reply::Lost(reason));
    }

    /// Says `why` once, until it changes or the connection is back.
    fn tell_why(&mut self, why: String) {
        if self.told_why.as_ref() != Some(&why) {
            self.reply(Reply::Notice(why.clone()));
            self.told_why = Some(why);
        }
    }

    fn reconnect(&mut self) {
        self.reconnecting = true;
        let options = self.options.clone();
        self.calls.push(Box::pin(async move {
            Done::Reconnected(reconnect(options).await)
        }));
    }

    fn resubscribe(&mut self, session_id: String, since: u64) {
        let Some(client) = self.client.clone() else {
            return;
        };
        self.calls.push(Box::pin(async move {
            match client.subscribe(&session_id, Some(since)).await {
                Ok(stream) => Done::Resubscribed(session_id, stream),
                Err(error) => Done::Failed(Action::Open, error),
            }
        }));
    }
}

/// One attempt to reach the daemon again. A daemon that died (killed, crashed) leaves its
/// socket and pid files behind and is started again, as on launch; one stopped on purpose
/// (`cwcode-cli daemon stop`, SIGTERM) removes them as it exits, and starting it here would
/// undo that stop. While it drains, its socket refuses but its process is still there.
async fn reconnect(mut options: ConnectOptions) -> Reconnect {
    options.autostart = false;
    match Client::connect(&options).await {
        Ok(client) => Reconnect::Connected {
            client,
            restarted: false,
        },
        Err(ClientError::Connect { source, .. })
            if source.kind() == std::io::ErrorKind::ConnectionRefused =>
        {
            if daemon_process_alive(&options).await {
                return Reconnect::NotYet;
            }
            options.autostart = true;
            match Client::connect(&options).await {
                Ok(client) => Reconnect::Connected {
                    client,
                    restarted: true,
                },
                Err(error) => Reconnect::RestartFailed(describe(&error)),
            }
        }
        Err(ClientError::Connect { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Reconnect::Stopped
        }
        Err(_) => Reconnect::NotYet,
    }
}

/// Whether the process the daemon's pid file names still exists (a daemon shutting down).
async fn daemon_process_alive(options: &ConnectOptions) -> bool {
    let Ok(text) = tokio::fs::read_to_string(options.paths.pid_file()).await else {
        return false;
    };
    let Ok(pid) = text.trim().parse::<u32>() else {
        return false;
    };
    tokio::fs::try_exists(format!("/proc/{pid}"))
        .await
        .unwrap_or(false)
}

fn action_of(request: &Request) -> Action {
    match request {
        Request::ListSessions | Request::Previews(_) => Action::ListSessions,
        Request::Open(_) => Action::Open,
        Request::Send { .. } | Request::Shell { .. } => Action::Send,
        Request::Cancel { .. } => Action::Cancel,
        Request::SetMode { .. } => Action::SetMode,
        Request::SetProfile { .. } => Action::SetProfile,
        Request::Respond(params) => Action::Respond {
            request_id: params.request_id.clone(),
        },
        Request::ListProfiles => Action::ListProfiles,
        Request::Checkpoints { .. } => Action::Checkpoints,
        Request::Rewind { .. } => Action::Rewind,
        Request::UndoRewind { .. } => Action::UndoRewind,
        Request::Compact { .. } => Action::Compact,
        Request::Cache { .. } => Action::Cache,
        Request::Cost { .. } => Action::Cost,
        Request::GoalAdd { .. }
        | Request::GoalStart(_)
        | Request::GoalStop { .. }
        | Request::GoalStatus { .. } => Action::Goal,
        Request::MemoryList { .. }
        | Request::MemoryRecall { .. }
        | Request::MemoryDelete { .. } => Action::Memory,
        Request::SetKey(_) => Action::SetKey,
    }
}

async fn perform(client: &Client, request: Request) -> Result<Done, ClientError> {
    let reply = match request {
        Request::ListSessions => Reply::Sessions(client.list_sessions().await?),
        Request::Previews(sessions) => Reply::Previews(previews(client, sessions).await),
        Request::Open(open) => {
            let (info, prompt) = match open {
                Open::New { params, prompt } => {
                    let prompt = with_mentions(prompt, params.cwd.clone()).await;
                    (client.create_session(&params).await?, Some(prompt))
                }
                Open::Existing(id) => (client.get_session(&id).await?, None),
            };
            // The whole journal, then live events: the transcript is complete on attach.
            let stream = client.subscribe(&info.id, Some(0)).await?;
            if let Some(prompt) = prompt {
                client.send(&info.id, &prompt).await?;
            }
            return Ok(Done::Attached(info, stream));
        }
        Request::Send {
            session_id,
            text,
            workspace,
        } => {
            let text = with_mentions(text, workspace).await;
            // The events say what became of it (started or queued).
            client.send(&session_id, &text).await?;
            return Ok(Done::Nothing);
        }
        Request::Shell { command, cwd } => {
            Reply::Shell(shell::run(&command, &cwd, shell::TIME_LIMIT).await)
        }
        Request::Cancel { session_id } => {
            Reply::Cancelled(client.cancel(&session_id).await?.cancelled)
        }
        Request::SetMode { session_id, mode } => {
            Reply::ModeSet(client.set_mode(&session_id, mode).await?)
        }
        Request::SetProfile {
            session_id,
            profile,
        } => Reply::ProfileSet(client.set_profile(&session_id, &profile).await?),
        Request::Respond(params) => {
            // ApprovalResolved reaches every attached client, this one included.
            client.respond_approval(&params).await?;
            return Ok(Done::Nothing);
        }
        Request::ListProfiles => Reply::Profiles(client.list_profiles().await?),
        Request::Checkpoints { session_id } => {
            Reply::Checkpoints(client.checkpoints(&session_id).await?)
        }
        Request::Rewind { session_id, turn } => {
            Reply::Rewound(client.rewind(&session_id, turn).await?)
        }
        Request::UndoRewind { session_id } => {
            Reply::RewindUndone(client.undo_rewind(&session_id).await?)
        }
        Request::Compact { session_id } => {
            // Queued behind any prompts; the `compacted` (or `error`) event tells the outcome.
            client.compact(&session_id).await?;
            return Ok(Done::Nothing);
        }
        Request::Cache { session_id } => Reply::Cache(client.cache(&session_id).await?),
        Request::Cost { session_id } => Reply::Cost(client.cost(&session_id).await?),
        Request::GoalAdd { session_id, text } => {
            let status = client.goal_add(&session_id, &text).await?;
            goal_reply(session_id, GoalCall::Add, status)
        }
        Request::GoalStart(params) => {
            let status = client.goal_start(&params).await?;
            goal_reply(params.session_id, GoalCall::Start, status)
        }
        Request::GoalStop { session_id } => {
            let status = client.goal_stop(&session_id).await?;
            goal_reply(session_id, GoalCall::Stop, status)
        }
        Request::GoalStatus { session_id, call } => {
            let status = client.goal_status(&session_id).await?;
            goal_reply(session_id, call, status)
        }
        Request::MemoryList { workspace } => {
            let params = MemoryListParams {
                workspace: Some(workspace),
                limit: Some(MEMORY_LISTED),
            };
            Reply::MemoryNotes(client.call::<MemoryList>(&params).await?.notes)
        }
        Request::MemoryRecall { query, workspace } => {
            let params = MemoryRecallParams {
                query: query.clone(),
                limit: Some(MEMORY_RECALLED),
                workspace: Some(workspace),
            };
            let notes = client.call::<MemoryRecall>(&params).await?.notes;
            Reply::MemoryRecalled { query, notes }
        }
        Request::SetKey(params) => {
            client.set_key(&params.profile, &params.key).await?;
            Reply::KeyStored {
                profile: params.profile,
            }
        }
        Request::MemoryDelete { id } => {
            let deleted = client
                .call::<MemoryDelete>(&MemoryDeleteParams { id })
                .await?;
            Reply::MemoryDeleted {
                id,
                deleted: deleted.deleted,
            }
        }
    };
    Ok(Done::Reply(reply))
}

/// Notes `/memory` lists at most: a screenful or two; `cwcode-cli memory ls` has the rest.
const MEMORY_LISTED: u32 = 50;
/// Notes `/memory QUERY` shows at most (the daemon's own limit).
const MEMORY_RECALLED: u32 = 20;

/// The prompt with the files it mentions attached, read off the async workers.
async fn with_mentions(prompt: String, workspace: String) -> String {
    let fallback = prompt.clone();
    tokio::task::spawn_blocking(move || mentions::attach(&prompt, Path::new(&workspace)))
        .await
        .unwrap_or(fallback)
}

/// Sessions the picker asks a preview of at most; the rest are shown without one.
pub const PREVIEWS_AT_MOST: usize = 30;
/// The newest events a preview is looked for in.
const PREVIEW_EVENTS: u32 = 60;

/// Each session's last answer (or, before one, its last prompt), read from the end of its
/// journal; a session whose events cannot be read goes without.
async fn previews(client: &Client, sessions: Vec<(String, u64)>) -> Vec<(String, String)> {
    let reads =
        sessions
            .into_iter()
            .take(PREVIEWS_AT_MOST)
            .map(|(session_id, last_seq)| async move {
                let params = EventsParams {
                    session_id: session_id.clone(),
                    since: last_seq.saturating_sub(u64::from(PREVIEW_EVENTS)),
                    limit: Some(PREVIEW_EVENTS),
                };
                let page = client.call::<SessionEvents>(&params).await.ok()?;
                let line = preview_of(&page.events)?;
                Some((session_id, line))
            });
    futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The first line of the newest answer with text, else of the newest prompt.
pub fn preview_of(events: &[Event]) -> Option<String> {
    let first_line = |text: &str| {
        let line = text.trim().lines().next().unwrap_or_default().trim();
        (!line.is_empty()).then(|| line.to_owned())
    };
    let answer = events.iter().rev().find_map(|event| match &event.kind {
        EventKind::AssistantMessage { content, .. } => first_line(content),
        _ => None,
    });
    answer.or_else(|| {
        events.iter().rev().find_map(|event| match &event.kind {
            EventKind::TurnStarted { prompt, .. } | EventKind::PromptQueued { prompt, .. } => {
                first_line(prompt).map(|line| format!("› {line}"))
            }
            _ => None,
        })
    })
}

fn goal_reply(session_id: String, call: GoalCall, status: GoalStatus) -> Reply {
    Reply::Goal {
        session_id,
        call,
        status,
    }
}

/// The daemon's own words for an RPC error (they say what to fix); the full text otherwise.
pub fn describe(error: &ClientError) -> String {
    match error {
        ClientError::Rpc { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
